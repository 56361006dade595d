//! Seeded bug hunts: generated scenarios, parallel runs, shrinking.
//!
//! A hunt runs seed after seed on worker threads (one simulation per thread),
//! judges each run with every check, and sorts the failures into distinct
//! bugs ([`signature`]): each new one gets a seed, a one-line repro and,
//! shrunk once, a minimal TOML scenario that CI can keep; seeds that hit a
//! known bug are counted.
//!
//! ```
//! let outcome = mcpsim::hunt::run_seed("naive", 3, false).unwrap();
//! assert_eq!(outcome.seed, 3);
//! ```

pub mod bugs;
pub mod generate;
pub mod reach;
pub mod shrink;
pub mod signature;
pub mod stateless;

pub use bugs::{write_regression, Bug, Failure};

use crate::check;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use generate::generate;

/// The tick of generated plans: hunts live on throughput (see `cargo bench --bench hunt`).
pub const TICK: Duration = Duration::from_millis(200);

/// What a hunt draws and judges in a dialect: the hunt layer's one choice of
/// dialect (docs/design.md §7).
#[derive(Clone, Copy)]
enum Hunting {
    /// The stateful generator with the dialect's draws, judged through
    /// [`check::observe::Observed`], reaching [`reach::SITUATIONS`].
    Sessions(generate::Draws),
    /// The stateless generator, judged through [`check::stateless::Index`],
    /// reaching [`stateless::SITUATIONS`].
    Stateless,
}

impl Hunting {
    fn of(dialect: Dialect) -> Hunting {
        match dialect {
            Dialect::LegacySse => Hunting::Sessions(generate::Draws::LEGACY),
            Dialect::StreamableHttp => Hunting::Sessions(generate::Draws::STREAMABLE),
            Dialect::StatelessHttp => Hunting::Stateless,
        }
    }
}

/// Draws the plan of one seed in `dialect`: the stateful draws
/// ([`generate::stateful`]) or the stateless ones ([`stateless::generate`]).
pub fn generate_in(seed: u64, dialect: Dialect) -> Plan {
    match Hunting::of(dialect) {
        Hunting::Sessions(draws) => generate::stateful(seed, draws),
        Hunting::Stateless => stateless::generate(seed),
    }
}

/// Draws the plan of one seed in `dialect` on `replicas` replicas (1: one
/// server, [`generate_in`]); a deployment always shares a store
/// ([`stateless::generate_deployed`], [`generate::stateful_deployed`]).
pub fn generate_for(seed: u64, dialect: Dialect, replicas: u32) -> Result<Plan> {
    if !(1..=crate::scenario::MAX_REPLICAS).contains(&replicas) {
        return Err(crate::Error::usage(format!(
            "--replicas must be between 1 and {}, not {replicas}",
            crate::scenario::MAX_REPLICAS
        )));
    }
    Ok(draw(seed, dialect, replicas))
}

/// [`generate_for`] of a combination it accepts.
fn draw(seed: u64, dialect: Dialect, replicas: u32) -> Plan {
    match (replicas > 1, Hunting::of(dialect)) {
        (true, Hunting::Sessions(draws)) => generate::stateful_deployed(seed, draws, replicas),
        (true, Hunting::Stateless) => stateless::generate_deployed(seed, replicas),
        (false, _) => generate_in(seed, dialect),
    }
}

/// ` --replicas N` when `replicas` is more than one (for repro commands).
fn replicas_flag(replicas: u32) -> String {
    if replicas > 1 {
        format!(" --replicas {replicas}")
    } else {
        String::new()
    }
}

use crate::scenario::{Dialect, Plan};
use crate::seed::Seed;
use crate::server::ServerPlug;
use std::rc::Rc;

/// The dialect a hunt of `server` speaks unless told otherwise: the only one
/// a streamable-http-only server (rmcp) speaks, else legacy-sse.
pub fn default_dialect(server: &str) -> Dialect {
    // The first dialect a built-in server speaks; legacy-sse for a plug.
    crate::server::dialects(server).first().copied().unwrap_or(Dialect::LegacySse)
}

/// ` --dialect X` when `dialect` is not `server`'s default (for repro commands).
pub fn dialect_flag(server: &str, dialect: Dialect) -> String {
    if dialect == default_dialect(server) {
        String::new()
    } else {
        format!(" --dialect {}", dialect.name())
    }
}

/// The hard situations a hunt in `dialect` measures, in the order its summary prints them.
pub fn situations(dialect: Dialect) -> &'static [&'static str] {
    match Hunting::of(dialect) {
        Hunting::Sessions(_) => &reach::SITUATIONS,
        Hunting::Stateless => &stateless::SITUATIONS,
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
    /// The faults the plan drew, by kind: how many were applied, and how
    /// many of those acted on something (a generated step may miss: a
    /// rebind before any connection opened drops nothing).
    #[serde(default)]
    pub faults: BTreeMap<String, [u64; 2]>,
    /// Set when the watchdog stopped the run: not a verdict on the server.
    #[serde(default)]
    pub harness: Option<String>,
    /// One per violated check (and for a run stopped early, or two runs
    /// that differed), with its bucket ([`signature`]).
    #[serde(default)]
    pub failures: Vec<Failure>,
}

impl SeedOutcome {
    /// Whether the seed found something: a violation, or two runs that differed.
    pub fn is_finding(&self) -> bool {
        !self.violated.is_empty() || self.nondeterminism.is_some()
    }
}

/// FNV-1a, 64 bits: a stable hash (std's hashers may change between releases).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    use std::io::Write;
    let mut h = crate::trace::Fnv1a::default();
    h.write_all(bytes).expect("hashing cannot fail");
    h.0
}

/// Generates, runs and judges one seed in `server`'s default dialect.
pub fn run_seed(server: &str, seed: u64, check_determinism: bool) -> Result<SeedOutcome> {
    run_seed_in(server, seed, check_determinism, default_dialect(server))
}

/// Generates, runs and judges one seed in `dialect`.
pub fn run_seed_in(server: &str, seed: u64, check_determinism: bool, dialect: Dialect) -> Result<SeedOutcome> {
    run_seed_with(Under { server, plug: None, live: None }, seed, check_determinism, (dialect, 1))
}

/// The server a seed runs against: built in by name, a plug-in, or a live process.
#[derive(Clone, Copy)]
struct Under<'a> {
    server: &'a str,
    plug: Option<&'a PlugFactory>,
    live: Option<&'a crate::live::LiveOptions>,
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

/// Runs seed `seed` of the draw `(dialect, replicas)` under `under`.
fn run_seed_with(
    under: Under,
    seed: u64,
    check_determinism: bool,
    (dialect, replicas): (Dialect, u32),
) -> Result<SeedOutcome> {
    let plan = draw(seed, dialect, replicas);
    let run_once = || match (under.live, under.plug) {
        (Some(l), _) => crate::live::run(&plan, l),
        (None, Some(f)) => crate::world::run_with(&plan, (f.0)(&plan, plan.seed), plan.seed),
        (None, None) => crate::run(&plan, under.server, None),
    };
    let run = run_once()?;
    let trace_hash = run.trace.jsonl_hash();
    let (verdicts, reached): (Vec<check::Verdict>, Vec<String>) = match Hunting::of(dialect) {
        Hunting::Sessions(_) => {
            let observed = check::observe::Observed::new(&run.trace);
            let reached = reach::reached_observed(&observed, &plan.server).into_iter().map(String::from).collect();
            (check::judge_observed(&observed), reached)
        }
        Hunting::Stateless => {
            let ix = check::stateless::Index::new(&run.trace);
            let reached = stateless::reached_indexed(&ix, &run.trace).into_iter().map(String::from).collect();
            (check::judge_stateless(&ix), reached)
        }
    };
    let mut violated = Vec::new();
    let mut firsts = Vec::new();
    for v in &verdicts {
        if let Some(x) = v.violations().iter().find(|x| !x.inherent) {
            violated.push(v.check.to_string());
            firsts.push((v.check.to_string(), x.headline(), signature::defect(&x.finding)));
        }
    }
    let mut headline = firsts.first().map(|(c, h, _)| format!("{c}: {h}"));
    if let Some(why) = run.aborted.as_ref().filter(|w| w.starts_with(crate::watchdog::STOPPED)) {
        let harness = Some(why.clone());
        return Ok(SeedOutcome {
            seed,
            violated,
            headline,
            trace_hash,
            nondeterminism: None,
            reached: Vec::new(),
            faults: BTreeMap::new(),
            harness,
            failures: Vec::new(),
        });
    }
    if let Some(why) = &run.aborted {
        headline = Some(format!("run stopped early: {why}"));
        violated.push("protocol".into());
        firsts.push(("protocol".into(), format!("run stopped early: {why}"), "stopped-early"));
    }
    let mut nondeterminism = None;
    if check_determinism {
        let again = run_once()?.trace.to_jsonl();
        if fnv1a(again.as_bytes()) != trace_hash {
            let jsonl = run.trace.to_jsonl();
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
    let mut failures = bugs::failures(&plan, &firsts);
    if nondeterminism.is_some() {
        let headline = "traces differ between two runs of the same seed".to_string();
        failures.push(Failure {
            check: "nondeterminism".into(),
            bucket: "nondeterminism".into(),
            headline,
            defect: "nondeterminism".into(),
        });
    }
    let faults = landed_faults(&run.trace);
    Ok(SeedOutcome { seed, violated, headline, trace_hash, nondeterminism, reached, faults, harness: None, failures })
}

/// Per fault kind, how many steps of the trace were applied, and how many of
/// them acted on something (no `step-missed` for them).
fn landed_faults(trace: &crate::trace::Trace) -> BTreeMap<String, [u64; 2]> {
    use crate::trace::What;
    let mut out: BTreeMap<String, [u64; 2]> = BTreeMap::new();
    for e in &trace.events {
        match &e.what {
            What::Step { action, .. } if action.is_fault() => {
                let n = out.entry(action.to_string()).or_default();
                n[0] += 1;
                n[1] += 1;
            }
            What::StepMissed { action, .. } if action.is_fault() => {
                if let Some(n) = out.get_mut(action.as_str()) {
                    n[1] = n[1].saturating_sub(1);
                }
            }
            _ => {}
        }
    }
    out
}

/// A live hunt's second look: each bug is played live [`LIVE_REPLAYS`]
/// more times, and records how many of those runs showed it again
/// (reproducible when all did, flaky otherwise). A shrunk bug replays its
/// reproducer and must show its signature again; an unshrunk one replays
/// its first seed and must show its check with the same defect.
pub fn confirm_live(opts: &HuntOptions, report: &mut HuntReport) -> Result<()> {
    let Some(live) = &opts.live else { return Ok(()) };
    // What each bug replays: its reproducer's plan when it was shrunk.
    let mut reproducers = Vec::new();
    for b in &report.bugs {
        reproducers.push(match &b.file {
            Some(f) => Some(Plan::load(Path::new(f))?),
            None => None,
        });
    }
    let again_for = |i: usize| -> Result<bool> {
        let bug = &report.bugs[i];
        match &reproducers[i] {
            Some(plan) => {
                let run = crate::live::run(plan, live)?;
                Ok(run.aborted.is_none() && signature::signature(&check::judge(&run.trace)) == bug.signature)
            }
            None => {
                let under = Under { server: &opts.server, plug: None, live: Some(live) };
                let o = run_seed_with(under, bug.first_seed, false, (opts.dialect, opts.replicas))?;
                Ok(o.failures.iter().any(|f| bug.signature.strip_prefix("unshrunk | ") == Some(f.kind().as_str())))
            }
        }
    };
    // Every (bug, replay) pair, played `jobs` at a time: each is its own process and ports.
    let pairs: Vec<usize> =
        (0..report.bugs.len()).flat_map(|i| std::iter::repeat_n(i, LIVE_REPLAYS as usize)).collect();
    let mut again = vec![0u32; report.bugs.len()];
    for chunk in pairs.chunks(opts.jobs.max(1)) {
        let outcomes: Vec<(usize, Result<bool>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk.iter().map(|&i| (i, scope.spawn(move || again_for(i)))).collect();
            handles
                .into_iter()
                .map(|(i, h)| (i, h.join().unwrap_or_else(|_| Err(Error::io("a live replay panicked")))))
                .collect()
        });
        for (i, o) in outcomes {
            if o? {
                again[i] += 1;
            }
        }
    }
    for (bug, n) in report.bugs.iter_mut().zip(again) {
        bug.replayed = Some((n, LIVE_REPLAYS));
    }
    Ok(())
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
    /// Shrinking budget, in runs per new bucket ([`signature`]).
    pub shrink_budget: usize,
    /// Stop once this many distinct bugs are found (`--max-findings`;
    /// `--stop-on-first` is 1). The seeds judged are then the first N up to
    /// the one that found the last of them.
    pub max_bugs: Option<usize>,
    /// The dialect of the generated plans.
    pub dialect: Dialect,
    /// How many replicas each generated plan deploys (1: one server).
    pub replicas: u32,
    /// The wall-clock bound on one seed ([`crate::watchdog`]): a seed that
    /// outlives it is a harness failure, and the hunt goes on.
    pub watchdog: Duration,
    /// Hunt this plug-in instead of the built-in server `server` names
    /// (`server` is then only its name in reports). Findings are not shrunk:
    /// shrinking runs servers by name.
    pub plug: Option<PlugFactory>,
    /// Play each generated plan live against this server process instead
    /// (`hunt --live`; `server` is then only its name in reports). Live
    /// findings are shrunk with live runs (at most `shrink_budget` of them);
    /// each bug's reproducer (its first seed when not shrunk) is replayed
    /// live [`LIVE_REPLAYS`] times ([`confirm_live`]).
    pub live: Option<crate::live::LiveOptions>,
}

/// How many times a live hunt replays each bug (its reproducer, or its first
/// seed when not shrunk) before it calls the bug reproducible.
pub const LIVE_REPLAYS: u32 = 3;

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
            max_bugs: None,
            dialect: default_dialect(server),
            replicas: 1,
            watchdog: crate::watchdog::DEFAULT,
            plug: None,
            live: None,
        }
    }

    /// The i-th seed of this shard.
    pub fn seed_at(&self, i: u64) -> u64 {
        let (k, n) = self.shard;
        self.base_seed.wrapping_add(i.wrapping_mul(n)).wrapping_add(k - 1)
    }

    /// The command that replays one seed of this hunt.
    pub fn replay_command(&self, seed: u64) -> String {
        if let Some(l) = &self.live {
            return format!(
                "mcpsim hunt --live {}{} --dialect {}{} --seed {seed} --seeds 1 --no-shrink --time-scale {}",
                crate::trace::run::shell_quote(&l.command),
                l.config.flags(),
                self.dialect.name(),
                replicas_flag(self.replicas),
                l.time_scale
            );
        }
        format!(
            "mcpsim replay --server {}{}{} --seed {seed}",
            self.server,
            dialect_flag(&self.server, self.dialect),
            replicas_flag(self.replicas)
        )
    }

    /// The command that repeats this hunt.
    pub fn repeat_command(&self) -> String {
        let limit = match self.limit {
            Limit::Seeds(n) => format!("--seeds {n}"),
            Limit::Time(d) => format!("--time {}", crate::scenario::format_duration(d)),
        };
        let (k, n) = self.shard;
        if let Some(l) = &self.live {
            let shrink = match self.out {
                Some(_) => format!("--shrink-runs {}", self.shrink_budget),
                None => "--no-shrink".into(),
            };
            return format!(
                "mcpsim hunt --live {}{} --dialect {}{} --seed {} {limit} --jobs {} --shard {k}/{n} {shrink} --time-scale {}",
                crate::trace::run::shell_quote(&l.command),
                l.config.flags(),
                self.dialect.name(),
                replicas_flag(self.replicas),
                self.base_seed,
                self.jobs,
                l.time_scale
            );
        }
        format!(
            "mcpsim hunt --server {}{}{} --seed {} {limit} --jobs {} --shard {k}/{n}",
            self.server,
            dialect_flag(&self.server, self.dialect),
            replicas_flag(self.replicas),
            self.base_seed,
            self.jobs
        )
    }
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
    /// How many of them failed a check (or differed between two runs).
    pub failing_seeds: u64,
    /// The distinct bugs ([`signature`]), most often hit first.
    pub bugs: Vec<Bug>,
    /// How many seeds reached each hard situation ([`reach::SITUATIONS`]).
    #[serde(default)]
    pub reach: BTreeMap<String, u64>,
    /// Per fault kind: the steps applied, and those that acted on something.
    #[serde(default)]
    pub faults: BTreeMap<String, [u64; 2]>,
    /// Seeds the harness could not judge (the watchdog stopped them, or a
    /// live server did not start), sorted by seed.
    #[serde(default)]
    pub harness_failures: Vec<HarnessFailure>,
    /// Why the hunt stopped before its limit (a Ctrl-C, a live server that
    /// kept failing to start); the seeds judged before are all reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
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

/// What the caller hears while a hunt runs (in seed order).
pub enum Progress<'a> {
    /// A seed was judged.
    SeedDone {
        /// How many seeds failed so far.
        failing: u64,
        /// How many distinct bugs the hunt has so far.
        bugs: u64,
    },
    /// A seed found a bug no earlier seed found (reported before its `SeedDone`).
    NewBug(&'a Bug),
    /// The watchdog stopped a seed (reported before its `SeedDone`).
    HarnessFailure(&'a HarnessFailure),
}

/// Runs a hunt. `on` is called on the calling thread as seeds complete.
///
/// Workers run seeds in parallel; this thread takes their outcomes in seed
/// order, so the report (and what `on` hears) depends on which seeds ran,
/// never on thread timing. New buckets are shrunk here, while the workers
/// go on.
pub fn hunt(opts: &HuntOptions, on: impl FnMut(Progress)) -> Result<HuntReport> {
    if opts.live.is_some() && opts.check_determinism {
        return Err(Error::usage(
            "a live hunt cannot check determinism (real sockets, real time): drop --check-determinism",
        ));
    }
    if opts.plug.is_none() && opts.live.is_none() && !crate::server::is_known_server(&opts.server) {
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
    // A draw the generator cannot make is refused before any seed runs.
    generate_for(opts.base_seed, opts.dialect, opts.replicas)?;
    if let Some(out) = &opts.out {
        std::fs::create_dir_all(out).map_err(|e| Error::io(format!("{}: cannot create: {e}", out.display())))?;
    }
    let mut table = bugs::Table::new(opts)?;
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // Wall clock only for the `--time` budget: it decides how many seeds run,
    // never which (indices are handed out in order, so the seeds run are the
    // first N) nor in what order results are taken (seed order). The report
    // is a function of N.
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<(u64, Result<Seeded>)>();
    let mut report = HuntReport {
        server: opts.server.clone(),
        base_seed: opts.base_seed,
        shards: vec![format!("{k}/{n}")],
        seeds_run: 0,
        failing_seeds: 0,
        bugs: Vec::new(),
        reach: situations(opts.dialect).iter().map(|s| (s.to_string(), 0)).collect(),
        faults: BTreeMap::new(),
        harness_failures: Vec::new(),
        stopped: None,
    };
    let mut first_error = None;
    let mut on = on;
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            let mut runner = crate::watchdog::Runner::new();
            scope.spawn(move || loop {
                // After a Ctrl-C a live hunt starts no plan.
                if stop.load(Ordering::Relaxed) || (opts.live.is_some() && crate::live::interrupted().is_some()) {
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
                if tx.send((i, run_guarded(opts, &mut runner, opts.seed_at(i)))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        first_error = report.take_in_seed_order(rx, opts, &stop, &mut table, &mut on);
    });
    if let Some(e) = first_error {
        return Err(e);
    }
    report.failing_seeds = table.failing;
    report.bugs = table.bugs;
    bugs::sort_bugs(&mut report.bugs);
    Ok(report)
}

impl HuntReport {
    /// How many seeds gave different traces when run twice
    /// (`--check-determinism`). Each such seed files one `nondeterminism`
    /// failure; the bugs its other failures start carry the same
    /// `nondeterminism` note, so counting those would count it again.
    pub fn nondeterministic_seeds(&self) -> u64 {
        self.bugs.iter().filter(|b| b.checks.iter().any(|c| c == "nondeterminism")).map(|b| b.seeds).sum()
    }

    /// Takes the workers' outcomes as they arrive and files them in seed
    /// order, until the workers are done or a stopping rule or an error ends
    /// the hunt (then `stop` tells the workers, and seeds after the last one
    /// filed are not judged). Returns the first error.
    fn take_in_seed_order(
        &mut self,
        rx: mpsc::Receiver<(u64, Result<Seeded>)>,
        opts: &HuntOptions,
        stop: &AtomicBool,
        table: &mut bugs::Table,
        on: &mut impl FnMut(Progress),
    ) -> Option<Error> {
        let mut pending: BTreeMap<u64, Result<Seeded>> = BTreeMap::new();
        let mut due = 0u64;
        let mut first_error = None;
        // Live plans whose server did not start, in a row: three stop the hunt.
        let mut starts_lost = 0;
        for (i, result) in rx {
            if stop.load(Ordering::Relaxed) {
                continue; // drain what the workers still send
            }
            pending.insert(i, result);
            while let Some(result) = pending.remove(&due) {
                due += 1;
                let lost = matches!(&result, Ok(Seeded::Harness(h)) if h.why.starts_with(LIVE_START_LOST));
                starts_lost = if lost { starts_lost + 1 } else { 0 };
                match result {
                    Ok(seeded) => self.take(seeded, table, on),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
                if starts_lost >= 3 {
                    self.stopped = Some(format!("the live server broke on {starts_lost} plans in a row"));
                }
                // (A simulated hunt never reads the process's signal state.)
                if let Some(why) = opts.live.as_ref().and_then(|_| crate::live::interrupted()) {
                    self.stopped = Some(why.to_string());
                }
                if first_error.is_some()
                    || self.stopped.is_some()
                    || opts.max_bugs.is_some_and(|m| table.bugs.len() >= m)
                {
                    stop.store(true, Ordering::Relaxed);
                    pending.clear();
                    break;
                }
            }
        }
        first_error
    }

    /// Files one seed's result, in seed order.
    fn take(&mut self, seeded: Seeded, table: &mut bugs::Table, on: &mut impl FnMut(Progress)) {
        self.seeds_run += 1;
        match seeded {
            Seeded::Harness(h) => {
                on(Progress::HarnessFailure(&h));
                self.harness_failures.push(h);
            }
            Seeded::Judged(outcome) => {
                for s in &outcome.reached {
                    *self.reach.entry(s.clone()).or_default() += 1;
                }
                for (k, [applied, landed]) in &outcome.faults {
                    let n = self.faults.entry(k.clone()).or_default();
                    n[0] += applied;
                    n[1] += landed;
                }
                for i in table.add(&outcome) {
                    on(Progress::NewBug(&table.bugs[i]));
                }
            }
        }
        on(Progress::SeedDone { failing: table.failing, bugs: table.bugs.len() as u64 });
    }
}

/// Runs one seed under the watchdog, as a hunt worker does.
fn run_guarded(
    opts: &HuntOptions,
    runner: &mut crate::watchdog::Runner<Result<SeedOutcome>>,
    seed: u64,
) -> Result<Seeded> {
    let (server, check_determinism, draw) =
        (opts.server.clone(), opts.check_determinism, (opts.dialect, opts.replicas));
    let plug = opts.plug.clone();
    let live = opts.live.clone();
    let guarded = runner.run(opts.watchdog, move || {
        let under = Under { server: &server, plug: plug.as_ref(), live: live.as_ref() };
        run_seed_with(under, seed, check_determinism, draw)
    });
    match guarded {
        Ok(Ok(o)) if o.harness.is_none() => Ok(Seeded::Judged(Box::new(o))),
        Ok(Ok(o)) => Ok(Seeded::Harness(harness_failure(opts, seed, o.harness.unwrap_or_default()))),
        // A live server that did not start (or broke) costs its seed, not
        // the hunt: the hunt goes on, says so, and prints its table.
        Ok(Err(e)) if opts.live.is_some() && e.kind == crate::ErrorKind::Io => {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            Ok(Seeded::Harness(harness_failure(opts, seed, format!("{LIVE_START_LOST}{first}"))))
        }
        Ok(Err(e)) => Err(e),
        Err(stopped) => Ok(Seeded::Harness(harness_failure(opts, seed, stopped.to_string()))),
    }
}

/// How a harness failure of a live plan whose server broke begins.
const LIVE_START_LOST: &str = "the live run did not play: ";

/// What a hunt worker hands back for one seed.
enum Seeded {
    /// Run and judged.
    Judged(Box<SeedOutcome>),
    /// Stopped by the watchdog.
    Harness(HarnessFailure),
}

fn harness_failure(opts: &HuntOptions, seed: u64, why: String) -> HarnessFailure {
    HarnessFailure { seed, why, repro: opts.replay_command(seed) }
}

/// Merges the JSON reports of several shards of one hunt: bugs by
/// signature (counts add up; the smallest reproducer wins).
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
        merged.failing_seeds += r.failing_seeds;
        for (s, n) in r.reach {
            *merged.reach.entry(s).or_default() += n;
        }
        for (k, [applied, landed]) in r.faults {
            let n = merged.faults.entry(k).or_default();
            n[0] += applied;
            n[1] += landed;
        }
        bugs::merge_bugs(&mut merged.bugs, r.bugs);
        merged.harness_failures.extend(r.harness_failures);
        merged.stopped = merged.stopped.take().or(r.stopped);
    }
    merged.shards.sort();
    bugs::sort_bugs(&mut merged.bugs);
    merged.harness_failures.sort_by_key(|h| h.seed);
    Ok(merged)
}
