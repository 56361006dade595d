//! The legacy-sse routes (GET /mcp/sse opens or resumes, POST /mcp/messages),
//! and the session bookkeeping both dialects share: attaching a writer,
//! opening and invalidating sessions, refusing.

use super::*;

pub(super) async fn handle(shared: Rc<Shared>, ctl: Rc<ConnCtl>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let token = req.uri().query().and_then(legacy::session_token).map(str::to_string);
    if let Some(t) = &token {
        // Every GET of a legacy session's stream resumes it, with or without
        // `Last-Event-ID` (found by hunting: a refused take-over for one
        // without left the session alive for a thief to resume).
        let resuming = req.method() == hyper::Method::GET;
        if let Err(refused) = replicated::take_over(&shared, t, &credential(&req), resuming).await {
            return refused;
        }
    }
    let resp = match (req.method().as_str(), path.as_str(), token) {
        ("GET", legacy::SSE_PATH, None) => open_session(&shared, ctl, credential(&req)),
        ("GET", legacy::SSE_PATH, Some(token)) => {
            let last =
                req.headers().get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
            resume(&shared, ctl, token, credential(&req), last).await
        }
        ("POST", legacy::MESSAGES_PATH, Some(token)) => {
            let who = credential(&req);
            match req.into_body().collect().await {
                Ok(body) => post(&shared, &token, &who, &body.to_bytes()),
                Err(_) => rpc_error(StatusCode::BAD_REQUEST, "unreadable body"),
            }
        }
        _ => rpc_error(StatusCode::NOT_FOUND, "no such endpoint"),
    };
    resp
}

/// Registers a new writer of `stream` and starts its heartbeat.
pub(super) fn attach(
    shared: &Shared,
    st: &mut State,
    token: &str,
    stream: StreamId,
    ctl: Rc<ConnCtl>,
) -> (u32, mpsc::UnboundedSender<Bytes>, ChannelBody) {
    st.next_uplink += 1;
    let id = st.next_uplink;
    let (tx, body) = ChannelBody::new();
    let s = st.sessions.get_mut(token).expect("attach to a live session");
    let beat_peer = ctl.peer;
    s.uplinks.push(Uplink { id, tx: tx.clone(), conn: ctl, stream });
    let hb_tx = tx.clone();
    let every = shared.cfg.heartbeat.0;
    // A beat keeps a healthy stream healthy: it does not keep a simulation running (crate::quiet).
    let beat = match beat_peer {
        Some(peer) => crate::quiet::Kind::KeepAlive { peer, every },
        None => crate::quiet::Kind::Plain,
    };
    tokio::task::spawn_local(async move {
        loop {
            crate::clock::sleep_as(every, beat.clone()).await;
            if hb_tx.send(Bytes::from_static(b": ping\n\n")).is_err() {
                break;
            }
        }
    });
    (id, tx, body)
}

/// Creates a session for `principal`; returns its token and name.
pub(super) fn new_session(shared: &Shared, st: &mut State, principal: &str) -> (String, String) {
    shared.named.set(shared.named.get() + 1);
    let name = format!("S{}", shared.named.get());
    let token = format!("tok-{:016x}", shared.rng.borrow_mut().next_u64());
    st.sessions.insert(
        token.clone(),
        Session {
            name: name.clone(),
            principal: principal.to_string(),
            log: VecDeque::new(),
            next_event_id: shared.cfg.first_event_id,
            uplinks: Vec::new(),
            requests: Vec::new(),
            tombstones: BTreeSet::new(),
            answered_tombstones: BTreeSet::new(),
            id_stream: BTreeMap::new(),
            calls: BTreeMap::new(),
            first_kept: shared.cfg.first_event_id,
            gate: shared.replicated.as_ref().map(|r| Gate::new(0, r.dirty.clone())),
        },
    );
    if let Some(r) = &shared.replicated {
        r.created(&token);
    }
    (token, name)
}

pub(super) fn open_session(shared: &Shared, ctl: Rc<ConnCtl>, principal: String) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    let (token, name) = new_session(shared, &mut st, &principal);
    let (uplink, tx, body) = attach(shared, &mut st, &token, STANDALONE, ctl);
    let _ = tx.send(Bytes::from(sse::encode(None, Some("endpoint"), &legacy::messages_path(&token))));
    shared.report.note(&name, format!("session opened for principal {principal}; uplink U{uplink}"));
    sse_response(body)
}

/// Kills a session: its token dies, its uplinks are closed, its pending requests fail.
pub(super) fn invalidate(shared: &Shared, st: &mut State, token: &str, why: &str) {
    let Some(mut s) = st.sessions.remove(token) else { return };
    if let Some(r) = &shared.replicated {
        r.ended(token);
    }
    s.end_held();
    for u in &s.uplinks {
        u.conn.kill.notify_one();
    }
    for r in s.requests.iter().filter(|r| r.state == RequestState::Pending) {
        shared.report.outcome(&r.label, &r.id, Outcome::Failed, None, format!("session invalidated: {why}"));
    }
    shared.report.note(&s.name, format!("session invalidated ({why}); token is dead"));
}

pub(super) fn refuse(how: Refusal, reason: &str) -> Response<Body> {
    match how {
        Refusal::Status(code) => rpc_error(
            StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN),
            &format!("resumption rejected: {reason}"),
        ),
        Refusal::ErrorEvent => {
            let (tx, body) = ChannelBody::new();
            let err = Message::Error { id: None, code: -32000, message: format!("resumption rejected: {reason}") };
            let _ = tx.send(Bytes::from(sse::encode(None, Some("error"), &err.to_json())));
            sse_response(body)
        }
        Refusal::EmptyOk => {
            let (_tx, body) = ChannelBody::new();
            sse_response(body)
        }
    }
}

pub(super) fn post(shared: &Rc<Shared>, token: &str, who: &str, body: &[u8]) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    let Some(s) = st.sessions.get_mut(token) else {
        return rpc_error(StatusCode::NOT_FOUND, "unknown or expired session");
    };
    if shared.policy.binds_principal() && who != s.principal {
        return rpc_error(StatusCode::FORBIDDEN, "credential does not match the session's owner");
    }
    let msg = match parse_body(body) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    let retention = shared.cfg.retention;
    match msg {
        Message::Request { id, method, .. } => {
            let reply = match method.as_str() {
                "initialize" => mcp::initialize_result(id),
                "ping" => Message::Response { id, result: serde_json::json!({}) },
                _ => Message::Error { id: Some(id), code: -32601, message: format!("method not found: {method}") },
            };
            s.emit(&reply, None, STANDALONE, retention, &shared.report);
        }
        Message::Notification { .. } => {}
        Message::Response { ref id, .. } | Message::Error { id: Some(ref id), .. } => {
            settle(shared, s, id, matches!(msg, Message::Error { .. }));
        }
        Message::Error { id: None, .. } => {}
    }
    accepted()
}

pub(super) fn accepted() -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

/// A POST body as one JSON-RPC message, or the 400 to answer.
pub(super) fn parse_body(body: &[u8]) -> Result<Message, Box<Response<Body>>> {
    std::str::from_utf8(body)
        .map_err(|e| e.to_string())
        .and_then(|t| Message::parse(t).map_err(|e| e.to_string()))
        .map_err(|e| {
            Box::new(full(StatusCode::BAD_REQUEST, Message::Error { id: None, code: -32700, message: e }.to_json()))
        })
}
