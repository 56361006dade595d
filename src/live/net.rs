//! Real sockets on 127.0.0.1 for a live run: the NAT's (a proxy per client,
//! in front of the server process's port) and the clients' dialer.

use crate::client::dial::{Dialed, Dialer};
use crate::world::nat::NatNet;
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use tokio::net::{TcpListener, TcpStream};

/// A NAT on real TCP: it listens where its client dials and connects to the
/// server process's port.
pub struct TcpNat {
    /// Bound before the run starts, so the client knows the port; taken by `listen`.
    listener: RefCell<Option<TcpListener>>,
    server_port: u16,
}

impl TcpNat {
    /// A NAT in front of `server_port`, listening on a fresh port; returns
    /// it and that port.
    pub async fn bind(server_port: u16) -> io::Result<(Self, u16)> {
        let l = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = l.local_addr()?.port();
        Ok((TcpNat { listener: RefCell::new(Some(l)), server_port }, port))
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
