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
mod options;
pub mod reach;
mod seed;
pub mod shrink;
pub mod signature;
pub mod stateless;

pub use bugs::{write_regression, Bug, Failure};
pub use options::{HuntOptions, Limit, LIVE_REPLAYS};
pub use seed::{fnv1a, run_seed, run_seed_in, MakePlug, PlugFactory, SeedOutcome};
use seed::{run_seed_with, Under};

use crate::check;
use crate::error::{Error, Result};
use crate::scenario::{Dialect, Plan};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
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
    prepare(opts)?;
    let mut table = bugs::Table::new(opts)?;
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // Wall clock only for the `--time` budget: it decides how many seeds run,
    // never which (indices are handed out in order, so the seeds run are the
    // first N) nor in what order results are taken (seed order). The report
    // is a function of N.
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<(u64, Result<Seeded>)>();
    let mut report = HuntReport::empty(opts);
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

/// Refuses the settings a hunt cannot run with, before any seed runs;
/// creates the directory shrunk regressions go to.
fn prepare(opts: &HuntOptions) -> Result<()> {
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
    Ok(())
}

impl HuntReport {
    /// The report of a hunt with `opts` before its first seed: no seed run,
    /// every situation reached by none.
    fn empty(opts: &HuntOptions) -> HuntReport {
        let (k, n) = opts.shard;
        HuntReport {
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
        }
    }

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
