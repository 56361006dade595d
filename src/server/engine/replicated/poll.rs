//! Holding sessions: whether this replica still holds one, letting one go,
//! and the poll that renews leases, confirms fences and drains queues.

use super::*;

/// Whether this process holds session `token`, for a fencing policy as
/// the store says: when another replica took it over meanwhile (its epoch
/// moved on), this process lets go of it first. `Err`: the store did not
/// answer, so a fencing policy cannot tell.
pub(super) async fn still_holds(shared: &Shared, r: &Replicated, token: &str) -> Result<bool, StoreError> {
    let Some(mine) = r.epochs.borrow().get(token).copied() else { return Ok(false) };
    if !shared.policy.fences_across_replicas() {
        return Ok(true);
    }
    let now_epoch = r.store.get_int(&key("epoch", token)).await?;
    if now_epoch > mine {
        // Confirmed, as the poll would: the taker waits for it.
        confirm_fence(shared, r, token, now_epoch).await;
        return Ok(false);
    }
    // Let go of while the store answered (its lease lapsing): it is
    // in the store, to be taken over again, not unknown (found by hunting).
    Ok(!r.let_go.borrow().contains(token))
}

/// Fails the pending requests of session `token` that only this process
/// knows (not pending in the snapshot it last wrote to the store): letting
/// the session go without writing it loses them, and the replica that
/// takes it over from the store never issued them (found by hunting: such
/// a request stayed unresolved for good).
fn fail_unwritten(shared: &Shared, r: &Replicated, token: &str) {
    let pending = |s: &Session| -> BTreeSet<String> {
        s.requests.iter().filter(|q| q.state == RequestState::Pending).map(|q| q.label.clone()).collect()
    };
    let written = r.written.borrow().get(token).and_then(|b| serde_json::from_slice::<Session>(b).ok());
    let kept = written.as_ref().map(pending).unwrap_or_default();
    let st = shared.state.borrow();
    let Some(s) = st.sessions.get(token) else { return };
    for q in s.requests.iter().filter(|q| q.state == RequestState::Pending && !kept.contains(&q.label)) {
        let why = "the session store never took it, and this replica let the session go (its lease lapsing)";
        shared.report.outcome(&q.label, &q.id, Outcome::Failed, None, why);
    }
}

/// Lets go of session `token`: closes its writers here and forgets it
/// (another replica holds it, or may: `why`).
fn let_go(shared: &Shared, r: &Replicated, token: &str, why: &str) {
    close_writers(shared, token, why);
    r.let_go.borrow_mut().insert(token.to_string());
    r.epochs.borrow_mut().remove(token);
    r.written.borrow_mut().remove(token);
    r.renewed.borrow_mut().remove(token);
    if let Some(s) = shared.state.borrow_mut().sessions.remove(token) {
        shared.report.note(&s.name, format!("session let go: {why}"));
    }
}

/// Closes every writer this process holds on session `token`, saying why.
pub(super) fn close_writers(shared: &Shared, token: &str, why: &str) {
    let mut st = shared.state.borrow_mut();
    let Some(s) = st.sessions.get_mut(token) else { return };
    for u in s.uplinks.drain(..) {
        u.conn.kill.notify_one();
        shared.report.note(&s.name, format!("uplink U{} closed: {why}", u.id));
    }
    s.end_held();
}

/// Renews this process's leases, lets go (confirming the fence) of the
/// sessions another replica took over, and drains the queues of those it
/// holds; forever. On its own connection to the store.
pub(in crate::server::engine) async fn poll(shared: Rc<Shared>, r: Rc<Replicated>) {
    let (s, w) = (Rc::downgrade(&shared), Rc::downgrade(&r));
    let memo = crate::quiet::Memo::default();
    let matters = move || {
        memo.get(|| match (s.upgrade(), w.upgrade()) {
            (Some(shared), Some(r)) => poll_matters(&shared, &r),
            _ => false,
        })
    };
    // Only what the poll would find makes it show in the trace (the early
    // end, crate::quiet): a renewed lease and an empty queue do not.
    let matters: Rc<dyn Fn() -> bool> = Rc::new(matters);
    // Nor do its commands and replies on their way, while that holds and
    // nothing else uses the connection: a reply carrying a queued command
    // is one that popped an item since the poll began.
    let (m, w) = (matters.clone(), Rc::downgrade(&r));
    r.background.quiet_while(Rc::new(move || {
        let Some(r) = w.upgrade() else { return false };
        let popped = r.poll_pops.get().is_some_and(|p| crate::store::host::peek(|db| db.pops()) != Some(p));
        r.others.get() > 0 || popped || m()
    }));
    loop {
        crate::clock::sleep_as(r.poll, crate::quiet::Kind::While(matters.clone())).await;
        r.poll_pops.set(Some(crate::store::host::peek(|db| db.pops()).unwrap_or(0)));
        let held: Vec<(String, i64)> = r.epochs.borrow().iter().map(|(t, e)| (t.clone(), *e)).collect();
        // Every session at once: their commands share one pipelined connection.
        futures::future::join_all(held.into_iter().map(|(token, epoch)| tend(&shared, &r, token, epoch))).await;
        let _ = flush(&shared).await;
        r.poll_pops.set(None);
    }
}

/// Whether this replica's next poll, run now, could change what any client
/// sees: a session of its own ending or not yet as the store has it (its
/// held writes go out with the flush), another replica's take-over of one
/// it holds (the fence closes its writers), or a command in one's queue.
/// Read from the simulated store's data ([`crate::store::host::peek`]);
/// without it (another store), always. A store the replica cannot reach
/// (a partition) is the world's to see: its poll fails, then lets go.
fn poll_matters(shared: &Shared, r: &Replicated) -> bool {
    if !r.ending.borrow().is_empty() {
        return true;
    }
    let fences = shared.policy.fences_across_replicas();
    let st = shared.state.borrow();
    let written = r.written.borrow();
    r.epochs.borrow().iter().any(|(token, &epoch)| {
        let view = crate::store::host::peek(|db| (db.int(&key("epoch", token)), db.list_len(&key("queue", token))));
        let Some((now_epoch, queued)) = view else { return true };
        if (fences && now_epoch > epoch) || queued > 0 {
            return true;
        }
        let Some(s) = st.sessions.get(token) else { return false };
        s.holds_writes() || written.get(token).is_none_or(|w| serde_json::to_vec(s).ok().as_ref() != Some(w))
    })
}

/// One poll of session `token`, held at `epoch`: lets go of it if another
/// replica took it over (confirming the fence), else renews its lease and
/// runs what its queue holds.
async fn tend(shared: &Rc<Shared>, r: &Rc<Replicated>, token: String, epoch: i64) {
    let store = &r.background;
    if shared.policy.fences_across_replicas() {
        match store.get_int(&key("epoch", &token)).await {
            Ok(now_epoch) if now_epoch > epoch => return confirm_fence(shared, r, &token, now_epoch).await,
            Ok(_) => {}
            Err(_) => {
                // Stop before the lease can lapse in the store: once it has,
                // another replica takes the session over without a
                // confirmation this one could not give.
                let since = r.renewed.borrow().get(&token).copied().unwrap_or_default();
                if now().saturating_sub(since) + 2 * r.poll >= r.lease {
                    fail_unwritten(shared, r, &token);
                    let_go(shared, r, &token, "its lease on the shared store is lapsing (the store does not answer): another replica may take the session over, and its fence could not reach this one");
                }
                return;
            }
        }
    }
    if !r.holds(&token) {
        return;
    }
    let at = now();
    let lease = key("lease", &token);
    let (renewed, _) =
        futures::join!(store.set(&lease, r.me.as_bytes(), Some(r.lease)), drain_queue(shared, r, &token));
    if renewed.is_ok() {
        r.renewed.borrow_mut().insert(token.clone(), at);
        arm_lapse(shared, r, &token, at);
    }
}

/// Lets session `token` go before the lease renewed at `at` can lapse in the
/// store, unless a later renewal went through: on a timer of its own, since
/// a poll waiting on a store that a partition hides (each command up to the
/// store's timeout) may look again only after the lease lapsed, and a replica
/// that took the session over meanwhile found no lease and fenced no one
/// (replica hunt, legacy-sse seed 9504960: r3 went into the dead uplink).
pub(super) fn arm_lapse(shared: &Rc<Shared>, r: &Rc<Replicated>, token: &str, at: Duration) {
    if !shared.policy.fences_across_replicas() {
        return;
    }
    let due = r.lease.saturating_sub(2 * r.poll);
    let (s, w, t) = (Rc::downgrade(shared), Rc::downgrade(r), token.to_string());
    // It matters (crate::quiet) only while no later renewal went through and
    // the next one is overdue (a poll renews every second or so; one stuck
    // on the store is late): a healthy poll keeps the run free to end early.
    let (w2, t2) = (w.clone(), t.clone());
    let unrenewed = move || {
        w2.upgrade().is_some_and(|r| {
            r.holds(&t2) && r.renewed.borrow().get(&t2) == Some(&at) && now().saturating_sub(at) >= r.lease / 2
        })
    };
    tokio::task::spawn_local(async move {
        crate::clock::sleep_as(due, crate::quiet::Kind::While(Rc::new(unrenewed))).await;
        let (Some(shared), Some(r)) = (s.upgrade(), w.upgrade()) else { return };
        if r.holds(&t) && r.renewed.borrow().get(&t) == Some(&at) {
            fail_unwritten(&shared, &r, &t);
            let_go(&shared, &r, &t, "its lease on the shared store is lapsing (no renewal went through): another replica may take the session over, and its fence could not reach this one");
        }
    });
}

/// Another replica took session `token` over at `epoch`: closes the writers
/// here, writes the session's last state, lets go of it and confirms.
async fn confirm_fence(shared: &Shared, r: &Replicated, token: &str, epoch: i64) {
    let _busy = Busy::of(r);
    let last = shared.state.borrow().sessions.get(token).and_then(|s| serde_json::to_vec(s).ok());
    let written = r.written.borrow().get(token).cloned();
    let_go(
        shared,
        r,
        token,
        &format!("fenced through the shared store: another replica took the session over (epoch {epoch})"),
    );
    // Its last state, then the lease given up, then the confirmation:
    // pipelined, in this order, on one connection.
    let store = &r.background;
    let (session, lease, ack) = (key("session", token), key("lease", token), key("ack", token));
    let last = last.filter(|b| Some(b) != written.as_ref());
    let epoch = epoch.to_string();
    let write_last = async {
        if let Some(bytes) = &last {
            // Only over the session it held: a refused take-over may have ended it.
            let _ = store.set_xx(&session, bytes).await;
        }
    };
    let _ = futures::join!(write_last, store.del(&lease), store.set(&ack, epoch.as_bytes(), None));
}
