//! A resumption: ask the policy, fence the prior writer, replay, and
//! dispose of the requests in flight.

use super::*;

/// Carries out a resumption of `token` from `last`: settles the decision
/// (fencing the prior writer when it says so), then attaches the new
/// writer and replays.
pub(super) async fn resume(
    shared: &Rc<Shared>,
    ctl: Rc<ConnCtl>,
    token: String,
    presented: String,
    last: Option<u64>,
) -> Response<Body> {
    let Some(stream) = shared.state.borrow().sessions.get(&token).map(|s| last.map_or(STANDALONE, |n| s.stream_of(n)))
    else {
        return match shared.policy.unknown_session() {
            Refusal::Status(404) => rpc_error(StatusCode::NOT_FOUND, "unknown or expired session"),
            how => refuse(how, "unknown or expired session"),
        };
    };
    let accepted = match settle(shared, &token, &presented, last, stream).await {
        Ok(accepted) => accepted,
        Err(refusal) => return refusal,
    };
    // No `.await` between the final decision and the attach (the session
    // may not move on in between): `settle` returns right after deciding,
    // and returning does not yield.
    attach_and_replay(shared, ctl, &token, stream, accepted)
}

/// Decides; when the decision fences, fences (which awaits) and decides
/// again: while the fence was pending the session moved on (events were
/// minted and maybe evicted), and a decision must hold at the instant the
/// new writer is attached. `Ok`: accepted, with where the replay starts,
/// whether it skips the newest event, and what becomes of the requests in
/// flight; `Err`: the refusal, said and carried out.
async fn settle(
    shared: &Rc<Shared>,
    token: &str,
    presented: &str,
    last: Option<u64>,
    stream: StreamId,
) -> Result<(u64, bool, Inflight), Response<Body>> {
    let mut rounds = 0;
    loop {
        let decision = match decide(shared, token, presented, last, stream) {
            Some(d) => d,
            None => return Err(rpc_error(StatusCode::NOT_FOUND, "unknown or expired session")),
        };
        match decision {
            Decision::Reject { reason, how, invalidate: kill } => {
                note_decision(
                    shared,
                    token,
                    presented,
                    last,
                    &format!(
                        "refused ({reason}){}",
                        if kill { "; the session is invalidated" } else { "; the session lives on" }
                    ),
                );
                if kill {
                    invalidate(shared, &mut shared.state.borrow_mut(), token, &reason);
                }
                return Err(refuse(how, &reason));
            }
            Decision::Accept { fence_prior, replay_from, skip_newest, inflight } => {
                let has_prior = shared
                    .state
                    .borrow()
                    .sessions
                    .get(token)
                    .is_some_and(|s| s.uplinks.iter().any(|u| u.stream == stream));
                if !fence_prior || !has_prior {
                    let fenced =
                        if !has_prior { "no prior writer" } else { "prior writer NOT fenced (it stays attached)" };
                    let inflight_words = match inflight {
                        Inflight::Reissue => "pending requests re-issued under fresh ids",
                        Inflight::Fail => "pending requests failed",
                        Inflight::Leave => "pending requests left where they are",
                    };
                    let how = if rounds > 0 { "prior writer fenced first" } else { fenced };
                    note_decision(
                        shared,
                        token,
                        presented,
                        last,
                        &format!("accepted: {how}; replay from {replay_from}; {inflight_words}"),
                    );
                    return Ok((replay_from, skip_newest, inflight));
                }
                // Another resumption may attach while this one waits on a fence;
                // a few rounds settle any realistic race, then refuse.
                rounds += 1;
                let fenced = if rounds > 3 {
                    Err("could not become the session's sole writer".into())
                } else {
                    fence(shared, token, stream).await
                };
                if let Err(reason) = fenced {
                    note_decision(
                        shared,
                        token,
                        presented,
                        last,
                        &format!("refused ({reason}); the session is invalidated"),
                    );
                    invalidate(shared, &mut shared.state.borrow_mut(), token, &reason);
                    return Err(refuse(Refusal::ErrorEvent, &reason));
                }
            }
        }
    }
}

/// Attaches the new writer of `stream` and replays from `replay_from`
/// (without the newest event when `skip_newest`), then disposes of the
/// requests in flight as `inflight` says.
fn attach_and_replay(
    shared: &Rc<Shared>,
    ctl: Rc<ConnCtl>,
    token: &str,
    stream: StreamId,
    (replay_from, skip_newest, inflight): (u64, bool, Inflight),
) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    if !st.sessions.contains_key(token) {
        return rpc_error(StatusCode::NOT_FOUND, "session ended while resuming");
    }
    let (uplink, tx, body) = attach(shared, &mut st, token, stream, ctl);
    let s = st.sessions.get_mut(token).expect("checked above");
    let mut replayed = 0;
    let mut replay: Vec<Bytes> = s
        .log
        .iter()
        .filter(|l| l.id >= replay_from && l.stream == stream)
        .map(|l| Bytes::from(sse::encode(Some(&l.id.to_string()), None, &l.data)))
        .collect();
    if skip_newest {
        replay.pop();
    }
    for bytes in replay {
        s.send(&tx, bytes);
        replayed += 1;
    }
    if shared.wire.primes_empty_replay && replayed == 0 {
        // Nothing replayed: give the client a fresh id to resume from.
        streamable::prime(s, stream, &tx);
    }
    shared.report.note(
        &s.name,
        format!(
            "uplink U{uplink} attached ({} writer(s)); replayed {replayed} event(s) from {replay_from}",
            s.uplinks.len()
        ),
    );

    dispose_inflight(shared, s, stream, (inflight, false), &[]);
    if s.calls.get(&stream).is_some_and(|c| c.done) {
        // The tool call's stream was complete: the replay was its tail.
        s.send(&tx, ChannelBody::END);
        s.uplinks.retain(|u| u.id != uplink);
    }
    sse_response(body)
}

/// Carries out a policy's in-flight disposition for the pending requests of
/// `stream` (except `skip`: requests just delivered on the new writer).
pub(super) fn dispose_inflight(
    shared: &Shared,
    s: &mut Session,
    stream: StreamId,
    (inflight, fresh): (Inflight, bool),
    skip: &[RpcId],
) {
    let retention = shared.cfg.retention;
    let pending: Vec<usize> = (0..s.requests.len())
        .filter(|&i| s.requests[i].state == RequestState::Pending && s.requests[i].stream == stream)
        .filter(|&i| !skip.contains(&s.requests[i].id))
        .collect();
    for i in pending {
        // On a fresh standalone stream (`fresh`), a request that must not be
        // re-issued is failed instead (condition 4): the policy's decision
        // there sees no requests, so it cannot refuse over one (found by a
        // hunt: guarded re-issued a non-reissuable request on a fresh GET).
        // A resumption's decision sees them, and carries out what it says.
        let inflight = match inflight {
            Inflight::Reissue if fresh && !s.requests[i].reissuable => Inflight::Fail,
            other => other,
        };
        match inflight {
            Inflight::Leave => {}
            Inflight::Fail => {
                let r = &mut s.requests[i];
                r.state = RequestState::Failed;
                shared.report.outcome(&r.label, &r.id, Outcome::Failed, None, "failed explicitly at resumption");
            }
            Inflight::Reissue => {
                let (old, new, method, label, owner) = {
                    let r = &mut s.requests[i];
                    r.reissues += 1;
                    let new = RpcId::Str(format!("{}.r{}", r.label, r.reissues));
                    (
                        std::mem::replace(&mut r.id, new.clone()),
                        new,
                        r.method.clone(),
                        r.label.clone(),
                        s.principal.clone(),
                    )
                };
                s.tombstones.insert(old.clone());
                s.requests[i].retired.push(old.clone());
                let msg = mcp::server_request(new.clone(), &method, &label, &owner);
                let (event_id, _) = s.emit(&msg, Some(new.clone()), stream, retention, &shared.report);
                s.requests[i].event_id = event_id;
                shared.report.outcome(
                    &label,
                    &old,
                    Outcome::Reissued,
                    Some(new),
                    format!("re-issued as event {event_id}; old id tombstoned"),
                );
            }
        }
    }
}

/// Records the final decision on a resumption once, in words (an explanation).
pub(super) fn note_decision(shared: &Shared, token: &str, presented: &str, last: Option<u64>, what: &str) {
    if let Some(s) = shared.state.borrow().sessions.get(token) {
        let last = last.map_or_else(|| "none".to_string(), |n| n.to_string());
        shared.report.note(&s.name, format!("resumption by {presented} from Last-Event-ID {last} {what}"));
    }
}

/// Asks the policy about a resumption of `token`'s `stream`; `None` if the session is gone.
pub(super) fn decide(
    shared: &Shared,
    token: &str,
    presented: &str,
    last: Option<u64>,
    stream: StreamId,
) -> Option<Decision> {
    let mut st = shared.state.borrow_mut();
    let s = st.sessions.get_mut(token)?;
    s.prune(&shared.report);
    let mut requests: Vec<RequestView> = s
        .requests
        .iter()
        .map(|r| RequestView {
            id: r.id.clone(),
            label: r.label.clone(),
            method: r.method.clone(),
            event_id: r.event_id,
            // Answered late, after a timeout: to the client, answered.
            state: if s.answered_tombstones.contains(&r.id) { RequestState::Answered } else { r.state },
            reissuable: r.reissuable,
            on_stream: r.stream == stream,
        })
        .collect();
    // A retired id the client has not answered: the request under its old id.
    for r in &s.requests {
        for old in r.retired.iter().filter(|id| !s.answered_tombstones.contains(id)) {
            requests.push(RequestView {
                id: old.clone(),
                label: r.label.clone(),
                method: r.method.clone(),
                event_id: s.log.iter().find(|l| l.request.as_ref() == Some(old)).map_or(0, |l| l.id),
                state: RequestState::Reissued,
                reissuable: r.reissuable,
                on_stream: r.stream == stream,
            });
        }
    }
    // A retired id the client answered anyway is, to the client, answered.
    requests.extend(s.answered_tombstones.iter().map(|id| RequestView {
        id: id.clone(),
        label: id.to_string(),
        method: String::new(),
        event_id: 0,
        state: RequestState::Answered,
        reissuable: true,
        on_stream: false,
    }));
    let request_events: Vec<(u64, RpcId)> =
        s.log.iter().filter(|l| l.stream == stream).filter_map(|l| Some((l.id, l.request.clone()?))).collect();
    let view = ResumeView {
        owner: &s.principal,
        presented,
        last_event_id: last,
        retained: s.oldest().map(|o| (o, s.next_event_id - 1)),
        next_event_id: s.next_event_id,
        prior_uplinks: s.uplinks.iter().filter(|u| u.stream == stream).count(),
        requests: &requests,
        request_events: &request_events,
    };
    Some(shared.policy.decide(&view))
}

/// Fences every prior writer of the session's `stream`, waiting at most
/// `fence_grace` for each connection to be gone.
pub(super) async fn fence(shared: &Shared, token: &str, stream: StreamId) -> Result<(), String> {
    let prior: Vec<(u32, Rc<ConnCtl>)> = {
        let st = shared.state.borrow();
        st.sessions
            .get(token)
            .map(|s| s.uplinks.iter().filter(|u| u.stream == stream).map(|u| (u.id, u.conn.clone())).collect())
            .unwrap_or_default()
    };
    // A fence takes `fence_delay` to reach the writer (blocked on a full
    // socket buffer, say); it is confirmed only once the connection is gone.
    let delay = shared.cfg.fence_delay.0;
    for (_, c) in &prior {
        if delay.is_zero() {
            c.kill.notify_one();
        } else {
            let c = c.clone();
            tokio::task::spawn_local(async move {
                crate::clock::sleep(delay).await;
                c.kill.notify_one();
            });
        }
    }
    let all_closed = async {
        for (_, c) in &prior {
            c.wait_closed().await;
        }
    };
    if crate::clock::timeout(shared.cfg.fence_grace.0, all_closed).await.is_err() {
        return Err(format!("prior uplink could not be fenced within {:?}", shared.cfg.fence_grace.0));
    }
    let mut st = shared.state.borrow_mut();
    if let Some(s) = st.sessions.get_mut(token) {
        s.uplinks.retain(|u| !prior.iter().any(|(id, _)| *id == u.id));
        for (id, _) in &prior {
            shared.report.note(&s.name, format!("uplink U{id} fenced before the new writer is attached"));
        }
    }
    Ok(())
}
