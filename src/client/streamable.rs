//! The client's `streamable-http` side: session setup by POST, tool calls
//! whose POST response streams carry related server requests, resumption of
//! any stream by GET with `Last-Event-ID`, and DELETE.

use super::session::{SessionWire, UplinkRefusal};
use super::*;

/// The one MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// A tool call in flight.
pub struct CallState {
    /// The client's JSON-RPC id of the `tools/call`.
    pub rpc: RpcId,
    /// The last event id seen on the call's stream.
    pub last_seen: Option<String>,
    /// The generation of the connection now reading the call's stream.
    pub gen: u64,
    pub task: Option<JoinHandle<()>>,
}

/// What a GET resuming a call's stream came to.
enum Resumed {
    /// The stream, on this connection.
    Stream(ConnId, hyper::body::Incoming, AbortOnDrop),
    /// The server refused it (or it could not be sent): the call ends.
    Refused,
    /// The network lost it (no connection, no answer): try again.
    Lost,
}

/// streamable-http, as the client speaks it.
pub(super) struct Streamable;

impl SessionWire for Streamable {
    fn opens_by_post(&self) -> bool {
        true
    }

    fn is_resumption(&self, mode: &Mode) -> bool {
        // A GET without `Last-Event-ID` opens a fresh stream on the session.
        matches!(mode, Mode::Resume { last_event_id: Some(_), .. })
    }

    fn retries_fresh(&self, _resuming: bool) -> bool {
        false
    }

    fn uplink_target(&self, mode: &Mode) -> (String, Option<String>, Option<String>) {
        match mode {
            // A fresh uplink opens its session by POST first (never reaches here fresh).
            Mode::Fresh => (crate::wire::legacy::SSE_PATH.to_string(), None, None),
            Mode::Resume { token, last_event_id } => (ENDPOINT.to_string(), Some(token.clone()), last_event_id.clone()),
        }
    }

    fn post_target(&self, token: Option<&str>) -> (String, Option<String>) {
        (ENDPOINT.to_string(), token.map(str::to_string))
    }

    fn post_accepts_sse(&self) -> bool {
        true
    }

    fn uplink_refusal(&self, status: u16) -> UplinkRefusal {
        match status {
            // The session is gone: start a new one (MCP 2025-11-25).
            404 => UplinkRefusal::SessionGone,
            // The server offers no standalone stream.
            405 => UplinkRefusal::NoStream,
            _ => UplinkRefusal::Other,
        }
    }

    fn empty_resumption_is_refusal(&self) -> bool {
        false
    }

    fn has_endpoint_event(&self) -> bool {
        false
    }
}

/// Whether a response is an SSE stream.
fn is_event_stream<B>(resp: &hyper::Response<B>) -> bool {
    resp.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"))
}

impl Client {
    /// POSTs `initialize` without a session, keeps the `Mcp-Session-Id` the
    /// server returns and sends `notifications/initialized`.
    pub(super) async fn init_session(self: &Rc<Self>) -> Option<String> {
        let id = {
            let mut st = self.st.borrow_mut();
            st.rpc_seq += 1;
            let id = RpcId::Num(st.rpc_seq);
            st.init_id = Some(id.clone());
            id
        };
        let msg = mcp::initialize_at(id.clone(), &self.spec.name, mcp::PROTOCOL_VERSION_STREAMABLE);
        let posted = self.send_post(&msg, None, Purpose::Post, self.spec.heartbeat_timeout).await?;
        let conn = posted.conn;
        let token = posted.resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
        let status = posted.resp.status().as_u16();
        let is_stream = is_event_stream(&posted.resp);
        // The answer comes as JSON or as an SSE stream that ends after it.
        let body = match timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await {
            Ok(Ok(b)) => b.to_bytes(),
            _ => {
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: "initialize: no body".into() });
                return None;
            }
        };
        let answered = if is_stream {
            let mut decoder = Decoder::new();
            let mut found = false;
            for item in decoder.feed(&body) {
                if let Item::Event(ev) = item {
                    let m = Message::parse(&ev.data).ok();
                    self.record_sse(conn, &ev, m.as_ref());
                    found |= matches!(m, Some(Message::Response { id: ref r, .. }) if *r == id);
                }
            }
            found
        } else {
            matches!(std::str::from_utf8(&body).ok().and_then(|t| Message::parse(t).ok()),
                Some(Message::Response { id: ref r, .. }) if *r == id)
        };
        let token = match token {
            Some(t) if status == 200 && answered => t,
            _ => {
                let why = if status != 200 {
                    format!("initialize: HTTP {status}")
                } else if !answered {
                    "initialize: no result".to_string()
                } else {
                    "initialize: no Mcp-Session-Id".to_string()
                };
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: why });
                return None;
            }
        };
        self.rec.record(What::SessionToken { client: self.name(), conn, token: token.clone() });
        *self.shared.token.borrow_mut() = Some(token.clone());
        // Its own task, awaited: a `resume` step right after `connect`
        // aborts this uplink task, and must not abort the handshake with it
        // (the server would never register the session: rmcp logged "no
        // initialized session" on 156 of 500 hunt seeds).
        let me = self.clone();
        let _ = tokio::task::spawn_local(async move { me.post(&mcp::initialized()).await }).await;
        Some(token)
    }

    pub(super) fn start_call(self: Rc<Self>, label: String, method: String) {
        let Some(token) = self.shared.token.borrow().clone() else {
            self.rec.record(What::AppError {
                client: self.name(),
                error: format!("cannot call the ask tool for {label}: the client holds no session"),
            });
            return;
        };
        let rpc = {
            let mut st = self.st.borrow_mut();
            st.rpc_seq += 1;
            RpcId::Num(st.rpc_seq)
        };
        let gen = self.next_call_gen();
        let me = self.clone();
        let task = tokio::task::spawn_local(me.call_tool(token, label.clone(), method, rpc.clone(), gen));
        self.st.borrow_mut().calls.insert(label, CallState { rpc, last_seen: None, gen, task: Some(task) });
    }

    fn next_call_gen(&self) -> u64 {
        let mut st = self.st.borrow_mut();
        st.call_gen += 1;
        st.call_gen
    }

    /// Whether `msg` is the result of tool call `label`.
    pub(super) fn is_call_result(&self, label: &str, msg: &Message) -> bool {
        let st = self.st.borrow();
        let Some(call) = st.calls.get(label) else { return false };
        matches!(msg, Message::Response { id, .. } | Message::Error { id: Some(id), .. } if *id == call.rpc)
    }

    /// Calls the tool, reads its response stream and resumes that stream by
    /// GET with `Last-Event-ID` until the result arrives.
    async fn call_tool(self: Rc<Self>, token: String, label: String, method: String, rpc: RpcId, mut gen: u64) {
        let msg = mcp::call_tool(rpc, &self.spec.name, &label, &method);
        let Some(posted) = self.send_post(&msg, Some(&token), Purpose::Call, self.spec.heartbeat_timeout).await else {
            return self.give_up_call(&label, "its POST got no response");
        };
        let is_stream = is_event_stream(&posted.resp);
        if posted.resp.status() != 200 || !is_stream {
            let _ = timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await;
            return self.end_call(&label);
        }
        let (mut conn, mut body) = (posted.conn, posted.resp.into_body());
        let mut _driver = posted._driver;
        let mut empty_polls = 0;
        loop {
            let (end, any_item) = self.read_stream(conn, body, gen, Some(&label), Some(&token)).await;
            match end {
                StreamEnd::Complete => return self.end_call(&label),
                StreamEnd::ErrorEvent => {
                    self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::ErrorEvent });
                    return self.end_call(&label);
                }
                // Ended with nothing, even on a resumption, is SSE polling
                // (MCP 2025-11-25, SEP-1699): resume again after `retry`, a
                // few times; a call's stream that stays empty is gone.
                StreamEnd::Ended if !any_item && empty_polls + 1 >= super::EMPTY_POLLS => {
                    let why = format!("{} polls in a row returned nothing", super::EMPTY_POLLS);
                    self.rec.record(What::UplinkEnded {
                        client: self.name(),
                        conn,
                        reason: format!("tool call {label}: {why}; giving up"),
                    });
                    return self.give_up_call(&label, &why);
                }
                StreamEnd::Silent | StreamEnd::Ended | StreamEnd::Broken => {}
            }
            empty_polls = if any_item { 0 } else { empty_polls + 1 };
            // The stream was lost before the result: resume it.
            let last = self.st.borrow().calls.get(&label).and_then(|c| c.last_seen.clone());
            let Some(last) = last else {
                self.rec.record(What::UplinkEnded {
                    client: self.name(),
                    conn,
                    reason: format!("tool call {label}: stream lost before any event id; cannot resume"),
                });
                return self.give_up_call(&label, "its stream was lost before any event id: nothing to resume from");
            };
            let delay = self.st.borrow().retry_ms.map_or(Duration::from_secs(1), Duration::from_millis);
            crate::clock::sleep(delay).await;
            if self.shared.token.borrow().as_deref() != Some(token.as_str()) {
                return self.give_up_call(&label, "the client left the session meanwhile");
            }
            gen = self.next_call_gen();
            if let Some(c) = self.st.borrow_mut().calls.get_mut(&label) {
                c.gen = gen;
            }
            // A resumption the network lost (no connection, no answer) is
            // tried again, as the standalone stream's is: only the server's
            // refusal ends the call (found by hunting: a rebind ate the
            // answer to the call's resumption, and the client gave up a
            // result the server still held).
            loop {
                match self.get_stream(&token, &last).await {
                    Resumed::Stream(c, b, d) => {
                        (conn, body, _driver) = (c, b, d);
                        break;
                    }
                    Resumed::Refused => return self.give_up_call(&label, "its stream could not be resumed"),
                    Resumed::Lost => {
                        crate::clock::sleep(delay).await;
                        if self.shared.token.borrow().as_deref() != Some(token.as_str()) {
                            return self.give_up_call(&label, "the client left the session meanwhile");
                        }
                    }
                }
            }
        }
    }

    /// GETs a call's stream from `last`.
    async fn get_stream(self: &Rc<Self>, token: &str, last: &str) -> Resumed {
        let Some((conn, mut sender, driver)) = self.open::<Empty<Bytes>>(Purpose::Call).await else {
            return Resumed::Lost;
        };
        let req = match self.get_request(ENDPOINT, Some(token), Some(last)) {
            Ok(r) => r,
            Err(e) => {
                self.protocol_error(conn, "unsendable", e);
                return Resumed::Refused;
            }
        };
        self.rec.record(self.request_event(conn, "GET", ENDPOINT.into(), Some(last.into()), Some(token.into())));
        let resp = match timeout(self.spec.heartbeat_timeout, sender.send_request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.rec.record(What::UplinkEnded {
                    client: self.name(),
                    conn,
                    reason: format!("request failed: {e}"),
                });
                return Resumed::Lost;
            }
            Err(_) => {
                self.rec.record(What::UplinkSilent {
                    client: self.name(),
                    conn,
                    silent_ms: self.spec.heartbeat_timeout.as_millis() as u64,
                });
                return Resumed::Lost;
            }
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type: content_type.clone() });
        if status != 200 || !content_type.is_some_and(|c| c.starts_with("text/event-stream")) {
            self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::Status(status) });
            if status == 404 {
                self.reinitialize("HTTP 404: the session is gone");
            }
            return Resumed::Refused;
        }
        Resumed::Stream(conn, resp.into_body(), driver)
    }

    fn end_call(&self, label: &str) {
        self.st.borrow_mut().calls.remove(label);
    }

    /// Ends call `label` without its result, and says so in the trace.
    fn give_up_call(&self, label: &str, why: &str) {
        self.rec.record(What::CallAbandoned { client: self.name(), call: label.into(), why: why.into() });
        self.end_call(label);
    }

    /// Calls `enable_tool` for `tool` on the held session (whoever's it is)
    /// and records whether the server enabled it: a JSON or SSE answer to
    /// the call that is a tool result, not an error.
    pub(super) async fn enable_tool(self: Rc<Self>, tool: String) {
        let Some(token) = self.shared.token.borrow().clone() else {
            self.rec.record(What::AppError {
                client: self.name(),
                error: format!("cannot call enable_tool for {tool}: the client holds no session"),
            });
            return;
        };
        let rpc = {
            let mut st = self.st.borrow_mut();
            st.rpc_seq += 1;
            RpcId::Num(st.rpc_seq)
        };
        let msg = mcp::enable_tool(rpc.clone(), &tool);
        let (conn, enabled) = match self.post_once(&msg, Some(&token), Purpose::Post, POST_TIMEOUT).await {
            Ok(posted) => {
                let status = posted.resp.status().as_u16();
                match timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await {
                    Ok(Ok(body)) => (posted.conn, Some(status == 200 && is_tool_success(&body.to_bytes(), &rpc))),
                    // The answer did not come whole: the server may have acted.
                    _ => (posted.conn, (status != 200).then_some(false)),
                }
            }
            Err(Some(conn)) => (conn, None),
            Err(None) => return,
        };
        self.rec.record(What::ToolEnableEnded { client: self.name(), conn, tool, enabled });
    }

    /// Ends the session with DELETE and forgets it.
    pub(super) async fn end_session(self: Rc<Self>) {
        let Some(token) = self.shared.token.borrow_mut().take() else { return };
        {
            let mut st = self.st.borrow_mut();
            if let Some(old) = st.uplink.take() {
                old.abort();
            }
            st.gen += 1;
            st.last_seen = None;
        }
        let Some((conn, mut sender, _driver)) = self.open::<Empty<Bytes>>(Purpose::Post).await else { return };
        let req = Request::delete(ENDPOINT)
            .header("host", self.dialer.authority())
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()))
            .header("mcp-session-id", token.as_str())
            .header("mcp-protocol-version", mcp::PROTOCOL_VERSION_STREAMABLE)
            .body(Empty::<Bytes>::new());
        let req = match req {
            Ok(r) => r,
            Err(e) => {
                self.protocol_error(conn, "unsendable", super::unsendable(ENDPOINT, Some(&token), None, &e));
                return;
            }
        };
        self.rec.record(self.request_event(conn, "DELETE", ENDPOINT.into(), None, Some(token)));
        if let Ok(Ok(resp)) = timeout(POST_TIMEOUT, sender.send_request(req)).await {
            let status = resp.status().as_u16();
            let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
            self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type });
        }
    }
}

/// Whether a POST's body (JSON, or SSE whose `data:` lines carry JSON)
/// holds a successful tool result for request `rpc`.
fn is_tool_success(body: &[u8], rpc: &RpcId) -> bool {
    let text = String::from_utf8_lossy(body);
    let ok = |m: Message| matches!(m, Message::Response { ref id, ref result } if id == rpc && result["isError"].as_bool() != Some(true));
    if let Ok(m) = Message::parse(text.trim()) {
        return ok(m);
    }
    text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| Message::parse(d.trim()).ok()).any(ok)
}
