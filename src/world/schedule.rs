//! When each step of a plan fires: the one schedule both step loops (the
//! simulation's and a live run's) hand steps over by.

use crate::scenario::{Action, Plan, Trigger};
use crate::trace::{Recorder, SimTime, What};
use std::time::Duration;

/// Which steps fire when: `at` steps at their time, triggered steps after
/// their event (once every earlier step has fired); a crash at the first tick
/// boundary at or after that time.
pub(crate) struct Schedule {
    /// When each step fired, and how long the trace was then.
    fired: Vec<Option<(Duration, usize)>>,
    /// When each fired step was meant to run (its `at`, or its trigger's
    /// time plus its delay): live runs measure lateness against it.
    intended: Vec<Option<Duration>>,
}

impl Schedule {
    pub(crate) fn new(n: usize) -> Self {
        Self { fired: vec![None; n], intended: vec![None; n] }
    }

    /// Whether every step has fired.
    pub(crate) fn all_fired(&self) -> bool {
        self.fired.iter().all(Option::is_some)
    }

    /// When fired step `i` was meant to run.
    pub(crate) fn intended(&self, i: usize) -> Option<Duration> {
        self.intended.get(i).copied().flatten()
    }

    /// The steps to hand over before the coming tick ends, with their due times, in order.
    pub(crate) fn due(&mut self, plan: &Plan, rec: &Recorder, now: Duration, tick: Duration) -> Vec<(usize, Duration)> {
        let mut out = Vec::new();
        // Clients whose crash waits for a later tick: their later steps wait too.
        let mut crashing: Vec<&str> = Vec::new();
        for i in 0..plan.steps.len() {
            if self.fired[i].is_some() {
                continue;
            }
            let step = &plan.steps[i];
            if step.action.clients().iter().any(|c| crashing.contains(c)) {
                continue;
            }
            // When the step should run; it runs then, or now if that is past.
            let intended = match &step.after {
                None => Some(step.at),
                Some(after) => {
                    // Armed once every earlier step fired; look at events since the last of them.
                    let Some(since) = self.fired[..i].iter().try_fold(0usize, |m, f| f.map(|(_, len)| m.max(len)))
                    else {
                        continue;
                    };
                    self.trigger_time(plan, rec, &after.trigger, since).map(|t| t + after.delay)
                }
            };
            // (A step held back behind a crash fires now, not in the past.)
            let due = intended.filter(|at| *at < now + tick).map(|at| at.max(now));
            // Actors wait for a due time inside the tick on their own clocks,
            // but a crash is done by the step loop, between ticks: it fires at
            // the first tick boundary at or after its time, and says so.
            let due = match (due, &step.action) {
                (Some(due), Action::CrashClient { client }) if due > now => {
                    crashing.push(client);
                    None
                }
                (Some(_), Action::CrashClient { .. }) => Some(now),
                // A server restart too is done by the step loop, between ticks.
                (Some(due), a) if due > now && a.by_step_loop() => None,
                (Some(_), a) if a.by_step_loop() => Some(now),
                (due, _) => due,
            };
            if let Some(due) = due {
                self.fired[i] = Some((due, rec.len()));
                self.intended[i] = intended;
                out.push((i, due));
            }
        }
        out
    }

    /// When the trigger's event happened (first match at or after trace index `since`).
    fn trigger_time(&self, plan: &Plan, rec: &Recorder, trigger: &Trigger, since: usize) -> Option<Duration> {
        let t = match trigger {
            Trigger::Step { step } => {
                let j = plan.steps.iter().position(|s| s.id.as_deref() == Some(step))?;
                return self.fired[j].map(|(t, _)| t);
            }
            Trigger::Delivered { label, client } => {
                let ids = rec.ids_for_label(label);
                rec.find_from(since, |w| match w {
                    What::SseEvent { client: c, rpc: Some(r), .. } => {
                        client.as_ref().is_none_or(|x| x == c)
                            && r.kind == crate::wire::jsonrpc::RpcKind::Request
                            && r.id.as_ref().is_some_and(|id| ids.contains(id))
                    }
                    _ => false,
                })
            }
            Trigger::Answered { label } => rec.find_from(since, |w| {
                matches!(w, What::RequestOutcome { label: l, outcome: crate::trace::Outcome::Answered, .. } if l == label)
            }),
            Trigger::Accepted { client } => rec.find_from(since, |w| {
                matches!(w, What::HttpResponse { client: c, status: 200, content_type: Some(ct), .. }
                    if c == client && ct.starts_with("text/event-stream"))
            }),
        };
        t.map(SimTime::as_duration)
    }
}
