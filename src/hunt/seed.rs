//! One seed of a hunt: its plan drawn, run against the server under test,
//! and judged ([`SeedOutcome`]).

use super::{bugs, default_dialect, draw, reach, signature, stateless, Failure, Hunting};
use crate::check;
use crate::error::Result;
use crate::scenario::{Dialect, Plan};
use crate::seed::Seed;
use crate::server::ServerPlug;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::rc::Rc;

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
pub(super) struct Under<'a> {
    pub(super) server: &'a str,
    pub(super) plug: Option<&'a PlugFactory>,
    pub(super) live: Option<&'a crate::live::LiveOptions>,
}

/// Builds the server under test for a generated plan: a way to hunt a
/// plug-in that is not built in ([`HuntOptions::plug`](super::HuntOptions::plug)).
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
pub(super) fn run_seed_with(
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
    let (verdicts, reached) = judge(&plan, &run.trace, dialect);
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
        nondeterminism = first_difference(&run.trace, trace_hash, &run_once()?.trace.to_jsonl());
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

/// A run's verdicts, and the hard situations it reached, as the hunt of
/// `dialect` judges them.
fn judge(plan: &Plan, trace: &crate::trace::Trace, dialect: Dialect) -> (Vec<check::Verdict>, Vec<String>) {
    match Hunting::of(dialect) {
        Hunting::Sessions(_) => {
            let observed = check::observe::Observed::new(trace);
            let reached = reach::reached_observed(&observed, &plan.server).into_iter().map(String::from).collect();
            (check::judge_observed(&observed), reached)
        }
        Hunting::Stateless => {
            let ix = check::stateless::Index::new(trace);
            let reached = stateless::reached_indexed(&ix, trace).into_iter().map(String::from).collect();
            (check::judge_stateless(&ix), reached)
        }
    }
}

/// Where a second run's JSONL trace, `again`, first differs from `trace`
/// (whose hash is `trace_hash`); `None` when they are the same.
fn first_difference(trace: &crate::trace::Trace, trace_hash: u64, again: &str) -> Option<String> {
    if fnv1a(again.as_bytes()) == trace_hash {
        return None;
    }
    let jsonl = trace.to_jsonl();
    let first = jsonl.lines().zip(again.lines()).position(|(a, b)| a != b);
    Some(match first {
        Some(i) => format!(
            "traces differ at event {i}:\n  first:  {}\n  second: {}",
            jsonl.lines().nth(i).unwrap_or(""),
            again.lines().nth(i).unwrap_or("")
        ),
        None => "traces differ in length".into(),
    })
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
