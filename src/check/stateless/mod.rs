//! The checks of `stateless-http` (MCP 2026-07-28): the seed's four
//! conditions restated for a protocol without sessions or resumption
//! (`docs/stateless-http.md`, Part 2):
//!
//! | seed condition | check |
//! |---|---|
//! | session binding | `state-binding` (and `confidentiality`) |
//! | replay-window integrity | `state-integrity` |
//! | correlation-window consistency | `exactly-once` |
//! | in-flight request disposition | `cancellation` (and `liveness`) |
//!
//! One rule for all: a break that never reached the server is not the
//! server's fault. A half-open socket gives the server no close; what
//! follows from it is reported as inherent, with its reason.

pub mod finding;
mod index;

use super::{not_applicable, status, Check, CheckId, Explain, Finding, Judge, Status, Violation};
use crate::trace::stateless::{Attempt, CallEnd, ExecStep, StateHow, StateVerdict};
use crate::trace::SimTime;
use finding::{Req, StatelessFinding as F};
pub(crate) use index::{Index, Sent};
use std::collections::BTreeMap;

/// How long a close takes to reach the server and stop an execution, at
/// most, before running on counts against it: a hop is 5 to 40 ms in the
/// bundled scenarios and hunts, and the tick 20 ms; one second is far above both.
pub const CLOSE_GRACE: SimTime = SimTime(1_000_000);

fn v(check: CheckId, finding: F, t: SimTime, evidence: Vec<u64>, inherent: bool) -> Violation {
    Violation { check, finding: Finding::Stateless(finding), t, evidence, inherent }
}

fn req(ix: &Index, i: usize) -> Req {
    let s = &ix.sent[i];
    Req { client: s.client.clone(), call: s.call.clone(), tool: s.tool.clone(), id: s.id.clone() }
}

/// When the close of the stream of `x`'s request reached the server while
/// `x` ran and before the client had its answer, if it did.
fn close_shown(ix: &Index, x: &index::Exec) -> Option<(SimTime, u64, &'static str)> {
    let i = x.sent?;
    let (closed_at, seq, how) = ix.fate(&ix.sent[i])?.closed?;
    let ended =
        x.steps.iter().any(|(s, u, _)| matches!(s, ExecStep::Completed | ExecStep::Cancelled) && *u <= closed_at);
    let answered =
        ix.sent[i].end.as_ref().is_some_and(|(e, u, _)| !matches!(e, CallEnd::Lost { .. }) && *u <= closed_at);
    (!ended && !answered).then_some((closed_at, seq, how))
}

/// `cancellation`: a close that reached the server stops its request.
fn cancellation(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    for x in ix.execs.values() {
        let Some(i) = x.sent else { continue };
        let Some(fate) = ix.fate(&ix.sent[i]) else { continue };
        let (started, _) = x.at(&ExecStep::Started).unwrap_or((SimTime(0), 0));
        let running_at = |t: SimTime| {
            !x.steps.iter().any(|(s, u, _)| matches!(s, ExecStep::Completed | ExecStep::Cancelled) && *u <= t)
        };
        if let Some((dropped_at, dseq)) = fate.dropped.filter(|d| d.0 >= started && running_at(d.0)) {
            // Half-open first: the server could not know, until a reset (if any) reached it.
            judged = true;
            let effect = x.at(&ExecStep::Effect);
            let mut evidence = vec![ix.sent[i].seq, dseq];
            evidence.extend(fate.dead_writes.iter().take(3));
            evidence.extend(effect.map(|e| e.1));
            out.push(v(
                CheckId::Cancellation,
                F::HalfOpen {
                    exec: x.exec,
                    req: req(ix, i),
                    mapping: ix.sent[i].mapping.expect("a fate has a mapping"),
                    dropped_at,
                    dead_bytes: fate.dead_bytes,
                    effect_at: effect.map(|e| e.0),
                },
                dropped_at,
                evidence,
                true,
            ));
        }
        // The server's own order decides, not the clock (issue "Bugs that
        // escape", item 5): work it reported after it reported this very
        // execution cancelled is a violation, however soon after the close.
        if let Some((cancelled_at, cseq)) = x.at(&ExecStep::Cancelled) {
            judged = true;
            let after =
                x.steps.iter().find(|(s, _, q)| matches!(s, ExecStep::Effect | ExecStep::Completed) && *q > cseq);
            if let Some((step, at, seq)) = after {
                let what = if *step == ExecStep::Effect { "did its side effect" } else { "completed" };
                out.push(v(
                    CheckId::Cancellation,
                    F::WorkAfterOwnCancel { exec: x.exec, req: req(ix, i), cancelled_at, what, at: *at },
                    *at,
                    vec![ix.sent[i].seq, cseq, *seq],
                    false,
                ));
                continue;
            }
        }
        // (A close after the client had its answer cancels nothing: the request was over.)
        if let Some((closed_at, cseq, how)) = close_shown(ix, x) {
            judged = true;
            // Work after the close: an execution that went on to its effect or
            // result, or one that only started after the close had arrived.
            let late = x.steps.iter().find(|(s, t, _)| {
                matches!(s, ExecStep::Effect | ExecStep::Completed | ExecStep::Started)
                    && t.0 > closed_at.0 + CLOSE_GRACE.0
            });
            if let Some((step, at, seq)) = late {
                let what = match step {
                    ExecStep::Effect => "did its side effect",
                    ExecStep::Started => "started",
                    _ => "completed",
                };
                out.push(v(
                    CheckId::Cancellation,
                    F::RanAfterClose { exec: x.exec, req: req(ix, i), closed: how, closed_at, what, at: *at },
                    *at,
                    vec![ix.sent[i].seq, cseq, *seq],
                    false,
                ));
            }
        }
    }
    if !judged {
        return not_applicable("no request's stream closed or went half-open while its execution ran");
    }
    status(out)
}

/// `exactly-once`: one-time states redeemed once; no duplicate side effect the server could have prevented.
fn exactly_once(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    // Side effects per call: the client that made it (or, unmatched, the acting principal) and its label.
    let mut by_call: std::collections::BTreeMap<(String, String), Vec<&index::Exec>> = Default::default();
    // Executions a step forced (a stolen, altered or replayed state) are
    // the other checks' findings; a replayed one-time state is judged below.
    let own = |x: &&index::Exec| x.sent.is_none_or(|i| ix.sent[i].attempt != Attempt::Presented);
    for x in ix.execs.values().filter(|x| x.at(&ExecStep::Effect).is_some()).filter(own) {
        let who = match x.sent {
            Some(i) => format!("client {}", ix.sent[i].client),
            None => format!("principal {}", x.on_behalf_of.as_ref().unwrap_or(&x.principal)),
        };
        by_call.entry((who, x.call.clone())).or_default().push(x);
        // One request, more than one side effect: nothing excuses that.
        let effects: Vec<(SimTime, u64)> =
            x.steps.iter().filter(|(s, _, _)| *s == ExecStep::Effect).map(|(_, t, q)| (*t, *q)).collect();
        if effects.len() > 1 && !ix.idempotent(&x.tool) {
            out.push(v(
                CheckId::ExactlyOnce,
                F::OneRequestManyEffects {
                    exec: x.exec,
                    call: x.call.clone(),
                    tool: x.tool.clone(),
                    effects: effects.iter().map(|e| e.0).collect(),
                },
                effects[1].0,
                effects.iter().map(|e| e.1).collect(),
                false,
            ));
        }
    }
    for ((_, call), xs) in &by_call {
        let tool = xs[0].tool.clone();
        if ix.idempotent(&tool) {
            continue;
        }
        judged = true;
        if xs.len() < 2 {
            continue;
        }
        let effects: Vec<(u32, SimTime)> = xs.iter().map(|x| (x.exec, x.at(&ExecStep::Effect).unwrap().0)).collect();
        let evidence: Vec<u64> = xs.iter().map(|x| x.at(&ExecStep::Effect).unwrap().1).collect();
        let at = effects[1].1;
        // Preventable: some execution's close reached the server before its effect.
        // (Or the server reported that execution cancelled before its
        // effect: its own report says the close reached it, however soon.)
        let shown = xs.iter().find_map(|x| {
            let (effect_at, effect_seq) = x.at(&ExecStep::Effect)?;
            if let Some((cancelled_at, _)) = x.at(&ExecStep::Cancelled).filter(|c| c.1 < effect_seq) {
                return Some((x.exec, cancelled_at));
            }
            let (closed_at, _, _) = close_shown(ix, x)?;
            (closed_at.0 + CLOSE_GRACE.0 < effect_at.0).then_some((x.exec, closed_at))
        });
        // The same one-time state redeemed again: a server can tell that
        // from a new call (guarded does), and OnceRedeemedTwice below
        // judges it; "nothing tells a re-issue from a new call" is false.
        let state_of = |x: &&index::Exec| x.sent.and_then(|i| ix.sent[i].state.as_ref().map(|p| p.fp.clone()));
        let one_state = state_of(&xs[0]).filter(|fp| {
            ix.minted.get(fp).is_some_and(|m| m.once) && xs.iter().all(|x| state_of(x).as_ref() == Some(fp))
        });
        if shown.is_none() && one_state.is_some() {
            continue;
        }
        match shown {
            Some((cancelled_exec, closed_at)) => out.push(v(
                CheckId::ExactlyOnce,
                F::DuplicateAfterClose { call: call.clone(), tool, effects, cancelled_exec, closed_at },
                at,
                evidence,
                false,
            )),
            None => out.push(v(
                CheckId::ExactlyOnce,
                F::DuplicateUnpreventable { call: call.clone(), tool, effects },
                at,
                evidence,
                true,
            )),
        }
    }
    // One-time states: at most one acceptance that led to a side effect.
    let took_effect = |c: &index::Checked| {
        ix.execs.values().any(|x| {
            x.call == c.0
                && x.id == c.1
                && x.principal == c.2
                && x.steps.iter().any(|(s, t, _)| *s == ExecStep::Effect && *t >= c.5)
        })
    };
    let mut accepted: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (k, c) in ix.checked.iter().enumerate() {
        if ix.minted.get(&c.3).is_some_and(|m| m.once) {
            judged = true;
            if c.4 == StateVerdict::Accepted && took_effect(c) {
                accepted.entry(c.3.as_str()).or_default().push(k);
            }
        }
    }
    for (fp, ks) in accepted {
        if ks.len() < 2 {
            continue;
        }
        let (a, b) = (&ix.checked[ks[0]], &ix.checked[ks[1]]);
        let replicas = a.7.zip(b.7);
        // Two replicas with a store each: neither could know of the other's redemption.
        let inherent = replicas.is_some_and(|(x, y)| x != y) && !ix.shared_store;
        out.push(v(
            CheckId::ExactlyOnce,
            F::OnceRedeemedTwice {
                fp: fp.to_string(),
                call: b.0.clone(),
                first: (a.1.clone(), a.5),
                second: (b.1.clone(), b.5),
                by: b.2.clone(),
                replicas,
                shared_store: ix.shared_store,
                first_cut: a.7.is_some_and(|r| ix.cut_from_store(r, a.5)),
            },
            b.5,
            vec![a.6, b.6],
            inherent,
        ));
    }
    if !judged {
        return not_applicable("no side effect of a tool that is not idempotent, and no one-time state presented");
    }
    status(out)
}

/// How the server acted on attempt `i`'s state, if it did: it said it
/// accepted the state, started an execution for it, or completed the call
/// (an error result is a refusal). With `for_principal`, only acts on that
/// principal's behalf count: a server that ignored a stolen state and acted
/// for the thief misbound nothing.
fn acted_on(ix: &Index, i: usize, for_principal: Option<&str>) -> Option<(&'static str, SimTime, u64)> {
    let s = &ix.sent[i];
    let fp = s.state.as_ref().map(|p| p.fp.as_str());
    let accepted = ix
        .checked
        .iter()
        .find(|c| c.0 == s.call && c.1 == s.id && c.2 == s.principal && Some(c.3.as_str()) == fp && c.5 >= s.t);
    if let Some(c) = accepted.filter(|c| c.4 == StateVerdict::Accepted) {
        return Some(("accepted it", c.5, c.6));
    }
    if let Some(x) = ix.execs_of(i).find(|x| for_principal.is_none_or(|p| x.on_behalf_of.as_deref() == Some(p))) {
        if let Some((t, seq)) = x.at(&ExecStep::Started) {
            return Some(("started an execution", t, seq));
        }
    }
    match &s.end {
        Some((CallEnd::Complete { is_error: false, data_of }, t, seq))
            if for_principal.is_none_or(|p| data_of.as_deref() == Some(p)) =>
        {
            Some(("completed the call", *t, *seq))
        }
        _ => None,
    }
}

/// `state-binding`: state minted for one principal is refused from another.
fn state_binding(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    for (i, s) in ix.sent.iter().enumerate() {
        let Some(StateHow::Stolen { from }) = s.state.as_ref().map(|p| &p.how) else { continue };
        judged = true;
        let victim = ix.clients.get(from).cloned().unwrap_or_else(|| from.clone());
        let Some((how, at, seq)) = acted_on(ix, i, Some(&victim)) else { continue };
        let with_credential = s.principal == victim;
        out.push(v(
            CheckId::StateBinding,
            F::StolenStateHonoured {
                req: req(ix, i),
                victim: from.clone(),
                thief_principal: s.principal.clone(),
                at,
                how,
                with_credential,
                unauthenticated: ix.unauthenticated,
            },
            at,
            vec![s.seq, seq],
            with_credential || ix.unauthenticated,
        ));
    }
    if !judged {
        return not_applicable("no client presented another's requestState");
    }
    status(out)
}

/// `state-integrity`: altered, moved or expired state is refused, never acted on.
fn state_integrity(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    // A state presented whose minting declared no lifetime: expiry cannot be judged.
    let mut undeclared = false;
    for (i, s) in ix.sent.iter().enumerate() {
        let Some(p) = &s.state else { continue };
        if p.how.is_tampered() {
            judged = true;
            if let Some((how, at, seq)) = acted_on(ix, i, None) {
                let tamper = match &p.how {
                    StateHow::Flipped => "altered (one character changed)".to_string(),
                    StateHow::Truncated => "truncated".to_string(),
                    StateHow::Moved { from_call } => format!("minted for {from_call}, presented on {}", s.call),
                    _ => unreachable!("is_tampered"),
                };
                out.push(v(
                    CheckId::StateIntegrity,
                    F::TamperedStateHonoured { req: req(ix, i), tamper, at, how },
                    at,
                    vec![s.seq, seq],
                    false,
                ));
            }
            continue;
        }
        // Expiry, as the server declared it when minting.
        let Some(m) = ix.minted.get(&p.fp) else { continue };
        let Some(life) = m.lifetime_us else {
            undeclared = true;
            continue;
        };
        let expired_at = SimTime(m.t.0 + life);
        // Sent at least a grace after it expired: the server sees it later still.
        if s.t.0 > expired_at.0 + CLOSE_GRACE.0 {
            judged = true;
            if let Some((how, at, seq)) = acted_on(ix, i, None) {
                out.push(v(
                    CheckId::StateIntegrity,
                    F::ExpiredStateHonoured { req: req(ix, i), expired_at, sent_at: s.t, how },
                    at,
                    vec![m.seq, s.seq, seq],
                    false,
                ));
            }
        }
    }
    judged |= input_answers(ix, &mut out);
    if !judged && undeclared {
        return not_applicable(
            "no client presented an altered or moved requestState, and the server declared no lifetime for the states it minted, so none can be judged expired",
        );
    }
    if !judged {
        return not_applicable("no client presented an altered, moved or expired requestState");
    }
    status(out)
}

/// The MRTR input path (issue "Bugs that escape", item 8): an execution
/// acts on the answers its own request carried, each under its own key; a
/// declined input stops the tool's effect; a tool that asks for input does
/// not run for a request that answered none. Returns whether anything was
/// judged. (What the application read is judged only where it says.)
fn input_answers(ix: &Index, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for x in ix.execs.values() {
        let Some(i) = x.sent else { continue };
        let s = &ix.sent[i];
        let declared = ix.inputs.get(&x.tool);
        if declared.is_none() && s.answers.is_empty() {
            continue;
        }
        judged = true;
        let (started, sseq) = x.at(&ExecStep::Started).unwrap_or((s.t, s.seq));
        if s.answers.is_empty() {
            out.push(v(
                CheckId::StateIntegrity,
                F::RanUnanswered {
                    exec: x.exec,
                    req: req(ix, i),
                    input: declared.cloned().unwrap_or_default(),
                    at: started,
                },
                started,
                vec![s.seq, sseq],
                false,
            ));
            continue;
        }
        for r in &x.inputs {
            let sent = s.answers.iter().find(|a| a.key == r.key);
            if sent.is_some_and(|a| a.value == r.value) {
                continue;
            }
            let sent_under = s.answers.iter().find(|a| a.value == r.value).map(|a| a.key.clone());
            out.push(v(
                CheckId::StateIntegrity,
                F::AnswerMisread { exec: x.exec, req: req(ix, i), key: r.key.clone(), sent_under, at: started },
                started,
                vec![s.seq, sseq],
                false,
            ));
            break;
        }
        if let (Some(a), Some((effect_at, eseq))) = (s.answers.iter().find(|a| a.declined), x.at(&ExecStep::Effect)) {
            out.push(v(
                CheckId::StateIntegrity,
                F::RanPastDecline { exec: x.exec, req: req(ix, i), key: a.key.clone(), at: effect_at },
                effect_at,
                vec![s.seq, eseq],
                false,
            ));
        }
    }
    judged
}

/// `confidentiality`: no client receives another principal's results.
fn confidentiality(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    for (i, s) in ix.sent.iter().enumerate() {
        let Some((CallEnd::Complete { data_of: Some(d), .. }, at, seq)) = &s.end else { continue };
        judged = true;
        let own = ix.clients.get(&s.client).cloned().unwrap_or_default();
        if *d != own {
            let with_credential = s.principal == *d;
            out.push(v(
                CheckId::Confidentiality,
                F::OtherPrincipalsResult {
                    req: req(ix, i),
                    principal: own,
                    data_of: d.clone(),
                    at: *at,
                    with_credential,
                    unauthenticated: ix.unauthenticated,
                },
                *at,
                vec![s.seq, *seq],
                with_credential || ix.unauthenticated,
            ));
        }
    }
    if !judged {
        return not_applicable("no call completed with a result that names whose data it carries");
    }
    status(out)
}

/// `liveness`: every call a client made completes, re-issued or not.
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

fn liveness(ix: &Index) -> Status {
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
        if let Some((rounds, at, seq)) = asked_again(ix, &attempts) {
            out.push(v(
                CheckId::Liveness,
                F::AskedAgain { client: client.to_string(), call: call.to_string(), rounds, at },
                at,
                vec![attempts[0].seq, seq],
                false,
            ));
            continue;
        }
        let last = attempts.last().expect("a first attempt");
        let abandoned = ix.abandoned.iter().find(|a| a.0 == client && a.1 == call);
        let (words, t, seq) = match (&last.end, abandoned) {
            (_, Some(a)) => (format!("the client gave up: {}", a.2), a.3, a.4),
            // An explicit refusal ends a call, and is right when the state was
            // not valid any more; a refusal of a valid request is not.
            (Some((CallEnd::Error { code, message }, t, seq)), _) => match validity(ix, last) {
                Validity::Valid => {
                    (format!("its last request, valid, got JSON-RPC error {code} ({message})"), *t, *seq)
                }
                Validity::Invalid => continue,
                // A refusal that was right: the call cannot complete, and it is
                // inherent, for the reason its validity gives.
                inherent @ (Validity::SpentUnseen | Validity::StoreCut(_) | Validity::Spent) => {
                    let why = match inherent {
                        Validity::SpentUnseen => format!("its one-time state was refused (error {code}: {message}) after an earlier request presenting it went unanswered across a server restart or a cut from the store, which may have recorded its redemption; inherent: a state spent by a request the server never finished cannot be spent again"),
                        Validity::StoreCut(replica) => format!("its one-time state reached replica {replica} while a partition cut it from the store, and was refused (error {code}: {message}); inherent: without the store no replica can tell a first redemption from a second"),
                        // Spent.
                        _ => format!("its one-time state had been redeemed by another request of the client, so this one was refused (error {code}); inherent: nothing tells a re-issue from a second redemption"),
                    };
                    out.push(v(
                        CheckId::Liveness,
                        F::CallNeverCompleted {
                            client: client.to_string(),
                            call: call.to_string(),
                            attempts: attempts.len(),
                            last: why,
                        },
                        *t,
                        vec![attempts[0].seq, *seq],
                        true,
                    ));
                    continue;
                }
            },
            // A response the client could not read, or a server error, is
            // `protocol`'s finding: the call that it ended is no second bug
            // (issue "Bugs that escape", item 9: an input_required with
            // neither field once showed as two).
            (Some((CallEnd::Garbled { .. }, _, _)), _) => continue,
            (Some((CallEnd::Status { status }, _, _)), _) if *status >= 500 => continue,
            (Some((CallEnd::Status { status }, t, seq)), _) => {
                (format!("its last request got HTTP {status}"), *t, *seq)
            }
            // Still under way at the end (a long tool, or a re-issue waiting):
            // judged only once the bound has passed since the call began.
            (end, _) => {
                if attempts[0].t.0 + ix.bound.0 > ix.end.0 {
                    continue;
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
                out.push(v(
                    CheckId::Liveness,
                    F::CallNeverCompleted {
                        client: client.to_string(),
                        call: call.to_string(),
                        attempts: attempts.len(),
                        last: words,
                    },
                    ix.end,
                    vec![attempts[0].seq, attempts[attempts.len() - 1].seq],
                    half_open,
                ));
                continue;
            }
        };
        out.push(v(
            CheckId::Liveness,
            F::CallNeverCompleted {
                client: client.to_string(),
                call: call.to_string(),
                attempts: attempts.len(),
                last: words,
            },
            t,
            vec![attempts[0].seq, seq],
            false,
        ));
    }
    listens(ix, &mut out);
    out.sort_by_key(|v| v.t);
    status(out)
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

/// `protocol`: the server spoke MCP 2026-07-28 as a client can read it.
fn protocol(ix: &Index) -> Status {
    let mut out = Vec::new();
    for (client, conn, problem, what, t, seq) in &ix.problems {
        out.push(v(
            CheckId::Protocol,
            F::Wire { client: client.clone(), conn: *conn, problem: problem.clone(), what: what.clone() },
            *t,
            vec![*seq],
            false,
        ));
    }
    for (i, s) in ix.sent.iter().enumerate() {
        if let Some((CallEnd::Status { status }, t, seq)) = &s.end {
            if *status >= 500 {
                out.push(v(
                    CheckId::Protocol,
                    F::ServerError { req: req(ix, i), status: *status },
                    *t,
                    vec![s.seq, *seq],
                    false,
                ));
            }
        }
    }
    if ix.sent.iter().all(|s| s.end.is_none())
        && ix.listens.iter().all(|l| l.acked.is_none() && l.end.is_none())
        && out.is_empty()
    {
        return not_applicable("no request was answered");
    }
    out.sort_by_key(|v| v.t);
    status(out)
}

const fn check(id: CheckId, about: &'static str, explain: Explain, judge: fn(&Index) -> Status) -> Check {
    Check { id, about, explain, judge: Judge::Stateless(judge) }
}

/// The checks of stateless-http, in the order of the seed's conditions.
pub const CHECKS: [Check; 7] = [
    check(
        CheckId::StateBinding,
        "state minted for one principal is refused when another presents it",
        Explain {
            meaning: "A requestState handed to principal P is honoured only on a request authenticated as P.",
            evidence: "A request that presented another client's requestState (steal-request-state), and whether the server acted on it: the call completed, or the application reported an execution for it. A thief who also presents the victim's credential is the victim to any server: inherent.",
            condition: "Session binding (condition 1): the session's event sequence belonged to the principal that created it; here the state does.",
            to_pass: "Bind the principal into the state and refuse it from anyone else (MRTR: SHOULD; MUST when the state carries an elicitation).",
        },
        state_binding,
    ),
    check(
        CheckId::StateIntegrity,
        "altered, moved or expired state is refused and never acted on; a tool acts on the answers its request carried",
        Explain {
            meaning: "The server acts only on state it minted, unmodified, unexpired, for this very request (tool and arguments), and on the input responses that request carried, each under its own key.",
            evidence: "A request whose requestState was altered or truncated (tamper-request-state), moved onto another call, or sent after the lifetime the application declared when minting it, and whether the server acted on it. For a tool that asks for input: the answers each retry carried (by key, declined or not) against the answers the application says its execution read, its side effect after a declined input, and an execution for a request that answered nothing.",
            condition: "Replay-window integrity (condition 2): a resumption from N was valid only inside the retained window; here a state is valid only as minted, in its lifetime, for its request.",
            to_pass: "Seal the state (HMAC or AEAD), bind it to the tool and a digest of the arguments, give it a short expiry, and refuse whatever fails. Read each answer under the key you asked it by, and do not run what was declined.",
        },
        state_integrity,
    ),
    check(
        CheckId::ExactlyOnce,
        "a one-time state is redeemed once; no duplicate side effect the server could have prevented",
        Explain {
            meaning: "A one-time state is acted on once. A call's side effect happens once, unless nothing the server saw told the requests apart.",
            evidence: "The application's side effects per call and acting principal, and which request's close reached the server before its effect; the application's acceptances of a one-time state. A re-issue after a half-open break runs a tool that is not idempotent twice, and no server can tell a re-issue from a new call: inherent.",
            condition: "Correlation-window consistency (condition 3): an answered request was never re-sent; here a settled action is never done again.",
            to_pass: "Keep a single-use registry for one-time states, and stop an execution whose request was cancelled.",
        },
        exactly_once,
    ),
    check(
        CheckId::Cancellation,
        "a close that reached the server cancels its request",
        Explain {
            meaning: "Once the client's close of a response stream (FIN or RST) has reached the server, the server sends nothing more for that request and does no more of its work.",
            evidence: "The NAT's record of the close going upstream (a reset, or the client's close of a live mapping) and the application's report of the execution's side effect or completion more than a second later. A half-open break never reaches the server: what it wrote into the dead mapping, and whether the work ran to its effect, is reported as inherent.",
            condition: "In-flight request disposition (condition 4): a request in flight at a resumption was re-issued or failed; here the close is the disposition.",
            to_pass: "Treat the close of the response stream as cancellation: stop the work and write nothing more.",
        },
        cancellation,
    ),
    check(
        CheckId::Confidentiality,
        "no client receives another principal's results",
        Explain {
            meaning: "Nothing computed for principal P reaches a client of another principal.",
            evidence: "Each completed result, and the principal whose data it names, against the principal of the client that received it.",
            condition: "Session binding (condition 1), seen from the victim's side.",
            to_pass: "Act for the principal that authenticated the request, never for the one a state names.",
        },
        confidentiality,
    ),
    check(
        CheckId::Liveness,
        "every call completes, re-issued if its response was lost",
        Explain {
            meaning: "Every call a client makes ends with its result; a lost response is re-issued under a new id and completes.",
            evidence: "Each call's attempts and how each ended. A call still under way at the end is not judged.",
            condition: "In-flight request disposition (condition 4): nothing waits forever.",
            to_pass: "Answer every request; accept a re-issue.",
        },
        liveness,
    ),
    check(
        CheckId::Protocol,
        "the server spoke MCP 2026-07-28 as a client can read it",
        Explain {
            meaning: "Responses are JSON or SSE; every result carries a known resultType; no server-initiated request; no 5xx.",
            evidence: "What clients could not read, server requests on a response stream, and server errors.",
            condition: "None: the harness can judge the four conditions only over a protocol it can read.",
            to_pass: "Speak MCP 2026-07-28.",
        },
        protocol,
    ),
];
