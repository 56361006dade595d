//! The plan's tables besides its steps: `[server]`, `[deployment]`,
//! `[network]`, `[[client]]` and `[[tool]]`, as a validated [`Plan`](super::Plan) holds them.

use super::{Dialect, Dur};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[tool]]` (stateless-http): a tool the server offers, and what calling it does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolSpec {
    /// Its name (`tools/call` `name`).
    pub name: String,
    /// How long one execution runs before its side effect and its result.
    pub runs: Duration,
    /// How often an execution sends `notifications/progress` (none: never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_every: Option<Duration>,
    /// The inputs the tool asks for first, by method, in one MRTR round
    /// (none: it runs at once). Written as one method, or a list.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "one_or_many")]
    pub input: Vec<String>,
    /// Its `requestState` is a one-time redemption: the server must refuse it a second time.
    pub once: bool,
    /// Running it twice does no harm (a re-issue that runs it again is no loss).
    pub idempotent: bool,
}

/// A list of one as its only element (a tool's `input`, as scenario files write it).
fn one_or_many<S: serde::Serializer>(v: &[String], s: S) -> std::result::Result<S::Ok, S::Error> {
    match v {
        [one] => s.serialize_str(one),
        many => many.serialize(s),
    }
}

/// The default simulation tick (`[network] tick` overrides it).
///
/// Why 20 ms: turmoil advances every host once per tick, at about 2 µs per
/// host per tick whether or not the host has work, and delivers network
/// messages only at tick boundaries. So the tick trades speed against the
/// resolution of network hops: a hop takes its latency rounded up to the next
/// tick. Everything else stays exact: timers inside a host fire at their own
/// times within a tick, and scenario steps fire at their exact times (except
/// `crash-client`, which fires at the first tick boundary at or after its
/// time, and the client's later steps with it; the step
/// loop hands each command to its actor one tick early with a due time; see
/// `Inbox::push_at`). At 20 ms, `nat-rebind` (3 hosts, 400 s) runs about
/// 3,000x faster than real time; at 1 ms it would be about 200x
/// (`cargo bench --bench sim` prints both).
pub const DEFAULT_TICK: Duration = Duration::from_millis(20);

/// `[server]`: how the reference engine is configured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// The first event id the engine mints.
    pub first_event_id: u64,
    /// Events retained per session for replay.
    pub retention: usize,
    /// How often the server writes a keep-alive comment on an open stream.
    /// A client's default `heartbeat_timeout` is 2.5 times it.
    pub heartbeat: Dur,
    /// How long a resumption may wait for the prior writer to be fenced.
    pub fence_grace: Dur,
    /// How long fencing a prior writer takes to be confirmed (default 0:
    /// at once). Models a writer blocked on a full socket buffer, or held by
    /// another worker: a fence slower than `fence_grace` cannot be confirmed.
    pub fence_delay: Dur,
    /// When an unanswered server request times out.
    pub request_timeout: Dur,
    /// stateless-http: how long a `requestState` the reference server mints stays valid.
    pub state_lifetime: Dur,
    /// Whether the server authenticates its clients (default true). False:
    /// the principal in `Authorization: Bearer` is self-asserted, as on a
    /// live adapter run with `--auth off`; the reference server then binds
    /// no state to it, and findings between principals are inherent.
    pub authenticate: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            first_event_id: 1,
            retention: 64,
            heartbeat: Dur(Duration::from_secs(15)),
            fence_grace: Dur(Duration::from_secs(5)),
            fence_delay: Dur(Duration::ZERO),
            request_timeout: Dur(Duration::from_secs(300)),
            state_lifetime: Dur(Duration::from_secs(60)),
            authenticate: true,
        }
    }
}

/// The most replicas a deployment may have.
pub const MAX_REPLICAS: u32 = 8;

/// `[deployment]`: how many copies of the server run, and how a balancer in
/// front of them routes each request (docs/replicas.md). One replica, the
/// default, is no balancer at all: the world of every scenario without the
/// table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Deployment {
    /// How many replicas serve behind the balancer (1 to 8; 1: no balancer).
    /// With more than one, the stateful dialects need `session` or `source`
    /// routing ([`Deployment::problem`]).
    pub replicas: u32,
    /// How the balancer picks a replica for each request.
    pub routing: Routing,
    /// Where the replicas keep what must outlive one request: one store
    /// they share, or one store each.
    pub store: StoreKind,
    /// HAProxy's `timeout server`: the balancer cuts a connection whose
    /// replica has sent nothing for this long (an SSE stream without
    /// heartbeats, say). Unset: an hour, past any scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_server: Option<Dur>,
    /// HAProxy's `timeout tunnel`: the balancer cuts a connection on which
    /// neither side has sent anything for this long. Unset: an hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_tunnel: Option<Dur>,
}

impl Default for Deployment {
    fn default() -> Self {
        Self {
            replicas: 1,
            routing: Routing::RoundRobin,
            store: StoreKind::PerReplica,
            timeout_server: None,
            timeout_tunnel: None,
        }
    }
}

impl Deployment {
    /// One server and no balancer.
    pub fn is_single(&self) -> bool {
        self.replicas <= 1
    }

    /// The balancer's `(timeout server, timeout tunnel)`, in scenario time:
    /// set, or an hour.
    pub fn balancer_timeouts(&self) -> (Duration, Duration) {
        let hour = Duration::from_secs(3600);
        (self.timeout_server.map_or(hour, |d| d.0), self.timeout_tunnel.map_or(hour, |d| d.0))
    }

    /// What the world cannot build of this deployment in `dialect`: the key
    /// of `[deployment]` at fault, and why. One rule for files and for
    /// plans built in code.
    pub fn problem(&self, dialect: Dialect) -> Option<(&'static str, String)> {
        if !(1..=MAX_REPLICAS).contains(&self.replicas) {
            return Some(("replicas", format!("[deployment] replicas must be between 1 and {MAX_REPLICAS}")));
        }
        for (key, t) in [("timeout_server", self.timeout_server), ("timeout_tunnel", self.timeout_tunnel)] {
            if t.is_some() && self.is_single() {
                return Some((key, format!("[deployment] {key} is the balancer's, and one replica has no balancer")));
            }
            if t.is_some_and(|t| t.0.is_zero()) {
                return Some((key, format!("[deployment] {key} must be longer than zero")));
            }
        }
        if !dialect.has_sessions() && self.routing == Routing::Session {
            return Some((
                "routing",
                "[deployment] routing = \"session\" sticks on a session id, and stateless-http has no sessions".into(),
            ));
        }
        if self.is_single() || !dialect.has_sessions() {
            return None;
        }
        if !matches!(self.routing, Routing::Session | Routing::Source) {
            return Some((
                "routing",
                format!(
                    "[deployment] a {:?} deployment of replicas is simulated with routing = \"session\" or \"source\" only so far: {:?} sends each request of one session to another replica (docs/replicas.md)",
                    dialect.name(),
                    self.routing.name()
                ),
            ));
        }
        None
    }
}

/// How the balancer routes, as HAProxy's `balance` does. Each request is
/// balanced on its own (HTTP mode with `option http-server-close`: a request
/// gets its own connection to its replica; an SSE response keeps it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Each new request to the next replica in turn.
    #[default]
    RoundRobin,
    /// To the replica with the fewest open connections (ties: the lowest number).
    LeastConnections,
    /// A hash of the client's address picks the replica: the same address
    /// always lands on the same replica (`balance source`).
    Source,
    /// Sticky sessions: a request that names a session (`Mcp-Session-Id`,
    /// or legacy-sse's `sessionId` query parameter) goes to the replica
    /// whose response created it, as an HAProxy stick table learns it from
    /// the response; any other request round-robin. Stateful dialects.
    Session,
}

impl Routing {
    /// Its name in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Routing::RoundRobin => "round-robin",
            Routing::LeastConnections => "least-connections",
            Routing::Source => "source",
            Routing::Session => "session",
        }
    }
}

/// Where a deployment's replicas keep their durable state (single-use
/// records today; event logs and fences with the stateful dialects).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// Each replica its own store (a sidecar, or the process's memory that
    /// a restart keeps): what one replica records, the others never see.
    #[default]
    PerReplica,
    /// One store every replica reaches over the network (Redis): the
    /// `store` host in simulation, a real `redis-server` live.
    Shared,
}

impl StoreKind {
    /// Its name in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::PerReplica => "per-replica",
            StoreKind::Shared => "shared",
        }
    }
}

/// `[network]` after validation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetworkConfig {
    /// The simulation tick: network hops are rounded up to it.
    pub tick: Duration,
    /// The shortest latency of a network message.
    pub latency_min: Duration,
    /// The longest latency of a network message (equal to `latency_min` for a fixed latency).
    pub latency_max: Duration,
    /// How long a NAT keeps a dropped mapping half-open before it resets it.
    pub half_open_lifetime: Duration,
}

/// One simulated client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClientSpec {
    /// Its name, which steps use: ASCII letters, digits, `-` or `_`.
    pub name: String,
    /// The credential it presents (`Authorization: Bearer <principal>`).
    pub principal: String,
    /// How long it takes to answer a server request.
    pub think_time: Duration,
    /// Silence after which it gives up on its uplink and resumes.
    pub heartbeat_timeout: Duration,
    /// Whether it answers server requests by itself (after `think_time`);
    /// when false, only `answer` steps make it answer.
    pub auto_answer: bool,
}
