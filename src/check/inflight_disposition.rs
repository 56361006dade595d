//! `inflight-disposition`: every server request unanswered at a resumption is
//! re-issued under a fresh id (old id tombstoned) or failed explicitly.
//!
//! Evidence: a request still in flight when its session's resumption was
//! accepted that the application saw neither answered, re-issued nor failed
//! (it timed out, or was still open after the liveness bound); or an answer
//! to a tombstoned id that the application applied.

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};
use crate::trace::{Outcome, SimTime};

pub const ID: &str = "inflight-disposition";
pub const ABOUT: &str = "requests in flight at a resumption are re-issued or failed, never left on the dead writer";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "Server requests still unanswered at a resumption are re-issued on the new uplink under a fresh id (old id tombstoned) or failed explicitly; never left on the fenced writer.",
    evidence: "The application's outcomes per request (answered, failed, re-issued with new id, timed out), and the resumptions of the owner's session that were sent while the request was pending.",
    condition: "In-flight request disposition: every unanswered server request issued on the prior uplink is re-issued with a fresh id or failed to the application layer; a late answer to a tombstoned id is not applied.",
    to_pass: "At each accepted resumption re-issue (or fail) every pending request; ignore answers to tombstoned ids.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for r in o.requests.values() {
        // Tombstoned ids: the old id of each re-issue.
        let tombstones: Vec<_> = r.outcomes.iter().filter(|x| x.2 == Outcome::Reissued).map(|x| (&x.3, x.0)).collect();
        if !tombstones.is_empty() {
            judged = true;
        }
        for (t, seq, outcome, id, _) in &r.outcomes {
            if *outcome == Outcome::Answered {
                if let Some((_, t_tomb)) = tombstones.iter().find(|(old, tt)| *old == id && tt <= t) {
                    out.push(Violation {
                        check: ID,
                        headline: format!(
                            "the application applied an answer to {} ({id}) at {t}, an id tombstoned at {t_tomb}",
                            r.label
                        ),
                        t: *t,
                        evidence: vec![r.issued.1, *seq],
                        inherent: false,
                    });
                }
            }
        }
        // Was it in flight when a resumption of its owner's session was accepted?
        let resolved_at = r.resolution().map(|x| x.0);
        let Some((token, since)) = &r.session else { continue };
        let deadline = SimTime(r.issued.0 .0 + o.liveness_bound.0);
        if o.crashed_between(&r.owner, *since, deadline) {
            continue; // the client lost the session: nobody is left to re-issue to
        }
        // In flight for sure: issued before the resumption was even sent, and
        // not resolved before it was accepted.
        // Only a resumption of the stream that carries it (unseen: the uplink / standalone stream).
        let stream = o.stream_of_request(r);
        let same_stream =
            |c: &&crate::check::observe::Conn| stream.map_or(c.stream.starts_with("get:"), |s| c.stream == s);
        let in_flight_at =
            o.conns.values().filter(|c| c.client == r.owner && c.token() == Some(token)).filter(same_stream).find_map(
                |c| {
                    let (t_acc, seq) = c.accepted_resumption()?;
                    let sent = c.request_seq.and_then(|s| o.events.iter().find(|e| e.seq == s)).map(|e| e.t_us)?;
                    (r.issued.0 < sent && resolved_at.is_none_or(|t| t > t_acc)).then_some((t_acc, seq, c.conn))
                },
            );
        let Some((t_acc, acc_seq, conn)) = in_flight_at else { continue };
        judged = true;
        let disposed =
            r.outcomes.iter().any(|x| matches!(x.2, Outcome::Reissued | Outcome::Failed | Outcome::Answered));
        let overdue = resolved_at.is_none() && o.end.0 >= r.issued.0 .0 + o.liveness_bound.0;
        let timed_out = r.resolution().filter(|x| x.2 == Outcome::TimedOut);
        if !disposed && (timed_out.is_some() || overdue) {
            let (t, mut evidence, fate) = match timed_out {
                Some(x) => (x.0, vec![r.issued.1, acc_seq, x.1], format!("timed out at {}", x.0)),
                None => (o.end, vec![r.issued.1, acc_seq], "still open at the end".to_string()),
            };
            evidence.sort();
            out.push(Violation {
                check: ID,
                headline: format!(
                    "{} ({}) was in flight when {}'s resumption was accepted on conn {conn} at {t_acc}; never re-issued or failed, {fate}",
                    r.label, r.method, r.owner
                ),
                t,
                evidence, inherent: false });
        }
    }
    if !judged {
        return not_applicable("no server request was in flight at an accepted resumption");
    }
    status(out)
}
