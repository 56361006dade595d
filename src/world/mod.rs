//! The simulated world: turmoil hosts built from a [`Plan`], and our own step
//! loop that applies each scenario step at its simulated time.
//!
//! Hosts: `server`; per client `c`, a NAT host `nat-c` and the client host `c`.
//! Clients reach the server only through their NAT. A deployment of several
//! replicas (`[deployment]`) puts a balancer on the `server` host and runs
//! the server on `replica-1` to `replica-N` (docs/replicas.md).

pub(crate) mod balancer;
pub(crate) mod nat;
mod panics;

pub use nat::NatCmd;

use crate::client::ResumeFrom;
use crate::client::{ClientCmd, ClientShared};
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::{Action, LastEventId, Plan, SeenOn, Step, Tamper, Trigger};
use crate::seed::Seed;
use crate::server::{AppCommand, AppHook, AppReporter, ServerPlug};
use crate::trace::stateless::StateHow;
use crate::trace::{Recorder, Run, SimTime, What};
use nat::{Nat, SimNet};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

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

/// Runs a plan against any server plug-in.
pub fn run_with(plan: &Plan, plug: Rc<dyn ServerPlug>, seed: Seed) -> Result<Run> {
    if !cfg!(tokio_unstable) {
        return Err(Error::usage(NEEDS_TOKIO_UNSTABLE));
    }
    plan.validate().map_err(|p| match p.step {
        Some(i) => Error::usage(format!("plan {:?}: step {i} {}", plan.name, p.message)),
        None => Error::usage(format!("plan {:?}: {}", plan.name, p.message)),
    })?;
    let registry = crate::quiet::begin();
    let mut world = World::build(plan, plug.clone(), seed);
    let mut schedule = Schedule::new(plan.steps.len());
    // Whether the run may end once nothing can change its trace (crate::quiet):
    // a server whose timers all go through mcpsim's clock.
    let may_end_early = EARLY_END.with(Cell::get) && plug.quiet_timers();
    // How long a keep-alive takes from the server's timer to the client's
    // reader: two hops (server to NAT, NAT to client; three behind a
    // balancer), each up to a latency and the wait for the next tick
    // boundary, and a tick to spare.
    let hops = if world.balancer.is_some() { 3 } else { 2 };
    let way = (plan.network.latency_max + plan.network.tick) * hops + plan.network.tick;
    // Each host that runs the server: whether its serve() stopped yet.
    let mut server_stopped: Vec<(String, bool)> = world.server_hosts.iter().map(|h| (h.clone(), false)).collect();
    let mut aborted = None;
    panics::install();
    let tick = plan.network.tick;
    let deadline = crate::watchdog::deadline();
    let mut steps: u32 = 0;
    while world.sim.elapsed() < plan.duration {
        let now = world.sim.elapsed();
        steps = steps.wrapping_add(1);
        // The one wall-clock read on the path to the trace, every 8 steps
        // (the step loop is the hunt's hot path): it only ever cuts a run
        // that outlived the watchdog, and says so (see crate::watchdog).
        if steps % 8 == 0 && deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            let why = format!(
                "{} at {} of simulated time: it outlived its wall-clock bound",
                crate::watchdog::STOPPED,
                SimTime::from_duration(now)
            );
            world.rec.record(What::ServerStopped { why: why.clone() });
            world.rec.record(What::RunCut { why: why.clone() });
            aborted = Some(why);
            break;
        }
        world.rec.set_loop_now(now);
        world.heal_due(now);
        // Hand over every step due before the end of the coming tick; actors
        // wait for the exact due time themselves.
        let handed = schedule.due(plan, &world.rec, now, tick);
        let handed_any = !handed.is_empty();
        for (index, at) in handed {
            world.apply(&plan.steps[index], index, at);
        }
        world.rec.set_loop_now(now);
        for (host, stopped) in server_stopped.iter_mut() {
            if !*stopped && !world.down_hosts.contains(host) && !world.sim.is_host_running(host.as_str()) {
                // A misbehaving plug-in must not take the harness down: record it,
                // and let the clients observe a dead server until the end.
                *stopped = true;
                let on = if host == "server" { String::new() } else { format!(" on {host}") };
                world.rec.record(What::ServerStopped {
                    why: format!("server {:?} stopped{on}: its serve() returned or panicked", plug.name()),
                });
            }
        }
        // Every step handed over earlier, nothing left to record here, and
        // nothing in the world that can still change the trace: the run is over.
        if may_end_early
            && !handed_any
            && schedule.all_fired()
            && world.heals.is_empty()
            && world.still(plan.duration, way)
        {
            break;
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.sim.step())) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::io(format!("simulation failed at {:?} (seed {seed}): {e}", world.sim.elapsed())))
            }
            Err(_) => {
                // A host's code panicked (tokio_unstable makes turmoil re-raise it here).
                // The simulation cannot go on; keep everything recorded so far.
                let why = format!(
                    "a host panicked at {} with server {:?}: {}",
                    SimTime::from_duration(world.sim.elapsed()),
                    plug.name(),
                    panics::last().unwrap_or_else(|| "unknown panic".into())
                );
                world.rec.record(What::ServerStopped { why: why.clone() });
                world.rec.record(What::RunCut { why: why.clone() });
                aborted = Some(why);
                break;
            }
        }
    }
    drop(registry);
    Ok(Run {
        scenario: plan.name.clone(),
        server: plug.name().to_string(),
        by_name: false,
        seed,
        source: plan.source.clone(),
        duration: plan.duration,
        simulated: world.sim.elapsed().min(plan.duration),
        trace: world.rec.take(),
        aborted,
        live: None,
    })
}

/// Starting and stopping client hosts: what the step loop needs of the
/// network beyond the actors' inboxes (turmoil in a simulation; tasks in a
/// live run).
pub(crate) trait Hosts {
    /// Stops client `client` at once, as a crash: it forgets everything and
    /// its connections die with it.
    fn crash(&mut self, client: &str);
    /// Starts a crashed client again, with an empty memory.
    fn restart(&mut self, client: &str);
    /// Restarts the server's process (`restart-server`); an error says why it cannot.
    fn restart_server(&mut self) -> Result<(), String>;
    /// Restarts the process on host `host` (a replica of a deployment); an
    /// error says why it cannot.
    fn restart_host(&mut self, host: &str) -> Result<(), String> {
        Err(format!("cannot restart {host} here"))
    }
    /// Crashes the process on host `host` (a replica of a deployment), which
    /// stays down until it is restarted; an error says why it cannot.
    fn crash_host(&mut self, host: &str) -> Result<(), String> {
        Err(format!("cannot crash {host} here"))
    }
    /// Drains the replica on host `host` at the balancer (no new
    /// connection goes to it); an error says why it cannot.
    fn drain_host(&mut self, host: &str) -> Result<(), String> {
        Err(format!("cannot drain {host} here: no balancer"))
    }
    /// Cuts (`cut`) or restores the link between host `host` and the shared
    /// store; an error says why it cannot.
    fn store_link(&mut self, host: &str, cut: bool) -> Result<(), String> {
        let _ = cut;
        Err(format!("cannot partition {host} from the store here"))
    }
}

impl Hosts for turmoil::Sim<'_> {
    fn crash(&mut self, client: &str) {
        turmoil::Sim::crash(self, client);
    }
    fn restart(&mut self, client: &str) {
        self.bounce(client);
    }
    fn restart_server(&mut self) -> Result<(), String> {
        // The host's software starts again: the plug's `serve` runs anew.
        self.bounce("server");
        Ok(())
    }
    fn restart_host(&mut self, host: &str) -> Result<(), String> {
        self.bounce(host);
        Ok(())
    }
    fn crash_host(&mut self, host: &str) -> Result<(), String> {
        turmoil::Sim::crash(self, host);
        Ok(())
    }
    fn store_link(&mut self, host: &str, cut: bool) -> Result<(), String> {
        // Held, not lost: TCP retransmits what a partition delayed, so the
        // connections that carried data across it deliver it once it heals
        // (turmoil's own TCP does not retransmit what `partition` drops).
        if cut {
            self.hold(host, STORE_HOST);
        } else {
            self.release(host, STORE_HOST);
        }
        Ok(())
    }
}

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
        }
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

impl<'a> World<turmoil::Sim<'a>> {
    /// Whether the world is still before `end` (crate::quiet): no message
    /// that can change the trace is in flight (a keep-alive on a live path
    /// and a quiet poll of the store cannot), no replica is cut from the
    /// store, and every timer left is harmless.
    fn still(&self, end: Duration, way: Duration) -> bool {
        if !self.cut.is_empty() {
            return false;
        }
        crate::quiet::look();
        let mut in_flight = false;
        self.sim.links(|links| {
            for link in links {
                for m in link {
                    let (from, to) = m.pair();
                    let beat = match m.protocol() {
                        turmoil::Protocol::Tcp(turmoil::Segment::Data(_, bytes)) => {
                            crate::quiet::harmless_beat(from, to, bytes)
                        }
                        _ => false,
                    };
                    if !beat && !crate::quiet::harmless_message(from, to) {
                        in_flight = true;
                        return;
                    }
                }
            }
        });
        !in_flight && crate::quiet::still(end, way)
    }

    /// The turmoil simulation of `plan`: the server host running `plug`, and
    /// per client its NAT host and its client host. Records the run's header.
    fn build(plan: &Plan, plug: Rc<dyn ServerPlug>, seed: Seed) -> Self {
        let rec = Recorder::with_clock(Rc::new(crate::clock::now));
        let mut builder = turmoil::Builder::new();
        builder
            .rng_seed(seed.derive("turmoil"))
            .epoch(UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
            .simulation_duration(plan.duration + Duration::from_secs(60))
            .tick_duration(plan.network.tick)
            // Never zero: a message must not reach a host that runs later in the
            // same tick, possibly at an earlier time on its clock than the send
            // (the trace's time order is causal only with this; see `trace`).
            .min_message_latency(plan.network.latency_min.max(MIN_LATENCY))
            .max_message_latency(plan.network.latency_max.max(MIN_LATENCY))
            .tcp_capacity(1 << 16);
        let mut sim = builder.build();

        let traits = ServerTraits {
            authenticates: plan.server.authenticate,
            unreported_per_stream: plug.unreported_per_stream(),
            resume_bounds: plug.resume_bounds(),
        };
        record_header(&rec, plan, plug.name(), seed, traits);
        let replicas = plan.deployment.replicas.max(1);
        let mut deployed = None;
        let server_hosts: Vec<String> = if replicas == 1 {
            vec!["server".to_string()]
        } else {
            rec.record(What::DeploymentStarted {
                replicas,
                routing: plan.deployment.routing.name().to_string(),
                store: plan.deployment.store.name().to_string(),
                store_timeout_us: (plan.deployment.store == crate::scenario::StoreKind::Shared)
                    .then_some(STORE_TIMEOUT.as_micros() as u64),
            });
            let mut b =
                balancer::Balancer::new(replicas, plan.deployment.routing, plan.dialect.has_sessions(), rec.clone());
            if plan.deployment.timeout_server.is_some() || plan.deployment.timeout_tunnel.is_some() {
                b = b.with_timeouts(plan.deployment.balancer_timeouts());
            }
            deployed = Some(b.clone());
            sim.host("server", move || {
                let balancer = b.clone();
                async move { Ok(balancer.run().await?) }
            });
            (1..=replicas).map(balancer::replica_host).collect()
        };
        // Each replica runs the one plug: its `serve` is called once per
        // replica (and again at each restart), as a deployment starts one
        // process per replica from one build. What the plug keeps across
        // `serve` calls is what its replicas share.
        // A shared store is its own host, reached over the network; otherwise
        // each server host keeps its own store, which outlives its restarts.
        let shared_store = replicas > 1 && plan.deployment.store == crate::scenario::StoreKind::Shared;
        if shared_store {
            sim.host(STORE_HOST, || async {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", crate::store::PORT)).await?.into();
                crate::store::host::serve(listener).await;
                Ok(())
            });
        }
        let apps: Vec<AppHook> = (1..=replicas)
            .map(|n| {
                if replicas == 1 {
                    return AppHook::new(Inbox::new(), AppReporter::new(rec.clone()));
                }
                let app = AppHook::new(Inbox::new(), AppReporter::for_replica(rec.clone(), n));
                if shared_store {
                    app.with_shared_store(Rc::new(crate::store::RespStore::simulated(STORE_HOST, STORE_TIMEOUT)))
                } else {
                    app
                }
            })
            .collect();
        for (host, app) in server_hosts.iter().zip(&apps) {
            let (plug, app) = (plug.clone(), app.clone());
            sim.host(host.as_str(), move || {
                let plug = plug.clone();
                let app = app.clone();
                async move {
                    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", crate::client::PORT)).await?.into();
                    plug.serve(listener, app).await;
                    Ok(())
                }
            });
        }
        let mut apps = apps.into_iter();
        let app = apps.next().expect("at least one server host");
        let replica_apps: Vec<AppHook> = apps.collect();
        let mut clients = BTreeMap::new();
        let mut nats = BTreeMap::new();
        for spec in &plan.clients {
            let nat_name = format!("nat-{}", spec.name);
            let nat_inbox: Inbox<nat::Fault> = Inbox::new();
            {
                let (client, rec, inbox, lifetime) =
                    (spec.name.clone(), rec.clone(), nat_inbox.clone(), plan.network.half_open_lifetime);
                let behind_balancer = replicas > 1;
                let timeouts = (plan.deployment.timeout_server.is_some() || plan.deployment.timeout_tunnel.is_some())
                    .then(|| plan.deployment.balancer_timeouts());
                sim.host(nat_name.as_str(), move || {
                    let nat = if behind_balancer {
                        Nat::with_public_address(
                            SimNet { server: "server".into() },
                            client.clone(),
                            lifetime,
                            rec.clone(),
                            inbox.clone(),
                            seed.stream(&format!("nat.{client}.address")),
                        )
                    } else {
                        Nat::new(
                            SimNet { server: "server".into() },
                            client.clone(),
                            lifetime,
                            rec.clone(),
                            inbox.clone(),
                        )
                    };
                    let nat = match timeouts {
                        Some(t) => nat.with_balancer_timeouts(t),
                        None => nat,
                    };
                    async move { Ok(nat.run().await?) }
                });
            }
            nats.insert(spec.name.clone(), nat_inbox);

            let inbox: Inbox<ClientCmd> = Inbox::new();
            let shared = Rc::new(ClientShared::default());
            {
                let (spec, rec, inbox, shared, dialect) =
                    (spec.clone(), rec.clone(), inbox.clone(), shared.clone(), plan.dialect);
                let dialer: Rc<dyn crate::client::dial::Dialer> =
                    Rc::new(crate::client::dial::SimDialer { host: nat_name.clone(), port: crate::client::PORT });
                let host = spec.name.clone();
                sim.host(host.as_str(), move || {
                    let body = start_client(&spec, dialect, dialer.clone(), &rec, &shared, &inbox);
                    async move {
                        body.await;
                        Ok(())
                    }
                });
            }
            clients.insert(spec.name.clone(), (inbox, shared));
        }
        let mut world = World::assemble(sim, rec, app, clients, nats);
        world.server_hosts = server_hosts;
        world.replica_apps = replica_apps;
        world.homes = deployed.as_ref().map(|b| b.picker().homes());
        world.balancer = deployed;
        world
    }
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

    /// Applies step `index` at its due time `at`: records it, then hands it
    /// to the actor that carries it out (a client, a NAT, the server's
    /// application) or, for a crash or a theft, does it here.
    pub(crate) fn apply(&mut self, step: &Step, index: usize, at: Duration) {
        let rec = self.rec.clone();
        // What the step loop itself records happens at the step's time.
        rec.set_loop_now(at);
        let expect = match &step.action {
            Action::Resume { client, expect: Some(e), .. } => {
                Some(crate::trace::StepExpect { client: client.clone(), resumption: e.word().into() })
            }
            _ => None,
        };
        let call = match &step.action {
            Action::CallTool { label, .. } => Some(label.clone()),
            _ => None,
        };
        rec.record_at(
            SimTime::from_duration(at),
            What::Step { index, action: step.action.kind(), detail: step.action.describe(), expect, call },
        );
        let missed = self.act(step, index, at);
        if let Some(why) = missed {
            rec.record_at(SimTime::from_duration(at), What::StepMissed { index, action: step.action.kind(), why });
        }
    }

    /// Carries out step `index` (see [`World::apply`]); returns why it acted
    /// on nothing, when it did. (A NAT fault is judged by the NAT, which
    /// records its own miss: it alone knows which mappings are open.)
    fn act(&mut self, step: &Step, index: usize, at: Duration) -> Option<String> {
        let rec = self.rec.clone();
        // A step for a client that crashed and has not connected again: no
        // host runs it, so nothing carries it out.
        let down = |w: &Self, client: &str| {
            w.crashed.iter().any(|c| c == client).then(|| format!("{client} has crashed and not connected again"))
        };
        // A client command, unless the client is down.
        let client_cmd = |w: &Self, client: &str, cmd: ClientCmd| match down(w, client) {
            Some(why) => Some(why),
            None => {
                w.clients[client].0.push_at(at, cmd);
                None
            }
        };
        let nat = |w: &Self, client: &str, cmd: NatCmd| {
            w.nats[client].push_at(at, nat::Fault { step: index, cmd });
            None
        };
        match &step.action {
            Action::Connect { client } => {
                if let Some(i) = self.crashed.iter().position(|c| c == client) {
                    self.crashed.remove(i);
                    self.sim.restart(client);
                }
                client_cmd(self, client, ClientCmd::Connect)
            }
            Action::ServerRequest { client, method, label, reissuable } => match self.token_of(client) {
                Some(token) => {
                    self.app_of(&token).commands.push_at(
                        at,
                        AppCommand::ServerRequest {
                            client: client.clone(),
                            token,
                            method: method.clone(),
                            label: label.clone(),
                            reissuable: *reissuable,
                        },
                    );
                    None
                }
                None => Some(format!("cannot issue {label}: {client} holds no session")),
            },
            Action::CallTool { client, method, label } => {
                client_cmd(self, client, ClientCmd::CallTool { label: label.clone(), method: method.clone() })
            }
            Action::EndSession { client } => client_cmd(self, client, ClientCmd::EndSession),
            Action::EnableTool { client, tool } => {
                client_cmd(self, client, ClientCmd::EnableTool { tool: tool.clone() })
            }
            Action::Notify { client, count } => match self.token_of(client) {
                Some(token) => {
                    self.app_of(&token)
                        .commands
                        .push_at(at, AppCommand::Notify { client: client.clone(), token, count: *count });
                    None
                }
                None => Some(format!("cannot notify: {client} holds no session")),
            },
            Action::Answer { client, label } => match rec.ids_for_label(label) {
                ids if ids.is_empty() => Some(format!("no request {label} was issued: nothing to answer")),
                ids => client_cmd(self, client, ClientCmd::Answer(ids)),
            },
            Action::Rebind { client } => nat(self, client, NatCmd::Rebind),
            Action::Sever { client } => nat(self, client, NatCmd::Sever),
            Action::Reset { client } => nat(self, client, NatCmd::Reset),
            Action::Resume { client, last_event_id, .. } => match self.resume_from(client, last_event_id) {
                Some(from) => client_cmd(self, client, ClientCmd::Resume(from)),
                None => Some(format!("cannot resume: no id to resume from ({})", step.action.describe())),
            },
            Action::StealToken { from, to, credential } => {
                let token = self.token_of(from);
                rec.record_at(
                    SimTime::from_duration(at),
                    What::TokenStolen { from: from.clone(), to: to.clone(), credential: *credential },
                );
                match token {
                    Some(token) => {
                        let cred = credential.then(|| self.clients[from].1.credential.borrow().clone());
                        client_cmd(self, to, ClientCmd::Adopt { token, credential: cred })
                    }
                    None => Some(format!("{from} holds no session token: nothing to steal")),
                }
            }
            Action::CrashClient { client } => match down(self, client) {
                Some(why) => Some(why),
                None => {
                    self.sim.crash(client);
                    self.crashed.push(client.clone());
                    // Crashes fire between ticks (`Schedule::due`): `at` is now.
                    rec.record_at(SimTime::from_duration(at), What::ClientCrashed { client: client.clone() });
                    None
                }
            },
            Action::Wait => None,
            Action::Call { client, tool, label, decline } => client_cmd(
                self,
                client,
                ClientCmd::Call { label: label.clone(), tool: tool.clone(), decline: *decline },
            ),
            Action::StealRequestState { from, to, label, credential } => {
                let held = self.clients[from].1.states.borrow().get(label).cloned();
                match held {
                    Some(held) => {
                        let cred = credential.then(|| self.clients[from].1.credential.borrow().clone());
                        let how = StateHow::Stolen { from: from.clone() };
                        let (call, tool) = (label.clone(), held.tool.clone());
                        client_cmd(self, to, ClientCmd::Present { call, tool, held, how, credential: cred })
                    }
                    None => Some(format!("cannot steal: {from} holds no requestState for {label}")),
                }
            }
            Action::TamperRequestState { client, label, how } => {
                let held = self.clients[client].1.states.borrow().get(label).cloned();
                match held {
                    Some(mut held) => {
                        let (call, tool, how) = match how {
                            Tamper::Flip => {
                                held.state = crate::wire::mrtr::flip(&held.state);
                                (label.clone(), held.tool.clone(), StateHow::Flipped)
                            }
                            Tamper::Truncate => {
                                held.state = crate::wire::mrtr::truncate(&held.state);
                                (label.clone(), held.tool.clone(), StateHow::Truncated)
                            }
                            Tamper::Move { onto, tool } => {
                                (onto.clone(), tool.clone(), StateHow::Moved { from_call: label.clone() })
                            }
                        };
                        client_cmd(self, client, ClientCmd::Present { call, tool, held, how, credential: None })
                    }
                    None => Some(format!("cannot tamper: {client} holds no requestState for {label}")),
                }
            }
            Action::SeverCall { client, label } | Action::ResetCall { client, label } => {
                let port = self.clients[client].1.open_calls.borrow().get(label).copied();
                match port {
                    Some(port) => {
                        let cmd = if matches!(step.action, Action::SeverCall { .. }) {
                            NatCmd::SeverPort(port)
                        } else {
                            NatCmd::ResetPort(port)
                        };
                        nat(self, client, cmd)
                    }
                    None => Some(format!("no request of {client}'s call {label} is in flight")),
                }
            }
            Action::Listen { client } => client_cmd(self, client, ClientCmd::Listen),
            Action::ChangeTools => {
                for app in std::iter::once(&self.app).chain(&self.replica_apps) {
                    app.commands.push_at(at, AppCommand::ToolsChanged);
                }
                None
            }
            Action::RestartServer => {
                // With replicas, the deployment restarts: every replica's process.
                let restarted = if self.server_hosts == ["server"] {
                    self.sim.restart_server()
                } else {
                    self.server_hosts.clone().iter().try_for_each(|h| self.sim.restart_host(h))
                };
                restarted.err().map(|why| format!("cannot restart the server: {why}"))
            }
            Action::RestartReplica { replica } => {
                let host = balancer::replica_host(*replica);
                match self.sim.restart_host(&host) {
                    Ok(()) => {
                        self.down_hosts.remove(&host);
                        if let Some(b) = &self.balancer {
                            b.picker().restarted(*replica);
                        }
                        None
                    }
                    Err(why) => Some(format!("cannot restart replica {replica}: {why}")),
                }
            }
            Action::CrashReplica { replica } => {
                let host = balancer::replica_host(*replica);
                if self.down_hosts.contains(&host) {
                    return Some(format!("replica {replica} is already down"));
                }
                match self.sim.crash_host(&host) {
                    Ok(()) => {
                        self.down_hosts.insert(host);
                        if let Some(b) = &self.balancer {
                            b.picker().crashed(*replica, at + balancer::HEALTH_CHECK);
                        }
                        rec.record_at(
                            SimTime::from_duration(at),
                            What::ReplicaCrashed {
                                replica: *replica,
                                out_after_us: balancer::HEALTH_CHECK.as_micros() as u64,
                            },
                        );
                        None
                    }
                    Err(why) => Some(format!("cannot crash replica {replica}: {why}")),
                }
            }
            Action::Drain { replica } => {
                let drained = match &self.balancer {
                    Some(b) => {
                        b.picker().drain(*replica);
                        Ok(())
                    }
                    None => self.sim.drain_host(&balancer::replica_host(*replica)),
                };
                match drained {
                    Ok(()) => {
                        rec.record_at(SimTime::from_duration(at), What::ReplicaDrained { replica: *replica });
                        None
                    }
                    Err(why) => Some(format!("cannot drain replica {replica}: {why}")),
                }
            }
            Action::Partition { replica, lasts } => {
                let host = balancer::replica_host(*replica);
                match self.sim.store_link(&host, true) {
                    Ok(()) => {
                        rec.record_at(SimTime::from_duration(at), What::StorePartitioned { replica: *replica });
                        self.cut.insert(*replica);
                        self.heals.extend(lasts.map(|l| (at + l, *replica)));
                        None
                    }
                    Err(why) => Some(why),
                }
            }
            Action::ReplayRequestState { client, label } => {
                let held = self.clients[client].1.states.borrow().get(label).cloned();
                match held {
                    Some(held) => {
                        let (call, tool) = (label.clone(), held.tool.clone());
                        client_cmd(
                            self,
                            client,
                            ClientCmd::Present { call, tool, held, how: StateHow::Replayed, credential: None },
                        )
                    }
                    None => Some(format!("cannot present again: {client} holds no requestState for {label}")),
                }
            }
        }
    }

    /// Heals the partitions from the store that are due by `now` (a tick
    /// boundary), recording each.
    pub(crate) fn heal_due(&mut self, now: Duration) {
        // Every tick of every run passes here: nothing to do is the usual case.
        if !self.heals.iter().any(|(t, _)| *t <= now) {
            return;
        }
        let (due, later): (Vec<_>, Vec<_>) = self.heals.drain(..).partition(|(t, _)| *t <= now);
        self.heals = later;
        for (_, replica) in due {
            if self.sim.store_link(&balancer::replica_host(replica), false).is_ok() {
                self.cut.remove(&replica);
                self.rec.record_at(SimTime::from_duration(now), What::StoreHealed { replica });
            }
        }
    }

    /// What `client` resumes from: `None` when the id it names does not exist
    /// (yet) in the run.
    fn resume_from(&self, client: &str, last_event_id: &LastEventId) -> Option<ResumeFrom> {
        match last_event_id {
            LastEventId::LastSeen => Some(ResumeFrom::LastSeen),
            LastEventId::None => Some(ResumeFrom::Nothing),
            LastEventId::Id(n) => Some(ResumeFrom::Id(n.to_string())),
            LastEventId::Raw(s) => Some(ResumeFrom::Id(s.clone())),
            LastEventId::LastSeenPlus(k) => Some(ResumeFrom::LastSeenPlus(*k)),
            // An id of the session the resuming client now holds (a thief: the victim's).
            LastEventId::Seen { client: by, nth, stream } => {
                let purpose = match stream {
                    SeenOn::Uplink => crate::trace::Purpose::Uplink,
                    SeenOn::Call => crate::trace::Purpose::Call,
                };
                self.token_of(client).and_then(|t| self.rec.nth_message_id(by, *nth, &t, purpose)).map(ResumeFrom::Id)
            }
            LastEventId::SeenBefore(label) => {
                self.token_of(client).and_then(|t| self.rec.id_seen_before(client, label, &t)).map(ResumeFrom::Id)
            }
        }
    }
}

/// Which steps fire when: `at` steps at their time, triggered steps after
/// their event (once every earlier step has fired); a crash at the first tick
/// boundary at or after that time.
pub(crate) struct Schedule {
    /// When each step fired, and how long the trace was then.
    fired: Vec<Option<(Duration, usize)>>,
    /// When each fired step was meant to run (its `at`, or its trigger's
    /// time plus its delay): live runs measure lateness against it.
    intended: Vec<Option<Duration>>,
}

impl Schedule {
    pub(crate) fn new(n: usize) -> Self {
        Self { fired: vec![None; n], intended: vec![None; n] }
    }

    /// Whether every step has fired.
    pub(crate) fn all_fired(&self) -> bool {
        self.fired.iter().all(Option::is_some)
    }

    /// When fired step `i` was meant to run.
    pub(crate) fn intended(&self, i: usize) -> Option<Duration> {
        self.intended.get(i).copied().flatten()
    }

    /// The steps to hand over before the coming tick ends, with their due times, in order.
    pub(crate) fn due(&mut self, plan: &Plan, rec: &Recorder, now: Duration, tick: Duration) -> Vec<(usize, Duration)> {
        let mut out = Vec::new();
        // Clients whose crash waits for a later tick: their later steps wait too.
        let mut crashing: Vec<&str> = Vec::new();
        for i in 0..plan.steps.len() {
            if self.fired[i].is_some() {
                continue;
            }
            let step = &plan.steps[i];
            if step.action.clients().iter().any(|c| crashing.contains(c)) {
                continue;
            }
            // When the step should run; it runs then, or now if that is past.
            let intended = match &step.after {
                None => Some(step.at),
                Some(after) => {
                    // Armed once every earlier step fired; look at events since the last of them.
                    let Some(since) = self.fired[..i].iter().try_fold(0usize, |m, f| f.map(|(_, len)| m.max(len)))
                    else {
                        continue;
                    };
                    self.trigger_time(plan, rec, &after.trigger, since).map(|t| t + after.delay)
                }
            };
            // (A step held back behind a crash fires now, not in the past.)
            let due = intended.filter(|at| *at < now + tick).map(|at| at.max(now));
            // Actors wait for a due time inside the tick on their own clocks,
            // but a crash is done by the step loop, between ticks: it fires at
            // the first tick boundary at or after its time, and says so.
            let due = match (due, &step.action) {
                (Some(due), Action::CrashClient { client }) if due > now => {
                    crashing.push(client);
                    None
                }
                (Some(_), Action::CrashClient { .. }) => Some(now),
                // A server restart too is done by the step loop, between ticks.
                (Some(due), a) if due > now && a.by_step_loop() => None,
                (Some(_), a) if a.by_step_loop() => Some(now),
                (due, _) => due,
            };
            if let Some(due) = due {
                self.fired[i] = Some((due, rec.len()));
                self.intended[i] = intended;
                out.push((i, due));
            }
        }
        out
    }

    /// When the trigger's event happened (first match at or after trace index `since`).
    fn trigger_time(&self, plan: &Plan, rec: &Recorder, trigger: &Trigger, since: usize) -> Option<Duration> {
        let t = match trigger {
            Trigger::Step { step } => {
                let j = plan.steps.iter().position(|s| s.id.as_deref() == Some(step))?;
                return self.fired[j].map(|(t, _)| t);
            }
            Trigger::Delivered { label, client } => {
                let ids = rec.ids_for_label(label);
                rec.find_from(since, |w| match w {
                    What::SseEvent { client: c, rpc: Some(r), .. } => {
                        client.as_ref().is_none_or(|x| x == c)
                            && r.kind == crate::wire::jsonrpc::RpcKind::Request
                            && r.id.as_ref().is_some_and(|id| ids.contains(id))
                    }
                    _ => false,
                })
            }
            Trigger::Answered { label } => rec.find_from(since, |w| {
                matches!(w, What::RequestOutcome { label: l, outcome: crate::trace::Outcome::Answered, .. } if l == label)
            }),
            Trigger::Accepted { client } => rec.find_from(since, |w| {
                matches!(w, What::HttpResponse { client: c, status: 200, content_type: Some(ct), .. }
                    if c == client && ct.starts_with("text/event-stream"))
            }),
        };
        t.map(SimTime::as_duration)
    }
}
