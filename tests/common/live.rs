//! Running scenarios live, many side by side: each run in its own thread
//! (its own runtime and clock), at most [`SLOTS`] at once, or
//! [`SERVE_SLOTS`] when every run is of `mcpsim serve`. Live runs spend their
//! time waiting, not computing, but interpreters starting and serving on 2
//! loaded cores stretch their timing, so the number at once is bounded.

use mcpsim::live::{AdapterConfig, LiveOptions};
use mcpsim::scenario::Plan;
use std::path::Path;

/// What a live deployment needs and this machine lacks (HAProxy and Redis,
/// Debian's packages; `.ci/run` installs both).
pub fn deployment_parts_missing() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<&str> = ["haproxy", "redis-server"]
        .into_iter()
        .filter(|p| !std::env::split_paths(&path).any(|d| d.join(p).is_file()))
        .collect();
    (!missing.is_empty())
        .then(|| format!("live deployments need {} (apt-get install haproxy redis-server)", missing.join(" and ")))
}

/// The bundled scenarios with a `[deployment]` (`replicas/`, and the
/// stateless-http ones), sorted per directory, relative to `scenarios/`.
pub fn deployment_scenarios() -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for dir in ["replicas", "stateless-http"] {
        let mut here: Vec<String> =
            std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(dir))
                .unwrap()
                .map(|e| format!("{dir}/{}", e.unwrap().file_name().to_string_lossy()))
                .filter(|f| f.ends_with(".toml") && !plan(f).deployment.is_single())
                .collect();
        here.sort();
        files.extend(here);
    }
    files
}

/// The documented scale for the bundled scenarios: nat-rebind (400 s) plays in 40 s.
pub const SCALE: f64 = 0.1;

/// How many live runs of one test binary play at once.
pub const SLOTS: usize = 12;

/// How many runs of `mcpsim serve` (a compiled server, quick to start and
/// light to run) play at once. Measured: 40 runs of the 400 s canonical
/// scenarios at [`SCALE`] take 56 s side by side, with 8 s of CPU, and meet
/// their verdicts; 40 SDK adapters at once (Node, Python) do not, so those
/// keep [`SLOTS`].
pub const SERVE_SLOTS: usize = 40;

static RUNNING: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Holds one of the [`SLOTS`] while alive.
pub struct Slot;

impl Slot {
    /// Waits until fewer than `limit` runs play.
    pub fn take(limit: usize) -> Slot {
        let mut n = RUNNING.0.lock().unwrap();
        while *n >= limit {
            n = RUNNING.1.wait(n).unwrap();
        }
        *n += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *RUNNING.0.lock().unwrap() -= 1;
        RUNNING.1.notify_one();
    }
}

/// A bundled scenario, by its path under `scenarios/`.
pub fn plan(file: &str) -> Plan {
    Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(file)).unwrap()
}

/// One live run: the server's name (from `ready`), the violated checks, and
/// the report (to show when a verdict differs).
pub struct LiveVerdict {
    pub server: String,
    pub violated: Vec<String>,
    pub report: String,
    /// The trace, as JSON Lines.
    pub trace: String,
}

/// The replica each connection the balancer routed went to, in the order
/// they were routed (`routed` events), from a JSON Lines trace.
#[allow(dead_code)]
pub fn routed_in_order(jsonl: &str) -> Vec<u64> {
    jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "routed")
        .filter_map(|e| e["replica"].as_u64())
        .collect()
}

/// The slowest scale a late test run is replayed at (400 s of nat-rebind
/// then take 160 s: rare, and better than a verdict the machine made).
pub const CEILING: f64 = 0.4;

/// Runs each `(scenario file, server command)` live `times` times, side by
/// side at [`SCALE`]; per job, its runs in order. A run that fails or stops
/// early fails the test, naming the job, but only once every run has ended:
/// a test that panicked while other runs were still playing would end the
/// process under them, before they could kill their server processes.
pub fn live_runs(jobs: &[(String, String)], times: usize) -> Vec<Vec<LiveVerdict>> {
    let jobs: Vec<(String, String, AdapterConfig)> =
        jobs.iter().map(|(f, c)| (f.clone(), c.clone(), AdapterConfig::default())).collect();
    live_runs_with(&jobs, times)
}

/// [`live_runs`], each job with the adapter configuration it asks for
/// (`--event-store`, `--auth`).
pub fn live_runs_with(jobs: &[(String, String, AdapterConfig)], times: usize) -> Vec<Vec<LiveVerdict>> {
    live_runs_scaled(jobs, times, SCALE)
}

/// [`live_runs_with`] at time scale `scale` (a scenario whose steps race
/// the client's own pace needs more real time on a loaded machine).
pub fn live_runs_scaled(jobs: &[(String, String, AdapterConfig)], times: usize, scale: f64) -> Vec<Vec<LiveVerdict>> {
    let serve = format!("'{}' serve ", env!("CARGO_BIN_EXE_mcpsim"));
    let serves = jobs.iter().all(|(_, c, _)| c.starts_with(&serve));
    // A deployment starts a process per replica: SDK adapters deployed take two slots' worth.
    let deployed = jobs.iter().any(|(f, _, _)| !plan(f).deployment.is_single());
    let limit = match (serves, deployed) {
        (true, _) => SERVE_SLOTS,
        (false, false) => SLOTS,
        (false, true) => SLOTS / 2,
    };
    let handles: Vec<Vec<_>> = jobs
        .iter()
        .map(|(file, command, config)| {
            (0..times)
                .map(|_| {
                    let (file, command, config) = (file.clone(), command.clone(), *config);
                    std::thread::spawn(move || -> Result<LiveVerdict, String> {
                        let _slot = Slot::take(limit);
                        let mut opts = LiveOptions::new(command.clone());
                        opts.config = config;
                        opts.time_scale = scale;
                        // A dozen interpreters starting at once on two loaded
                        // cores may take longer than the default 10 s to be ready.
                        opts.ready_timeout = std::time::Duration::from_secs(60);
                        // A run late on a loaded machine is played again
                        // slower, up to the ceiling; one still late there
                        // fails the test, named (issue "A gate that holds
                        // under CI load", item 8).
                        opts.max_time_scale = CEILING.max(scale);
                        let run = mcpsim::live::run(&plan(&file), &opts)
                            .map_err(|e| format!("{file} on `{command}`: {e}"))?;
                        if let Some(why) = &run.aborted {
                            return Err(format!("{file} on `{command}` stopped early: {why}"));
                        }
                        if let Some(late) = run.live.as_ref().and_then(|l| l.timing_words()) {
                            return Err(format!("{file} on `{command}` was still late at the ceiling: {late}"));
                        }
                        let verdicts = mcpsim::check::judge(&run.trace);
                        Ok(LiveVerdict {
                            server: run.server.clone(),
                            violated: mcpsim::check::violated(&verdicts).iter().map(|c| c.to_string()).collect(),
                            report: mcpsim::report::text(&run, &verdicts, None),
                            trace: run.trace.to_jsonl(),
                        })
                    })
                })
                .collect()
        })
        .collect();
    // Join every run before judging any.
    let results: Vec<Vec<Result<LiveVerdict, String>>> = handles
        .into_iter()
        .map(|runs| runs.into_iter().map(|h| h.join().unwrap_or_else(|p| Err(panic_words(&p)))).collect())
        .collect();
    let failures: Vec<&String> = results.iter().flatten().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{} live run(s) failed:\n{}",
        failures.len(),
        failures.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("\n")
    );
    results.into_iter().map(|runs| runs.into_iter().map(Result::unwrap).collect()).collect()
}

/// What a panic said.
fn panic_words(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a live run panicked".into())
}
