//! What a user could observe in a run, indexed for the checks.
//!
//! Built once from a trace's observable events (server notes are skipped:
//! they explain, they never decide). Sessions are known black-box by their
//! token: a token belongs to the client whose `endpoint` event carried it.

use crate::trace::{ConnId, Event, MappingId, Outcome, Purpose, Refused, SimTime, SseSeen, Trace, What};
use crate::vocab::StepKind;
use crate::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};
use std::collections::BTreeMap;

mod build;
mod query;
mod replicas;
mod requests;
mod who;
pub use requests::Fate;
#[cfg(test)]
mod tests;

/// One SSE event delivered to a client.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// When the client received it.
    pub t: SimTime,
    /// The `sse-event` event's place in the trace.
    pub seq: u64,
    /// Its `id:` field, if it set one.
    pub id: Option<String>,
    /// Its event type (`message` when the block named none).
    pub event: String,
    /// The JSON-RPC message it carried, if any.
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

    /// Its id as a number, when it is one.
    pub fn numeric_id(&self) -> Option<u64> {
        self.id.as_deref()?.parse().ok()
    }
    /// The JSON-RPC id of the server request it carried, if it carried one.
    pub fn request_id(&self) -> Option<&RpcId> {
        self.rpc.as_ref().filter(|r| r.kind == RpcKind::Request)?.id.as_ref()
    }
}

/// One client TCP connection, as its client saw it.
#[derive(Clone, Debug)]
pub struct Conn {
    /// The client that opened it.
    pub client: String,
    /// The client's number for it.
    pub conn: ConnId,
    /// What it was opened for.
    pub purpose: Purpose,
    /// Its local port: a [`Mapping`]'s `down_port`.
    pub port: u16,
    /// When it was opened.
    pub opened: SimTime,
    /// The token the request presented (a resumption or a POST), if any.
    pub presented_token: Option<String>,
    /// The principal whose credential the request presented, when it was
    /// not the client's own (see [`Observed::presents`]).
    pub credential: Option<String>,
    /// Whether it was presented in the `Mcp-Session-Id` header (streamable-http).
    pub session_header: bool,
    /// The token the server handed out on this uplink (`endpoint` event).
    pub learned_token: Option<String>,
    /// The `Last-Event-ID` its request presented, if any.
    pub last_event_id: Option<String>,
    /// The HTTP method of its request (`GET`, `POST`, `DELETE`).
    pub method: String,
    /// The trace `seq` of its request, once sent.
    pub request_seq: Option<u64>,
    /// When its request went out.
    pub request_t: Option<SimTime>,
    /// `(status, is an event stream, time, seq)`.
    pub response: Option<(u16, bool, SimTime, u64)>,
    /// The SSE events delivered on it, in order.
    pub delivered: Vec<Delivered>,
    /// `(time, seq, reason)` of its end as the client saw it: ended, failed or given up as silent.
    pub ended: Option<(SimTime, u64, String)>,
    /// `(time, seq, how)` when the client saw the resumption on it refused.
    pub rejected: Option<(SimTime, u64, Refused)>,
    /// The server→client stream this connection carried (a GET with
    /// `Last-Event-ID` carries the stream that id was seen on).
    pub stream: StreamKey,
    /// The JSON-RPC request its POST carried, if any: the client waits for its response.
    pub sent: Option<crate::trace::Sent>,
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
    Call {
        /// The client that made the call.
        client: String,
        /// The connection its POST went out on.
        conn: ConnId,
    },
}

impl StreamKey {
    /// Whether it is no stream at all.
    pub fn is_none(&self) -> bool {
        *self == StreamKey::None
    }
    /// Whether it is a session's GET stream.
    pub fn is_get(&self) -> bool {
        matches!(self, StreamKey::Get(_))
    }
    /// Whether it is a tool call's stream.
    pub fn is_call(&self) -> bool {
        matches!(self, StreamKey::Call { .. })
    }
}

impl Conn {
    /// The connection's key in [`Observed::conns`]: client and conn number.
    pub fn conn_key(&self) -> (&str, ConnId) {
        (&self.client, self.conn)
    }
    /// The session this connection belongs to.
    pub fn token(&self) -> Option<&str> {
        self.presented_token.as_deref().or(self.learned_token.as_deref())
    }
    /// Whether it was opened for an uplink (a GET for a session's stream).
    pub fn is_uplink(&self) -> bool {
        self.purpose == Purpose::Uplink
    }
    /// A GET that presented a token to resume a stream (whatever its answer).
    pub fn is_resumption(&self) -> bool {
        let get = self.is_uplink() || (self.purpose == Purpose::Call && self.last_event_id.is_some());
        let resumes = self.last_event_id.is_some() || !self.session_header;
        get && resumes && self.presented_token.is_some()
    }
    /// A GET that presented a token and was answered with a stream (an
    /// uplink, or a GET resuming a tool call's stream). In streamable-http a
    /// GET without `Last-Event-ID` opens the standalone stream: no resumption.
    pub fn accepted_resumption(&self) -> Option<(SimTime, u64)> {
        if !self.is_resumption() || self.rejected.is_some() {
            return None;
        }
        match self.response {
            Some((200, true, t, seq)) => Some((t, seq)),
            _ => None,
        }
    }
    /// Its `Last-Event-ID` as a number, when it is one.
    pub fn last_event_id_number(&self) -> Option<u64> {
        self.last_event_id.as_deref()?.parse().ok()
    }
}

/// A NAT mapping.
#[derive(Clone, Debug)]
pub struct Mapping {
    /// The client whose NAT it is.
    pub client: String,
    /// The NAT's number for it.
    pub mapping: MappingId,
    /// The client's port: a [`Conn`]'s `port`.
    pub down_port: u16,
    /// The NAT's source port towards the server (or the balancer).
    pub up_port: u16,
    /// In a deployment: `(replica, seq)` of the balancer sending it to a replica.
    pub routed: Option<(u32, u64)>,
    /// `(time, seq, fault)` when it was dropped silently.
    pub dropped: Option<(SimTime, u64, String)>,
    /// `(time, seq)` when the NAT reset it.
    pub reset: Option<(SimTime, u64)>,
    /// `(time, seq, bytes, events)` the server wrote after the drop.
    pub dropped_writes: Vec<(SimTime, u64, usize, Vec<SseSeen>)>,
}

/// A server request, as the application reported it.
#[derive(Clone, Debug)]
pub struct Request {
    /// The scenario's label for it (the key in [`Observed::requests`]).
    pub label: String,
    /// The client on whose session it was issued.
    pub owner: String,
    /// Its JSON-RPC method.
    pub method: String,
    /// Every JSON-RPC id it took: the first, then each re-issue's.
    pub ids: Vec<RpcId>,
    /// The SSE event id it was issued as, if the application said.
    pub event_id: Option<String>,
    /// `(time, seq)` of its issue.
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
    /// The client that answered.
    pub client: String,
    /// The id of the server request it answered.
    pub id: RpcId,
    /// When the client recorded it (once its POST completed or failed).
    pub t: SimTime,
    /// The `answer` event's place in the trace.
    pub seq: u64,
    /// The server's HTTP status for the POST; `None` when no response came.
    pub status: Option<u16>,
    /// The session the answer's POST presented.
    pub session: Option<String>,
    /// The connection the POST went out on (also when no response came:
    /// the server may have applied it); `None` when it never went out.
    pub conn: Option<ConnId>,
}

impl Answer {
    /// When the answer's POST went out (its request on `conn`); `None` when
    /// it never went out, or the trace does not say on which connection.
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

/// Notifications the application reported emitting on a session, with
/// their SSE event ids of any shape.
#[derive(Clone, Debug)]
pub struct Notification {
    /// The client whose session they went to.
    pub client: String,
    /// That session's token.
    pub token: String,
    /// When the application emitted them.
    pub t: SimTime,
    /// The `notified` event's place in the trace.
    pub seq: u64,
    /// Their SSE event ids, in order (empty when the server exposes none).
    pub ids: Vec<String>,
    /// The server's name for the stream they were minted on, when not the
    /// session's standalone stream (a tool call's POST stream).
    pub stream: Option<String>,
    /// The replica that minted them, in a deployment of several.
    pub replica: Option<u32>,
}

/// The observable record of a run, indexed.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    /// The observable events, in trace order (server notes left out).
    pub events: Vec<&'a Event>,
    /// The end of the run: its scenario duration, or its last event if later.
    pub end: SimTime,
    /// The server's request timeout, the bound `liveness` judges against.
    pub liveness_bound: SimTime,
    /// The server authenticates no one (the run's header says so): a
    /// principal is only the name a request asserts.
    pub unauthenticated: bool,
    /// How many event ids per stream the server may mint that neither a
    /// report nor a socket shows (the run's header says so).
    pub unreported_per_stream: u64,
    /// The run speaks streamable-http (an empty stream may be SSE polling).
    pub streamable: bool,
    /// How many events per session the server says it keeps for replay.
    pub retention: Option<u64>,
    /// How long the server says a resumption waits for a fence.
    pub fence_grace: Option<SimTime>,
    /// Each client's principal.
    pub principals: BTreeMap<String, String>,
    /// Each client's heartbeat timeout.
    pub heartbeat_timeouts: BTreeMap<String, SimTime>,
    /// Each client's longest wait between reconnection attempts.
    pub max_backoffs: BTreeMap<String, SimTime>,
    /// How long each client takes to answer a server request.
    pub think_times: BTreeMap<String, SimTime>,
    /// Every client connection, by client and conn number.
    pub conns: BTreeMap<(String, ConnId), Conn>,
    /// Session token → the client that first learned it: the session's owner.
    pub token_owner: BTreeMap<String, String>,
    /// Every NAT mapping, by client and mapping number.
    pub mappings: BTreeMap<(String, MappingId), Mapping>,
    /// Every server request, by label.
    pub requests: BTreeMap<String, Request>,
    /// Every answer the clients POSTed, in trace order.
    pub answers: Vec<Answer>,
    /// `(time, seq, step kind)` of every scenario step.
    pub steps: Vec<(SimTime, u64, StepKind)>,
    /// The labels of the server requests call-tool steps issue (each on
    /// its call's stream).
    pub call_labels: std::collections::BTreeSet<String>,
    /// `(time, seq, client, "accepted" | "refused")` of every resume step with an expectation.
    pub expected_resumptions: Vec<(SimTime, u64, String, String)>,
    /// Each crashed client and the time of its latest crash.
    pub crashed: BTreeMap<String, SimTime>,
    /// Event ids the application reported emitting: `(session token, time, id, seq)`.
    pub notified: Vec<(String, SimTime, u64, u64)>,
    /// Every report of notifications emitted, whatever their ids look like.
    pub notifications: Vec<Notification>,
    /// Every crash: `(client, time)`.
    pub crashes: Vec<(String, SimTime)>,
    /// `(time, from, to, with credential)` of every token theft.
    pub thefts: Vec<(SimTime, String, String, bool)>,
    /// A deployment of replicas: whether they share a store (`Some(true)`)
    /// or keep one each (`Some(false)`, a session lives only on the replica
    /// that created it); `None` for one server.
    pub shared_store: Option<bool>,
    /// Replica crashes (`crash-replica`): `(replica, time)`.
    pub replica_crashes: Vec<(u32, SimTime)>,
    /// Partitions between a replica and the shared store: `(replica, from, until)`.
    pub store_cuts: Vec<(u32, SimTime, Option<SimTime>)>,
    /// Every `enable_tool` call a client made, as it ended.
    pub tool_enables: Vec<ToolEnable>,
    /// Tool calls their client gave up on without a result: `(client, call, time, seq, why)`.
    pub abandoned_calls: Vec<(String, String, SimTime, u64, String)>,
    /// Each time a client dropped its session to start a fresh one: `(client, time)`.
    pub reinits: Vec<(String, SimTime)>,
}

/// A client's `enable_tool` call (an `enable-tool` step).
#[derive(Clone, Debug)]
pub struct ToolEnable {
    /// The client that called it.
    pub client: String,
    /// The connection its POST went out on (it shows the session presented).
    pub conn: ConnId,
    /// The tool it asked for.
    pub tool: String,
    /// Whether the server enabled it; `None`: no answer, so it may have.
    pub enabled: Option<bool>,
    /// When the call ended.
    pub t: SimTime,
    /// The trace event that says so.
    pub seq: u64,
}
