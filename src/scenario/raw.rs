//! The scenario file as written: the types TOML deserializes into (with
//! spans for located errors), and the JSON Schema derived from them.

use super::duration::Dur;
use super::{Deployment, Dialect, ResumeExpect, SeenOn, ServerConfig, CHECK_IDS, DEFAULT_TICK, STEP_KINDS};
use crate::wire::jsonrpc::mcp::SERVER_REQUEST_METHODS;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

// ---------- the file as written ----------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) scenario: RawMeta,
    #[serde(default)]
    pub(super) server: ServerConfig,
    #[serde(default)]
    pub(super) network: RawNetwork,
    #[serde(default)]
    pub(super) deployment: Deployment,
    #[serde(default, rename = "client")]
    pub(super) clients: Vec<RawClient>,
    #[serde(default, rename = "step")]
    pub(super) steps: Vec<RawStep>,
    /// stateless-http: the tools the server offers.
    #[serde(default, rename = "tool")]
    pub(super) tools: Vec<RawTool>,
    #[serde(default)]
    #[schemars(schema_with = "expect_schema")]
    pub(super) expect: BTreeMap<Spanned<String>, Spanned<Vec<Spanned<String>>>>,
    /// Of the checks `[expect]` lists for a server, those it violates only
    /// inherently (every finding one no server could prevent).
    #[serde(default)]
    #[schemars(schema_with = "expect_inherent_schema")]
    pub(super) expect_inherent: BTreeMap<Spanned<String>, Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMeta {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[schemars(with = "Option<Dialect>")]
    pub(super) dialect: Option<Spanned<Dialect>>,
    #[serde(default)]
    pub(super) seed: u64,
    pub(super) duration: Dur,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawNetwork {
    pub(super) latency: Latency,
    pub(super) half_open_lifetime: Dur,
    pub(super) tick: Dur,
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
pub(super) enum Latency {
    Fixed(Dur),
    Range(LatencyRange),
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LatencyRange {
    pub(super) min: Dur,
    pub(super) max: Dur,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    #[schemars(with = "String")]
    pub(super) name: Spanned<String>,
    /// The credential (`Authorization: Bearer <principal>`); defaults to the name.
    #[schemars(with = "Option<String>")]
    pub(super) principal: Option<Spanned<String>>,
    pub(super) think_time: Option<Dur>,
    pub(super) heartbeat_timeout: Option<Dur>,
    pub(super) auto_answer: Option<bool>,
}

/// `[[tool]]` (stateless-http): a tool the server offers.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    #[schemars(with = "String")]
    pub(super) name: Spanned<String>,
    /// How long one execution runs before its side effect and result (default 0s).
    pub(super) runs: Option<Dur>,
    /// How often an execution sends progress (default: never).
    pub(super) progress_every: Option<Dur>,
    /// The inputs the tool asks for first, in one MRTR round: a method, or a list of them.
    #[serde(default)]
    #[schemars(schema_with = "methods_schema")]
    pub(super) input: Option<Spanned<OneOrMany>>,
    /// Its requestState is a one-time redemption (default false).
    pub(super) once: Option<bool>,
    /// Running it twice does no harm (default false).
    pub(super) idempotent: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    /// A step id, for `after = { event = "step", step = "..." }`.
    #[schemars(with = "Option<String>")]
    pub(super) id: Option<Spanned<String>>,
    /// When the step fires; or use `after`.
    #[schemars(with = "Option<Dur>")]
    pub(super) at: Option<Spanned<Dur>>,
    /// Fire after an observable event instead of at a time.
    #[schemars(with = "Option<RawTrigger>")]
    pub(super) after: Option<Spanned<RawTrigger>>,
    /// With `after`: how long after the event.
    pub(super) delay: Option<Dur>,
    /// The step may act on nothing (a fault that may find nothing to hit, a
    /// resume that may find no id) without failing the run's `[expect]`.
    #[serde(default)]
    pub(super) may_miss: bool,
    #[serde(rename = "do")]
    #[schemars(schema_with = "step_kind_schema")]
    pub(super) action: Spanned<String>,
    #[schemars(with = "Option<String>")]
    pub(super) client: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(schema_with = "method_schema")]
    pub(super) method: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) label: Option<Spanned<String>>,
    #[schemars(with = "Option<u64>")]
    pub(super) count: Option<Spanned<u64>>,
    #[schemars(with = "Option<LastEventIdRaw>")]
    pub(super) last_event_id: Option<Spanned<LastEventIdRaw>>,
    #[schemars(with = "Option<String>")]
    pub(super) from: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) to: Option<Spanned<String>>,
    #[schemars(with = "Option<bool>")]
    pub(super) credential: Option<Spanned<bool>>,
    /// `resume` only: `"accepted"` or `"refused"`, what the server must do.
    #[schemars(with = "Option<ResumeExpect>")]
    pub(super) expect: Option<Spanned<ResumeExpect>>,
    /// `server-request` only: `false` when the request must not be re-issued
    /// under a fresh id (its effect is not idempotent); default `true`.
    #[schemars(with = "Option<bool>")]
    pub(super) reissuable: Option<Spanned<bool>>,
    /// `call` only (stateless-http): `true` when the client declines the
    /// elicitations the server asks it for this call (default `false`).
    #[schemars(with = "Option<bool>")]
    pub(super) decline: Option<Spanned<bool>>,
    /// `call` only (stateless-http): the tool to call, a `[[tool]]`.
    #[schemars(with = "Option<String>")]
    pub(super) tool: Option<Spanned<String>>,
    /// `tamper-request-state` only: `"flip"`, `"truncate"` or `"move"` (with `onto`).
    #[schemars(with = "Option<TamperHow>")]
    pub(super) how: Option<Spanned<TamperHow>>,
    /// `tamper-request-state` with `how = "move"`: the call whose request carries the state.
    #[schemars(with = "Option<String>")]
    pub(super) onto: Option<Spanned<String>>,
    /// `partition`, `restart-replica`, `crash-replica` and `drain`: the replica (from 1) it acts on.
    #[schemars(with = "Option<u32>")]
    pub(super) replica: Option<Spanned<u32>>,
    /// `partition` only: how long it lasts (default: to the end of the run).
    #[serde(rename = "for")]
    #[schemars(with = "Option<Dur>")]
    pub(super) lasts: Option<Spanned<Dur>>,
}

/// How a `tamper-request-state` step alters the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(super) enum TamperHow {
    Flip,
    Truncate,
    Move,
}

/// What a triggered step waits for (`after = { event = ..., ... }`).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "kebab-case", deny_unknown_fields)]
pub(super) enum RawTrigger {
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
pub(super) enum LastEventIdRaw {
    Id(u64),
    Word(String),
    Seen(SeenRaw),
    Raw(RawIdRaw),
    LastSeenPlus(LastSeenPlusRaw),
    SeenBefore(SeenBeforeRaw),
}

/// `{ seen_before = "r3" }`: the last id the resuming client saw on its
/// uplink before the server issued request `r3` (a `server-request` label).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SeenBeforeRaw {
    pub(super) seen_before: String,
}

/// What `last_event_id` may be, for error messages.
pub(super) const LAST_EVENT_ID_FORMS: &str = "last_event_id must be an integer, \"last-seen\", \"none\", { seen_by = \"client\", nth = 1 }, { raw = \"any id\" }, { last_seen_plus = -4 } or { seen_before = \"label\" }";

/// `{ last_seen_plus = -4 }`: the resuming client's last seen id plus an
/// offset (numeric ids only): the window's edges, wherever the run put them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LastSeenPlusRaw {
    pub(super) last_seen_plus: i64,
}

/// `{ raw = "abc" }`: any `Last-Event-ID` value, sent as it is (a guessed or malformed id).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdRaw {
    pub(super) raw: String,
}

/// `{ seen_by = "alice", nth = 1 }`: the nth message event id alice received.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SeenRaw {
    pub(super) seen_by: String,
    pub(super) nth: usize,
    /// Where the id was seen: the client's uplink (default) or its tool calls' streams.
    #[serde(default)]
    pub(super) stream: SeenOn,
}

// ---------- the JSON Schema, derived from the types above ----------

pub(super) fn step_kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": STEP_KINDS, "description": "what the step does" })
}

pub(super) fn method_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": SERVER_REQUEST_METHODS })
}

pub(super) fn methods_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "oneOf": [
        { "type": "string", "enum": SERVER_REQUEST_METHODS },
        { "type": "array", "items": { "type": "string", "enum": SERVER_REQUEST_METHODS }, "minItems": 1 }
    ] })
}

/// A method, or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(super) fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(m) => vec![m],
            OneOrMany::Many(ms) => ms,
        }
    }
}

pub(super) fn expect_inherent_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "server name -> the checks of its [expect] entry that it violates only inherently (every finding one no server could prevent)",
        "propertyNames": { "enum": crate::vocab::expect_keys().collect::<Vec<_>>() },
        "additionalProperties": { "type": "array", "items": { "enum": CHECK_IDS }, "uniqueItems": true }
    })
}

pub(super) fn expect_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "server name -> the checks it must violate ([] = must pass all)",
        "propertyNames": { "enum": crate::vocab::expect_keys().collect::<Vec<_>>() },
        "additionalProperties": { "type": "array", "items": { "enum": CHECK_IDS }, "uniqueItems": true }
    })
}

/// The JSON Schema of scenario files, derived from the loader's own types so
/// it cannot drift from what `mcpsim run` accepts.
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(RawFile);
    schema.insert("title".into(), "mcpsim scenario (TOML v1)".into());
    // [expect] names the servers and checks of the scenario's own dialect
    // (the loader says the same, with the line).
    let expect_of = |servers: Vec<&str>, checks: Vec<&str>| {
        serde_json::json!({ "properties": { "expect": {
            "propertyNames": { "enum": servers },
            "additionalProperties": { "type": "array", "items": { "enum": checks }, "uniqueItems": true }
        } } })
    };
    let names = |cs: &[crate::vocab::CheckId]| cs.iter().map(|c| c.as_str()).collect::<Vec<_>>();
    let stateful: Vec<&str> = crate::vocab::SERVERS
        .iter()
        .copied()
        .filter(|s| crate::vocab::speaks_stateful(s))
        .chain(crate::vocab::LIVE_SERVERS.iter().copied())
        .collect();
    let stateless_dialects: Vec<&str> =
        super::Dialect::ALL.into_iter().filter(|d| d.family() == super::Family::Stateless).map(|d| d.name()).collect();
    schema.insert(
        "allOf".into(),
        serde_json::json!([{
            "if": { "properties": { "scenario": { "properties": { "dialect": { "enum": stateless_dialects } }, "required": ["dialect"] } } },
            "then": expect_of(
                crate::vocab::STATELESS_SERVERS.iter().chain(crate::vocab::LIVE_STATELESS).copied().collect(),
                names(crate::vocab::CheckId::STATELESS)
            ),
            "else": expect_of(stateful, names(crate::vocab::CheckId::STATEFUL)),
        }]),
    );
    serde_json::to_string_pretty(&schema).expect("schemas serialize")
}
