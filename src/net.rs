//! Byte streams and listeners, simulated or real.
//!
//! The client, the NAT and the servers under test speak over these, so the
//! same code runs on turmoil's simulated TCP and, in a live run, on real
//! sockets on 127.0.0.1.

use std::io;
use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncWrite};

/// A bidirectional byte stream.
pub trait Connection: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Connection for T {}

/// Where a server accepts connections: turmoil's simulated listener in a
/// simulation, a real TCP listener under `mcpsim serve`.
pub struct Listener(Kind);

enum Kind {
    Sim(turmoil::net::TcpListener),
    Tcp(tokio::net::TcpListener),
}

impl From<turmoil::net::TcpListener> for Listener {
    fn from(l: turmoil::net::TcpListener) -> Self {
        Listener(Kind::Sim(l))
    }
}

impl From<tokio::net::TcpListener> for Listener {
    fn from(l: tokio::net::TcpListener) -> Self {
        Listener(Kind::Tcp(l))
    }
}

impl Listener {
    /// The next connection, and its peer's address.
    pub async fn accept(&self) -> io::Result<(Box<dyn Connection>, SocketAddr)> {
        match &self.0 {
            Kind::Sim(l) => l.accept().await.map(|(s, a)| (Box::new(s) as Box<dyn Connection>, a)),
            Kind::Tcp(l) => {
                let (s, a) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok((Box::new(s), a))
            }
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.0 {
            Kind::Sim(l) => l.local_addr(),
            Kind::Tcp(l) => l.local_addr(),
        }
    }
}
