//! `stream-order`: on any one uplink, event ids increase strictly, and a
//! resumed uplink never re-sends what the client said it had.
//!
//! Evidence: an id below the previous id on the same connection; an id
//! delivered twice on one connection; an id at or below the `Last-Event-ID`
//! the resumption presented that the client already held (the same event
//! sent again, or a different event under an id already used: headlines say
//! which); an event a client already received handed to it again on a fresh
//! stream of the same session (a GET without `Last-Event-ID`). Ids that
//! are no numbers (uuids, the SDKs' `stream_time_random`) need no order
//! for identity: one the client received on the stream it resumes, at or
//! before its Last-Event-ID, sent again is a duplicate; and where the
//! application reports the ids it minted, their order is the report's.

use super::finding::{Finding, Msg};
use super::observe::{Conn, Delivered, Observed};
use super::{not_applicable, status, Status, Violation};
use crate::vocab::CheckId;

pub const ID: CheckId = CheckId::StreamOrder;
pub const ABOUT: &str = "ids on one uplink increase strictly; a resumed uplink never re-sends ids up to Last-Event-ID; no event is delivered twice";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning:
        "On one uplink, event ids strictly increase, and a resumed uplink never re-sends ids the client said it had.",
    evidence: "The ids (and events) delivered on each stream connection, the Last-Event-ID it presented, and the events the client held for the session before it opened. Ids that are no numbers are compared for identity (one the client received on the resumed stream at or before its Last-Event-ID is a duplicate) and ordered as the application reported minting them.",
    condition: "The SSE Last-Event-ID promise: re-deliver events with ids greater than N.",
    to_pass: "Replay from N+1 and keep ids monotonic per stream.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for c in o.conns.values().filter(|c| c.is_uplink() || !c.stream.is_none()) {
        judged |= judge_stream(o, c, &mut out);
    }
    if !judged {
        return not_applicable("no stream delivered an event with an id");
    }
    status(out)
}

/// Judges the events one stream connection delivered, in order; returns
/// whether it delivered any event with an id.
fn judge_stream(o: &Observed, c: &Conn, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    // What the client already held for this session when this stream opened.
    let held = c.token().map_or_else(Vec::new, |t| o.held_events(&c.client, t, c.opened));
    let held_under = |id: &str| held.iter().rev().find(|(_, h)| h.id.as_deref() == Some(id)).copied();
    // A plain GET on a session the client already holds asks for nothing old.
    let fresh_stream = c.last_event_id.is_none() && c.presented_token.is_some();
    let rank = c.token().map(|t| mint_order(o, t)).unwrap_or_default();
    let mut prev: Option<&Delivered> = None;
    for (k, d) in c.delivered.iter().enumerate() {
        let Some(id) = d.id.as_deref() else { continue };
        judged = true;
        let violation = |finding: Finding, mut evidence: Vec<u64>| {
            evidence.sort();
            Violation { check: ID, finding, t: d.t, evidence, inherent: false }
        };
        let asked_up_to = match (d.numeric_id(), c.last_event_id_number()) {
            (Some(x), Some(n)) => x <= n,
            // Ids of other shapes need no order: the client said it had
            // every event it received on this stream up to the one carrying
            // its Last-Event-ID, so one of those sent again is a duplicate.
            // (Only events that carry a message: a priming event sent again
            // hands the client nothing. The TypeScript SDK's store orders
            // ids minted in one millisecond by their random suffix, and
            // replays such a priming event after the id resumed from.)
            _ => c.last_event_id.as_deref() == Some(id) || (d.rpc.is_some() && held_up_to_last(c, &held, id)),
        };
        let earlier_here = c.delivered[..k].iter().rev().find(|e| e.id.as_deref() == Some(id));
        if let (true, Some((hc, h))) = (asked_up_to, held_under(id)) {
            out.push(violation(
                resent_held(c, d, id, hc, h),
                c.request_seq.into_iter().chain([h.seq, d.seq]).collect(),
            ));
        } else if c.last_event_id.as_deref() == Some(id) && d.rpc.is_some() {
            // The very event the client named as its last, sent again, though
            // this client never received it (it took the id from another:
            // a thief, a client on a second device). Resuming from an id
            // means "after it", whoever names it: the replay is inclusive.
            let (client, conn, last, id) = (c.client.clone(), c.conn, id.to_string(), id.to_string());
            out.push(violation(
                Finding::ResentHeld { client, conn, last, id, at: d.t },
                c.request_seq.into_iter().chain([d.seq]).collect(),
            ));
        } else if let Some(e) = earlier_here {
            let (client, conn, id) = (c.client.clone(), c.conn, id.to_string());
            let finding = if e.same_event(d) {
                Finding::DeliveredTwice { client, conn, id, at: d.t }
            } else {
                Finding::TwoEventsOneId { client, conn, id, first: (msg(e), e.t), second: (msg(d), d.t) }
            };
            out.push(violation(finding, vec![e.seq, d.seq]));
        } else if let Some(p) = prev.filter(|p| {
            matches!((p.numeric_id(), d.numeric_id()), (Some(a), Some(b)) if b < a) || minted_before(&rank, d, p)
        }) {
            let after = p.id.clone().unwrap_or_else(|| "-".into());
            let finding = Finding::OutOfOrder { client: c.client.clone(), conn: c.conn, id: id.into(), after, at: d.t };
            out.push(violation(finding, vec![p.seq, d.seq]));
        } else if let Some((hc, h)) = held_under(id).filter(|(_, h)| fresh_stream && d.rpc.is_some() && h.same_event(d))
        {
            out.push(violation(
                Finding::FreshStreamResent {
                    client: c.client.clone(),
                    conn: c.conn,
                    id: id.into(),
                    msg: msg(d),
                    at: d.t,
                    held: (hc.conn, h.t),
                },
                c.request_seq.into_iter().chain([h.seq, d.seq]).collect(),
            ));
        }
        prev = Some(d);
    }
    judged
}

/// A resumed stream sent `d` under an id at or below its Last-Event-ID that
/// the client already held (`h`, first seen on `hc`): the same event again,
/// or two events under one id.
fn resent_held(c: &Conn, d: &Delivered, id: &str, hc: &Conn, h: &Delivered) -> Finding {
    let last = c.last_event_id.clone().unwrap_or_else(|| "-".into());
    let (client, conn, id, at) = (c.client.clone(), c.conn, id.to_string(), d.t);
    if h.same_event(d) {
        Finding::ResentHeld { client, conn, last, id, at }
    } else {
        Finding::HeldIdReused { client, conn, last, id, at, sent: msg(d), held: (msg(h), hc.conn, h.t) }
    }
}

/// A delivered event as a finding names it.
fn msg(d: &Delivered) -> Msg {
    Msg { rpc: d.rpc.clone(), event: d.event.clone() }
}

/// Whether the client, before resumption `c`, received an event with id
/// `id` on the stream `c` resumes, at or before the last event it received
/// there under `c`'s Last-Event-ID.
fn held_up_to_last(c: &Conn, held: &[(&Conn, &Delivered)], id: &str) -> bool {
    let Some(last) = c.last_event_id.as_deref() else { return false };
    let on_stream: Vec<&Delivered> = held.iter().filter(|(hc, _)| hc.stream == c.stream).map(|(_, h)| *h).collect();
    let Some(upto) = on_stream.iter().rposition(|h| h.id.as_deref() == Some(last)) else { return false };
    on_stream[..=upto].iter().any(|h| h.id.as_deref() == Some(id))
}

/// The order in which the application reported minting the session's
/// event ids that are no numbers: id → rank (numbers are ordered by value).
fn mint_order<'o>(o: &'o Observed, token: &str) -> std::collections::BTreeMap<&'o str, usize> {
    let ids = o.notifications.iter().filter(|n| n.token == token).flat_map(|n| n.ids.iter());
    let mut rank = std::collections::BTreeMap::new();
    for (k, id) in ids.filter(|i| i.parse::<u64>().is_err()).enumerate() {
        rank.entry(id.as_str()).or_insert(k);
    }
    rank
}

/// Whether the application reported minting `d` before `p` (so `d`, sent
/// after `p` on one stream, came out of order).
fn minted_before(rank: &std::collections::BTreeMap<&str, usize>, d: &Delivered, p: &Delivered) -> bool {
    let of = |x: &Delivered| x.id.as_deref().and_then(|i| rank.get(i)).copied();
    matches!((of(d), of(p)), (Some(a), Some(b)) if a < b)
}
