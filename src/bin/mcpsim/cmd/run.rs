//! `mcpsim run`: scenarios × servers, judged against their expectations.

mod runs;

use crate::cli::RunFormat;
use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::Error;
use runs::Runs;
use std::path::{Path, PathBuf};

/// Where the bundled scenarios are: `./scenarios`, else the source tree's.
pub(crate) fn bundled_dir() -> PathBuf {
    let local = PathBuf::from("scenarios");
    if local.is_dir() {
        local
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }
}

pub(crate) fn collect(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for f in files {
        if f.is_dir() {
            let mut found = Vec::new();
            find_toml(&f, &mut found)?;
            if found.is_empty() {
                return Err(Error::usage(format!("{}: no *.toml scenario files here", f.display())));
            }
            found.sort();
            out.extend(found);
        } else if !f.exists() {
            return Err(Error::usage(format!("{}: no such file", f.display())));
        } else {
            out.push(f);
        }
    }
    Ok(out)
}

/// Scenario files under `dir`, its subdirectories (`regressions/`) included.
pub(crate) fn find_toml(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("{}: cannot read directory: {e}", dir.display())))?;
    for entry in entries.filter_map(|e| e.ok()) {
        let p = entry.path();
        if p.is_dir() {
            find_toml(&p, found)?;
        } else if p.extension().is_some_and(|x| x == "toml") {
            found.push(p);
        }
    }
    Ok(())
}

/// What the scenarios run against.
pub(crate) enum Target {
    /// Built-in servers by name (none: all of them), each run under the
    /// watchdog's wall-clock bound.
    Servers(Vec<String>, std::time::Duration),
    /// A real server process (`--live`).
    Live(mcpsim::live::LiveOptions),
}

/// How much `mcpsim run` prints of each run (text format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verbosity {
    /// The runs that missed their expectation, a line each, and the tally.
    Quiet,
    /// A line per run, then the reports of the runs that missed (a single
    /// run: its report), then the tally.
    Normal,
    /// Every run's report.
    Verbose,
}

/// What a run writes and prints, and how it judges.
pub(crate) struct Output {
    /// Where the JSONL traces go.
    pub trace: Option<PathBuf>,
    /// Where the HTML timelines go.
    pub timeline: Option<PathBuf>,
    /// How much of each run to print (text format).
    pub verbosity: Verbosity,
    /// Text, JSON or JUnit.
    pub format: RunFormat,
    /// `--gate`: judge by the gate and this baseline instead of `[expect]`.
    pub gate: Option<mcpsim::check::gate::Baseline>,
    /// `--write-baseline`: where to write a baseline accepting what the judged runs violated.
    pub write_baseline: Option<PathBuf>,
}

pub(crate) fn run(
    files: Vec<PathBuf>,
    target: Target,
    seed: Option<Seed>,
    jobs: Option<usize>,
    output: Output,
) -> Result<u8, Error> {
    let bundled = files.is_empty();
    let (servers, live, watchdog) = split_target(target, bundled)?;
    let jobs = jobs_for(jobs, live.as_ref())?;
    // Files named on the command line, not found by searching a directory:
    // a server named for one of another dialect is a mistake to explain.
    let named: std::collections::BTreeSet<PathBuf> = files.iter().filter(|f| !f.is_dir()).cloned().collect();
    let files = collect(if bundled { vec![bundled_dir()] } else { files })?;
    let explicit = !servers.is_empty();
    let servers = if servers.is_empty() {
        mcpsim::server::known_servers().iter().map(|s| s.to_string()).collect()
    } else {
        servers
    };
    for s in servers.iter().filter(|_| live.is_none()) {
        if !mcpsim::server::is_known_server(s) {
            return Err(Error::usage(format!(
                "unknown server {s:?} (known: {})",
                mcpsim::server::known_servers().join(", ")
            )));
        }
    }
    let plans = load_all(&files)?;
    // A baseline key that names no scenario of the run accepts nothing: a typo.
    if let Some(baseline) = &output.gate {
        let all: Vec<&Plan> = plans.iter().collect();
        let unknown = baseline.unknown_keys(&all);
        if !unknown.is_empty() {
            return Err(Error::usage(format!(
                "the baseline names no scenario of this run: {} (a key is a scenario name or its file)",
                unknown.join(", ")
            )));
        }
    }
    let mut runs = Runs::new(output, plans.len() * servers.len());
    let work = runs.work(&plans, &servers, &named, (explicit, bundled, live.is_some()));
    // After a Ctrl-C (or SIGTERM) no live run starts: the runs in flight are
    // cut and judged up to the cut, the rest are not played.
    let play = |(plan, server): (&Plan, &String)| match &live {
        Some(_) if mcpsim::live::interrupted().is_some() => None,
        Some(opts) => Some(mcpsim::live::run(plan, opts)),
        None => Some(run_guarded(plan, server, seed, watchdog)),
    };
    // `--jobs` plays several at once; each run is judged and printed in
    // order all the same, as it would be one at a time.
    in_order(&work, jobs, play, |item, result| runs.take(item, result, live.is_some()));
    Ok(runs.finish())
}

/// The servers to run against (none: all of them), the live process's
/// options if live, and the watchdog's bound on a simulated run.
fn split_target(
    target: Target,
    bundled: bool,
) -> Result<(Vec<String>, Option<mcpsim::live::LiveOptions>, std::time::Duration), Error> {
    match target {
        Target::Servers(s, w) => Ok((s, None, w)),
        Target::Live(_) if bundled => Err(Error::usage(
            "a live run takes real time: name the scenario files to play, e.g. \
             `mcpsim run --live 'mcpsim serve --server guarded' scenarios/nat-rebind.toml --time-scale 0.1`",
        )),
        // One pass per plan; the server's name comes from the process.
        Target::Live(opts) => Ok((vec![String::new()], Some(opts), mcpsim::watchdog::DEFAULT)),
    }
}

/// How many runs play at once: `--jobs`, else as many as the machine
/// (or, live, [`live_jobs`]) takes.
fn jobs_for(jobs: Option<usize>, live: Option<&mcpsim::live::LiveOptions>) -> Result<usize, Error> {
    Ok(match (jobs, live) {
        (Some(0), _) => return Err(Error::usage("--jobs must be at least 1")),
        (Some(n), Some(opts)) if n > 1 && opts.port.is_some() => {
            return Err(Error::usage(
                "--live-port serves one run at a time: drop --jobs or --live-port (each run then gets a free port)",
            ))
        }
        (Some(n), _) => n,
        // A live run mostly waits, but its server and clients need the CPU
        // on time: cores × scale × 10 at once (2 at 0.1 on 2 cores), 1 to 16.
        (None, Some(opts)) => live_jobs(opts.time_scale),
        (None, None) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// How many live runs play at once without `--jobs`: max(1, cores × scale ×
/// 10), at most 16. A late run replayed slower counts against it.
fn live_jobs(time_scale: f64) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    ((cores * time_scale * 10.0).floor() as usize).clamp(1, 16)
}

/// Plays `play` on each item, `jobs` at a time, and hands each result to
/// `take` in the items' order, as soon as it and those before it are in.
fn in_order<T: Copy + Sync, R: Send>(
    items: &[T],
    jobs: usize,
    play: impl Fn(T) -> R + Sync,
    mut take: impl FnMut(T, R),
) {
    if jobs <= 1 {
        for &item in items {
            take(item, play(item));
        }
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(items.len()) {
            let (tx, next, play) = (tx.clone(), &next, &play);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&item) = items.get(i) else { break };
                if tx.send((i, play(item))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting = std::collections::BTreeMap::new();
        let mut due = 0;
        for (i, result) in rx {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&due) {
                take(items[due], result);
                due += 1;
            }
        }
    });
}

/// Loads every file, or reports every invalid one: nothing runs unless all load.
fn load_all(files: &[PathBuf]) -> Result<Vec<Plan>, Error> {
    let mut plans = Vec::new();
    let mut invalid = Vec::new();
    for f in files {
        match Plan::load(f) {
            Ok(p) => plans.push(p),
            Err(e) => invalid.push(e),
        }
    }
    if let Some(first) = invalid.first() {
        for e in &invalid {
            eprintln!("error: {e}");
        }
        let kind = first.kind;
        let n = invalid.len();
        return Err(Error::new(kind, format!("{n} scenario file(s) invalid; nothing was run")));
    }
    Ok(plans)
}

/// One simulated run under the watchdog; a stopped run names its repro.
fn run_guarded(
    plan: &Plan,
    server: &str,
    seed: Option<Seed>,
    watchdog: std::time::Duration,
) -> Result<mcpsim::Run, Error> {
    let (p, s) = (plan.clone(), server.to_string());
    mcpsim::watchdog::guard(watchdog, move || mcpsim::run(&p, &s, seed)).unwrap_or_else(|stopped| {
        Err(mcpsim::Error::io(format!(
            "{stopped}; repro: mcpsim run {} --server {server}{}",
            plan.source.as_deref().map_or(plan.name.clone(), |p| p.display().to_string()),
            seed.map_or(String::new(), |s| format!(" --seed {}", s.0))
        )))
    })
}

pub(crate) fn write_trace(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("{}: cannot create directory: {e}", dir.display())))?;
        }
    }
    std::fs::write(path, text).map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))
}
