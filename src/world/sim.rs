//! The simulation: a turmoil world built from a plan, and the step loop that
//! drives it tick by tick.

use super::topology::Servers;
use super::{nat, panics, record_header, start_client, ServerTraits, World, EARLY_END, EPOCH_SECS, MIN_LATENCY};
use crate::client::ClientShared;
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::{ClientSpec, Plan};
use crate::seed::Seed;
use crate::server::ServerPlug;
use crate::trace::{Recorder, Run, SimTime, What};
use nat::{Nat, SimNet};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

/// Runs a plan against any server plug-in.
pub fn run_with(plan: &Plan, plug: Rc<dyn ServerPlug>, seed: Seed) -> Result<Run> {
    if !cfg!(tokio_unstable) {
        return Err(Error::usage(super::NEEDS_TOKIO_UNSTABLE));
    }
    plan.validate().map_err(|p| match p.step {
        Some(i) => Error::usage(format!("plan {:?}: step {i} {}", plan.name, p.message)),
        None => Error::usage(format!("plan {:?}: {}", plan.name, p.message)),
    })?;
    let registry = crate::quiet::begin();
    let mut world = World::build(plan, plug.clone(), seed);
    let aborted = world.drive(plan, &plug, seed)?;
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

impl<'a> World<turmoil::Sim<'a>> {
    /// The simulation's step loop: hands each step over when it is due and
    /// steps turmoil, until the plan's end (or earlier, once nothing left
    /// can change the trace). Returns why the run was cut short, if it was.
    fn drive(&mut self, plan: &Plan, plug: &Rc<dyn ServerPlug>, seed: Seed) -> Result<Option<String>> {
        // Whether the run may end once nothing can change its trace (crate::quiet):
        // a server whose timers all go through mcpsim's clock.
        let may_end_early = EARLY_END.with(Cell::get) && plug.quiet_timers();
        // How long a keep-alive takes from the server's timer to the client's
        // reader: two hops (server to NAT, NAT to client; three behind a
        // balancer), each up to a latency and the wait for the next tick
        // boundary, and a tick to spare.
        let hops = if self.balancer.is_some() { 3 } else { 2 };
        let way = (plan.network.latency_max + plan.network.tick) * hops + plan.network.tick;
        // Each host that runs the server: whether its serve() stopped yet.
        let mut server_stopped: Vec<(String, bool)> = self.server_hosts.iter().map(|h| (h.clone(), false)).collect();
        panics::install();
        let tick = plan.network.tick;
        let deadline = crate::watchdog::deadline();
        let mut steps: u32 = 0;
        while self.sim.elapsed() < plan.duration {
            let now = self.sim.elapsed();
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
                return Ok(Some(self.cut_short(why)));
            }
            self.rec.set_loop_now(now);
            // Hand over every step due before the end of the coming tick;
            // actors wait for the exact due time themselves.
            let handed = self.due(plan, now, tick);
            let handed_any = !handed.is_empty();
            for (index, at) in handed {
                self.apply(&plan.steps[index], index, at);
            }
            self.rec.set_loop_now(now);
            self.note_stopped_servers(&mut server_stopped, plug);
            // Every step handed over earlier, nothing left to record here, and
            // nothing in the world that can still change the trace: the run is over.
            if may_end_early
                && !handed_any
                && self.all_fired()
                && self.heals.is_empty()
                && self.still(plan.duration, way)
            {
                break;
            }
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sim.step())) {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    return Err(Error::io(format!("simulation failed at {:?} (seed {seed}): {e}", self.sim.elapsed())))
                }
                Err(_) => {
                    // A host's code panicked (tokio_unstable makes turmoil re-raise it here).
                    // The simulation cannot go on; keep everything recorded so far.
                    let why = format!(
                        "a host panicked at {} with server {:?}: {}",
                        SimTime::from_duration(self.sim.elapsed()),
                        plug.name(),
                        panics::last().unwrap_or_else(|| "unknown panic".into())
                    );
                    return Ok(Some(self.cut_short(why)));
                }
            }
        }
        Ok(None)
    }

    /// Records that the run stops here, and why.
    fn cut_short(&self, why: String) -> String {
        self.rec.record(What::ServerStopped { why: why.clone() });
        self.rec.record(What::RunCut { why: why.clone() });
        why
    }

    /// Records each server host whose serve() stopped (returned or panicked)
    /// other than by a step: a misbehaving plug-in must not take the harness
    /// down, and the clients observe a dead server until the end.
    fn note_stopped_servers(&mut self, server_stopped: &mut [(String, bool)], plug: &Rc<dyn ServerPlug>) {
        for (host, stopped) in server_stopped.iter_mut() {
            if !*stopped && !self.down_hosts.contains(host) && !self.sim.is_host_running(host.as_str()) {
                *stopped = true;
                let on = if host == "server" { String::new() } else { format!(" on {host}") };
                self.rec.record(What::ServerStopped {
                    why: format!("server {:?} stopped{on}: its serve() returned or panicked", plug.name()),
                });
            }
        }
    }

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

    /// The turmoil simulation of `plan`: the server's hosts running `plug`
    /// ([`Servers`]), and per client its NAT host and its client host.
    /// Records the run's header.
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
        let servers = Servers::start(&mut sim, plan, &plug, &rec);
        let mut clients = BTreeMap::new();
        let mut nats = BTreeMap::new();
        for spec in &plan.clients {
            nats.insert(spec.name.clone(), add_nat(&mut sim, plan, spec, &rec, seed));
            clients.insert(spec.name.clone(), add_client(&mut sim, plan, spec, &rec));
        }
        let mut apps = servers.apps.into_iter();
        let app = apps.next().expect("at least one server host");
        let mut world = World::assemble(sim, plan, rec, app, clients, nats);
        world.server_hosts = servers.hosts;
        world.replica_apps = apps.collect();
        world.homes = servers.balancer.as_ref().map(|b| b.picker().homes());
        world.balancer = servers.balancer;
        world
    }
}

/// Adds the NAT host of client `spec` (`nat-<name>`); returns its fault inbox.
fn add_nat(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    spec: &ClientSpec,
    rec: &Recorder,
    seed: Seed,
) -> Inbox<nat::Fault> {
    let nat_inbox: Inbox<nat::Fault> = Inbox::new();
    let (client, rec, inbox, lifetime) =
        (spec.name.clone(), rec.clone(), nat_inbox.clone(), plan.network.half_open_lifetime);
    let behind_balancer = plan.deployment.replicas.max(1) > 1;
    let timeouts = (plan.deployment.timeout_server.is_some() || plan.deployment.timeout_tunnel.is_some())
        .then(|| plan.deployment.balancer_timeouts());
    sim.host(format!("nat-{}", spec.name).as_str(), move || {
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
            Nat::new(SimNet { server: "server".into() }, client.clone(), lifetime, rec.clone(), inbox.clone())
        };
        let nat = match timeouts {
            Some(t) => nat.with_balancer_timeouts(t),
            None => nat,
        };
        async move { Ok(nat.run().await?) }
    });
    nat_inbox
}

/// Adds the host of client `spec`, dialing through its NAT; returns its
/// command inbox and what it shares with the step loop.
fn add_client(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    spec: &ClientSpec,
    rec: &Recorder,
) -> (Inbox<crate::client::ClientCmd>, Rc<ClientShared>) {
    let inbox = Inbox::new();
    let shared = Rc::new(ClientShared::default());
    let (spec, rec, inbox2, shared2, dialect) =
        (spec.clone(), rec.clone(), inbox.clone(), shared.clone(), plan.dialect);
    let dialer: Rc<dyn crate::client::dial::Dialer> =
        Rc::new(crate::client::dial::SimDialer { host: format!("nat-{}", spec.name), port: crate::client::PORT });
    let host = spec.name.clone();
    sim.host(host.as_str(), move || {
        let body = start_client(&spec, dialect, dialer.clone(), &rec, &shared2, &inbox2);
        async move {
            body.await;
            Ok(())
        }
    });
    (inbox, shared)
}
