//! What became of a request's work: `cancellation` (a close that reached
//! the server stops it) and `exactly-once` (its side effect happens once).

use super::index::{self, Index};
use super::{close_shown, not_applicable, req, status, v, CheckId, Status, Violation, CLOSE_GRACE, F};
use crate::trace::stateless::{Attempt, ExecStep, StateVerdict};
use crate::trace::SimTime;
use std::collections::BTreeMap;

/// `cancellation`: a close that reached the server stops its request.
pub(super) fn cancellation(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    for x in ix.execs.values() {
        let Some(i) = x.sent else { continue };
        let Some(fate) = ix.fate(&ix.sent[i]) else { continue };
        if let Some(half_open) = went_half_open(ix, x, i, fate) {
            // Half-open first: the server could not know, until a reset (if any) reached it.
            judged = true;
            out.push(half_open);
        }
        // The server's own order decides, not the clock (issue "Bugs that
        // escape", item 5): work it reported after it reported this very
        // execution cancelled is a violation, however soon after the close.
        if let Some(cancelled) = x.at(&ExecStep::Cancelled) {
            judged = true;
            if let Some(work) = work_after_own_cancel(ix, x, i, cancelled) {
                out.push(work);
                continue;
            }
        }
        // (A close after the client had its answer cancels nothing: the request was over.)
        if let Some(closed) = close_shown(ix, x) {
            judged = true;
            out.extend(ran_after_close(ix, x, i, closed));
        }
    }
    if !judged {
        return not_applicable("no request's stream closed or went half-open while its execution ran");
    }
    status(out)
}

/// Execution `x` of attempt `i`, whose mapping went half-open while it ran:
/// what the server wrote into the dead mapping, and whether the work went on
/// to its effect (inherent: the server could not know).
fn went_half_open(ix: &Index, x: &index::Exec, i: usize, fate: &index::MappingFate) -> Option<Violation> {
    let (started, _) = x.at(&ExecStep::Started).unwrap_or((SimTime(0), 0));
    let running_at =
        |t: SimTime| !x.steps.iter().any(|(s, u, _)| matches!(s, ExecStep::Completed | ExecStep::Cancelled) && *u <= t);
    let (dropped_at, dseq) = fate.dropped.filter(|d| d.0 >= started && running_at(d.0))?;
    let effect = x.at(&ExecStep::Effect);
    let mut evidence = vec![ix.sent[i].seq, dseq];
    evidence.extend(fate.dead_writes.iter().take(3));
    evidence.extend(effect.map(|e| e.1));
    Some(v(
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
    ))
}

/// Work execution `x` reported after it reported itself cancelled (at
/// `cancelled`: time and seq), if any.
fn work_after_own_cancel(ix: &Index, x: &index::Exec, i: usize, cancelled: (SimTime, u64)) -> Option<Violation> {
    let (cancelled_at, cseq) = cancelled;
    let after = x.steps.iter().find(|(s, _, q)| matches!(s, ExecStep::Effect | ExecStep::Completed) && *q > cseq);
    let (step, at, seq) = after?;
    let what = if *step == ExecStep::Effect { "did its side effect" } else { "completed" };
    Some(v(
        CheckId::Cancellation,
        F::WorkAfterOwnCancel { exec: x.exec, req: req(ix, i), cancelled_at, what, at: *at },
        *at,
        vec![ix.sent[i].seq, cseq, *seq],
        false,
    ))
}

/// Work after the close (time, seq and how, from [`close_shown`]) had
/// reached the server, more than a [`CLOSE_GRACE`] later: an execution that
/// went on to its effect or result, or one that only started after it.
fn ran_after_close(ix: &Index, x: &index::Exec, i: usize, closed: (SimTime, u64, &'static str)) -> Option<Violation> {
    let (closed_at, cseq, how) = closed;
    let late = x.steps.iter().find(|(s, t, _)| {
        matches!(s, ExecStep::Effect | ExecStep::Completed | ExecStep::Started) && t.0 > closed_at.0 + CLOSE_GRACE.0
    });
    let (step, at, seq) = late?;
    let what = match step {
        ExecStep::Effect => "did its side effect",
        ExecStep::Started => "started",
        _ => "completed",
    };
    Some(v(
        CheckId::Cancellation,
        F::RanAfterClose { exec: x.exec, req: req(ix, i), closed: how, closed_at, what, at: *at },
        *at,
        vec![ix.sent[i].seq, cseq, *seq],
        false,
    ))
}

/// Executions with a side effect, per call: keyed by the client that made it
/// (or, unmatched, the acting principal) and its label.
type ByCall<'a> = BTreeMap<(String, String), Vec<&'a index::Exec>>;

/// `exactly-once`: one-time states redeemed once; no duplicate side effect the server could have prevented.
pub(super) fn exactly_once(ix: &Index) -> Status {
    let mut out = Vec::new();
    let by_call = effects_by_call(ix, &mut out);
    let mut judged = duplicate_effects(ix, &by_call, &mut out);
    judged |= once_redeemed_twice(ix, &mut out);
    if !judged {
        return not_applicable("no side effect of a tool that is not idempotent, and no one-time state presented");
    }
    status(out)
}

/// Files each execution with a side effect under its call; reports one
/// request with more than one side effect on the way.
fn effects_by_call<'a>(ix: &'a Index, out: &mut Vec<Violation>) -> ByCall<'a> {
    let mut by_call: ByCall = Default::default();
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
    by_call
}

/// A call of a tool that is not idempotent whose side effect happened more
/// than once: preventable when a close reached the server first. Returns
/// whether any such call was judged.
fn duplicate_effects(ix: &Index, by_call: &ByCall, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for ((_, call), xs) in by_call {
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
        let shown = close_before_effect(ix, xs);
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
    judged
}

/// Preventable: the first of `xs` whose close reached the server before its
/// effect (or that the server reported cancelled before its effect: its own
/// report says the close reached it, however soon), and when.
fn close_before_effect(ix: &Index, xs: &[&index::Exec]) -> Option<(u32, SimTime)> {
    xs.iter().find_map(|x| {
        let (effect_at, effect_seq) = x.at(&ExecStep::Effect)?;
        if let Some((cancelled_at, _)) = x.at(&ExecStep::Cancelled).filter(|c| c.1 < effect_seq) {
            return Some((x.exec, cancelled_at));
        }
        let (closed_at, _, _) = close_shown(ix, x)?;
        (closed_at.0 + CLOSE_GRACE.0 < effect_at.0).then_some((x.exec, closed_at))
    })
}

/// One-time states: at most one acceptance that led to a side effect.
/// Returns whether any one-time state was presented.
fn once_redeemed_twice(ix: &Index, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    let took_effect = |c: &index::Checked| {
        ix.execs.values().any(|x| {
            x.call == c.0
                && x.id == c.1
                && x.principal == c.2
                && x.steps.iter().any(|(s, t, _)| *s == ExecStep::Effect && *t >= c.5)
        })
    };
    let mut accepted: BTreeMap<&str, Vec<usize>> = Default::default();
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
    judged
}
