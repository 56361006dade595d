//! How a client reaches the server: the one place it opens a connection
//! and speaks HTTP/1 over it. In simulation the [`Dialer`] is turmoil's TCP
//! to the client's NAT host; a live run can hand the same client logic a
//! dialer over real sockets.

pub use crate::net::Connection;
use std::future::Future;
use std::io;
use std::pin::Pin;

/// A connection just opened, and its local port (which links it to a NAT mapping).
pub struct Dialed {
    /// The connection.
    pub stream: Box<dyn Connection>,
    /// Its local port: the NAT records it as the mapping's `down_port`.
    pub local_port: u16,
}

/// Opens connections to the server.
pub trait Dialer {
    /// Opens one connection.
    fn dial(&self) -> Pin<Box<dyn Future<Output = io::Result<Dialed>> + '_>>;

    /// The server's authority, for the `Host` header (the NAT is transparent:
    /// the client addresses the server, not the NAT).
    fn authority(&self) -> &str {
        "server"
    }
}

/// turmoil's simulated TCP, to `host:port` (the client's NAT host).
pub struct SimDialer {
    /// The host to connect to: the client's NAT.
    pub host: String,
    /// The port it listens on.
    pub port: u16,
}

impl Dialer for SimDialer {
    fn dial(&self) -> Pin<Box<dyn Future<Output = io::Result<Dialed>> + '_>> {
        Box::pin(async move {
            let s = crate::quiet::connecting(turmoil::net::TcpStream::connect((self.host.as_str(), self.port))).await?;
            let local_port = s.local_addr().map(|a| a.port()).unwrap_or(0);
            Ok(Dialed { stream: Box::new(s), local_port })
        })
    }
}
