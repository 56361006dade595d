//! The application side: commands from the harness (issue a request,
//! notify), answers settling requests, request timeouts.

use super::*;

/// Settles a server request with the client's answer (or error) to `id`.
pub(super) fn settle(shared: &Shared, s: &mut Session, id: &RpcId, is_error: bool) {
    if let Some(r) = s.requests.iter_mut().find(|r| &r.id == id) {
        if r.state == RequestState::Pending {
            r.state = if is_error { RequestState::Failed } else { RequestState::Answered };
            let (outcome, detail) = if is_error {
                (Outcome::Failed, "the client answered with an error")
            } else {
                (Outcome::Answered, "answer received on the downlink")
            };
            shared.report.outcome(&r.label, &r.id, outcome, None, detail);
            let (stream, label) = (r.stream, r.label.clone());
            s.finish_call(stream, &label, !is_error, shared.cfg.retention, &shared.report);
        } else {
            shared.report.note(&s.name, format!("duplicate answer to {id} ignored"));
            if !is_error {
                s.answered_tombstones.insert(id.clone());
            }
        }
    } else if s.tombstones.contains(id) {
        shared.report.note(&s.name, format!("late answer to tombstoned id {id} ignored"));
        s.answered_tombstones.insert(id.clone());
    } else {
        shared.report.note(&s.name, format!("answer to unknown id {id} ignored"));
    }
}

pub(super) async fn app_loop(shared: Rc<Shared>, app: AppHook) {
    loop {
        let cmd = app.commands.recv().await;
        // A session another replica holds gets it through the shared store.
        if replicated::forward(&shared, &cmd).await {
            continue;
        }
        run_here(&shared, cmd);
        if let Err(e) = replicated::flush(&shared).await {
            shared.report.error("server", format!("the session store did not take the application's command: {e}"));
        }
    }
}

/// Runs an application command on the sessions of this process.
pub(super) fn run_here(shared: &Rc<Shared>, cmd: AppCommand) {
    match cmd {
        AppCommand::ServerRequest { client, token, method, label, reissuable } => {
            let mut st = shared.state.borrow_mut();
            let Some(s) = st.sessions.get_mut(&token) else {
                shared.report.error(&client, format!("cannot issue {label}: no live session for {client}'s token"));
                return;
            };
            issue(shared, s, &token, &client, (&method, &label, reissuable), STANDALONE);
        }
        AppCommand::ToolsChanged => {
            shared
                .report
                .error("server", "the stateful engine has no listen streams (change-tools is stateless-http's)");
        }
        AppCommand::Notify { client, token, count } => {
            let mut st = shared.state.borrow_mut();
            let Some(s) = st.sessions.get_mut(&token) else {
                shared.report.error(&client, format!("cannot notify: no live session for {client}'s token"));
                return;
            };
            let mut ids = Vec::new();
            for _ in 0..count {
                let n = s.next_event_id;
                let (id, _) = s.emit(&mcp::progress(n), None, STANDALONE, shared.cfg.retention, &shared.report);
                ids.push(id.to_string());
            }
            shared.report.notified_on(&token, &client, ids);
        }
    }
}

/// Issues server request `label` on `stream` of the session behind `token`.
pub(super) fn issue(
    shared: &Rc<Shared>,
    s: &mut Session,
    token: &str,
    client: &str,
    (method, label, reissuable): (&str, &str, bool),
    stream: StreamId,
) {
    let id = RpcId::Str(label.to_string());
    let msg = mcp::server_request(id.clone(), method, label, &s.principal);
    let (event_id, uplink) = s.emit(&msg, Some(id.clone()), stream, shared.cfg.retention, &shared.report);
    let deadline = crate::clock::now().unwrap_or_default() + shared.cfg.request_timeout.0;
    s.requests.push(Req {
        id: id.clone(),
        deadline_us: deadline.as_micros() as u64,
        label: label.to_string(),
        method: method.to_string(),
        event_id,
        state: RequestState::Pending,
        reissues: 0,
        retired: Vec::new(),
        stream,
        reissuable,
    });
    if reissuable {
        shared.report.issued_on(token, client, label, method, &id, Some(event_id.to_string()));
    } else {
        shared.report.issued_not_reissuable_on(token, client, label, method, &id, Some(event_id.to_string()));
    }
    let route = uplink.map_or("no live writer: logged for replay".to_string(), |u| format!("written to uplink U{u}"));
    shared.report.note(&s.name, format!("{label} is event {event_id}; {route}"));
    tokio::task::spawn_local(request_timer(shared.clone(), token.to_string(), label.to_string(), deadline));
}

/// Times request `label` of session `token` out at `deadline` (scenario time).
pub(super) async fn request_timer(shared: Rc<Shared>, token: String, label: String, deadline: Duration) {
    // It does something only while the request is pending (crate::quiet).
    let (s2, t2, l2) = (shared.clone(), token.clone(), label.clone());
    let pending = move || {
        let st = s2.state.borrow();
        st.sessions
            .get(&t2)
            .is_some_and(|s| s.requests.iter().any(|r| r.label == l2 && r.state == RequestState::Pending))
    };
    let after = deadline.saturating_sub(crate::clock::now().unwrap_or_default());
    crate::clock::sleep_as(after, crate::quiet::Kind::While(Rc::new(pending))).await;
    let mut st = shared.state.borrow_mut();
    let Some(s) = st.sessions.get_mut(&token) else { return };
    if let Some(r) = s.requests.iter_mut().find(|r| r.label == label && r.state == RequestState::Pending) {
        r.state = RequestState::TimedOut;
        let after: Duration = shared.cfg.request_timeout.0;
        shared.report.outcome(&r.label, &r.id, Outcome::TimedOut, None, format!("no answer within {after:?}"));
        let stream = r.stream;
        s.finish_call(stream, &label, false, shared.cfg.retention, &shared.report);
    }
}
