//! The simulated MCP client (legacy-sse dialect).
//!
//! A well-behaved client: it opens its uplink, initializes, tracks the last
//! event id, answers server requests after `think_time`, resumes with
//! `Last-Event-ID` when its uplink dies or goes silent (missed heartbeats),
//! and re-initializes when a resumption is refused. A token thief is the
//! same client after `steal-token` handed it someone else's token.
//!
//! Everything a client records is what a real client could observe.

use crate::scenario::{ClientSpec, LastEventId};
use crate::trace::{Purpose, Recorder, What};
use crate::wire::jsonrpc::{mcp, Message, RpcId};
use crate::wire::sse::{Decoder, Item};
use crate::world::Inbox;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use turmoil::net::TcpStream;

/// Commands the step loop sends a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientCmd {
    Connect,
    Resume(LastEventId),
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

const PORT: u16 = 80;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest SSE event a client accepts.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// The longest a client waits between two reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// One client actor.
pub struct Client {
    spec: ClientSpec,
    nat: String,
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
        nat: String,
        rec: Recorder,
        shared: Rc<ClientShared>,
        inbox: Inbox<ClientCmd>,
    ) -> Rc<Client> {
        *shared.credential.borrow_mut() = spec.principal.clone();
        Rc::new(Client { spec, nat, rec, shared, inbox, st: RefCell::new(State::default()) })
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
                                LastEventId::LastSeen => self.st.borrow().last_seen.clone(),
                                LastEventId::Id(n) => Some(n.to_string()),
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

    async fn connect(&self, purpose: Purpose) -> Option<(u32, TcpStream)> {
        let conn = self.shared.conn_seq.get() + 1;
        self.shared.conn_seq.set(conn);
        match timeout(CONNECT_TIMEOUT, TcpStream::connect((self.nat.as_str(), PORT))).await {
            Ok(Ok(s)) => {
                let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
                self.rec.record(What::Connect { client: self.name(), conn, port, purpose });
                Some((conn, s))
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

    async fn uplink(self: Rc<Self>, gen: u64, mode: Mode) {
        let resuming = matches!(mode, Mode::Resume { .. });
        let Some((conn, stream)) = self.connect(Purpose::Uplink).await else {
            return self.retry_later(gen, !resuming);
        };
        let Ok((mut sender, driver)) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await
        else {
            return self.retry_later(gen, !resuming);
        };
        let _driver = AbortOnDrop(tokio::task::spawn_local(async move {
            let _ = driver.await;
        }));
        let (path, last_event_id) = match &mode {
            Mode::Fresh => ("/mcp/sse".to_string(), None),
            Mode::Resume { token, last_event_id } => (format!("/mcp/sse?sessionId={token}"), last_event_id.clone()),
        };
        let mut req = Request::get(&path)
            .header("host", "server")
            .header("accept", "text/event-stream")
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()));
        if let Some(id) = &last_event_id {
            req = req.header("last-event-id", id.as_str());
        }
        let req = req.body(Empty::new()).expect("valid request");
        self.rec.record(What::HttpRequest { client: self.name(), conn, method: "GET".into(), path, last_event_id });
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
                return self.retry_later(gen, !resuming);
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
                return self.retry_later(gen, !resuming);
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type: content_type.clone() });
        let is_stream = content_type.as_deref().is_some_and(|c| c.starts_with("text/event-stream"));
        if status != 200 || !is_stream {
            if resuming {
                self.rec.record(What::Rejected { client: self.name(), conn, how: format!("HTTP {status}") });
                return self.reinitialize(&format!("resumption refused with HTTP {status}"));
            }
            self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: format!("HTTP {status}") });
            return self.retry_later(gen, true);
        }
        self.st.borrow_mut().backoff = Duration::ZERO;

        let mut body = resp.into_body();
        let mut decoder = Decoder::new();
        let mut any_event = false;
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
                    return self.retry_later(gen, false);
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
                    if resuming && !any_event {
                        self.rec.record(What::Rejected {
                            client: self.name(),
                            conn,
                            how: "200 with an empty stream".into(),
                        });
                        return self.reinitialize("resumption answered with an empty stream");
                    }
                    return self.retry_later(gen, false);
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
                    return self.retry_later(gen, false);
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
                return self.retry_later(gen, false);
            }
            for item in items {
                let Item::Event(ev) = item else { continue };
                any_event = true;
                match ev.event.as_str() {
                    "endpoint" => self.clone().on_endpoint(&ev.data, conn),
                    "error" => {
                        self.record_sse(conn, &ev, None);
                        self.rec.record(What::Rejected { client: self.name(), conn, how: "error event".into() });
                        return self.reinitialize("resumption refused with an error event");
                    }
                    _ => {
                        let msg = Message::parse(&ev.data).ok();
                        self.record_sse(conn, &ev, msg.as_ref());
                        if let Some(id) = &ev.id {
                            self.st.borrow_mut().last_seen = Some(id.clone());
                        }
                        if let Some(msg) = msg {
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
        let Some(token) = data.split("sessionId=").nth(1).map(|t| t.split('&').next().unwrap_or(t).to_string()) else {
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
                let fresh = self.st.borrow_mut().seen.insert(id.clone(), (method.clone(), gen)).is_none();
                if fresh && self.spec.auto_answer {
                    let think = self.spec.think_time;
                    tokio::task::spawn_local(async move {
                        tokio::time::sleep(think).await;
                        // A request belongs to the uplink that carried it: once that
                        // uplink is gone, the client waits for a re-issue instead of
                        // answering into a stream state the server may have dropped.
                        if self.st.borrow().gen != gen {
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
        let status = self.post(&msg).await;
        self.rec.record(What::Answer { client: self.name(), id, method, status });
    }

    /// POSTs one message on its own connection; returns the status if any.
    async fn post(&self, msg: &Message) -> Option<u16> {
        let token = self.shared.token.borrow().clone()?;
        let (conn, stream) = self.connect(Purpose::Post).await?;
        let (mut sender, driver) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await.ok()?;
        let _driver = AbortOnDrop(tokio::task::spawn_local(async move {
            let _ = driver.await;
        }));
        let path = format!("/mcp/messages?sessionId={token}");
        let req = Request::post(&path)
            .header("host", "server")
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()))
            .body(Full::new(Bytes::from(msg.to_json())))
            .expect("valid request");
        self.rec.record(What::HttpRequest {
            client: self.name(),
            conn,
            method: "POST".into(),
            path,
            last_event_id: None,
        });
        let resp = match timeout(POST_TIMEOUT, sender.send_request(req)).await {
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
        let _ = timeout(POST_TIMEOUT, resp.into_body().collect()).await;
        Some(status)
    }
}
