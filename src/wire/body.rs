//! A streaming HTTP body fed by a channel (the server side of an SSE uplink).

use bytes::Bytes;
use hyper::body::{Body, Frame};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// A body whose chunks arrive on an unbounded channel; it ends when every
/// sender is dropped, or at an empty chunk ([`ChannelBody::END`]). When hyper drops it (the connection died), senders see
/// `is_closed()`: that is how the server learns an uplink is gone.
pub struct ChannelBody {
    rx: mpsc::UnboundedReceiver<Bytes>,
}

impl ChannelBody {
    /// Send this to end the body while senders remain.
    pub const END: Bytes = Bytes::new();

    /// A sender and the body it feeds.
    pub fn new() -> (mpsc::UnboundedSender<Bytes>, ChannelBody) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, ChannelBody { rx })
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(b)) if b.is_empty() => {
                self.rx.close();
                Poll::Ready(None)
            }
            other => other.map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }
}
