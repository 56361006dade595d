//! Simulation speed: virtual time per wall time for the canonical scenarios.
//!
//! `cargo bench --bench sim` prints, per scenario and server, the median wall
//! time of a whole run and the ratio of simulated to wall time, at the
//! default tick and at a 1 ms tick for comparison. Not a test: it asserts
//! nothing and is not run by CI.

use mcpsim::scenario::Plan;
use std::path::Path;
use std::time::{Duration, Instant};

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn measure(plan: &Plan, server: &str, reps: usize) -> Duration {
    let _warm = mcpsim::run(plan, server, None).expect("run");
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let run = mcpsim::run(plan, server, None).expect("run");
                std::hint::black_box(run.trace.events.len());
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    // `cargo bench` passes `--bench`; accept and ignore harness flags.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    println!("{:<22} {:<8} {:>6} {:>8} {:>11} {:>12}", "scenario", "server", "tick", "virtual", "wall", "virtual/wall");
    for name in ["nat-rebind", "second-client-leak"] {
        let base = Plan::load(&dir.join(format!("{name}.toml"))).expect("bundled scenario");
        for tick_ms in [base.network.tick.as_millis() as u64, 1] {
            let mut plan = base.clone();
            plan.network.tick = Duration::from_millis(tick_ms);
            for server in ["naive", "guarded"] {
                let reps = if tick_ms == 1 { 3 } else { 21 };
                let wall = measure(&plan, server, reps);
                println!(
                    "{:<22} {:<8} {:>4}ms {:>7}s {:>9.2}ms {:>11.0}x",
                    name,
                    server,
                    tick_ms,
                    plan.duration.as_secs(),
                    wall.as_secs_f64() * 1e3,
                    plan.duration.as_secs_f64() / wall.as_secs_f64()
                );
            }
        }
    }
}
