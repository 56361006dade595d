//! The simulated world: turmoil hosts built from a [`Plan`], and our own step
//! loop that applies each scenario step at its simulated time.
//!
//! Hosts: `server`; per client `c`, a NAT host `nat-c` and the client host `c`.
//! Clients reach the server only through their NAT. A deployment of several
//! replicas (`[deployment]`) puts a balancer on the `server` host and runs
//! the server on `replica-1` to `replica-N` (docs/replicas.md).

pub(crate) mod balancer;
mod hosts;
pub(crate) mod nat;
mod panics;
mod schedule;
mod sim;
mod steps;
mod topology;

pub(crate) use hosts::Hosts;
pub use nat::NatCmd;
pub use sim::run_with;

use crate::client::{ClientCmd, ClientShared};
use crate::inbox::Inbox;
use crate::scenario::Plan;
use crate::seed::Seed;
use crate::server::AppHook;
use crate::trace::{Recorder, What};
use schedule::Schedule;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

/// The smallest network latency the world uses (a hop still takes a tick).
const MIN_LATENCY: Duration = Duration::from_micros(1);

/// The simulated epoch: the seed analysis's date of record, 2026-11-11.
const EPOCH_SECS: u64 = 1_794_355_200;

/// Why a build without `--cfg tokio_unstable` may not run: tokio then seeds
/// `select!` and its scheduler from the OS, and traces stop being
/// reproducible. `.cargo/config.toml` sets the flag for this repository; a
/// `RUSTFLAGS` variable replaces that setting, and a crate that uses mcpsim as
/// a library needs the flag in its own config.
pub const NEEDS_TOKIO_UNSTABLE: &str =
    "mcpsim was built without `--cfg tokio_unstable`, so runs would not be deterministic. \
Build with RUSTFLAGS=\"--cfg tokio_unstable\" (a RUSTFLAGS variable replaces the flag from .cargo/config.toml), \
or add `[build] rustflags = [\"--cfg\", \"tokio_unstable\"]` to your .cargo/config.toml";

/// The hosts and the handles the step loop drives its actors through.
pub(crate) struct World<H> {
    pub(crate) sim: H,
    pub(crate) rec: Recorder,
    /// The server application's command queue and its reporter.
    app: AppHook,
    /// Per client: its command inbox and what it shares with the harness (its token).
    clients: BTreeMap<String, (Inbox<ClientCmd>, Rc<ClientShared>)>,
    /// Per client: its NAT's command inbox.
    nats: BTreeMap<String, Inbox<nat::Fault>>,
    /// Clients crashed and not yet restarted.
    crashed: Vec<String>,
    /// The hosts that run the server: `server`, or each replica's.
    pub(crate) server_hosts: Vec<String>,
    /// With several replicas: the application hooks of replicas 2 to N
    /// (`app` is replica 1's). What the application tells every open stream
    /// goes to each.
    replica_apps: Vec<AppHook>,
    /// Partitions from the store still to heal: when, and which replica.
    heals: Vec<(Duration, u32)>,
    /// The replicas cut from the store now (healing or for good): a
    /// replica's poll that cannot reach the store lets its sessions go in
    /// time, so the world is not still while one is cut.
    cut: BTreeSet<u32>,
    /// The balancer of a deployment in simulation.
    balancer: Option<Rc<balancer::Balancer>>,
    /// In a deployment: which replica created each session.
    pub(crate) homes: Option<Rc<balancer::Homes>>,
    /// When each step fires.
    schedule: Schedule,
    /// The server hosts a `crash-replica` stopped (until restarted): their
    /// stop is the step's, not a misbehaving server's.
    pub(crate) down_hosts: std::collections::BTreeSet<String>,
}

/// Records a run's header: what runs against what, and each client.
/// What a server says of itself in the run's header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerTraits {
    /// It authenticates its clients.
    pub authenticates: bool,
    /// Event ids per stream it may mint unreported ([`crate::server::plug::ServerPlug::unreported_per_stream`]).
    pub unreported_per_stream: u32,
    /// What it promises a resumption ([`crate::server::plug::ServerPlug::resume_bounds`]).
    pub resume_bounds: Option<crate::server::plug::ResumeBounds>,
}

pub(crate) fn record_header(rec: &Recorder, plan: &Plan, server: &str, seed: Seed, traits: ServerTraits) {
    rec.record(What::RunStarted {
        authenticates: traits.authenticates,
        unreported_per_stream: traits.unreported_per_stream,
        retention: traits.resume_bounds.map(|b| b.retention),
        fence_grace_us: traits.resume_bounds.map(|b| b.fence_grace.as_micros() as u64),
        scenario: plan.name.clone(),
        server: server.to_string(),
        dialect: plan.dialect,
        seed: seed.0,
        duration_us: plan.duration.as_micros() as u64,
        liveness_bound_us: plan.server.request_timeout.0.as_micros() as u64,
    });
    for c in &plan.clients {
        rec.record(What::ClientJoined {
            client: c.name.clone(),
            principal: c.principal.clone(),
            heartbeat_timeout_us: c.heartbeat_timeout.as_micros() as u64,
            think_time_us: c.think_time.as_micros() as u64,
            max_backoff_us: crate::client::MAX_BACKOFF.as_micros() as u64,
        });
    }
    for t in &plan.tools {
        rec.record(What::ToolOffered {
            tool: t.name.clone(),
            once: t.once,
            idempotent: t.idempotent,
            input: t.input.clone(),
        });
    }
}

/// Records that the run's server is a deployment of several replicas, whose
/// store waits `store_timeout_us` for an answer (when they share one).
pub(crate) fn record_deployment(rec: &Recorder, plan: &Plan, store_timeout_us: u64) {
    rec.record(What::DeploymentStarted {
        replicas: plan.deployment.replicas,
        routing: plan.deployment.routing.name().to_string(),
        store: plan.deployment.store.name().to_string(),
        store_timeout_us: (plan.deployment.store == crate::scenario::StoreKind::Shared).then_some(store_timeout_us),
    });
}

/// A client host's body, run each time it (re)starts: it remembers nothing
/// from an earlier life.
pub(crate) fn start_client(
    spec: &crate::scenario::ClientSpec,
    dialect: crate::scenario::Dialect,
    dialer: Rc<dyn crate::client::dial::Dialer>,
    rec: &Recorder,
    shared: &Rc<ClientShared>,
    inbox: &Inbox<ClientCmd>,
) -> impl std::future::Future<Output = ()> {
    inbox.clear();
    *shared.token.borrow_mut() = None;
    shared.states.borrow_mut().clear();
    crate::client::body(spec.clone(), dialect, dialer, rec.clone(), shared.clone(), inbox.clone())
}

impl<H: Hosts> World<H> {
    /// A world over `hosts`: the step loop's handles to the application, the
    /// clients and their NATs.
    pub(crate) fn assemble(
        hosts: H,
        plan: &Plan,
        rec: Recorder,
        app: AppHook,
        clients: BTreeMap<String, (Inbox<ClientCmd>, Rc<ClientShared>)>,
        nats: BTreeMap<String, Inbox<nat::Fault>>,
    ) -> Self {
        World {
            sim: hosts,
            rec,
            app,
            clients,
            nats,
            crashed: Vec::new(),
            server_hosts: vec!["server".to_string()],
            replica_apps: Vec::new(),
            heals: Vec::new(),
            cut: BTreeSet::new(),
            balancer: None,
            homes: None,
            down_hosts: Default::default(),
            schedule: Schedule::new(plan.steps.len()),
        }
    }

    /// The step loops' one turn (the simulation's and a live run's): heals
    /// the partitions due by `now`, then returns the steps to hand over
    /// before the coming tick ends, with their due times, in order (each
    /// then goes to [`World::apply`]).
    pub(crate) fn due(&mut self, plan: &Plan, now: Duration, tick: Duration) -> Vec<(usize, Duration)> {
        self.heal_due(now);
        self.schedule.due(plan, &self.rec, now, tick)
    }

    /// When fired step `i` was meant to run (a live run measures its lateness against it).
    pub(crate) fn intended(&self, i: usize) -> Option<Duration> {
        self.schedule.intended(i)
    }

    /// Whether every step has fired.
    pub(crate) fn all_fired(&self) -> bool {
        self.schedule.all_fired()
    }
}

/// The shared store's host, in a deployment that has one.
const STORE_HOST: &str = "store";
/// How long a replica waits for the store's answer before it gives up (a
/// partition, a crashed store).
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

thread_local! {
    /// Whether simulations on this thread may end early ([`without_early_end`]).
    static EARLY_END: Cell<bool> = const { Cell::new(true) };
}

/// Runs `f` with every simulation on this thread run to its scenario's
/// end: an early end (once nothing left could change the trace, see
/// `src/quiet.rs`) must give the same trace, and this is how to check it.
pub fn without_early_end<R>(f: impl FnOnce() -> R) -> R {
    let was = EARLY_END.with(|e| e.replace(false));
    let out = f();
    EARLY_END.with(|e| e.set(was));
    out
}

impl<H: Hosts> World<H> {
    /// Makes this a world of replicas `replica-1` to `replica-N`: `app` is
    /// replica 1's hook, `others` those of replicas 2 to N.
    pub(crate) fn set_replicas(&mut self, others: Vec<AppHook>) {
        self.server_hosts = (1..=others.len() as u32 + 1).map(balancer::replica_host).collect();
        self.replica_apps = others;
    }

    /// The application of the replica that holds session `token`: the one
    /// whose response created it, else the first.
    /// When that replica is down, the first replica up (with a shared
    /// store, the command reaches the session's holder through it).
    fn app_of(&self, token: &str) -> &AppHook {
        let hook = |r: u32| if r >= 2 { self.replica_apps.get(r as usize - 2).unwrap_or(&self.app) } else { &self.app };
        let up = |r: &u32| !self.down_hosts.contains(&balancer::replica_host(*r));
        let home = self.homes.as_ref().and_then(|h| h.home(token)).unwrap_or(1);
        if up(&home) {
            return hook(home);
        }
        (1..=self.server_hosts.len() as u32).find(up).map_or(&self.app, hook)
    }

    /// The session token `client` holds now.
    fn token_of(&self, client: &str) -> Option<String> {
        self.clients[client].1.token.borrow().clone()
    }
}
