//! Simulation speed: virtual time per wall time for the canonical scenarios,
//! and the bare-turmoil baseline they are measured against.
//!
//! `cargo bench --bench sim` prints, per scenario and server, the median wall
//! time of a whole run, how far the simulation ran (it ends once nothing
//! left can change the trace) and the ratio of scenario to wall time, at the
//! default tick and at a 1 ms tick for comparison; then scenario seconds per
//! CPU second for every canonical scenario (`scenarios/*.toml`); then
//! nat-rebind against a bare turmoil program with the same hosts, tick and
//! traffic ([`bare_nat_rebind`]), per ticked second: how far mcpsim sits
//! above turmoil's own floor. Not a test: it asserts nothing and is not run
//! by CI.

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

/// CPU time this process has used (Linux: `/proc/self/stat`, in clock
/// ticks of 10 ms; measured over many runs, so the tick is small beside it).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Simulated seconds per CPU second of `run`, over `reps` runs of `virtual_time` each.
fn per_cpu_second(virtual_time: Duration, reps: u32, mut run: impl FnMut()) -> Option<f64> {
    run();
    let before = cpu_time()?;
    for _ in 0..reps {
        run();
    }
    let cpu = cpu_time()? - before;
    Some(virtual_time.as_secs_f64() * reps as f64 / cpu.as_secs_f64().max(1e-3))
}

/// The baseline: turmoil alone, with nat-rebind's hosts (a server, alice's
/// NAT, alice), its tick (20 ms), latency (5 ms), duration (400 s) and
/// traffic, and none of mcpsim: no HTTP, no SSE decoding, no trace, no
/// checks. The server writes an event line at nat-rebind's times and a
/// keep-alive every 15 s into each connection; the NAT copies bytes both
/// ways; at 12 s the NAT stops copying alice's first connection (the
/// rebind: the mapping goes silent), and alice connects again at 20 s.
fn bare_nat_rebind() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use turmoil::net::{TcpListener, TcpStream};
    let mut sim = turmoil::Builder::new()
        .rng_seed(7)
        .simulation_duration(Duration::from_secs(460))
        .tick_duration(Duration::from_millis(20))
        .min_message_latency(Duration::from_millis(5))
        .max_message_latency(Duration::from_millis(5))
        .tcp_capacity(1 << 16)
        .build();
    sim.host("server", || async {
        let listener = TcpListener::bind(("0.0.0.0", 8080)).await?;
        loop {
            let (mut s, _) = listener.accept().await?;
            tokio::task::spawn_local(async move {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                // Events at 2 s (six), 5 s, 15 s and 25 s of the run; a keep-alive every 15 s.
                let start = tokio::time::Instant::now();
                let events = [2u64, 2, 2, 2, 2, 2, 5, 15, 25];
                let mut next_event = 0;
                let mut next_keepalive = 15;
                loop {
                    let now = start.elapsed().as_secs();
                    let due_event = events.get(next_event).copied().filter(|&t| t <= now);
                    if due_event.is_some() {
                        next_event += 1;
                        if s.write_all(b"id: 1001\ndata: {\"jsonrpc\":\"2.0\"}\n\n").await.is_err() {
                            return;
                        }
                        continue;
                    }
                    if now >= next_keepalive {
                        next_keepalive += 15;
                        if s.write_all(b": keep-alive\n\n").await.is_err() {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        }
    });
    sim.host("nat-alice", || async {
        let listener = TcpListener::bind(("0.0.0.0", 9000)).await?;
        let start = tokio::time::Instant::now();
        loop {
            let (down, _) = listener.accept().await?;
            let first = start.elapsed() < Duration::from_secs(12);
            tokio::task::spawn_local(async move {
                let Ok(up) = TcpStream::connect(("server", 8080)).await else { return };
                let (mut dr, mut dw) = down.into_split();
                let (mut ur, mut uw) = up.into_split();
                let rebind_at = start + Duration::from_secs(12);
                let down_to_up = tokio::task::spawn_local(async move {
                    let _ = tokio::io::copy(&mut dr, &mut uw).await;
                });
                let mut buf = vec![0u8; 4096];
                loop {
                    let read = if first {
                        match tokio::time::timeout_at(rebind_at, ur.read(&mut buf)).await {
                            Ok(r) => r,
                            // The rebind: the mapping goes silent, both sockets stay open.
                            Err(_) => {
                                std::future::pending::<()>().await;
                                return;
                            }
                        }
                    } else {
                        ur.read(&mut buf).await
                    };
                    match read {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if dw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                down_to_up.abort();
            });
        }
    });
    sim.client("alice", async {
        let connect = || async {
            let mut s = TcpStream::connect(("nat-alice", 9000)).await?;
            s.write_all(b"GET /mcp/sse HTTP/1.1\r\nhost: server\r\n\r\n").await?;
            Ok::<_, std::io::Error>(s)
        };
        let mut first = connect().await?;
        let mut buf = vec![0u8; 4096];
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        while let Ok(Ok(n)) = tokio::time::timeout_at(until, first.read(&mut buf)).await {
            if n == 0 {
                break;
            }
        }
        let mut second = connect().await?;
        let end = tokio::time::Instant::now() + Duration::from_secs(380);
        while let Ok(Ok(n)) = tokio::time::timeout_at(end, second.read(&mut buf)).await {
            if n == 0 {
                break;
            }
        }
        drop(first);
        Ok(())
    });
    sim.run().expect("the baseline runs");
}

fn main() {
    // `cargo bench` passes `--bench`; accept and ignore harness flags.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    println!(
        "{:<22} {:<8} {:>6} {:>8} {:>8} {:>11} {:>12}",
        "scenario", "server", "tick", "virtual", "ran to", "wall", "virtual/wall"
    );
    for name in ["nat-rebind", "second-client-leak"] {
        let base = Plan::load(&dir.join(format!("{name}.toml"))).expect("bundled scenario");
        for tick_ms in [base.network.tick.as_millis() as u64, 1] {
            let mut plan = base.clone();
            plan.network.tick = Duration::from_millis(tick_ms);
            for server in ["naive", "guarded"] {
                let reps = if tick_ms == 1 { 3 } else { 21 };
                let wall = measure(&plan, server, reps);
                let ran_to = mcpsim::run(&plan, server, None).expect("run").simulated;
                println!(
                    "{:<22} {:<8} {:>4}ms {:>7}s {:>7.1}s {:>9.2}ms {:>11.0}x",
                    name,
                    server,
                    tick_ms,
                    plan.duration.as_secs(),
                    ran_to.as_secs_f64(),
                    wall.as_secs_f64() * 1e3,
                    plan.duration.as_secs_f64() / wall.as_secs_f64()
                );
            }
        }
    }
    // Every canonical scenario (scenarios/*.toml): scenario seconds per CPU
    // second, and how far the simulation had to run (it ends once nothing
    // left can change the trace: src/quiet.rs).
    println!();
    println!(
        "{:<34} {:<8} {:>8} {:>8} {:>22}",
        "canonical scenario", "server", "virtual", "ran to", "scenario s per CPU s"
    );
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        let plan = Plan::load(&path).expect("bundled scenario");
        for server in ["guarded", "naive"] {
            let ran_to = mcpsim::run(&plan, server, None).expect("run").simulated;
            let rate = per_cpu_second(plan.duration, 11, || {
                std::hint::black_box(mcpsim::run(&plan, server, None).expect("run").trace.events.len());
            });
            println!(
                "{:<34} {:<8} {:>7}s {:>7.1}s {:>21.0}x",
                plan.name,
                server,
                plan.duration.as_secs(),
                ran_to.as_secs_f64(),
                rate.unwrap_or(f64::NAN)
            );
        }
    }
    // mcpsim against turmoil's floor, per simulated second that was actually
    // ticked (the bare program ticks all 400 s; mcpsim stops at "ran to").
    let plan = Plan::load(&dir.join("nat-rebind.toml")).expect("bundled scenario");
    let bare = per_cpu_second(plan.duration, 21, bare_nat_rebind);
    println!();
    println!("{:<40} {:>22} {:>22}", "nat-rebind (400 s)", "scenario s per CPU s", "ticked s per CPU s");
    if let Some(bare) = bare {
        println!("{:<40} {:>21.0}x {:>21.0}x", "bare turmoil, same hosts/tick/traffic", bare, bare);
    }
    for server in ["guarded", "naive"] {
        let ran_to = mcpsim::run(&plan, server, None).expect("run").simulated;
        let ours = per_cpu_second(plan.duration, 21, || {
            std::hint::black_box(mcpsim::run(&plan, server, None).expect("run").trace.events.len());
        });
        match (ours, bare) {
            (Some(ours), Some(bare)) => {
                let ticked = ours * ran_to.as_secs_f64() / plan.duration.as_secs_f64();
                println!(
                    "{:<40} {:>21.0}x {:>21.0}x   (bare turmoil / mcpsim per ticked second = {:.2})",
                    format!("mcpsim, {server} (ran to {:.0} s)", ran_to.as_secs_f64()),
                    ours,
                    ticked,
                    bare / ticked
                )
            }
            _ => println!("{server}: no CPU time to read (/proc/self/stat)"),
        }
    }
}
