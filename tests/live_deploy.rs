//! Live deployments (docs/replicas.md): a scenario with replicas plays live
//! as its replicas behind HAProxy, with Redis for a shared store, and gives
//! the verdicts it gives in simulation; HAProxy or Redis missing or dying
//! is named, exit 4, with the partial trace; and no process is left.
//!
//! Its own test binary, so that its processes (two or three per run besides
//! the servers) never load the timing of tests/live.rs: cargo runs test
//! binaries one after another.

mod common;
use common::harness::{run_with_threads, Case};
use common::live::{deployment_parts_missing, deployment_scenarios, live_runs, plan, routed_in_order};
use common::text;
use std::time::Duration;

/// The command that serves `server`: this build's own `mcpsim serve`.
fn serve(server: &str) -> String {
    format!("'{}' serve --server {server}", env!("CARGO_BIN_EXE_mcpsim"))
}

fn main() {
    let parts = deployment_parts_missing();
    run_with_threads(
        vec![
            Case::new(
                "deployments_give_live_the_verdicts_they_give_simulated",
                deployments_give_live_the_verdicts_they_give_simulated,
            )
            .needs(&parts),
            #[cfg(target_os = "linux")]
            Case::new(
                "a_live_deployment_runs_behind_haproxy_with_redis_and_leaves_no_process",
                a_live_deployment_runs_behind_haproxy_with_redis_and_leaves_no_process,
            )
            .needs(&parts),
            #[cfg(target_os = "linux")]
            Case::new(
                "haproxy_or_redis_missing_or_dying_is_named_with_exit_4_and_the_partial_trace",
                haproxy_or_redis_missing_or_dying_is_named_with_exit_4_and_the_partial_trace,
            )
            .needs(&parts),
        ],
        3,
    )
}

/// Every bundled scenario that deploys replicas, on naive
/// and guarded and on the mutants and rmcp where a replica breaks them,
/// live against `mcpsim serve` behind HAProxy: the verdicts of the
/// simulation. Where the balancer routes by source address, HAProxy sends
/// each address to the replica the simulated balancer sends it to; where it
/// takes the replicas in turn, it sends each connection where the simulated
/// balancer does (a replica that restarted is back in its turn).
fn deployments_give_live_the_verdicts_they_give_simulated() {
    let files = deployment_scenarios();
    assert!(files.iter().filter(|f| f.starts_with("stateless-http/")).count() >= 4, "{files:?}");
    assert!(files.iter().filter(|f| f.starts_with("replicas/")).count() >= 8, "{files:?}");
    // Crashes and drains go through HAProxy's health checks and runtime API.
    for step in ["crash-replica", "drain"] {
        assert!(files.iter().any(|f| plan(f).steps.iter().any(|s| s.action.name() == step)), "{step}");
    }
    let mut jobs: Vec<(String, String)> =
        files.iter().flat_map(|f| ["naive", "guarded"].map(|s| (f.clone(), s.to_string()))).collect();
    for (f, s) in [
        ("stateless-http/once-across-replicas.toml", "local-once"),
        ("stateless-http/retry-on-another-replica.toml", "ephemeral-key"),
        ("stateless-http/restart-one-replica.toml", "ephemeral-key"),
        ("stateless-http/once-during-store-partition.toml", "rmcp"),
        ("stateless-http/once-per-replica-store.toml", "rmcp"),
    ] {
        jobs.push((f.to_string(), s.to_string()));
    }
    // The stateful ones: the fence that is only local, and rmcp (which keeps
    // its sessions in memory) where it speaks the dialect.
    for f in files.iter().filter(|f| f.starts_with("replicas/")) {
        jobs.push((f.clone(), "local-fence".into()));
        if plan(f).dialect.name() == "streamable-http" {
            jobs.push((f.clone(), "rmcp".into()));
        }
    }
    let commands: Vec<(String, String)> = jobs.iter().map(|(f, s)| (f.clone(), serve(s))).collect();
    let mut caught = 0;
    let mut by_source = 0;
    let mut in_turn = 0;
    for ((file, server), runs) in jobs.iter().zip(live_runs(&commands, 1)) {
        let run = mcpsim::run(&plan(file), server, None).unwrap();
        let sim: Vec<String> =
            mcpsim::check::violated(&mcpsim::check::judge(&run.trace)).iter().map(|c| c.to_string()).collect();
        caught += usize::from(!sim.is_empty());
        assert_eq!(
            runs[0].violated, sim,
            "{file} on {server}: live and simulated verdicts differ:\n{}",
            runs[0].report
        );
        let (live, simulated) = (routes(&runs[0].trace), routes(&run.trace.to_jsonl()));
        assert!(!live.is_empty(), "{file} on {server}: no live connection was tagged with its replica");
        if plan(file).deployment.routing.name() == "round-robin" {
            assert_eq!(
                routed_in_order(&runs[0].trace),
                routed_in_order(&run.trace.to_jsonl()),
                "{file} on {server}: HAProxy took the replicas in another order than the simulation:\n{}",
                runs[0].report
            );
            in_turn += 1;
        }
        if plan(file).deployment.routing.name() == "source" {
            for (source, replica) in &live {
                if let Some(r) = simulated.get(source) {
                    assert_eq!(r, replica, "{file} on {server}: HAProxy sent {source} elsewhere than the simulation");
                    by_source += 1;
                }
            }
        }
    }
    assert!(caught >= 12, "the live runs include findings, not only clean runs: {caught}");
    assert!(by_source >= 20, "addresses HAProxy and the simulation both routed by source: {by_source}");
    assert!(in_turn >= 12, "round-robin runs whose order HAProxy and the simulation share: {in_turn}");
}

/// The replica each client address was sent to (`routed` events), from a
/// JSON Lines trace.
fn routes(jsonl: &str) -> std::collections::BTreeMap<String, u64> {
    jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "routed")
        .filter_map(|e| Some((e["source"].as_str()?.to_string(), e["replica"].as_u64()?)))
        .collect()
}

/// The live processes of the `mcpsim run` with pid `run` started with
/// `MCPSIM_TEST_MARK=mark`: those whose environment carries the mark (its
/// server processes), its HAProxy (its configuration's path names the run)
/// and its Redis (whose process title names the run: Redis overwrites its
/// environment). Zombies have no command line, and the run itself does not
/// count. Each one's pid and command line.
#[cfg(target_os = "linux")]
fn processes_marked(mark: &str, run: u32) -> Vec<(i32, String)> {
    let needle = format!("MCPSIM_TEST_MARK={mark}");
    let named = [format!("mcpsim-haproxy-{run}-"), format!("mcpsim-store-{run}")];
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let dir = e.ok()?.path();
            let pid: i32 = dir.file_name()?.to_str()?.parse().ok()?;
            let env = std::fs::read(dir.join("environ")).ok()?;
            let cmd = String::from_utf8_lossy(&std::fs::read(dir.join("cmdline")).ok()?).replace('\0', " ");
            let ours = env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) || named.iter().any(|n| cmd.contains(n));
            (ours && !cmd.is_empty() && !cmd.contains("mcpsim run")).then_some((pid, cmd))
        })
        .collect()
}

/// `mcpsim run --live ...` started with `MCPSIM_TEST_MARK=mark` (every
/// process it starts inherits it) and `path` as PATH, if given.
#[cfg(target_os = "linux")]
fn marked_live_run(mark: &str, path: Option<&str>, args: &[&str]) -> std::process::Child {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("MCPSIM_TEST_MARK", mark)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    cmd.spawn().unwrap()
}

/// A scenario that deploys replicas runs live as it does in simulation:
/// two `mcpsim serve` processes behind HAProxy, a Redis for the shared store
/// (`store = "shared"`), each replica's reports named by its replica. All
/// of them run while the run does, and none is left after it.
#[cfg(target_os = "linux")]
fn a_live_deployment_runs_behind_haproxy_with_redis_and_leaves_no_process() {
    let mark = format!("deploy-{}", std::process::id());
    let file = "scenarios/stateless-http/once-across-replicas.toml";
    let child = marked_live_run(&mark, None, &["run", "--live", &serve("guarded"), file, "--time-scale", "0.1"]);
    let run = child.id();
    std::thread::sleep(Duration::from_millis(2500));
    let running = processes_marked(&mark, run);
    let count = |what: &str| running.iter().filter(|(_, c)| c.contains(what) && !c.starts_with("sh ")).count();
    assert_eq!(count("haproxy"), 1, "{running:#?}");
    assert_eq!(count("redis-server"), 1, "{running:#?}");
    assert_eq!(count("serve --server guarded"), 2, "{running:#?}");
    let out = child.wait_with_output().unwrap();
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}\n{}", text(&out.stderr));
    assert!(report.contains("deployment: 2 replicas behind a balancer routing round-robin, with one shared store"));
    assert!(report.contains("app on replica 2: accepted requestState"), "{report}");
    assert!(report.contains("app on replica 1: refused requestState") && report.contains("already redeemed"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(processes_marked(&mark, run), Vec::new());
}

/// HAProxy or Redis missing is named, with its package, exit 4, before
/// anything runs; either dying mid-run ends the run, named, exit 4, with
/// the trace up to then; no process of the run is left in any case.
#[cfg(target_os = "linux")]
fn haproxy_or_redis_missing_or_dying_is_named_with_exit_4_and_the_partial_trace() {
    let file = "scenarios/stateless-http/once-across-replicas.toml";
    let args = |trace: &str| -> Vec<String> {
        ["run", "--live", &serve("guarded"), file, "--time-scale", "0.1", "--trace", trace].map(String::from).to_vec()
    };
    // Missing: a PATH with sh (and, the first time, Redis) but no HAProxy.
    let bin = common::tmp("live", "deploy-bin");
    let _ = std::fs::remove_dir_all(&bin);
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/sh", bin.join("sh")).unwrap();
    let redis = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .expect("redis-server is installed (.ci/run installs it)");
    std::os::unix::fs::symlink(redis, bin.join("redis-server")).unwrap();
    for (missing, package) in [("haproxy", "haproxy"), ("redis-server", "redis-server")] {
        if missing == "redis-server" {
            std::fs::remove_file(bin.join("redis-server")).unwrap();
        }
        let mark = format!("missing-{missing}-{}", std::process::id());
        let trace = common::tmp("live", &format!("missing-{missing}.jsonl"));
        let a = args(trace.to_str().unwrap());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let child = marked_live_run(&mark, Some(bin.to_str().unwrap()), &a);
        let run = child.id();
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{err}");
        assert!(err.contains(&format!("{missing} is not installed")), "{err}");
        assert!(err.contains(&format!("apt-get install {package}")), "{err}");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(processes_marked(&mark, run), Vec::new(), "after a missing {missing}");
    }
    // Dying mid-run: killed by a signal once the run is under way.
    for (part, name) in
        [("haproxy", "haproxy (the load balancer)"), ("redis-server", "redis-server (the shared store)")]
    {
        let mark = format!("dying-{part}-{}", std::process::id());
        let trace = common::tmp("live", &format!("dying-{part}.jsonl"));
        let _ = std::fs::remove_file(&trace);
        let a = args(trace.to_str().unwrap());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let child = marked_live_run(&mark, None, &a);
        let run = child.id();
        std::thread::sleep(Duration::from_millis(2500));
        let running = processes_marked(&mark, run);
        let pids: Vec<i32> =
            running.iter().filter(|(_, c)| c.contains(part) && !c.starts_with("sh ")).map(|(p, _)| *p).collect();
        assert_eq!(pids.len(), 1, "one {part} runs: {running:#?}");
        // SAFETY: kill(2) on a process this test's run started.
        unsafe {
            libc::kill(pids[0], libc::SIGKILL);
        }
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{err}");
        assert!(err.contains(&format!("{name} was killed by signal 9 mid-run")), "{err}");
        let kept = std::fs::read_to_string(&trace).unwrap();
        assert!(kept.contains("deployment-started") && kept.contains("run-cut"), "the partial trace is kept: {kept}");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(processes_marked(&mark, run), Vec::new(), "after {part} died");
    }
}
