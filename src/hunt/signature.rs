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
//! - A bucket's **signature**, from the scenario its first seed shrinks to
//!   (shrunk while the bucket's check still fails): which condition breaks
//!   (the [`root_check`] of the checks the shrunk scenario violates: the
//!   others follow from it, and the table lists them all) and the
//!   situations its steps make ([`signature`]: half-open drops, resumptions,
//!   token theft, crashes, tool calls, DELETE; not the traffic every
//!   scenario has). Buckets whose shrunk scenarios share a signature are
//!   one bug. The smallest of those scenarios is the bug's reproducer.
//!
//! Limits, on purpose:
//! - Two bugs that break the same condition in the same situations get one
//!   signature (the steps' clients, times, order and arguments are not part
//!   of it). In practice a different bug needs a different situation to
//!   show, and so shrinks to different steps or checks.
//! - One bug can get two signatures when the shrinker stops at two local
//!   minima (one kept a resume step the other could drop, say): the table
//!   then lists it twice, each with a reproducer. Over-splitting shows a bug
//!   twice; merging two would hide one. Measured on 2,000 seeds: naive and
//!   rmcp give about a dozen each (see tests/hunt.rs), where they fail
//!   1,700-1,900 seeds.
//! - Unshrunk hunts (`--no-shrink`, plug-in servers) group by bucket only.

use crate::scenario::{Action, Plan};

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

/// The order in which a reproducer's violated checks name its bug: a leak
/// to another principal first (whatever else the thief's resumption broke),
/// then the four conditions, then what follows from them (a request lost to
/// a dead stream also fails liveness; a liveness failure alone is its own bug).
const ROOT_ORDER: [&str; 9] = [
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

/// The check that names a reproducer's bug: the first it violates of confidentiality,
/// the four conditions, then what follows from them (`ROOT_ORDER`).
pub fn root_check(violated: &[String]) -> &str {
    ROOT_ORDER.iter().find(|c| violated.iter().any(|v| v == *c)).copied().unwrap_or("none")
}

/// What a step contributes to a signature: the situation it makes, or
/// nothing for the traffic every scenario has (connecting, requests,
/// notifications, answers, waiting). A rebind and a sever both leave a
/// stream half-open, so both are `drop`; a reset ends the stream cleanly
/// and the client resumes at once, so it is a `resume`. A theft with the
/// owner's credential is, to any server, the owner on a second device:
/// nothing new.
fn situation(action: &Action) -> Option<&'static str> {
    match action {
        Action::Rebind { .. } | Action::Sever { .. } => Some("drop"),
        Action::Reset { .. } | Action::Resume { .. } => Some("resume"),
        Action::StealToken { credential: false, .. } => Some("steal-token"),
        Action::StealToken { credential: true, .. } => None,
        Action::CrashClient { .. } => Some("crash-client"),
        Action::CallTool { .. } => Some("call-tool"),
        Action::EndSession { .. } => Some("end-session"),
        Action::Connect { .. }
        | Action::ServerRequest { .. }
        | Action::Notify { .. }
        | Action::Answer { .. }
        | Action::Wait => None,
    }
}

/// The signature of a shrunk reproducer: the check that names its bug
/// ([`root_check`]) and the situations its steps make, as a set (the
/// shrinker may keep a step before or after another where either order
/// shows the same bug; a resume beside a drop is implied by it).
pub fn signature(plan: &Plan, violated: &[String]) -> String {
    let mut kinds: Vec<&str> = plan.steps.iter().filter_map(|s| situation(&s.action)).collect();
    kinds.sort();
    kinds.dedup();
    // A client whose stream went silent resumes by itself: a resume step
    // beside a drop is one the shrinker could not remove, not a new situation.
    if kinds.contains(&"drop") {
        kinds.retain(|k| *k != "resume");
    }
    format!("{} | {}", root_check(violated), if kinds.is_empty() { "traffic only".into() } else { kinds.join(" + ") })
}

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
