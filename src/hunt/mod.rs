//! Seeded bug hunts: generated scenarios, parallel runs, shrinking.
//!
//! A hunt runs seed after seed on worker threads (one simulation per thread),
//! judges each run with every check, and turns each finding into a seed, a
//! one-line repro and, shrunk, a minimal TOML scenario that CI can keep.
//!
//! ```
//! let outcome = mcpsim::hunt::run_seed("naive", 3, false).unwrap();
//! assert_eq!(outcome.seed, 3);
//! ```

pub mod generate;
pub mod reach;
pub mod shrink;

use crate::check;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use generate::{generate, generate_in};

use crate::scenario::{Dialect, Plan};
use crate::seed::Seed;
use crate::server::ServerPlug;
use std::rc::Rc;

/// The dialect a hunt of `server` speaks unless told otherwise: the only one
/// a streamable-http-only server (rmcp) speaks, else legacy-sse.
pub fn default_dialect(server: &str) -> Dialect {
    if crate::server::streamable_only(server) {
        Dialect::StreamableHttp
    } else {
        Dialect::LegacySse
    }
}

/// ` --dialect X` when `dialect` is not `server`'s default (for repro commands).
pub fn dialect_flag(server: &str, dialect: Dialect) -> String {
    match dialect {
        d if d == default_dialect(server) => String::new(),
        Dialect::LegacySse => " --dialect legacy-sse".into(),
        Dialect::StreamableHttp => " --dialect streamable-http".into(),
    }
}

/// What one seed did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedOutcome {
    /// The seed that generated the plan and ran it.
    pub seed: u64,
    /// Checks with at least one violation a server could have prevented.
    pub violated: Vec<String>,
    /// The first such violation's headline.
    pub headline: Option<String>,
    /// FNV-1a of the JSONL trace.
    pub trace_hash: u64,
    /// With `--check-determinism`: the first event where two runs differed.
    pub nondeterminism: Option<String>,
    /// The hard situations the run reached ([`reach::SITUATIONS`]).
    #[serde(default)]
    pub reached: Vec<String>,
    /// Set when the watchdog stopped the run: not a verdict on the server.
    #[serde(default)]
    pub harness: Option<String>,
}

impl SeedOutcome {
    /// Whether the seed found something: a violation, or two runs that differed.
    pub fn is_finding(&self) -> bool {
        !self.violated.is_empty() || self.nondeterminism.is_some()
    }
}

/// FNV-1a, 64 bits: a stable hash (std's hashers may change between releases).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Generates, runs and judges one seed in `server`'s default dialect.
pub fn run_seed(server: &str, seed: u64, check_determinism: bool) -> Result<SeedOutcome> {
    run_seed_in(server, seed, check_determinism, default_dialect(server))
}

/// Generates, runs and judges one seed in `dialect`.
pub fn run_seed_in(server: &str, seed: u64, check_determinism: bool, dialect: Dialect) -> Result<SeedOutcome> {
    run_seed_with(server, None, seed, check_determinism, dialect)
}

/// Builds the server under test for a generated plan: a way to hunt a
/// plug-in that is not built in ([`HuntOptions::plug`]).
#[derive(Clone)]
pub struct PlugFactory(pub std::sync::Arc<MakePlug>);

/// What a [`PlugFactory`] calls: the plan and seed in, the server out.
pub type MakePlug = dyn Fn(&Plan, Seed) -> Rc<dyn ServerPlug> + Send + Sync;

impl std::fmt::Debug for PlugFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlugFactory(..)")
    }
}

fn run_seed_with(
    server: &str,
    plug: Option<&PlugFactory>,
    seed: u64,
    check_determinism: bool,
    dialect: Dialect,
) -> Result<SeedOutcome> {
    let plan = generate_in(seed, dialect);
    let run_once = || match plug {
        Some(f) => crate::world::run_with(&plan, (f.0)(&plan, plan.seed), plan.seed),
        None => crate::run(&plan, server, None),
    };
    let run = run_once()?;
    let jsonl = run.trace.to_jsonl();
    let trace_hash = fnv1a(jsonl.as_bytes());
    let observed = check::observe::Observed::new(&run.trace);
    let verdicts = check::judge_observed(&observed);
    let reached = reach::reached(&observed, plan.server.retention).into_iter().map(String::from).collect();
    let mut violated = Vec::new();
    let mut headline = None;
    for v in &verdicts {
        if let Some(x) = v.violations().iter().find(|x| !x.inherent) {
            violated.push(v.check.to_string());
            headline.get_or_insert_with(|| format!("{}: {}", v.check, x.headline));
        }
    }
    if let Some(why) = run.aborted.as_ref().filter(|w| w.starts_with(crate::watchdog::STOPPED)) {
        let harness = Some(why.clone());
        return Ok(SeedOutcome {
            seed,
            violated,
            headline,
            trace_hash,
            nondeterminism: None,
            reached: Vec::new(),
            harness,
        });
    }
    if let Some(why) = &run.aborted {
        headline = Some(format!("run stopped early: {why}"));
        violated.push("protocol".into());
    }
    let mut nondeterminism = None;
    if check_determinism {
        let again = run_once()?.trace.to_jsonl();
        if fnv1a(again.as_bytes()) != trace_hash {
            let first = jsonl.lines().zip(again.lines()).position(|(a, b)| a != b);
            nondeterminism = Some(match first {
                Some(i) => format!(
                    "traces differ at event {i}:\n  first:  {}\n  second: {}",
                    jsonl.lines().nth(i).unwrap_or(""),
                    again.lines().nth(i).unwrap_or("")
                ),
                None => "traces differ in length".into(),
            });
        }
    }
    Ok(SeedOutcome { seed, violated, headline, trace_hash, nondeterminism, reached, harness: None })
}

/// How long a hunt goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Run this many seeds.
    Seeds(u64),
    /// Start new seeds until this much wall-clock time has passed.
    Time(Duration),
}

/// A hunt's settings.
#[derive(Clone, Debug)]
pub struct HuntOptions {
    /// The server to hunt, by its `--server` name.
    pub server: String,
    /// The first seed: shards and threads take seeds from here on.
    pub base_seed: u64,
    /// When to stop.
    pub limit: Limit,
    /// How many worker threads run seeds (at least one).
    pub jobs: usize,
    /// `(k, n)`: this job takes the k-th of n disjoint slices of the seed space (1-based).
    pub shard: (u64, u64),
    /// Where shrunk regressions go; `None`: do not shrink.
    pub out: Option<PathBuf>,
    /// Run every seed twice and report traces that differ.
    pub check_determinism: bool,
    /// Shrinking budget, in runs per finding.
    pub shrink_budget: usize,
    /// The dialect of the generated plans.
    pub dialect: Dialect,
    /// The wall-clock bound on one seed ([`crate::watchdog`]): a seed that
    /// outlives it is a harness failure, and the hunt goes on.
    pub watchdog: Duration,
    /// Hunt this plug-in instead of the built-in server `server` names
    /// (`server` is then only its name in reports). Findings are not shrunk:
    /// shrinking runs servers by name.
    pub plug: Option<PlugFactory>,
}

impl HuntOptions {
    /// A hunt of `server` from base seed 0 on one thread, one shard, no shrinking.
    pub fn new(server: &str, limit: Limit) -> Self {
        HuntOptions {
            server: server.into(),
            base_seed: 0,
            limit,
            jobs: 1,
            shard: (1, 1),
            out: None,
            check_determinism: false,
            shrink_budget: 300,
            dialect: default_dialect(server),
            watchdog: crate::watchdog::DEFAULT,
            plug: None,
        }
    }

    /// The i-th seed of this shard.
    pub fn seed_at(&self, i: u64) -> u64 {
        let (k, n) = self.shard;
        self.base_seed.wrapping_add(i.wrapping_mul(n)).wrapping_add(k - 1)
    }

    /// The command that repeats this hunt.
    pub fn repeat_command(&self) -> String {
        let limit = match self.limit {
            Limit::Seeds(n) => format!("--seeds {n}"),
            Limit::Time(d) => format!("--time {}", crate::scenario::format_duration(d)),
        };
        let (k, n) = self.shard;
        format!(
            "mcpsim hunt --server {}{} --seed {} {limit} --jobs {} --shard {k}/{n}",
            self.server,
            dialect_flag(&self.server, self.dialect),
            self.base_seed,
            self.jobs
        )
    }
}

/// A finding, with its repro and shrunk scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The seed that found it.
    pub seed: u64,
    /// The checks it violated (`protocol` too when the run stopped early).
    pub violated: Vec<String>,
    /// The first violation in words (or why the two runs differed).
    pub headline: String,
    /// The command that replays the seed.
    pub repro: String,
    /// The shrunk regression file for the first violated check, once written.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub regression: Option<String>,
    /// How many steps that regression kept.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub shrunk_steps: Option<usize>,
    /// Where two runs of the seed differed (with `--check-determinism`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub nondeterminism: Option<String>,
    /// Regressions for the other checks the seed violated, each shrunk for
    /// its own check (a rarer defect hit by the same seed gets its own).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub more_regressions: Vec<Regression>,
}

/// A shrunk regression written for one violated check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regression {
    /// The check it was shrunk for.
    pub check: String,
    /// The path of the scenario file written.
    pub file: String,
    /// How many steps it kept.
    pub steps: usize,
}

/// The result of a hunt (or of several merged).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HuntReport {
    /// The server hunted.
    pub server: String,
    /// The hunt's base seed.
    pub base_seed: u64,
    /// `"k/n"` for each shard merged in.
    pub shards: Vec<String>,
    /// How many seeds ran (summed over the merged shards).
    pub seeds_run: u64,
    /// Every finding, sorted by seed.
    pub findings: Vec<Finding>,
    /// How many seeds reached each hard situation ([`reach::SITUATIONS`]).
    #[serde(default)]
    pub reach: BTreeMap<String, u64>,
    /// Seeds the harness could not judge (the watchdog stopped them), sorted by seed.
    #[serde(default)]
    pub harness_failures: Vec<HarnessFailure>,
}

/// A seed the harness could not judge: the watchdog stopped it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessFailure {
    /// The seed.
    pub seed: u64,
    /// What stopped it.
    pub why: String,
    /// The command that runs it again.
    pub repro: String,
}

/// What the caller hears while a hunt runs.
pub enum Progress<'a> {
    /// A seed finished.
    SeedDone {
        /// How many findings the hunt has so far.
        findings: u64,
    },
    /// A seed found something (reported before its `SeedDone`).
    Finding(&'a Finding),
    /// The watchdog stopped a seed (reported before its `SeedDone`).
    HarnessFailure(&'a HarnessFailure),
}

/// Runs a hunt. `on` is called on the calling thread as seeds complete.
pub fn hunt(opts: &HuntOptions, mut on: impl FnMut(Progress)) -> Result<HuntReport> {
    if opts.plug.is_none() && !crate::server::is_known_server(&opts.server) {
        return Err(Error::usage(format!(
            "unknown server {:?} (known: {})",
            opts.server,
            crate::server::known_servers().join(", ")
        )));
    }
    let (k, n) = opts.shard;
    if n == 0 || k == 0 || k > n {
        return Err(Error::usage(format!("--shard {k}/{n}: expected K/N with 1 <= K <= N")));
    }
    if let Some(out) = &opts.out {
        std::fs::create_dir_all(out).map_err(|e| Error::io(format!("{}: cannot create: {e}", out.display())))?;
    }
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // Wall clock only for the `--time` budget: it decides how many seeds run,
    // never which (indices are handed out in order, so the seeds run are the
    // first N) nor in what order results land (findings are sorted by seed,
    // reach counts are sums). The report is a function of N.
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<Result<Seeded>>();
    let mut report = HuntReport {
        server: opts.server.clone(),
        base_seed: opts.base_seed,
        shards: vec![format!("{k}/{n}")],
        seeds_run: 0,
        findings: Vec::new(),
        reach: reach::SITUATIONS.iter().map(|s| (s.to_string(), 0)).collect(),
        harness_failures: Vec::new(),
    };
    let mut first_error = None;
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if let Limit::Time(d) = opts.limit {
                    if started.elapsed() >= d {
                        break;
                    }
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if let Limit::Seeds(max) = opts.limit {
                    if i >= max {
                        break;
                    }
                }
                let seed = opts.seed_at(i);
                let (server, check_determinism, dialect) = (opts.server.clone(), opts.check_determinism, opts.dialect);
                let plug = opts.plug.clone();
                let guarded = crate::watchdog::guard(opts.watchdog, move || {
                    run_seed_with(&server, plug.as_ref(), seed, check_determinism, dialect)
                });
                let result = match guarded {
                    Ok(Ok(o)) if o.harness.is_none() => {
                        let finding = o.is_finding().then(|| Box::new(finding(opts, &o, opts.plug.is_none())));
                        Ok(Seeded::Judged(o, finding))
                    }
                    Ok(Ok(o)) => Ok(Seeded::Harness(harness_failure(opts, seed, o.harness.unwrap_or_default()))),
                    Ok(Err(e)) => Err(e),
                    Err(stopped) => Ok(Seeded::Harness(harness_failure(opts, seed, stopped.to_string()))),
                };
                if tx.send(result).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for result in rx {
            match result {
                Ok(Seeded::Harness(h)) => {
                    report.seeds_run += 1;
                    on(Progress::HarnessFailure(&h));
                    report.harness_failures.push(h);
                    on(Progress::SeedDone { findings: report.findings.len() as u64 });
                }
                Ok(Seeded::Judged(outcome, finding)) => {
                    report.seeds_run += 1;
                    for s in outcome.reached {
                        *report.reach.entry(s).or_default() += 1;
                    }
                    if let Some(f) = finding {
                        on(Progress::Finding(&f));
                        report.findings.push(*f);
                    }
                    on(Progress::SeedDone { findings: report.findings.len() as u64 });
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    first_error.get_or_insert(e);
                }
            }
        }
    });
    if let Some(e) = first_error {
        return Err(e);
    }
    report.findings.sort_by_key(|f| f.seed);
    report.harness_failures.sort_by_key(|h| h.seed);
    Ok(report)
}

/// What a hunt worker hands back for one seed.
enum Seeded {
    /// Run and judged, with its finding if it is one.
    Judged(SeedOutcome, Option<Box<Finding>>),
    /// Stopped by the watchdog.
    Harness(HarnessFailure),
}

fn harness_failure(opts: &HuntOptions, seed: u64, why: String) -> HarnessFailure {
    let repro =
        format!("mcpsim replay --server {}{} --seed {seed}", opts.server, dialect_flag(&opts.server, opts.dialect));
    HarnessFailure { seed, why, repro }
}

/// Turns a failing seed into a finding; shrinks it when an output directory is set.
fn finding(opts: &HuntOptions, o: &SeedOutcome, shrinkable: bool) -> Finding {
    let mut f = Finding {
        seed: o.seed,
        violated: o.violated.clone(),
        headline: o.headline.clone().unwrap_or_else(|| "traces differ between two runs of the same seed".into()),
        repro: format!(
            "mcpsim replay --server {}{} --seed {}",
            opts.server,
            dialect_flag(&opts.server, opts.dialect),
            o.seed
        ),
        regression: None,
        shrunk_steps: None,
        nondeterminism: o.nondeterminism.clone(),
        more_regressions: Vec::new(),
    };
    let Some(out) = opts.out.as_ref().filter(|_| shrinkable) else { return f };
    // One regression per violated check, each shrunk while its own check
    // still fails: shrinking for the headline check alone would drop a
    // second, rarer defect the seed also hit.
    let plan = generate_in(o.seed, opts.dialect);
    for (k, target) in o.violated.iter().enumerate() {
        if target == "protocol" {
            continue;
        }
        let shrunk = shrink::shrink(&plan, &opts.server, target, opts.shrink_budget);
        match write_regression(out, &opts.server, o.seed, target, &f.repro, &shrunk) {
            Ok(path) if k == 0 => {
                f.regression = Some(path.display().to_string());
                f.shrunk_steps = Some(shrunk.plan.steps.len());
            }
            Ok(path) => f.more_regressions.push(Regression {
                check: target.clone(),
                file: path.display().to_string(),
                steps: shrunk.plan.steps.len(),
            }),
            Err(e) => f.headline.push_str(&format!(" (could not write the {target} regression: {e})")),
        }
    }
    f
}

/// Writes a shrunk plan as a regression scenario, with `[expect]` filled in
/// for the hunted server and for `guarded`.
/// `origin` says how to reproduce the unshrunk failure (a command or a file).
pub fn write_regression(
    dir: &Path,
    server: &str,
    seed: u64,
    target: &str,
    origin: &str,
    shrunk: &shrink::Shrunk,
) -> Result<PathBuf> {
    let mut plan = shrunk.plan.clone();
    plan.name = format!("{server}-{seed}-{target}");
    plan.description = format!("shrunk from hunt seed {seed}: {server} violates {target}");
    plan.expect.clear();
    for s in [server, "guarded"] {
        let run = crate::run(&plan, s, None)?;
        let violated = check::violated(&check::judge(&run.trace)).into_iter().map(String::from).collect();
        plan.expect.insert(s.to_string(), violated);
    }
    let header = vec![
        format!("Found with server {server} at seed {seed} (mcpsim {}).", env!("CARGO_PKG_VERSION")),
        format!("Shrunk in {} runs to {} steps while {target} still fails.", shrunk.runs, plan.steps.len()),
        format!("The original: {origin}"),
    ];
    let path = dir.join(format!("{}.toml", plan.name));
    std::fs::write(&path, plan.to_toml(&header))
        .map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))?;
    Ok(path)
}

/// Merges the JSON reports of several shards of one hunt.
pub fn merge(reports: Vec<HuntReport>) -> Result<HuntReport> {
    let mut it = reports.into_iter();
    let mut merged = it.next().ok_or_else(|| Error::usage("hunt merge: no reports given"))?;
    for r in it {
        if r.server != merged.server || r.base_seed != merged.base_seed {
            return Err(Error::usage(format!(
                "hunt merge: reports are from different hunts ({} seed {} vs {} seed {})",
                merged.server, merged.base_seed, r.server, r.base_seed
            )));
        }
        for s in &r.shards {
            if merged.shards.contains(s) {
                return Err(Error::usage(format!("hunt merge: shard {s} appears twice")));
            }
        }
        merged.shards.extend(r.shards);
        merged.seeds_run += r.seeds_run;
        for (s, n) in r.reach {
            *merged.reach.entry(s).or_default() += n;
        }
        merged.findings.extend(r.findings);
        merged.harness_failures.extend(r.harness_failures);
    }
    merged.shards.sort();
    merged.findings.sort_by_key(|f| f.seed);
    merged.harness_failures.sort_by_key(|h| h.seed);
    Ok(merged)
}
