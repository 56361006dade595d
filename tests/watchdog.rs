//! The wall-clock watchdog (`mcpsim::watchdog`): a server that hangs its
//! simulated host stops the run, not the harness. Bounds here are 1 s.

use mcpsim::hunt::{HuntOptions, Limit, PlugFactory};
use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::server::{AppHook, ServerPlug};
use mcpsim::watchdog::{self, Stopped};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a [`Hanging`] server hangs its host once a client connects.
#[derive(Clone, Copy)]
enum Hang {
    /// Blocks the host's thread inside a poll: no simulation step returns.
    Blocks,
    /// Burns 5 ms of wall-clock time per simulated millisecond: the
    /// simulation crawls (a minute of scenario would take five).
    Crawls,
}

struct Hanging(Hang);

impl ServerPlug for Hanging {
    fn name(&self) -> &str {
        "hanging"
    }
    fn serve(&self, listener: mcpsim::net::Listener, _app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        let hang = self.0;
        Box::pin(async move {
            let _conn = listener.accept().await;
            loop {
                match hang {
                    Hang::Blocks => std::thread::sleep(Duration::from_secs(3600)),
                    Hang::Crawls => std::thread::sleep(Duration::from_millis(5)),
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    }
}

fn plan() -> Plan {
    Plan::from_toml_str(
        "[scenario]\nname = \"w\"\nduration = \"60s\"\n[[client]]\nname = \"alice\"\n[[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n",
        "w.toml",
    )
    .unwrap()
}

const BOUND: Duration = Duration::from_secs(1);

#[test]
fn a_host_that_blocks_is_abandoned_after_the_bound_and_its_grace() {
    let started = Instant::now();
    let result = watchdog::guard(BOUND, || mcpsim::run_with(&plan(), Rc::new(Hanging(Hang::Blocks)), Seed(1)));
    assert_eq!(result.err(), Some(Stopped::Overrun { bound: BOUND }));
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

#[test]
fn a_host_that_crawls_is_stopped_by_the_step_loop_and_keeps_its_trace() {
    let started = Instant::now();
    let run = watchdog::guard(BOUND, || mcpsim::run_with(&plan(), Rc::new(Hanging(Hang::Crawls)), Seed(1)))
        .expect("the step loop stops it itself")
        .expect("the run completes");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let why = run.aborted.as_deref().expect("the run says it was stopped");
    assert!(why.contains("the watchdog stopped the run"), "{why}");
    // What happened before is kept: alice connected.
    assert!(run
        .trace
        .iter()
        .any(|e| matches!(&e.what, mcpsim::trace::What::Connect { client, .. } if client == "alice")));
}

#[test]
fn a_hunt_counts_stopped_seeds_as_harness_failures_and_goes_on() {
    // Seed 0 blocks its host, seed 1 crawls, seed 2 is guarded as it is.
    let factory = PlugFactory(Arc::new(|plan: &Plan, seed: Seed| -> Rc<dyn ServerPlug> {
        match seed.0 {
            0 => Rc::new(Hanging(Hang::Blocks)),
            1 => Rc::new(Hanging(Hang::Crawls)),
            _ => mcpsim::server::for_plan("guarded", plan, seed).unwrap(),
        }
    }));
    let mut opts = HuntOptions::new("guarded", Limit::Seeds(3));
    opts.watchdog = BOUND;
    opts.plug = Some(factory);
    let mut heard = Vec::new();
    let report = mcpsim::hunt::hunt(&opts, |p| {
        if let mcpsim::hunt::Progress::HarnessFailure(h) = p {
            heard.push(h.seed);
        }
    })
    .unwrap();
    assert_eq!(report.seeds_run, 3);
    assert!(report.bugs.is_empty(), "{:?}", report.bugs);
    let failed: Vec<u64> = report.harness_failures.iter().map(|h| h.seed).collect();
    assert_eq!(failed, [0, 1]);
    heard.sort();
    assert_eq!(heard, [0, 1], "each is reported as it happens");
    assert!(report.harness_failures[0].why.contains("blocked inside its code"), "{}", report.harness_failures[0].why);
    assert!(
        report.harness_failures[1].why.contains("the watchdog stopped the run"),
        "{}",
        report.harness_failures[1].why
    );
    assert!(report.harness_failures.iter().all(|h| h.repro.contains(&format!("--seed {}", h.seed))));
}
