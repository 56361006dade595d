//! How a live run knows it ran late: steps handed over late, timeouts that
//! ran out while the machine stalled, answers slower than a step may run
//! late. A late run is replayed slower ([`super::run`]), never judged as if
//! it were on time.

use crate::error::{Error, Result};
use crate::scenario::Plan;
use crate::trace::{SimTime, What};
use std::collections::BTreeMap;
use std::time::Duration;

/// The timeouts of a live run that ran out while the machine stalled (the
/// step loop woke later than a step may run late): a response head the
/// client waited for, a stream it found silent, a server request that timed
/// out. Each rests on the machine's speed, so the run's verdicts are not
/// counted as they are. In words, first to last.
pub(super) fn late_timeouts(trace: &crate::trace::Trace, stalls: &[(Duration, Duration)]) -> Vec<String> {
    use crate::trace::Outcome;
    if stalls.is_empty() {
        return Vec::new();
    }
    let stalled = |from: u64, to: u64| {
        stalls
            .iter()
            .find(|(a, b)| (a.as_micros() as u64) < to && (b.as_micros() as u64) > from)
            .map(|(a, b)| (SimTime::from_duration(*a), SimTime::from_duration(*b)))
    };
    let bound = trace.events.iter().find_map(|e| match &e.what {
        What::RunStarted { liveness_bound_us, .. } => Some(*liveness_bound_us),
        _ => None,
    });
    let mut out = Vec::new();
    for e in &trace.events {
        let (from, what) = match &e.what {
            What::UplinkSilent { client, conn, silent_ms } => (
                e.t_us.0.saturating_sub(silent_ms * 1000),
                format!("{client}'s conn {conn} heard nothing for {silent_ms} ms of scenario time"),
            ),
            What::RequestOutcome { label, outcome: Outcome::TimedOut, .. } => {
                (e.t_us.0.saturating_sub(bound.unwrap_or(u64::MAX)), format!("{label} timed out"))
            }
            _ => continue,
        };
        if let Some((a, b)) = stalled(from, e.t_us.0) {
            out.push(format!("{what} at {}, and the machine stalled from {a} to {b}", e.t_us));
        }
    }
    out
}

/// What the server process answered later than a step may run late, where
/// no server waits by design: the 202 that accepts a client's answer or
/// notification, and the answer to `initialize`. A server slower than that
/// could not keep up (the machine starved it), and then the order in which
/// it took two requests, which verdicts rest on, is the machine's: found
/// under load, where the TypeScript SDK took a resumption after an answer
/// sent later and replayed the answered request (correlation-consistency),
/// with no step late. A request in flight across a restart, a crash, a
/// drain or a store partition is left out (the server may wait for those),
/// and so are deployments (the caller's: an answer for a session another
/// replica holds waits for the store). In words, first to last.
pub(super) fn slow_answers(trace: &crate::trace::Trace, bound: Duration) -> Vec<String> {
    use crate::vocab::StepKind;
    // A partitioned replica waits for its store on every write until it heals.
    if trace.events.iter().any(|e| matches!(&e.what, What::Step { action: StepKind::Partition, .. })) {
        return Vec::new();
    }
    let bound_us = bound.as_micros() as u64;
    // The instants around which a server may wait by design.
    let waits: Vec<u64> = trace
        .events
        .iter()
        .filter(|e| match &e.what {
            What::Step { action, .. } => matches!(
                action,
                StepKind::RestartServer | StepKind::RestartReplica | StepKind::CrashReplica | StepKind::Drain
            ),
            What::ServerBack { .. } | What::ServerStopped { .. } => true,
            _ => false,
        })
        .map(|e| e.t_us.0)
        .collect();
    let mut sent: BTreeMap<(&str, crate::trace::ConnId), (u64, &str, bool)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in &trace.events {
        match &e.what {
            What::HttpRequest { client, conn, method, rpc, .. } => {
                let init = rpc.as_ref().is_some_and(|r| r.method == "initialize");
                sent.insert((client.as_str(), *conn), (e.t_us.0, method.as_str(), init));
            }
            What::HttpResponse { client, conn, status, .. } => {
                let Some((t, method, init)) = sent.remove(&(client.as_str(), *conn)) else { continue };
                let took = e.t_us.0.saturating_sub(t);
                if (*status == 202 || init) && took > bound_us && !waits.iter().any(|w| (t..=e.t_us.0).contains(w)) {
                    out.push(format!(
                        "the server took {:.3} s to answer {client}'s {method} on conn {conn} (sent at {})",
                        took as f64 / 1e6,
                        SimTime(t)
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// The steps of a live run that acted on nothing (and may not) for a reason
/// lateness explains: the run had late steps (`late`), or what the step
/// needed was on its way and came after it. For a resume with no id to
/// resume from: the client whose ids it takes received an event with an id
/// later. For a NAT fault that found nothing to cut: one of the client's
/// requests was in flight at the step (sent before it, answered after it).
/// A miss lateness does not explain (a step for a crashed client, a fault
/// on a feature the server does not offer) stays a miss, and the run is
/// not met.
pub(super) fn late_misses(plan: &Plan, trace: &crate::trace::Trace, late: bool) -> Vec<String> {
    use crate::scenario::{Action, LastEventId};
    let explained = |m: &crate::trace::MissedStep| {
        let Some(step) = plan.steps.get(m.index) else { return false };
        match &step.action {
            Action::Resume { client, last_event_id, .. } => {
                let by = match last_event_id {
                    LastEventId::Seen { client, .. } => client,
                    _ => client,
                };
                trace
                    .events
                    .iter()
                    .filter(|e| e.t_us > m.t)
                    .any(|e| matches!(&e.what, What::SseEvent { client, id: Some(_), .. } if client == by))
            }
            Action::Rebind { client } | Action::Sever { client } | Action::Reset { client } => {
                let sent: Vec<crate::trace::ConnId> = trace
                    .events
                    .iter()
                    .filter(|e| e.t_us <= m.t)
                    .filter_map(|e| match &e.what {
                        What::HttpRequest { client: c, conn, .. } if c == client => Some(*conn),
                        _ => None,
                    })
                    .collect();
                trace.events.iter().filter(|e| e.t_us > m.t).any(|e| {
                    matches!(&e.what, What::HttpResponse { client: c, conn, .. } if c == client && sent.contains(conn))
                })
            }
            _ => false,
        }
    };
    crate::trace::missed_steps(plan, trace)
        .into_iter()
        .filter(|m| !m.allowed && (late || explained(m)))
        .map(|m| m.line())
        .collect()
}

/// A test hook: `MCPSIM_INJECT_STEP_DELAY=<step index>:<milliseconds>`
/// stalls the live step loop that long (real time) before it hands that
/// step over, as an overloaded machine would. It lets a test prove that a
/// late step makes the run "timing unreliable" without loading the machine.
pub(super) fn injected_step_delay() -> Result<Option<(usize, Duration)>> {
    let Some(v) = std::env::var_os("MCPSIM_INJECT_STEP_DELAY") else { return Ok(None) };
    let v = v.to_string_lossy();
    let parsed = v.split_once(':').and_then(|(i, ms)| Some((i.parse().ok()?, Duration::from_millis(ms.parse().ok()?))));
    parsed.map(Some).ok_or_else(|| {
        Error::usage(format!("MCPSIM_INJECT_STEP_DELAY={v:?}: expected <step index>:<milliseconds>, e.g. 2:1500"))
    })
}
