//! The reference MCP server engine, speaking either dialect.
//!
//! Sessions own an event log that mints ids from `first_event_id` and keeps
//! the last `retention` events; every server→client message is a logged
//! event on one stream, routed to that stream's first live writer. In
//! `legacy-sse` a session has one stream (its uplink); in `streamable-http`
//! (see [`streamable`]) the standalone GET stream is stream 0 and each
//! tool call's POST response stream is another. Ids are unique across a
//! session's streams, so a `Last-Event-ID` names its stream. Resumptions are
//! decided by a [`ResumptionPolicy`] and carried out here.

mod app;
mod replicated;
mod resume;
mod routes;
mod streamable;

use app::*;
use replicated::Replicated;
use resume::*;
use routes::*;

use super::plug::{AppCommand, AppHook, AppReporter, ServerPlug};
use super::policy::{Decision, Inflight, Refusal, RequestState, RequestView, ResumeView, ResumptionPolicy};
use crate::scenario::{Dialect, ServerConfig};
use crate::seed::Seed;
use crate::trace::Outcome;
use crate::wire::body::ChannelBody;
use crate::wire::jsonrpc::{mcp, Message, RpcId};
use crate::wire::{legacy, sse};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

use super::http::Body;

/// The reference engine with one policy: a server plug-in.
pub struct Engine {
    cfg: ServerConfig,
    wire: EngineWire,
    policy: Rc<dyn ResumptionPolicy>,
    seed: Seed,
    /// How many processes it has served as (a deployment serves once per
    /// replica): each draws its own session tokens.
    serves: Cell<u32>,
    /// The sessions its processes sharing a store have named: a session
    /// keeps its name on every replica that takes it over, so the names
    /// are drawn from one count across them (one process counts its own).
    named: Rc<Cell<u32>>,
}

impl Engine {
    /// The engine configured by `cfg`, speaking `dialect`, deciding resumptions
    /// with `policy`; its session tokens are drawn from `seed`. None for a
    /// dialect without sessions (the engine speaks the stateful dialects).
    pub fn new(cfg: ServerConfig, dialect: Dialect, policy: Rc<dyn ResumptionPolicy>, seed: Seed) -> Option<Self> {
        match super::Wire::of(dialect) {
            super::Wire::Sessions { engine, .. } => Some(Self::speaking(cfg, engine, policy, seed)),
            super::Wire::Stateless => None,
        }
    }

    /// [`Engine::new`] with the routes of its dialect chosen.
    pub(crate) fn speaking(cfg: ServerConfig, wire: EngineWire, policy: Rc<dyn ResumptionPolicy>, seed: Seed) -> Self {
        Self { cfg, wire, policy, seed, serves: Cell::new(0), named: Rc::default() }
    }

    /// The engine as the `life`th process of its server (from 1): its
    /// first `serve` draws the tokens the `life`th `serve` of a fresh
    /// engine draws.
    pub(crate) fn in_life(self, life: u32) -> Self {
        self.serves.set(life.saturating_sub(1));
        self
    }
}

/// The seed stream of the session tokens of a plug's `n`th process: the
/// first keeps the stream a single server always used; the others (more
/// replicas, or restarts) draw their own, as separate processes do.
pub(crate) fn token_stream(seed: Seed, n: u32) -> ChaCha8Rng {
    if n <= 1 {
        seed.stream("server.tokens")
    } else {
        seed.stream(&format!("server.tokens.{n}"))
    }
}

impl ServerPlug for Engine {
    fn name(&self) -> &str {
        self.policy.name()
    }

    fn quiet_timers(&self) -> bool {
        true
    }

    fn resume_bounds(&self) -> Option<crate::server::plug::ResumeBounds> {
        Some(crate::server::plug::ResumeBounds {
            retention: self.cfg.retention as u64,
            fence_grace: self.cfg.fence_grace.0,
        })
    }

    fn serve(&self, listener: crate::net::Listener, app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        self.serves.set(self.serves.get() + 1);
        let mut rng = token_stream(self.seed, self.serves.get());
        // With a shared store, sessions live there too (each process names
        // itself in its leases with a draw of its own).
        let replicated = app
            .shared_store
            .then(|| Replicated::new(app.store.clone(), format!("p{:08x}", rng.next_u32()), app.time_scale));
        let shared = Rc::new(Shared {
            cfg: self.cfg.clone(),
            wire: self.wire,
            policy: self.policy.clone(),
            report: app.report.clone(),
            state: RefCell::new(State::default()),
            rng: RefCell::new(rng),
            named: if replicated.is_some() { self.named.clone() } else { Rc::default() },
            replicated,
        });
        if let Some(r) = &shared.replicated {
            tokio::task::spawn_local(replicated::poll(shared.clone(), r.clone()));
            tokio::task::spawn_local(replicated::flush_on_demand(shared.clone(), r.clone()));
        }
        Box::pin(async move {
            tokio::task::spawn_local(app_loop(shared.clone(), app));
            loop {
                let Ok((stream, peer)) = listener.accept().await else { continue };
                let ctl = Rc::new(ConnCtl { peer: Some(peer), ..ConnCtl::default() });
                let svc_shared = shared.clone();
                let svc_ctl = ctl.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let (shared, ctl) = (svc_shared.clone(), svc_ctl.clone());
                    async move {
                        let resp = (shared.wire.handle)(shared.clone(), ctl, req).await;
                        // A request the store already failed (503) answers at once:
                        // trying the store again would only make its client wait.
                        if resp.status() == StatusCode::SERVICE_UNAVAILABLE {
                            return Ok::<_, Infallible>(resp);
                        }
                        // With a shared store, what the client is about to learn is there
                        // first: for a refusal, only that its session ended.
                        let flushed = if resp.status().is_client_error() {
                            replicated::flush_ending(&shared).await
                        } else {
                            replicated::flush(&shared).await
                        };
                        if let Err(e) = flushed {
                            let why = format!("the session store did not take this request's state: {e}");
                            return Ok::<_, Infallible>(rpc_error(StatusCode::SERVICE_UNAVAILABLE, &why));
                        }
                        Ok::<_, Infallible>(resp)
                    }
                });
                tokio::task::spawn_local(async move {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(crate::clock::HyperTimer)
                        .serve_connection(TokioIo::new(stream), svc);
                    // Biased: the branch order decides, not the runtime's RNG; a
                    // fence that arrived wins over a connection that just ended.
                    tokio::select! {
                        biased;
                        _ = ctl.kill.notified() => {}
                        _ = conn => {}
                    }
                    ctl.closed.set(true);
                    ctl.closed_notify.notify_waiters();
                });
            }
        })
    }
}

/// Per-connection control: the fence.
#[derive(Default)]
struct ConnCtl {
    /// Where the connection comes from (a NAT's address in a simulation).
    peer: Option<std::net::SocketAddr>,
    kill: Notify,
    closed: Cell<bool>,
    closed_notify: Notify,
}

impl ConnCtl {
    async fn wait_closed(&self) {
        while !self.closed.get() {
            self.closed_notify.notified().await;
        }
    }
}

/// A response being served.
type Serving = Pin<Box<dyn Future<Output = Response<Body>>>>;

/// What sets a stateful dialect apart in the engine: its routes, and
/// whether a resumption that replays nothing is primed with a fresh id.
/// legacy-sse's routes are in [`routes`], streamable-http's in
/// [`streamable`]; the rest of the engine is shared.
#[derive(Clone, Copy)]
pub(crate) struct EngineWire {
    /// Serves one HTTP request.
    handle: fn(Rc<Shared>, Rc<ConnCtl>, Request<Incoming>) -> Serving,
    /// A resumption that replays nothing gets a priming event (streamable-http).
    primes_empty_replay: bool,
}

impl EngineWire {
    pub(crate) const LEGACY: EngineWire =
        EngineWire { handle: |s, c, r| Box::pin(handle(s, c, r)), primes_empty_replay: false };
    pub(crate) const STREAMABLE: EngineWire =
        EngineWire { handle: |s, c, r| Box::pin(streamable::handle(s, c, r)), primes_empty_replay: true };
}

struct Shared {
    cfg: ServerConfig,
    wire: EngineWire,
    policy: Rc<dyn ResumptionPolicy>,
    report: AppReporter,
    state: RefCell<State>,
    rng: RefCell<ChaCha8Rng>,
    /// A deployment's shared sessions, when the replicas share a store.
    replicated: Option<Rc<Replicated>>,
    /// How many sessions have been named (`S1`, `S2`, ...).
    named: Rc<Cell<u32>>,
}

#[derive(Default)]
struct State {
    /// Live sessions by token. A BTreeMap: iteration order must be deterministic.
    sessions: BTreeMap<String, Session>,
    next_uplink: u32,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Session {
    name: String,
    principal: String,
    log: VecDeque<Logged>,
    next_event_id: u64,
    /// Its writers: connections of this process (never in the shared store).
    #[serde(skip)]
    uplinks: Vec<Uplink>,
    requests: Vec<Req>,
    tombstones: BTreeSet<RpcId>,
    /// Ids the server stopped waiting for (tombstoned, timed out) whose late
    /// answer arrived anyway: the client did answer them, so a replay of
    /// their events would hand it an answered request (condition 3).
    answered_tombstones: BTreeSet<RpcId>,
    /// The stream of every id minted (streamable-http; priming ids included).
    id_stream: BTreeMap<u64, StreamId>,
    /// Tool calls (streamable-http): their POST response streams.
    calls: BTreeMap<StreamId, Call>,
    /// One past the last evicted event id.
    first_kept: u64,
    /// Write-through, for a session in a shared store: what goes to its
    /// writers waits until the store has every id minted before it. `None`
    /// on one server: everything goes out at once.
    #[serde(skip)]
    gate: Option<Gate>,
}

/// A write-through session's writes waiting for the store (found by
/// hunting: a replica wrote events into a live stream before the store took
/// them, then lost the session to a partition; the replica that took it
/// over had never heard of events its client had seen).
struct Gate {
    /// One past the newest id the store has (the `next_event_id` of the
    /// snapshot it last took).
    stored: u64,
    /// Writes in order: the ids they need stored (one past), writer, bytes.
    queue: VecDeque<(u64, mpsc::UnboundedSender<Bytes>, Bytes)>,
    /// Wakes the flush that puts them in the store.
    dirty: Rc<Notify>,
}

impl Gate {
    /// The gate of a session the store has up to `stored` (one past).
    fn new(stored: u64, dirty: Rc<Notify>) -> Self {
        Gate { stored, queue: VecDeque::new(), dirty }
    }
}

/// Writes `bytes` to `tx` once the store has every id below `next`: at once
/// without a gate. Whether the writer was live.
fn send_gated(gate: &mut Option<Gate>, next: u64, tx: &mpsc::UnboundedSender<Bytes>, bytes: Bytes) -> bool {
    match gate {
        Some(g) if !g.queue.is_empty() || next > g.stored => {
            if tx.is_closed() {
                return false;
            }
            g.queue.push_back((next, tx.clone(), bytes));
            g.dirty.notify_one();
            true
        }
        _ => tx.send(bytes).is_ok(),
    }
}

/// A session's stream: 0 is the uplink (legacy) or the standalone GET stream.
type StreamId = u32;
const STANDALONE: StreamId = 0;

/// A tool call whose POST response stream is stream `StreamId`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Call {
    /// The client's JSON-RPC id of `tools/call`.
    rpc: RpcId,
    /// Set once the tool result was emitted: the stream ends after it.
    done: bool,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Logged {
    id: u64,
    data: String,
    request: Option<RpcId>,
    stream: StreamId,
    /// Whether it was written to a writer when emitted.
    routed: bool,
}

struct Uplink {
    id: u32,
    tx: mpsc::UnboundedSender<Bytes>,
    conn: Rc<ConnCtl>,
    stream: StreamId,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Req {
    id: RpcId,
    /// When it times out (scenario time, µs).
    deadline_us: u64,
    label: String,
    method: String,
    event_id: u64,
    state: RequestState,
    reissues: u32,
    /// Its earlier ids, each retired by a re-issue (oldest first).
    retired: Vec<RpcId>,
    stream: StreamId,
    /// False when a resumption must not re-issue it (condition 4: fail it or refuse).
    reissuable: bool,
}

impl Session {
    /// Logs a message on `stream`, mints its id and routes it to the stream's first live writer.
    fn emit(
        &mut self,
        msg: &Message,
        request: Option<RpcId>,
        stream: StreamId,
        retention: usize,
        report: &AppReporter,
    ) -> (u64, Option<u32>) {
        let id = self.mint(stream);
        let data = msg.to_json();
        let bytes = Bytes::from(sse::encode(Some(&id.to_string()), None, &data));
        self.prune(report);
        let (gate, next) = (&mut self.gate, self.next_event_id);
        let routed = self
            .uplinks
            .iter()
            .filter(|u| u.stream == stream)
            .find(|u| send_gated(gate, next, &u.tx, bytes.clone()))
            .map(|u| u.id);
        self.log.push_back(Logged { id, data, request, stream, routed: routed.is_some() });
        while self.log.len() > retention {
            if let Some(gone) = self.log.pop_front() {
                self.first_kept = gone.id + 1;
            }
        }
        (id, routed)
    }

    /// Writes `bytes` to `tx` once the store has every id minted so far.
    fn send(&mut self, tx: &mpsc::UnboundedSender<Bytes>, bytes: Bytes) -> bool {
        send_gated(&mut self.gate, self.next_event_id, tx, bytes)
    }

    /// Ends every stream with writes still waiting for the store (the
    /// session is gone from this process; what the store never took is
    /// not sent). A finished tool call's stream is no longer among the
    /// writers: found by hunting, its end waited with its result, and the
    /// stream went on with heartbeats alone after the session was let go.
    fn end_held(&mut self) {
        let Some(g) = &mut self.gate else { return };
        let mut ended: Vec<mpsc::UnboundedSender<Bytes>> = Vec::new();
        for (_, tx, _) in g.queue.drain(..) {
            if !ended.iter().any(|e| e.same_channel(&tx)) {
                let _ = tx.send(ChannelBody::END);
                ended.push(tx);
            }
        }
    }

    /// Whether writes of this session wait for the store.
    fn holds_writes(&self) -> bool {
        self.gate.as_ref().is_some_and(|g| !g.queue.is_empty())
    }

    /// The store has every id below `upto`: the writes waiting for them go out.
    fn release(&mut self, upto: u64) {
        let Some(g) = &mut self.gate else { return };
        g.stored = g.stored.max(upto);
        while g.queue.front().is_some_and(|(need, _, _)| *need <= g.stored) {
            let Some((_, tx, bytes)) = g.queue.pop_front() else { break };
            let _ = tx.send(bytes);
        }
    }

    /// Mints the next event id on `stream`.
    fn mint(&mut self, stream: StreamId) -> u64 {
        let id = self.next_event_id;
        self.next_event_id += 1;
        self.id_stream.insert(id, stream);
        id
    }

    /// The stream an event id was minted on (the standalone stream if unknown).
    fn stream_of(&self, id: u64) -> StreamId {
        self.id_stream.get(&id).copied().unwrap_or(STANDALONE)
    }

    /// Forgets uplinks whose connection is gone (the server noticed the close).
    fn prune(&mut self, report: &AppReporter) {
        let name = &self.name;
        self.uplinks.retain(|u| {
            let live = !u.tx.is_closed();
            if !live {
                report.note(name, format!("uplink U{} closed; unregistered", u.id));
            }
            live
        });
    }

    /// The oldest id not evicted, if anything was logged. Ids are sparse in
    /// streamable-http (priming ids are never logged), so this is one past the
    /// last evicted id, not the first logged one.
    fn oldest(&self) -> Option<u64> {
        self.log.front().map(|_| self.first_kept)
    }
}

use super::http::{credential, full, rpc_error, sse_response};
