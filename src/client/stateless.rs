//! The simulated client of `stateless-http` (MCP 2026-07-28).
//!
//! No session and no uplink: each attempt of a tool call is its own POST on
//! its own connection, with the standard headers and `_meta`. A response is
//! JSON, or an SSE stream scoped to the request (progress, then the result).
//! An `InputRequiredResult` ends the request: after `think_time` the client
//! retries under a new id with `inputResponses` and the `requestState`
//! echoed. A stream that breaks or stays silent past `heartbeat_timeout`
//! loses the request: the client closes it (which is the cancellation, if
//! the close gets through) and re-issues it under a new id, with the same
//! backoff as the stateful clients, at most [`MAX_REISSUES`] times.
//!
//! Everything it records is what a real client could observe.

use super::dial::Dialer;
use super::{AbortOnDrop, ClientCmd, ClientShared, HeldState, MAX_BACKOFF, MAX_EVENT_BYTES};
use crate::clock::timeout;
use crate::inbox::Inbox;
use crate::scenario::ClientSpec;
use crate::trace::stateless::{Attempt, CallEnd, InputAsk, Presented, StateHow};
use crate::trace::{ConnId, Purpose, Recorder, What};
use crate::wire::jsonrpc::{Message, RpcId};
use crate::wire::mrtr::{self, Continuation, ResultKind};
use crate::wire::sse::{Decoder, Event, Item};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// Where an attempt leaves what the next round carries (an `input_required` answer's requests and state).
type Next = std::cell::RefCell<Option<Continuation>>;

/// How many times a client re-issues one round of a call after losing its response.
pub const MAX_REISSUES: u32 = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client waits for a response's head, or a JSON body.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// One stateless client actor.
pub(crate) struct Client {
    spec: ClientSpec,
    dialer: Rc<dyn Dialer>,
    rec: Recorder,
    shared: Rc<ClientShared>,
    inbox: Inbox<ClientCmd>,
    rpc_seq: Cell<i64>,
}

/// What a request's credential and state are, for one attempt.
struct Send<'a> {
    call: &'a str,
    tool: &'a str,
    attempt: Attempt,
    cont: Option<&'a Continuation>,
    how: StateHow,
    received_us: Option<u64>,
    credential: Option<String>,
    /// The client declines the elicitations it answers.
    decline: bool,
}

impl Client {
    pub(crate) fn new(
        spec: ClientSpec,
        dialer: Rc<dyn Dialer>,
        rec: Recorder,
        shared: Rc<ClientShared>,
        inbox: Inbox<ClientCmd>,
    ) -> Rc<Self> {
        *shared.credential.borrow_mut() = spec.principal.clone();
        Rc::new(Client { spec, dialer, rec, shared, inbox, rpc_seq: Cell::new(0) })
    }

    fn name(&self) -> String {
        self.spec.name.clone()
    }

    fn next_id(&self) -> RpcId {
        self.rpc_seq.set(self.rpc_seq.get() + 1);
        RpcId::Num(self.rpc_seq.get())
    }

    /// The actor's main loop: one command at a time; calls run on their own.
    pub(crate) async fn run(self: Rc<Self>) {
        loop {
            match self.inbox.recv().await {
                ClientCmd::Call { label, tool, decline } => {
                    tokio::task::spawn_local(self.clone().call(label, tool, decline));
                }
                ClientCmd::Listen => {
                    tokio::task::spawn_local(self.clone().listen());
                }
                ClientCmd::Present { call, tool, held, how, credential } => {
                    let me = self.clone();
                    tokio::task::spawn_local(async move {
                        let cont = Continuation { requests: held.requests.clone(), state: Some(held.state.clone()) };
                        let send = Send {
                            call: &call,
                            tool: &tool,
                            attempt: Attempt::Presented,
                            cont: Some(&cont),
                            how,
                            received_us: held.received_us,
                            credential,
                            decline: false,
                        };
                        let _ = me.attempt(me.next_id(), send).await;
                    });
                }
                // The stateful commands mean nothing here (the loader keeps them out of stateless plans).
                _ => {}
            }
        }
    }

    /// One call, round after round, re-issuing a lost round, until it completes or fails.
    async fn call(self: Rc<Self>, label: String, tool: String, decline: bool) {
        let mut cont: Option<Continuation> = None;
        let mut received_us = None;
        let mut attempt = Attempt::First;
        let mut reissues = 0;
        let mut backoff = Duration::ZERO;
        loop {
            let send = Send {
                call: &label,
                tool: &tool,
                attempt: attempt.clone(),
                cont: cont.as_ref(),
                how: StateHow::AsReceived,
                received_us,
                credential: None,
                decline,
            };
            let (end, next) = self.attempt(self.next_id(), send).await;
            match end {
                CallEnd::InputRequired { .. } => {
                    // The next round answers this one's requests, with its state if it gave one.
                    received_us = crate::clock::now().map(|d| d.as_micros() as u64);
                    cont = next;
                    attempt = Attempt::Retry;
                    reissues = 0;
                    backoff = Duration::ZERO;
                    crate::clock::sleep(self.spec.think_time).await;
                }
                CallEnd::Lost { .. } => {
                    reissues += 1;
                    if reissues > MAX_REISSUES {
                        self.rec.record(What::CallAbandoned {
                            client: self.name(),
                            call: label.clone(),
                            why: format!("{MAX_REISSUES} re-issues lost their responses too"),
                        });
                        return;
                    }
                    backoff = (backoff * 2).clamp(Duration::from_secs(1), MAX_BACKOFF);
                    crate::clock::sleep(backoff).await;
                    attempt = Attempt::Reissue;
                }
                CallEnd::Complete { .. } => {
                    if let Some(h) = self.shared.states.borrow_mut().get_mut(&label) {
                        h.spent = true;
                    }
                    return;
                }
                // An explicit answer: the call is over.
                CallEnd::Error { .. } | CallEnd::Status { .. } | CallEnd::Garbled { .. } => return,
            }
        }
    }

    /// Sends one attempt and reads its response to the end; records both.
    /// On `input_required`, also what the next round carries.
    async fn attempt(&self, id: RpcId, s: Send<'_>) -> (CallEnd, Option<Continuation>) {
        let n = self.shared.conn_seq.get() + 1;
        self.shared.conn_seq.set(n);
        let conn = ConnId(n);
        let next = Next::default();
        let end = self.exchange(conn, &id, &s, &next).await;
        self.shared.open_calls.borrow_mut().remove(s.call);
        self.rec.record(What::CallEnded { client: self.name(), conn, call: s.call.to_string(), id, end: end.clone() });
        (end, next.into_inner())
    }

    /// Dials connection `conn` for `purpose` and speaks HTTP/1 on it: the
    /// request sender, the task driving it (dropping it closes the
    /// connection) and the local port; or how that failed.
    async fn open(
        &self,
        conn: ConnId,
        purpose: Purpose,
    ) -> Result<(hyper::client::conn::http1::SendRequest<Full<Bytes>>, AbortOnDrop, u16), CallEnd> {
        let d = match timeout(CONNECT_TIMEOUT, self.dialer.dial()).await {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                self.rec.record(What::ConnectFailed { client: self.name(), conn, error: e.to_string() });
                return Err(CallEnd::Lost { why: format!("could not connect: {e}") });
            }
            Err(_) => {
                self.rec.record(What::ConnectFailed { client: self.name(), conn, error: "connect timed out".into() });
                return Err(CallEnd::Lost { why: "connect timed out".into() });
            }
        };
        self.rec.record(What::Connect { client: self.name(), conn, port: d.local_port, purpose });
        let Ok((sender, driver)) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(d.stream)).await
        else {
            return Err(CallEnd::Lost { why: "HTTP handshake failed".into() });
        };
        let driver = AbortOnDrop(tokio::task::spawn_local(async move {
            let _ = driver.await;
        }));
        Ok((sender, driver, d.local_port))
    }

    /// A POST of `msg` to the endpoint with the 2026-07-28 headers, presenting `credential`.
    fn post(&self, msg: &Message, credential: &str) -> Result<Request<Full<Bytes>>, CallEnd> {
        let mut req = Request::post(mrtr::ENDPOINT)
            .header("host", self.dialer.authority())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {credential}"));
        for (k, v) in mrtr::standard_headers(msg) {
            req = req.header(k, v);
        }
        req.body(Full::new(Bytes::from(msg.to_json())))
            .map_err(|e| CallEnd::Garbled { what: format!("the request cannot be sent: {e}") })
    }

    /// Records an SSE event a stream delivered; returns its JSON-RPC message, if its data is one.
    fn record_event(&self, conn: ConnId, ev: &Event) -> Option<Message> {
        let msg = Message::parse(&ev.data).ok();
        self.rec.record(What::sse_event(self.name(), conn, ev, msg.as_ref()));
        msg
    }

    /// Keeps one listen stream for tool-list changes open: listens, reads
    /// the stream until it ends, breaks, goes silent or is refused, and
    /// listens again after the backoff, for the rest of the run.
    async fn listen(self: Rc<Self>) {
        let mut backoff = Duration::ZERO;
        loop {
            let id = self.next_id();
            let n = self.shared.conn_seq.get() + 1;
            self.shared.conn_seq.set(n);
            let conn = ConnId(n);
            let end = self.listen_once(conn, &id).await;
            let heard = matches!(end, Ok(true));
            let end = match end {
                Ok(_) => CallEnd::Lost { why: "the listen stream ended".into() },
                Err(e) => e,
            };
            self.rec.record(What::ListenEnded { client: self.name(), conn, id, end });
            // A stream that worked for a while earns a fresh backoff.
            backoff =
                if heard { Duration::from_secs(1) } else { (backoff * 2).clamp(Duration::from_secs(1), MAX_BACKOFF) };
            crate::clock::sleep(backoff).await;
        }
    }

    /// One listen stream: `Ok(acknowledged)` when it ended without a refusal.
    async fn listen_once(&self, conn: ConnId, id: &RpcId) -> Result<bool, CallEnd> {
        let (mut sender, _driver, port) = self.open(conn, Purpose::Uplink).await?;
        crate::quiet::conn_port(&self.spec.name, conn.0, port);
        let msg = mrtr::listen(id.clone(), &self.spec.name);
        let credential = self.shared.credential.borrow().clone();
        let req = self.post(&msg, &credential)?;
        self.rec.record(What::ListenSent { client: self.name(), conn, id: id.clone() });
        let resp = match timeout(HEAD_TIMEOUT, sender.send_request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(CallEnd::Lost { why: format!("POST failed: {e}") }),
            Err(_) => return Err(CallEnd::Lost { why: "no response".into() }),
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type: content_type.clone() });
        if !content_type.unwrap_or_default().starts_with("text/event-stream") {
            return Err(refusal(resp, status).await);
        }
        let mut body = resp.into_body();
        let silence = self.spec.heartbeat_timeout;
        let mut decoder = Decoder::new();
        let mut last_item = crate::clock::Stamp::now();
        let mut acknowledged = false;
        loop {
            let left = silence.saturating_sub(last_item.elapsed());
            // The silence watchdog, which a healthy stream's keep-alive re-arms (crate::quiet).
            let watchdog = crate::quiet::Kind::Watchdog { client: self.spec.name.clone(), conn: conn.0, silence };
            let frame = match crate::clock::timeout_as(left, watchdog, body.frame()).await {
                Err(_) => {
                    self.rec.record(What::UplinkSilent {
                        client: self.name(),
                        conn,
                        silent_ms: silence.as_millis() as u64,
                    });
                    return Err(CallEnd::Lost { why: format!("silent for {:.1} s", silence.as_secs_f64()) });
                }
                Ok(None) => return Ok(acknowledged),
                Ok(Some(Err(e))) => return Err(CallEnd::Lost { why: format!("the stream broke: {e}") }),
                Ok(Some(Ok(f))) => f,
            };
            let Some(data) = frame.data_ref() else { continue };
            let items = decoder.feed(data);
            if !items.is_empty() {
                last_item = crate::clock::Stamp::now();
            }
            if decoder.pending_bytes() > MAX_EVENT_BYTES {
                return Err(self.garbled(conn, format!("an event grew past {MAX_EVENT_BYTES} bytes")));
            }
            for item in items {
                let Item::Event(ev) = item else { continue };
                if let Some(end) = self.on_listen_event(conn, id, &ev, &mut acknowledged) {
                    return end;
                }
            }
        }
    }

    /// One event on listen stream `id`: recorded, and checked (a
    /// notification carries the subscription's id, the acknowledgement
    /// first). `Some`: the stream's end (a response or an error ends it).
    fn on_listen_event(
        &self,
        conn: ConnId,
        id: &RpcId,
        ev: &Event,
        acknowledged: &mut bool,
    ) -> Option<Result<bool, CallEnd>> {
        let msg = self.record_event(conn, ev);
        let problem = match &msg {
            Some(Message::Notification { method, params }) => {
                let tagged = params.get("_meta").and_then(|m| m.get(mrtr::META_SUBSCRIPTION));
                if tagged != Some(&serde_json::json!(id)) {
                    Some(format!("{method} without this subscription's id ({id}) in _meta"))
                } else if !*acknowledged && method != mrtr::ACKNOWLEDGED {
                    Some(format!("{method} before notifications/subscriptions/acknowledged"))
                } else {
                    *acknowledged = true;
                    None
                }
            }
            Some(Message::Response { .. }) => return Some(Ok(*acknowledged)),
            Some(Message::Error { code, message, .. }) => {
                return Some(Err(CallEnd::Error { code: *code, message: message.clone() }))
            }
            Some(Message::Request { method, .. }) => {
                Some(format!("the server sent a {method} request, which MCP 2026-07-28 forbids"))
            }
            None => Some("an event whose data is not a JSON-RPC message".into()),
        };
        if let Some(what) = problem {
            self.rec.record(What::ProtocolError { client: self.name(), conn, problem: "listen".into(), what });
        }
        None
    }

    async fn exchange(&self, conn: ConnId, id: &RpcId, s: &Send<'_>, next: &Next) -> CallEnd {
        let (mut sender, _driver, port) = match self.open(conn, Purpose::Call).await {
            Ok(x) => x,
            Err(end) => return end,
        };
        self.shared.open_calls.borrow_mut().insert(s.call.to_string(), port);
        let own = self.shared.credential.borrow().clone();
        let presented = s.credential.clone().unwrap_or(own);
        let answers = s.cont.map_or(Vec::new(), |c| mrtr::answers(c, &self.spec.name, s.call, s.decline));
        let msg = mrtr::tool_call(id.clone(), &self.spec.name, s.tool, s.call, s.cont, &answers);
        let req = self.post(&msg, &presented);
        let state = s.cont.and_then(|c| c.state.as_ref()).map(|st| Presented {
            fp: mrtr::fingerprint(st),
            how: s.how.clone(),
            received_us: s.received_us,
        });
        self.rec.record(What::CallSent {
            client: self.name(),
            conn,
            call: s.call.to_string(),
            tool: s.tool.to_string(),
            id: id.clone(),
            attempt: s.attempt.clone(),
            state,
            credential: (presented != self.spec.principal).then_some(presented),
            answers,
        });
        let req = match req {
            Ok(r) => r,
            Err(end) => return end,
        };
        let resp = match timeout(HEAD_TIMEOUT, sender.send_request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return CallEnd::Lost { why: format!("POST failed: {e}") },
            Err(_) => return CallEnd::Lost { why: "no response".into() },
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type: content_type.clone() });
        let ct = content_type.unwrap_or_default();
        if ct.starts_with("text/event-stream") {
            return self.read_stream(conn, (id, s.call, s.tool), resp.into_body(), next).await;
        }
        let body = match timeout(HEAD_TIMEOUT, resp.into_body().collect()).await {
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(e)) => return CallEnd::Lost { why: format!("the body broke: {e}") },
            Err(_) => return CallEnd::Lost { why: "the body never ended".into() },
        };
        if !ct.starts_with("application/json") {
            if status != 200 {
                return CallEnd::Status { status };
            }
            return self.garbled(conn, format!("a 200 that is neither JSON nor SSE (content-type {ct:?})"));
        }
        match std::str::from_utf8(&body).ok().and_then(|t| Message::parse(t).ok()) {
            Some(m) => self.on_final(conn, (id, s.call, s.tool), m, status, next),
            None if status != 200 => CallEnd::Status { status },
            None => self.garbled(conn, "a JSON body that is not a JSON-RPC message".into()),
        }
    }

    fn garbled(&self, conn: ConnId, what: String) -> CallEnd {
        self.rec.record(What::ProtocolError {
            client: self.name(),
            conn,
            problem: "garbage".into(),
            what: what.clone(),
        });
        CallEnd::Garbled { what }
    }

    /// The message that ends a request: its response, or an error.
    fn on_final(
        &self,
        conn: ConnId,
        (id, call, tool): (&RpcId, &str, &str),
        msg: Message,
        status: u16,
        next: &Next,
    ) -> CallEnd {
        match msg {
            Message::Error { code, message, .. } => CallEnd::Error { code, message },
            Message::Response { id: rid, result } if rid == *id => match mrtr::result_kind(&result) {
                Ok(ResultKind::Complete { is_error, data_of }) => CallEnd::Complete { is_error, data_of },
                Ok(ResultKind::InputRequired(c)) => {
                    let fp = c.state.as_deref().map(mrtr::fingerprint);
                    // What a step may steal, alter or present again: the latest state of the call.
                    match &c.state {
                        Some(state) => {
                            let received_us = crate::clock::now().map(|d| d.as_micros() as u64);
                            let held = HeldState {
                                tool: tool.to_string(),
                                state: state.clone(),
                                requests: c.requests.clone(),
                                received_us,
                                spent: false,
                            };
                            self.shared.states.borrow_mut().insert(call.to_string(), held);
                        }
                        None => {
                            self.shared.states.borrow_mut().remove(call);
                        }
                    }
                    let requests =
                        c.requests.iter().map(|(k, m)| InputAsk { key: k.clone(), method: m.clone() }).collect();
                    *next.borrow_mut() = Some(c);
                    CallEnd::InputRequired { state: fp, requests }
                }
                Err(what) => self.garbled(conn, what),
            },
            Message::Response { id: rid, .. } => self.garbled(conn, format!("a response to {rid}, not to {id}")),
            _ if status != 200 => CallEnd::Status { status },
            other => self.garbled(
                conn,
                format!("{} instead of a response", crate::trace::describe_rpc(&Some(other.summary()), "message")),
            ),
        }
    }

    /// Reads a request's SSE stream: notifications, then the response.
    async fn read_stream(
        &self,
        conn: ConnId,
        (id, call, tool): (&RpcId, &str, &str),
        mut body: hyper::body::Incoming,
        next: &Next,
    ) -> CallEnd {
        let silence = self.spec.heartbeat_timeout;
        let mut decoder = Decoder::new();
        let mut last_item = crate::clock::Stamp::now();
        loop {
            let left = silence.saturating_sub(last_item.elapsed());
            let frame = match timeout(left, body.frame()).await {
                Err(_) => {
                    self.rec.record(What::UplinkSilent {
                        client: self.name(),
                        conn,
                        silent_ms: silence.as_millis() as u64,
                    });
                    return CallEnd::Lost { why: format!("silent for {:.1} s", silence.as_secs_f64()) };
                }
                Ok(None) => {
                    self.rec.record(What::UplinkEnded {
                        client: self.name(),
                        conn,
                        reason: crate::trace::SERVER_ENDED.into(),
                    });
                    return CallEnd::Lost { why: "the stream ended without the response".into() };
                }
                Ok(Some(Err(e))) => {
                    self.rec.record(What::UplinkEnded {
                        client: self.name(),
                        conn,
                        reason: format!("stream error: {e}"),
                    });
                    return CallEnd::Lost { why: format!("the stream broke: {e}") };
                }
                Ok(Some(Ok(f))) => f,
            };
            let Some(data) = frame.data_ref() else { continue };
            let items = decoder.feed(data);
            if !items.is_empty() {
                last_item = crate::clock::Stamp::now();
            }
            if decoder.pending_bytes() > MAX_EVENT_BYTES {
                return self.garbled(conn, format!("an event grew past {MAX_EVENT_BYTES} bytes"));
            }
            for item in items {
                let Item::Event(ev) = item else { continue };
                let msg = self.record_event(conn, &ev);
                match msg {
                    Some(Message::Notification { .. }) => {}
                    Some(Message::Request { method, .. }) => {
                        self.rec.record(What::ProtocolError {
                            client: self.name(),
                            conn,
                            problem: "server-request".into(),
                            what: format!("the server sent a {method} request, which MCP 2026-07-28 forbids"),
                        });
                    }
                    Some(m) => return self.on_final(conn, (id, call, tool), m, 200, next),
                    None => {
                        return self.garbled(conn, "an event whose data is not a JSON-RPC message".into());
                    }
                }
            }
        }
    }
}

/// How a request the server answered without a stream ended: its
/// JSON-RPC error, when the body holds one, else its HTTP status.
async fn refusal(resp: hyper::Response<hyper::body::Incoming>, status: u16) -> CallEnd {
    let body = timeout(HEAD_TIMEOUT, resp.into_body().collect()).await;
    let msg = body.ok().and_then(|b| b.ok()).and_then(|b| Message::parse(&String::from_utf8_lossy(&b.to_bytes())).ok());
    match msg {
        Some(Message::Error { code, message, .. }) => CallEnd::Error { code, message },
        _ => CallEnd::Status { status },
    }
}
