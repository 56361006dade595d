//! The one semantic check of a [`Plan`], whoever built it: the loader (after
//! its own located checks), the world (for hand-built plans) and the
//! shrinker (for every candidate it tries). A plan that passes runs; a plan
//! the shrinker writes therefore loads back.

use super::{Action, LastEventId, Plan, Trigger};
use std::collections::BTreeSet;
use std::time::Duration;

/// What is wrong with a plan, and at which step (`None`: the plan as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanProblem {
    /// The index in `steps` of the step at fault; `None` when the plan as a whole is.
    pub step: Option<usize>,
    /// What is wrong, in words.
    pub message: String,
}

impl Plan {
    /// Checks that every name a step uses is defined before it is used, that
    /// timed steps are in order and within the run, and that each step kind
    /// exists in the plan's dialect.
    pub fn validate(&self) -> Result<(), PlanProblem> {
        let whole = |message: String| PlanProblem { step: None, message };
        let d = &self.deployment;
        if let Some((_, why)) = d.problem(self.dialect) {
            return Err(whole(why));
        }
        let mut names = BTreeSet::new();
        for c in &self.clients {
            if !names.insert(c.name.as_str()) {
                return Err(whole(format!("client {:?} is defined twice", c.name)));
            }
        }
        let known = |c: &str| names.contains(c);
        let mut labels: BTreeSet<&str> = BTreeSet::new();
        let mut ids: BTreeSet<&str> = BTreeSet::new();
        let mut last = Duration::ZERO;
        for (i, s) in self.steps.iter().enumerate() {
            let at = |message: String| PlanProblem { step: Some(i), message };
            let mut used: Vec<&str> = s.action.clients();
            if let Action::Resume { last_event_id: LastEventId::Seen { client, .. }, .. } = &s.action {
                used.push(client);
            }
            if let Some(c) = used.into_iter().find(|c| !known(c)) {
                return Err(at(format!("names unknown client {c:?}")));
            }
            if !self.dialect.step_kinds().contains(&s.action.kind()) {
                return Err(at(format!(
                    "`{}` needs dialect {}",
                    s.action.name(),
                    super::load::dialects_with(s.action.kind())
                )));
            }
            if let Action::RestartReplica { replica } | Action::CrashReplica { replica } | Action::Drain { replica } =
                &s.action
            {
                if d.is_single() {
                    return Err(at(format!(
                        "`{}` acts on one replica: it needs [deployment] replicas > 1",
                        s.action.name()
                    )));
                }
                if !(1..=d.replicas).contains(replica) {
                    return Err(at(format!(
                        "names replica {replica}, but the deployment has replicas 1 to {}",
                        d.replicas
                    )));
                }
            }
            if let Action::Partition { replica, lasts } = &s.action {
                if d.store != super::StoreKind::Shared || d.is_single() {
                    return Err(at(
                        "`partition` cuts a replica from the shared store: it needs [deployment] replicas > 1 and store = \"shared\"".into(),
                    ));
                }
                if !(1..=d.replicas).contains(replica) {
                    return Err(at(format!(
                        "names replica {replica}, but the deployment has replicas 1 to {}",
                        d.replicas
                    )));
                }
                if lasts.is_some_and(|l| l.is_zero()) {
                    return Err(at("`for` must be longer than zero".into()));
                }
            }
            match &s.after {
                None => {
                    if s.at < last {
                        return Err(at(format!("at {:?} comes before an earlier step's time {last:?}", s.at)));
                    }
                    if s.at > self.duration {
                        return Err(at(format!("at {:?} is after the run's duration {:?}", s.at, self.duration)));
                    }
                    last = s.at;
                }
                Some(after) => match &after.trigger {
                    Trigger::Delivered { label, client } => {
                        if !labels.contains(label.as_str()) {
                            return Err(at(format!("waits for label {label:?}, which no earlier step issues")));
                        }
                        if let Some(c) = client.as_deref().filter(|c| !known(c)) {
                            return Err(at(format!("waits for unknown client {c:?}")));
                        }
                    }
                    Trigger::Answered { label } if !labels.contains(label.as_str()) => {
                        return Err(at(format!("waits for label {label:?}, which no earlier step issues")));
                    }
                    Trigger::Accepted { client } if !known(client) => {
                        return Err(at(format!("waits for unknown client {client:?}")));
                    }
                    Trigger::Step { step } if !ids.contains(step.as_str()) => {
                        return Err(at(format!("waits for step {step:?}, which no earlier step is")));
                    }
                    _ => {}
                },
            }
            if let Some(id) = &s.id {
                if !ids.insert(id) {
                    return Err(at(format!("step id {id:?} is used twice")));
                }
            }
            match &s.action {
                Action::ServerRequest { label, .. } | Action::CallTool { label, .. } if !labels.insert(label) => {
                    return Err(at(format!("label {label:?} is used twice")));
                }
                Action::Answer { label, .. } if !labels.contains(label.as_str()) => {
                    return Err(at(format!("answers label {label:?}, which no earlier step issues")));
                }
                Action::Resume { last_event_id: LastEventId::SeenBefore(label), .. }
                    if !labels.contains(label.as_str()) =>
                {
                    return Err(at(format!("resumes from before {label:?}, which no earlier step issues")));
                }
                Action::Call { label, tool, .. } => {
                    if !labels.insert(label) {
                        return Err(at(format!("label {label:?} is used twice")));
                    }
                    if !self.tools.iter().any(|t| &t.name == tool) {
                        return Err(at(format!("calls tool {tool:?}, which no [[tool]] declares")));
                    }
                }
                Action::StealRequestState { label, .. }
                | Action::TamperRequestState { label, .. }
                | Action::ReplayRequestState { label, .. }
                | Action::SeverCall { label, .. }
                | Action::ResetCall { label, .. }
                    if !labels.contains(label.as_str()) =>
                {
                    return Err(at(format!("names call {label:?}, which no earlier step makes")));
                }
                _ => {}
            }
        }
        Ok(())
    }
}
