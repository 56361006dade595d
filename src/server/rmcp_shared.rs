//! What both rmcp services share (`super::rmcp`, stateful, and
//! `super::rmcp_stateless`): request ids in our words, and SSE keep-alive on
//! the simulated clock.

use crate::wire::jsonrpc::RpcId;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt};
use rmcp::model::NumberOrString;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// An rmcp request id in our words.
pub(super) fn rpc_id(id: &NumberOrString) -> RpcId {
    match id {
        NumberOrString::Number(n) => RpcId::Num(*n),
        NumberOrString::String(s) => RpcId::Str(s.to_string()),
    }
}

/// SSE keep-alive on the simulated clock: a `:` comment after `every` of silence.
/// (`tokio::time::Instant::now()` inside a turmoil host reads the simulated
/// clock; rmcp's own keep-alive reads `std::time::Instant`, which is why it is
/// replaced.)
/// rmcp's SSE body yields whole events per frame, so a ping never splits one.
struct KeepAlive<B> {
    inner: B,
    every: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl<B: hyper::body::Body<Data = Bytes> + Unpin> hyper::body::Body for KeepAlive<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(f) => {
                this.sleep.as_mut().reset(tokio::time::Instant::now() + this.every);
                Poll::Ready(f)
            }
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.sleep.as_mut().reset(tokio::time::Instant::now() + this.every);
                    Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(b":\n\n")))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

/// rmcp's response, its SSE body (if it is one) pinged after `every` of
/// silence on the simulated clock.
pub(super) fn keep_alive(
    resp: hyper::Response<BoxBody<Bytes, Infallible>>,
    every: Duration,
) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let sse = resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        return resp;
    }
    resp.map(|b| KeepAlive { inner: b, every, sleep: Box::pin(tokio::time::sleep(every)) }.boxed())
}
