//! The balancer host of a deployment with more than one replica
//! (docs/replicas.md): it takes the `server` host's place, so that the NATs
//! and the clients are the same as in a single-server world, and sends each
//! connection to one of the `replica-N` hosts.
//!
//! It mirrors HAProxy in HTTP mode with `option http-server-close`: each
//! request is balanced on its own and gets its own connection to its replica
//! (our clients open a connection per request, so a connection is a request;
//! an SSE response keeps its connection). Bytes are copied both ways; an
//! orderly close travels as an orderly close, and an error on either side
//! drops both (the replica sees its connection die, as it would behind a real
//! balancer). Every choice is recorded ([`What::Routed`]), so that a report
//! and a check can say which replica served which connection.

use crate::scenario::Routing;
use crate::trace::{Recorder, What};
use std::cell::{Cell, RefCell};
use std::io;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const PORT: u16 = crate::client::PORT;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The name of replica `n` (from 1) as a host.
pub(crate) fn replica_host(n: u32) -> String {
    format!("replica-{n}")
}

/// How the balancer picks a replica: the routing rule and what it counts.
pub(crate) struct Picker {
    replicas: u32,
    routing: Routing,
    /// Round-robin: the replica the next request goes to (from 1).
    next: Cell<u32>,
    /// Least-connections: open connections per replica.
    open: RefCell<Vec<u32>>,
}

impl Picker {
    pub(crate) fn new(replicas: u32, routing: Routing) -> Self {
        Self { replicas, routing, next: Cell::new(1), open: RefCell::new(vec![0; replicas as usize]) }
    }

    /// The replica (from 1) a new connection from `client_addr` goes to.
    pub(crate) fn pick(&self, client_addr: IpAddr) -> u32 {
        match self.routing {
            Routing::RoundRobin => {
                let n = self.next.get();
                self.next.set(n % self.replicas + 1);
                n
            }
            Routing::LeastConnections => {
                let open = self.open.borrow();
                // The fewest open connections; ties go to the lowest number.
                (1..=self.replicas).min_by_key(|&r| (open[r as usize - 1], r)).unwrap_or(1)
            }
            Routing::Source => (address_hash(client_addr) % u64::from(self.replicas)) as u32 + 1,
        }
    }

    fn opened(&self, replica: u32) {
        self.open.borrow_mut()[replica as usize - 1] += 1;
    }

    fn closed(&self, replica: u32) {
        let mut open = self.open.borrow_mut();
        open[replica as usize - 1] = open[replica as usize - 1].saturating_sub(1);
    }
}

/// FNV-1a over the address's bytes: the same address, the same replica. (Not
/// HAProxy's hash: live and simulation may pick different replicas for one
/// address; what scenarios rely on is that one address sticks to one.)
fn address_hash(addr: IpAddr) -> u64 {
    let bytes = match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The balancer: listens where the server would, and proxies each
/// connection to the replica its routing picks.
pub(crate) struct Balancer {
    picker: Picker,
    rec: Recorder,
}

impl Balancer {
    pub(crate) fn new(replicas: u32, routing: Routing, rec: Recorder) -> Rc<Self> {
        Rc::new(Self { picker: Picker::new(replicas, routing), rec })
    }

    /// Proxies until the host stops. Fails only when it cannot listen.
    pub(crate) async fn run(self: Rc<Self>) -> io::Result<()> {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
        loop {
            let Ok((down, peer)) = listener.accept().await else { continue };
            let me = self.clone();
            tokio::task::spawn_local(async move { me.proxy(down, peer.ip(), peer.port()).await });
        }
    }

    async fn proxy(self: Rc<Self>, down: turmoil::net::TcpStream, ip: IpAddr, port: u16) {
        let replica = self.picker.pick(ip);
        // The NAT's host is `nat-<client>`: name the client, as the NAT's own events do.
        let host = turmoil::reverse_lookup(ip).unwrap_or_else(|| ip.to_string());
        let client = host.strip_prefix("nat-").unwrap_or(&host).to_string();
        self.rec.record(What::Routed {
            client,
            up_port: port,
            replica,
            routing: self.picker.routing.name().to_string(),
        });
        let host = replica_host(replica);
        let connect = turmoil::net::TcpStream::connect((host.as_str(), PORT));
        // A replica that does not answer: the client's side closes (HAProxy answers 503).
        let Ok(Ok(up)) = crate::clock::timeout(CONNECT_TIMEOUT, connect).await else { return };
        self.picker.opened(replica);
        let (down_r, down_w) = down.into_split();
        let (up_r, up_w) = up.into_split();
        let to_replica = pump(down_r, up_w);
        let to_client = pump(up_r, down_w);
        tokio::pin!(to_replica, to_client);
        let (mut a, mut b) = (false, false);
        while !(a && b) {
            // An error either way ends both: the halves drop with the futures.
            let failed = tokio::select! {
                biased;
                r = &mut to_replica, if !a => { a = true; r.is_err() }
                r = &mut to_client, if !b => { b = true; r.is_err() }
            };
            if failed {
                break;
            }
        }
        self.picker.closed(replica);
    }
}

/// Copies `from` into `to` until an orderly end, which it passes on.
async fn pump(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_takes_each_replica_in_turn() {
        let p = Picker::new(3, Routing::RoundRobin);
        let ip: IpAddr = [192, 168, 0, 1].into();
        let picks: Vec<u32> = (0..7).map(|_| p.pick(ip)).collect();
        assert_eq!(picks, [1, 2, 3, 1, 2, 3, 1]);
    }

    #[test]
    fn least_connections_takes_the_least_busy_replica_and_the_lowest_on_a_tie() {
        let p = Picker::new(3, Routing::LeastConnections);
        let ip: IpAddr = [192, 168, 0, 1].into();
        assert_eq!(p.pick(ip), 1);
        p.opened(1);
        assert_eq!(p.pick(ip), 2);
        p.opened(2);
        p.opened(2);
        assert_eq!(p.pick(ip), 3);
        p.opened(3);
        // 1, 2, 1 open: replica 1 and 3 tie, the lowest wins.
        assert_eq!(p.pick(ip), 1);
        p.closed(2);
        p.closed(2);
        assert_eq!(p.pick(ip), 2);
    }

    #[test]
    fn source_routing_sticks_one_address_to_one_replica_and_spreads_addresses() {
        let p = Picker::new(3, Routing::Source);
        let a: IpAddr = [192, 168, 0, 1].into();
        let first = p.pick(a);
        assert!((0..10).all(|_| p.pick(a) == first));
        let spread: std::collections::BTreeSet<u32> = (1..=32u8).map(|i| p.pick([192, 168, 0, i].into())).collect();
        assert_eq!(spread.len(), 3, "32 addresses reach every replica: {spread:?}");
    }
}
