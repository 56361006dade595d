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
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the balancer's health check takes to notice a crashed replica
/// and take it out of rotation: HAProxy's `check inter 1s fall 2`, as live
/// mode writes it. Until then, connections sent to it fail.
pub(crate) const HEALTH_CHECK: Duration = Duration::from_secs(2);

/// The name of replica `n` (from 1) as a host.
pub(crate) fn replica_host(n: u32) -> String {
    format!("replica-{n}")
}

/// The replica whose response created each session (where its application
/// runs): learned by the simulated balancer, or live from the responses
/// HAProxy tags with the replica that served them.
#[derive(Default)]
pub(crate) struct Homes(RefCell<std::collections::BTreeMap<String, u32>>);

impl Homes {
    /// A response from `replica` named session `id`: the first to name it created it.
    pub(crate) fn learned(&self, id: &str, replica: u32) {
        self.0.borrow_mut().entry(id.to_string()).or_insert(replica);
    }

    /// The replica whose response created session `id`, once one did.
    pub(crate) fn home(&self, id: &str) -> Option<u32> {
        self.0.borrow().get(id).copied()
    }
}

/// How the balancer picks a replica: the routing rule and what it counts.
pub(crate) struct Picker {
    replicas: u32,
    routing: Routing,
    /// Round-robin: the replica the next request goes to (from 1).
    next: Cell<u32>,
    /// Least-connections: open connections per replica.
    open: RefCell<Vec<u32>>,
    /// Session routing: the replica each session id sticks to (where it was
    /// created, until a crash sends it elsewhere).
    sticky: RefCell<std::collections::BTreeMap<String, u32>>,
    /// Any routing in a dialect with sessions: the replica whose response
    /// created each session (where its application runs).
    homes: Rc<Homes>,
    /// Per replica: when its health check takes it out of rotation (it crashed).
    out_at: RefCell<Vec<Option<Duration>>>,
    /// Per replica: drained (no new connection; sessions stuck to it still go).
    drained: RefCell<Vec<bool>>,
}

impl Picker {
    pub(crate) fn new(replicas: u32, routing: Routing) -> Self {
        Self {
            replicas,
            routing,
            next: Cell::new(1),
            open: RefCell::new(vec![0; replicas as usize]),
            sticky: RefCell::default(),
            homes: Rc::default(),
            out_at: RefCell::new(vec![None; replicas as usize]),
            drained: RefCell::new(vec![false; replicas as usize]),
        }
    }

    /// The replica (from 1) a new connection from `client_addr` goes to at
    /// `now`, whose request names `session` (if it names one); `None` when
    /// no replica takes new connections (HAProxy answers 503).
    pub(crate) fn pick(&self, client_addr: IpAddr, session: Option<&str>, now: Duration) -> Option<u32> {
        match self.routing {
            Routing::Session => match session.and_then(|s| self.stuck(s)) {
                // A drained replica keeps its sessions; one out of rotation
                // loses them to another (HAProxy's `option redispatch`),
                // where they stick from then on.
                Some(r) if self.in_rotation(r, now) => Some(r),
                Some(_) => {
                    let r = self.round_robin(now)?;
                    if let Some(s) = session {
                        self.sticky.borrow_mut().insert(s.to_string(), r);
                    }
                    Some(r)
                }
                None => self.round_robin(now),
            },
            Routing::RoundRobin => self.round_robin(now),
            Routing::LeastConnections => {
                let open = self.open.borrow();
                // The fewest open connections; ties go to the lowest number.
                self.takers(now).into_iter().min_by_key(|&r| (open[r as usize - 1], r))
            }
            // A hash of the address over the replicas that take connections
            // (HAProxy's map-based hash: the map is over the servers up).
            Routing::Source => {
                let takers = self.takers(now);
                (!takers.is_empty()).then(|| takers[(address_hash(client_addr) % takers.len() as u64) as usize])
            }
        }
    }

    /// Whether replica `r` is in rotation at `now`: not out after a crash
    /// its health check noticed.
    fn in_rotation(&self, r: u32, now: Duration) -> bool {
        self.out_at.borrow()[r as usize - 1].is_none_or(|t| now < t)
    }

    /// The replicas that take new connections at `now`, in order.
    fn takers(&self, now: Duration) -> Vec<u32> {
        let drained = self.drained.borrow();
        (1..=self.replicas).filter(|&r| self.in_rotation(r, now) && !drained[r as usize - 1]).collect()
    }

    fn round_robin(&self, now: Duration) -> Option<u32> {
        let takers = self.takers(now);
        let n = self.next.get();
        let r = takers.iter().copied().find(|&r| r >= n).or_else(|| takers.first().copied())?;
        self.next.set(r % self.replicas + 1);
        Some(r)
    }

    /// Replica `r` crashed: its health check takes it out of rotation at `out_at`.
    pub(crate) fn crashed(&self, r: u32, out_at: Duration) {
        self.out_at.borrow_mut()[r as usize - 1] = Some(out_at);
    }

    /// Replica `r` runs again (a restart): back in rotation.
    pub(crate) fn restarted(&self, r: u32) {
        self.out_at.borrow_mut()[r as usize - 1] = None;
    }

    /// Replica `r` is drained: no new connection goes to it.
    pub(crate) fn drain(&self, r: u32) {
        self.drained.borrow_mut()[r as usize - 1] = true;
    }

    /// The replica session `id` sticks to, once a response created it there.
    pub(crate) fn stuck(&self, id: &str) -> Option<u32> {
        self.sticky.borrow().get(id).copied()
    }

    /// A response from `replica` named session `id`: it sticks there (the
    /// first replica to name it keeps it, as `stick store-response` does for
    /// an entry it holds).
    fn learned(&self, id: &str, replica: u32) {
        self.homes.learned(id, replica);
        if self.routing == Routing::Session {
            self.sticky.borrow_mut().entry(id.to_string()).or_insert(replica);
        }
    }

    /// Where each session was created.
    pub(crate) fn homes(&self) -> Rc<Homes> {
        self.homes.clone()
    }

    fn opened(&self, replica: u32) {
        self.open.borrow_mut()[replica as usize - 1] += 1;
    }

    fn closed(&self, replica: u32) {
        let mut open = self.open.borrow_mut();
        open[replica as usize - 1] = open[replica as usize - 1].saturating_sub(1);
    }
}

/// HAProxy's source hash (`balance source` with its default map-based
/// hash-type, `get_server_sh`): the address as 32-bit big-endian words,
/// XORed together, with no avalanche. Taken modulo the servers up, in
/// declaration order (the map of equal weights cycles through them), it
/// picks the replica HAProxy picks: live and simulation send one address
/// to the same replica (tests/live_deploy.rs holds them to it).
fn address_hash(addr: IpAddr) -> u64 {
    let bytes = match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    u64::from(bytes.chunks_exact(4).fold(0u32, |h, w| h ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])))
}

/// The balancer: listens where the server would, and proxies each
/// connection to the replica its routing picks.
pub(crate) struct Balancer {
    picker: Picker,
    rec: Recorder,
    /// Whether responses name sessions (a stateful dialect): the balancer
    /// reads them, for session routing and for where each session lives.
    sessions: bool,
    /// `timeout server` and `timeout tunnel`, when the deployment sets
    /// either: a connection idle that long is cut.
    timeouts: Option<(Duration, Duration)>,
}

impl Balancer {
    pub(crate) fn new(replicas: u32, routing: Routing, sessions: bool, rec: Recorder) -> Rc<Self> {
        Rc::new(Self { picker: Picker::new(replicas, routing), rec, sessions, timeouts: None })
    }

    /// The balancer with HAProxy's `timeout server` and `timeout tunnel`.
    pub(crate) fn with_timeouts(self: Rc<Self>, timeouts: (Duration, Duration)) -> Rc<Self> {
        let mut me = Rc::into_inner(self).expect("not shared yet");
        me.timeouts = Some(timeouts);
        Rc::new(me)
    }

    /// The balancer's routing rule, which a crash or a drain reach.
    pub(crate) fn picker(&self) -> &Picker {
        &self.picker
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

    /// Reads the connection's PROXY line and request head, and picks the
    /// replica that takes it (recorded); None when none does, or the head
    /// never came. Returns the head, to pass on.
    async fn route(&self, down: &mut turmoil::net::TcpStream, ip: IpAddr, port: u16) -> Option<(u32, Vec<u8>)> {
        // The NAT states the client's public address in a PROXY line, then
        // the request head follows: session routing reads it for the session
        // it names.
        let mut head = read_head(down).await?;
        let source = proxy_source(&mut head);
        let session = request_session(&head);
        let addr = source.unwrap_or(ip);
        // No replica takes it: the client's side closes (HAProxy answers 503).
        let replica = self.picker.pick(addr, session.as_deref(), crate::clock::now().unwrap_or_default())?;
        // The NAT's host is `nat-<client>`: name the client, as the NAT's own events do.
        let host = turmoil::reverse_lookup(ip).unwrap_or_else(|| ip.to_string());
        let client = host.strip_prefix("nat-").unwrap_or(&host).to_string();
        self.rec.record(What::Routed {
            client,
            up_port: port,
            replica,
            routing: self.picker.routing.name().to_string(),
            source: source.map(|a| a.to_string()),
        });
        Some((replica, head))
    }

    async fn proxy(self: Rc<Self>, mut down: turmoil::net::TcpStream, ip: IpAddr, port: u16) {
        let Some((replica, head)) = self.route(&mut down, ip, port).await else { return };
        let host = replica_host(replica);
        let connect = crate::quiet::connecting(turmoil::net::TcpStream::connect((host.as_str(), PORT)));
        // A replica that does not answer: the client's side closes (HAProxy answers 503).
        let Ok(Ok(up)) = crate::clock::timeout(CONNECT_TIMEOUT, connect).await else { return };
        self.picker.opened(replica);
        // While both ways are open, it carries a replica's keep-alive to the client (crate::quiet).
        let open = Rc::new(std::cell::Cell::new(true));
        if let Ok(to) = up.local_addr() {
            let o = open.clone();
            crate::quiet::relay(std::net::SocketAddr::new(ip, port), to, Box::new(move || o.get()));
        }
        let (down_r, down_w) = down.into_split();
        let (up_r, mut up_w) = up.into_split();
        if !head.is_empty() && up_w.write_all(&head).await.is_err() {
            self.picker.closed(replica);
            return;
        }
        // When each side last sent something (HAProxy's timeouts count from it).
        let now = || crate::clock::now().unwrap_or_default();
        let (from_client, from_replica) = (Rc::new(Cell::new(now())), Rc::new(Cell::new(now())));
        // (Kept only when a timeout reads them: no clock read per chunk otherwise.)
        let timed = |c: &Rc<Cell<Duration>>| self.timeouts.is_some().then(|| c.clone());
        let to_replica = pump(down_r, up_w, None, timed(&from_client));
        // Session routing learns the sessions the replica's response names.
        let learn = self.sessions.then(|| {
            let me = self.clone();
            Learner::new(Box::new(move |id: &str| me.picker.learned(id, replica)))
        });
        let to_client = pump(up_r, down_w, learn, timed(&from_replica));
        // A connection idle past a timeout is cut, both ways (the NAT
        // names the balancer for it: crate::world::nat).
        let idle_cut = async {
            let Some((server, tunnel)) = self.timeouts else { return std::future::pending().await };
            loop {
                let due = (from_replica.get() + server).min(from_replica.get().max(from_client.get()) + tunnel);
                if now() >= due {
                    return;
                }
                crate::clock::sleep(due - now()).await;
            }
        };
        tokio::pin!(to_replica, to_client, idle_cut);
        let (mut a, mut b) = (false, false);
        while !(a && b) {
            // An error either way ends both: the halves drop with the futures.
            let failed = tokio::select! {
                biased;
                r = &mut to_replica, if !a => { a = true; r.is_err() }
                r = &mut to_client, if !b => { b = true; r.is_err() }
                () = &mut idle_cut => true,
            };
            if failed || b {
                open.set(false);
            }
            if failed {
                break;
            }
        }
        open.set(false);
        self.picker.closed(replica);
    }
}

/// Copies `from` into `to` until an orderly end, which it passes on;
/// `learn` reads the session ids of the responses it copies; `last`, when
/// a timeout reads it, keeps when `from` last sent something.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut learn: Option<Learner>,
    last: Option<Rc<Cell<Duration>>>,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if let Some(last) = &last {
            last.set(crate::clock::now().unwrap_or_default());
        }
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        if let Some(l) = learn.as_mut() {
            if l.feed(&buf[..n]) {
                learn = None;
            }
        }
        to.write_all(&buf[..n]).await?;
    }
}

/// How much of a request's head the balancer reads before it gives up on
/// finding its end (the request then goes on unread, round-robin).
const MAX_HEAD: usize = 16 * 1024;

/// Reads a request head (to its blank line, or [`MAX_HEAD`] bytes); `None`
/// if the client closed before sending anything.
async fn read_head(down: &mut turmoil::net::TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match down.read(&mut buf).await {
            Ok(0) | Err(_) => return (!head.is_empty()).then_some(head),
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(head)
}

/// Strips the PROXY protocol v1 line that starts `head`, if any, and
/// returns the client address it states (`PROXY TCP4 <src> <dst> <sport>
/// <dport>`), as HAProxy's `accept-proxy` does.
fn proxy_source(head: &mut Vec<u8>) -> Option<IpAddr> {
    if !head.starts_with(b"PROXY ") {
        return None;
    }
    let end = head.windows(2).position(|w| w == b"\r\n")?;
    let line = String::from_utf8_lossy(&head[..end]).to_string();
    head.drain(..end + 2);
    line.split(' ').nth(2)?.parse().ok()
}

/// The session a request head names: its `Mcp-Session-Id` header, or the
/// `sessionId` query parameter of its target (legacy-sse).
fn request_session(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?;
    if let Some(t) = crate::wire::legacy::session_token(target).filter(|t| !t.is_empty()) {
        return Some(t.to_string());
    }
    header(lines.take_while(|l| !l.is_empty()), "mcp-session-id")
}

/// The value of header `name` among `lines`.
fn header<'a>(lines: impl Iterator<Item = &'a str>, name: &str) -> Option<String> {
    lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
}

/// Reads the session a response names, as HAProxy's `stick store-response`
/// does: its `Mcp-Session-Id` header, or, in legacy-sse, the `sessionId`
/// of the `endpoint` event its stream opens with. Reads the head and at
/// most [`MAX_HEAD`] bytes of body.
pub(crate) struct Learner {
    sniffer: crate::wire::http1::ResponseSniffer,
    head: Vec<u8>,
    body: Vec<u8>,
    learned: Box<dyn Fn(&str)>,
    /// Live, behind HAProxy: told which replica served the response.
    served: Option<Box<dyn Fn(u32)>>,
}

/// The header that mcpsim's HAProxy configuration adds to every response:
/// the name of the server (`replica-N`) that served it.
pub(crate) const REPLICA_HEADER: &str = "x-mcpsim-replica";

impl Learner {
    pub(crate) fn new(learned: Box<dyn Fn(&str)>) -> Self {
        Learner {
            sniffer: crate::wire::http1::ResponseSniffer::new(),
            head: Vec::new(),
            body: Vec::new(),
            learned,
            served: None,
        }
    }

    /// Also reads which replica served the response ([`REPLICA_HEADER`]),
    /// before the session it names: `served` hears it once the head is in.
    pub(crate) fn tagged(mut self, served: Box<dyn Fn(u32)>) -> Self {
        self.served = Some(served);
        self
    }

    /// Feeds response bytes; true once there is nothing more to learn.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> bool {
        if !self.head.windows(4).any(|w| w == b"\r\n\r\n") {
            self.head.extend_from_slice(bytes);
            if let Some(end) = self.head.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&self.head[..end]).to_string();
                if let Some(served) = &self.served {
                    let tag = header(text.split("\r\n").skip(1), REPLICA_HEADER);
                    if let Some(r) = tag.and_then(|t| t.strip_prefix("replica-").and_then(|n| n.parse().ok())) {
                        served(r);
                    }
                }
                if let Some(id) = header(text.split("\r\n").skip(1), "mcp-session-id") {
                    (self.learned)(&id);
                    return true;
                }
            }
        }
        for s in self.sniffer.feed(bytes) {
            if let crate::wire::http1::Sniffed::Body(b) = s {
                self.body.extend_from_slice(&b);
            }
        }
        let text = String::from_utf8_lossy(&self.body);
        if let Some(at) = text.find("sessionId=") {
            let id: String = text[at + "sessionId=".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
                .collect();
            if !id.is_empty() && text[at..].contains('\n') {
                (self.learned)(&id);
                return true;
            }
        }
        self.head.len() + self.body.len() > MAX_HEAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_takes_each_replica_in_turn() {
        let p = Picker::new(3, Routing::RoundRobin);
        let ip: IpAddr = [192, 168, 0, 1].into();
        let picks: Vec<u32> = (0..7).map(|_| p.pick(ip, None, Duration::ZERO).unwrap()).collect();
        assert_eq!(picks, [1, 2, 3, 1, 2, 3, 1]);
    }

    #[test]
    fn least_connections_takes_the_least_busy_replica_and_the_lowest_on_a_tie() {
        let p = Picker::new(3, Routing::LeastConnections);
        let ip: IpAddr = [192, 168, 0, 1].into();
        assert_eq!(p.pick(ip, None, Duration::ZERO).unwrap(), 1);
        p.opened(1);
        assert_eq!(p.pick(ip, None, Duration::ZERO).unwrap(), 2);
        p.opened(2);
        p.opened(2);
        assert_eq!(p.pick(ip, None, Duration::ZERO).unwrap(), 3);
        p.opened(3);
        // 1, 2, 1 open: replica 1 and 3 tie, the lowest wins.
        assert_eq!(p.pick(ip, None, Duration::ZERO).unwrap(), 1);
        p.closed(2);
        p.closed(2);
        assert_eq!(p.pick(ip, None, Duration::ZERO).unwrap(), 2);
    }

    #[test]
    fn source_routing_sticks_one_address_to_one_replica_and_spreads_addresses() {
        let p = Picker::new(3, Routing::Source);
        let a: IpAddr = [192, 168, 0, 1].into();
        let first = p.pick(a, None, Duration::ZERO).unwrap();
        assert!((0..10).all(|_| p.pick(a, None, Duration::ZERO).unwrap() == first));
        let spread: std::collections::BTreeSet<u32> =
            (1..=32u8).map(|i| p.pick([192, 168, 0, i].into(), None, Duration::ZERO).unwrap()).collect();
        assert_eq!(spread.len(), 3, "32 addresses reach every replica: {spread:?}");
    }

    #[test]
    fn session_routing_sticks_a_session_to_the_replica_whose_response_created_it() {
        let p = Picker::new(3, Routing::Session);
        let ip: IpAddr = [192, 168, 0, 1].into();
        // Unknown sessions and requests without one go round-robin.
        assert_eq!(
            [
                p.pick(ip, None, Duration::ZERO).unwrap(),
                p.pick(ip, Some("s1"), Duration::ZERO).unwrap(),
                p.pick(ip, None, Duration::ZERO).unwrap()
            ],
            [1, 2, 3]
        );
        p.learned("s1", 2);
        p.learned("s1", 3);
        assert!(
            (0..5).all(|_| p.pick(ip, Some("s1"), Duration::ZERO).unwrap() == 2),
            "the first replica to name it keeps it"
        );
        assert_eq!(p.pick(ip, Some("s2"), Duration::ZERO).unwrap(), 1);
    }

    #[test]
    fn the_session_a_request_names_and_a_response_creates_is_read_as_haproxy_reads_it() {
        let post = b"POST /mcp HTTP/1.1\r\nhost: server\r\nMcp-Session-Id: abc-1\r\n\r\n{}";
        assert_eq!(request_session(post).as_deref(), Some("abc-1"));
        let legacy = b"POST /mcp/messages?sessionId=tok9 HTTP/1.1\r\nhost: server\r\n\r\n";
        assert_eq!(request_session(legacy).as_deref(), Some("tok9"));
        assert_eq!(request_session(b"GET /mcp/sse HTTP/1.1\r\n\r\n"), None);
        let got = Rc::new(RefCell::new(Vec::<String>::new()));
        let g = got.clone();
        let mut l = Learner::new(Box::new(move |id| g.borrow_mut().push(id.to_string())));
        assert!(!l.feed(b"HTTP/1.1 200 OK\r\nmcp-session"));
        assert!(l.feed(b"-id: s-42\r\ncontent-type: text/event-stream\r\n\r\n"));
        let g = got.clone();
        let mut l = Learner::new(Box::new(move |id| g.borrow_mut().push(id.to_string())));
        let body = "event: endpoint\ndata: /mcp/messages?sessionId=t0k\n\n";
        let chunked = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n", body.len());
        assert!(l.feed(chunked.as_bytes()));
        assert_eq!(*got.borrow(), ["s-42", "t0k"]);
    }
}
