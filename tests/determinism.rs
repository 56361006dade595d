//! Same scenario + same seed ⇒ byte-identical trace (docs/design.md §3).

use mcpsim::scenario::{Dialect, Plan};
use mcpsim::seed::Seed;
use std::path::Path;
use std::time::Duration;

mod common;

fn bundled() -> Vec<Plan> {
    let paths = common::bundled_scenarios();
    assert!(paths.len() >= 2);
    paths.iter().map(|p| Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(p)).unwrap()).collect()
}

#[test]
fn every_bundled_scenario_gives_byte_identical_traces() {
    for plan in bundled() {
        for server in mcpsim::server::known_servers() {
            if !mcpsim::server::speaks(server, plan.dialect) {
                continue;
            }
            let a = mcpsim::run(&plan, server, None).unwrap().trace.to_jsonl();
            let b = mcpsim::run(&plan, server, None).unwrap().trace.to_jsonl();
            assert!(!a.is_empty());
            assert!(a == b, "{} on {server}: traces differ", plan.name);
            // A hunt compares traces by this hash, computed without the text.
            let run = mcpsim::run(&plan, server, None).unwrap();
            assert_eq!(run.trace.jsonl_hash(), mcpsim::hunt::fnv1a(a.as_bytes()), "{} on {server}", plan.name);
        }
    }
}

#[test]
fn the_seed_reaches_the_trace() {
    // A different seed mints different session tokens: the seed is really used.
    let plan = &bundled()[0];
    let a = mcpsim::run(plan, "guarded", Some(Seed(1))).unwrap().trace.to_jsonl();
    let b = mcpsim::run(plan, "guarded", Some(Seed(2))).unwrap().trace.to_jsonl();
    assert_ne!(a, b);
}

/// The trace's invariant (`trace` module docs): `seq` is the index, and time
/// never runs backwards, so `seq` order is time order.
fn assert_time_ordered(trace: &mcpsim::trace::Trace, what: &str) {
    let mut prev = mcpsim::trace::SimTime(0);
    for (i, e) in trace.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64, "{what}: seq {} at index {i}", e.seq);
        assert!(e.t_us >= prev, "{what}: seq {i} at {} comes after {prev}: time ran backwards", e.t_us);
        prev = e.t_us;
    }
}

#[test]
fn trace_time_never_runs_backwards_in_bundled_scenarios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/regressions");
    let mut plans = bundled();
    plans.extend(std::fs::read_dir(root).unwrap().map(|e| Plan::load(&e.unwrap().path()).unwrap()));
    for plan in plans {
        for server in ["naive", "guarded", "rmcp"] {
            if !mcpsim::server::speaks(server, plan.dialect) {
                continue;
            }
            let run = mcpsim::run(&plan, server, None).unwrap();
            assert_time_ordered(&run.trace, &format!("{} on {server}", plan.name));
        }
    }
}

#[test]
fn trace_time_never_runs_backwards_in_hunt_seeds() {
    // 902708379 on naive once recorded a step at 7.292 s before a delivery at
    // 7.200 s (200 ms tick); then 500 seeds, both dialects.
    let seeds = [902708379].into_iter().chain(0..500u64);
    for (i, seed) in seeds.enumerate() {
        let dialect = if i % 2 == 0 { Dialect::LegacySse } else { Dialect::StreamableHttp };
        let server = ["naive", "guarded"][i / 2 % 2];
        let plan = mcpsim::hunt::generate_in(seed, dialect);
        let run = mcpsim::run(&plan, server, None).unwrap();
        assert_time_ordered(&run.trace, &format!("hunt seed {seed} ({dialect:?}) on {server}"));
    }
}

#[test]
#[allow(clippy::assertions_on_constants)] // the constant is the build configuration under test
fn the_test_build_has_tokio_unstable_and_the_refusal_names_the_fix() {
    // Without the flag `run_with` returns this error instead of a trace that
    // may differ between runs (see `world::NEEDS_TOKIO_UNSTABLE`). That
    // refusal itself needs a build without the flag, so it is not run here:
    // this pins the configuration and the words of the fix.
    assert!(cfg!(tokio_unstable), "{}", mcpsim::NEEDS_TOKIO_UNSTABLE);
    assert!(mcpsim::NEEDS_TOKIO_UNSTABLE.contains("RUSTFLAGS=\"--cfg tokio_unstable\""));
}

/// Runs `plan` on `server` with and without the early end (`src/quiet.rs`):
/// the traces must be byte-identical. Returns whether the run ended early.
fn ends_early_with_the_same_trace(plan: &Plan, server: &str, what: &str) -> bool {
    let early = mcpsim::run(plan, server, None).unwrap();
    let whole = mcpsim::without_early_end(|| mcpsim::run(plan, server, None).unwrap());
    assert_eq!(whole.simulated, plan.duration, "{what}: without the early end the run goes to its end");
    assert!(
        early.trace.to_jsonl() == whole.trace.to_jsonl(),
        "{what}: the run that ended early at {:?} has another trace than the whole run",
        early.simulated
    );
    early.simulated < plan.duration
}

#[test]
fn an_early_end_keeps_every_bundled_scenarios_trace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = common::bundled_scenarios();
    paths.extend(common::stateless_scenarios());
    paths.extend(common::toml_files_under("scenarios/regressions"));
    let (mut runs, mut early) = (0, 0);
    for p in paths {
        let plan = Plan::load(&root.join(&p)).unwrap();
        for server in mcpsim::server::known_servers() {
            if !mcpsim::server::speaks(server, plan.dialect) {
                continue;
            }
            runs += 1;
            early += ends_early_with_the_same_trace(&plan, server, &format!("{} on {server}", p.display())) as usize;
        }
    }
    // The early end is not a dead branch: most bundled runs end early.
    assert!(early * 2 > runs, "only {early} of {runs} bundled runs ended early");
}

#[test]
fn an_early_end_waits_for_what_can_still_happen() {
    let plan = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/nat-rebind.toml")).unwrap();
    // guarded answers req-43 at 26 s; the NAT resets the half-open mapping at 102 s.
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let last = run.trace.events.last().unwrap().t_us.as_duration();
    assert!(run.simulated < Duration::from_secs(110) && run.simulated > last, "{:?}", run.simulated);
    // naive leaves req-43 in a dead stream: its timeout (325 s) is still to come until then.
    let run = mcpsim::run(&plan, "naive", None).unwrap();
    assert!(run.simulated > Duration::from_secs(325), "{:?}", run.simulated);
    // rmcp keeps timers of its own that mcpsim cannot see: never ended early.
    let plan = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/streamable-http/nat-rebind.toml"));
    let plan = plan.unwrap();
    assert_eq!(mcpsim::run(&plan, "rmcp", None).unwrap().simulated, plan.duration);
}

#[test]
fn an_early_end_keeps_hunt_seeds_traces() {
    for (i, seed) in (0..240u64).enumerate() {
        let dialect = [Dialect::LegacySse, Dialect::StreamableHttp, Dialect::StatelessHttp][i % 3];
        let server = ["naive", "guarded"][i / 3 % 2];
        let plan = mcpsim::hunt::generate_in(seed, dialect);
        ends_early_with_the_same_trace(&plan, server, &format!("hunt seed {seed} ({dialect:?}) on {server}"));
    }
    // Behind a balancer: a replica's keep-alive reaches its client through the balancer's connection.
    let mut early = 0;
    for seed in 0..60u64 {
        let plan = mcpsim::hunt::generate_for(seed, Dialect::StatelessHttp, 2).unwrap();
        let what = format!("replica hunt seed {seed} (StatelessHttp, 2 replicas) on guarded");
        early += ends_early_with_the_same_trace(&plan, "guarded", &what) as usize;
    }
    assert!(early > 30, "only {early} of 60 replica seeds ended early");
}

#[test]
fn an_early_end_keeps_stateful_replica_seeds_traces() {
    // Sessions in the shared store: each replica polls it every 250 ms. A
    // poll that finds nothing to do (its traffic on its way included) does
    // not keep the run going; one that would fence, drain or write does.
    let servers = ["naive", "guarded", "local-fence"];
    let mut early = 0;
    // Seed 101 in streamable-http on naive: a balancer's connect to a replica
    // completed (through turmoil's in-process handshake) after a still tick
    // boundary; the run had ended with the request unsent.
    let seeds = std::iter::once((101, Dialect::StreamableHttp, "naive")).chain((0..60u64).map(|seed| {
        let dialect = [Dialect::LegacySse, Dialect::StreamableHttp][seed as usize % 2];
        (seed, dialect, servers[seed as usize / 2 % 3])
    }));
    for (seed, dialect, server) in seeds {
        let plan = mcpsim::hunt::generate_for(seed, dialect, 2).unwrap();
        let what = format!("replica hunt seed {seed} ({dialect:?}, 2 replicas) on {server}");
        early += ends_early_with_the_same_trace(&plan, server, &what) as usize;
    }
    assert!(early > 45, "only {early} of 61 stateful replica seeds ended early");
}

/// A server plug that stalls its host's thread on the wall clock now and
/// then (as a loaded machine, or a slow server, would), and records how far
/// the host's tokio clock moved during the stalls.
struct Stalling {
    inner: std::rc::Rc<dyn mcpsim::server::ServerPlug>,
    drift: std::rc::Rc<std::cell::Cell<Duration>>,
    stalls: std::rc::Rc<std::cell::Cell<u32>>,
}

impl mcpsim::server::ServerPlug for Stalling {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn serve(
        &self,
        listener: mcpsim::net::Listener,
        app: mcpsim::server::AppHook,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        let (drift, stalls) = (self.drift.clone(), self.stalls.clone());
        tokio::task::spawn_local(async move {
            loop {
                // Not mcpsim's clock: this timer stays out of the early end's account.
                tokio::time::sleep(Duration::from_millis(700)).await;
                let before = tokio::time::Instant::now();
                std::thread::sleep(Duration::from_millis(3));
                drift.set(drift.get().max(tokio::time::Instant::now() - before));
                stalls.set(stalls.get() + 1);
            }
        });
        self.inner.serve(listener, app)
    }
    fn quiet_timers(&self) -> bool {
        self.inner.quiet_timers()
    }
    fn unreported_per_stream(&self) -> u32 {
        self.inner.unreported_per_stream()
    }
    fn resume_bounds(&self) -> Option<mcpsim::server::plug::ResumeBounds> {
        self.inner.resume_bounds()
    }
}

/// docs/design.md §3: the wall clock reaches no trace. The servers read
/// `tokio::time::Instant::now()` (rmcp's SSE keep-alive, hyper's timer in
/// `clock::HyperTimer`) and the step loop reads the wall clock for the
/// watchdog; inside a turmoil host tokio's clock is the simulated one. A
/// server whose host loses wall-clock time in stalls gives the very trace
/// of one that does not, and its tokio clock never moves during a stall.
#[test]
fn wall_clock_stalls_in_the_server_change_no_trace() {
    let cases = [
        ("scenarios/nat-rebind.toml", "guarded"),
        ("scenarios/streamable-http/nat-rebind.toml", "guarded"),
        ("scenarios/streamable-http/nat-rebind.toml", "rmcp"),
        ("scenarios/stateless-http/nat-rebind.toml", "guarded"),
        ("scenarios/stateless-http/nat-rebind.toml", "rmcp"),
    ];
    for (rel, server) in cases {
        let plan = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
        let quiet = mcpsim::run(&plan, server, None).unwrap().trace.to_jsonl();
        let inner = mcpsim::server::for_plan(server, &plan, plan.seed).unwrap();
        let (drift, stalls) = (std::rc::Rc::default(), std::rc::Rc::default());
        let plug = std::rc::Rc::new(Stalling {
            inner,
            drift: std::rc::Rc::clone(&drift),
            stalls: std::rc::Rc::clone(&stalls),
        });
        let stalled = mcpsim::run_with(&plan, plug, plan.seed).unwrap().trace.to_jsonl();
        let stalls: &std::cell::Cell<u32> = &stalls;
        let drift: &std::cell::Cell<Duration> = &drift;
        assert!(stalls.get() > 50, "{rel} on {server}: only {} stalls", stalls.get());
        assert!(quiet == stalled, "{rel} on {server}: a wall-clock stall changed the trace");
        assert_eq!(drift.get(), Duration::ZERO, "{rel} on {server}: the host's tokio clock moved with the wall");
    }
}
