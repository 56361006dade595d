//! Scenario files (TOML v1, docs/design.md §4) and the validated [`Plan`] they become.
//!
//! ```
//! let plan = mcpsim::scenario::Plan::from_toml_str(r#"
//! [scenario]
//! name = "tiny"
//! duration = "10s"
//! [[client]]
//! name = "alice"
//! [[step]]
//! at = "0s"
//! do = "connect"
//! client = "alice"
//! "#, "tiny.toml").unwrap();
//! assert_eq!(plan.clients[0].name, "alice");
//! ```

mod duration;

pub use duration::{format_duration, parse_duration, Dur};

use crate::error::{Error, Result};
use crate::seed::Seed;
use crate::wire::jsonrpc::mcp::SERVER_REQUEST_METHODS;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

mod load;
mod raw;
mod validate;
mod write;
pub use crate::vocab::StepKind;
pub use raw::json_schema;
pub use validate::PlanProblem;

/// The property ids a scenario's `[expect]` may name (docs/design.md §1).
pub const CHECK_IDS: &[&str] = crate::vocab::CheckId::NAMES;

/// The step kinds (`do = "..."`).
pub const STEP_KINDS: &[&str] = StepKind::NAMES;

/// The wire dialect a run speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// The seed's: `GET /mcp/sse`, `event: endpoint`, POST downlink.
    #[default]
    LegacySse,
    /// MCP 2025-11-25 Streamable HTTP: one endpoint, `Mcp-Session-Id`, resume by GET.
    StreamableHttp,
    /// MCP 2026-07-28: no sessions; every request is its own POST, and a
    /// server's questions are Multi Round-Trip Requests carrying `requestState`.
    StatelessHttp,
}

/// The two families of dialects: with sessions, whose streams resume by
/// `Last-Event-ID` (legacy-sse, streamable-http), or without (stateless-http).
/// Layers that differ only by family choose by it; a layer that tells the
/// dialects of one family apart makes its one choice by [`Dialect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Sessions, streams and `Last-Event-ID` (MCP 2024-11-05, 2025-11-25).
    Stateful,
    /// No session: each request its own POST, state in `requestState` (MCP 2026-07-28).
    Stateless,
}

/// What the scenario layer knows of a dialect (see [`Dialect::spec`]).
struct Spec {
    name: &'static str,
    family: Family,
    steps: &'static [StepKind],
}

impl Dialect {
    /// Every dialect, in listing order (a new variant goes here and in [`Dialect::spec`]).
    pub const ALL: [Dialect; 3] = [Dialect::LegacySse, Dialect::StreamableHttp, Dialect::StatelessHttp];

    /// The scenario layer's one choice of dialect (docs/design.md §7): its
    /// name, family and step kinds.
    const fn spec(self) -> Spec {
        use StepKind::*;
        match self {
            Dialect::LegacySse => Spec {
                name: "legacy-sse",
                family: Family::Stateful,
                steps: &[
                    Connect,
                    ServerRequest,
                    Notify,
                    Answer,
                    Rebind,
                    Sever,
                    Reset,
                    Resume,
                    StealToken,
                    CrashClient,
                    RestartReplica,
                    CrashReplica,
                    Drain,
                    Partition,
                    Wait,
                ],
            },
            Dialect::StreamableHttp => Spec {
                name: "streamable-http",
                family: Family::Stateful,
                steps: &[
                    Connect,
                    ServerRequest,
                    CallTool,
                    EndSession,
                    EnableTool,
                    Notify,
                    Answer,
                    Rebind,
                    Sever,
                    Reset,
                    Resume,
                    StealToken,
                    CrashClient,
                    RestartReplica,
                    CrashReplica,
                    Drain,
                    Partition,
                    Wait,
                ],
            },
            Dialect::StatelessHttp => Spec {
                name: "stateless-http",
                family: Family::Stateless,
                steps: &[
                    Call,
                    StealRequestState,
                    TamperRequestState,
                    ReplayRequestState,
                    RestartServer,
                    Listen,
                    ChangeTools,
                    Partition,
                    RestartReplica,
                    CrashReplica,
                    Drain,
                    Rebind,
                    Sever,
                    Reset,
                    CrashClient,
                    Wait,
                ],
            },
        }
    }

    /// Its name in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The dialect called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The step kinds a scenario of this dialect may use.
    pub fn step_kinds(self) -> &'static [StepKind] {
        self.spec().steps
    }

    /// Its family: with sessions, or stateless.
    pub fn family(self) -> Family {
        self.spec().family
    }

    /// Whether a session (and `Last-Event-ID`) exists in this dialect.
    pub fn has_sessions(self) -> bool {
        self.family() == Family::Stateful
    }
}

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

/// How a `tamper-request-state` step alters the state it presents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum Tamper {
    /// One character changed, near the end.
    Flip,
    /// Cut to half its length.
    Truncate,
    /// Presented, unchanged, on another call (`onto`, which calls `tool`).
    Move {
        /// The call whose request carries it.
        onto: String,
        /// That call's tool.
        tool: String,
    },
}

impl Tamper {
    /// Its word in scenario files and traces.
    pub fn word(&self) -> &'static str {
        match self {
            Tamper::Flip => "flip",
            Tamper::Truncate => "truncate",
            Tamper::Move { .. } => "move",
        }
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

/// Which of a client's streams a `seen_by` id comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SeenOn {
    /// Its uplink / standalone stream.
    #[default]
    Uplink,
    /// Its tool calls' POST streams (streamable-http).
    Call,
}

// ---------- the validated plan ----------

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

/// Which id a resume presents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LastEventId {
    /// The last id the client saw on its uplink.
    LastSeen,
    /// No `Last-Event-ID` at all: a plain GET on the session the client holds.
    None,
    /// This numeric id.
    Id(u64),
    /// Any header value, sent as it is (a guessed or malformed id).
    Raw(String),
    /// The last id the client saw on its uplink plus an offset (numeric ids):
    /// with retention R after a burst, `-R` is the oldest retained id minus
    /// one, `-R - 1` one further, `+1` the next id to be minted.
    LastSeenPlus(i64),
    /// The `nth` (from 1) id of an event carrying a message that `client`
    /// received: an id in any server's own format (a thief replaying an old id).
    Seen {
        /// The client that received it (`seen_by`).
        client: String,
        /// Which message event, counted from 1.
        nth: usize,
        /// Which of that client's streams it came on.
        #[serde(skip_serializing_if = "is_uplink")]
        stream: SeenOn,
    },
    /// The last id the resuming client saw on its uplink before the server
    /// issued request `label` (a `server-request` step's label): a window
    /// that holds that request, and none of the session's earlier traffic.
    SeenBefore(String),
}

fn is_uplink(s: &SeenOn) -> bool {
    *s == SeenOn::Uplink
}

/// A resume step's expectation: `expect = "accepted"` or `"refused"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeExpect {
    /// Every condition holds: the server must accept (a refusal costs the client a session).
    Accepted,
    /// Some condition fails: the server must refuse.
    Refused,
}

impl ResumeExpect {
    /// Its word in scenario files and traces: `accepted` or `refused`.
    pub fn word(self) -> &'static str {
        match self {
            ResumeExpect::Accepted => "accepted",
            ResumeExpect::Refused => "refused",
        }
    }
}

/// What a step does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "do", rename_all = "kebab-case")]
pub enum Action {
    /// The client opens a fresh session (a crashed client restarts first).
    Connect {
        /// The client that connects.
        client: String,
    },
    /// The server's application issues a server request on the client's session.
    ServerRequest {
        /// The client whose session it goes to.
        client: String,
        /// The JSON-RPC method (one of `SERVER_REQUEST_METHODS`).
        method: String,
        /// The scenario's name for the request; later steps and triggers refer to it.
        label: String,
        /// Whether the server may re-issue it under a fresh id at a
        /// resumption (the analysis's condition 4); when not, it must fail it
        /// explicitly or refuse the resumption.
        #[serde(skip_serializing_if = "is_true")]
        reissuable: bool,
    },
    /// streamable-http: the client calls the `ask` tool; the server issues
    /// `method` (labelled `label`) on the call's response stream.
    CallTool {
        /// The client that calls the tool.
        client: String,
        /// The JSON-RPC method the server issues on the call's stream.
        method: String,
        /// The scenario's name for that request.
        label: String,
    },
    /// streamable-http: the client ends its session with DELETE.
    EndSession {
        /// The client that ends its session.
        client: String,
    },
    /// streamable-http: the client calls the server's `enable_tool` tool
    /// on the session it holds (its own, or one it stole); the server
    /// enables `tool` and tells the session's standalone stream that its
    /// tool list changed. By another principal than the session's owner,
    /// it is the "session hijack prompt injection" of the MCP security best
    /// practices (through a shared queue, across replicas).
    EnableTool {
        /// The client that calls it.
        client: String,
        /// The tool it asks the server to enable.
        tool: String,
    },
    /// The server's application emits notifications on the client's session.
    Notify {
        /// The client whose session they go to.
        client: String,
        /// How many notifications.
        count: u64,
    },
    /// The client answers the labelled request (every id it had: original and re-issued).
    Answer {
        /// The client that answers.
        client: String,
        /// The request's label.
        label: String,
    },
    /// The client's NAT drops every live mapping silently.
    Rebind {
        /// The client whose NAT rebinds.
        client: String,
    },
    /// The client's NAT drops the mapping of its latest stream silently.
    Sever {
        /// The client whose stream is half-opened.
        client: String,
    },
    /// The client's NAT resets the mapping of its latest stream.
    Reset {
        /// The client whose stream is reset.
        client: String,
    },
    /// The client resumes its session's stream, presenting `last_event_id`.
    Resume {
        /// The client that resumes.
        client: String,
        /// Which id it presents.
        last_event_id: LastEventId,
        /// What the server must do with this resumption (opt-in): the
        /// scenario's author knows whether every condition holds.
        #[serde(skip_serializing_if = "Option::is_none")]
        expect: Option<ResumeExpect>,
    },
    /// `to` takes `from`'s session token (and its credential, if `credential`).
    StealToken {
        /// The victim.
        from: String,
        /// The thief.
        to: String,
        /// Whether the thief also presents the victim's credential.
        credential: bool,
    },
    /// The client host crashes and forgets everything; a later `connect` restarts it.
    CrashClient {
        /// The client that crashes.
        client: String,
    },
    /// Does nothing.
    Wait,
    /// stateless-http: the client calls `tool`; `label` names the call.
    Call {
        /// The client that calls.
        client: String,
        /// The tool (a `[[tool]]`).
        tool: String,
        /// The scenario's name for the call.
        label: String,
        /// The client declines the elicitations the server asks it for this call (`decline = true`).
        decline: bool,
    },
    /// stateless-http: `to` presents the `requestState` `from` holds for call
    /// `label`, on a request of its own for the same call.
    StealRequestState {
        /// The victim.
        from: String,
        /// The thief.
        to: String,
        /// The victim's call.
        label: String,
        /// Whether the thief also presents the victim's credential.
        credential: bool,
    },
    /// stateless-http: the client presents its `requestState` for call `label`, altered.
    TamperRequestState {
        /// The client that tampers.
        client: String,
        /// The call whose state it alters.
        label: String,
        /// How.
        #[serde(flatten)]
        how: Tamper,
    },
    /// stateless-http: the client presents the last `requestState` of call `label` again.
    ReplayRequestState {
        /// The client that presents it again.
        client: String,
        /// The call.
        label: String,
    },
    /// stateless-http: the server's process restarts; what it kept in memory
    /// and its per-process keys are gone (a durable store and a configured key stay).
    RestartServer,
    /// stateless-http: the client opens a `subscriptions/listen` stream for
    /// tool-list changes and keeps one open (it listens again when it breaks,
    /// goes silent or is refused).
    Listen {
        /// The client that listens.
        client: String,
    },
    /// stateless-http: the server's tool list changes; its application tells
    /// every open listen stream.
    ChangeTools,
    /// stateless-http: `sever` aimed at the response stream of call `label`
    /// (its request in flight); nothing happens when none is.
    SeverCall {
        /// The client whose call it is.
        client: String,
        /// The call.
        label: String,
    },
    /// stateless-http: `reset` aimed at the response stream of call `label`.
    ResetCall {
        /// The client whose call it is.
        client: String,
        /// The call.
        label: String,
    },
    /// A deployment with a shared store: the link between `replica` and the
    /// store drops every message, both ways, for `lasts` (to the end of the
    /// run when `None`). Done by the step loop, between ticks.
    Partition {
        /// The replica, from 1.
        replica: u32,
        /// How long the partition lasts (`for` in scenario files).
        #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
        lasts: Option<Duration>,
    },
    /// A deployment: replica `replica`'s process restarts; what it kept in
    /// memory and its per-process keys are gone (its store stays). Done by
    /// the step loop, between ticks.
    RestartReplica {
        /// The replica, from 1.
        replica: u32,
    },
    /// A deployment: replica `replica`'s host crashes and stays down; the
    /// balancer takes it out of rotation once its health check notices
    /// (`restart-replica` brings it back). Done by the step loop.
    CrashReplica {
        /// The replica, from 1.
        replica: u32,
    },
    /// A deployment: replica `replica` is drained: the balancer sends it no
    /// new connection (sessions that stick to it still go there, as HAProxy's
    /// drain state does); its open streams stay. Done by the step loop.
    Drain {
        /// The replica, from 1.
        replica: u32,
    },
}

impl Action {
    /// Whether the step loop carries it out itself, between ticks (a
    /// server-side fault), rather than an actor at its due time.
    pub fn by_step_loop(&self) -> bool {
        matches!(
            self,
            Action::RestartServer
                | Action::Partition { .. }
                | Action::RestartReplica { .. }
                | Action::CrashReplica { .. }
                | Action::Drain { .. }
        )
    }

    /// Its `do` name in scenario files.
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// What kind of step it is.
    pub fn kind(&self) -> StepKind {
        match self {
            Action::Connect { .. } => StepKind::Connect,
            Action::ServerRequest { .. } => StepKind::ServerRequest,
            Action::CallTool { .. } => StepKind::CallTool,
            Action::EndSession { .. } => StepKind::EndSession,
            Action::EnableTool { .. } => StepKind::EnableTool,
            Action::Notify { .. } => StepKind::Notify,
            Action::Answer { .. } => StepKind::Answer,
            Action::Rebind { .. } => StepKind::Rebind,
            Action::Sever { .. } => StepKind::Sever,
            Action::Reset { .. } => StepKind::Reset,
            Action::Resume { .. } => StepKind::Resume,
            Action::StealToken { .. } => StepKind::StealToken,
            Action::CrashClient { .. } => StepKind::CrashClient,
            Action::Wait => StepKind::Wait,
            Action::Call { .. } => StepKind::Call,
            Action::StealRequestState { .. } => StepKind::StealRequestState,
            Action::TamperRequestState { .. } => StepKind::TamperRequestState,
            Action::ReplayRequestState { .. } => StepKind::ReplayRequestState,
            Action::RestartServer => StepKind::RestartServer,
            Action::SeverCall { .. } => StepKind::Sever,
            Action::Listen { .. } => StepKind::Listen,
            Action::ChangeTools => StepKind::ChangeTools,
            Action::ResetCall { .. } => StepKind::Reset,
            Action::Partition { .. } => StepKind::Partition,
            Action::RestartReplica { .. } => StepKind::RestartReplica,
            Action::CrashReplica { .. } => StepKind::CrashReplica,
            Action::Drain { .. } => StepKind::Drain,
        }
    }

    /// The clients this step names.
    pub fn clients(&self) -> Vec<&str> {
        match self {
            Action::StealToken { from, to, .. } | Action::StealRequestState { from, to, .. } => vec![from, to],
            Action::Connect { client }
            | Action::ServerRequest { client, .. }
            | Action::CallTool { client, .. }
            | Action::EndSession { client }
            | Action::EnableTool { client, .. }
            | Action::Notify { client, .. }
            | Action::Answer { client, .. }
            | Action::Rebind { client }
            | Action::Sever { client }
            | Action::Reset { client }
            | Action::Resume { client, .. }
            | Action::CrashClient { client }
            | Action::Call { client, .. }
            | Action::TamperRequestState { client, .. }
            | Action::ReplayRequestState { client, .. }
            | Action::Listen { client }
            | Action::SeverCall { client, .. }
            | Action::ResetCall { client, .. } => vec![client],
            Action::Wait
            | Action::RestartServer
            | Action::ChangeTools
            | Action::Partition { .. }
            | Action::RestartReplica { .. }
            | Action::CrashReplica { .. }
            | Action::Drain { .. } => vec![],
        }
    }

    /// A short human description for traces and reports.
    pub fn describe(&self) -> String {
        match self {
            Action::Connect { client } => format!("{client} connects"),
            Action::ServerRequest { client, method, label, reissuable } => {
                let not = if *reissuable { "" } else { " (not reissuable)" };
                format!("server issues {label} ({method}){not} on {client}'s session")
            }
            Action::CallTool { client, method, label } => {
                format!("{client} calls the ask tool; the server issues {label} ({method}) on the call's stream")
            }
            Action::EndSession { client } => format!("{client} ends its session (DELETE)"),
            Action::EnableTool { client, tool } => {
                format!("{client} calls enable_tool on the session it holds, to enable {tool}")
            }
            Action::Notify { client, count } => format!("server emits {count} notification(s) on {client}'s session"),
            Action::Answer { client, label } => format!("{client} answers {label}"),
            Action::Rebind { client } => format!("NAT rebinds {client}: its mappings go silent"),
            Action::Sever { client } => format!("{client}'s latest stream is half-opened"),
            Action::Reset { client } => format!("{client}'s latest stream is reset"),
            Action::Resume { client, last_event_id: LastEventId::LastSeen, .. } => {
                format!("{client} resumes from its last seen id")
            }
            Action::Resume { client, last_event_id: LastEventId::Seen { client: by, nth, stream }, .. } => {
                let on = if *stream == SeenOn::Call { " on a tool call's stream" } else { "" };
                format!("{client} resumes with the id of the message #{nth} {by} received{on}")
            }
            Action::Resume { client, last_event_id: LastEventId::Id(n), .. } => {
                format!("{client} resumes with Last-Event-ID {n}")
            }
            Action::Resume { client, last_event_id: LastEventId::Raw(s), .. } => {
                format!("{client} resumes with Last-Event-ID {s:?}")
            }
            Action::Resume { client, last_event_id: LastEventId::None, .. } => {
                format!("{client} opens a stream on its session without Last-Event-ID")
            }
            Action::Resume { client, last_event_id: LastEventId::LastSeenPlus(k), .. } => {
                format!("{client} resumes from its last seen id {k:+}")
            }
            Action::Resume { client, last_event_id: LastEventId::SeenBefore(label), .. } => {
                format!("{client} resumes from the last id it saw before {label} was issued")
            }
            Action::StealToken { from, to, credential } => {
                format!("{to} steals {from}'s session token{}", if *credential { " and credential" } else { "" })
            }
            Action::CrashClient { client } => format!("{client} crashes"),
            Action::Wait => "wait".into(),
            Action::Call { client, tool, label, decline } => {
                let and = if *decline { ", declining what it is asked" } else { "" };
                format!("{client} calls tool {tool} ({label}){and}")
            }
            Action::StealRequestState { from, to, label, credential } => format!(
                "{to} presents {from}'s requestState of {label}{}",
                if *credential { format!(" with {from}'s credential") } else { String::new() }
            ),
            Action::TamperRequestState { client, label, how } => match how {
                Tamper::Move { onto, .. } => format!("{client} presents its requestState of {label} on {onto}"),
                other => format!("{client} presents its requestState of {label} altered ({})", other.word()),
            },
            Action::ReplayRequestState { client, label } => {
                format!("{client} presents its last requestState of {label} again")
            }
            Action::RestartServer => "the server restarts: its memory and per-process keys are gone".into(),
            Action::Listen { client } => format!("{client} listens for tool-list changes"),
            Action::ChangeTools => "the server's tool list changes".into(),
            Action::SeverCall { client, label } => format!("the stream of {client}'s call {label} is half-opened"),
            Action::ResetCall { client, label } => format!("the stream of {client}'s call {label} is reset"),
            Action::RestartReplica { replica } => {
                format!("replica {replica} restarts: its memory and per-process keys are gone")
            }
            Action::CrashReplica { replica } => format!("replica {replica} crashes and stays down"),
            Action::Drain { replica } => {
                format!("replica {replica} is drained: no new connections; its open streams stay")
            }
            Action::Partition { replica, lasts } => format!(
                "replica {replica} loses its link to the store{}",
                lasts.map(|d| format!(" for {}", format_duration(d))).unwrap_or_else(|| " to the end".into())
            ),
        }
    }
}

/// One scenario step: when it fires, and what it does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// When an `at` step fires (zero for triggered steps).
    pub at: Duration,
    /// A triggered step: fires `delay` after the first matching event once armed
    /// (a triggered step is armed when every step before it in the file has fired).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
    /// Its `id`, which a triggered step's `after = { event = "step", step = ... }` names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What it does (the `do` key and its fields).
    #[serde(flatten)]
    pub action: Action,
    /// `may_miss = true`: the step may act on nothing (its fault find
    /// nothing to hit, its client be unable to carry it out) without failing
    /// the run's `[expect]`. Generated plans set it on every step: a hunt
    /// counts what landed instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub may_miss: bool,
}

impl Step {
    /// A step a hunt's generator drew: at a time, no id, and allowed to
    /// miss (a hunt counts what landed instead).
    pub fn generated(at: Duration, action: Action) -> Step {
        Step { at, after: None, id: None, action, may_miss: true }
    }
}

/// A protocol-aware trigger and its delay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct After {
    /// The event it waits for.
    pub trigger: Trigger,
    /// How long after that event the step fires.
    pub delay: Duration,
}

/// An observable event a step can wait for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Trigger {
    /// A labelled server request reached a client.
    Delivered {
        /// The request's label.
        label: String,
        /// The client it must reach; any client when `None`.
        client: Option<String>,
    },
    /// The application saw the labelled request answered.
    Answered {
        /// The request's label.
        label: String,
    },
    /// A client got an HTTP 200 with an event stream: a stream it asked for was accepted.
    Accepted {
        /// The client whose stream was accepted.
        client: String,
    },
    /// A step fired.
    Step {
        /// The step's `id`.
        step: String,
    },
}

/// A validated scenario: everything a run needs, nothing left to check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The scenario's name (`[scenario] name`).
    pub name: String,
    /// What the scenario is about, in words (may be empty).
    pub description: String,
    /// The wire dialect the clients speak.
    pub dialect: Dialect,
    /// The seed a run uses unless one is given.
    pub seed: Seed,
    /// How long a run lasts, in simulated time.
    pub duration: Duration,
    /// `[server]`: how the reference engine is configured.
    pub server: ServerConfig,
    /// `[network]`: latency, tick and NAT lifetimes.
    pub network: NetworkConfig,
    /// `[deployment]`: the replicas and the balancer's routing.
    #[serde(skip_serializing_if = "Deployment::is_single")]
    pub deployment: Deployment,
    /// The clients, in file order.
    pub clients: Vec<ClientSpec>,
    /// The steps, in file order.
    pub steps: Vec<Step>,
    /// `[[tool]]` (stateless-http): the tools the server offers, in file order.
    pub tools: Vec<ToolSpec>,
    /// server name → the checks it must violate (empty: must pass all).
    pub expect: BTreeMap<String, Vec<String>>,
    /// server name → the checks of its `expect` entry that it violates only
    /// inherently (`[expect_inherent]`; none listed: none may be inherent).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub expect_inherent: BTreeMap<String, Vec<String>>,
    /// The file the plan was loaded from (set by [`Plan::load`]; none for a plan built in code).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

fn is_true(b: &bool) -> bool {
    *b
}
