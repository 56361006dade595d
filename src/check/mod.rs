//! Checks: one file per property id of docs/design.md §1.
//!
//! Every check reads only the observable events of a trace (what clients, the
//! NAT and the server's application saw), so the same checks judge any
//! server. Each returns a [`Status`]: passed, violated (with evidence), or
//! not applicable (nothing in the run to judge), which is not a pass.
//!
//! ```
//! # use mcpsim::{scenario::Plan, check};
//! let plan = Plan::load(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/nat-rebind.toml").as_ref()).unwrap();
//! let run = mcpsim::run(&plan, "naive", None).unwrap();
//! let verdicts = check::judge(&run.trace);
//! assert_eq!(check::violated(&verdicts), ["session-binding", "liveness"]);
//! ```

mod confidentiality;
mod correlation_consistency;
pub mod finding;
pub mod gate;
mod inflight_disposition;
mod liveness;
pub(crate) mod observe;
mod protocol;
mod rejection_protocol;
mod replay_integrity;
mod session_binding;
pub mod stateless;
mod stream_order;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use crate::trace::{missed_steps, MissedStep};
use crate::trace::{SimTime, Trace};
pub use crate::vocab::CheckId;
pub use finding::Finding;
use observe::Observed;
use serde::Serialize;

/// A broken property, with the evidence that proves it. Its words come
/// from `report` (`Violation::headline`); the JSON carries them as `headline`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The check that found it.
    pub check: CheckId,
    /// What it found, as facts.
    pub finding: Finding,
    /// When it happened.
    pub t: SimTime,
    /// The trace events (by `seq`) that prove it.
    pub evidence: Vec<u64>,
    /// No server could have prevented it (a thief holding the owner's
    /// credential is indistinguishable from the owner). Reported, because it
    /// happened; hunts do not count it as a finding.
    pub inherent: bool,
}

/// What a check concluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Status {
    /// The run had something to judge, and nothing broke the property.
    Passed,
    /// The property broke.
    Violated {
        /// Every violation found, each with its evidence (never empty).
        violations: Vec<Violation>,
    },
    /// Nothing in the run to judge; not a pass.
    NotApplicable {
        /// Why there was nothing to judge.
        why: String,
    },
}

/// One check's verdict on a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The check that judged.
    pub check: CheckId,
    /// What it concluded; its fields sit beside `check` in the JSON.
    #[serde(flatten)]
    pub status: Status,
}

impl Verdict {
    /// Its violations; empty unless the status is `Violated`.
    pub fn violations(&self) -> &[Violation] {
        match &self.status {
            Status::Violated { violations } => violations,
            _ => &[],
        }
    }
}

/// The one rule that tells a second writer from a gap in a replay, as
/// `session-binding` and `replay-integrity` both state it in `explain`
/// (the index's `Observed::replay_floor` carries it out).
macro_rules! writer_or_gap_rule {
    () => {
        " Second writer or gap: a replay carries only events minted before the new writer was attached, so an event the application reported minting before the resuming request went out, or no later than an event the replay carried, was minted before the attach: if the replay left it out, that is replay-integrity's gap, even when the prior writer wrote it into the dead uplink. An event written there after the client saw the acceptance came from a second writer (session-binding). One written while the resumption was on its way, newer than the replay and never delivered, proves one of the two without saying which: session-binding reports it and says the trace cannot tell."
    };
}
pub(crate) use writer_or_gap_rule;

/// What `mcpsim explain CHECK` says.
pub struct Explain {
    /// What the property means.
    pub meaning: &'static str,
    /// What in the trace the check reads to judge it.
    pub evidence: &'static str,
    /// The condition of the seed analysis it encodes.
    pub condition: &'static str,
    /// What a server must do to pass.
    pub to_pass: &'static str,
}

/// A check: an id, a one-line meaning, its explanation and the judging function.
pub struct Check {
    /// Its property id.
    pub id: CheckId,
    /// What it checks, in one line (`mcpsim list checks` lists it).
    pub about: &'static str,
    /// The longer explanation `mcpsim explain` prints.
    pub explain: Explain,
    /// Judges a run from its observable record.
    pub(crate) judge: Judge,
}

/// How a check reads the trace: through the stateful index (legacy-sse and
/// streamable-http), or the stateless one.
#[derive(Clone, Copy)]
pub(crate) enum Judge {
    Stateful(fn(&Observed) -> Status),
    Stateless(fn(&stateless::Index) -> Status),
}

/// How the checks read a dialect's trace: the check layer's one choice of
/// dialect (docs/design.md §7).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Through [`Observed`], judged by [`CHECKS`]; `polls` says whether a
    /// stream that ends empty may be SSE polling (MCP 2025-11-25).
    Sessions { polls: bool },
    /// Through [`stateless::Index`], judged by [`stateless::CHECKS`].
    Stateless,
}

impl Reading {
    pub(crate) fn of(dialect: crate::scenario::Dialect) -> Reading {
        use crate::scenario::Dialect;
        match dialect {
            Dialect::LegacySse => Reading::Sessions { polls: false },
            Dialect::StreamableHttp => Reading::Sessions { polls: true },
            Dialect::StatelessHttp => Reading::Stateless,
        }
    }
}

/// The checks of `dialect`: the same ids mean the same property in every
/// dialect that has them.
pub fn checks_for(dialect: crate::scenario::Dialect) -> &'static [Check] {
    match Reading::of(dialect) {
        Reading::Sessions { .. } => &CHECKS,
        Reading::Stateless => &stateless::CHECKS,
    }
}

/// Every check of every dialect, each id once, stateful ones first.
pub fn all_checks() -> impl Iterator<Item = &'static Check> {
    CHECKS.iter().chain(stateless::CHECKS.iter().filter(|c| !CHECKS.iter().any(|s| s.id == c.id)))
}

/// Every check, in the order of docs/design.md §1, then `protocol` (for servers under test).
pub const CHECKS: [Check; 9] = [
    Check {
        id: session_binding::ID,
        about: session_binding::ABOUT,
        explain: session_binding::EXPLAIN,
        judge: Judge::Stateful(session_binding::judge),
    },
    Check {
        id: replay_integrity::ID,
        about: replay_integrity::ABOUT,
        explain: replay_integrity::EXPLAIN,
        judge: Judge::Stateful(replay_integrity::judge),
    },
    Check {
        id: correlation_consistency::ID,
        about: correlation_consistency::ABOUT,
        explain: correlation_consistency::EXPLAIN,
        judge: Judge::Stateful(correlation_consistency::judge),
    },
    Check {
        id: inflight_disposition::ID,
        about: inflight_disposition::ABOUT,
        explain: inflight_disposition::EXPLAIN,
        judge: Judge::Stateful(inflight_disposition::judge),
    },
    Check {
        id: confidentiality::ID,
        about: confidentiality::ABOUT,
        explain: confidentiality::EXPLAIN,
        judge: Judge::Stateful(confidentiality::judge),
    },
    Check {
        id: liveness::ID,
        about: liveness::ABOUT,
        explain: liveness::EXPLAIN,
        judge: Judge::Stateful(liveness::judge),
    },
    Check {
        id: rejection_protocol::ID,
        about: rejection_protocol::ABOUT,
        explain: rejection_protocol::EXPLAIN,
        judge: Judge::Stateful(rejection_protocol::judge),
    },
    Check {
        id: stream_order::ID,
        about: stream_order::ABOUT,
        explain: stream_order::EXPLAIN,
        judge: Judge::Stateful(stream_order::judge),
    },
    Check {
        id: protocol::ID,
        about: protocol::ABOUT,
        explain: protocol::EXPLAIN,
        judge: Judge::Stateful(protocol::judge),
    },
];

/// Judges a run with every check of its dialect (the trace header names it).
pub fn judge(trace: &Trace) -> Vec<Verdict> {
    match Reading::of(trace.dialect()) {
        Reading::Stateless => judge_stateless(&stateless::Index::new(trace)),
        Reading::Sessions { .. } => judge_observed(&Observed::new(trace)),
    }
}

/// Runs every stateless check on a trace already indexed (a hunt reads the index for its reach rows too).
pub(crate) fn judge_stateless(ix: &stateless::Index) -> Vec<Verdict> {
    stateless::CHECKS
        .iter()
        .map(|c| match c.judge {
            Judge::Stateless(f) => Verdict { check: c.id, status: f(ix) },
            Judge::Stateful(_) => unreachable!("stateless::CHECKS are stateless"),
        })
        .collect()
}

/// Runs every stateful check on a trace already indexed (for callers that read the index too).
pub(crate) fn judge_observed(obs: &Observed) -> Vec<Verdict> {
    CHECKS
        .iter()
        .map(|c| match c.judge {
            Judge::Stateful(f) => Verdict { check: c.id, status: f(obs) },
            Judge::Stateless(_) => unreachable!("CHECKS are stateful"),
        })
        .collect()
}

/// The ids of the checks that found violations, in check order.
pub fn violated(verdicts: &[Verdict]) -> Vec<CheckId> {
    verdicts.iter().filter(|v| matches!(v.status, Status::Violated { .. })).map(|v| v.check).collect()
}

/// Turns a list of violations into a status (empty: passed).
fn status(violations: Vec<Violation>) -> Status {
    if violations.is_empty() {
        Status::Passed
    } else {
        Status::Violated { violations }
    }
}

fn not_applicable(why: &str) -> Status {
    Status::NotApplicable { why: why.into() }
}

/// Whether a scenario's expectation for a server was met: its `[expect]`
/// entry, or (`run --gate`) the gate's baseline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Expectation {
    /// The checks `[expect]` says this server must violate, as the file
    /// lists them; under the gate, the checks the baseline accepts.
    pub expected: Vec<String>,
    /// Of those, the checks `[expect_inherent]` says it violates only
    /// inherently (every finding one no server could prevent).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expected_inherent: Vec<String>,
    /// The checks the run violated, in check order; under the gate, those
    /// with a violation that is not inherent.
    pub violated: Vec<String>,
    /// Of the checks violated, those whose every finding is inherent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inherent: Vec<String>,
    /// Steps that acted on nothing and do not say `may_miss = true`: the run
    /// did not play what the scenario describes, so it is never met.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missed: Vec<String>,
    /// Whether both name the same checks (in any order), the inherent ones
    /// as well, and no step missed; under the gate, whether every failing
    /// check is accepted, no entry is stale and no step missed.
    pub met: bool,
    /// Judged by the gate (`run --gate`), not by `[expect]`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub gate: bool,
    /// Under the gate: accepted checks that no longer fail (stale baseline entries).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<String>,
    /// Why the run was cut short, if it was: it then never counts as met.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

/// The checks violated whose every finding is inherent (reported as `INHERENT`).
pub fn inherent_only(verdicts: &[Verdict]) -> Vec<CheckId> {
    verdicts
        .iter()
        .filter(|v| !v.violations().is_empty() && v.violations().iter().all(|x| x.inherent))
        .map(|v| v.check)
        .collect()
}

/// Compares the violated checks with `[expect]` and `[expect_inherent]` for
/// this server, if it has an entry, and counts the steps of `trace` that
/// acted on nothing without being allowed to.
pub fn expectation(
    plan: &crate::scenario::Plan,
    server: &str,
    verdicts: &[Verdict],
    trace: &Trace,
) -> Option<Expectation> {
    let expected = plan.expect.get(server)?.clone();
    let expected_inherent = plan.expect_inherent.get(server).cloned().unwrap_or_default();
    let violated: Vec<String> = violated(verdicts).into_iter().map(String::from).collect();
    let inherent: Vec<String> = inherent_only(verdicts).into_iter().map(String::from).collect();
    let same = |a: &[String], b: &[String]| {
        let (mut a, mut b) = (a.to_vec(), b.to_vec());
        a.sort();
        b.sort();
        a == b
    };
    let met = same(&expected, &violated) && same(&expected_inherent, &inherent);
    let e = Expectation {
        met,
        expected,
        expected_inherent,
        violated,
        inherent,
        missed: Vec::new(),
        gate: false,
        stale: Vec::new(),
        cut: None,
    };
    Some(e.with_misses(missed_steps(plan, trace)))
}

impl Expectation {
    /// The same judgement, with the steps that missed and may not: any of
    /// them makes it not met.
    pub fn with_misses(mut self, missed: Vec<MissedStep>) -> Self {
        self.missed = missed.iter().filter(|m| !m.allowed).map(MissedStep::line).collect();
        self.met &= self.missed.is_empty();
        self
    }
}
