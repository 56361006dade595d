//! The trace: the single record of a run.
//!
//! Every event carries the simulated time at which an actor observed or did
//! it. Client, NAT, application and step events are *observable*: a user of
//! a real deployment could see them. `server-note` events come from inside
//! the reference engine and only explain (docs/design.md §2: checks never decide
//! on them).
//!
//! # Invariant: `seq` order is time order
//! Every event carries the simulated time at which it happened, and a
//! finished [`Trace`] is ordered by that time: `events[i].seq == i` and
//! `t_us` never decreases. turmoil runs hosts one after another within a
//! tick (each host's clock sweeps the whole tick), so the recorder collects
//! events in execution order and [`Recorder::take`] sorts them by time,
//! stably: events of one instant keep the order in which they were recorded.
//! That order is causal: within a host its clock only moves forward, and a
//! message between hosts takes at least one tick (the world never sets a
//! zero network latency), so a cause always lies at an earlier time than its
//! effect in another host.

use crate::vocab::StepKind;
pub use crate::vocab::{ConnId, MappingId};
use crate::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

mod missed;
mod recorder;
pub(crate) mod run;
pub mod stateless;
mod what;
pub use missed::{missed_steps, step_misses, MissedStep};
pub use recorder::{Clock, Recorder};
pub use run::{EarlierTry, Fnv1a, LateStep, LiveInfo, Run};
pub use what::What;

/// Simulated time in microseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SimTime(pub u64);

impl SimTime {
    /// A duration since the start, cut to whole microseconds.
    pub fn from_duration(d: Duration) -> Self {
        SimTime(d.as_micros() as u64)
    }
    /// The time as a duration since the start of the run.
    pub fn as_duration(self) -> Duration {
        Duration::from_micros(self.0)
    }
    /// The time in seconds, with fractions.
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03} s", self.0 / 1_000_000, (self.0 % 1_000_000) / 1000)
    }
}

/// One trace event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Its position in the finished trace (`events[i].seq == i`).
    pub seq: u64,
    /// When the actor observed or did it, in simulated time.
    pub t_us: SimTime,
    /// What happened; its fields sit beside `seq` and `t_us` in the JSON.
    #[serde(flatten)]
    pub what: What,
}

/// What a client's TCP connection was opened for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// A GET for an SSE stream: the legacy-sse uplink, or the standalone stream of streamable-http.
    Uplink,
    /// A POST carrying a message to the server (`initialize`, an answer), or the DELETE that ends a session.
    Post,
    /// streamable-http: a tool call's POST and the GETs that resume its stream.
    Call,
}

/// An SSE event as the NAT saw it in a dropped mapping.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseSeen {
    /// The event's `id:` field, if it set one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub id: Option<String>,
    /// The event type (`message` when the block named none).
    pub event: String,
    /// The JSON-RPC message in its data, if the data parsed as one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rpc: Option<RpcSummary>,
}

/// What a scenario step says the server must do with a client's resumption.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepExpect {
    /// The client that resumes (the step's `client`).
    pub client: String,
    /// `accepted` or `refused`.
    pub resumption: String,
}

/// How the application saw a server request end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The client's answer reached the application.
    Answered,
    /// It failed explicitly: the client answered with an error, or the server
    /// failed it (at a resumption, or when its session ended).
    Failed,
    /// The server re-sent it under a fresh id (`new_id`); the old id is dead.
    Reissued,
    /// No answer came within the server's request timeout.
    TimedOut,
}

/// The JSON-RPC request a client's POST carried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// Its id: the response names it.
    pub id: RpcId,
    /// Its method (`tools/call`, `initialize`).
    pub method: String,
    /// A tool call's label (the `label` argument of the `ask` tool), if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub call: Option<String>,
}

/// The `reason` of an [`What::UplinkEnded`] when the server ended the stream
/// in good order (in streamable-http, SSE polling: the client comes back).
pub const SERVER_ENDED: &str = "server ended the stream";

impl What {
    /// A client's record of SSE event `ev` on `conn`, with the message its
    /// data parsed as (if any) and the data cut to 256 characters.
    pub(crate) fn sse_event(
        client: String,
        conn: ConnId,
        ev: &crate::wire::sse::Event,
        msg: Option<&crate::wire::jsonrpc::Message>,
    ) -> What {
        What::SseEvent {
            client,
            conn,
            id: ev.id.clone(),
            event: ev.event.clone(),
            rpc: msg.map(crate::wire::jsonrpc::Message::summary),
            data: ev.data.chars().take(256).collect(),
        }
    }

    /// Names replica `n` on an application report that carries a replica.
    pub(crate) fn set_replica(&mut self, n: u32) {
        if let What::Execution { replica, .. }
        | What::StateMinted { replica, .. }
        | What::StateChecked { replica, .. }
        | What::Notified { replica, .. }
        | What::ServerNote { replica, .. } = self
        {
            *replica = Some(n);
        }
    }

    /// The replica an application report names, if any.
    pub fn replica(&self) -> Option<u32> {
        match self {
            What::Execution { replica, .. }
            | What::StateMinted { replica, .. }
            | What::StateChecked { replica, .. }
            | What::Notified { replica, .. }
            | What::ServerNote { replica, .. } => *replica,
            _ => None,
        }
    }

    /// Server-internal events explain; they never decide a verdict.
    pub fn is_explanation(&self) -> bool {
        matches!(self, What::ServerNote { .. })
    }
}

/// A finished trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The events in time order (`events[i].seq == i`).
    pub events: Vec<Event>,
}

impl Trace {
    /// The dialect its header names (legacy-sse for a trace with no header).
    pub fn dialect(&self) -> crate::scenario::Dialect {
        match self.events.first().map(|e| &e.what) {
            Some(What::RunStarted { dialect, .. }) => *dialect,
            _ => crate::scenario::Dialect::default(),
        }
    }

    /// JSON Lines, one event per line.
    pub fn to_jsonl(&self) -> String {
        let mut out = Vec::new();
        self.write_jsonl(&mut out).expect("writing to memory cannot fail");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// FNV-1a (64 bits) of [`Trace::to_jsonl`], without building the text: a
    /// hunt hashes every seed's trace.
    pub fn jsonl_hash(&self) -> u64 {
        let mut h = Fnv1a::default();
        self.write_jsonl(&mut h).expect("hashing cannot fail");
        h.0
    }

    fn write_jsonl(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        for e in &self.events {
            serde_json::to_writer(&mut *out, e).map_err(std::io::Error::other)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// The events, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }
}

/// How a client saw its resumption refused. In the trace it is the words
/// [`fmt::Display`] gives (`"HTTP 404"`, `"error event"`, `"200 with an
/// empty stream"`), so checks match the kind, never the wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Refused {
    /// An HTTP error status.
    Status(u16),
    /// `200 text/event-stream` carrying an `event: error`.
    ErrorEvent,
    /// `200` and a stream that ended with nothing in it: a silent refusal.
    EmptyStream,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Status(s) => write!(f, "HTTP {s}"),
            Refused::ErrorEvent => f.write_str("error event"),
            Refused::EmptyStream => f.write_str("200 with an empty stream"),
        }
    }
}

impl From<Refused> for String {
    fn from(r: Refused) -> String {
        r.to_string()
    }
}

impl TryFrom<String> for Refused {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "error event" => Ok(Refused::ErrorEvent),
            "200 with an empty stream" => Ok(Refused::EmptyStream),
            _ => s
                .strip_prefix("HTTP ")
                .and_then(|n| n.parse().ok())
                .map(Refused::Status)
                .ok_or_else(|| format!("not a refusal: {s:?}")),
        }
    }
}

/// What a delivered SSE event was, in a few words.
pub fn describe_rpc(rpc: &Option<RpcSummary>, event: &str) -> String {
    match rpc {
        Some(RpcSummary { kind: RpcKind::Request, method, id, .. }) => {
            format!("{} {}", id.as_ref().map(|i| i.to_string()).unwrap_or_default(), method.as_deref().unwrap_or("?"))
        }
        Some(RpcSummary { kind: RpcKind::Response, id, .. }) => {
            format!("response to {}", id.as_ref().map(|i| i.to_string()).unwrap_or_default())
        }
        Some(RpcSummary { kind: RpcKind::Error, .. }) => "JSON-RPC error".into(),
        Some(RpcSummary { kind: RpcKind::Notification, method, .. }) => method.clone().unwrap_or_default(),
        None => format!("`{event}` event"),
    }
}

/// What became of a server request, in a word or two.
pub fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Answered => "answered",
        Outcome::Failed => "failed",
        Outcome::Reissued => "re-issued",
        Outcome::TimedOut => "timed out",
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_written_as_its_words_and_read_back() {
        for (r, words) in [
            (Refused::Status(404), "\"HTTP 404\""),
            (Refused::ErrorEvent, "\"error event\""),
            (Refused::EmptyStream, "\"200 with an empty stream\""),
        ] {
            assert_eq!(serde_json::to_string(&r).unwrap(), words);
            assert_eq!(serde_json::from_str::<Refused>(words).unwrap(), r);
        }
        assert!(serde_json::from_str::<Refused>("\"HTTP nope\"").is_err());
    }
}
