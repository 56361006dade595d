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
    fails(crate::run(plan, server, None), &Keep::Check(target))
}

/// What a shrunk plan must keep of the seed's failure.
pub enum Keep<'a> {
    /// A violation of the check the server could have prevented.
    Check(&'a str),
    /// A violation of the check showing this defect ([`super::signature::defect`]).
    Defect(&'a str, &'a str),
    /// That defect of that check as the run's first bug (its signature).
    First(&'a str, &'a str),
}

/// Whether `plan`, played live against `live`'s process, keeps `keep`.
/// One live run: a flaky bug may shrink less far than a steady one.
pub fn still_fails_live(plan: &Plan, live: &crate::live::LiveOptions, keep: &Keep<'_>) -> bool {
    fails(crate::live::run(plan, live), keep)
}

/// Whether a run that went to its end keeps `keep`.
fn fails(run: crate::error::Result<crate::trace::Run>, keep: &Keep<'_>) -> bool {
    let Ok(run) = run else { return false };
    if run.aborted.is_some() {
        return false;
    }
    let verdicts = check::judge(&run.trace);
    let shows = |target: &str, defect: Option<&str>| {
        verdicts.iter().any(|v| {
            v.check == target
                && v.violations()
                    .iter()
                    .any(|x| !x.inherent && defect.is_none_or(|d| super::signature::defect(&x.finding) == d))
        })
    };
    match keep {
        Keep::Check(target) => shows(target, None),
        Keep::Defect(target, defect) => shows(target, Some(defect)),
        Keep::First(target, defect) => super::signature::signature(&verdicts) == format!("{target} | {defect}"),
    }
}

/// Minimises `plan` while `server` still violates `target`, within `budget` runs.
pub fn shrink(plan: &Plan, server: &str, target: &str, budget: usize) -> Shrunk {
    shrink_with(plan, budget, |candidate| still_fails(candidate, server, target))
}

/// Minimises `plan` while `server` still shows `defect` under `target`,
/// as its first bug when the seed showed it first: a hunt's bucket keeps
/// its own bug, never trading it for another that fails the same check,
/// or one that comes before it (rmcp's seed 8100021 once traded a liveness
/// line for a session-binding bug).
pub fn shrink_keeping(plan: &Plan, server: &str, target: &str, defect: &str, budget: usize) -> Shrunk {
    let keep = keep_for(plan, target, defect, |p, k| fails(crate::run(p, server, None), k));
    shrink_with(plan, budget, |candidate| fails(crate::run(candidate, server, None), &keep))
}

/// What shrinking `plan` keeps of a failure of `target` with `defect`:
/// the seed's first bug if it is that one, else that defect of the check.
pub fn keep_for<'a>(
    plan: &Plan,
    target: &'a str,
    defect: &'a str,
    holds: impl Fn(&Plan, &Keep<'_>) -> bool,
) -> Keep<'a> {
    if holds(plan, &Keep::First(target, defect)) {
        Keep::First(target, defect)
    } else {
        Keep::Defect(target, defect)
    }
}

/// Minimises `plan` while `still` holds of the candidate (a simulated run,
/// or a live one: [`still_fails_live`]), within `budget` candidate runs.
pub fn shrink_with(plan: &Plan, budget: usize, still: impl FnMut(&Plan) -> bool) -> Shrunk {
    let mut s = Shrinker { best: plan.clone(), runs: 0, budget, still };
    loop {
        let before = s.best.clone();
        // Shorten the run first: every later candidate then runs faster.
        s.shorten();
        s.drop_steps();
        s.drop_clients();
        s.lower_counts();
        s.move_earlier();
        if s.best == before || s.runs >= budget {
            break;
        }
    }
    Shrunk { plan: s.best, runs: s.runs }
}

/// A shrink under way: the smallest plan found so far, and the runs spent.
struct Shrinker<F> {
    best: Plan,
    runs: usize,
    budget: usize,
    still: F,
}

impl<F: FnMut(&Plan) -> bool> Shrinker<F> {
    /// Runs `candidate` if the budget allows and it is a valid plan; keeps
    /// it as the best when it still fails. Whether it was kept.
    fn attempt(&mut self, candidate: Plan) -> bool {
        if self.runs >= self.budget || !consistent(&candidate) {
            return false;
        }
        self.runs += 1;
        if (self.still)(&candidate) {
            self.best = candidate;
            true
        } else {
            false
        }
    }

    /// Halves the time after the last step.
    fn shorten(&mut self) {
        let best = &self.best;
        let last = best.steps.last().map_or(Duration::ZERO, |s| s.at);
        if best.duration > last + Duration::from_secs(1) {
            let mut c = best.clone();
            c.duration = Duration::from_secs((last + (best.duration - last) / 2).as_secs().max(1));
            self.attempt(c);
        }
    }

    /// Drops steps, last first (later steps depend on earlier ones), each
    /// request with the answers to it.
    fn drop_steps(&mut self) {
        let mut i = self.best.steps.len();
        while i > 0 {
            i -= 1;
            if i >= self.best.steps.len() {
                continue;
            }
            let mut c = self.best.clone();
            let removed = c.steps.remove(i);
            if let Action::ServerRequest { label, .. } | Action::CallTool { label, .. } = &removed.action {
                c.steps.retain(|s| !matches!(&s.action, Action::Answer { label: l, .. } if l == label));
            }
            self.attempt(c);
        }
    }

    /// Drops clients no step names.
    fn drop_clients(&mut self) {
        for name in self.best.clients.iter().map(|c| c.name.clone()).collect::<Vec<_>>() {
            if !self.best.steps.iter().any(|s| s.action.clients().contains(&name.as_str())) {
                let mut c = self.best.clone();
                c.clients.retain(|x| x.name != name);
                self.attempt(c);
            }
        }
    }

    /// Halves notification counts.
    fn lower_counts(&mut self) {
        for i in 0..self.best.steps.len() {
            if let Action::Notify { count, .. } = self.best.steps[i].action {
                if count > 1 {
                    let mut c = self.best.clone();
                    if let Action::Notify { count, .. } = &mut c.steps[i].action {
                        *count = 1.max(*count / 2);
                    }
                    self.attempt(c);
                }
            }
        }
    }

    /// Moves `at` steps earlier: to the previous step's time, else halfway there.
    fn move_earlier(&mut self) {
        for i in 0..self.best.steps.len() {
            let steps = &self.best.steps;
            if steps[i].after.is_some() || (i > 0 && steps[i - 1].after.is_some()) {
                continue;
            }
            let prev = if i == 0 { Duration::ZERO } else { steps[i - 1].at };
            let at = steps[i].at;
            if at > prev {
                let mut c = self.best.clone();
                c.steps[i].at = prev;
                if !self.attempt(c) {
                    let mut c = self.best.clone();
                    // Whole milliseconds keep the written scenario readable.
                    c.steps[i].at = Duration::from_millis((prev + (at - prev) / 2).as_millis() as u64);
                    self.attempt(c);
                }
            }
        }
    }
}

/// A candidate must still be a valid plan: known clients, answered labels issued earlier, time order.
fn consistent(p: &Plan) -> bool {
    p.validate().is_ok()
}
