//! The simulated MCP client, in either dialect.
//!
//! A well-behaved client: it opens its uplink, initializes, tracks the last
//! event id, answers server requests after `think_time`, resumes with
//! `Last-Event-ID` when its uplink dies or goes silent (missed heartbeats),
//! and re-initializes when a resumption is refused. A token thief is the
//! same client after `steal-token` handed it someone else's token.
//!
//! In `legacy-sse` the uplink is `GET /mcp/sse` and messages go to the
//! endpoint its `endpoint` event names. In `streamable-http` (see
//! [`streamable`]) the client POSTs `initialize` to `/mcp`, keeps the
//! `Mcp-Session-Id`, opens the standalone GET stream as its uplink, reads
//! tool calls' POST response streams, resumes any stream by GET with
//! `Last-Event-ID` and re-initializes on 404.
//!
//! Everything a client records is what a real client could observe.

pub mod dial;
mod streamable;

use crate::inbox::Inbox;
use crate::scenario::{ClientSpec, Dialect};
use crate::trace::{Purpose, Recorder, Refused, What};
use crate::wire::jsonrpc::{mcp, Message, RpcId};
use crate::wire::sse::{Decoder, Item};
use bytes::Bytes;
use dial::{Connection, Dialer};
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// Commands the step loop sends a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientCmd {
    Connect,
    Resume(ResumeFrom),
    /// Answer these request ids now, if seen and not answered yet.
    Answer(Vec<RpcId>),
    /// Take over a (stolen) session token, and the owner's credential if given.
    Adopt {
        token: String,
        credential: Option<String>,
    },
    /// The uplink of generation `gen` ended; reconnect if it is still current.
    Retry {
        gen: u64,
        fresh: bool,
    },
    /// streamable-http: call the `ask` tool, asking for `method` labelled `label`.
    CallTool {
        label: String,
        method: String,
    },
    /// streamable-http: end the session with DELETE.
    EndSession,
}

/// Which id a resumption presents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeFrom {
    LastSeen,
    Id(String),
    /// No `Last-Event-ID`: a plain GET on the session.
    Nothing,
    /// The last id seen plus an offset (numeric ids only).
    LastSeenPlus(i64),
}

/// What the step loop may read and change from outside the host.
#[derive(Debug, Default)]
pub struct ClientShared {
    pub token: RefCell<Option<String>>,
    pub credential: RefCell<String>,
    /// Connection numbers stay unique across restarts, so a trace never
    /// names two connections of one client alike.
    pub conn_seq: std::cell::Cell<u32>,
}

/// The port the server (and each NAT) listens on.
pub const PORT: u16 = 80;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest SSE event a client accepts.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// The longest a client waits between two reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// One client actor.
pub struct Client {
    spec: ClientSpec,
    dialect: Dialect,
    dialer: Rc<dyn Dialer>,
    rec: Recorder,
    pub shared: Rc<ClientShared>,
    inbox: Inbox<ClientCmd>,
    st: RefCell<State>,
}

#[derive(Default)]
struct State {
    rpc_seq: i64,
    gen: u64,
    uplink: Option<JoinHandle<()>>,
    last_seen: Option<String>,
    backoff: Duration,
    init_id: Option<RpcId>,
    /// Requests seen, with their method and the uplink generation that carried them.
    seen: BTreeMap<RpcId, (String, u64)>,
    answered: BTreeSet<RpcId>,
    /// streamable-http: the session each request came from (answers go there).
    request_token: BTreeMap<RpcId, String>,
    /// The reconnection delay the server announced (`retry`), in ms.
    retry_ms: Option<u64>,
    /// Tool calls in flight (streamable-http), by label.
    calls: BTreeMap<String, streamable::CallState>,
    /// Generations of call streams count from here, apart from the uplink's.
    call_gen: u64,
}

impl State {
    /// Whether the stream of generation `gen` is still the one being read.
    fn live(&self, gen: u64) -> bool {
        gen == self.gen || self.calls.values().any(|c| c.gen == gen)
    }
}

/// How reading an SSE stream ended.
enum StreamEnd {
    /// No complete item within the heartbeat timeout.
    Silent,
    /// The server ended the body.
    Ended,
    /// The body broke, or an event grew too large.
    Broken,
    /// The server refused with `event: error`.
    ErrorEvent,
    /// A tool call's result arrived.
    Complete,
}

struct AbortOnDrop(JoinHandle<()>);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

enum Mode {
    Fresh,
    Resume { token: String, last_event_id: Option<String> },
}

impl Client {
    pub fn new(
        spec: ClientSpec,
        dialect: Dialect,
        dialer: Rc<dyn Dialer>,
        rec: Recorder,
        shared: Rc<ClientShared>,
        inbox: Inbox<ClientCmd>,
    ) -> Rc<Client> {
        *shared.credential.borrow_mut() = spec.principal.clone();
        let st = State { call_gen: 1 << 32, ..State::default() };
        Rc::new(Client { spec, dialect, dialer, rec, shared, inbox, st: RefCell::new(st) })
    }

    fn name(&self) -> String {
        self.spec.name.clone()
    }

    /// The actor's main loop: one command at a time.
    pub async fn run(self: Rc<Self>) {
        loop {
            match self.inbox.recv().await {
                ClientCmd::Connect => self.start_uplink(Mode::Fresh),
                ClientCmd::Resume(which) => {
                    let token = self.shared.token.borrow().clone();
                    match token {
                        Some(token) => {
                            let last_event_id = match which {
                                ResumeFrom::LastSeen => self.st.borrow().last_seen.clone(),
                                ResumeFrom::Id(id) => Some(id),
                                ResumeFrom::Nothing => None,
                                ResumeFrom::LastSeenPlus(k) => {
                                    let last = self.st.borrow().last_seen.clone();
                                    match last
                                        .as_deref()
                                        .and_then(|l| l.parse::<u64>().ok())
                                        .and_then(|n| n.checked_add_signed(k))
                                    {
                                        Some(n) => Some(n.to_string()),
                                        None => {
                                            // Not the server's fault: the plan asked for arithmetic on an id that has none.
                                            self.rec.record(What::AppError {
                                                client: self.name(),
                                                error: format!("cannot resume from the last seen id {k:+}: last seen id {last:?} is not a number it can add to"),
                                            });
                                            continue;
                                        }
                                    }
                                }
                            };
                            self.start_uplink(Mode::Resume { token, last_event_id });
                        }
                        None => self.reinitialize("resume requested but the client holds no session"),
                    }
                }
                ClientCmd::Answer(ids) => {
                    for id in ids {
                        let method = self.st.borrow().seen.get(&id).map(|(m, _)| m.clone());
                        if let Some(method) = method {
                            tokio::task::spawn_local(self.clone().answer(id, method));
                        }
                    }
                }
                ClientCmd::Adopt { token, credential } => {
                    *self.shared.token.borrow_mut() = Some(token);
                    if let Some(c) = credential {
                        *self.shared.credential.borrow_mut() = c;
                    }
                    self.st.borrow_mut().last_seen = None;
                }
                ClientCmd::Retry { gen, fresh } => {
                    if gen != self.st.borrow().gen {
                        continue;
                    }
                    let token = self.shared.token.borrow().clone();
                    match token {
                        Some(token) if !fresh => {
                            let last_event_id = self.st.borrow().last_seen.clone();
                            self.start_uplink(Mode::Resume { token, last_event_id })
                        }
                        _ => self.start_uplink(Mode::Fresh),
                    }
                }
                ClientCmd::CallTool { label, method } => self.clone().start_call(label, method),
                ClientCmd::EndSession => {
                    tokio::task::spawn_local(self.clone().end_session());
                }
            }
        }
    }

    fn start_uplink(self: &Rc<Self>, mode: Mode) {
        let gen = {
            let mut st = self.st.borrow_mut();
            if let Some(old) = st.uplink.take() {
                old.abort();
            }
            st.gen += 1;
            st.gen
        };
        let me = self.clone();
        let handle = tokio::task::spawn_local(async move { me.uplink(gen, mode).await });
        self.st.borrow_mut().uplink = Some(handle);
    }

    fn reinitialize(self: &Rc<Self>, why: &str) {
        self.rec.record(What::Reinitialize { client: self.name(), why: why.into() });
        *self.shared.token.borrow_mut() = None;
        {
            let mut st = self.st.borrow_mut();
            st.last_seen = None;
            st.seen.clear();
            // Tool calls die with their session.
            for (_, call) in std::mem::take(&mut st.calls) {
                if let Some(task) = call.task {
                    task.abort();
                }
            }
        }
        self.start_uplink(Mode::Fresh);
    }

    /// Schedules a reconnect of generation `gen` after the current backoff.
    fn retry_later(self: &Rc<Self>, gen: u64, fresh: bool) {
        let delay = {
            let mut st = self.st.borrow_mut();
            st.backoff = (st.backoff * 2).clamp(Duration::from_secs(1), MAX_BACKOFF);
            st.backoff
        };
        let inbox = self.inbox.clone();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(delay).await;
            inbox.push(ClientCmd::Retry { gen, fresh });
        });
    }

    async fn connect(&self, purpose: Purpose) -> Option<(u32, Box<dyn Connection>)> {
        let conn = self.shared.conn_seq.get() + 1;
        self.shared.conn_seq.set(conn);
        match timeout(CONNECT_TIMEOUT, self.dialer.dial()).await {
            Ok(Ok(d)) => {
                self.rec.record(What::Connect { client: self.name(), conn, port: d.local_port, purpose });
                Some((conn, d.stream))
            }
            Ok(Err(e)) => {
                self.rec.record(What::ConnectFailed { client: self.name(), conn, error: e.to_string() });
                None
            }
            Err(_) => {
                self.rec.record(What::ConnectFailed { client: self.name(), conn, error: "connect timed out".into() });
                None
            }
        }
    }

    /// Opens a connection for `purpose` and speaks HTTP/1 on it: the
    /// connection's number, the request sender, and the task driving the
    /// connection (dropping it closes the connection). `None` when either
    /// step failed (the connect failure is in the trace).
    async fn open<B>(&self, purpose: Purpose) -> Option<(u32, SendRequest<B>, AbortOnDrop)>
    where
        B: hyper::body::Body + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (conn, stream) = self.connect(purpose).await?;
        let (sender, driver) = hyper::client::conn::http1::handshake::<_, B>(TokioIo::new(stream)).await.ok()?;
        let driver = AbortOnDrop(tokio::task::spawn_local(async move {
            let _ = driver.await;
        }));
        Some((conn, sender, driver))
    }

    async fn uplink(self: Rc<Self>, gen: u64, mode: Mode) {
        let streamable = self.dialect == Dialect::StreamableHttp;
        // streamable-http: a fresh uplink first opens a session by POST.
        let mode = match mode {
            Mode::Fresh if streamable => match self.init_session().await {
                Some(token) => Mode::Resume { token, last_event_id: None },
                None => return self.retry_later(gen, true),
            },
            m => m,
        };
        let resuming = match &mode {
            Mode::Fresh => false,
            Mode::Resume { last_event_id, .. } => !streamable || last_event_id.is_some(),
        };
        let Some((conn, mut sender, _driver)) = self.open::<Empty<Bytes>>(Purpose::Uplink).await else {
            return self.retry_later(gen, !resuming && !streamable);
        };
        let (path, token, last_event_id) = match &mode {
            Mode::Fresh => (crate::wire::legacy::SSE_PATH.to_string(), None, None),
            Mode::Resume { token, last_event_id } if streamable => {
                (streamable::ENDPOINT.to_string(), Some(token.clone()), last_event_id.clone())
            }
            Mode::Resume { token, last_event_id } => {
                (crate::wire::legacy::sse_path(token), None, last_event_id.clone())
            }
        };
        let req = match self.get_request(&path, token.as_deref(), last_event_id.as_deref()) {
            Ok(r) => r,
            Err(e) => {
                // Only the server's bytes (its session id, an id it sent) can
                // get here: the loader validates what a scenario supplies.
                self.protocol_error(conn, "unsendable", e);
                return self.retry_later(gen, true);
            }
        };
        self.rec.record(What::HttpRequest {
            client: self.name(),
            conn,
            method: "GET".into(),
            path,
            last_event_id,
            session: token.clone(),
        });
        let silence = self.spec.heartbeat_timeout;
        let resp = match timeout(silence, sender.send_request(req)).await {
            Err(_) => {
                self.protocol_error(
                    conn,
                    "no-headers",
                    format!("no response headers within {:.1} s", silence.as_secs_f64()),
                );
                self.rec.record(What::UplinkSilent {
                    client: self.name(),
                    conn,
                    silent_ms: silence.as_millis() as u64,
                });
                return self.retry_later(gen, !resuming && !streamable);
            }
            Ok(Err(e)) => {
                if e.is_parse() || e.is_parse_too_large() {
                    self.protocol_error(conn, "garbage", format!("the response is not HTTP/1.1: {e}"));
                }
                self.rec.record(What::UplinkEnded {
                    client: self.name(),
                    conn,
                    reason: format!("request failed: {e}"),
                });
                return self.retry_later(gen, !resuming && !streamable);
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type: content_type.clone() });
        let is_stream = content_type.as_deref().is_some_and(|c| c.starts_with("text/event-stream"));
        if status != 200 || !is_stream {
            if streamable && status == 404 {
                // The session is gone: start a new one (MCP 2025-11-25).
                if resuming {
                    self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::Status(404) });
                }
                return self.reinitialize("HTTP 404: the session is gone");
            }
            if resuming {
                self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::Status(status) });
                return self.reinitialize(&format!("resumption refused with HTTP {status}"));
            }
            self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: format!("HTTP {status}") });
            if streamable && status == 405 {
                return; // the server offers no standalone stream
            }
            return self.retry_later(gen, !streamable);
        }
        self.st.borrow_mut().backoff = Duration::ZERO;

        // streamable-http: answers go to the session whose stream carried the request.
        let stream_token = token.filter(|_| streamable);
        let (end, any_item) = self.read_stream(conn, resp.into_body(), gen, None, stream_token.as_deref()).await;
        match end {
            StreamEnd::ErrorEvent => {
                self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::ErrorEvent });
                self.reinitialize("resumption refused with an error event")
            }
            StreamEnd::Ended if resuming && !any_item => {
                self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::EmptyStream });
                self.reinitialize("resumption answered with an empty stream")
            }
            StreamEnd::Ended if streamable => {
                // A server may close a stream at any time; come back after its `retry`.
                let delay = self.st.borrow().retry_ms.map_or(Duration::from_secs(1), Duration::from_millis);
                self.reconnect_after(gen, delay)
            }
            _ => self.retry_later(gen, false),
        }
    }

    /// A GET for an SSE stream, in the client's dialect.
    /// A GET in the client's dialect; an error names the value that cannot
    /// be sent (a session id or event id from the server with characters no
    /// URL or header allows).
    fn get_request(
        &self,
        path: &str,
        session: Option<&str>,
        last_event_id: Option<&str>,
    ) -> std::result::Result<Request<Empty<Bytes>>, String> {
        let mut req = Request::get(path)
            .header("host", "server")
            .header("accept", "text/event-stream")
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()));
        if let Some(token) = session {
            req = req.header("mcp-session-id", token).header("mcp-protocol-version", mcp::PROTOCOL_VERSION_STREAMABLE);
        }
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.body(Empty::new()).map_err(|e| unsendable(path, session, last_event_id, &e))
    }

    /// Schedules a reconnect of generation `gen` after `delay` (no backoff).
    fn reconnect_after(self: &Rc<Self>, gen: u64, delay: Duration) {
        let inbox = self.inbox.clone();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(delay).await;
            inbox.push(ClientCmd::Retry { gen, fresh: false });
        });
    }

    /// Reads one SSE stream until it ends; records every event and hands
    /// messages on. `call` names the tool call whose stream this is. Also
    /// says whether anything (an event or a heartbeat) arrived: a stream that
    /// ends with nothing at all was a silent refusal.
    async fn read_stream(
        self: &Rc<Self>,
        conn: u32,
        mut body: hyper::body::Incoming,
        gen: u64,
        call: Option<&str>,
        token: Option<&str>,
    ) -> (StreamEnd, bool) {
        let silence = self.spec.heartbeat_timeout;
        let mut decoder = Decoder::new();
        let mut any_item = false;
        // Silence is measured from the last complete SSE item: a server that
        // drips bytes without ever completing an event is as dead as a silent one.
        // tokio's clock inside a turmoil host is the simulated one (paused runtime).
        let mut last_item = tokio::time::Instant::now();
        let mut bytes_since_item = 0usize;
        loop {
            let left = silence.saturating_sub(last_item.elapsed());
            let frame = match timeout(left, body.frame()).await {
                Err(_) => {
                    if bytes_since_item > 0 {
                        self.protocol_error(
                            conn,
                            "drip",
                            format!(
                                "{bytes_since_item} byte(s) in {:.1} s without one complete event",
                                silence.as_secs_f64()
                            ),
                        );
                    }
                    self.rec.record(What::UplinkSilent {
                        client: self.name(),
                        conn,
                        silent_ms: silence.as_millis() as u64,
                    });
                    return (StreamEnd::Silent, any_item);
                }
                Ok(None) => {
                    if decoder.has_partial() {
                        self.protocol_error(conn, "mid-event", "the stream ended in the middle of an event".into());
                    }
                    self.rec.record(What::UplinkEnded {
                        client: self.name(),
                        conn,
                        reason: "server ended the stream".into(),
                    });
                    return (StreamEnd::Ended, any_item);
                }
                Ok(Some(Err(e))) => {
                    if decoder.has_partial() {
                        self.protocol_error(
                            conn,
                            "mid-event",
                            format!("the stream broke in the middle of an event: {e}"),
                        );
                    }
                    self.rec.record(What::UplinkEnded {
                        client: self.name(),
                        conn,
                        reason: format!("stream error: {e}"),
                    });
                    return (StreamEnd::Broken, any_item);
                }
                Ok(Some(Ok(f))) => f,
            };
            let Some(data) = frame.data_ref() else { continue };
            let items = decoder.feed(data);
            if items.is_empty() {
                bytes_since_item += data.len();
            } else {
                last_item = tokio::time::Instant::now();
                bytes_since_item = decoder.pending_bytes();
            }
            if decoder.pending_bytes() > MAX_EVENT_BYTES {
                self.protocol_error(conn, "too-large", format!("an event grew past {} bytes", MAX_EVENT_BYTES));
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: "event too large".into() });
                return (StreamEnd::Broken, any_item);
            }
            for item in items {
                let ev = match item {
                    Item::Event(ev) => ev,
                    Item::Retry(ms) => {
                        self.st.borrow_mut().retry_ms = Some(ms);
                        continue;
                    }
                    Item::Comment(_) => {
                        // A heartbeat: the server accepted the stream and keeps it alive.
                        any_item = true;
                        continue;
                    }
                };
                any_item = true;
                match ev.event.as_str() {
                    "endpoint" if self.dialect == Dialect::LegacySse => self.clone().on_endpoint(&ev.data, conn),
                    "error" => {
                        self.record_sse(conn, &ev, None);
                        return (StreamEnd::ErrorEvent, any_item);
                    }
                    _ => {
                        let msg = Message::parse(&ev.data).ok();
                        self.record_sse(conn, &ev, msg.as_ref());
                        if let Some(id) = &ev.id {
                            let mut st = self.st.borrow_mut();
                            match call {
                                None => st.last_seen = Some(id.clone()),
                                Some(label) => {
                                    if let Some(c) = st.calls.get_mut(label) {
                                        c.last_seen = Some(id.clone());
                                    }
                                }
                            }
                        }
                        if let Some(msg) = msg {
                            if call.is_some_and(|label| self.is_call_result(label, &msg)) {
                                return (StreamEnd::Complete, any_item);
                            }
                            if let (Message::Request { id, .. }, Some(t)) = (&msg, token) {
                                self.st.borrow_mut().request_token.insert(id.clone(), t.to_string());
                            }
                            self.clone().on_message(msg, gen);
                        }
                    }
                }
            }
        }
    }

    fn protocol_error(&self, conn: u32, kind: &str, what: String) {
        self.rec.record(What::ProtocolError { client: self.name(), conn, problem: kind.into(), what });
    }

    fn record_sse(&self, conn: u32, ev: &crate::wire::sse::Event, msg: Option<&Message>) {
        let data: String = ev.data.chars().take(256).collect();
        self.rec.record(What::SseEvent {
            client: self.name(),
            conn,
            id: ev.id.clone(),
            event: ev.event.clone(),
            rpc: msg.map(Message::summary),
            data,
        });
    }

    fn on_endpoint(self: Rc<Self>, data: &str, conn: u32) {
        let Some(token) = crate::wire::legacy::session_token(data).map(String::from) else {
            return;
        };
        self.rec.record(What::SessionToken { client: self.name(), conn, token: token.clone() });
        *self.shared.token.borrow_mut() = Some(token);
        let id = {
            let mut st = self.st.borrow_mut();
            st.rpc_seq += 1;
            let id = RpcId::Num(st.rpc_seq);
            st.init_id = Some(id.clone());
            id
        };
        let msg = mcp::initialize(id, &self.spec.name);
        tokio::task::spawn_local(async move {
            self.post(&msg).await;
        });
    }

    fn on_message(self: Rc<Self>, msg: Message, gen: u64) {
        match msg {
            Message::Response { id, .. } if Some(&id) == self.st.borrow().init_id.as_ref() => {
                tokio::task::spawn_local(async move {
                    self.post(&mcp::initialized()).await;
                });
            }
            Message::Request { id, method, .. } => {
                // New, or an unanswered request delivered again on a newer stream
                // (a replay): answer it there.
                let fresh = {
                    let mut st = self.st.borrow_mut();
                    let answered = st.answered.contains(&id);
                    let before = st.seen.insert(id.clone(), (method.clone(), gen));
                    before.is_none_or(|(_, g)| g != gen && !answered)
                };
                if fresh && self.spec.auto_answer {
                    let think = self.spec.think_time;
                    tokio::task::spawn_local(async move {
                        tokio::time::sleep(think).await;
                        // A request belongs to the uplink that carried it: once that
                        // uplink is gone, the client waits for a re-issue instead of
                        // answering into a stream state the server may have dropped.
                        if !self.st.borrow().live(gen) {
                            self.rec.record(What::Abandoned {
                                client: self.name(),
                                id,
                                why: "the uplink that carried it ended before the answer".into(),
                            });
                            return;
                        }
                        self.answer(id, method).await;
                    });
                }
            }
            _ => {}
        }
    }

    /// POSTs the answer to a server request once; records it with the status the server gave.
    async fn answer(self: Rc<Self>, id: RpcId, method: String) {
        if !self.st.borrow_mut().answered.insert(id.clone()) {
            return;
        }
        let msg = mcp::answer(id.clone(), &method, &self.spec.name);
        // The session whose stream carried the request, else the current one.
        let token = self.st.borrow().request_token.get(&id).cloned().or_else(|| self.shared.token.borrow().clone());
        let (status, conn) = match &token {
            Some(token) => match self.send_post(&msg, Some(token), Purpose::Post, POST_TIMEOUT).await {
                Some(posted) => {
                    let status = posted.resp.status().as_u16();
                    let _ = timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await;
                    (Some(status), Some(posted.conn))
                }
                None => (None, None),
            },
            None => (None, None),
        };
        self.rec.record(What::Answer { client: self.name(), id, method, status, session: token, conn });
    }

    /// POSTs one message on its own connection; returns the status if any.
    async fn post(&self, msg: &Message) -> Option<u16> {
        let token = self.shared.token.borrow().clone()?;
        let posted = self.send_post(msg, Some(&token), Purpose::Post, POST_TIMEOUT).await?;
        let status = posted.resp.status().as_u16();
        let _ = timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await;
        Some(status)
    }

    /// Sends one POST in the client's dialect and records it and its response
    /// head, waiting at most `head_timeout` for that head.
    async fn send_post(
        &self,
        msg: &Message,
        token: Option<&str>,
        purpose: Purpose,
        head_timeout: Duration,
    ) -> Option<Posted> {
        let (conn, mut sender, driver) = self.open::<Full<Bytes>>(purpose).await?;
        let streamable = self.dialect == Dialect::StreamableHttp;
        let path = match token {
            Some(token) if !streamable => crate::wire::legacy::messages_path(token),
            _ => streamable::ENDPOINT.to_string(),
        };
        let mut req = Request::post(&path)
            .header("host", "server")
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()));
        let session = token.filter(|_| streamable).map(str::to_string);
        if streamable {
            req = req.header("accept", "application/json, text/event-stream");
            if let Some(token) = &session {
                req = req
                    .header("mcp-session-id", token.as_str())
                    .header("mcp-protocol-version", mcp::PROTOCOL_VERSION_STREAMABLE);
            }
        }
        let req = match req.body(Full::new(Bytes::from(msg.to_json()))) {
            Ok(r) => r,
            Err(e) => {
                self.protocol_error(conn, "unsendable", unsendable(&path, session.as_deref(), None, &e));
                return None;
            }
        };
        self.rec.record(What::HttpRequest {
            client: self.name(),
            conn,
            method: "POST".into(),
            path,
            last_event_id: None,
            session,
        });
        let resp = match timeout(head_timeout, sender.send_request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: format!("POST failed: {e}") });
                return None;
            }
            Err(_) => {
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: "POST got no response".into() });
                return None;
            }
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type });
        Some(Posted { conn, resp, _driver: driver })
    }
}

/// A POST's response, with the task driving its connection.
struct Posted {
    conn: u32,
    resp: hyper::Response<hyper::body::Incoming>,
    _driver: AbortOnDrop,
}

/// Why a request could not be built: the server handed out a value no URL or
/// header can carry (a session id with a space, an event id with a newline).
pub(crate) fn unsendable(
    path: &str,
    session: Option<&str>,
    last_event_id: Option<&str>,
    e: &hyper::http::Error,
) -> String {
    let mut what = format!("the request cannot be sent ({e}): path {path:?}");
    if let Some(s) = session {
        what.push_str(&format!(", session id {s:?}"));
    }
    if let Some(l) = last_event_id {
        what.push_str(&format!(", Last-Event-ID {l:?}"));
    }
    what.push_str(": the server handed out a value no URL or header can carry");
    what
}
