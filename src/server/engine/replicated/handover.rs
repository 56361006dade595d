//! A session taken over from another replica: the writer epoch bumped,
//! the prior holder's fence awaited, the session adopted.

use super::poll::{arm_lapse, still_holds};
use super::*;

/// Makes this process the holder of session `token` when the store knows
/// it and another replica may hold it, for a request presenting principal
/// `who`. `Err`: the response refusing the request. A policy that binds
/// sessions to principals checks `who` against the session's owner in the
/// store first: another principal's request fences no one.
/// A refused resumption (`resuming`: the request opens a stream) ends the
/// session, as on one server: in the store, where the prior holder, once it
/// hears of it, finds nothing to write back.
pub(in crate::server::engine) async fn take_over(
    shared: &Rc<Shared>,
    token: &str,
    who: &str,
    resuming: bool,
) -> Result<(), Response<Body>> {
    let Some(r) = shared.replicated.clone() else { return Ok(()) };
    if r.ending.borrow().contains(token) {
        return Ok(()); // ended here: unknown (404), whatever the store still says
    }
    let started = now();
    let unreachable = |e: StoreError| rpc_error(StatusCode::SERVICE_UNAVAILABLE, &format!("session store: {e}"));
    if still_holds(shared, &r, token).await.map_err(unreachable)? {
        return Ok(());
    }
    if shared.policy.binds_principal() {
        // Its owner first (a round trip more): a thief's request must not
        // bump the epoch, which fences the owner's writers on another replica
        // (found by hunting: a refused take-over then ended the session).
        let Some(bytes) = r.store.get(&key("session", token)).await.map_err(unreachable)? else { return Ok(()) };
        let owner = serde_json::from_slice::<Session>(&bytes).map(|s| s.principal);
        if owner.is_ok_and(|p| p != who) {
            let why = "credential does not match the session's owner";
            shared.report.note(&format!("session {token}"), format!("take-over refused ({why}): the session lives on"));
            return Err(rpc_error(StatusCode::FORBIDDEN, why));
        }
    }
    let lock = r.taking.borrow_mut().entry(token.to_string()).or_default().clone();
    let _one_at_a_time = match lock.try_lock() {
        Ok(g) => g,
        Err(_) => {
            let g = lock.lock().await;
            // The take-over this request waited for failed: so would this
            // one, after as long again (the client's patience is spent).
            let failed = r.failed_take.borrow().get(token).filter(|(t, _)| *t >= started).map(|f| f.1);
            match failed {
                Some(StatusCode::SERVICE_UNAVAILABLE) => return Err(rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "session store: another request's take-over of this session just failed (the store did not answer)",
                )),
                Some(_) => {
                    let why = "another request's take-over of this session just found its writer on another replica not confirmed fenced";
                    return Err(refuse_unfenced(shared, &r, token, None, why, resuming).await);
                }
                None => {}
            }
            g
        }
    };
    if r.holds(token) {
        return Ok(()); // taken over by another request of this process meanwhile
    }
    let taken = take_over_held(shared, &r, token, resuming, started).await;
    if let Err(resp) = &taken {
        if matches!(resp.status(), StatusCode::SERVICE_UNAVAILABLE | StatusCode::CONFLICT) {
            r.failed_take.borrow_mut().insert(token.to_string(), (now(), resp.status()));
        }
    }
    taken
}

/// Refuses a take-over of session `token` whose prior writer was not
/// confirmed fenced (409), saying `why`. A refused resumption ends the
/// session in the store too: the prior holder's last write (`SET ... XX`)
/// finds the key gone.
async fn refuse_unfenced(
    shared: &Shared,
    r: &Replicated,
    token: &str,
    epoch: Option<i64>,
    why: &str,
    resuming: bool,
) -> Response<Body> {
    let ends = if resuming {
        // Deleted by the flush before the answer (one round trip fewer).
        r.ending.borrow_mut().insert(token.to_string());
        "; the session is ended in the shared store"
    } else {
        ""
    };
    let at = epoch.map(|e| format!(" at epoch {e}")).unwrap_or_default();
    shared.report.note(&format!("session {token}"), format!("take-over{at} refused: {why}{ends}"));
    rpc_error(StatusCode::CONFLICT, why)
}

/// [`take_over`] once this process's lock on session `token` is held.
async fn take_over_held(
    shared: &Rc<Shared>,
    r: &Rc<Replicated>,
    token: &str,
    resuming: bool,
    started: Duration,
) -> Result<(), Response<Body>> {
    let Some((epoch, bytes)) = fence_prior(shared, r, token, resuming, started).await? else { return Ok(()) };
    let Ok(session) = serde_json::from_slice::<Session>(&bytes) else {
        return Err(rpc_error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable session in the shared store"));
    };
    adopt(shared, r, token, epoch, (session, bytes));
    Ok(())
}

/// Bumps session `token`'s writer epoch and claims its lease, then waits
/// (until `fence_grace` after the request arrived, at `started`) for a
/// holder on another replica to confirm the fence. `Ok(Some)`: the epoch,
/// and the session as the store has it; `Ok(None)`: the store does not
/// know the session; `Err`: the response refusing the request.
async fn fence_prior(
    shared: &Rc<Shared>,
    r: &Rc<Replicated>,
    token: &str,
    resuming: bool,
    started: Duration,
) -> Result<Option<(i64, Vec<u8>)>, Response<Body>> {
    let unreachable = |e: StoreError| rpc_error(StatusCode::SERVICE_UNAVAILABLE, &format!("session store: {e}"));
    let grace = shared.cfg.fence_grace.0;
    // From the request's arrival: the client's patience does not wait for
    // the principal check (found by hunting: 409s that came too late).
    let deadline = started + grace;
    let (epoch_key, lease_key, ack_key, session_key) =
        (key("epoch", token), key("lease", token), key("ack", token), key("session", token));
    // The writer epoch bumped (the first time round), then the holder's
    // lease, its confirmation and the session, read together (pipelined, in
    // this order: one round trip when no other replica holds the session):
    // a holder writes its last state before it gives its lease up, so a
    // session read after a lease found gone is its last.
    let mut bumped: Option<i64> = None;
    loop {
        let bump = async {
            match bumped {
                Some(e) => Ok(e),
                None => r.store.incr(&epoch_key).await,
            }
        };
        // The lease claimed (when free) in the same pipeline: from the bump on,
        // another taker finds this one holding it and waits for its
        // confirmation (found by hunting: a lease set after the take-over let
        // a second taker read the session while the first changed it).
        let (epoch, claimed, lease, ack, session) = futures::join!(
            bump,
            r.store.set_nx(&lease_key, &r.me, Some(r.lease)),
            r.store.get(&lease_key),
            r.store.get_int(&ack_key),
            r.store.get(&session_key)
        );
        claimed.map_err(unreachable)?;
        let (epoch, lease, ack, session) = (
            epoch.map_err(unreachable)?,
            lease.map_err(unreachable)?,
            ack.map_err(unreachable)?,
            session.map_err(unreachable)?,
        );
        bumped = Some(epoch);
        // A session the store does not know (or no longer: ended by its
        // owner meanwhile) is unknown here too (404, as ever).
        let Some(bytes) = session else { return Ok(None) };
        let elsewhere = lease.is_some_and(|holder| holder != r.me.as_bytes());
        if !shared.policy.fences_across_replicas() || !elsewhere || ack >= epoch {
            return Ok(Some((epoch, bytes)));
        }
        if now() >= deadline {
            let why = format!(
                "its writer on another replica was not confirmed fenced within {grace:?}: no acknowledgement through the shared store"
            );
            return Err(refuse_unfenced(shared, r, token, Some(epoch), &why, resuming).await);
        }
        crate::clock::sleep(r.wait).await;
    }
}

/// Makes session `token`, taken over at `epoch` (as `session`, read from
/// the snapshot `bytes`), this process's: held, leased, its pending
/// requests' timers armed, and its queue drained meanwhile.
fn adopt(shared: &Rc<Shared>, r: &Rc<Replicated>, token: &str, epoch: i64, (mut session, bytes): (Session, Vec<u8>)) {
    session.gate = Some(Gate::new(session.next_event_id, r.dirty.clone()));
    let name = session.name.clone();
    let pending: Vec<(String, u64)> = session
        .requests
        .iter()
        .filter(|q| q.state == RequestState::Pending)
        .map(|q| (q.label.clone(), q.deadline_us))
        .collect();
    shared.state.borrow_mut().sessions.insert(token.to_string(), session);
    r.let_go.borrow_mut().remove(token);
    r.epochs.borrow_mut().insert(token.to_string(), epoch);
    r.written.borrow_mut().insert(token.to_string(), bytes);
    // Its lease is this process's from now on: a later take-over waits for it.
    let at = now();
    r.renewed.borrow_mut().insert(token.to_string(), at);
    arm_lapse(shared, r, token, at);
    let (store, lease, me, lasts) = (r.background.clone(), key("lease", token), r.me.clone(), r.lease);
    let held = r.clone();
    tokio::task::spawn_local(async move {
        let _busy = Busy::of(&held);
        store.set(&lease, me.as_bytes(), Some(lasts)).await
    });
    shared.report.note(&name, format!("session taken over from the shared store (epoch {epoch})"));
    for (label, deadline) in pending {
        let timer = request_timer(shared.clone(), token.to_string(), label, Duration::from_micros(deadline));
        tokio::task::spawn_local(timer);
    }
    // What the session's queue holds runs meanwhile: the request need not wait for it.
    let (shared, r, token) = (shared.clone(), r.clone(), token.to_string());
    tokio::task::spawn_local(async move {
        let _busy = Busy::of(&r);
        drain_queue(&shared, &r, &token).await
    });
}
