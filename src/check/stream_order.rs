//! `stream-order`: on any one uplink, event ids increase strictly, and a
//! resumed uplink never re-sends what the client said it had.
//!
//! Evidence: an id not above the previous id on the same connection, or an
//! id at or below the `Last-Event-ID` the resumption presented that the
//! client already held (a duplicate).

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};

pub const ID: &str = "stream-order";
pub const ABOUT: &str = "ids on one uplink increase strictly; a resumed uplink never re-sends ids up to Last-Event-ID";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning:
        "On one uplink, event ids strictly increase, and a resumed uplink never re-sends ids the client said it had.",
    evidence: "The ids delivered on each uplink connection and the Last-Event-ID it presented.",
    condition: "The SSE Last-Event-ID promise: re-deliver events with ids greater than N.",
    to_pass: "Replay from N+1 and keep ids monotonic per stream.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for c in o.conns.values().filter(|c| c.is_uplink() || !c.stream.is_empty()) {
        let floor = c.last_event_id_number();
        // What the client already held for this session when it resumed.
        let held = match (floor, c.token()) {
            (Some(_), Some(token)) => o.ids_held(&c.client, token, c.opened),
            _ => Vec::new(),
        };
        let mut prev: Option<(u64, u64)> = None;
        let mut seen_here: Vec<&str> = Vec::new();
        for d in &c.delivered {
            let Some(id) = d.numeric_id() else {
                // Ids of other shapes can only be compared for equality.
                let Some(id) = d.id.as_deref() else { continue };
                judged = true;
                let again = c.last_event_id.as_deref() == Some(id)
                    && c.token().is_some_and(|t| o.ids_held_str(&c.client, t, c.opened).contains(&id));
                if again || seen_here.contains(&id) {
                    let what = if again {
                        format!(
                            "{} resumed from {id} on conn {} and was sent event {id} again at {}",
                            c.client, c.conn, d.t
                        )
                    } else {
                        format!("{}'s conn {} delivered event {id} twice (again at {})", c.client, c.conn, d.t)
                    };
                    out.push(Violation {
                        check: ID,
                        headline: what,
                        t: d.t,
                        evidence: c.request_seq.into_iter().chain([d.seq]).collect(),
                        inherent: false,
                    });
                }
                seen_here.push(id);
                continue;
            };
            judged = true;
            if let Some(n) = floor.filter(|n| id <= *n && held.contains(&id)) {
                out.push(Violation {
                    check: ID,
                    headline: format!(
                        "{} resumed from {n} on conn {} and was sent event {id} again at {}",
                        c.client, c.conn, d.t
                    ),
                    t: d.t,
                    evidence: c.request_seq.into_iter().chain([d.seq]).collect(),
                    inherent: false,
                });
            } else if let Some((p, p_seq)) = prev.filter(|(p, _)| id <= *p) {
                out.push(Violation {
                    check: ID,
                    headline: format!("{}'s conn {} delivered event {id} after event {p} at {}", c.client, c.conn, d.t),
                    t: d.t,
                    evidence: vec![p_seq, d.seq],
                    inherent: false,
                });
            }
            prev = Some((id, d.seq));
        }
    }
    if !judged {
        return not_applicable("no stream delivered an event with an id");
    }
    status(out)
}
