//! Real sockets on 127.0.0.1 for a live run: the NAT's (a proxy per client,
//! in front of the server process's port) and the clients' dialer.

use crate::client::dial::{Dialed, Dialer};
use crate::world::nat::NatNet;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use tokio::net::{TcpListener, TcpStream};

/// Closed while server processes restart: a NAT's new connection to the
/// server waits until every restarted process is ready again (and, in a
/// deployment, back in HAProxy's rotation). In simulation a restart takes
/// no time, so no connection ever meets a server still starting; live, a
/// process takes real time to start, and a connection made meanwhile would
/// be refused, or balanced to another replica, where the simulation's is not.
#[derive(Default)]
pub struct RestartGate {
    closed: Cell<bool>,
    opened: tokio::sync::Notify,
}

impl RestartGate {
    /// Restarts begin: new connections wait.
    pub fn close(&self) {
        self.closed.set(true);
    }

    /// Every restarted process is back: waiting connections go on.
    pub fn open(&self) {
        self.closed.set(false);
        self.opened.notify_waiters();
    }

    /// Returns once the gate is open (at once when it is).
    pub async fn passed(&self) {
        while self.closed.get() {
            self.opened.notified().await;
        }
    }
}

/// A NAT on real TCP: it listens where its client dials and connects to the
/// server process's port.
pub struct TcpNat {
    /// Bound before the run starts, so the client knows the port; taken by `listen`.
    listener: RefCell<Option<TcpListener>>,
    server_port: u16,
    /// Its connections to the server wait while server processes restart.
    gate: Rc<RestartGate>,
}

impl TcpNat {
    /// A NAT in front of `server_port`, listening on a fresh port, whose
    /// connections to the server wait at `gate`; returns it and that port.
    pub async fn bind(server_port: u16, gate: Rc<RestartGate>) -> io::Result<(Self, u16)> {
        let l = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = l.local_addr()?.port();
        Ok((TcpNat { listener: RefCell::new(Some(l)), server_port, gate }, port))
    }
}

impl NatNet for TcpNat {
    type Listener = TcpListener;
    type Stream = TcpStream;
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;

    async fn listen(&self) -> io::Result<TcpListener> {
        self.listener.borrow_mut().take().ok_or_else(|| io::Error::other("the NAT listens once"))
    }
    async fn accept(l: &TcpListener) -> io::Result<(TcpStream, u16)> {
        let (s, a) = l.accept().await?;
        let _ = s.set_nodelay(true);
        Ok((s, a.port()))
    }
    async fn settled(&self) {
        self.gate.passed().await;
    }
    async fn connect(&self) -> io::Result<TcpStream> {
        let s = TcpStream::connect(("127.0.0.1", self.server_port)).await?;
        let _ = s.set_nodelay(true);
        Ok(s)
    }
    fn local_port(s: &TcpStream) -> u16 {
        s.local_addr().map(|a| a.port()).unwrap_or(0)
    }
    fn split(s: TcpStream) -> (Self::Read, Self::Write) {
        s.into_split()
    }
    /// A reset is a real RST: with a zero linger, closing discards unsent
    /// data and aborts the connection.
    fn abortive(r: &Self::Read, w: &Self::Write) {
        let _ = r.as_ref().set_zero_linger();
        let _ = w.as_ref().set_zero_linger();
    }
}

/// Dials the client's NAT on 127.0.0.1.
pub struct TcpDialer {
    /// The NAT's port.
    pub port: u16,
    /// The server process's address, `127.0.0.1:PORT`.
    pub authority: String,
}

impl Dialer for TcpDialer {
    fn dial(&self) -> Pin<Box<dyn Future<Output = io::Result<Dialed>> + '_>> {
        Box::pin(async move {
            let s = TcpStream::connect(("127.0.0.1", self.port)).await?;
            let _ = s.set_nodelay(true);
            let local_port = s.local_addr().map(|a| a.port()).unwrap_or(0);
            Ok(Dialed { stream: Box::new(s), local_port })
        })
    }
    fn authority(&self) -> &str {
        &self.authority
    }
}

#[cfg(test)]
mod tests {
    use super::RestartGate;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn poll(f: std::pin::Pin<&mut impl Future<Output = ()>>) -> Poll<()> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A connection passes an open gate at once, waits at a closed one, and
    /// goes on when it opens.
    #[test]
    fn the_restart_gate_holds_connections_while_closed() {
        let gate = RestartGate::default();
        assert!(poll(pin!(gate.passed())).is_ready());
        gate.close();
        let mut waiting = pin!(gate.passed());
        assert!(poll(waiting.as_mut()).is_pending());
        assert!(poll(waiting.as_mut()).is_pending());
        gate.open();
        assert!(poll(waiting.as_mut()).is_ready());
        assert!(poll(pin!(gate.passed())).is_ready());
    }
}
