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

mod handover;
mod poll;

pub(super) use handover::take_over;
pub(super) use poll::poll;
use poll::{close_writers, still_holds};

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
