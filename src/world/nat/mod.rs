//! The NAT host: a TCP-terminating proxy with one mapping per connection.
//!
//! Each client reaches the server only through its own NAT. A mapping pairs
//! the client's connection (downstream) with a connection the NAT opens to
//! the server (upstream, a fresh source port). Faults act on mappings:
//! - `rebind` drops every live mapping of the client silently: both sockets
//!   stay open, nothing is forwarded, no FIN and no RST reach either end;
//! - `sever` does the same to the mapping of the client's latest stream only;
//! - `reset` closes both sides of that mapping at once.
//!
//! A dropped mapping keeps reading what the server writes and records it (the
//! bytes and the SSE events in them): the evidence of a dead-writer race.
//! After `half_open_lifetime` the NAT resets a dropped mapping, as an OS
//! keepalive would.

use crate::inbox::Inbox;
use crate::trace::{MappingId, Recorder, SseSeen, What};
use crate::wire::http1::{ResponseSniffer, Sniffed};
use crate::wire::jsonrpc::Message;
use crate::wire::sse::{Decoder, Item};
use crate::world::balancer::Learner;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

/// Faults the step loop applies to a NAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatCmd {
    /// Drop every live mapping silently.
    Rebind,
    /// Drop the mapping of the client's latest stream silently.
    Sever,
    /// Reset the mapping of the client's latest stream.
    Reset,
    /// Drop the live mapping of the client connection from this local port silently.
    SeverPort(u16),
    /// Reset the live mapping of the client connection from this local port.
    ResetPort(u16),
}

impl NatCmd {
    /// The step kind that hands the NAT this command.
    fn kind(self) -> crate::vocab::StepKind {
        use crate::vocab::StepKind;
        match self {
            NatCmd::Rebind => StepKind::Rebind,
            NatCmd::Sever | NatCmd::SeverPort(_) => StepKind::Sever,
            NatCmd::Reset | NatCmd::ResetPort(_) => StepKind::Reset,
        }
    }
}

/// A fault as the step loop hands it to a NAT: the command, and the index of
/// the scenario step it carries out (the NAT records what the step acted
/// on, or that it found nothing to act on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The step's index in the plan's `steps`.
    pub step: usize,
    /// What to do.
    pub cmd: NatCmd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Live,
    Dropped,
    Closed,
}

struct Mapping {
    id: MappingId,
    status: Cell<Status>,
    /// Set once the server answered with `text/event-stream` on it.
    is_uplink: Cell<bool>,
    /// The content type of the response being read, when it is not an
    /// event stream (its body is reported whole, not as SSE events).
    plain_body: RefCell<Option<String>>,
    /// Directions that saw an orderly end of stream.
    eofs: Cell<u8>,
    kill: watch::Sender<bool>,
    /// The client's port: which of its connections the mapping carries.
    down_port: u16,
    /// When each side last sent something through it (scenario time):
    /// `(from the client, from the server)`.
    last: Cell<(Duration, Duration)>,
}

/// The sockets a NAT proxies between: turmoil's in a simulation
/// ([`SimNet`]), real ones in a live run.
pub trait NatNet: 'static {
    /// Where clients connect.
    type Listener;
    /// One TCP connection.
    type Stream;
    /// Its reading half.
    type Read: AsyncRead + Unpin + 'static;
    /// Its writing half.
    type Write: AsyncWrite + Unpin + 'static;
    /// Listens where the client connects.
    fn listen(&self) -> impl std::future::Future<Output = io::Result<Self::Listener>>;
    /// The next client connection and its source port.
    fn accept(l: &Self::Listener) -> impl std::future::Future<Output = io::Result<(Self::Stream, u16)>>;
    /// Returns once the server may be connected to: live, not while server
    /// processes restart (a simulated restart takes no time). Not bounded
    /// by the connect timeout.
    fn settled(&self) -> impl std::future::Future<Output = ()> {
        async {}
    }
    /// Opens a connection to the server.
    fn connect(&self) -> impl std::future::Future<Output = io::Result<Self::Stream>>;
    /// A connection's own port.
    fn local_port(s: &Self::Stream) -> u16;
    /// The address the server sees a connection come from, where known.
    fn local_addr(_: &Self::Stream) -> Option<std::net::SocketAddr> {
        None
    }
    /// Splits a connection into its halves.
    fn split(s: Self::Stream) -> (Self::Read, Self::Write);
    /// Makes closing these halves' sockets abortive (RST), where the network can.
    fn abortive(r: &Self::Read, w: &Self::Write);
}

/// turmoil's simulated TCP: the NAT host listens on port 80 and reaches the
/// host named `server`.
pub struct SimNet {
    pub server: String,
}

impl NatNet for SimNet {
    type Listener = turmoil::net::TcpListener;
    type Stream = turmoil::net::TcpStream;
    type Read = turmoil::net::tcp::OwnedReadHalf;
    type Write = turmoil::net::tcp::OwnedWriteHalf;
    async fn listen(&self) -> io::Result<Self::Listener> {
        turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await
    }
    async fn accept(l: &Self::Listener) -> io::Result<(Self::Stream, u16)> {
        l.accept().await.map(|(s, a)| (s, a.port()))
    }
    async fn connect(&self) -> io::Result<Self::Stream> {
        crate::quiet::connecting(turmoil::net::TcpStream::connect((self.server.as_str(), PORT))).await
    }
    fn local_port(s: &Self::Stream) -> u16 {
        s.local_addr().map(|a| a.port()).unwrap_or(0)
    }
    fn local_addr(s: &Self::Stream) -> Option<std::net::SocketAddr> {
        s.local_addr().ok()
    }
    fn split(s: Self::Stream) -> (Self::Read, Self::Write) {
        s.into_split()
    }
    fn abortive(_: &Self::Read, _: &Self::Write) {}
}

/// Scenario time now (zero before a clock runs).
fn now() -> Duration {
    crate::clock::now().unwrap_or_default()
}

pub struct Nat<N: NatNet> {
    net: N,
    client: String,
    half_open_lifetime: Duration,
    rec: Recorder,
    inbox: Inbox<Fault>,
    mappings: RefCell<BTreeMap<MappingId, Rc<Mapping>>>,
    next: Cell<u32>,
    /// Behind a deployment's balancer: the NAT's public address, which it
    /// states in a PROXY protocol line at the start of each upstream
    /// connection, and the stream a rebind draws a new one from.
    public: Option<RefCell<(std::net::Ipv4Addr, rand_chacha::ChaCha8Rng)>>,
    /// Live, in front of HAProxy: learns from each response which replica
    /// served the connection (and records it), and where sessions live.
    served: Option<ServedBy>,
    /// The balancer's `(timeout server, timeout tunnel)` in scenario time,
    /// when the deployment sets them: a close that comes when one ran out is
    /// the balancer's cut, not the server's.
    balancer_timeouts: Option<(Duration, Duration)>,
}

/// What a live NAT in front of HAProxy learns from the responses HAProxy
/// tags with the replica that served them: the replica of each of its
/// connections (the `routed` event the simulated balancer records) and
/// the replica that created each session.
pub struct ServedBy {
    /// Where each session was created.
    pub(crate) homes: Rc<crate::world::balancer::Homes>,
    /// The deployment's routing, as the `routed` event names it.
    pub(crate) routing: String,
}

/// A public address drawn from `rng`: one in the carrier-grade NAT range
/// (100.64.0.0/10), where a rebind's new address comes from.
///
/// A balancer routing on the source address (HAProxy's `balance source`,
/// which the simulated balancer mirrors) picks the address's 32-bit value
/// modulo the replicas up. The draw takes the address's residue modulo
/// [`ROUTING_RESIDUES`] (every count of replicas up to
/// [`crate::scenario::MAX_REPLICAS`] divides it) from a hash of the drawn
/// address, so that a seed routes as it did before the simulated balancer
/// took HAProxy's hash (2026-12-06): the seeds of regressions found by
/// hunting keep the routes that found them.
fn draw_address(rng: &mut rand_chacha::ChaCha8Rng) -> std::net::Ipv4Addr {
    use rand::RngCore;
    let b = rng.next_u32().to_be_bytes();
    let drawn = std::net::Ipv4Addr::new(100, 64 | (b[0] & 0x3f), b[1], b[2].max(1));
    let residue =
        drawn.octets().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
            % u64::from(ROUTING_RESIDUES);
    let (low, high) =
        (u32::from(std::net::Ipv4Addr::new(100, 64, 0, 1)), u32::from(std::net::Ipv4Addr::new(100, 127, 255, 255)));
    let v = u32::from(drawn);
    let mut at = v - v % ROUTING_RESIDUES + residue as u32;
    if at < low {
        at += ROUTING_RESIDUES;
    } else if at > high {
        at -= ROUTING_RESIDUES;
    }
    std::net::Ipv4Addr::from(at)
}

/// A multiple of every count of replicas a deployment may have (1 to 8).
const ROUTING_RESIDUES: u32 = 840;
const _: () = {
    let mut k = 1;
    while k <= crate::scenario::MAX_REPLICAS {
        assert!(ROUTING_RESIDUES % k == 0, "every count of replicas divides ROUTING_RESIDUES");
        k += 1;
    }
};

const PORT: u16 = 80;
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl<N: NatNet> Nat<N> {
    pub fn new(net: N, client: String, half_open_lifetime: Duration, rec: Recorder, inbox: Inbox<Fault>) -> Rc<Self> {
        Rc::new(Nat {
            net,
            client,
            half_open_lifetime,
            rec,
            inbox,
            mappings: RefCell::default(),
            next: Cell::new(0),
            public: None,
            served: None,
            balancer_timeouts: None,
        })
    }

    /// Behind a balancer with these `(timeout server, timeout tunnel)`.
    pub(crate) fn with_balancer_timeouts(self: Rc<Self>, timeouts: (Duration, Duration)) -> Rc<Self> {
        let mut nat = Rc::into_inner(self).expect("not shared yet");
        nat.balancer_timeouts = Some(timeouts);
        Rc::new(nat)
    }

    /// Who closed mapping `m` from the server's side: the balancer when
    /// one of its timeouts ran out (within a tick: live timings jitter),
    /// else the server.
    fn closed_by_server_side(&self, m: &Mapping) -> &'static str {
        let Some((server, tunnel)) = self.balancer_timeouts else { return "server" };
        let (client, srv) = m.last.get();
        let now = now();
        let slack = Duration::from_millis(250);
        let ran_out = |since: Duration, limit: Duration| now.saturating_sub(since) + slack >= limit;
        if ran_out(srv, server) || ran_out(srv.max(client), tunnel) {
            "balancer"
        } else {
            "server"
        }
    }

    /// A NAT in front of a deployment's balancer: it draws its public address
    /// from `rng`, states it in a PROXY protocol v1 line on each upstream
    /// connection (what HAProxy's `accept-proxy` reads), and draws a new one
    /// at each rebind, as a carrier NAT that rebinds does.
    pub fn with_public_address(
        net: N,
        client: String,
        half_open_lifetime: Duration,
        rec: Recorder,
        inbox: Inbox<Fault>,
        mut rng: rand_chacha::ChaCha8Rng,
    ) -> Rc<Self> {
        let addr = draw_address(&mut rng);
        let mut nat = Rc::into_inner(Self::new(net, client, half_open_lifetime, rec, inbox)).expect("just built");
        nat.public = Some(RefCell::new((addr, rng)));
        Rc::new(nat)
    }

    /// Live, in front of HAProxy: reads which replica served each connection.
    pub(crate) fn served_by(self: Rc<Self>, by: ServedBy) -> Rc<Self> {
        let mut nat = Rc::into_inner(self).expect("not shared yet");
        nat.served = Some(by);
        Rc::new(nat)
    }

    /// Proxies until the host stops. Fails only when it cannot listen.
    pub async fn run(self: Rc<Self>) -> io::Result<()> {
        let listener = self.net.listen().await?;
        let me = self.clone();
        tokio::task::spawn_local(async move {
            loop {
                let cmd = me.inbox.recv().await;
                me.apply(cmd);
            }
        });
        loop {
            let Ok((down, peer_port)) = N::accept(&listener).await else { continue };
            let me = self.clone();
            tokio::task::spawn_local(async move { me.open(down, peer_port).await });
        }
    }

    async fn open(self: Rc<Self>, down: N::Stream, down_port: u16) {
        // A dead server host never answers the SYN: bound the wait, then
        // close the client's side so it sees the failure.
        self.net.settled().await;
        let Ok(Ok(up)) = crate::clock::timeout(UPSTREAM_CONNECT_TIMEOUT, self.net.connect()).await else {
            return;
        };
        let up_port = N::local_port(&up);
        let up_addr = N::local_addr(&up);
        let n = self.next.get() + 1;
        self.next.set(n);
        let id = MappingId(n);
        let (kill, _) = watch::channel(false);
        let m = Rc::new(Mapping {
            id,
            status: Cell::new(Status::Live),
            is_uplink: Cell::new(false),
            plain_body: RefCell::new(None),
            eofs: Cell::new(0),
            kill,
            down_port,
            last: Cell::new((now(), now())),
        });
        self.mappings.borrow_mut().insert(id, m.clone());
        if let Some(up) = up_addr {
            // While live, the mapping carries a server's keep-alive to its client (crate::quiet).
            let weak = Rc::downgrade(&m);
            let live = move || weak.upgrade().is_some_and(|m| m.status.get() == Status::Live);
            crate::quiet::path(&self.client, down_port, N::local_addr(&down), up, Box::new(live));
        }
        self.rec.record(What::MappingOpened { client: self.client.clone(), mapping: id, down_port, up_port });
        let (down_r, down_w) = N::split(down);
        let (up_r, mut up_w) = N::split(up);
        let source = self.public.as_ref().map(|p| p.borrow().0);
        if let Some(public) = source {
            let line = format!("PROXY TCP4 {public} 0.0.0.0 {up_port} {PORT}\r\n");
            if up_w.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
        let learn = self.served.as_ref().map(|by| self.learner(by, up_port, source));
        tokio::task::spawn_local(self.clone().pump(m.clone(), down_r, up_w, false, None));
        tokio::task::spawn_local(self.clone().pump(m, up_r, down_w, true, learn));
    }

    /// Reads, from the response on the connection from `up_port`, the
    /// replica HAProxy sent it to (recorded as the simulated balancer
    /// records it) and the session it names, if it creates one.
    fn learner(&self, by: &ServedBy, up_port: u16, source: Option<std::net::Ipv4Addr>) -> Learner {
        let replica = Rc::new(Cell::new(None));
        let (homes, at) = (by.homes.clone(), replica.clone());
        let (rec, client, routing) = (self.rec.clone(), self.client.clone(), by.routing.clone());
        Learner::new(Box::new(move |id: &str| {
            if let Some(r) = at.get() {
                homes.learned(id, r);
            }
        }))
        .tagged(Box::new(move |r| {
            replica.set(Some(r));
            rec.record(What::Routed {
                client: client.clone(),
                up_port,
                replica: r,
                routing: routing.clone(),
                source: source.map(|a| a.to_string()),
            });
        }))
    }

    /// Copies one direction of a mapping while it is live; records what the
    /// server writes into it once it is dropped.
    async fn pump(
        self: Rc<Self>,
        m: Rc<Mapping>,
        mut from: N::Read,
        mut to: N::Write,
        from_server: bool,
        mut learn: Option<Learner>,
    ) {
        let mut kill = m.kill.subscribe();
        let mut buf = vec![0u8; 16 * 1024];
        let mut sniffer = ResponseSniffer::new();
        let mut sse = Decoder::new();
        loop {
            if *kill.borrow() {
                N::abortive(&from, &to);
                break;
            }
            // Biased: a kill that arrived wins over bytes that arrived with it.
            let n = tokio::select! {
                biased;
                _ = kill.changed() => {
                    N::abortive(&from, &to);
                    break;
                }
                r = from.read(&mut buf) => r.unwrap_or(0),
            };
            // (Only a balancer's timeouts read it: no clock read per chunk otherwise.)
            if n > 0 && self.balancer_timeouts.is_some() {
                let (c, s) = m.last.get();
                m.last.set(if from_server { (c, now()) } else { (now(), s) });
            }
            if n == 0 {
                self.closed(&m, (&from, &mut to), &mut kill, from_server).await;
                break;
            }
            let bytes = &buf[..n];
            if learn.as_mut().is_some_and(|l| l.feed(bytes)) {
                learn = None;
            }
            let (events, response, closing) =
                if from_server { sniff(&m, &mut sniffer, &mut sse, bytes) } else { (Vec::new(), None, false) };
            match m.status.get() {
                Status::Live => {
                    if to.write_all(bytes).await.is_err() {
                        break;
                    }
                }
                Status::Dropped => {
                    if from_server {
                        self.rec.record(What::DroppedWrite {
                            client: self.client.clone(),
                            mapping: m.id,
                            bytes: n,
                            events,
                            response,
                            closing,
                        });
                    }
                }
                Status::Closed => {}
            }
        }
    }

    /// One direction of `m` reached its end (its reader saw EOF): an
    /// orderly close travels through a live mapping; a dropped one stays
    /// half-open until the reset.
    async fn closed(
        &self,
        m: &Mapping,
        (from, to): (&N::Read, &mut N::Write),
        kill: &mut tokio::sync::watch::Receiver<bool>,
        from_server: bool,
    ) {
        let by = if from_server { self.closed_by_server_side(m) } else { "client" };
        match m.status.get() {
            Status::Live => {
                // An orderly close travels through a live mapping.
                let _ = to.shutdown().await;
                m.eofs.set(m.eofs.get() + 1);
                if m.eofs.get() == 2 {
                    m.status.set(Status::Closed);
                    self.mappings.borrow_mut().remove(&m.id);
                }
                self.rec.record(What::MappingClosed { client: self.client.clone(), mapping: m.id, by: by.into() });
            }
            Status::Dropped => {
                if from_server {
                    self.rec.record(What::MappingClosed { client: self.client.clone(), mapping: m.id, by: by.into() });
                }
                // Nothing reaches the other end: it stays half-open until the reset.
                let _ = kill.wait_for(|k| *k).await;
                N::abortive(from, to);
            }
            Status::Closed => {}
        }
    }

    fn apply(self: &Rc<Self>, fault: Fault) {
        let live: Vec<Rc<Mapping>> =
            self.mappings.borrow().values().filter(|m| m.status.get() == Status::Live).cloned().collect();
        let uplink = live.iter().rev().find(|m| m.is_uplink.get()).cloned();
        let step = Some(fault.step);
        let missed = match fault.cmd {
            NatCmd::Rebind => {
                for m in &live {
                    self.drop_mapping(m, "rebind", step);
                }
                if let Some(public) = &self.public {
                    let (addr, rng) = &mut *public.borrow_mut();
                    *addr = draw_address(rng);
                }
                // A rebind with no connection open dropped nothing: its new
                // address alone changes nothing a client has.
                live.is_empty().then(|| format!("{} had no connection open: the rebind dropped nothing", self.client))
            }
            NatCmd::Sever | NatCmd::Reset => match uplink {
                Some(m) if fault.cmd == NatCmd::Sever => {
                    self.drop_mapping(&m, "sever", step);
                    None
                }
                Some(m) => {
                    self.reset(&m, "reset fault", step);
                    None
                }
                None => Some(format!("{} had no event stream open: nothing to cut", self.client)),
            },
            NatCmd::SeverPort(port) | NatCmd::ResetPort(port) => match live.iter().find(|m| m.down_port == port) {
                Some(m) if matches!(fault.cmd, NatCmd::SeverPort(_)) => {
                    self.drop_mapping(m, "sever", step);
                    None
                }
                Some(m) => {
                    self.reset(m, "reset fault", step);
                    None
                }
                None => {
                    Some(format!("{}'s connection from port {port} was no longer open: nothing to cut", self.client))
                }
            },
        };
        if let Some(why) = missed {
            self.rec.record(What::StepMissed { index: fault.step, action: fault.cmd.kind(), why });
        }
    }

    fn drop_mapping(self: &Rc<Self>, m: &Rc<Mapping>, fault: &str, step: Option<usize>) {
        m.status.set(Status::Dropped);
        self.rec.record(What::MappingDropped { client: self.client.clone(), mapping: m.id, fault: fault.into(), step });
        let me = self.clone();
        let m = m.clone();
        let lifetime = self.half_open_lifetime;
        tokio::task::spawn_local(async move {
            crate::clock::sleep(lifetime).await;
            if m.status.get() == Status::Dropped {
                me.reset(&m, &format!("keepalive: half-open for {}", crate::scenario::format_duration(lifetime)), None);
            }
        });
    }

    fn reset(&self, m: &Mapping, why: &str, step: Option<usize>) {
        m.status.set(Status::Closed);
        let _ = m.kill.send(true);
        self.mappings.borrow_mut().remove(&m.id);
        self.rec.record(What::MappingReset { client: self.client.clone(), mapping: m.id, why: why.into(), step });
    }
}

/// Reads one chunk the server wrote into mapping `m`: marks the mapping as
/// an event stream when a response says so, and returns the complete SSE
/// events the chunk finished, and, for a response that is not an event
/// stream, what its body bytes in the chunk were (a JSON response); and
/// whether the chunk did nothing but end the response.
fn sniff(
    m: &Mapping,
    sniffer: &mut ResponseSniffer,
    sse: &mut Decoder,
    bytes: &[u8],
) -> (Vec<SseSeen>, Option<String>, bool) {
    let mut events = Vec::new();
    let mut response = None;
    let sniffed = sniffer.feed(bytes);
    let closing = !sniffed.is_empty() && sniffed.iter().all(|s| matches!(s, Sniffed::End));
    for s in sniffed {
        match s {
            Sniffed::Head { content_type, .. } => {
                *sse = Decoder::new();
                let stream = content_type.as_deref().is_some_and(|c| c.starts_with("text/event-stream"));
                if stream {
                    m.is_uplink.set(true);
                }
                m.plain_body.replace((!stream).then(|| content_type.unwrap_or_else(|| "no content type".into())));
            }
            Sniffed::Body(b) => match m.plain_body.borrow().as_deref() {
                // The body of a plain response: one JSON-RPC message when it
                // is JSON and whole in this chunk.
                Some(ct) => {
                    let what = std::str::from_utf8(&b)
                        .ok()
                        .and_then(|t| Message::parse(t.trim()).ok())
                        .map(|m| crate::trace::describe_rpc(&Some(m.summary()), "message"));
                    let kind =
                        if ct.starts_with("application/json") { "a JSON".to_string() } else { format!("a {ct}") };
                    response = Some(match what {
                        Some(w) => format!("{kind} response ({w})"),
                        None => format!("{kind} response"),
                    });
                }
                None => {
                    for item in sse.feed(&b) {
                        if let Item::Event(ev) = item {
                            let rpc = Message::parse(&ev.data).ok().map(|m| m.summary());
                            events.push(SseSeen { id: ev.id, event: ev.event, rpc });
                        }
                    }
                }
            },
            Sniffed::End => {}
        }
    }
    (events, response, closing)
}

#[cfg(test)]
mod tests;
