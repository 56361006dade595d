//! What a user could observe in a run, indexed for the checks.
//!
//! Built once from a trace's observable events (server notes are skipped:
//! they explain, they never decide). Sessions are known black-box by their
//! token: a token belongs to the client whose `endpoint` event carried it.

use crate::trace::{Event, Outcome, Purpose, Refused, SimTime, SseSeen, Trace, What};
use crate::vocab::StepKind;
use crate::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};
use std::collections::BTreeMap;

mod build;
mod query;

/// One SSE event delivered to a client.
#[derive(Clone, Debug)]
pub struct Delivered {
    pub t: SimTime,
    pub seq: u64,
    pub id: Option<String>,
    pub event: String,
    pub rpc: Option<RpcSummary>,
    /// A hash of the event's data (as the trace keeps it): tells two events
    /// that look alike in summary apart.
    pub data_hash: u64,
}

impl Delivered {
    /// Whether two deliveries are the same event (kind, message and data),
    /// as opposed to two events that share an id.
    pub fn same_event(&self, other: &Delivered) -> bool {
        self.event == other.event && self.rpc == other.rpc && self.data_hash == other.data_hash
    }

    pub fn numeric_id(&self) -> Option<u64> {
        self.id.as_deref()?.parse().ok()
    }
    pub fn request_id(&self) -> Option<&RpcId> {
        self.rpc.as_ref().filter(|r| r.kind == RpcKind::Request)?.id.as_ref()
    }
}

/// One client TCP connection, as its client saw it.
#[derive(Clone, Debug)]
pub struct Conn {
    pub client: String,
    pub conn: u32,
    pub purpose: Purpose,
    pub port: u16,
    pub opened: SimTime,
    /// The token the request presented (a resumption or a POST), if any.
    pub presented_token: Option<String>,
    /// Whether it was presented in the `Mcp-Session-Id` header (streamable-http).
    pub session_header: bool,
    /// The token the server handed out on this uplink (`endpoint` event).
    pub learned_token: Option<String>,
    pub last_event_id: Option<String>,
    /// The HTTP method of its request (`GET`, `POST`, `DELETE`).
    pub method: String,
    pub request_seq: Option<u64>,
    /// When its request went out.
    pub request_t: Option<SimTime>,
    /// `(status, is an event stream, time, seq)`.
    pub response: Option<(u16, bool, SimTime, u64)>,
    pub delivered: Vec<Delivered>,
    pub ended: Option<(SimTime, u64, String)>,
    pub rejected: Option<(SimTime, u64, Refused)>,
    /// The server→client stream this connection carried (a GET with
    /// `Last-Event-ID` carries the stream that id was seen on).
    pub stream: StreamKey,
}

/// A server→client SSE stream of a session, as the checks tell streams apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamKey {
    /// The connection carried no stream (a POST answered without one).
    #[default]
    None,
    /// A session's GET stream: every legacy-sse uplink, and the
    /// streamable-http standalone stream. Holds the session token.
    Get(String),
    /// A tool call's POST stream, named by the client and the connection of its POST.
    Call { client: String, conn: u32 },
}

impl StreamKey {
    pub fn is_none(&self) -> bool {
        *self == StreamKey::None
    }
    pub fn is_get(&self) -> bool {
        matches!(self, StreamKey::Get(_))
    }
    pub fn is_call(&self) -> bool {
        matches!(self, StreamKey::Call { .. })
    }
}

impl Conn {
    /// The connection's key in [`Observed::conns`]: client and conn number.
    pub fn conn_key(&self) -> (&str, u32) {
        (&self.client, self.conn)
    }
    /// The session this connection belongs to.
    pub fn token(&self) -> Option<&str> {
        self.presented_token.as_deref().or(self.learned_token.as_deref())
    }
    pub fn is_uplink(&self) -> bool {
        self.purpose == Purpose::Uplink
    }
    /// A GET that presented a token and was answered with a stream (an
    /// uplink, or a GET resuming a tool call's stream). In streamable-http a
    /// GET without `Last-Event-ID` opens the standalone stream: no resumption.
    pub fn accepted_resumption(&self) -> Option<(SimTime, u64)> {
        let get = self.is_uplink() || (self.purpose == Purpose::Call && self.last_event_id.is_some());
        let resumes = self.last_event_id.is_some() || !self.session_header;
        if !get || !resumes || self.presented_token.is_none() || self.rejected.is_some() {
            return None;
        }
        match self.response {
            Some((200, true, t, seq)) => Some((t, seq)),
            _ => None,
        }
    }
    pub fn last_event_id_number(&self) -> Option<u64> {
        self.last_event_id.as_deref()?.parse().ok()
    }
}

/// A NAT mapping.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub client: String,
    pub mapping: u32,
    pub down_port: u16,
    pub dropped: Option<(SimTime, u64, String)>,
    pub reset: Option<(SimTime, u64)>,
    /// `(time, seq, bytes, events)` the server wrote after the drop.
    pub dropped_writes: Vec<(SimTime, u64, usize, Vec<SseSeen>)>,
}

/// A server request, as the application reported it.
#[derive(Clone, Debug)]
pub struct Request {
    pub label: String,
    pub owner: String,
    pub method: String,
    pub ids: Vec<RpcId>,
    pub event_id: Option<String>,
    pub issued: (SimTime, u64),
    /// The session (token) the owner held when it was issued, and since when.
    pub session: Option<(String, SimTime)>,
    /// `(time, seq, outcome, id, new id)`.
    pub outcomes: Vec<(SimTime, u64, Outcome, RpcId, Option<RpcId>)>,
    /// False when the application said it must not be re-issued.
    pub reissuable: bool,
}

impl Request {
    /// When the request took JSON-RPC id `id`: issued under it, or re-issued.
    pub fn id_since(&self, id: &RpcId) -> Option<SimTime> {
        if self.ids.first() == Some(id) {
            return Some(self.issued.0);
        }
        self.outcomes.iter().find(|o| o.4.as_ref() == Some(id)).map(|o| o.0)
    }

    /// The session token the request was issued on, if known.
    pub fn token(&self) -> Option<&str> {
        self.session.as_ref().map(|(t, _)| t.as_str())
    }

    /// The outcome that settled it: answered, failed or timed out (not re-issued).
    pub fn resolution(&self) -> Option<&(SimTime, u64, Outcome, RpcId, Option<RpcId>)> {
        self.outcomes.iter().find(|o| o.2 != Outcome::Reissued)
    }
}

/// An acknowledged or unacknowledged answer a client POSTed.
#[derive(Clone, Debug)]
pub struct Answer {
    pub client: String,
    pub id: RpcId,
    pub t: SimTime,
    pub seq: u64,
    pub status: Option<u16>,
    /// The session the answer's POST presented.
    pub session: Option<String>,
    /// The connection the POST went out on.
    pub conn: Option<u32>,
}

impl Answer {
    /// When the answer's POST went out (its request on `conn`); `None` when
    /// no response head came back, so the time it reached the server is unknown.
    pub fn sent(&self, o: &Observed) -> Option<SimTime> {
        self.conn.and_then(|c| o.conns.get(&(self.client.clone(), c))?.request_t)
    }

    /// Whether the answer may have reached the server by `t`.
    pub fn maybe_sent_by(&self, o: &Observed, t: SimTime) -> bool {
        self.sent(o).is_none_or(|s| s <= t)
    }

    /// Whether the server acknowledged it (HTTP 2xx).
    pub fn acknowledged(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// The observable record of a run, indexed.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    pub events: Vec<&'a Event>,
    pub end: SimTime,
    pub liveness_bound: SimTime,
    pub principals: BTreeMap<String, String>,
    pub heartbeat_timeouts: BTreeMap<String, SimTime>,
    /// Each client's longest wait between reconnection attempts.
    pub max_backoffs: BTreeMap<String, SimTime>,
    pub think_times: BTreeMap<String, SimTime>,
    pub conns: BTreeMap<(String, u32), Conn>,
    pub token_owner: BTreeMap<String, String>,
    pub mappings: BTreeMap<(String, u32), Mapping>,
    pub requests: BTreeMap<String, Request>,
    pub answers: Vec<Answer>,
    /// `(time, seq, step kind)` of every scenario step.
    pub steps: Vec<(SimTime, u64, StepKind)>,
    /// `(time, seq, client, "accepted" | "refused")` of every resume step with an expectation.
    pub expected_resumptions: Vec<(SimTime, u64, String, String)>,
    pub crashed: BTreeMap<String, SimTime>,
    /// Event ids the application reported emitting: `(session token, time, id, seq)`.
    pub notified: Vec<(String, SimTime, u64, u64)>,
    /// Every crash: `(client, time)`.
    pub crashes: Vec<(String, SimTime)>,
    /// `(time, from, to, with credential)` of every token theft.
    pub thefts: Vec<(SimTime, String, String, bool)>,
}
