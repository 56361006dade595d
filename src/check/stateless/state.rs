//! The state a server mints for a call: `state-binding` (it is honoured only
//! for the principal it was minted for) and `state-integrity` (altered,
//! moved or expired state is never acted on; nor are answers misread).

use super::index::Index;
use super::{not_applicable, req, status, v, CheckId, Status, Violation, CLOSE_GRACE, F};
use crate::trace::stateless::{CallEnd, ExecStep, StateHow, StateVerdict};
use crate::trace::SimTime;

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
pub(super) fn state_binding(ix: &Index) -> Status {
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
pub(super) fn state_integrity(ix: &Index) -> Status {
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
