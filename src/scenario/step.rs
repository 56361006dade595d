//! What a plan's steps are: when each fires ([`Step`], [`After`],
//! [`Trigger`]) and what it does ([`Action`]).

use super::{format_duration, StepKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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

/// Serde's `skip_serializing_if` for a flag that is true by default (`reissuable`).
fn is_true(b: &bool) -> bool {
    *b
}
