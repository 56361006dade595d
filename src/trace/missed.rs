//! Steps that acted on nothing: the trace's `step-missed` events, read
//! against the plan that says which steps may miss.

use serde::Serialize;

/// A step that acted on nothing (the trace's `step-missed`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MissedStep {
    /// The step's index in the plan's `steps`.
    pub index: usize,
    /// Its kind (`do = "..."`).
    #[serde(rename = "do")]
    pub action: String,
    /// When it was applied.
    pub t: super::SimTime,
    /// Why it acted on nothing.
    pub why: String,
    /// The step says `may_miss = true`.
    pub allowed: bool,
}

impl MissedStep {
    /// "step 3 (rebind) at 2.400 s acted on nothing: ..."
    pub fn line(&self) -> String {
        format!(
            "step {} ({}) at {} acted on nothing{}: {}",
            self.index,
            self.action,
            self.t,
            if self.allowed { " (it may: may_miss)" } else { "" },
            self.why
        )
    }
}

/// The steps of a run that acted on nothing, in trace order. `plan` says
/// which of them may (`may_miss = true`); a step the plan does not have
/// (a trace of another plan) may not.
pub fn missed_steps(plan: &crate::scenario::Plan, trace: &super::Trace) -> Vec<MissedStep> {
    let mut missed = step_misses(trace);
    for m in &mut missed {
        m.allowed = plan.steps.get(m.index).is_some_and(|s| s.may_miss);
    }
    missed
}

/// The steps of a run that acted on nothing, in trace order, read from the
/// trace alone (none is taken to be allowed: that is the plan's to say).
pub fn step_misses(trace: &super::Trace) -> Vec<MissedStep> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            super::What::StepMissed { index, action, why } => Some(MissedStep {
                index: *index,
                action: action.to_string(),
                t: e.t_us,
                why: why.clone(),
                allowed: false,
            }),
            _ => None,
        })
        .collect()
}
