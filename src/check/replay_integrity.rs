//! `replay-integrity`: a resumption from `Last-Event-ID: N` is accepted only
//! when N lies in the retained window; then the replay starts at N+1.
//!
//! Evidence: on an accepted resumption from N, the first event delivered
//! skips ids the client never held (a silent gap: the server truncated), or
//! N is newer than any id the session ever showed (accepting a future id).

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};

pub const ID: &str = "replay-integrity";
pub const ABOUT: &str =
    "an accepted resumption from N replays from N+1 without gaps, and N was an id the session minted";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A resumption from Last-Event-ID N is accepted only if N lies in the retained window; then replay starts exactly at N+1.",
    evidence: "The Last-Event-ID presented and the ids delivered on the accepted uplink; ids the client already held; every id the session showed (delivered, written into dropped mappings, reported by the application), plus an allowance for ids minted unseen.",
    condition: "Replay window integrity: N must not be older than the oldest retained id nor newer than the last emitted id; an evicted N means a fresh session, never a partial replay.",
    to_pass: "Reject (explicitly) resumptions from evicted or never-minted ids; replay from N+1 otherwise.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for c in o.conns.values() {
        let Some((t_acc, acc_seq)) = c.accepted_resumption() else { continue };
        let Some(n) = c.last_event_id_number() else { continue };
        let Some(token) = c.token() else { continue };
        judged = true;
        let request_seq = c.request_seq.unwrap_or(acc_seq);
        // Ids the server may have minted without anyone seeing them: one per
        // POST (a response) and one per re-issue on the session.
        let unseen = o.possible_unseen_ids(token, t_acc);
        match o.max_id_seen(token, t_acc) {
            Some(max) if n > max + unseen => {
                out.push(Violation {
                    check: ID,
                    headline: format!(
                        "{}'s resumption from {n} was accepted on conn {}, but the session never showed an id above {max} (at most {unseen} more could have been minted unseen)",
                        c.client, c.conn
                    ),
                    t: t_acc,
                    evidence: vec![request_seq, acc_seq], inherent: false });
                continue;
            }
            _ => {}
        }
        let Some(first) = c.delivered.iter().find_map(|d| d.numeric_id().map(|id| (id, d.seq))) else { continue };
        if first.0 > n + 1 {
            let held = o.ids_held(&c.client, token, t_acc);
            let missing: Vec<u64> = (n + 1..first.0).filter(|i| !held.contains(i)).collect();
            if let (Some(a), Some(b)) = (missing.first(), missing.last()) {
                let range = if a == b { format!("event {a}") } else { format!("events {a}–{b}") };
                out.push(Violation {
                    check: ID,
                    headline: format!(
                        "{}'s resumption from {n} on conn {} replayed from {} instead of {}: {range} silently lost",
                        c.client,
                        c.conn,
                        first.0,
                        n + 1
                    ),
                    t: t_acc,
                    evidence: vec![request_seq, acc_seq, first.1],
                    inherent: false,
                });
            }
        }
    }
    if !judged {
        return not_applicable("no resumption with a numeric Last-Event-ID was accepted");
    }
    status(out)
}
