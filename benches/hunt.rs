//! Hunt throughput: seeds per second on 1 and 2 worker threads, and where a
//! seed's time goes (generate, simulate, judge).
//!
//! `cargo bench --bench hunt` (optionally `-- SEEDS`, default 400).

use mcpsim::hunt::{self, HuntOptions, Limit};
use mcpsim::scenario::Dialect;
use std::time::{Duration, Instant};

fn main() {
    let seeds: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(400);
    let runs = [
        ("guarded", Dialect::LegacySse),
        ("naive", Dialect::LegacySse),
        ("guarded", Dialect::StreamableHttp),
        ("rmcp", Dialect::StreamableHttp),
    ];
    for (server, dialect) in runs {
        let name =
            format!("{server} ({})", if dialect == Dialect::LegacySse { "legacy-sse" } else { "streamable-http" });
        // Split one thread's time into its phases.
        let (mut gen, mut sim, mut judge) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let mut virtual_time = Duration::ZERO;
        for seed in 0..seeds / 4 {
            let t = Instant::now();
            let plan = hunt::generate_in(seed, dialect);
            gen += t.elapsed();
            let t = Instant::now();
            let run = mcpsim::run(&plan, server, None).expect("run");
            sim += t.elapsed();
            virtual_time += plan.duration;
            let t = Instant::now();
            std::hint::black_box(mcpsim::check::judge(&run.trace));
            judge += t.elapsed();
        }
        let n = (seeds / 4) as f64;
        println!(
            "{name}: per seed {:.2} ms generate, {:.2} ms simulate, {:.2} ms judge; {:.0} s virtual per seed",
            gen.as_secs_f64() * 1e3 / n,
            sim.as_secs_f64() * 1e3 / n,
            judge.as_secs_f64() * 1e3 / n,
            virtual_time.as_secs_f64() / n
        );
        for jobs in [1, 2] {
            let opts = HuntOptions { jobs, dialect, ..HuntOptions::new(server, Limit::Seeds(seeds)) };
            let t = Instant::now();
            let report = hunt::hunt(&opts, |_| {}).expect("hunt");
            let wall = t.elapsed().as_secs_f64();
            println!(
                "{name}: {jobs} job(s): {} seeds in {wall:.2} s = {:.0} seeds/s ({:.0} per core), {} finding(s)",
                report.seeds_run,
                report.seeds_run as f64 / wall,
                report.seeds_run as f64 / wall / jobs as f64,
                report.findings.len()
            );
        }
    }
}
