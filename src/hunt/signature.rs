//! What makes two findings the same bug: buckets before shrinking,
//! signatures after.
//!
//! A hunt against a buggy server fails on most seeds, and most of those
//! failures are the same few bugs met again. Two keys sort them:
//!
//! - A seed's **bucket**, one per check it violates, read from the unshrunk
//!   run: the check and the *shape* of its first violation's headline, that
//!   is the headline with everything that varies from seed to seed masked
//!   (numbers, ids, client and principal names, method names) and its
//!   consequence clause (after the first `;`) cut off. A seed whose bucket
//!   was seen before is counted, not shrunk again: buckets are cheap and
//!   deliberately finer than bugs.
//! - A bucket's **signature**, from the run of the scenario its first seed
//!   shrinks to (shrunk while the bucket's check still fails): the check
//!   and the defect (a name for the [`crate::check::Finding`] kinds that
//!   are one defect) of the violation that came first in that run
//!   ([`signature`]). The first thing to go wrong names the root cause;
//!   the rest follows from it.
//!   Buckets whose shrunk runs share a signature are one bug. The smallest
//!   of those scenarios is the bug's reproducer.
//!
//! Limits, on purpose:
//! - Two bugs that go wrong first in the same way (same check, same
//!   defect) get one signature. Measured per mutant and dialect in
//!   tests/hunt.rs, where each one-bug mutant gets one row.
//! - The steps a reproducer shrank to are not part of a signature (they
//!   split one bug wherever the shrinker stopped at two local minima).
//! - Unshrunk hunts (`--no-shrink`, plug-in servers, `--live` without
//!   shrinking) file each
//!   bucket under its check and the defect of its first violation in the
//!   unshrunk run ([`super::bugs::Failure::kind`]): a signature's parts,
//!   read before shrinking, so without the first-violation rule.

use crate::scenario::Plan;

/// The shape of a violation headline: what stays when the seed changes.
/// `names` are the plan's client names and principals.
pub fn shape(headline: &str, names: &[&str]) -> String {
    let head = headline.split(';').next().unwrap_or(headline);
    let mut out = Vec::new();
    for token in head.split_whitespace() {
        // Keep punctuation around a token; judge its core.
        let start = token.find(|c: char| c.is_alphanumeric() || c == '_' || c == '"').unwrap_or(token.len());
        let end = token.rfind(|c: char| c.is_alphanumeric() || c == '_' || c == '"').map_or(start, |i| i + 1);
        let (pre, core, post) = (&token[..start], &token[start..end], &token[end..]);
        let (core, possessive) = match core.strip_suffix("'s") {
            Some(c) => (c, "'s"),
            None => (core, ""),
        };
        let masked = if core.is_empty() {
            core.to_string()
        } else if names.contains(&core) {
            "C".into()
        } else if core.contains('/') || core.starts_with('"') || core.chars().any(|c| c.is_ascii_digit()) {
            "#".into()
        } else {
            core.to_string()
        };
        out.push(format!("{pre}{masked}{possessive}{post}"));
    }
    out.join(" ")
}

/// A seed's bucket for `check`: the check and the shape of its headline.
pub fn bucket(check: &str, headline: &str, plan: &Plan) -> String {
    let mut names: Vec<&str> = plan.clients.iter().map(|c| c.name.as_str()).collect();
    names.extend(plan.clients.iter().map(|c| c.principal.as_str()));
    format!("{check}: {}", shape(headline, &names))
}

/// Which check names a bug when two violations come at the same instant: a
/// leak to another principal first (whatever else the thief's resumption
/// broke), then the four conditions, then what follows from them.
const ROOT_ORDER: [&str; 13] = [
    // stateless-http's (its checks never meet the stateful ones in one run):
    // a state honoured for the wrong principal comes before the result it
    // leaks, a close ignored before the duplicate it causes.
    "state-binding",
    "state-integrity",
    "cancellation",
    "exactly-once",
    "confidentiality",
    "session-binding",
    "replay-integrity",
    "correlation-consistency",
    "inflight-disposition",
    "stream-order",
    "rejection-protocol",
    "protocol",
    "liveness",
];

/// The defect a finding shows, named once for the finding kinds that are
/// one defect seen from different sides: a prior writer that outlived the
/// attach wrote a request, or heartbeats, or lost a message beside a fresh
/// stream (`dead-writer`); a replay that left events of its window out, at
/// its start, middle or end, numbered or not (`left-out`: a truncating
/// server shows each, depending on the ids and where the shrinker stops);
/// and so on. Kinds that are different defects of one condition keep
/// different names (a replay that leaves events out is not one that
/// accepts an id never minted).
pub fn defect(f: &crate::check::Finding) -> &'static str {
    use crate::check::Finding as F;
    match f {
        F::RequestToDeadUplink { .. } | F::SecondWriter { .. } | F::LostToOldStream { .. } => "dead-writer",
        F::MintedLater { .. } | F::NeverShownAbove { .. } | F::NeverCarried { .. } => "unminted-id",
        F::OlderThanRetained { .. } | F::ReplayStartedLate { .. } | F::WindowGap { .. } | F::Skipped { .. } => {
            "left-out"
        }
        F::HandedAgain { .. } | F::IdReused { .. } => "stale-correlation",
        F::ReissuedNotReissuable { .. } => "not-reissuable",
        F::AnswerToTombstone { .. } | F::AnsweredTwice { .. } | F::AnswerWithoutSender { .. } => "answer-misapplied",
        F::LeftInFlight { .. } | F::ReissueNeverDelivered { .. } => "left-in-flight",
        F::ReissueChanged { .. } => "reissue-changed",
        F::ReachedTwice { .. } => "reached-twice",
        F::Leak { .. } | F::TakenOver { .. } | F::ForeignAnswer { .. } | F::ForeignToolChange { .. } => {
            "foreign-principal"
        }
        // Ending another's session is not handing out its events: rmcp's
        // bucket 39a98c62 once joined its thief's DELETE to a leak.
        F::ForeignDelete { .. } => "foreign-delete",
        F::TimedOut { .. } | F::Unresolved { .. } | F::NoLiveUplink { .. } | F::NotificationsLost { .. } => "stuck",
        F::ResultLost { .. } => "result-lost",
        F::SessionElsewhere { .. } => "session-elsewhere",
        F::SilentRefusal { .. } | F::RefusalInDisguise { .. } => "silent-refusal",
        F::TokenStillWorked { .. } | F::OwnerSessionKilled { .. } => "token-lifetime",
        F::NeverRenewed { .. } => "never-renewed",
        F::RefusedByServerError { .. } => "server-error",
        F::ValidRefused { .. } | F::ValidRefusedProven { .. } | F::ExpectationMissed { .. } => "wrong-outcome",
        F::ResentHeld { .. }
        | F::HeldIdReused { .. }
        | F::DeliveredTwice { .. }
        | F::TwoEventsOneId { .. }
        | F::FreshStreamResent { .. } => "resent",
        F::OutOfOrder { .. } => "out-of-order",
        F::Protocol { .. } | F::ServerError { .. } => "broken-protocol",
        F::Stateless(s) => stateless_defect(s),
    }
}

/// [`defect`] for the stateless-http findings.
fn stateless_defect(f: &crate::check::stateless::finding::StatelessFinding) -> &'static str {
    use crate::check::stateless::finding::StatelessFinding as S;
    match f {
        S::RanAfterClose { .. } | S::WorkAfterOwnCancel { .. } => "ran-after-close",
        S::HalfOpen { .. } => "half-open",
        S::DuplicateAfterClose { .. } | S::DuplicateUnpreventable { .. } | S::OneRequestManyEffects { .. } => {
            "ran-twice"
        }
        S::OnceRedeemedTwice { .. } => "redeemed-twice",
        S::StolenStateHonoured { .. } => "foreign-state",
        S::TamperedStateHonoured { .. } => "tampered-state",
        S::ExpiredStateHonoured { .. } => "expired-state",
        S::AnswerMisread { .. } => "misread-answer",
        S::RanPastDecline { .. } => "ran-past-decline",
        S::RanUnanswered { .. } => "ran-unanswered",
        S::OtherPrincipalsResult { .. } => "foreign-principal",
        S::CallNeverCompleted { .. } => "stuck",
        S::AskedAgain { .. } => "asked-again",
        S::ListenRefused { .. } => "locked-out",
        S::ChangeNotDelivered { .. } => "change-lost",
        S::Wire { .. } => "broken-protocol",
        S::ServerError { .. } => "server-error",
    }
}

/// How close two violations must be to count as one moment: a write
/// reaches the NAT a network hop after the application reported it.
const SAME_MOMENT_US: u64 = 1_000_000;

/// The signature of a shrunk reproducer: the check and the [`defect`] of
/// the violation that came first in its run (those within a second of the
/// first are one moment, and [`ROOT_ORDER`] picks among them). The first
/// thing to go wrong is the bug's root cause; what follows from it (a
/// request lost to a dead stream times out later, and fails liveness)
/// comes after. Neither the reproducer's steps nor the shrinker's local
/// minimum enter it, so one bug met from different seeds, and shrunk to
/// different steps, gets one signature; two bugs that go wrong first with
/// the same defect share one.
pub fn signature(verdicts: &[crate::check::Verdict]) -> String {
    let rank = |c: &str| ROOT_ORDER.iter().position(|r| *r == c).unwrap_or(ROOT_ORDER.len());
    let all: Vec<(&str, &crate::check::Violation)> = verdicts
        .iter()
        .flat_map(|v| v.violations().iter().filter(|x| !x.inherent).map(move |x| (v.check.as_str(), x)))
        .collect();
    let Some(t0) = all.iter().map(|(_, x)| x.t.0).min() else { return "none".into() };
    let moment: Vec<&(&str, &crate::check::Violation)> =
        all.iter().filter(|(_, x)| x.t.0 <= t0 + SAME_MOMENT_US).collect();
    let first = moment.iter().min_by_key(|(check, x)| (rank(check), x.t)).expect("t0 is one of them");
    // A root cause seen at that moment names the bug in place of what it
    // caused beside it (issue "Bugs that escape", item 9).
    let first = match moment.iter().find(|(_, x)| is_root(&x.finding)) {
        Some(root) if CAUSED_BY_ROOT.contains(&first.0) => root,
        _ => first,
    };
    format!("{} | {}", first.0, defect(&first.1.finding))
}

/// Findings that are the cause of whatever else goes wrong at the same
/// moment: a replay that starts with the very event the client named in
/// `Last-Event-ID` (an inclusive replay). The request that event carries
/// then reaches the client again, and correlation-consistency (an answered
/// one handed again) or inflight-disposition (a pending one reached twice)
/// report it too; ranked by check, those used to name the bug, so one
/// defect showed as three.
fn is_root(f: &crate::check::Finding) -> bool {
    matches!(f, crate::check::Finding::ResentHeld { last, id, .. } if last == id)
}

/// The checks whose finding an inclusive replay causes at the same moment
/// (the request its resent event carries, reached again). A leak or a
/// second writer beside it is a harm of its own and keeps its name.
const CAUSED_BY_ROOT: [&str; 2] = ["correlation-consistency", "inflight-disposition"];

/// A short, stable name for a signature (8 hex digits of its FNV-1a), for
/// file names and the summary table.
pub fn short_id(signature: &str) -> String {
    format!("{:08x}", super::fnv1a(signature.as_bytes()) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_mask_what_varies_between_seeds() {
        let names = ["alice", "bob", "thief1"];
        let a = shape("r12 (elicitation/create, event 1004) written to alice's dropped uplink (mapping 3) at 11.400 s, 1.2 s after conn 5 was accepted; never delivered to alice; timed out at 19.383 s", &names);
        let b = shape("r3 (roots/list, event 1010) written to bob's dropped uplink (mapping 1) at 9.000 s, 0.4 s after conn 7 was accepted; delivered to bob elsewhere", &names);
        assert_eq!(a, b);
        assert_eq!(a, "# (#, event #) written to C's dropped uplink (mapping #) at # s, # s after conn # was accepted");
        let c = shape(
            "thief1's resumption from 1003 was accepted on conn 4 at 5.0 s, but the session's newest id then was 1001",
            &names,
        );
        assert_ne!(a, c);
        assert_eq!(shape("resumption from \"5000\" was accepted", &names), "resumption from # was accepted");
    }
}
