//! `replay-integrity`: a resumption from `Last-Event-ID: N` is accepted only
//! when N lies in the retained window; then the replay starts at N+1.
//!
//! Evidence: on an accepted resumption from N, the replay leaves out events
//! of the window the client never held, at its start (the server
//! truncated), in its middle or at its end (a silent gap); or N is newer
//! than any id the session showed at the acceptance (accepting a future id:
//! the session later mints ids at or below N as new, or N exceeds every id
//! seen by more than the ids that could have been minted unseen); or N is
//! below every id the session showed; or N is no number and no event of the
//! session ever carried it (a guessed or malformed id).
//!
//! Which events a replay owes comes from two kinds of evidence, and the
//! headline says which: events some socket carried (delivered, or written
//! into a dropped mapping), and, for events that reached no socket at all,
//! the ids the application reports minting (the engine reports every id; a
//! server plug's `AppReporter` lets it do the same). Numeric ids
//! are ordered, so the reported ids after N are owed; a server that reports
//! nothing is judged only on what the sockets carried.
//!
//! Not judged: resumptions by a thief (a client presenting another
//! principal's session without that principal's credential), who is owed no
//! replay; what a thief is given is `confidentiality`'s evidence.

use super::finding::{Finding, MintedWhere};
use super::observe::{Conn, Observed};
use super::{not_applicable, status, Status, Violation};
use crate::trace::SimTime;
use crate::vocab::CheckId;

pub const ID: CheckId = CheckId::ReplayIntegrity;
pub const ABOUT: &str =
    "an accepted resumption from N replays from N+1 without gaps, and N was an id the session minted";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A resumption from Last-Event-ID N is accepted only if N lies in the retained window; then replay starts exactly at N+1.",
    evidence: concat!(
        "The Last-Event-ID presented and the ids delivered on the accepted uplink; ids the client already held; every id the session showed (delivered, written into dropped mappings, reported by the application, which is how events that reached no socket are seen), plus an allowance for ids minted unseen.",
        super::writer_or_gap_rule!()
    ),
    condition: "Replay window integrity: N must not be older than the oldest retained id nor newer than the last emitted id; an evicted N means a fresh session, never a partial replay.",
    to_pass: "Reject (explicitly) resumptions from evicted or never-minted ids; replay from N+1 otherwise.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut thief = false;
    let mut out = Vec::new();
    for c in o.conns.values() {
        let Some((t_acc, acc_seq)) = c.accepted_resumption() else { continue };
        let Some(last) = c.last_event_id.as_deref() else { continue };
        let Some(token) = c.token() else { continue };
        // No replay is owed to a client presenting another principal's
        // session without its credential: a thief. What it was given is
        // confidentiality's to judge (rmcp and the TypeScript SDK answered
        // such a thief 200 and sent it nothing: that was called a gap).
        if o.foreign_on(c, token) {
            thief = true;
            continue;
        }
        // An empty stream ended at once, from an id the session never
        // minted, was a refusal in disguise: rejection-protocol's to judge.
        if refused_in_disguise(o, c) {
            continue;
        }
        let request_seq = c.request_seq.unwrap_or(acc_seq);
        let found = match c.last_event_id_number() {
            Some(n) => numeric(o, c, n, token, (t_acc, acc_seq, request_seq)),
            None => None,
        };
        // An id of no known shape that the session never showed cannot lie
        // inside its window (a guessed or malformed id).
        let found = found.or_else(|| never_shown(o, c, last, token, (t_acc, acc_seq, request_seq)));
        // Ids of any shape: events the stream carried after `last` that the
        // client never received must come first in the replay.
        let found = found.or_else(|| by_order(o, c, last, token, (t_acc, acc_seq, request_seq)));
        judged |= c.last_event_id_number().is_some()
            || o.stream_ids(&c.stream, t_acc).iter().any(|(_, i, _)| i == last)
            || found.is_some();
        out.extend(found);
    }
    if !judged && thief {
        return not_applicable(
            "only a thief's resumption was accepted: no replay is owed to a client presenting another principal's session",
        );
    }
    if !judged {
        return not_applicable("no resumption from an id the stream had shown was accepted");
    }
    status(out)
}

/// A refusal in disguise (issue "Bugs that escape", item 3): in
/// streamable-http an accepted resumption whose stream the server ended with
/// no event at all, from an id the session never minted (a future id, or
/// one no event carried). A server may end any stream (SSE polling), but a
/// poll from an id outside the session is no poll: rmcp answers an id it
/// never minted so, and so do the Python SDK and FastMCP. An empty stream
/// from a valid id (the Python SDK's empty replay while a half-open stream
/// is registered) stays polling.
pub(super) fn refused_in_disguise(o: &Observed, c: &Conn) -> bool {
    let ended_empty = c.delivered.is_empty() && c.ended.as_ref().is_some_and(|e| e.2 == crate::trace::SERVER_ENDED);
    if !o.streamable || !ended_empty {
        return false;
    }
    let (Some((t_acc, acc_seq)), Some(last), Some(token)) =
        (c.accepted_resumption(), c.last_event_id.as_deref(), c.token())
    else {
        return false;
    };
    let acc = (t_acc, acc_seq, c.request_seq.unwrap_or(acc_seq));
    let future = c
        .last_event_id_number()
        .is_some_and(|n| future_id(o, c, n, token, acc, o.possible_unseen_ids(token, t_acc)).is_some());
    future || never_shown(o, c, last, token, acc).is_some()
}

/// Numeric ids: a future id, or ids of the replay window the replay left out
/// (at its start, in its middle or at its end).
fn numeric(o: &Observed, c: &Conn, n: u64, token: &str, acc: (SimTime, u64, u64)) -> Option<Violation> {
    let t_acc = acc.0;
    // Ids the server may have minted without anyone seeing them: one per
    // POST (a response) and one per re-issue on the session.
    let unseen = o.possible_unseen_ids(token, t_acc);
    if let Some(v) = future_id(o, c, n, token, acc, unseen) {
        return Some(v);
    }
    // A gap in the numbering proves a loss only where every id is a message
    // (legacy-sse). In streamable-http a stream may open with a priming event
    // no one ever saw; there only events the run showed are owed (`by_order`).
    if c.session_header {
        return None;
    }
    let first = c.delivered.iter().find_map(|d| d.numeric_id().map(|id| (id, d.seq)))?;
    let mut held = o.ids_held(&c.client, token, t_acc);
    // Only ids the session is known to have had can be lost: those from its
    // lowest shown id on. An `n` below that (by more than the ids that could
    // have been minted unseen) lies outside any window the server kept.
    let lowest = o.ids_seen(token, t_acc).into_iter().min();
    if let Some(v) = older_than_retained(c, n, acc, unseen, first, &held, lowest) {
        return Some(v);
    }
    // Ids that went out on the session's other streams, or carried no message, are not owed.
    held.extend(o.ids_not_owed(token, &c.stream));
    window_gap(o, c, n, token, acc, first, &held, lowest)
}

/// A resumption from an id above the session's newest when it was accepted:
/// proven by an id minted as new later, at or below it (reported by the
/// application, on a POST's stream, or as the resumed stream's own priming
/// event), or by a gap wider
/// than the ids that could have been minted unseen.
fn future_id(
    o: &Observed,
    c: &Conn,
    n: u64,
    token: &str,
    (t_acc, acc_seq, request_seq): (SimTime, u64, u64),
    unseen: u64,
) -> Option<Violation> {
    let max = o.max_id_seen_before(token, acc_seq);
    if let Some(max) = max.filter(|m| n > *m) {
        if let Some((seq, id, t, shown)) = minted_later(o, c, token, t_acc, (max, n)) {
            return Some(Violation {
                check: ID,
                finding: Finding::MintedLater {
                    client: c.client.clone(),
                    conn: c.conn,
                    from: n,
                    accepted_at: t_acc,
                    newest: max,
                    id,
                    at: t,
                    shown,
                },
                t: t_acc,
                evidence: vec![request_seq, acc_seq, seq],
                inherent: false,
            });
        }
        if n > max + unseen {
            return Some(Violation {
                check: ID,
                finding: Finding::NeverShownAbove {
                    client: c.client.clone(),
                    conn: c.conn,
                    from: n,
                    newest: max,
                    unseen,
                },
                t: t_acc,
                evidence: vec![request_seq, acc_seq],
                inherent: false,
            });
        }
    }
    None
}

/// The first id (seq, id, time, where) that session `token` minted as new
/// after the accept at `t_acc`, above the newest it had shown (`max`) and at
/// or below resumption `c`'s `n`: proof that `n` had not been minted yet.
fn minted_later(
    o: &Observed,
    c: &Conn,
    token: &str,
    t_acc: SimTime,
    (max, n): (u64, u64),
) -> Option<(u64, String, SimTime, MintedWhere)> {
    // An id the session later minted as new, at or below `n`, proves `n`
    // had not been minted when the resumption was accepted. Minted as
    // new: reported by the application after the accept, or the
    // response on a POST sent after it. (An id first seen later in a
    // replay may have been minted unseen before: no proof.)
    let in_range = |i: u64| i > max && i <= n;
    let reported = o
        .requests
        .values()
        .filter(|r| r.token() == Some(token) && r.issued.0 > t_acc)
        .filter_map(|r| Some((r.issued.1, r.event_id.as_deref()?.parse::<u64>().ok()?, r.issued.0)))
        .chain(o.notified.iter().filter(|x| x.0 == token && x.1 > t_acc).map(|x| (x.3, x.2, x.1)))
        .filter(|(_, i, _)| in_range(*i))
        .min();
    let on_post = o
        .conns
        .values()
        .filter(|d| d.token() == Some(token) && d.method == "POST" && d.request_t.is_some_and(|r| r > t_acc))
        .flat_map(|d| d.delivered.iter().map(move |e| (d, e)))
        .filter(|(_, e)| e.rpc.is_some() && e.numeric_id().is_some_and(in_range))
        .min_by_key(|(_, e)| e.seq);
    // A priming event (an id, no message) on the resumed stream itself
    // was minted for that stream, after the accept: a replay never
    // carries one. Its id at or below `n` proves `n` was not minted yet
    // (found in streamable-http: naive accepted a resumption from the
    // next id to be minted and used that id for its priming event).
    let primed = c
        .delivered
        .iter()
        .filter(|e| e.rpc.is_none() && e.event == "message" && e.numeric_id().is_some_and(in_range))
        .min_by_key(|e| e.seq);
    let post = |(d, e): (&Conn, &super::observe::Delivered)| {
        (e.seq, e.id.clone().unwrap_or_default(), e.t, MintedWhere::Post { client: d.client.clone(), conn: d.conn })
    };
    reported
        .map(|(seq, id, t)| (seq, id.to_string(), t, MintedWhere::Application))
        .into_iter()
        .chain(on_post.map(post))
        .chain(primed.map(|e| (e.seq, e.id.clone().unwrap_or_default(), e.t, MintedWhere::Priming)))
        .min_by_key(|x| x.0)
}

/// A resumption from an id older than anything the session retained (or
/// never minted), accepted with a replay that starts later.
fn older_than_retained(
    c: &Conn,
    n: u64,
    (t_acc, acc_seq, request_seq): (SimTime, u64, u64),
    unseen: u64,
    first: (u64, u64),
    held: &[u64],
    lowest: Option<u64>,
) -> Option<Violation> {
    if let Some(lowest) = lowest.filter(|l| n.saturating_add(1).saturating_add(unseen) < *l && first.0 > n + 1) {
        let resent: Vec<u64> = c.delivered.iter().filter_map(|d| d.numeric_id()).filter(|i| held.contains(i)).collect();
        return Some(Violation {
            check: ID,
            finding: Finding::OlderThanRetained {
                client: c.client.clone(),
                conn: c.conn,
                from: n,
                lowest,
                replay_from: first.0,
                resent: resent.first().zip(resent.last()).map(|(a, b)| (*a, *b)),
            },
            t: t_acc,
            evidence: vec![request_seq, acc_seq, first.1],
            inherent: false,
        });
    }
    None
}

/// Ids of the replay window (minted before the client asked, after `n`,
/// not held) that the replay left out: at its start, middle or end.
#[allow(clippy::too_many_arguments)]
fn window_gap(
    o: &Observed,
    c: &Conn,
    n: u64,
    token: &str,
    (t_acc, acc_seq, request_seq): (SimTime, u64, u64),
    first: (u64, u64),
    held: &[u64],
    lowest: Option<u64>,
) -> Option<Violation> {
    // The replay window: every id after `n` the session is known to have
    // minted before the client even asked (so before the server accepted),
    // from its lowest shown id on, that the client did not hold. Each must
    // come on this connection. (Ids minted while the request was on its way
    // may be live events instead, and a live event lost with a connection is
    // not a replay's gap.)
    let t_req = c.request_t.unwrap_or(t_acc);
    let delivered: Vec<u64> = c.delivered.iter().filter_map(|d| d.numeric_id()).collect();
    let from = lowest.map_or(n + 1, |l| l.max(n + 1));
    let mut minted = o.ids_seen(token, t_req);
    // And those the application reported minting no later than an event
    // this replay carried: minted before the attach (the rule in `explain`).
    minted.extend(o.replay_floor(c, token).map_or(vec![], |f| o.reported_by(token, f)));
    let newest = minted.iter().max().copied().unwrap_or(0);
    let mut window: Vec<u64> = minted.into_iter().filter(|i| *i >= from).collect();
    // Numbering is dense in legacy-sse: ids below the first one replayed are owed too.
    window.extend(from..first.0.min(newest + 1));
    window.sort();
    window.dedup();
    let missing: Vec<u64> = window.into_iter().filter(|i| !held.contains(i) && !delivered.contains(i)).collect();
    if missing.is_empty() {
        return None;
    }
    // Missing at the end counts once the stream went on past them, or stayed
    // open long enough for any replay.
    let last_delivered = delivered.iter().max().copied().unwrap_or(0);
    let missing: Vec<u64> =
        if stayed_open(o, c, t_acc) { missing } else { missing.into_iter().filter(|i| *i < last_delivered).collect() };
    let b = *missing.last()?;
    let store_cut = unstored(o, token, &missing);
    let (client, conn, replay_from) = (c.client.clone(), c.conn, first.0);
    let finding = if b < first.0 {
        Finding::ReplayStartedLate { client, conn, from: n, replay_from, missing, store_cut }
    } else {
        Finding::WindowGap { client, conn, from: n, replay_from, missing, store_cut }
    };
    let evidence = vec![request_seq, acc_seq, first.1];
    Some(Violation { check: ID, finding, t: t_acc, evidence, inherent: store_cut.is_some() })
}

/// The replica that held session `token` when every one of `ids` was
/// minted, if a partition cut it from the shared store then and no client
/// ever saw them: a server that writes through held them for the store,
/// which may never have taken them (found by hunting: the replica then let
/// the session go, and the one that took it over never heard of them).
fn unstored(o: &Observed, token: &str, ids: &[u64]) -> Option<u32> {
    let owner = o.token_owner.get(token)?;
    let seen = o.conns.values().filter(|c| c.token() == Some(token)).flat_map(|c| c.delivered.iter());
    // (Seen carrying a message: a priming event under the same id is
    // another event, minted anew by the replica that took the session over
    // from a store that never had the first: replica hunt, seed 9504960.)
    let seen: Vec<u64> = seen.filter(|d| d.rpc.is_some()).filter_map(|d| d.numeric_id()).collect();
    let mut replicas = ids.iter().map(|id| {
        let at = o.reported_at(token, *id).filter(|_| !seen.contains(id))?;
        o.session_cut_from_store(owner, token, at, SimTime(at.0 + super::liveness::round_trip(o)))
    });
    let first = replicas.next()??;
    replicas.all(|r| r == Some(first)).then_some(first)
}

/// Events that reached no socket at all (logged for replay while the
/// stream had no writer) show only in what the application reports
/// minting: notifications, which go on the session's standalone GET
/// stream. Where ids are numbers they are ordered, so the ones after
/// `last`, minted before the client asked, are owed too.
/// Adds them to `owed` and returns them.
fn unwritten_owed(
    o: &Observed,
    c: &Conn,
    last: &str,
    token: &str,
    t_acc: SimTime,
    received: &std::collections::BTreeSet<&str>,
    owed: &mut Vec<String>,
) -> Vec<String> {
    let mut unwritten = Vec::new();
    if let (Ok(n), true) = (last.parse::<u64>(), c.stream.is_get()) {
        let t_req = c.request_t.unwrap_or(t_acc);
        for (_, _, id, _) in o.notified.iter().filter(|x| x.0 == token && x.1 < t_req && x.2 > n) {
            let id = id.to_string();
            if !received.contains(id.as_str()) && !owed.contains(&id) {
                unwritten.push(id.clone());
                owed.push(id);
            }
        }
        if !unwritten.is_empty() && owed.iter().all(|i| i.parse::<u64>().is_ok()) {
            owed.sort_by_key(|i| i.parse::<u64>().unwrap_or(u64::MAX));
        }
    } else if c.stream.is_get() {
        // Ids that are no numbers are ordered by when the application
        // reported minting them: those after `last` (after it in the reports,
        // or reported after a socket showed it) and before the client asked.
        let t_req = c.request_t.unwrap_or(t_acc);
        let reported: Vec<(SimTime, &str)> = o
            .notifications
            .iter()
            .filter(|x| x.token == token && x.stream.is_none())
            .flat_map(|x| x.ids.iter().map(move |i| (x.t, i.as_str())))
            .collect();
        let after = match reported.iter().position(|(_, i)| *i == last) {
            Some(p) => p + 1,
            None => o
                .conns
                .values()
                .filter(|d| d.token() == Some(token))
                .flat_map(|d| d.delivered.iter())
                .filter(|e| e.id.as_deref() == Some(last))
                .map(|e| e.t)
                .min()
                .map_or(reported.len(), |seen| reported.iter().position(|(t, _)| *t > seen).unwrap_or(reported.len())),
        };
        for (_, id) in reported[after..].iter().filter(|(t, _)| *t < t_req) {
            if !received.contains(id) && !owed.iter().any(|o| o == id) {
                unwritten.push(id.to_string());
                owed.push(id.to_string());
            }
        }
    }
    unwritten
}

/// A `Last-Event-ID` that no event of the session ever carried: any id where
/// the session's ids are not numbers, a non-numeric one where they are.
fn never_shown(
    o: &Observed,
    c: &Conn,
    last: &str,
    token: &str,
    (t_acc, acc_seq, request_seq): (SimTime, u64, u64),
) -> Option<Violation> {
    let carried = |id: &dyn Fn(&str) -> bool| {
        o.conns.values().filter(|d| d.token() == Some(token)).any(|d| {
            d.delivered.iter().any(|e| e.id.as_deref().is_some_and(id))
                || o.mapping_of(d).is_some_and(|m| {
                    m.dropped_writes.iter().any(|w| w.3.iter().any(|e| e.id.as_deref().is_some_and(id)))
                })
        })
    };
    // A number is judged by `numeric` where the session numbers its events.
    // Where it showed ids, none of them numbers (uuids, `stream_time_random`
    // and the like), a number it never carried lies in no window either.
    // Judged on the whole run: a session that shows its first numbered id
    // only after the resumption still numbers its ids (a hunt found guarded
    // flagged for accepting 1000, minted but not yet seen).
    if last.parse::<u64>().is_ok() && (o.max_id_seen(token, o.end).is_some() || !carried(&|_| true)) {
        return None;
    }
    if carried(&|id| id == last) {
        return None;
    }
    Some(Violation {
        check: ID,
        finding: Finding::NeverCarried {
            client: c.client.clone(),
            conn: c.conn,
            last: last.to_string(),
            accepted_at: t_acc,
        },
        t: t_acc,
        evidence: vec![request_seq, acc_seq],
        inherent: false,
    })
}

/// How long an accepted stream must stay open before a replay that has not
/// come is taken as never coming.
const REPLAY_WAIT_US: u64 = 2_000_000;

fn stayed_open(o: &Observed, c: &Conn, t_acc: SimTime) -> bool {
    let end = c.ended.as_ref().map_or(o.end, |e| e.0);
    // A stream closed at once is SSE polling (MCP 2025-11-25): the server
    // may send the rest on the next poll. If the client polls again from
    // the same id and that is accepted too, this poll's replay was all the
    // server had to give from there.
    let polled_again = o.conns.values().any(|d| {
        d.client == c.client
            && d.stream == c.stream
            && d.opened > c.opened
            && d.last_event_id == c.last_event_id
            && d.accepted_resumption().is_some()
    });
    end.0 >= t_acc.0 + REPLAY_WAIT_US || polled_again
}

/// Any ids: the events the stream carried after `last` (delivered elsewhere
/// or written into a dropped mapping) that the client never received, but
/// that the replay skipped past.
fn by_order(
    o: &Observed,
    c: &Conn,
    last: &str,
    token: &str,
    (t_acc, acc_seq, request_seq): (SimTime, u64, u64),
) -> Option<Violation> {
    // Only what the stream carried before the client asked to resume: later
    // writes to an old connection are a second writer (session-binding's
    // evidence), not a replay gap.
    let ids = o.stream_ids(&c.stream, c.opened);
    let pos = ids.iter().position(|(_, i, _)| i == last)?;
    let received: std::collections::BTreeSet<&str> = o
        .conns
        .values()
        .filter(|d| d.client == c.client && d.token() == Some(token) && d.opened < c.opened)
        .flat_map(|d| d.delivered.iter().filter(|e| e.t < t_acc).filter_map(|e| e.id.as_deref()))
        .collect();
    // Events that carried a message; priming events are never owed. An id
    // first seen late may be an old one replayed: numeric ids at or below
    // `last` are never owed.
    let below = |i: &str| matches!((i.parse::<u64>(), last.parse::<u64>()), (Ok(a), Ok(b)) if a <= b);
    let mut owed: Vec<String> = ids[pos + 1..]
        .iter()
        .filter(|x| x.2 && !below(&x.1))
        .map(|(_, i, _)| i.clone())
        .filter(|i| !received.contains(i.as_str()))
        .collect();
    let unwritten = unwritten_owed(o, c, last, token, t_acc, &received, &mut owed);
    let owed: Vec<&str> = owed.iter().map(String::as_str).collect();
    let replayed: Vec<(&str, u64)> =
        c.delivered.iter().filter(|d| d.rpc.is_some()).filter_map(|d| Some((d.id.as_deref()?, d.seq))).collect();
    // The owed events the replay left out: those before an owed event it did
    // send (at its start or in its middle), and, once the stream went on
    // with new events or stayed open long enough, those at its end.
    let sent = |i: &str| replayed.iter().any(|(r, _)| *r == i);
    let last_sent = owed.iter().rposition(|i| sent(i));
    let went_on = replayed.iter().any(|(r, _)| ids.iter().all(|(_, i, _)| i != r)) || stayed_open(o, c, t_acc);
    let skipped: Vec<&str> = owed
        .iter()
        .enumerate()
        .filter(|(k, i)| !sent(i) && (last_sent.is_some_and(|l| *k < l) || went_on))
        .map(|(_, i)| *i)
        .collect();
    if skipped.is_empty() {
        return None;
    }
    let mut evidence = vec![request_seq, acc_seq];
    evidence.extend(replayed.first().map(|(_, s)| *s));
    // Say which evidence showed each skipped event.
    let (never, carried): (Vec<&str>, Vec<&str>) = skipped.iter().partition(|i| unwritten.iter().any(|u| u == *i));
    // The application's report of minting the first of them is the evidence for those.
    let first_never = never.first().copied();
    evidence.extend(
        o.notifications
            .iter()
            .find(|x| x.token == token && first_never.is_some_and(|f| x.ids.iter().any(|i| i == f)))
            .map(|x| x.seq),
    );
    // Only events that reached no socket may be the store's loss (found by
    // a replica hunt, streamable-http seed 9504960: minted 0.4 s before a
    // partition cut the replica from the store, which never took them).
    let numbers: Option<Vec<u64>> = never.iter().map(|i| i.parse().ok()).collect();
    let store_cut = numbers.filter(|_| carried.is_empty()).and_then(|n| unstored(o, token, &n));
    Some(Violation {
        check: ID,
        finding: Finding::Skipped {
            client: c.client.clone(),
            conn: c.conn,
            last: last.to_string(),
            carried: carried.iter().map(|i| i.to_string()).collect(),
            never: never.iter().map(|i| i.to_string()).collect(),
            store_cut,
        },
        t: t_acc,
        evidence,
        inherent: store_cut.is_some(),
    })
}
