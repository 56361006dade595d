//! Sessions kept in a deployment's shared store (docs/replicas.md), so that
//! any replica can serve a session another one created.
//!
//! - Each replica persists the sessions it holds (a JSON snapshot, without
//!   its writers, which are connections of its own) after each request, each
//!   application command and each poll.
//! - A replica that gets a request of a session it does not hold takes it
//!   over: it bumps the session's writer epoch (`INCR`). When another replica
//!   holds a live writer of it (its lease is in the store), it waits, within
//!   `fence_grace`, for that replica to confirm the fence: to close its
//!   writers, let go of the session and acknowledge the epoch. Without the
//!   confirmation it refuses, explicitly: the seed's "fence not confirmed,
//!   so reject", which only a fence through a store can reach.
//! - A replica renews a lease on each session it writes to. When it cannot
//!   reach the store for most of the lease, it closes those writers itself:
//!   a fence it cannot hear may be pending, and the lease is about to lapse.
//! - The application's commands for a session another replica holds go
//!   through the session's queue in the store, which the holder drains.
//!
//! A policy that does not fence across replicas (naive, no-fence,
//! local-fence) neither waits for the prior writer nor lets itself be fenced.

use super::*;
use crate::store::{Store, StoreError};

/// How long a replica's lease on the writers of a session lasts.
pub(super) const LEASE: Duration = Duration::from_secs(3);
/// How often a replica renews its leases, watches the epochs of the
/// sessions it holds and drains their queues.
const POLL: Duration = Duration::from_millis(250);
/// How often a take-over looks for the prior writer's confirmation.
const WAIT: Duration = Duration::from_millis(100);

fn key(kind: &str, token: &str) -> String {
    format!("mcpsim:{kind}:{token}")
}

fn now() -> Duration {
    crate::clock::now().unwrap_or_default()
}

/// A replica's side of the shared sessions.
pub(super) struct Replicated {
    /// The store, for requests and the application's commands.
    store: Rc<dyn Store>,
    /// The store again, on a connection of its own, for [`poll`].
    background: Rc<dyn Store>,
    /// This process's name in the leases it holds.
    me: String,
    /// The sessions this process holds, with the epoch it took them at.
    epochs: RefCell<BTreeMap<String, i64>>,
    /// Per session: the snapshot last written to the store.
    written: RefCell<BTreeMap<String, Vec<u8>>>,
    /// Per session: when its lease was last renewed.
    renewed: RefCell<BTreeMap<String, Duration>>,
    /// Per session, held by its take-over: one at a time in a process, so
    /// that two requests of one session never bump its epoch past each other.
    taking: RefCell<BTreeMap<String, Rc<tokio::sync::Mutex<()>>>>,
    /// Per session: when its last take-over failed on the store (the
    /// requests that waited for it fail with it).
    failed_take: RefCell<BTreeMap<String, (Duration, StatusCode)>>,
    /// The sessions this process let go of (not ended) since it last held
    /// them: a request that was waiting on the store meanwhile takes its
    /// session over again instead of finding it unknown.
    let_go: RefCell<BTreeSet<String>>,
    /// The sessions that ended here and are not yet gone from the store:
    /// [`flush`] deletes them before any answer goes out, and the poll
    /// tries again until the store takes it (found by hunting: a deletion
    /// sent and forgotten was lost to a partition, and another replica
    /// took the refused session over).
    ending: RefCell<BTreeSet<String>>,
    /// Woken when a session's events wait for the store: [`flush_on_demand`].
    pub(super) dirty: Rc<tokio::sync::Notify>,
    /// [`LEASE`], [`POLL`] and [`WAIT`] on this process's clock (live, the
    /// run's time scale shortens them as it does every scenario timing).
    lease: Duration,
    poll: Duration,
    wait: Duration,
    /// The early end's view of the background connection ([`poll`]): how
    /// many commands other than a poll's are on it now ([`Busy`]), and,
    /// while a poll runs, how many items the store had popped when it began.
    others: Cell<u32>,
    poll_pops: Cell<Option<u64>>,
}

/// Counts a use of the background connection that is not a poll.
struct Busy<'a>(&'a Cell<u32>);

impl<'a> Busy<'a> {
    fn of(r: &'a Replicated) -> Self {
        r.others.set(r.others.get() + 1);
        Busy(&r.others)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// An application command on its way, through the store, to the replica
/// that holds the session.
#[derive(serde::Serialize, serde::Deserialize)]
struct Queued {
    client: String,
    /// A server request (`method`, `label`, `reissuable`), or `count` notifications.
    request: Option<(String, String, bool)>,
    count: u64,
    /// A tool-list change (`enable_tool` called on another replica): the
    /// tool it enables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
}

impl Replicated {
    /// A replica's side, for the process named `me` (unique per process);
    /// the caller starts its [`poll`]. `scale`: real seconds per scenario
    /// second for its own timings ([`AppHook::time_scale`]).
    pub(super) fn new(store: Rc<dyn Store>, me: String, scale: f64) -> Rc<Self> {
        Rc::new(Replicated {
            background: store.clone().another(),
            store,
            me,
            epochs: RefCell::default(),
            written: RefCell::default(),
            renewed: RefCell::default(),
            taking: RefCell::default(),
            failed_take: RefCell::default(),
            let_go: RefCell::default(),
            ending: RefCell::default(),
            dirty: Rc::default(),
            lease: LEASE.mul_f64(scale),
            poll: POLL.mul_f64(scale),
            wait: WAIT.mul_f64(scale),
            others: Cell::new(0),
            poll_pops: Cell::new(None),
        })
    }

    /// A session this process just created: it holds it (epoch 0).
    pub(super) fn created(&self, token: &str) {
        self.epochs.borrow_mut().insert(token.to_string(), 0);
    }

    /// A session that ended here: gone from the store too, at the next
    /// [`flush`] (before the answer that tells of its end goes out).
    pub(super) fn ended(&self, token: &str) {
        self.let_go.borrow_mut().remove(token);
        self.epochs.borrow_mut().remove(token);
        self.written.borrow_mut().remove(token);
        self.renewed.borrow_mut().remove(token);
        self.ending.borrow_mut().insert(token.to_string());
    }

    /// Whether this process holds session `token`.
    pub(super) fn holds(&self, token: &str) -> bool {
        self.epochs.borrow().contains_key(token)
    }
}

/// Writes to the store, before the caller answers, every session this
/// process holds that changed since it last wrote it: a session is in the
/// store before a client can act on what it was told.
pub(super) async fn flush(shared: &Shared) -> Result<(), StoreError> {
    let Some(r) = &shared.replicated else { return Ok(()) };
    flush_ending(shared).await?;
    // Each held session's snapshot, with the ids it covers (its held events
    // below that go out once the store has it).
    let snapshots: Vec<(String, Vec<u8>, u64)> = {
        let st = shared.state.borrow();
        r.epochs
            .borrow()
            .keys()
            .filter_map(|t| {
                let s = st.sessions.get(t)?;
                Some((t.clone(), serde_json::to_vec(s).ok()?, s.next_event_id))
            })
            .collect()
    };
    for (token, bytes, upto) in snapshots {
        if r.written.borrow().get(&token) == Some(&bytes) {
            release(shared, &token, upto);
            continue;
        }
        // Ended or let go while this flush waited on an earlier write: its
        // snapshot is stale (found by hunting: it brought a refused session
        // back into the store after its deletion).
        if !r.holds(&token) {
            continue;
        }
        let seen = r.written.borrow().contains_key(&token);
        if seen {
            // Gone from the store: a refused take-over on another replica ended it.
            if !r.store.set_xx(&key("session", &token), &bytes).await? {
                let why = "another replica refused its resumption and ended it in the shared store";
                close_writers(shared, &token, why);
                r.epochs.borrow_mut().remove(&token);
                r.written.borrow_mut().remove(&token);
                r.renewed.borrow_mut().remove(&token);
                let mut st = shared.state.borrow_mut();
                super::invalidate(shared, &mut st, &token, why);
                continue;
            }
        } else {
            r.store.set(&key("session", &token), &bytes, None).await?;
        }
        if r.holds(&token) {
            r.written.borrow_mut().insert(token.clone(), bytes);
            release(shared, &token, upto);
        }
    }
    Ok(())
}

/// Deletes from the store the sessions that ended here: all a refusal (a
/// client error) has to write before its answer goes out. The other held
/// sessions' snapshots are their own requests' to write (and
/// [`flush_on_demand`]'s): waiting for them made a refusal's answer late
/// (found by a replica hunt, legacy-sse seed 9503477: a 409 that ended the
/// session was held 1.6 s behind six other sessions' writes, and its client
/// gave up on the response headers).
pub(super) async fn flush_ending(shared: &Shared) -> Result<(), StoreError> {
    let Some(r) = &shared.replicated else { return Ok(()) };
    let ending: Vec<String> = r.ending.borrow().iter().cloned().collect();
    for token in ending {
        let (session, lease) = (key("session", &token), key("lease", &token));
        let (a, b) = futures::join!(r.store.del(&session), r.store.del(&lease));
        a?;
        b?;
        r.ending.borrow_mut().remove(&token);
    }
    Ok(())
}

/// Sends session `token`'s held events below `upto`: the store has them.
fn release(shared: &Shared, token: &str, upto: u64) {
    if let Some(s) = shared.state.borrow_mut().sessions.get_mut(token) {
        s.release(upto);
    }
}

/// Flushes whenever a session's events wait for the store; forever.
pub(super) async fn flush_on_demand(shared: Rc<Shared>, r: Rc<Replicated>) {
    loop {
        r.dirty.notified().await;
        let _ = flush(&shared).await;
    }
}

/// Makes this process the holder of session `token` when the store knows
/// it and another replica may hold it, for a request presenting principal
/// `who`. `Err`: the response refusing the request. A policy that binds
/// sessions to principals checks `who` against the session's owner in the
/// store first: another principal's request fences no one.
/// A refused resumption (`resuming`: the request opens a stream) ends the
/// session, as on one server: in the store, where the prior holder, once it
/// hears of it, finds nothing to write back.
pub(super) async fn take_over(
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
    let (epoch, bytes) = loop {
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
        let Some(bytes) = session else { return Ok(()) };
        let elsewhere = lease.is_some_and(|holder| holder != r.me.as_bytes());
        if !shared.policy.fences_across_replicas() || !elsewhere || ack >= epoch {
            break (epoch, bytes);
        }
        if now() >= deadline {
            let why = format!(
                "its writer on another replica was not confirmed fenced within {grace:?}: no acknowledgement through the shared store"
            );
            return Err(refuse_unfenced(shared, r, token, Some(epoch), &why, resuming).await);
        }
        crate::clock::sleep(r.wait).await;
    };
    let Ok(mut session) = serde_json::from_slice::<Session>(&bytes) else {
        return Err(rpc_error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable session in the shared store"));
    };
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
    Ok(())
}

/// Runs an application command for a session another replica holds: into
/// the session's queue in the store. False when this process holds it (or
/// keeps no shared sessions): the caller runs it here.
pub(super) async fn forward(shared: &Rc<Shared>, cmd: &AppCommand) -> bool {
    let Some(r) = &shared.replicated else { return false };
    let (token, queued) = match cmd {
        AppCommand::ServerRequest { client, token, method, label, reissuable } => (
            token,
            Queued {
                client: client.clone(),
                request: Some((method.clone(), label.clone(), *reissuable)),
                count: 0,
                tool: None,
            },
        ),
        AppCommand::Notify { client, token, count } => {
            (token, Queued { client: client.clone(), request: None, count: *count, tool: None })
        }
        _ => return false,
    };
    match still_holds(shared, r, token).await {
        Ok(true) => return false,
        Ok(false) => {}
        Err(e) => {
            shared.report.error(
                &queued.client,
                format!("the application's command was refused: this replica cannot confirm it still holds the session ({e})"),
            );
            return true;
        }
    }
    let bytes = serde_json::to_vec(&queued).unwrap_or_default();
    match r.store.rpush(&key("queue", token), &bytes).await {
        Ok(()) => shared.report.note(
            &format!("session {token}"),
            "the application's command went to the session's queue in the shared store (another replica holds it)",
        ),
        Err(e) => shared.report.error(&queued.client, format!("the application's command was lost: {e}")),
    }
    true
}

/// A call of `enable_tool` for session `token`, on a replica that does
/// not hold it while another one does: the change goes through the
/// session's queue in the store, and the holder tells the session's stream,
/// which stays where it is (no take-over). A policy that binds sessions to
/// principals checks the caller against the session's owner in the store
/// first. `None`: this process holds the session, or no other replica does;
/// the caller serves the call here.
pub(super) async fn enable_elsewhere(
    shared: &Rc<Shared>,
    token: &str,
    who: &str,
    id: RpcId,
    tool: &str,
) -> Option<Response<Body>> {
    let r = shared.replicated.clone()?;
    let unreachable = |e: StoreError| rpc_error(StatusCode::SERVICE_UNAVAILABLE, &format!("session store: {e}"));
    match still_holds(shared, &r, token).await {
        Ok(true) => return None,
        Ok(false) => {}
        Err(e) => return Some(unreachable(e)),
    }
    let (lease_key, session_key) = (key("lease", token), key("session", token));
    let (lease, session) = futures::join!(r.store.get(&lease_key), r.store.get(&session_key));
    let (lease, session) = match (lease, session) {
        (Ok(l), Ok(s)) => (l, s),
        (Err(e), _) | (_, Err(e)) => return Some(unreachable(e)),
    };
    let elsewhere = lease.is_some_and(|holder| holder != r.me.as_bytes());
    let bytes = session.filter(|_| elsewhere)?;
    let Ok(s) = serde_json::from_slice::<Session>(&bytes) else {
        return Some(rpc_error(StatusCode::INTERNAL_SERVER_ERROR, "unreadable session in the shared store"));
    };
    if shared.policy.binds_principal() && who != s.principal {
        return Some(rpc_error(StatusCode::FORBIDDEN, "credential does not match the session's owner"));
    }
    let q = Queued { client: String::new(), request: None, count: 0, tool: Some(tool.to_string()) };
    let bytes = serde_json::to_vec(&q).unwrap_or_default();
    if let Err(e) = r.store.rpush(&key("queue", token), &bytes).await {
        return Some(unreachable(e));
    }
    shared.report.note(
        &s.name,
        format!(
            "enable_tool {tool}: another replica holds the session; the change went to its queue in the shared store"
        ),
    );
    Some(full(StatusCode::OK, mcp::tool_result(id, &format!("{tool} enabled"), false).to_json()))
}

/// Runs the commands queued for session `token`, which this process holds.
async fn drain_queue(shared: &Rc<Shared>, r: &Replicated, token: &str) {
    while r.holds(token) {
        let Ok(Some(bytes)) = r.background.lpop(&key("queue", token)).await else { return };
        let Ok(q) = serde_json::from_slice::<Queued>(&bytes) else { continue };
        if let Some(tool) = &q.tool {
            let mut st = shared.state.borrow_mut();
            if let Some(s) = st.sessions.get_mut(token) {
                super::streamable::enable_tool(shared, s, tool);
            }
            continue;
        }
        let cmd = match q.request {
            Some((method, label, reissuable)) => {
                AppCommand::ServerRequest { client: q.client, token: token.to_string(), method, label, reissuable }
            }
            None => AppCommand::Notify { client: q.client, token: token.to_string(), count: q.count },
        };
        run_here(shared, cmd);
    }
}

/// Whether this process holds session `token`, for a fencing policy as
/// the store says: when another replica took it over meanwhile (its epoch
/// moved on), this process lets go of it first. `Err`: the store did not
/// answer, so a fencing policy cannot tell.
async fn still_holds(shared: &Shared, r: &Replicated, token: &str) -> Result<bool, StoreError> {
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
fn close_writers(shared: &Shared, token: &str, why: &str) {
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
pub(super) async fn poll(shared: Rc<Shared>, r: Rc<Replicated>) {
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
fn arm_lapse(shared: &Rc<Shared>, r: &Rc<Replicated>, token: &str, at: Duration) {
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
