//! `inflight-disposition`: every server request unanswered at a resumption is
//! re-issued under a fresh id (old id tombstoned) or failed explicitly.
//!
//! Evidence: a request still in flight when its session's resumption was
//! accepted that the application saw neither answered, re-issued nor failed
//! (it timed out, or was still open after the liveness bound); an answer
//! to a tombstoned id that the application applied; a request the
//! application settled twice, or settled as answered before any answer to
//! it was sent; a re-issued request delivered on one connection under both
//! its old and its new id; a re-issue that never reached the owner while
//! it had a usable stream; a re-issue that is not the same request (its
//! method or its params differ); a request the application marked not
//! reissuable that was re-issued (it must be failed, or the resumption refused).

use super::observe::{Observed, Request};
use super::{not_applicable, status, Finding, Status, Violation};
use crate::trace::{Outcome, SimTime};
use crate::vocab::CheckId;
use crate::wire::jsonrpc::RpcId;

pub const ID: CheckId = CheckId::InflightDisposition;
pub const ABOUT: &str = "requests in flight at a resumption are re-issued or failed, never left on the dead writer";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "Server requests still unanswered at a resumption are re-issued on the new uplink under a fresh id (old id tombstoned) or failed explicitly; never left on the fenced writer.",
    evidence: "The application's outcomes per request (answered, failed, re-issued with new id, timed out), and the resumptions of the owner's session that were sent while the request was pending.",
    condition: "In-flight request disposition: every unanswered server request issued on the prior uplink is re-issued with a fresh id or failed to the application layer; a late answer to a tombstoned id is not applied.",
    to_pass: "At each accepted resumption re-issue (or fail) every pending request, as the same method and params under a fresh id; ignore answers to tombstoned ids.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for r in o.requests.values() {
        judged |= reissues(r, &mut out);
        judged |= left_in_flight(o, r, &mut out);
    }
    judged |= answers_applied(o, &mut out);
    judged |= delivered_twice(o, &mut out);
    reissues_undelivered(o, &mut out);
    reissues_changed(o, &mut out);
    if !judged {
        return not_applicable("no server request was in flight at an accepted resumption");
    }
    status(out)
}

/// A re-issue of a request marked not reissuable, and answers applied to
/// a tombstoned id. Returns whether `r` was re-issued or not reissuable.
fn reissues(r: &Request, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    // Tombstoned ids: the old id of each re-issue.
    let tombstones: Vec<_> = r.outcomes.iter().filter(|x| x.2 == Outcome::Reissued).map(|x| (&x.3, x.0)).collect();
    if !tombstones.is_empty() {
        judged = true;
    }
    // A request the application marked not reissuable must be failed
    // or the resumption refused (condition 4): re-issuing it may have
    // the client do its non-idempotent work twice.
    if !r.reissuable {
        judged = true;
        if let Some((t, seq, _, old, new)) = r.outcomes.iter().find(|x| x.2 == Outcome::Reissued) {
            out.push(Violation {
                check: ID,
                finding: Finding::ReissuedNotReissuable {
                    label: r.label.clone(),
                    method: r.method.clone(),
                    old: old.clone(),
                    new: new.clone(),
                    at: *t,
                },
                t: *t,
                evidence: vec![r.issued.1, *seq],
                inherent: false,
            });
        }
    }
    for (t, seq, outcome, id, _) in &r.outcomes {
        if *outcome == Outcome::Answered {
            if let Some((_, t_tomb)) = tombstones.iter().find(|(old, tt)| *old == id && tt <= t) {
                out.push(Violation {
                    check: ID,
                    finding: Finding::AnswerToTombstone {
                        label: r.label.clone(),
                        id: id.clone(),
                        at: *t,
                        tombstoned_at: *t_tomb,
                    },
                    t: *t,
                    evidence: vec![r.issued.1, *seq],
                    inherent: false,
                });
            }
        }
    }
    judged
}

/// A request in flight when its owner's resumption was accepted that was
/// never re-issued, answered or failed (it timed out, or was still open at
/// the end). Returns whether `r` was in flight at an accepted resumption.
fn left_in_flight(o: &Observed, r: &Request, out: &mut Vec<Violation>) -> bool {
    // Was it in flight when a resumption of its owner's session was accepted?
    let resolved_at = r.resolution().map(|x| x.0);
    let Some((token, since)) = &r.session else { return false };
    let deadline = SimTime(r.issued.0 .0 + o.liveness_bound.0);
    if o.crashed_between(&r.owner, *since, deadline) {
        return false; // the client lost the session: nobody is left to re-issue to
    }
    // In flight for sure: issued before the resumption was even sent, and
    // not resolved before it was accepted.
    // Only a resumption of the stream that carries it (unseen: the uplink / standalone stream).
    let stream = o.carrier_of(r);
    let same_stream = |c: &&crate::check::observe::Conn| stream.as_ref().map_or(c.stream.is_get(), |s| c.stream == *s);
    let in_flight_at =
        o.conns.values().filter(|c| c.client == r.owner && c.token() == Some(token)).filter(same_stream).find_map(
            |c| {
                let (t_acc, seq) = c.accepted_resumption()?;
                let sent = c.request_seq.and_then(|s| o.events.iter().find(|e| e.seq == s)).map(|e| e.t_us)?;
                (r.issued.0 < sent && resolved_at.is_none_or(|t| t > t_acc)).then_some((t_acc, seq, c.conn))
            },
        );
    let Some((t_acc, acc_seq, conn)) = in_flight_at else { return false };
    let disposed = r.outcomes.iter().any(|x| matches!(x.2, Outcome::Reissued | Outcome::Failed | Outcome::Answered));
    let overdue = resolved_at.is_none() && o.end.0 >= r.issued.0 .0 + o.liveness_bound.0;
    let timed_out = r.resolution().filter(|x| x.2 == Outcome::TimedOut);
    if !disposed && (timed_out.is_some() || overdue) {
        let (t, mut evidence) = match timed_out {
            Some(x) => (x.0, vec![r.issued.1, acc_seq, x.1]),
            None => (o.end, vec![r.issued.1, acc_seq]),
        };
        evidence.sort();
        out.push(Violation {
            check: ID,
            finding: Finding::LeftInFlight {
                label: r.label.clone(),
                method: r.method.clone(),
                owner: r.owner.clone(),
                conn,
                accepted_at: t_acc,
                timed_out: timed_out.map(|x| x.0),
            },
            t,
            evidence,
            inherent: false,
        });
    }
    true
}

/// What the application did with answers: a request settled twice (a
/// second answer applied), or settled as answered before any client had
/// sent an answer to its id on its session (an answer applied to the wrong
/// request). Returns whether any answer was applied at all.
fn answers_applied(o: &Observed, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for r in o.requests.values() {
        let applied: Vec<_> = r.outcomes.iter().filter(|x| x.2 == Outcome::Answered).collect();
        judged |= !applied.is_empty();
        if let [first, second, ..] = applied.as_slice() {
            // Who sent the answer applied second: the last one to its id on
            // the request's session sent by then, named when not the owner.
            let by = o
                .answers
                .iter()
                .filter(|a| a.id == second.3 && r.token().is_none_or(|t| a.session.as_deref() == Some(t)))
                .filter(|a| a.sent(o).is_some_and(|s| s <= second.0))
                .max_by_key(|a| a.sent(o))
                .map(|a| a.client.clone())
                .filter(|c| *c != r.owner);
            out.push(Violation {
                check: ID,
                finding: Finding::AnsweredTwice {
                    label: r.label.clone(),
                    method: r.method.clone(),
                    first: (first.0, first.3.clone()),
                    second: (second.0, second.3.clone()),
                    by,
                },
                t: second.0,
                evidence: vec![r.issued.1, first.1, second.1],
                inherent: false,
            });
        }
        let Some(token) = r.token() else { continue };
        for (t_o, seq_o, _, id, _) in applied {
            let any = o
                .answers
                .iter()
                .any(|a| &a.id == id && a.session.as_deref() == Some(token) && a.maybe_sent_by(o, *t_o))
                || o.unknown_post_by(token, *t_o);
            if !any {
                out.push(Violation {
                    check: ID,
                    finding: Finding::AnswerWithoutSender {
                        label: r.label.clone(),
                        method: r.method.clone(),
                        id: id.clone(),
                        at: *t_o,
                    },
                    t: *t_o,
                    evidence: vec![r.issued.1, *seq_o],
                    inherent: false,
                });
            }
        }
    }
    judged
}

/// How long a re-issue may take to reach a usable stream (a round trip).
const REISSUE_ALLOWANCE_US: u64 = 1_000_000;

/// A re-issue must reach the client: one handed to the prior (fenced, or
/// dead) writer instead of the accepted uplink leaves the request in
/// flight under a fresh id, and shows otherwise only as a timeout, or as
/// nothing when the timeout outlasts the run. Judged where the owner had
/// a usable stream of the request's kind from within a round trip of the
/// re-issue, for a round trip, and never received the new id; a re-issue
/// the application then failed or saw answered is settled.
fn reissues_undelivered(o: &Observed, out: &mut Vec<Violation>) {
    for r in o.requests.values() {
        let Some(token) = r.token() else { continue };
        let stream = o.carrier_of(r).filter(|s| s.is_call());
        for (t_re, seq_re, _, _, new) in r.outcomes.iter().filter(|x| x.2 == Outcome::Reissued) {
            let Some(new) = new else { continue };
            // (A re-issue that was itself re-issued is disposed of by the
            // later one, whose delivery is judged in its turn: found by a
            // hunt, where guarded re-issued at a resumption the client had
            // already given up on, then again at the next.)
            let settled = r.outcomes.iter().any(|x| {
                x.0 >= *t_re
                    && (matches!(x.2, Outcome::Failed | Outcome::Answered) || (x.2 == Outcome::Reissued && &x.3 == new))
            });
            let received = o.conns.values().any(|c| {
                c.client == r.owner
                    && c.token() == Some(token)
                    && c.delivered.iter().any(|d| d.request_id() == Some(new))
            });
            if settled || received {
                continue;
            }
            // A request that timed out after its re-issue had a round trip on
            // a usable stream is the symptom judged here; one that timed out
            // sooner ended before its re-issue could arrive.
            let timed_out = r.outcomes.iter().find(|x| x.0 >= *t_re && x.2 == Outcome::TimedOut).map(|x| x.0);
            let Some((since, _)) = o.usable_streams(&r.owner, token, stream.as_ref()).into_iter().find(|(a, b)| {
                let due = a.0.max(t_re.0) + REISSUE_ALLOWANCE_US;
                a.0 <= t_re.0 + REISSUE_ALLOWANCE_US && b.0 >= due && timed_out.is_none_or(|t| t.0 >= due)
            }) else {
                continue;
            };
            // Where it went instead, when a NAT saw it: a dropped mapping.
            let mut evidence = vec![r.issued.1, *seq_re];
            evidence.extend(
                o.mappings
                    .values()
                    .flat_map(|m| m.dropped_writes.iter())
                    .find(|w| w.3.iter().any(|e| e.rpc.as_ref().is_some_and(|x| x.id.as_ref() == Some(new))))
                    .map(|w| w.1),
            );
            out.push(Violation {
                check: ID,
                finding: Finding::ReissueNeverDelivered {
                    label: r.label.clone(),
                    method: r.method.clone(),
                    owner: r.owner.clone(),
                    new: new.clone(),
                    at: *t_re,
                    live_since: since,
                },
                t: *t_re,
                evidence,
                inherent: false,
            });
        }
    }
}

/// A re-issue is the same request under a fresh id: the same method and
/// params (their digest, leaving out `_meta`). Judged where the trace saw
/// both the old id (delivered, or written into a dropped mapping) and the
/// new one on the request's session.
fn reissues_changed(o: &Observed, out: &mut Vec<Violation>) {
    for r in o.requests.values() {
        for (_, seq_re, _, old, new) in r.outcomes.iter().filter(|x| x.2 == Outcome::Reissued) {
            let Some(new) = new else { continue };
            let (Some((seq_a, a)), Some((seq_b, b))) = (o.first_sighting(r, old), o.first_sighting(r, new)) else {
                continue;
            };
            let differs = if a.method != b.method {
                "method"
            } else if a.params != b.params {
                "params"
            } else {
                continue;
            };
            let Some(t) = o.events.iter().find(|e| e.seq == seq_b).map(|e| e.t_us) else { continue };
            let method = |x: &crate::wire::jsonrpc::RpcSummary| x.method.clone().unwrap_or_default();
            let mut evidence = vec![seq_a, *seq_re, seq_b];
            evidence.sort();
            out.push(Violation {
                check: ID,
                finding: Finding::ReissueChanged {
                    label: r.label.clone(),
                    old: (old.clone(), method(a)),
                    new: (new.clone(), method(b)),
                    differs,
                    at: t,
                },
                t,
                evidence,
                inherent: false,
            });
        }
    }
}

/// A request re-issued under a fresh id must replace, not join, the old
/// one: both ids delivered on one connection hand the client the same
/// request twice (it does the work twice). Returns whether any re-issued
/// request was delivered at all.
fn delivered_twice(o: &Observed, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for r in o.requests.values() {
        for (t_re, seq_re, _, old, new) in r.outcomes.iter().filter(|x| x.2 == Outcome::Reissued) {
            let Some(new) = new else { continue };
            for c in o.conns.values().filter(|c| r.token().is_none_or(|t| c.token() == Some(t))) {
                let of = |id: &RpcId| c.delivered.iter().find(|d| d.request_id() == Some(id));
                let Some(b) = of(new) else { continue };
                judged = true;
                let Some(a) = of(old) else { continue };
                out.push(Violation {
                    check: ID,
                    finding: Finding::ReachedTwice {
                        label: r.label.clone(),
                        client: c.client.clone(),
                        conn: c.conn,
                        reissued_at: *t_re,
                        old: (old.clone(), a.id.clone(), a.t),
                        new: (new.clone(), b.id.clone(), b.t),
                    },
                    t: b.t,
                    evidence: {
                        let mut e = vec![a.seq, *seq_re, b.seq];
                        e.sort();
                        e
                    },
                    inherent: false,
                });
            }
        }
    }
    judged
}
