//! Shrinking: minimise a failing plan while the same check still fails.
//!
//! Greedy passes until a pass changes nothing or the run budget is spent:
//! drop steps (with the answers that depend on them), drop clients nobody
//! uses, lower notification counts, move steps earlier, shorten the run.
//! Every candidate is a whole deterministic run, judged by the same checks.

use crate::check;
use crate::scenario::{Action, Plan};
use std::time::Duration;

/// The result of shrinking.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The smallest plan found that still fails the same check.
    pub plan: Plan,
    /// How many candidate runs it took.
    pub runs: usize,
}

/// Whether `plan` on `server` still violates `target` (inherent violations do not count).
pub fn still_fails(plan: &Plan, server: &str, target: &str) -> bool {
    fails(crate::run(plan, server, None), target)
}

/// Whether `plan`, played live against `live`'s process, violates `target`.
/// One live run: a flaky bug may shrink less far than a steady one.
pub fn still_fails_live(plan: &Plan, live: &crate::live::LiveOptions, target: &str) -> bool {
    fails(crate::live::run(plan, live), target)
}

/// Whether a run that went to its end violates `target` with a violation
/// the server could have prevented.
fn fails(run: crate::error::Result<crate::trace::Run>, target: &str) -> bool {
    match run {
        Ok(run) if run.aborted.is_none() => {
            check::judge(&run.trace).iter().any(|v| v.check == target && v.violations().iter().any(|x| !x.inherent))
        }
        _ => false,
    }
}

/// Minimises `plan` while `server` still violates `target`, within `budget` runs.
pub fn shrink(plan: &Plan, server: &str, target: &str, budget: usize) -> Shrunk {
    shrink_with(plan, budget, |candidate| still_fails(candidate, server, target))
}

/// Minimises `plan` while `still` holds of the candidate (a simulated run,
/// or a live one: [`still_fails_live`]), within `budget` candidate runs.
pub fn shrink_with(plan: &Plan, budget: usize, mut still: impl FnMut(&Plan) -> bool) -> Shrunk {
    let mut best = plan.clone();
    let mut runs = 0;
    let mut attempt = |candidate: Plan, best: &mut Plan, runs: &mut usize| -> bool {
        if *runs >= budget || !consistent(&candidate) {
            return false;
        }
        *runs += 1;
        if still(&candidate) {
            *best = candidate;
            true
        } else {
            false
        }
    };
    loop {
        let before = best.clone();
        // Shorten the run first: every later candidate then runs faster.
        let last = best.steps.last().map_or(Duration::ZERO, |s| s.at);
        if best.duration > last + Duration::from_secs(1) {
            let mut c = best.clone();
            c.duration = Duration::from_secs((last + (best.duration - last) / 2).as_secs().max(1));
            attempt(c, &mut best, &mut runs);
        }
        // Drop steps, last first (later steps depend on earlier ones).
        let mut i = best.steps.len();
        while i > 0 {
            i -= 1;
            if i >= best.steps.len() {
                continue;
            }
            let mut c = best.clone();
            let removed = c.steps.remove(i);
            if let Action::ServerRequest { label, .. } | Action::CallTool { label, .. } = &removed.action {
                c.steps.retain(|s| !matches!(&s.action, Action::Answer { label: l, .. } if l == label));
            }
            attempt(c, &mut best, &mut runs);
        }
        // Drop clients no step names.
        for name in best.clients.iter().map(|c| c.name.clone()).collect::<Vec<_>>() {
            if !best.steps.iter().any(|s| s.action.clients().contains(&name.as_str())) {
                let mut c = best.clone();
                c.clients.retain(|x| x.name != name);
                attempt(c, &mut best, &mut runs);
            }
        }
        // Lower counts.
        for i in 0..best.steps.len() {
            if let Action::Notify { count, .. } = best.steps[i].action {
                if count > 1 {
                    let mut c = best.clone();
                    if let Action::Notify { count, .. } = &mut c.steps[i].action {
                        *count = 1.max(*count / 2);
                    }
                    attempt(c, &mut best, &mut runs);
                }
            }
        }
        // Move `at` steps earlier: to the previous step's time, else halfway there.
        for i in 0..best.steps.len() {
            if best.steps[i].after.is_some() || (i > 0 && best.steps[i - 1].after.is_some()) {
                continue;
            }
            let prev = if i == 0 { Duration::ZERO } else { best.steps[i - 1].at };
            let at = best.steps[i].at;
            if at > prev {
                let mut c = best.clone();
                c.steps[i].at = prev;
                if !attempt(c, &mut best, &mut runs) {
                    let mut c = best.clone();
                    // Whole milliseconds keep the written scenario readable.
                    c.steps[i].at = Duration::from_millis((prev + (at - prev) / 2).as_millis() as u64);
                    attempt(c, &mut best, &mut runs);
                }
            }
        }
        if best == before || runs >= budget {
            break;
        }
    }
    Shrunk { plan: best, runs }
}

/// A candidate must still be a valid plan: known clients, answered labels issued earlier, time order.
fn consistent(p: &Plan) -> bool {
    p.validate().is_ok()
}
