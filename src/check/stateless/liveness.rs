//! `liveness` of stateless-http: every call a client made completes (re-issued
//! if its response was lost), a listen is accepted, and a tool-list change
//! reaches every open listen stream. A refusal ends a call rightly only when
//! the attempt was not valid any more ([`validity`]).

use super::index::{self, Index};
use super::{not_applicable, status, v, CheckId, Status, Violation, CLOSE_GRACE, F};
use crate::trace::stateless::{Attempt, CallEnd, StateHow, StateVerdict};
use crate::trace::SimTime;
use std::collections::BTreeMap;

/// Rounds in a row after which a call asked again is stuck for good.
const ASKED_AGAIN_ROUNDS: usize = 3;

/// Asked again forever (issue "Bugs that escape", item 6): retries that
/// answered the server's input request, whose state the server accepted,
/// answered `input_required` once more and started no execution,
/// [`ASKED_AGAIN_ROUNDS`] in a row. Judged at once: waiting for the
/// request bound would let a scenario end first. Returns the rounds, and
/// the time and seq of the last one's answer.
fn asked_again(ix: &Index, attempts: &[&index::Sent]) -> Option<(usize, SimTime, u64)> {
    let mut streak = 0;
    for a in attempts {
        let Some((CallEnd::InputRequired { .. }, t, seq)) = &a.end else {
            streak = 0;
            continue;
        };
        let accepted = ix.checked.iter().any(|c| c.0 == a.call && c.1 == a.id && c.4 == StateVerdict::Accepted);
        let ran = ix.execs.values().any(|x| x.call == a.call && x.id == a.id);
        if a.attempt != Attempt::Retry || !accepted || ran {
            streak = 0;
            continue;
        }
        streak += 1;
        if streak == ASKED_AGAIN_ROUNDS {
            return Some((streak, *t, *seq));
        }
    }
    None
}
/// `liveness`: every call a client made completes, re-issued or not.
pub(super) fn liveness(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut calls: Vec<(&str, &str)> = Vec::new();
    for s in ix.sent.iter().filter(|s| s.attempt == Attempt::First) {
        if !calls.contains(&(&s.client, &s.call)) {
            calls.push((&s.client, &s.call));
        }
    }
    if calls.is_empty() && ix.listens.is_empty() {
        return not_applicable("no client made a call or listened");
    }
    for (client, call) in calls {
        // A call the client's crash cut short is not the server's to finish.
        let first = ix.sent.iter().find(|s| s.client == client && s.call == call).map_or(SimTime(0), |s| s.t);
        if ix.crashed.get(client).is_some_and(|cs| cs.iter().any(|c| *c >= first)) {
            continue;
        }
        let attempts: Vec<_> = ix
            .sent
            .iter()
            .filter(|s| s.client == client && s.call == call && s.attempt != Attempt::Presented)
            .collect();
        let done = attempts.iter().any(|s| matches!(s.end, Some((CallEnd::Complete { .. }, _, _))));
        if done {
            continue;
        }
        out.extend(unfinished_call(ix, client, call, &attempts));
    }
    listens(ix, &mut out);
    out.sort_by_key(|v| v.t);
    status(out)
}

/// What a call that never completed, made of `attempts`, is found to be:
/// asked again forever, given up, refused though valid, or unanswered once
/// the bound has passed (none: its end is another check's finding, or right).
fn unfinished_call(ix: &Index, client: &str, call: &str, attempts: &[&index::Sent]) -> Option<Violation> {
    if let Some((rounds, at, seq)) = asked_again(ix, attempts) {
        return Some(v(
            CheckId::Liveness,
            F::AskedAgain { client: client.to_string(), call: call.to_string(), rounds, at },
            at,
            vec![attempts[0].seq, seq],
            false,
        ));
    }
    let last = attempts.last().expect("a first attempt");
    let abandoned = ix.abandoned.iter().find(|a| a.0 == client && a.1 == call);
    let (words, t, seq) = match (&last.end, abandoned) {
        (_, Some(a)) => (format!("the client gave up: {}", a.2), a.3, a.4),
        // An explicit refusal ends a call, and is right when the state was
        // not valid any more; a refusal of a valid request is not.
        (Some((CallEnd::Error { code, message }, t, seq)), _) => match validity(ix, last) {
            Validity::Valid => (format!("its last request, valid, got JSON-RPC error {code} ({message})"), *t, *seq),
            Validity::Invalid => return None,
            // A refusal that was right: the call cannot complete, and it is
            // inherent, for the reason its validity gives.
            inherent @ (Validity::SpentUnseen | Validity::StoreCut(_) | Validity::Spent) => {
                let why = rightly_refused(&inherent, *code, message);
                return Some(never_completed(client, call, attempts.len(), why, *t, vec![attempts[0].seq, *seq], true));
            }
        },
        // A response the client could not read, or a server error, is
        // `protocol`'s finding: the call that it ended is no second bug
        // (issue "Bugs that escape", item 9: an input_required with
        // neither field once showed as two).
        (Some((CallEnd::Garbled { .. }, _, _)), _) => return None,
        (Some((CallEnd::Status { status }, _, _)), _) if *status >= 500 => return None,
        (Some((CallEnd::Status { status }, t, seq)), _) => (format!("its last request got HTTP {status}"), *t, *seq),
        // Still under way at the end (a long tool, or a re-issue waiting):
        // judged only once the bound has passed since the call began.
        (end, _) => return still_unanswered(ix, client, call, attempts, end),
    };
    Some(never_completed(client, call, attempts.len(), words, t, vec![attempts[0].seq, seq], false))
}

/// Why a call whose last attempt was refused rightly (error `code`,
/// `message`) cannot complete, and why that is inherent.
fn rightly_refused(validity: &Validity, code: i64, message: &str) -> String {
    match validity {
        Validity::SpentUnseen => format!("its one-time state was refused (error {code}: {message}) after an earlier request presenting it went unanswered across a server restart or a cut from the store, which may have recorded its redemption; inherent: a state spent by a request the server never finished cannot be spent again"),
        Validity::StoreCut(replica) => format!("its one-time state reached replica {replica} while a partition cut it from the store, and was refused (error {code}: {message}); inherent: without the store no replica can tell a first redemption from a second"),
        // Spent.
        _ => format!("its one-time state had been redeemed by another request of the client, so this one was refused (error {code}); inherent: nothing tells a re-issue from a second redemption"),
    }
}

/// A call still under way at the end (its last attempt ended as `end`),
/// judged once the bound has passed since it began; inherent when a request
/// of it went half-open.
fn still_unanswered(
    ix: &Index,
    client: &str,
    call: &str,
    attempts: &[&index::Sent],
    end: &Option<(CallEnd, SimTime, u64)>,
) -> Option<Violation> {
    if attempts[0].t.0 + ix.bound.0 > ix.end.0 {
        return None;
    }
    let how = match end {
        Some((CallEnd::Lost { why }, _, _)) => format!("its last request's response was lost ({why})"),
        _ => "its last request was still unanswered".into(),
    };
    let secs = ix.bound.0 / 1_000_000;
    // A request that went half-open cost the client its own
    // timeouts before it could re-issue: the delay is the network's.
    let half_open = attempts.iter().any(|a| ix.fate(a).is_some_and(|f| f.dropped.is_some()));
    let why = if half_open {
        "; a request of it went half-open, and the client's timeouts took the time (inherent)"
    } else {
        ""
    };
    let words = format!("not completed within {secs} s; at the end {how}{why}");
    let evidence = vec![attempts[0].seq, attempts[attempts.len() - 1].seq];
    Some(never_completed(client, call, attempts.len(), words, ix.end, evidence, half_open))
}

/// The finding of a call that never completed after `attempts` attempts, in the words `last`.
fn never_completed(
    client: &str,
    call: &str,
    attempts: usize,
    last: String,
    t: SimTime,
    evidence: Vec<u64>,
    inherent: bool,
) -> Violation {
    let finding = F::CallNeverCompleted { client: client.to_string(), call: call.to_string(), attempts, last };
    v(CheckId::Liveness, finding, t, evidence, inherent)
}

/// Listen streams: a new listen is accepted (no lock-out), and a change
/// reaches every client whose listen stream was open and live then; one
/// written into a half-open stream is lost, and that is inherent.
fn listens(ix: &Index, out: &mut Vec<Violation>) {
    // Refusals in a row (no listen accepted between them) are one lock-out.
    let mut run: BTreeMap<&str, (F, SimTime, Vec<u64>)> = BTreeMap::new();
    // A server that never accepted a listen and answers it "method not
    // found" does not offer the feature (FastMCP: `tools.listChanged =
    // false`): nothing to lock anyone out of, so no refusal is judged.
    let not_found = |l: &&index::Listen| matches!(&l.end, Some((CallEnd::Error { code: -32601, .. }, _, _)));
    let not_offered = ix.listens.iter().all(|l| l.acked.is_none()) && ix.listens.iter().any(|l| not_found(&l));
    let flush = |run: &mut BTreeMap<&str, (F, SimTime, Vec<u64>)>, client: &str, out: &mut Vec<Violation>| {
        if let Some((f, at, evidence)) = run.remove(client) {
            out.push(v(CheckId::Liveness, f, at, evidence, false));
        }
    };
    for l in ix.listens.iter().filter(|l| !(not_offered && not_found(l))) {
        let refused = match &l.end {
            Some((CallEnd::Status { status }, t, seq)) => Some((format!("HTTP {status}"), *t, *seq)),
            Some((CallEnd::Error { code, message }, t, seq)) => {
                Some((format!("JSON-RPC error {code}: {message}"), *t, *seq))
            }
            _ => None,
        };
        match refused {
            Some((how, at, seq)) => match run.get_mut(l.client.as_str()) {
                Some((F::ListenRefused { times, until, .. }, _, evidence)) => {
                    *times += 1;
                    *until = at;
                    evidence.push(seq);
                }
                _ => {
                    let f =
                        F::ListenRefused { client: l.client.clone(), id: l.id.clone(), at, how, times: 1, until: at };
                    run.insert(&l.client, (f, at, vec![l.seq, seq]));
                }
            },
            None if l.acked.is_some() => flush(&mut run, &l.client, out),
            None => {}
        }
    }
    let clients: Vec<&str> = run.keys().copied().collect();
    for c in clients {
        flush(&mut run, c, out);
    }
    for &(n, changed_at, cseq) in &ix.tool_changes {
        // The listen stream of each client that was acknowledged before the
        // change and still open a grace after it (a stream that broke within
        // that grace was dying when the change came: a restart, a reset on
        // its way; nothing was owed to it).
        for l in ix.listens.iter().filter(|l| {
            l.acked.is_some_and(|a| a <= changed_at)
                && l.end.as_ref().is_none_or(|e| e.1 .0 > changed_at.0 + CLOSE_GRACE.0)
        }) {
            // A notification counts from a grace before the report: a live
            // server's report travels the control connection and can reach
            // the trace after the notification reached the client.
            if l.changes.iter().any(|t| t.0 + CLOSE_GRACE.0 >= changed_at.0) {
                continue;
            }
            let fate = ix.listen_mapping(l).and_then(|m| ix.mappings.get(&(l.client.clone(), m)));
            // Dropped before the change could arrive (a hop, within the grace): lost to the half-open stream.
            let half_open = fate.is_some_and(|f| f.dropped.is_some_and(|d| d.0 .0 <= changed_at.0 + CLOSE_GRACE.0));
            // Judged once the change had time to arrive: a second, or the end.
            if !half_open && changed_at.0 + CLOSE_GRACE.0 > ix.end.0 {
                continue;
            }
            out.push(v(
                CheckId::Liveness,
                F::ChangeNotDelivered { client: l.client.clone(), n, changed_at, id: l.id.clone(), half_open },
                changed_at,
                vec![l.seq, cseq],
                half_open,
            ));
        }
    }
}

/// What a refusal of an attempt means.
enum Validity {
    /// The attempt was valid when the server got it: refusing it is the server's doing.
    Valid,
    /// Its state was not valid any more (altered, another's, expired, or
    /// close enough to its expiry that the trace cannot tell): a refusal is right.
    Invalid,
    /// Its one-time state had been redeemed already, by another request (an
    /// earlier one whose response the client never got, or one of its own
    /// presentations): refusing is right, and the result is lost (inherent:
    /// the protocol cannot tell a re-issue from a second redemption).
    Spent,
    /// Its one-time state was valid, but the replica that checked it could
    /// not reach the shared store (a partition): refusing is the only answer
    /// that keeps the state one-time (inherent to the partition).
    StoreCut(u32),
    /// Its one-time state may have been redeemed where the trace cannot see
    /// it: an earlier request presenting it was in flight, unanswered, when
    /// the server restarted, or was refused while its replica was cut from
    /// the store. The store may hold that redemption (recorded before the
    /// process died, or whose answer the cut lost): a refusal is right, and
    /// the call cannot complete (inherent).
    SpentUnseen,
}

/// Whether attempt `s` was valid as sent: no state, or its own state as the
/// server handed it, surely inside the lifetime the server gave it (a
/// [`CLOSE_GRACE`] from its end), and not a one-time state already redeemed.
fn validity(ix: &Index, s: &index::Sent) -> Validity {
    let Some(p) = &s.state else { return Validity::Valid };
    if p.how != StateHow::AsReceived {
        return Validity::Invalid;
    }
    let Some(m) = ix.minted.get(&p.fp) else { return Validity::Valid };
    if m.lifetime_us.is_some_and(|l| s.t.0 + CLOSE_GRACE.0 > m.t.0 + l) {
        return Validity::Invalid;
    }
    // Redeemed by another request (a re-issue's lost original, or the
    // client's own second presentation) before the server checked this one.
    // A redemption after it does not make it invalid when it arrived.
    let mine = |c: &&index::Checked| c.1 == s.id && c.2 == s.principal;
    let checked_at = ix.checked.iter().filter(|c| c.3 == p.fp).filter(mine).map(|c| c.5).min();
    let redeemed = ix
        .checked
        .iter()
        .any(|c| c.3 == p.fp && c.4 == StateVerdict::Accepted && !mine(&c) && checked_at.is_none_or(|at| c.5 <= at));
    if m.once && redeemed {
        return Validity::Spent;
    }
    // Refused on a replica cut from the store when it asked (its wait for the
    // store's answer may end after the cut healed).
    let cut = ix.checked.iter().filter(|c| c.3 == p.fp).filter(mine).find_map(|c| {
        let replica = c.7?;
        ix.cut_from_store(replica, c.5).then_some(replica)
    });
    if let (Some(replica), true) = (cut, m.once) {
        return Validity::StoreCut(replica);
    }
    let before = checked_at.unwrap_or(SimTime(u64::MAX));
    let unseen = ix.sent.iter().filter(|o| o.seq != s.seq && o.t < before).any(|o| {
        let Some(q) = o.state.as_ref().filter(|q| q.fp == p.fp) else { return false };
        let theirs: Vec<&index::Checked> =
            ix.checked.iter().filter(|c| c.3 == q.fp && c.1 == o.id && c.2 == o.principal).collect();
        let ended = o.end.as_ref().map_or(SimTime(u64::MAX), |e| e.1);
        let across_restart = theirs.is_empty() && ix.restarts.iter().any(|r| o.t < *r && *r <= ended);
        let refused_cut = theirs.iter().any(|c| c.7.is_some_and(|replica| ix.cut_from_store(replica, c.5)));
        across_restart || refused_cut
    });
    if m.once && unseen {
        return Validity::SpentUnseen;
    }
    Validity::Valid
}
