//! One-bug servers built in the tests: `guarded` with one change to its
//! decision, for bugs no built-in server has.

use mcpsim::check::{self, Verdict};
use mcpsim::scenario::Plan;
use mcpsim::server::policy::{Decision, Guarded, Refusal, ResumeView, ResumptionPolicy};
use mcpsim::server::Engine;
use std::rc::Rc;

/// A policy that is `guarded` with one change to its decision.
pub struct Tweaked(pub &'static str, pub fn(&ResumeView<'_>, Decision) -> Decision);

impl ResumptionPolicy for Tweaked {
    fn name(&self) -> &'static str {
        self.0
    }
    fn description(&self) -> &'static str {
        "guarded with one change (a test mutant)"
    }
    fn binds_principal(&self) -> bool {
        true
    }
    fn decide(&self, v: &ResumeView<'_>) -> Decision {
        (self.1)(v, Guarded::decision(v))
    }
}

/// The trace of `plan` run against `policy` in the reference engine.
pub fn run_with_policy(plan: &Plan, policy: Tweaked) -> mcpsim::trace::Trace {
    let plug =
        Rc::new(Engine::new(plan.server.clone(), plan.dialect, Rc::new(policy), plan.seed).expect("a stateful plan"));
    mcpsim::run_with(plan, plug, plan.seed).unwrap().trace
}

/// The verdicts of `plan` run against `policy` in the reference engine.
pub fn judge_with(plan: &Plan, policy: Tweaked) -> Vec<Verdict> {
    check::judge(&run_with_policy(plan, policy))
}

/// An explicit refusal that ends the owner's session (guarded's own way to refuse).
pub fn refuse(reason: &str) -> Decision {
    Decision::Reject { reason: reason.into(), how: Refusal::ErrorEvent, invalidate: true }
}
