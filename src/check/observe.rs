//! What a user could observe in a run, indexed for the checks.
//!
//! Built once from a trace's observable events (server notes are skipped:
//! they explain, they never decide). Sessions are known black-box by their
//! token: a token belongs to the client whose `endpoint` event carried it.

use crate::trace::{Event, Outcome, Purpose, Refused, SimTime, SseSeen, Trace, What};
use crate::vocab::StepKind;
use crate::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};
use std::collections::BTreeMap;

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

impl<'a> Observed<'a> {
    pub fn new(trace: &'a Trace) -> Self {
        let mut o = Observed::default();
        // Each client's current session token and when it got it.
        let mut current: BTreeMap<String, (String, SimTime)> = BTreeMap::new();
        for e in trace.iter().filter(|e| !e.what.is_explanation()) {
            o.events.push(e);
            let (t, seq) = (e.t_us, e.seq);
            o.end = o.end.max(t);
            match &e.what {
                What::RunStarted { duration_us, liveness_bound_us, .. } => {
                    o.end = o.end.max(SimTime(*duration_us));
                    o.liveness_bound = SimTime(*liveness_bound_us);
                }
                What::ClientJoined { client, principal, heartbeat_timeout_us, think_time_us, max_backoff_us } => {
                    o.think_times.insert(client.clone(), SimTime(*think_time_us));
                    o.max_backoffs.insert(client.clone(), SimTime(*max_backoff_us));
                    o.principals.insert(client.clone(), principal.clone());
                    o.heartbeat_timeouts.insert(client.clone(), SimTime(*heartbeat_timeout_us));
                }
                What::Step { action, expect, .. } => {
                    o.steps.push((t, seq, *action));
                    if let Some(e) = expect {
                        o.expected_resumptions.push((t, seq, e.client.clone(), e.resumption.clone()));
                    }
                }
                What::Connect { client, conn, port, purpose } => {
                    o.conns.insert(
                        (client.clone(), *conn),
                        Conn {
                            client: client.clone(),
                            conn: *conn,
                            purpose: *purpose,
                            port: *port,
                            opened: t,
                            presented_token: None,
                            session_header: false,
                            learned_token: None,
                            last_event_id: None,
                            method: String::new(),
                            request_seq: None,
                            request_t: None,
                            response: None,
                            delivered: Vec::new(),
                            ended: None,
                            rejected: None,
                            stream: StreamKey::None,
                        },
                    );
                }
                What::HttpRequest { client, conn, method, path, last_event_id, session } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.method = method.clone();
                        c.request_t = Some(t);
                        c.session_header = session.is_some();
                        c.presented_token =
                            session.clone().or_else(|| crate::wire::legacy::session_token(path).map(String::from));
                        c.last_event_id = last_event_id.clone();
                        c.request_seq = Some(seq);
                    }
                }
                What::HttpResponse { client, conn, status, content_type } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        let stream = content_type.as_deref().is_some_and(|ct| ct.starts_with("text/event-stream"));
                        c.response = Some((*status, stream, t, seq));
                    }
                }
                What::SseEvent { client, conn, id, event, rpc, data } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        let data_hash = {
                            use std::hash::{Hash, Hasher};
                            let mut h = std::hash::DefaultHasher::new();
                            data.hash(&mut h);
                            h.finish()
                        };
                        c.delivered.push(Delivered {
                            t,
                            seq,
                            id: id.clone(),
                            event: event.clone(),
                            rpc: rpc.clone(),
                            data_hash,
                        });
                    }
                }
                What::SessionToken { client, conn, token } => {
                    current.insert(client.clone(), (token.clone(), t));
                    o.token_owner.entry(token.clone()).or_insert_with(|| client.clone());
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.learned_token = Some(token.clone());
                    }
                }
                What::UplinkEnded { client, conn, reason } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.ended.get_or_insert((t, seq, reason.clone()));
                    }
                }
                What::UplinkSilent { client, conn, .. } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.ended.get_or_insert((t, seq, "gave up: silent".into()));
                    }
                }
                What::Rejected { client, conn, how } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.rejected = Some((t, seq, *how));
                    }
                }
                What::Answer { client, id, status, session, conn, .. } => o.answers.push(Answer {
                    client: client.clone(),
                    id: id.clone(),
                    t,
                    seq,
                    status: *status,
                    session: session.clone(),
                    conn: *conn,
                }),
                What::Notified { client, event_ids, session } => {
                    if let Some(token) = session.as_ref().or(current.get(client).map(|(t, _)| t)) {
                        for id in event_ids.iter().filter_map(|i| i.parse().ok()) {
                            o.notified.push((token.clone(), t, id, seq));
                        }
                    }
                }
                What::TokenStolen { from, to, credential } => o.thefts.push((t, from.clone(), to.clone(), *credential)),
                What::ClientCrashed { client } => {
                    // The server's session outlives the client; the harness may still act on it.
                    o.crashes.push((client.clone(), t));
                    o.crashed.insert(client.clone(), t);
                }
                What::MappingOpened { client, mapping, down_port, .. } => {
                    o.mappings.insert(
                        (client.clone(), *mapping),
                        Mapping {
                            client: client.clone(),
                            mapping: *mapping,
                            down_port: *down_port,
                            dropped: None,
                            reset: None,
                            dropped_writes: Vec::new(),
                        },
                    );
                }
                What::MappingDropped { client, mapping, fault } => {
                    if let Some(m) = o.mappings.get_mut(&(client.clone(), *mapping)) {
                        m.dropped = Some((t, seq, fault.clone()));
                    }
                }
                What::DroppedWrite { client, mapping, bytes, events } => {
                    if let Some(m) = o.mappings.get_mut(&(client.clone(), *mapping)) {
                        m.dropped_writes.push((t, seq, *bytes, events.clone()));
                    }
                }
                What::MappingReset { client, mapping, .. } => {
                    if let Some(m) = o.mappings.get_mut(&(client.clone(), *mapping)) {
                        m.reset = Some((t, seq));
                    }
                }
                What::RequestIssued { client, label, method, id, event_id, session, reissuable } => {
                    // The session the application names, else the owner's current one.
                    let session = match (session, current.get(client)) {
                        (Some(s), Some((c, since))) if s == c => Some((s.clone(), *since)),
                        (Some(s), _) => Some((s.clone(), t)),
                        (None, cur) => cur.cloned(),
                    };
                    o.requests.insert(
                        label.clone(),
                        Request {
                            label: label.clone(),
                            owner: client.clone(),
                            method: method.clone(),
                            ids: vec![id.clone()],
                            event_id: event_id.clone(),
                            issued: (t, seq),
                            session,
                            outcomes: Vec::new(),
                            reissuable: *reissuable,
                        },
                    );
                }
                What::RequestOutcome { label, id, outcome, new_id, .. } => {
                    if let Some(r) = o.requests.get_mut(label) {
                        if let Some(n) = new_id {
                            r.ids.push(n.clone());
                        }
                        r.outcomes.push((t, seq, *outcome, id.clone(), new_id.clone()));
                    }
                }
                _ => {}
            }
        }
        if o.end == SimTime(0) {
            o.end = trace.events.last().map_or(SimTime(0), |e| e.t_us);
        }
        o.assign_streams();
        o
    }

    /// Works out [`Conn::stream`] for every connection, in request order.
    fn assign_streams(&mut self) {
        let mut order: Vec<(u64, (String, u32))> =
            self.conns.iter().map(|(k, c)| (c.request_seq.unwrap_or(u64::MAX), k.clone())).collect();
        order.sort();
        for (_, key) in order {
            let c = &self.conns[&key];
            let stream = match (c.purpose, c.token(), c.last_event_id.as_deref()) {
                (Purpose::Post, _, _) | (_, None, _) => StreamKey::None,
                (Purpose::Call, Some(_), None) => StreamKey::Call { client: c.client.clone(), conn: c.conn },
                (purpose, Some(token), Some(last)) => self.stream_of_id(token, last, c.opened).unwrap_or_else(|| {
                    if purpose == Purpose::Call {
                        StreamKey::Call { client: c.client.clone(), conn: c.conn }
                    } else {
                        StreamKey::Get(token.to_string())
                    }
                }),
                (Purpose::Uplink, Some(token), None) => StreamKey::Get(token.to_string()),
            };
            self.conns.get_mut(&key).expect("key from the map").stream = stream;
        }
    }

    /// The stream of the latest connection of session `token` opened before
    /// `before` that carried event `id` (delivered, or written into its dropped mapping).
    fn stream_of_id(&self, token: &str, id: &str, before: SimTime) -> Option<StreamKey> {
        self.conns
            .values()
            .filter(|d| d.token() == Some(token) && !d.stream.is_none() && d.opened < before)
            .filter(|d| {
                d.delivered.iter().any(|e| e.id.as_deref() == Some(id))
                    || self.mapping_of(d).is_some_and(|m| {
                        m.dropped_writes.iter().any(|w| w.3.iter().any(|e| e.id.as_deref() == Some(id)))
                    })
            })
            .max_by_key(|d| (d.opened, d.conn))
            .map(|d| d.stream.clone())
    }

    /// Event ids the server wrote on `stream` before `until`, in order: those
    /// delivered and those written into dropped mappings, each once, with
    /// whether the event carried a JSON-RPC message (priming events do not).
    pub fn stream_ids(&self, stream: &StreamKey, until: SimTime) -> Vec<(SimTime, String, bool)> {
        let mut out: Vec<(SimTime, u64, String, bool)> = Vec::new();
        for c in self.conns.values().filter(|c| c.stream == *stream) {
            for d in c.delivered.iter().filter(|d| d.t < until) {
                if let Some(id) = &d.id {
                    out.push((d.t, d.seq, id.clone(), d.rpc.is_some()));
                }
            }
            if let Some(m) = self.mapping_of(c) {
                for (t, seq, _, evs) in m.dropped_writes.iter().filter(|w| w.0 < until) {
                    out.extend(evs.iter().filter_map(|e| Some((*t, *seq, e.id.clone()?, e.rpc.is_some()))));
                }
            }
        }
        out.sort();
        let mut seen = std::collections::BTreeSet::new();
        out.into_iter().filter(|x| seen.insert(x.2.clone())).map(|(t, _, id, msg)| (t, id, msg)).collect()
    }

    /// Numeric event ids of session `token` that are not `stream`'s to
    /// replay: seen on its other streams, or seen carrying no message
    /// (priming events, which no one replays).
    pub fn ids_not_owed(&self, token: &str, stream: &StreamKey) -> Vec<u64> {
        let mut out = Vec::new();
        for c in self.conns.values().filter(|c| c.token() == Some(token) && !c.stream.is_none()) {
            let other = c.stream != *stream;
            out.extend(c.delivered.iter().filter(|d| other || d.rpc.is_none()).filter_map(Delivered::numeric_id));
            if let Some(m) = self.mapping_of(c) {
                for (_, _, _, evs) in &m.dropped_writes {
                    out.extend(
                        evs.iter()
                            .filter(|e| other || e.rpc.is_none())
                            .filter_map(|e| e.id.as_deref()?.parse::<u64>().ok()),
                    );
                }
            }
        }
        out
    }

    /// Whether a POST of unknown content went out on session `token` by `by`:
    /// one that got no response and left no answer in the trace (an answer
    /// is recorded once its POST completes, so such a POST may be one).
    pub fn unknown_post_by(&self, token: &str, by: SimTime) -> bool {
        self.conns.values().any(|c| {
            c.purpose == Purpose::Post
                && c.presented_token.as_deref() == Some(token)
                && c.request_t.is_some_and(|t| t <= by)
                && c.response.is_none()
                && !self.answers.iter().any(|a| a.client == c.client && a.conn == Some(c.conn))
        })
    }

    /// Whether `client` crashed in `[from, to]`: it lost every session it held.
    pub fn crashed_between(&self, client: &str, from: SimTime, to: SimTime) -> bool {
        self.crashes.iter().any(|(c, t)| c == client && *t >= from && *t <= to)
    }

    /// Whether someone stole `owner`'s token with its credential before `until`:
    /// two indistinguishable holders then compete for one session.
    pub fn credential_stolen(&self, owner: &str, until: SimTime) -> bool {
        self.thefts.iter().any(|(t, from, _, cred)| *cred && from == owner && *t <= until)
    }

    /// When `client` had a usable uplink for session `token`: from its
    /// acceptance until it ended, its NAT mapping was dropped or reset, the
    /// client crashed, or the client opened another uplink.
    pub fn usable_uplinks(&self, client: &str, token: &str) -> Vec<(SimTime, SimTime)> {
        self.usable_streams(client, token, None)
    }

    /// Like [`Observed::usable_uplinks`], for the connections that carried
    /// `stream` (a tool call's stream, say); `None`: the uplinks.
    pub fn usable_streams(&self, client: &str, token: &str, stream: Option<&StreamKey>) -> Vec<(SimTime, SimTime)> {
        let mut out = Vec::new();
        let carries = |c: &Conn| match stream {
            None => c.is_uplink(),
            Some(s) => c.stream == *s,
        };
        for c in self.conns.values().filter(|c| c.client == client && carries(c) && c.token() == Some(token)) {
            let Some((200, true, t_acc, _)) = c.response else { continue };
            if c.rejected.is_some() {
                continue;
            }
            let mut end = self.end;
            if let Some((t, _, _)) = &c.ended {
                end = end.min(*t);
            }
            if let Some(m) = self.mapping_of(c) {
                if let Some((t, _, _)) = &m.dropped {
                    end = end.min(*t);
                }
                if let Some((t, _)) = m.reset {
                    end = end.min(t);
                }
            }
            if let Some((_, t)) = self.crashes.iter().find(|(k, t)| k == client && *t >= t_acc) {
                end = end.min(*t);
            }
            // A client runs one uplink at a time: a newer one replaces this one,
            // and so does a new session (streamable-http: an initialize POST
            // without a session id, sent when the client drops its uplink).
            let replaces = |n: &Conn| {
                carries(n) || (stream.is_none() && n.purpose == Purpose::Post && n.presented_token.is_none())
            };
            if let Some(next) = self
                .conns
                .values()
                .filter(|n| n.client == client && replaces(n) && n.opened > c.opened)
                .map(|n| n.opened)
                .min()
            {
                end = end.min(next);
            }
            if end > t_acc {
                out.push((t_acc, end));
            }
        }
        out
    }

    /// The client connection a NAT mapping carried (its downstream port).
    pub fn conn_of(&self, m: &Mapping) -> Option<&Conn> {
        self.conns.values().find(|c| c.client == m.client && c.port == m.down_port)
    }

    /// The mapping that carried a client connection.
    pub fn mapping_of(&self, c: &Conn) -> Option<&Mapping> {
        self.mappings.values().find(|m| m.client == c.client && m.down_port == c.port)
    }

    /// The stream that first carried one of request `r`'s ids (delivered or
    /// written into a dropped mapping), if any did.
    pub fn stream_of_request(&self, r: &Request) -> Option<&StreamKey> {
        let mut first: Option<(u64, &StreamKey)> = None;
        // Ids are unique only within a session: look at the request's session.
        let of_session = |c: &Conn| r.token().is_none_or(|t| c.token() == Some(t));
        for c in self.conns.values().filter(|c| !c.stream.is_none() && of_session(c)) {
            for d in &c.delivered {
                if d.request_id().is_some_and(|i| r.ids.contains(i)) && first.is_none_or(|(s, _)| d.seq < s) {
                    first = Some((d.seq, &c.stream));
                }
            }
            if let Some(m) = self.mapping_of(c) {
                for (_, seq, _, evs) in &m.dropped_writes {
                    let carried = evs.iter().any(|e| {
                        e.rpc.as_ref().is_some_and(|x| {
                            x.kind == RpcKind::Request && x.id.as_ref().is_some_and(|i| r.ids.contains(i))
                        })
                    });
                    if carried && first.is_none_or(|(s, _)| *seq < s) {
                        first = Some((*seq, &c.stream));
                    }
                }
            }
        }
        first.map(|(_, s)| s)
    }

    /// The request that JSON-RPC id `id` named on session `token` at time `t`.
    ///
    /// Ids are unique only within a session (servers such as rmcp restart
    /// them at 0 in every session), so the lookup is per session: among the
    /// requests issued on `token` (on any session when the token is unknown),
    /// the one that most recently took `id` (issued or re-issued) by `t`.
    pub fn request_at(&self, token: Option<&str>, id: &RpcId, t: SimTime) -> Option<&Request> {
        self.requests
            .values()
            .filter(|r| token.is_none_or(|tok| r.session.as_ref().is_some_and(|(s, _)| s == tok)))
            .filter_map(|r| r.id_since(id).filter(|since| *since <= t).map(|since| (since, r.issued.1, r)))
            .max_by_key(|(since, seq, _)| (*since, *seq))
            .map(|(_, _, r)| r)
    }

    /// Whether a server could tell `client` from `owner` at `at`: a different
    /// principal that had not stolen the owner's credential by then.
    pub fn foreign(&self, client: &str, owner: &str, at: SimTime) -> bool {
        self.principal(client) != self.principal(owner)
            && !self.thefts.iter().any(|(t, from, to, cred)| *cred && from == owner && to == client && *t <= at)
    }

    pub fn principal<'s>(&'s self, client: &'s str) -> &'s str {
        self.principals.get(client).map_or(client, |p| p.as_str())
    }

    /// Every numeric id the run shows for a session: delivered, written into
    /// dropped mappings, or reported by the application, up to `until`.
    pub fn ids_seen(&self, token: &str, until: SimTime) -> Vec<u64> {
        let mut out = Vec::new();
        for c in self.conns.values().filter(|c| c.token() == Some(token)) {
            out.extend(c.delivered.iter().filter(|d| d.t <= until).filter_map(Delivered::numeric_id));
            if let Some(m) = self.mapping_of(c) {
                for (_, _, _, evs) in m.dropped_writes.iter().filter(|w| w.0 <= until) {
                    out.extend(evs.iter().filter_map(|ev| ev.id.as_deref()?.parse::<u64>().ok()));
                }
            }
        }
        for r in self.requests.values() {
            if r.token() == Some(token) && r.issued.0 <= until {
                out.extend(r.event_id.as_deref().and_then(|i| i.parse::<u64>().ok()));
            }
        }
        out.extend(self.notified.iter().filter(|(t, at, _, _)| t == token && *at <= until).map(|(_, _, id, _)| *id));
        out
    }

    /// The highest id the run shows for a session up to `until` ([`Observed::ids_seen`]).
    pub fn max_id_seen(&self, token: &str, until: SimTime) -> Option<u64> {
        self.ids_seen(token, until).into_iter().max()
    }

    /// An upper bound on ids a session may have minted that no one observed
    /// before `until`: a response per POST presenting its token, and a new
    /// event per re-issued request.
    pub fn possible_unseen_ids(&self, token: &str, until: SimTime) -> u64 {
        let posts = self
            .conns
            .values()
            .filter(|c| c.purpose == Purpose::Post && c.presented_token.as_deref() == Some(token) && c.opened <= until)
            .count() as u64;
        let reissues = self
            .requests
            .values()
            .filter(|r| r.session.as_ref().is_some_and(|(t, _)| t == token))
            .flat_map(|r| r.outcomes.iter())
            .filter(|x| x.2 == Outcome::Reissued && x.0 <= until)
            .count() as u64;
        posts + reissues
    }

    /// The events a client already held for a session before `before`, in order.
    pub fn held_events(&self, client: &str, token: &str, before: SimTime) -> Vec<(&Conn, &Delivered)> {
        let mut out: Vec<(&Conn, &Delivered)> = self
            .conns
            .values()
            .filter(|c| c.client == client && c.token() == Some(token))
            .flat_map(|c| c.delivered.iter().filter(|d| d.t < before).map(move |d| (c, d)))
            .collect();
        out.sort_by_key(|(_, d)| d.seq);
        out
    }

    /// Event ids (as sent) a client already held for a session before `before`.
    pub fn ids_held_str(&self, client: &str, token: &str, before: SimTime) -> Vec<&str> {
        self.conns
            .values()
            .filter(|c| c.client == client && c.token() == Some(token))
            .flat_map(|c| c.delivered.iter().filter(|d| d.t < before).filter_map(|d| d.id.as_deref()))
            .collect()
    }

    /// Event ids a client already held for a session before `before`.
    pub fn ids_held(&self, client: &str, token: &str, before: SimTime) -> Vec<u64> {
        self.conns
            .values()
            .filter(|c| c.client == client && c.token() == Some(token))
            .flat_map(|c| c.delivered.iter().filter(|d| d.t < before).filter_map(Delivered::numeric_id))
            .collect()
    }
}
