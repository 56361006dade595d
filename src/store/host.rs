//! The simulated store host: a single-threaded RESP server over
//! [`Db`](super::Db), as Redis is. Each connection is served in the order
//! its commands arrive; the hosts' order in a tick is turmoil's, so a run
//! is deterministic.

use super::Db;
use crate::wire::resp::{self, Frame};
use std::cell::RefCell;
use std::rc::Rc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves RESP on `listener` until the host stops. The data lives as long
/// as this call: a store host that restarts starts empty (Redis without
/// persistence).
pub async fn serve(listener: crate::net::Listener) {
    let db = Rc::new(RefCell::new(Db::default()));
    SIMULATED.with(|s| *s.borrow_mut() = Rc::downgrade(&db));
    loop {
        let Ok((stream, _peer)) = listener.accept().await else { continue };
        tokio::task::spawn_local(connection(stream, db.clone()));
    }
}

thread_local! {
    /// The data of the simulated store serving on this thread (a simulation
    /// runs on one thread): what [`peek`] reads.
    static SIMULATED: RefCell<std::rc::Weak<RefCell<Db>>> = const { RefCell::new(std::rc::Weak::new()) };
}

/// Reads the simulated store's data as it is now, without a command: for
/// the early end's view of what a replica's next poll would find
/// ([`crate::quiet`]). `None` when no simulated store serves on this thread.
pub(crate) fn peek<R>(f: impl FnOnce(&Db) -> R) -> Option<R> {
    SIMULATED.with(|s| s.borrow().upgrade().map(|db| f(&db.borrow())))
}

async fn connection(mut stream: Box<dyn crate::net::Connection>, db: Rc<RefCell<Db>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Every whole command read so far, answered in order.
        let mut out = Vec::new();
        loop {
            match resp::parse(&buf) {
                Ok(Some((frame, used))) => {
                    buf.drain(..used);
                    let reply = match frame.into_args() {
                        Ok(args) => db.borrow_mut().apply(super::now_us(), &args),
                        Err(e) => Frame::Error(format!("ERR Protocol error: {}", e.0)),
                    };
                    reply.encode(&mut out);
                }
                Ok(None) => break,
                Err(e) => {
                    // Redis answers a protocol error, then closes.
                    Frame::Error(format!("ERR Protocol error: {}", e.0)).encode(&mut out);
                    let _ = stream.write_all(&out).await;
                    return;
                }
            }
        }
        if !out.is_empty() && stream.write_all(&out).await.is_err() {
            return;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
