//! `liveness`: every server request resolves (answered or explicitly failed)
//! within the bound, and every client that keeps trying converges on a live
//! uplink once faults stop.
//!
//! Evidence: a request the application saw time out, or still open at the
//! end of a run longer than the bound after it; a client (not crashed) whose
//! latest uplink at the end is missing, refused, ended or silently dropped
//! although the last fault was long enough before the end to recover.

use super::observe::Observed;
use super::{status, Status, Violation};
use crate::trace::{Outcome, SimTime};

pub const ID: &str = "liveness";
pub const ABOUT: &str =
    "every server request resolves within the bound; clients converge on a live uplink after faults";

/// Steps after which a client needs time to recover.
const FAULTS: [&str; 5] = ["rebind", "sever", "reset", "crash-client", "steal-token"];

pub fn judge(o: &Observed) -> Status {
    let mut out = Vec::new();
    for r in o.requests.values() {
        match r.resolution() {
            Some((t, seq, Outcome::TimedOut, _, _)) => out.push(Violation {
                check: ID,
                headline: format!(
                    "{} ({}) issued at {} timed out at {} without an answer",
                    r.label, r.method, r.issued.0, t
                ),
                t: *t,
                evidence: vec![r.issued.1, *seq],
                inherent: false,
            }),
            None if o.end.0 >= r.issued.0 .0 + o.liveness_bound.0 => out.push(Violation {
                check: ID,
                headline: format!(
                    "{} ({}) issued at {} was still unresolved at the end, more than {} later",
                    r.label, r.method, r.issued.0, o.liveness_bound
                ),
                t: o.end,
                evidence: vec![r.issued.1],
                inherent: false,
            }),
            _ => {}
        }
    }
    let last_fault = o.steps.iter().filter(|s| FAULTS.contains(&s.2.as_str())).map(|s| s.0).max().unwrap_or(SimTime(0));
    for (client, timeout) in &o.heartbeat_timeouts {
        if o.crashed.get(client).is_some_and(|t| !o.conns.values().any(|c| &c.client == client && c.opened > *t)) {
            continue; // crashed and never restarted
        }
        // Time to notice a dead uplink (twice: a resume may land on a stale
        // path once), plus the longest backoff between attempts.
        let settle = SimTime(timeout.0 * 2 + crate::client::MAX_BACKOFF.as_micros() as u64);
        if o.end.0 < last_fault.0 + settle.0 {
            continue;
        }
        let Some(last) =
            o.conns.values().filter(|c| &c.client == client && c.is_uplink()).max_by_key(|c| (c.opened, c.conn))
        else {
            continue; // never connected
        };
        let dropped =
            o.mapping_of(last).and_then(|m| m.dropped.clone().or(m.reset.map(|(t, s)| (t, s, "reset".into()))));
        let problem = if let Some((_, _, how)) = &last.rejected {
            Some(format!("refused ({how})"))
        } else if let Some((_, _, why)) = &last.ended {
            Some(format!("ended: {why}"))
        } else if let Some((_, _, fault)) = &dropped {
            Some(format!("its NAT mapping was dropped ({fault})"))
        } else if !matches!(last.response, Some((200, true, _, _))) {
            Some("never answered with an event stream".into())
        } else {
            None
        };
        if let Some(problem) = problem {
            out.push(Violation {
                check: ID,
                headline: format!(
                    "{client} has no live uplink at the end ({}): its latest uplink, conn {}, {problem}",
                    o.end, last.conn
                ),
                t: o.end,
                evidence: last.request_seq.into_iter().collect(),
                inherent: false,
            });
        }
    }
    status(out)
}
