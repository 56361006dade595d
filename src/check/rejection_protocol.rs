//! `rejection-protocol`: a refused resumption is explicit (an error event or
//! an HTTP error, never an empty 200), the refused owner's token is dead
//! afterwards, and the owner re-initializes.
//!
//! Evidence: a resumption answered 200 whose stream ended with no event; a
//! request that still succeeded with a token after its owner was refused;
//! an owner that never obtained a new session after a refusal.

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};

pub const ID: &str = "rejection-protocol";
pub const ABOUT: &str = "refusals are explicit, kill the owner's token, and the owner re-initializes";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A refused resumption is explicit, kills the owner's token, and the owner re-initializes.",
    evidence: "Resumption responses (status, stream, first events), later uses of the same token and whether they were served, and the owner's next session token.",
    condition: "If any condition fails, reject the resumption: close the new uplink with an explicit error event, invalidate the session token, and have the client re-initialize.",
    to_pass: "Refuse with an error event or an HTTP error (never an empty 200) and invalidate the token of a refused owner (a refused thief may be turned away without touching the owner's session).",
};

/// How long a refused client gets to obtain a new session (a few round trips;
/// in streamable-http, initialize and initialized POSTs first).
const RENEW_ALLOWANCE_US: u64 = 5_000_000;

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for c in o.conns.values() {
        let Some((t_rej, rej_seq, how)) = &c.rejected else { continue };
        judged = true;
        if how.contains("empty stream") {
            out.push(Violation {
                check: ID,
                headline: format!(
                    "{}'s resumption on conn {} was answered 200 with an empty stream: a silent refusal",
                    c.client, c.conn
                ),
                t: *t_rej,
                evidence: c.request_seq.into_iter().chain([*rej_seq]).collect(),
                inherent: false,
            });
        }
        // A refused tool-call stream (streamable-http) leaves the session alive:
        // only a refused session resumption kills the token.
        if !c.is_uplink() {
            continue;
        }
        let Some(token) = c.presented_token.as_deref() else { continue };
        let Some(owner) = o.token_owner.get(token) else { continue };
        if o.principal(owner) != o.principal(&c.client) {
            continue; // a thief refused: the owner's session may live on
        }
        // The token must be dead afterwards.
        for later in o.conns.values().filter(|l| l.presented_token.as_deref() == Some(token) && l.opened > *t_rej) {
            let ok = match later.response {
                Some((200, true, _, _)) => !later.delivered.is_empty() && later.rejected.is_none(),
                Some((s, false, _, _)) => (200..300).contains(&s),
                _ => false,
            };
            if ok {
                let (_, _, t, seq) = later.response.expect("matched above");
                out.push(Violation {
                    check: ID,
                    headline: format!(
                        "{owner}'s token still worked after the refusal at {t_rej}: {}'s conn {} was served at {t}",
                        later.client, later.conn
                    ),
                    t,
                    evidence: vec![*rej_seq, seq],
                    inherent: false,
                });
            }
        }
        // The owner re-initializes: it obtains a new session.
        // (A client that crashed meanwhile re-initializes only if restarted.)
        // (A run that ends soon after the refusal leaves no time to re-initialize.)
        let crashed = o.crashed_between(&c.client, *t_rej, o.end);
        let has_time = o.end.0 >= t_rej.0 + RENEW_ALLOWANCE_US;
        if !crashed && has_time && (c.client == *owner || o.principal(&c.client) == o.principal(owner)) {
            let renewed =
                o.conns.values().any(|n| n.client == c.client && n.opened >= *t_rej && n.learned_token.is_some());
            if !renewed {
                out.push(Violation {
                    check: ID,
                    headline: format!(
                        "{} never obtained a new session after its resumption was refused at {t_rej}",
                        c.client
                    ),
                    t: o.end,
                    evidence: vec![*rej_seq],
                    inherent: false,
                });
            }
        }
    }
    if !judged {
        return not_applicable("no resumption was refused");
    }
    status(out)
}
