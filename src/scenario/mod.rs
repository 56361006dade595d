//! Scenario files (TOML v1, DESIGN.md §4) and the validated [`Plan`] they become.
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

mod validate;
pub use crate::vocab::StepKind;
pub use validate::PlanProblem;

/// The property ids a scenario's `[expect]` may name (DESIGN.md §1).
pub const CHECK_IDS: &[&str] = crate::vocab::CheckId::NAMES;

/// The step kinds (`do = "..."`).
pub const STEP_KINDS: &[&str] = StepKind::NAMES;

/// `", did you mean \"x\"?"` when `word` looks like a typo of a candidate.
fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    crate::error::did_you_mean(word, candidates).map_or(String::new(), |c| format!(", did you mean {c:?}?"))
}

/// Adds a suggestion to toml's "unknown field `x`, expected one of `a`, `b`"
/// (and "unknown variant") messages.
fn with_suggestion(message: &str) -> String {
    if message.contains("untagged enum LastEventIdRaw") {
        return LAST_EVENT_ID_FORMS.into();
    }
    let quoted = |s: &str| -> Vec<String> { s.split('`').skip(1).step_by(2).map(str::to_string).collect() };
    for kind in ["unknown field", "unknown variant"] {
        if let Some(rest) = message.trim().strip_prefix(kind) {
            let (word, expected) = match rest.split_once("expected") {
                Some((w, e)) => (quoted(w), quoted(e)),
                None => (quoted(rest), Vec::new()),
            };
            if let Some(word) = word.first() {
                if let Some(s) = crate::error::did_you_mean(word, expected.iter().map(String::as_str)) {
                    return format!("{}; did you mean `{s}`?", message.trim());
                }
            }
        }
    }
    message.trim().to_string()
}

/// The byte range of the first `key =` line in `text` (for errors about a value).
fn find_key(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')) {
            let start = offset + (line.len() - trimmed.len());
            return Some(start..start + key.len());
        }
        offset += line.len();
    }
    None
}

/// The wire dialect a run speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// The seed's: `GET /mcp/sse`, `event: endpoint`, POST downlink.
    #[default]
    LegacySse,
    /// MCP 2025-11-25 Streamable HTTP: one endpoint, `Mcp-Session-Id`, resume by GET.
    StreamableHttp,
}

// ---------- the file as written ----------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: RawMeta,
    #[serde(default)]
    server: ServerConfig,
    #[serde(default)]
    network: RawNetwork,
    #[serde(default, rename = "client")]
    clients: Vec<RawClient>,
    #[serde(default, rename = "step")]
    steps: Vec<RawStep>,
    #[serde(default)]
    #[schemars(schema_with = "expect_schema")]
    expect: BTreeMap<Spanned<String>, Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawMeta {
    name: String,
    #[serde(default)]
    description: String,
    #[schemars(with = "Option<Dialect>")]
    dialect: Option<Spanned<Dialect>>,
    #[serde(default)]
    seed: u64,
    duration: Dur,
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
    pub heartbeat: Dur,
    /// How long a resumption may wait for the prior writer to be fenced.
    pub fence_grace: Dur,
    /// How long fencing a prior writer takes to be confirmed (default 0:
    /// at once). Models a writer blocked on a full socket buffer, or held by
    /// another worker: a fence slower than `fence_grace` cannot be confirmed.
    pub fence_delay: Dur,
    /// When an unanswered server request times out.
    pub request_timeout: Dur,
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
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
struct RawNetwork {
    latency: Latency,
    half_open_lifetime: Dur,
    tick: Dur,
}

impl Default for RawNetwork {
    fn default() -> Self {
        Self {
            latency: Latency::Fixed(Dur(Duration::from_millis(5))),
            half_open_lifetime: Dur(Duration::from_secs(90)),
            tick: Dur(DEFAULT_TICK),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum Latency {
    Fixed(Dur),
    Range(LatencyRange),
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LatencyRange {
    min: Dur,
    max: Dur,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawClient {
    #[schemars(with = "String")]
    name: Spanned<String>,
    /// The credential (`Authorization: Bearer <principal>`); defaults to the name.
    #[schemars(with = "Option<String>")]
    principal: Option<Spanned<String>>,
    think_time: Option<Dur>,
    heartbeat_timeout: Option<Dur>,
    auto_answer: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawStep {
    /// A step id, for `after = { event = "step", step = "..." }`.
    #[schemars(with = "Option<String>")]
    id: Option<Spanned<String>>,
    /// When the step fires; or use `after`.
    #[schemars(with = "Option<Dur>")]
    at: Option<Spanned<Dur>>,
    /// Fire after an observable event instead of at a time.
    #[schemars(with = "Option<RawTrigger>")]
    after: Option<Spanned<RawTrigger>>,
    /// With `after`: how long after the event.
    delay: Option<Dur>,
    #[serde(rename = "do")]
    #[schemars(schema_with = "step_kind_schema")]
    action: Spanned<String>,
    #[schemars(with = "Option<String>")]
    client: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(schema_with = "method_schema")]
    method: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    label: Option<Spanned<String>>,
    #[schemars(with = "Option<u64>")]
    count: Option<Spanned<u64>>,
    #[schemars(with = "Option<LastEventIdRaw>")]
    last_event_id: Option<Spanned<LastEventIdRaw>>,
    #[schemars(with = "Option<String>")]
    from: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    to: Option<Spanned<String>>,
    #[schemars(with = "Option<bool>")]
    credential: Option<Spanned<bool>>,
    /// `resume` only: `"accepted"` or `"refused"`, what the server must do.
    #[schemars(with = "Option<ResumeExpect>")]
    expect: Option<Spanned<ResumeExpect>>,
    /// `server-request` only: `false` when the request must not be re-issued
    /// under a fresh id (its effect is not idempotent); default `true`.
    #[schemars(with = "Option<bool>")]
    reissuable: Option<Spanned<bool>>,
}

/// What a triggered step waits for (`after = { event = ..., ... }`).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "kebab-case", deny_unknown_fields)]
enum RawTrigger {
    /// A server request (by label) reached a client (any client if none is named).
    Delivered { label: String, client: Option<String> },
    /// The application saw the labelled request answered.
    Answered { label: String },
    /// The client's uplink GET was answered with an event stream.
    Accepted { client: String },
    /// The step with this id fired.
    Step { step: String },
}

#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum LastEventIdRaw {
    Id(u64),
    Word(String),
    Seen(SeenRaw),
    Raw(RawIdRaw),
    LastSeenPlus(LastSeenPlusRaw),
}

/// What `last_event_id` may be, for error messages.
const LAST_EVENT_ID_FORMS: &str = "last_event_id must be an integer, \"last-seen\", \"none\", { seen_by = \"client\", nth = 1 }, { raw = \"any id\" } or { last_seen_plus = -4 }";

/// `{ last_seen_plus = -4 }`: the resuming client's last seen id plus an
/// offset (numeric ids only): the window's edges, wherever the run put them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LastSeenPlusRaw {
    last_seen_plus: i64,
}

/// `{ raw = "abc" }`: any `Last-Event-ID` value, sent as it is (a guessed or malformed id).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawIdRaw {
    raw: String,
}

/// `{ seen_by = "alice", nth = 1 }`: the nth message event id alice received.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SeenRaw {
    seen_by: String,
    nth: usize,
    /// Where the id was seen: the client's uplink (default) or its tool calls' streams.
    #[serde(default)]
    stream: SeenOn,
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

// ---------- the JSON Schema, derived from the types above ----------

fn step_kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": STEP_KINDS, "description": "what the step does" })
}

fn method_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": SERVER_REQUEST_METHODS })
}

fn expect_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "server name -> the checks it must violate ([] = must pass all)",
        "propertyNames": { "enum": crate::vocab::SERVERS },
        "additionalProperties": { "type": "array", "items": { "enum": CHECK_IDS }, "uniqueItems": true }
    })
}

/// The JSON Schema of scenario files, derived from the loader's own types so
/// it cannot drift from what `mcpsim run` accepts.
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(RawFile);
    schema.insert("title".into(), "mcpsim scenario (TOML v1)".into());
    serde_json::to_string_pretty(&schema).expect("schemas serialize")
}

// ---------- the validated plan ----------

/// `[network]` after validation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetworkConfig {
    /// The simulation tick: network hops are rounded up to it.
    pub tick: Duration,
    pub latency_min: Duration,
    pub latency_max: Duration,
    pub half_open_lifetime: Duration,
}

/// One simulated client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClientSpec {
    pub name: String,
    /// The credential it presents (`Authorization: Bearer <principal>`).
    pub principal: String,
    /// How long it takes to answer a server request.
    pub think_time: Duration,
    /// Silence after which it gives up on its uplink and resumes.
    pub heartbeat_timeout: Duration,
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
        client: String,
        nth: usize,
        #[serde(skip_serializing_if = "is_uplink")]
        stream: SeenOn,
    },
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
    Connect {
        client: String,
    },
    ServerRequest {
        client: String,
        method: String,
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
        client: String,
        method: String,
        label: String,
    },
    /// streamable-http: the client ends its session with DELETE.
    EndSession {
        client: String,
    },
    Notify {
        client: String,
        count: u64,
    },
    Answer {
        client: String,
        label: String,
    },
    Rebind {
        client: String,
    },
    Sever {
        client: String,
    },
    Reset {
        client: String,
    },
    Resume {
        client: String,
        last_event_id: LastEventId,
        /// What the server must do with this resumption (opt-in): the
        /// scenario's author knows whether every condition holds.
        #[serde(skip_serializing_if = "Option::is_none")]
        expect: Option<ResumeExpect>,
    },
    StealToken {
        from: String,
        to: String,
        credential: bool,
    },
    CrashClient {
        client: String,
    },
    Wait,
}

impl Action {
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
            Action::Notify { .. } => StepKind::Notify,
            Action::Answer { .. } => StepKind::Answer,
            Action::Rebind { .. } => StepKind::Rebind,
            Action::Sever { .. } => StepKind::Sever,
            Action::Reset { .. } => StepKind::Reset,
            Action::Resume { .. } => StepKind::Resume,
            Action::StealToken { .. } => StepKind::StealToken,
            Action::CrashClient { .. } => StepKind::CrashClient,
            Action::Wait => StepKind::Wait,
        }
    }

    /// The clients this step names.
    pub fn clients(&self) -> Vec<&str> {
        match self {
            Action::StealToken { from, to, .. } => vec![from, to],
            Action::Connect { client }
            | Action::ServerRequest { client, .. }
            | Action::CallTool { client, .. }
            | Action::EndSession { client }
            | Action::Notify { client, .. }
            | Action::Answer { client, .. }
            | Action::Rebind { client }
            | Action::Sever { client }
            | Action::Reset { client }
            | Action::Resume { client, .. }
            | Action::CrashClient { client } => vec![client],
            Action::Wait => vec![],
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
            Action::StealToken { from, to, credential } => {
                format!("{to} steals {from}'s session token{}", if *credential { " and credential" } else { "" })
            }
            Action::CrashClient { client } => format!("{client} crashes"),
            Action::Wait => "wait".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// When an `at` step fires (zero for triggered steps).
    pub at: Duration,
    /// A triggered step: fires `delay` after the first matching event once armed
    /// (a triggered step is armed when every step before it in the file has fired).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(flatten)]
    pub action: Action,
}

/// A protocol-aware trigger and its delay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct After {
    pub trigger: Trigger,
    pub delay: Duration,
}

/// An observable event a step can wait for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Trigger {
    Delivered { label: String, client: Option<String> },
    Answered { label: String },
    Accepted { client: String },
    Step { step: String },
}

/// A validated scenario: everything a run needs, nothing left to check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub name: String,
    pub description: String,
    pub dialect: Dialect,
    pub seed: Seed,
    pub duration: Duration,
    pub server: ServerConfig,
    pub network: NetworkConfig,
    pub clients: Vec<ClientSpec>,
    pub steps: Vec<Step>,
    /// server name → the checks it must violate (empty: must pass all).
    pub expect: BTreeMap<String, Vec<String>>,
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl Plan {
    /// Loads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Plan> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::io(format!("{}: cannot read: {e}", path.display())))?;
        let mut plan = Self::from_toml_str(&text, path)?;
        plan.source = Some(path.to_path_buf());
        Ok(plan)
    }

    /// Parses and validates scenario text; `path` only names it in errors.
    pub fn from_toml_str(text: &str, path: impl AsRef<Path>) -> Result<Plan> {
        let path = path.as_ref();
        let raw: RawFile = toml::from_str(text)
            .map_err(|e| Error::scenario_at(path, text, e.span(), with_suggestion(&e.message().replace('\n', "; "))))?;
        let err = |span: std::ops::Range<usize>, msg: String| Error::scenario_at(path, text, Some(span), msg);
        let at_key = |key: &str| find_key(text, key);

        let dialect = raw.scenario.dialect.as_ref().map(|d| *d.get_ref()).unwrap_or_default();
        let server = raw.server;
        if server.retention == 0 {
            return Err(Error::scenario_at(path, text, at_key("retention"), "[server] retention must be at least 1"));
        }
        let (latency_min, latency_max) = match raw.network.latency {
            Latency::Fixed(d) => (d.0, d.0),
            Latency::Range(r) => (r.min.0, r.max.0),
        };
        if raw.network.tick.0 < Duration::from_millis(1) || raw.network.tick.0 > Duration::from_secs(1) {
            return Err(Error::scenario_at(path, text, at_key("tick"), "[network] tick must be between 1ms and 1s"));
        }
        if latency_min > latency_max {
            return Err(Error::scenario_at(
                path,
                text,
                at_key("latency"),
                "[network] latency: min is greater than max",
            ));
        }

        let mut clients = Vec::new();
        let mut names = BTreeSet::new();
        for c in raw.clients {
            let name = c.name.get_ref().clone();
            if name.is_empty() || !name.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_') {
                return Err(err(
                    c.name.span(),
                    format!("client name {name:?} must be non-empty ASCII letters, digits, '-' or '_'"),
                ));
            }
            if name == "server" || name.starts_with("nat-") {
                return Err(err(
                    c.name.span(),
                    format!("client name {name:?} is reserved for the simulation's own hosts"),
                ));
            }
            if !names.insert(name.clone()) {
                return Err(err(c.name.span(), format!("client {name:?} is defined twice")));
            }
            // The principal travels in an HTTP header: visible ASCII, no spaces.
            if let Some(p) = &c.principal {
                let v = p.get_ref();
                if v.is_empty() || !v.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
                    return Err(err(
                        p.span(),
                        format!("principal {v:?} must be non-empty visible ASCII without spaces (it is sent as a bearer credential)"),
                    ));
                }
            }
            clients.push(ClientSpec {
                principal: c.principal.map_or_else(|| name.clone(), Spanned::into_inner),
                name,
                think_time: c.think_time.map_or(Duration::from_secs(1), |d| d.0),
                heartbeat_timeout: c.heartbeat_timeout.map_or(server.heartbeat.0 * 5 / 2, |d| d.0),
                auto_answer: c.auto_answer.unwrap_or(true),
            });
        }

        let mut steps = Vec::new();
        let mut labels = BTreeSet::new();
        let mut last_at = Duration::ZERO;
        let mut step_ids: Vec<String> = Vec::new();
        let step_spans: Vec<std::ops::Range<usize>> = raw.steps.iter().map(|s| s.action.span()).collect();
        for s in raw.steps {
            let (at, after) = match (&s.at, &s.after) {
                (Some(_), Some(a)) => {
                    return Err(err(a.span(), "a step has either `at` or `after`, not both".into()));
                }
                (None, None) => {
                    return Err(err(s.action.span(), "a step needs `at` (a time) or `after` (an event)".into()));
                }
                (Some(at), None) => {
                    if s.delay.is_some() {
                        return Err(err(at.span(), "`delay` goes with `after`, not with `at`".into()));
                    }
                    let t = at.get_ref().0;
                    if t < last_at {
                        return Err(err(
                            at.span(),
                            format!(
                                "step at {} comes before the previous step at {}; steps must be in time order",
                                format_duration(t),
                                format_duration(last_at)
                            ),
                        ));
                    }
                    last_at = t;
                    (t, None)
                }
                (None, Some(a)) => {
                    let known_label = |label: &String| -> Result<()> {
                        if labels.contains(label) {
                            return Ok(());
                        }
                        Err(err(
                            a.span(),
                            format!("trigger names label {label:?}, which no earlier server-request step issues"),
                        ))
                    };
                    let known_client = |c: &String| -> Result<()> {
                        if names.contains(c) {
                            return Ok(());
                        }
                        let h = hint(c, names.iter().map(String::as_str));
                        Err(err(a.span(), format!("trigger names unknown client {c:?}{h}")))
                    };
                    let trigger = match a.get_ref().clone() {
                        RawTrigger::Delivered { label, client } => {
                            known_label(&label)?;
                            client.as_ref().map(known_client).transpose()?;
                            Trigger::Delivered { label, client }
                        }
                        RawTrigger::Answered { label } => {
                            known_label(&label)?;
                            Trigger::Answered { label }
                        }
                        RawTrigger::Accepted { client } => {
                            known_client(&client)?;
                            Trigger::Accepted { client }
                        }
                        RawTrigger::Step { step } => {
                            if !step_ids.contains(&step) {
                                let h = hint(&step, step_ids.iter().map(String::as_str));
                                return Err(err(
                                    a.span(),
                                    format!("trigger names step {step:?}, which is not the id of an earlier step{h}"),
                                ));
                            }
                            Trigger::Step { step }
                        }
                    };
                    (Duration::ZERO, Some(After { trigger, delay: s.delay.map_or(Duration::ZERO, |d| d.0) }))
                }
            };
            let id = match &s.id {
                Some(id) if step_ids.contains(id.get_ref()) => {
                    return Err(err(id.span(), format!("step id {:?} is used twice", id.get_ref())));
                }
                Some(id) => {
                    step_ids.push(id.get_ref().clone());
                    Some(id.get_ref().clone())
                }
                None => None,
            };
            let action_name = s.action.get_ref().as_str();
            let need_client = |f: &Option<Spanned<String>>, field: &str| -> Result<String> {
                let Some(c) = f else {
                    return Err(err(s.action.span(), format!("step `{action_name}` needs `{field}`")));
                };
                if !names.contains(c.get_ref()) {
                    return Err(err(
                        c.span(),
                        format!(
                            "unknown client {:?}{} (defined: {})",
                            c.get_ref(),
                            hint(c.get_ref(), names.iter().map(String::as_str)),
                            names.iter().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                Ok(c.get_ref().clone())
            };
            let need_label = |field: &str| -> Result<Spanned<String>> {
                s.label.clone().ok_or_else(|| err(s.action.span(), format!("step `{action_name}` needs `{field}`")))
            };
            let action = match action_name {
                "connect" => Action::Connect { client: need_client(&s.client, "client")? },
                "call-tool" | "end-session" if dialect != Dialect::StreamableHttp => {
                    return Err(err(
                        s.action.span(),
                        format!("step `{action_name}` needs dialect = \"streamable-http\" in [scenario]"),
                    ))
                }
                "server-request" | "call-tool" => {
                    let method = s
                        .method
                        .clone()
                        .ok_or_else(|| err(s.action.span(), format!("step `{action_name}` needs `method`")))?;
                    if !SERVER_REQUEST_METHODS.contains(&method.get_ref().as_str()) {
                        return Err(err(
                            method.span(),
                            format!(
                                "unknown server request method {:?}{} (one of: {})",
                                method.get_ref(),
                                hint(method.get_ref(), SERVER_REQUEST_METHODS),
                                SERVER_REQUEST_METHODS.join(", ")
                            ),
                        ));
                    }
                    let label = need_label("label")?;
                    // Labels name requests in JSON-RPC ids, reports and file names.
                    let l = label.get_ref();
                    if l.is_empty() || l.chars().any(|ch| ch.is_control()) {
                        return Err(err(
                            label.span(),
                            format!("label {l:?} must be non-empty, without control characters"),
                        ));
                    }
                    if !labels.insert(label.get_ref().clone()) {
                        return Err(err(label.span(), format!("label {:?} is used twice", label.get_ref())));
                    }
                    let (client, method, label) =
                        (need_client(&s.client, "client")?, method.into_inner(), label.into_inner());
                    if action_name == "call-tool" {
                        Action::CallTool { client, method, label }
                    } else {
                        let reissuable = s.reissuable.as_ref().is_none_or(|r| *r.get_ref());
                        Action::ServerRequest { client, method, label, reissuable }
                    }
                }
                "notify" => Action::Notify {
                    client: need_client(&s.client, "client")?,
                    count: s.count.as_ref().map_or(1, |c| *c.get_ref()),
                },
                "answer" => {
                    let label = need_label("label")?;
                    if !labels.contains(label.get_ref()) {
                        return Err(err(
                            label.span(),
                            format!("label {:?} is not issued by an earlier server-request step", label.get_ref()),
                        ));
                    }
                    Action::Answer { client: need_client(&s.client, "client")?, label: label.into_inner() }
                }
                "rebind" => Action::Rebind { client: need_client(&s.client, "client")? },
                "sever" => Action::Sever { client: need_client(&s.client, "client")? },
                "reset" => Action::Reset { client: need_client(&s.client, "client")? },
                "resume" => {
                    let last_event_id = match &s.last_event_id {
                        None => LastEventId::LastSeen,
                        Some(v) => match v.get_ref() {
                            LastEventIdRaw::Id(n) => LastEventId::Id(*n),
                            LastEventIdRaw::Word(w) if w == "last-seen" => LastEventId::LastSeen,
                            LastEventIdRaw::Word(w) if w == "none" => LastEventId::None,
                            LastEventIdRaw::Word(w) => {
                                return Err(err(v.span(), format!("{LAST_EVENT_ID_FORMS}, not {w:?}")))
                            }
                            LastEventIdRaw::Raw(RawIdRaw { raw }) => {
                                // Sent as an HTTP header value: visible ASCII and spaces only.
                                if raw.is_empty() || !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
                                    return Err(err(
                                        v.span(),
                                        format!("raw Last-Event-ID {raw:?} must be non-empty visible ASCII (it is sent as a header)"),
                                    ));
                                }
                                LastEventId::Raw(raw.clone())
                            }
                            LastEventIdRaw::Seen(SeenRaw { seen_by, nth, stream }) => {
                                if !names.contains(seen_by) {
                                    return Err(err(v.span(), format!("seen_by names unknown client {seen_by:?}")));
                                }
                                if *nth == 0 {
                                    return Err(err(v.span(), "nth counts from 1".into()));
                                }
                                LastEventId::Seen { client: seen_by.clone(), nth: *nth, stream: *stream }
                            }
                            LastEventIdRaw::LastSeenPlus(LastSeenPlusRaw { last_seen_plus }) => {
                                LastEventId::LastSeenPlus(*last_seen_plus)
                            }
                        },
                    };
                    Action::Resume {
                        client: need_client(&s.client, "client")?,
                        last_event_id,
                        expect: s.expect.as_ref().map(|e| *e.get_ref()),
                    }
                }
                "end-session" => Action::EndSession { client: need_client(&s.client, "client")? },
                "steal-token" => {
                    let from = need_client(&s.from, "from")?;
                    let to = need_client(&s.to, "to")?;
                    if from == to {
                        return Err(err(s.action.span(), "steal-token needs two different clients".into()));
                    }
                    Action::StealToken { from, to, credential: s.credential.as_ref().is_some_and(|c| *c.get_ref()) }
                }
                "crash-client" => Action::CrashClient { client: need_client(&s.client, "client")? },
                "wait" => Action::Wait,
                other => {
                    return Err(err(
                        s.action.span(),
                        format!(
                            "unknown step kind {other:?}{} (one of: {})",
                            hint(other, STEP_KINDS.iter().copied()),
                            STEP_KINDS.join(", ")
                        ),
                    ))
                }
            };
            // Fields that mean nothing for this step kind are mistakes, not noise.
            let allowed: &[&str] = match &action {
                Action::Connect { .. }
                | Action::Rebind { .. }
                | Action::Sever { .. }
                | Action::Reset { .. }
                | Action::EndSession { .. }
                | Action::CrashClient { .. } => &["client"],
                Action::ServerRequest { .. } => &["client", "method", "label", "reissuable"],
                Action::CallTool { .. } => &["client", "method", "label"],
                Action::Notify { .. } => &["client", "count"],
                Action::Answer { .. } => &["client", "label"],
                Action::Resume { .. } => &["client", "last_event_id", "expect"],
                Action::StealToken { .. } => &["from", "to", "credential"],
                Action::Wait => &[],
            };
            let present = [
                ("client", s.client.as_ref().map(|x| x.span())),
                ("method", s.method.as_ref().map(|x| x.span())),
                ("label", s.label.as_ref().map(|x| x.span())),
                ("count", s.count.as_ref().map(|x| x.span())),
                ("last_event_id", s.last_event_id.as_ref().map(|x| x.span())),
                ("from", s.from.as_ref().map(|x| x.span())),
                ("to", s.to.as_ref().map(|x| x.span())),
                ("credential", s.credential.as_ref().map(|x| x.span())),
                ("expect", s.expect.as_ref().map(|x| x.span())),
                ("reissuable", s.reissuable.as_ref().map(|x| x.span())),
            ];
            for (field, span) in present {
                if let Some(span) = span {
                    if !allowed.contains(&field) {
                        return Err(err(span, format!("`{field}` does not apply to step `{action_name}`")));
                    }
                }
            }
            steps.push(Step { at, after, id, action });
        }
        if let Some(last) = steps.iter().rfind(|s| s.after.is_none()) {
            if last.at > raw.scenario.duration.0 {
                return Err(Error::scenario_at(
                    path,
                    text,
                    at_key("duration"),
                    format!(
                        "a step at {} is after the scenario's duration {}",
                        format_duration(last.at),
                        format_duration(raw.scenario.duration.0)
                    ),
                ));
            }
        }

        let mut expect = BTreeMap::new();
        for (server, checks) in raw.expect {
            if !crate::vocab::SERVERS.contains(&server.get_ref().as_str()) {
                return Err(err(
                    server.span(),
                    format!(
                        "[expect] names unknown server {:?}{} (known: {})",
                        server.get_ref(),
                        hint(server.get_ref(), crate::vocab::SERVERS.iter().copied()),
                        crate::vocab::SERVERS.join(", ")
                    ),
                ));
            }
            let mut ids = Vec::new();
            for c in checks.into_inner() {
                if !CHECK_IDS.contains(&c.get_ref().as_str()) {
                    return Err(err(
                        c.span(),
                        format!(
                            "[expect] names unknown check {:?}{} (known: {})",
                            c.get_ref(),
                            hint(c.get_ref(), CHECK_IDS.iter().copied()),
                            CHECK_IDS.join(", ")
                        ),
                    ));
                }
                ids.push(c.into_inner());
            }
            ids.sort();
            ids.dedup();
            expect.insert(server.into_inner(), ids);
        }

        let plan = Plan {
            name: raw.scenario.name,
            description: raw.scenario.description,
            dialect: raw.scenario.dialect.map(Spanned::into_inner).unwrap_or_default(),
            seed: Seed(raw.scenario.seed),
            duration: raw.scenario.duration.0,
            server,
            network: NetworkConfig {
                tick: raw.network.tick.0,
                latency_min,
                latency_max,
                half_open_lifetime: raw.network.half_open_lifetime.0,
            },
            clients,
            steps,
            expect,
            source: None,
        };
        // The checks above locate each problem exactly; this is the one
        // semantic check every plan passes (hand-built and shrunk ones too).
        plan.validate().map_err(|p| match p.step {
            Some(i) => err(step_spans[i].clone(), p.message),
            None => Error::scenario_at(path, text, None, p.message),
        })?;
        Ok(plan)
    }

    pub fn client(&self, name: &str) -> Option<&ClientSpec> {
        self.clients.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "[scenario]\nname = \"t\"\nduration = \"60s\"\n[[client]]\nname = \"alice\"\n";

    fn load(extra: &str) -> Result<Plan> {
        Plan::from_toml_str(&format!("{HEAD}{extra}"), "t.toml")
    }

    #[test]
    fn defaults_and_steps() {
        let p = load("[[step]]\nat = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = 1007\n").unwrap();
        assert_eq!(
            p.steps[0].action,
            Action::Resume { client: "alice".into(), last_event_id: LastEventId::Id(1007), expect: None }
        );
        assert_eq!(p.server.retention, 64);
        assert_eq!(p.clients[0].principal, "alice");
        assert_eq!(p.clients[0].heartbeat_timeout, Duration::from_millis(37_500));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = load("[[step]]\nat = \"1s\"\ndo = \"connect\"\nclient = \"bob\"\n").unwrap_err();
        assert!(e.to_string().starts_with("t.toml:9:10: unknown client \"bob\" (defined: alice)\n"), "{e}");
        let e = load("[[step]]\nat = \"1s\"\ndo = \"conect\"\nclient = \"alice\"\n").unwrap_err();
        assert!(e.to_string().starts_with("t.toml:8:6: unknown step kind \"conect\""), "{e}");
        let e = load("[[step]]\nat = \"1 fortnight\"\ndo = \"wait\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown unit"), "{e}");
        let e = load("[network]\nlatncy = \"1ms\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `latncy`"), "{e}");
        let e = load("[[step]]\nat = \"2s\"\ndo = \"wait\"\n[[step]]\nat = \"1s\"\ndo = \"wait\"\n").unwrap_err();
        assert!(e.to_string().contains("time order"), "{e}");
        let e = load("[expect]\nnaive = [\"liveliness\"]\n").unwrap_err();
        assert!(e.to_string().contains("unknown check \"liveliness\""), "{e}");
        let e = load("[expect]\n\"naïve\" = []\n").unwrap_err();
        assert!(e.to_string().contains("unknown server"), "{e}");
        let e = load("[[step]]\nat = \"1s\"\ndo = \"rebind\"\nclient = \"alice\"\nlabel = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("`label` does not apply to step `rebind`"), "{e}");
        let e = load("[[step]]\nat = \"1s\"\ndo = \"answer\"\nclient = \"alice\"\nlabel = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("not issued by an earlier"), "{e}");
        assert_eq!(e.exit_code(), 3);
    }
}

impl Plan {
    /// Writes the plan as a scenario file that loads back to the same plan.
    /// `header` lines become `#` comments at the top.
    pub fn to_toml(&self, header: &[String]) -> String {
        use std::fmt::Write;
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let d = |d: Duration| q(&format_duration(d));
        let mut out = String::new();
        for h in header {
            let _ = writeln!(out, "# {h}");
        }
        if !header.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "[scenario]\nname = {}", q(&self.name));
        if !self.description.is_empty() {
            let _ = writeln!(out, "description = {}", q(&self.description));
        }
        let dialect = match self.dialect {
            Dialect::LegacySse => "legacy-sse",
            Dialect::StreamableHttp => "streamable-http",
        };
        let _ = writeln!(out, "dialect = {}\nseed = {}\nduration = {}\n", q(dialect), self.seed.0, d(self.duration));
        let s = &self.server;
        let _ = writeln!(
            out,
            "[server]\nfirst_event_id = {}\nretention = {}\nheartbeat = {}\nfence_grace = {}\nrequest_timeout = {}\n",
            s.first_event_id,
            s.retention,
            d(s.heartbeat.0),
            d(s.fence_grace.0),
            d(s.request_timeout.0)
        );
        if !s.fence_delay.0.is_zero() {
            // Before the blank line the writer above ends the table with.
            out.pop();
            let _ = writeln!(out, "fence_delay = {}\n", d(s.fence_delay.0));
        }
        let n = &self.network;
        let latency = if n.latency_min == n.latency_max {
            d(n.latency_min)
        } else {
            format!("{{ min = {}, max = {} }}", d(n.latency_min), d(n.latency_max))
        };
        let _ = writeln!(
            out,
            "[network]\nlatency = {latency}\nhalf_open_lifetime = {}\ntick = {}\n",
            d(n.half_open_lifetime),
            d(n.tick)
        );
        for c in &self.clients {
            let _ = writeln!(
                out,
                "[[client]]\nname = {}\nprincipal = {}\nthink_time = {}\nheartbeat_timeout = {}\nauto_answer = {}\n",
                q(&c.name),
                q(&c.principal),
                d(c.think_time),
                d(c.heartbeat_timeout),
                c.auto_answer
            );
        }
        for step in &self.steps {
            out.push_str("[[step]]\n");
            if let Some(id) = &step.id {
                let _ = writeln!(out, "id = {}", q(id));
            }
            match &step.after {
                None => {
                    let _ = writeln!(out, "at = {}", d(step.at));
                }
                Some(after) => {
                    let trigger = match &after.trigger {
                        Trigger::Delivered { label, client: Some(c) } => {
                            format!("{{ event = \"delivered\", label = {}, client = {} }}", q(label), q(c))
                        }
                        Trigger::Delivered { label, client: None } => {
                            format!("{{ event = \"delivered\", label = {} }}", q(label))
                        }
                        Trigger::Answered { label } => format!("{{ event = \"answered\", label = {} }}", q(label)),
                        Trigger::Accepted { client } => format!("{{ event = \"accepted\", client = {} }}", q(client)),
                        Trigger::Step { step } => format!("{{ event = \"step\", step = {} }}", q(step)),
                    };
                    let _ = writeln!(out, "after = {trigger}");
                    if !after.delay.is_zero() {
                        let _ = writeln!(out, "delay = {}", d(after.delay));
                    }
                }
            }
            let _ = writeln!(out, "do = {}", q(step.action.name()));
            match &step.action {
                Action::Connect { client }
                | Action::Rebind { client }
                | Action::Sever { client }
                | Action::Reset { client }
                | Action::EndSession { client }
                | Action::CrashClient { client } => {
                    let _ = writeln!(out, "client = {}", q(client));
                }
                Action::ServerRequest { client, method, label, .. } | Action::CallTool { client, method, label } => {
                    let _ = writeln!(out, "client = {}\nmethod = {}\nlabel = {}", q(client), q(method), q(label));
                    if let Action::ServerRequest { reissuable: false, .. } = &step.action {
                        let _ = writeln!(out, "reissuable = false");
                    }
                }
                Action::Notify { client, count } => {
                    let _ = writeln!(out, "client = {}\ncount = {count}", q(client));
                }
                Action::Answer { client, label } => {
                    let _ = writeln!(out, "client = {}\nlabel = {}", q(client), q(label));
                }
                Action::Resume { client, last_event_id, expect } => {
                    let id = match last_event_id {
                        LastEventId::LastSeen => q("last-seen"),
                        LastEventId::None => q("none"),
                        LastEventId::Id(n) => n.to_string(),
                        LastEventId::Raw(s) => format!("{{ raw = {} }}", q(s)),
                        LastEventId::LastSeenPlus(k) => format!("{{ last_seen_plus = {k} }}"),
                        LastEventId::Seen { client: by, nth, stream: SeenOn::Uplink } => {
                            format!("{{ seen_by = {}, nth = {nth} }}", q(by))
                        }
                        LastEventId::Seen { client: by, nth, stream: SeenOn::Call } => {
                            format!("{{ seen_by = {}, nth = {nth}, stream = \"call\" }}", q(by))
                        }
                    };
                    let _ = writeln!(out, "client = {}\nlast_event_id = {id}", q(client));
                    if let Some(e) = expect {
                        let _ = writeln!(out, "expect = {}", q(e.word()));
                    }
                }
                Action::StealToken { from, to, credential } => {
                    let _ = writeln!(out, "from = {}\nto = {}\ncredential = {credential}", q(from), q(to));
                }
                Action::Wait => {}
            }
            out.push('\n');
        }
        if !self.expect.is_empty() {
            out.push_str("[expect]\n");
            for (server, checks) in &self.expect {
                let list: Vec<String> = checks.iter().map(|c| q(c)).collect();
                let _ = writeln!(out, "{server} = [{}]", list.join(", "));
            }
        }
        out
    }
}

#[cfg(test)]
mod to_toml_tests {
    use super::*;

    #[test]
    fn bundled_scenarios_round_trip_through_to_toml() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let twins = std::fs::read_dir(dir.join("streamable-http")).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap().chain(twins) {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let plan = Plan::load(&path).unwrap();
            let text = plan.to_toml(&["a header".into()]);
            let back = Plan::from_toml_str(&text, "round-trip.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(Plan { source: plan.source.clone(), ..back }, plan, "{}", path.display());
        }
    }
}

fn is_true(b: &bool) -> bool {
    *b
}
