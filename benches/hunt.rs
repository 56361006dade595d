//! Hunt throughput: seeds per second on 1 and 2 worker threads, for guarded
//! and naive on each dialect (and rmcp), and guarded deployed on two
//! replicas with a shared store in each dialect (`hunt --replicas 2`; naive
//! too in stateless-http), and where a seed's time goes
//! (generate, simulate, judge), and turmoil's own floor for the same seeds
//! ([`turmoil_floor`]: what no change inside mcpsim can beat); then peak memory of 2,000-, 10,000- and
//! 100,000-seed hunts of guarded (it must stay flat: a hunt keeps counts and
//! distinct bugs, not seeds).
//!
//! `cargo bench --bench hunt` (optionally `-- SEEDS`, default 400; add
//! `no-memory` to skip the memory hunts, about 3 minutes on 2 cores).

use mcpsim::hunt::{self, HuntOptions, Limit};

/// The allocator the `mcpsim` binary uses, so that these figures are the CLI's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
use mcpsim::scenario::Dialect;
use std::time::{Duration, Instant};

/// Peak resident memory of this process since the last [`reset_peak`], in MiB
/// (Linux: `VmHWM`).
fn peak_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 =
        status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb / 1024.0)
}

/// Starts a new peak (Linux: writing 5 to `clear_refs` resets `VmHWM`).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn memory() {
    let mut peaks = Vec::new();
    for seeds in [2_000u64, 10_000, 100_000] {
        reset_peak();
        let opts = HuntOptions { jobs: 2, ..HuntOptions::new("guarded", Limit::Seeds(seeds)) };
        let t = Instant::now();
        let report = hunt::hunt(&opts, |_| {}).expect("hunt");
        let wall = t.elapsed().as_secs_f64();
        let peak = peak_mib();
        println!(
            "memory: guarded (legacy-sse), 2 jobs, {} seeds in {wall:.1} s ({:.0} seeds/s): peak resident {}",
            report.seeds_run,
            report.seeds_run as f64 / wall,
            peak.map_or("unknown (no /proc/self/status)".into(), |p| format!("{p:.1} MiB"))
        );
        peaks.push(peak);
    }
    if let [_, Some(small), Some(large)] = peaks[..] {
        println!("memory: 100,000 seeds peak / 10,000 seeds peak = {:.3} (flat: within 1.10)", large / small);
    }
}

/// A world's shape, as turmoil sees it: how many hosts it has and how many
/// ticks it ran.
#[derive(Clone, Copy)]
struct Shape {
    hosts: usize,
    ticks: u32,
    tick: Duration,
}

impl Shape {
    fn of(plan: &mcpsim::scenario::Plan, run: &mcpsim::Run) -> Self {
        let replicas = plan.deployment.replicas.max(1) as usize;
        // The server (or, in a deployment, the balancer in its place, its
        // replicas and a shared store), and per client its NAT and itself.
        let servers = if replicas == 1 {
            1
        } else {
            1 + replicas + usize::from(plan.deployment.store == mcpsim::scenario::StoreKind::Shared)
        };
        let tick = plan.network.tick;
        Shape {
            hosts: servers + 2 * plan.clients.len(),
            ticks: run.simulated.as_nanos().div_ceil(tick.as_nanos()) as u32,
            tick,
        }
    }
}

/// turmoil alone, with each seed's shape and none of mcpsim: a simulation
/// with as many hosts, each waiting on a timer (as an idle server, NAT or
/// client does), stepped as many ticks as mcpsim's run of that seed took;
/// `shapes` split over two threads as a 2-job hunt splits seeds. Seeds per
/// second: the ceiling of a hunt with these seeds, as turmoil 0.7.2 costs
/// every host a tick whether or not it has anything to do.
fn turmoil_floor(shapes: &[Shape], repeat: usize) -> f64 {
    fn one(shape: Shape, seed: u64) {
        let mut sim = turmoil::Builder::new()
            .rng_seed(seed)
            .simulation_duration(shape.tick * (shape.ticks + 1))
            .tick_duration(shape.tick)
            .build();
        for h in 0..shape.hosts {
            sim.host(format!("host-{h}"), || async {
                loop {
                    tokio::time::sleep(Duration::from_secs(15)).await;
                }
            });
        }
        for _ in 0..shape.ticks {
            sim.step().expect("an idle host does not fail");
        }
    }
    let t = Instant::now();
    std::thread::scope(|s| {
        for half in 0..2 {
            s.spawn(move || {
                for r in 0..repeat {
                    for (i, shape) in shapes.iter().enumerate().skip(half).step_by(2) {
                        one(*shape, (r * shapes.len() + i) as u64);
                    }
                }
            });
        }
    });
    (shapes.len() * repeat) as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let seeds: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(400);
    let with_memory = !std::env::args().any(|a| a == "no-memory");
    let runs = [
        ("guarded", Dialect::LegacySse, 1),
        ("naive", Dialect::LegacySse, 1),
        ("guarded", Dialect::StreamableHttp, 1),
        ("naive", Dialect::StreamableHttp, 1),
        ("rmcp", Dialect::StreamableHttp, 1),
        ("guarded", Dialect::StatelessHttp, 1),
        ("naive", Dialect::StatelessHttp, 1),
        ("guarded", Dialect::StatelessHttp, 2),
        ("naive", Dialect::StatelessHttp, 2),
        ("guarded", Dialect::StreamableHttp, 2),
        ("guarded", Dialect::LegacySse, 2),
    ];
    // guarded's 2-job seeds/s per dialect and replicas, for the ratios.
    let mut two_jobs: Vec<((Dialect, u32), f64)> = Vec::new();
    for (server, dialect, replicas) in runs {
        let name = if replicas > 1 {
            format!("{server} ({}, {replicas} replicas)", dialect.name())
        } else {
            format!("{server} ({})", dialect.name())
        };
        // Split one thread's time into its phases.
        let (mut gen, mut sim, mut judge) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let mut virtual_time = Duration::ZERO;
        let mut shapes = Vec::new();
        for seed in 0..seeds / 4 {
            let t = Instant::now();
            let plan = hunt::generate_for(seed, dialect, replicas).expect("a draw the generator makes");
            gen += t.elapsed();
            let t = Instant::now();
            let run = mcpsim::run(&plan, server, None).expect("run");
            sim += t.elapsed();
            virtual_time += plan.duration;
            shapes.push(Shape::of(&plan, &run));
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
        let mut hunted = 0.0;
        for jobs in [1, 2] {
            let opts = HuntOptions { jobs, dialect, replicas, ..HuntOptions::new(server, Limit::Seeds(seeds)) };
            let t = Instant::now();
            let report = hunt::hunt(&opts, |_| {}).expect("hunt");
            let wall = t.elapsed().as_secs_f64();
            if jobs == 2 {
                hunted = report.seeds_run as f64 / wall;
            }
            if server == "guarded" && jobs == 2 {
                two_jobs.push(((dialect, replicas), report.seeds_run as f64 / wall));
            }
            println!(
                "{name}: {jobs} job(s): {} seeds in {wall:.2} s = {:.0} seeds/s ({:.0} per core), {} failing",
                report.seeds_run,
                report.seeds_run as f64 / wall,
                report.seeds_run as f64 / wall / jobs as f64,
                report.failing_seeds
            );
        }
        if server == "guarded" {
            let floor = turmoil_floor(&shapes, 4);
            let hosts = shapes.iter().map(|s| s.hosts).sum::<usize>() as f64 / n;
            let ticks = shapes.iter().map(|s| s.ticks as f64).sum::<f64>() / n;
            println!(
                "{name}: turmoil alone, idle hosts, the same seeds' hosts ({hosts:.1}) and ticks ({ticks:.0}), 2 threads: {floor:.0} seeds/s; the hunt's 2 jobs are {:.2} of it",
                hunted / floor
            );
        }
    }
    let rate = |d: Dialect, n: u32| two_jobs.iter().find(|(x, _)| *x == (d, n)).map(|(_, r)| *r);
    if let (Some(stateless), Some(streamable)) = (rate(Dialect::StatelessHttp, 1), rate(Dialect::StreamableHttp, 1)) {
        println!(
            "guarded, 2 jobs: stateless-http / streamable-http seeds/s = {:.2} (issue 27 asks at least 0.80)",
            stateless / streamable
        );
    }
    // The replica ratios from paired hunts, one server and two replicas in
    // turn, so that a machine whose speed drifts between the runs above does
    // not decide them: the median of the pairs, and their range.
    for dialect in [Dialect::StatelessHttp, Dialect::StreamableHttp, Dialect::LegacySse] {
        let rate = |replicas: u32| {
            let opts = HuntOptions { jobs: 2, dialect, replicas, ..HuntOptions::new("guarded", Limit::Seeds(seeds)) };
            let t = Instant::now();
            let report = hunt::hunt(&opts, |_| {}).expect("hunt");
            report.seeds_run as f64 / t.elapsed().as_secs_f64()
        };
        let mut ratios: Vec<f64> = (0..5).map(|_| rate(2) / rate(1)).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "guarded, 2 jobs: 2 replicas / one server seeds/s ({}) = {:.2}, median of 5 pairs ({:.2} to {:.2}) (issue 29 asks at least 0.50)",
            dialect.name(),
            ratios[2],
            ratios[0],
            ratios[4]
        );
    }
    if with_memory {
        memory();
    }
}
