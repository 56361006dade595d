//! The `streamable-http` dialect (MCP 2025-11-25) of the reference engine.
//!
//! One endpoint, [`ENDPOINT`]: `POST` carries every client message (an
//! `initialize` without `Mcp-Session-Id` opens a session and returns its id in
//! that header); `GET` opens the standalone stream, or resumes any stream
//! with `Last-Event-ID`; `DELETE` ends the session. A `tools/call` of the
//! `ask` tool answers with an SSE stream of its own, on which the server
//! issues the request the call names (related to the call) and, once that is
//! settled, the tool result. Every stream starts with a priming event (an id
//! and empty data, with `retry`). Unknown sessions get 404.

use super::*;
use crate::wire::jsonrpc::mcp::{ASK_TOOL, ENABLE_TOOL, PROTOCOL_VERSION_STREAMABLE};

/// The one MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// The `MCP-Protocol-Version`s the engine accepts.
const SUPPORTED_VERSIONS: [&str; 3] = [PROTOCOL_VERSION_STREAMABLE, "2025-06-18", "2025-03-26"];

/// The reconnection delay every priming event announces.
const PRIMING_RETRY: Duration = Duration::from_secs(1);

pub(super) async fn handle(shared: Rc<Shared>, ctl: Rc<ConnCtl>, req: Request<Incoming>) -> Response<Body> {
    if req.uri().path() != ENDPOINT {
        return rpc_error(StatusCode::NOT_FOUND, "no such endpoint");
    }
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    // A client that names a protocol version must name one this server speaks.
    if let Some(v) = req.headers().get("mcp-protocol-version") {
        if !SUPPORTED_VERSIONS.iter().any(|s| v.as_bytes() == s.as_bytes()) {
            return rpc_error(StatusCode::BAD_REQUEST, "unsupported MCP-Protocol-Version");
        }
    }
    let who = credential(&req);
    // A POST's message first: a tool-list change for a session another
    // replica holds goes through the session's queue, not a take-over.
    let (parts, body) = req.into_parts();
    let posted = if parts.method == hyper::Method::POST {
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return rpc_error(StatusCode::BAD_REQUEST, "unreadable body"),
        };
        match parse_body(&body) {
            Ok(m) => Some(m),
            Err(resp) => return *resp,
        }
    } else {
        None
    };
    if let Some(t) = &session {
        if let Some((id, tool)) = posted.as_ref().and_then(enabled_tool) {
            if let Some(resp) = replicated::enable_elsewhere(&shared, t, &who, id, &tool).await {
                return resp;
            }
        }
        let resuming = parts.method == hyper::Method::GET && parts.headers.contains_key("last-event-id");
        if let Err(refused) = replicated::take_over(&shared, t, &who, resuming).await {
            return refused;
        }
    }
    let method = parts.method.as_str();
    match (method, session) {
        ("POST", session) => {
            let Some(msg) = posted else { return rpc_error(StatusCode::BAD_REQUEST, "unreadable body") };
            match session {
                None => match msg {
                    Message::Request { id, method, .. } if method == "initialize" => initialize(&shared, &who, id),
                    _ => rpc_error(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id"),
                },
                Some(token) => post(&shared, ctl, &token, &who, msg),
            }
        }
        ("GET", None) | ("DELETE", None) => rpc_error(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id"),
        ("GET", Some(token)) => match parts.headers.get("last-event-id") {
            // A header that is not a number reaches the policy as `None`.
            Some(v) => {
                let last = v.to_str().ok().and_then(|v| v.trim().parse().ok());
                resume(&shared, ctl, token, who, last).await
            }
            None => open_standalone(&shared, ctl, &token, &who).await,
        },
        ("DELETE", Some(token)) => {
            let mut st = shared.state.borrow_mut();
            // Only the session's owner may end it (a token alone is not enough).
            if let Err(resp) = owned(&shared, &mut st, &token, &who) {
                return *resp;
            }
            invalidate(&shared, &mut st, &token, "terminated by the client (DELETE)");
            let mut r = Response::new(Full::new(Bytes::new()).boxed());
            *r.status_mut() = StatusCode::OK;
            r
        }
        _ => rpc_error(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE"),
    }
}

fn json_response(msg: &Message, session: Option<&str>) -> Response<Body> {
    let mut r = full(StatusCode::OK, msg.to_json());
    if let Some(token) = session {
        r.headers_mut().insert("mcp-session-id", token.parse().expect("tokens are header-safe"));
    }
    r
}

fn initialize(shared: &Shared, principal: &str, id: RpcId) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    let (token, name) = new_session(shared, &mut st, principal);
    shared.report.note(&name, format!("session opened for principal {principal} (streamable-http)"));
    json_response(&mcp::initialize_result_at(id, PROTOCOL_VERSION_STREAMABLE), Some(&token))
}

/// The session's owner check for POST and plain GET.
fn owned<'s>(
    shared: &Shared,
    st: &'s mut State,
    token: &str,
    who: &str,
) -> Result<&'s mut Session, Box<Response<Body>>> {
    let s = st
        .sessions
        .get_mut(token)
        .ok_or_else(|| Box::new(rpc_error(StatusCode::NOT_FOUND, "unknown or expired session")))?;
    if shared.policy.binds_principal() && who != s.principal {
        return Err(Box::new(rpc_error(StatusCode::FORBIDDEN, "credential does not match the session's owner")));
    }
    Ok(s)
}

fn post(shared: &Rc<Shared>, ctl: Rc<ConnCtl>, token: &str, who: &str, msg: Message) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    let s = match owned(shared, &mut st, token, who) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    match msg {
        Message::Request { id, method, params } => match method.as_str() {
            "tools/call" if params["name"].as_str() == Some(ENABLE_TOOL) => {
                let Some(tool) = params["arguments"]["tool"].as_str().filter(|t| !t.is_empty()) else {
                    return json_response(&mcp::tool_result(id, "enable_tool needs a tool", true), None);
                };
                enable_tool(shared, s, tool);
                json_response(&mcp::tool_result(id, &format!("{tool} enabled"), false), None)
            }
            "tools/call" => {
                let args = &params["arguments"];
                let field = |k: &str| args[k].as_str().map(str::to_string);
                let (Some(client), Some(label), Some(method)) = (field("client"), field("label"), field("method"))
                else {
                    return json_response(&mcp::tool_result(id, "ask needs client, label and method", true), None);
                };
                if params["name"].as_str() != Some(ASK_TOOL) {
                    return json_response(
                        &Message::Error { id: Some(id), code: -32602, message: "unknown tool".into() },
                        None,
                    );
                }
                let stream = s.calls.keys().next_back().map_or(1, |k| k + 1);
                s.calls.insert(stream, Call { rpc: id, done: false });
                drop(st);
                let mut st = shared.state.borrow_mut();
                let (uplink, tx, body) = attach(shared, &mut st, token, stream, ctl);
                let s = st.sessions.get_mut(token).expect("checked above");
                prime(s, stream, &tx);
                shared.report.note(&s.name, format!("tool call {label}: stream {stream} on uplink U{uplink}"));
                issue(shared, s, token, &client, (&method, &label, true), stream);
                sse_response(body)
            }
            "initialize" => json_response(&mcp::initialize_result_at(id, PROTOCOL_VERSION_STREAMABLE), None),
            "ping" => json_response(&Message::Response { id, result: serde_json::json!({}) }, None),
            _ => json_response(
                &Message::Error { id: Some(id), code: -32601, message: format!("method not found: {method}") },
                None,
            ),
        },
        Message::Response { ref id, .. } | Message::Error { id: Some(ref id), .. } => {
            settle(shared, s, id, matches!(msg, Message::Error { .. }));
            accepted()
        }
        Message::Notification { .. } | Message::Error { id: None, .. } => accepted(),
    }
}

/// A plain GET: the (new) standalone stream. The owner asking again means it
/// lost the old one: the policy's fencing rule decides whether a prior
/// writer is fenced first (or, if it cannot be, the GET gets 409).
async fn open_standalone(shared: &Shared, ctl: Rc<ConnCtl>, token: &str, who: &str) -> Response<Body> {
    let (fence_prior, inflight) = {
        let mut st = shared.state.borrow_mut();
        let s = match owned(shared, &mut st, token, who) {
            Ok(s) => s,
            Err(resp) => return *resp,
        };
        s.prune(&shared.report);
        new_stream_decision(shared, s)
    };
    let has_prior = |shared: &Shared| {
        shared.state.borrow().sessions.get(token).is_some_and(|s| s.uplinks.iter().any(|u| u.stream == STANDALONE))
    };
    // Another GET may attach while this one waits on the fence (found by
    // fuzzing: two holders of one credential asked at the same instant, both
    // fenced the dead stream and both attached): fence again until this GET
    // is the sole writer; there is no `.await` between the last check and
    // the attach. A few rounds settle any realistic race, then 409.
    let mut rounds = 0;
    while fence_prior && has_prior(shared) {
        rounds += 1;
        if rounds > 3 || fence(shared, token, STANDALONE).await.is_err() {
            return rpc_error(StatusCode::CONFLICT, "the session's standalone stream could not be fenced");
        }
    }
    let mut st = shared.state.borrow_mut();
    if !st.sessions.contains_key(token) {
        return rpc_error(StatusCode::NOT_FOUND, "session ended while opening the stream");
    }
    let (uplink, tx, body) = attach(shared, &mut st, token, STANDALONE, ctl);
    let s = st.sessions.get_mut(token).expect("checked above");
    // Messages emitted while the session had no standalone stream were kept
    // for it; they go first (ids stay increasing), else a priming event.
    let mut queued = Vec::new();
    let mut writes = Vec::new();
    for l in s.log.iter_mut().filter(|l| l.stream == STANDALONE && !l.routed) {
        writes.push(Bytes::from(sse::encode(Some(&l.id.to_string()), None, &l.data)));
        l.routed = true;
        queued.extend(l.request.clone());
    }
    for bytes in writes {
        s.send(&tx, bytes);
    }
    if queued.is_empty() {
        prime(s, STANDALONE, &tx);
    }
    shared
        .report
        .note(&s.name, format!("standalone stream on uplink U{uplink}; {} queued request(s) sent", queued.len()));
    // Requests already written to an earlier standalone stream the client
    // evidently lost (it presents no id): the policy's in-flight rule applies.
    dispose_inflight(shared, s, STANDALONE, (inflight, true), &queued);
    sse_response(body)
}

/// What the policy does when a new standalone stream replaces a lost one
/// (fence the prior writer? in-flight requests?): its decision for a
/// resumption from the newest id.
fn new_stream_decision(shared: &Shared, s: &Session) -> (bool, Inflight) {
    let view = ResumeView {
        owner: &s.principal,
        presented: &s.principal,
        last_event_id: Some(s.next_event_id.saturating_sub(1)),
        retained: s.oldest().map(|o| (o, s.next_event_id - 1)),
        next_event_id: s.next_event_id,
        prior_uplinks: s.uplinks.iter().filter(|u| u.stream == STANDALONE).count(),
        requests: &[],
        request_events: &[],
    };
    match shared.policy.decide(&view) {
        Decision::Accept { fence_prior, inflight, .. } => (fence_prior, inflight),
        Decision::Reject { .. } => (false, Inflight::Leave),
    }
}

/// A `tools/call` of `enable_tool`: its JSON-RPC id and the tool it names.
fn enabled_tool(msg: &Message) -> Option<(RpcId, String)> {
    match msg {
        Message::Request { id, method, params }
            if method == "tools/call" && params["name"].as_str() == Some(ENABLE_TOOL) =>
        {
            Some((id.clone(), params["arguments"]["tool"].as_str().filter(|t| !t.is_empty())?.to_string()))
        }
        _ => None,
    }
}

/// Enables `tool` on session `s` (held here): its standalone stream is told
/// that the tool list changed (or the event waits there for the stream).
pub(super) fn enable_tool(shared: &Shared, s: &mut Session, tool: &str) {
    let msg = mcp::tools_list_changed();
    let (event_id, routed) = s.emit(&msg, None, STANDALONE, shared.cfg.retention, &shared.report);
    let how = routed.map_or("logged for replay".to_string(), |u| format!("written to uplink U{u}"));
    shared
        .report
        .note(&s.name, format!("tool {tool} enabled: notifications/tools/list_changed is event {event_id}, {how}"));
}

/// Sends a stream's priming event: a fresh id, `retry`, empty data.
pub(super) fn prime(s: &mut Session, stream: StreamId, tx: &mpsc::UnboundedSender<Bytes>) {
    let id = s.mint(stream);
    s.send(tx, Bytes::from(format!("id: {id}\nretry: {}\ndata: \n\n", PRIMING_RETRY.as_millis())));
}

impl Session {
    /// Ends tool call `stream` once its related request `label` is settled:
    /// emits the tool result on the call's stream and closes the stream.
    pub(super) fn finish_call(
        &mut self,
        stream: StreamId,
        label: &str,
        ok: bool,
        retention: usize,
        report: &AppReporter,
    ) {
        let Some(call) = self.calls.get_mut(&stream).filter(|c| !c.done) else { return };
        call.done = true;
        let text = if ok { format!("{label} answered") } else { format!("{label} was not answered") };
        let result = mcp::tool_result(call.rpc.clone(), &text, !ok);
        let (event_id, routed) = self.emit(&result, None, stream, retention, report);
        let (gate, next) = (&mut self.gate, self.next_event_id);
        for u in self.uplinks.iter().filter(|u| u.stream == stream) {
            send_gated(gate, next, &u.tx, ChannelBody::END);
        }
        self.uplinks.retain(|u| u.stream != stream);
        let how = routed.map_or("logged for replay".to_string(), |u| format!("written to uplink U{u}"));
        report.note(&self.name, format!("tool call {label}: result is event {event_id}, {how}; stream {stream} ends"));
    }
}
