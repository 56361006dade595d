//! The one semantic check of a [`Plan`], whoever built it: the loader (after
//! its own located checks), the world (for hand-built plans) and the
//! shrinker (for every candidate it tries). A plan that passes runs; a plan
//! the shrinker writes therefore loads back.

use super::{Action, LastEventId, Plan, Step, Trigger};
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

/// What the steps before the one being checked defined.
struct Defined<'a> {
    /// The clients (all of them: `[[client]]` comes first).
    names: BTreeSet<&'a str>,
    /// The labels of the requests and calls issued so far.
    labels: BTreeSet<&'a str>,
    /// The step ids so far.
    ids: BTreeSet<&'a str>,
    /// The time of the last timed step.
    last: Duration,
}

impl Plan {
    /// Checks that every name a step uses is defined before it is used, that
    /// timed steps are in order and within the run, and that each step kind
    /// exists in the plan's dialect.
    pub fn validate(&self) -> Result<(), PlanProblem> {
        let whole = |message: String| PlanProblem { step: None, message };
        if let Some((_, why)) = self.deployment.problem(self.dialect) {
            return Err(whole(why));
        }
        let mut names = BTreeSet::new();
        for c in &self.clients {
            if !names.insert(c.name.as_str()) {
                return Err(whole(format!("client {:?} is defined twice", c.name)));
            }
        }
        let mut defined = Defined { names, labels: BTreeSet::new(), ids: BTreeSet::new(), last: Duration::ZERO };
        for (i, s) in self.steps.iter().enumerate() {
            self.check_step(s, &mut defined).map_err(|message| PlanProblem { step: Some(i), message })?;
        }
        Ok(())
    }

    /// One step's rules, in order; what it defines is added to `defined`.
    fn check_step<'a>(&'a self, s: &'a Step, defined: &mut Defined<'a>) -> Result<(), String> {
        self.check_names_and_kind(s, defined)?;
        self.check_replica(&s.action)?;
        self.check_timing(s, defined)?;
        if let Some(id) = &s.id {
            if !defined.ids.insert(id) {
                return Err(format!("step id {id:?} is used twice"));
            }
        }
        self.check_labels(&s.action, &mut defined.labels)
    }

    /// The clients the step names are defined, and its kind exists in the dialect.
    fn check_names_and_kind(&self, s: &Step, defined: &Defined<'_>) -> Result<(), String> {
        let mut used: Vec<&str> = s.action.clients();
        if let Action::Resume { last_event_id: LastEventId::Seen { client, .. }, .. } = &s.action {
            used.push(client);
        }
        if let Some(c) = used.into_iter().find(|c| !defined.names.contains(c)) {
            return Err(format!("names unknown client {c:?}"));
        }
        if !self.dialect.step_kinds().contains(&s.action.kind()) {
            return Err(format!("`{}` needs dialect {}", s.action.name(), super::load::dialects_with(s.action.kind())));
        }
        Ok(())
    }

    /// A replica fault names a replica of the deployment, which has more
    /// than one (and a shared store, for `partition`).
    fn check_replica(&self, action: &Action) -> Result<(), String> {
        let d = &self.deployment;
        if let Action::RestartReplica { replica } | Action::CrashReplica { replica } | Action::Drain { replica } =
            action
        {
            if d.is_single() {
                return Err(format!("`{}` acts on one replica: it needs [deployment] replicas > 1", action.name()));
            }
            if !(1..=d.replicas).contains(replica) {
                return Err(format!("names replica {replica}, but the deployment has replicas 1 to {}", d.replicas));
            }
        }
        if let Action::Partition { replica, lasts } = action {
            if d.store != super::StoreKind::Shared || d.is_single() {
                return Err(
                    "`partition` cuts a replica from the shared store: it needs [deployment] replicas > 1 and store = \"shared\"".into(),
                );
            }
            if !(1..=d.replicas).contains(replica) {
                return Err(format!("names replica {replica}, but the deployment has replicas 1 to {}", d.replicas));
            }
            if lasts.is_some_and(|l| l.is_zero()) {
                return Err("`for` must be longer than zero".into());
            }
        }
        Ok(())
    }

    /// A timed step is in time order and within the run; a triggered one
    /// waits for what an earlier step defined.
    fn check_timing(&self, s: &Step, defined: &mut Defined<'_>) -> Result<(), String> {
        let Some(after) = &s.after else {
            if s.at < defined.last {
                return Err(format!("at {:?} comes before an earlier step's time {:?}", s.at, defined.last));
            }
            if s.at > self.duration {
                return Err(format!("at {:?} is after the run's duration {:?}", s.at, self.duration));
            }
            defined.last = s.at;
            return Ok(());
        };
        let (labels, known) = (&defined.labels, |c: &str| defined.names.contains(c));
        match &after.trigger {
            Trigger::Delivered { label, client } => {
                if !labels.contains(label.as_str()) {
                    return Err(format!("waits for label {label:?}, which no earlier step issues"));
                }
                if let Some(c) = client.as_deref().filter(|c| !known(c)) {
                    return Err(format!("waits for unknown client {c:?}"));
                }
            }
            Trigger::Answered { label } if !labels.contains(label.as_str()) => {
                return Err(format!("waits for label {label:?}, which no earlier step issues"));
            }
            Trigger::Accepted { client } if !known(client) => {
                return Err(format!("waits for unknown client {client:?}"));
            }
            Trigger::Step { step } if !defined.ids.contains(step.as_str()) => {
                return Err(format!("waits for step {step:?}, which no earlier step is"));
            }
            _ => {}
        }
        Ok(())
    }

    /// A request or call brings a new label; a step that names one names an
    /// earlier step's (a call's: of a tool `[[tool]]` declares).
    fn check_labels<'a>(&self, action: &'a Action, labels: &mut BTreeSet<&'a str>) -> Result<(), String> {
        match action {
            Action::ServerRequest { label, .. } | Action::CallTool { label, .. } if !labels.insert(label) => {
                return Err(format!("label {label:?} is used twice"));
            }
            Action::Answer { label, .. } if !labels.contains(label.as_str()) => {
                return Err(format!("answers label {label:?}, which no earlier step issues"));
            }
            Action::Resume { last_event_id: LastEventId::SeenBefore(label), .. }
                if !labels.contains(label.as_str()) =>
            {
                return Err(format!("resumes from before {label:?}, which no earlier step issues"));
            }
            Action::Call { label, tool, .. } => {
                if !labels.insert(label) {
                    return Err(format!("label {label:?} is used twice"));
                }
                if !self.tools.iter().any(|t| &t.name == tool) {
                    return Err(format!("calls tool {tool:?}, which no [[tool]] declares"));
                }
            }
            Action::StealRequestState { label, .. }
            | Action::TamperRequestState { label, .. }
            | Action::ReplayRequestState { label, .. }
            | Action::SeverCall { label, .. }
            | Action::ResetCall { label, .. }
                if !labels.contains(label.as_str()) =>
            {
                return Err(format!("names call {label:?}, which no earlier step makes"));
            }
            _ => {}
        }
        Ok(())
    }
}
