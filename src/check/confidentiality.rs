//! `confidentiality`: no event of a session reaches a principal other than
//! the session's owner, and no other principal's DELETE or answer acts on it
//! (sessions are bound to the principal that opened them).
//!
//! Evidence: SSE messages delivered on a connection that presented a session
//! token to a client whose principal is not the token owner's (and the
//! owner's live stream that accepting its resumption ended, which counts
//! even when nothing of the owner's reached it yet); messages the
//! application reported on one principal's session, delivered on another
//! principal's own session (a store shared by every session); a DELETE by
//! another principal that the server answered 2xx (it ended the owner's
//! session); an answer the application applied that only another principal
//! had sent; a tool-list change (`enable_tool`) another principal asked for
//! on the session, which the server made or told the owner's stream of (the
//! "session hijack prompt injection", through a shared queue when the
//! session's stream is on another replica). When the thief
//! also stole the owner's credential, no server can tell them apart: this
//! check still reports the leak, because it happened.

use super::finding::{Finding, Msg};
use super::observe::{Answer, Conn, Observed};
use super::{not_applicable, status, Status, Violation};
use crate::trace::{Outcome, SimTime};
use crate::vocab::{CheckId, ConnId};
use crate::wire::jsonrpc::RpcKind;
use crate::wire::mrtr::TOOLS_CHANGED;

pub const ID: CheckId = CheckId::Confidentiality;
pub const ABOUT: &str =
    "a session is its owner's: no event of it reaches another principal, and no DELETE, answer or tool call from one acts on it";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A session belongs to the principal that opened it: no event of it is delivered to another principal, and no DELETE, answer or tool call from another principal acts on it (nor reaches the owner's stream).",
    evidence: "Which client learned each session token (its owner), which client presented it, and the messages delivered on that connection (and the owner's live stream the server ended when it accepted another principal's resumption); the events the application reported on each session, and any delivered on another principal's session; DELETEs, answers and enable_tool calls sent with it and what the server and its application did with them (a tool result; a tools/list_changed on the owner's stream after the call); token thefts recorded by the harness.",
    condition: "The analysis's step 6: a token holder resuming from an old id must not receive another user's events; bind sessions to principals (MCP security best practices: session hijack impersonation and prompt injection).",
    to_pass: "Bind each session to the credential that opened it and refuse other principals (403) without killing the owner's session. A thief that holds the owner's credential cannot be told apart: such leaks are reported as inherent.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    for c in o.conns.values() {
        let Some(token) = c.presented_token.as_deref() else { continue };
        let Some(owner) = o.token_owner.get(token) else { continue };
        if o.principal(&c.client) == o.principal(owner) {
            continue;
        }
        judged = true;
        let leaked: Vec<_> = c.delivered.iter().filter(|d| d.rpc.is_some()).collect();
        let ended = owner_stream_ended(o, c, token, owner);
        let (Some(first), Some(last)) = (leaked.first(), leaked.last()) else {
            // Nothing of the owner's reached it, yet the server let it take
            // the owner's stream over (issue "Bugs that escape", item 4).
            // (Once per thief and session: a thief and an owner that keep
            // resuming take the stream from each other again and again.)
            let again = out.iter().any(|v: &Violation| {
                matches!(&v.finding, Finding::TakenOver { client, owner: o2, .. } if *client == c.client && o2 == owner.as_str())
            });
            if let (Some(ended), Some((_, _, at, seq)), false) = (ended, c.response, again) {
                let mut evidence: Vec<u64> = c.request_seq.into_iter().chain([seq, ended.3]).collect();
                evidence.sort();
                let why = o.indistinguishable(c, token, owner);
                out.push(Violation {
                    check: ID,
                    inherent: why.is_some(),
                    finding: Finding::TakenOver {
                        client: c.client.clone(),
                        principal: o.principal(&c.client).to_string(),
                        owner: owner.clone(),
                        conn: c.conn,
                        at,
                        ended: (ended.0, ended.1, ended.2),
                        why,
                    },
                    t: at,
                    evidence,
                });
            }
            continue;
        };
        let requests: Vec<Msg> = leaked
            .iter()
            .filter(|d| d.rpc.as_ref().is_some_and(|r| r.kind == RpcKind::Request))
            .map(|d| Msg { rpc: d.rpc.clone(), event: d.event.clone() })
            .collect();
        // Did the thief present the session's credential (or does the server
        // authenticate no one)? Then no server could tell.
        let why = o.indistinguishable(c, token, owner);
        let inherent = why.is_some();
        out.push(Violation {
            check: ID,
            finding: Finding::Leak {
                client: c.client.clone(),
                principal: o.principal(&c.client).to_string(),
                owner: owner.clone(),
                conn: c.conn,
                count: leaked.len(),
                first_id: first.id.clone(),
                last_id: last.id.clone(),
                requests,
                why,
                ended: ended.map(|e| (e.0, e.1, e.2)),
            },
            t: first.t,
            evidence: c.request_seq.into_iter().chain(leaked.iter().map(|d| d.seq)).collect(),
            inherent,
        });
    }
    judged |= foreign_acts(o, &mut out);
    judged |= foreign_tool_changes(o, &mut out);
    judged |= cross_session(o, &mut out);
    if !judged {
        return not_applicable("no client presented another principal's session token");
    }
    status(out)
}

/// How much longer than the owner's stream a thief's empty stream must last
/// to have taken it over (a hunt's tick).
const OUTLIVED_US: u64 = 200_000;

/// The owner's live stream that another principal's accepted resumption
/// `c` ended: a stream of the same session carried to a client of the
/// owner's principal, answered before `c`, that the server ended between
/// `c`'s request and a round trip after its acceptance (its body ended or
/// its connection cut), while its mapping was up. Returns `(owner's client, its conn, when it ended, that seq)`.
fn owner_stream_ended(o: &Observed, c: &Conn, token: &str, owner: &str) -> Option<(String, ConnId, SimTime, u64)> {
    let (200, true, accepted, _) = c.response? else { return None };
    let asked = c.request_t?;
    // A refusal in disguise took nothing over.
    let refused = c.rejected.is_some() || super::replay_integrity::refused_in_disguise(o, c);
    if c.method != "GET" || !c.stream.is_get() || refused {
        return None;
    }
    let until = SimTime(accepted.0 + super::liveness::round_trip(o));
    // It took the stream over: it carried an event, or outlived the owner's
    // stream (a refusal that ends the whole session, the thief's empty
    // stream with it, ends both at once).
    let outlived = |owner_end: SimTime| {
        !c.delivered.is_empty() || c.ended.as_ref().is_none_or(|e| e.0 .0 > owner_end.0 + OUTLIVED_US)
    };
    o.conns
        .values()
        .filter(|v| v.client != c.client && o.principal(&v.client) == o.principal(owner))
        .filter(|v| v.stream == c.stream && v.token() == Some(token))
        .filter(|v| matches!(v.response, Some((200, true, t, _)) if t < accepted))
        .filter_map(|v| {
            let (t, seq, why) = v.ended.as_ref()?;
            // Not the network's doing: no drop or reset of its mapping first.
            let live = o
                .mapping_of(v)
                .is_none_or(|m| m.dropped.as_ref().is_none_or(|d| d.0 > *t) && m.reset.is_none_or(|r| r.0 > *t));
            // Ended by the server: the body's end, or the connection cut under it.
            let by_server = why == crate::trace::SERVER_ENDED || why.starts_with("stream error");
            (by_server && *t >= asked && *t <= until && live && outlived(*t))
                .then(|| (v.client.clone(), v.conn, *t, *seq))
        })
        .min_by_key(|e| e.2)
}

/// Events the application reported emitting on one session (notifications,
/// server requests) that a client of another principal received on a
/// session of its own: a replay drawn from an event store that serves every
/// session and files their streams under one stream id hands one user's
/// events to another without any theft. An event counts when the
/// application reported its id on another principal's session, not on the
/// receiving one, and an event with that id and the same bytes was
/// delivered on that other session (servers that number each session's
/// events from the same start reuse ids across sessions, and a re-issue's
/// event id goes unreported: a hunt found both). Returns
/// whether two sessions of different principals were open to judge.
fn cross_session(o: &Observed, out: &mut Vec<Violation>) -> bool {
    use std::collections::{BTreeMap, BTreeSet};
    // Event id -> the sessions (tokens) the application said carried it.
    let mut sessions_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for n in &o.notifications {
        for id in &n.ids {
            sessions_of.entry(id.as_str()).or_default().insert(n.token.as_str());
        }
    }
    for r in o.requests.values() {
        if let (Some(id), Some(token)) = (r.event_id.as_deref(), r.token()) {
            sessions_of.entry(id).or_default().insert(token);
        }
    }
    let principals: BTreeSet<&str> = o.token_owner.values().map(|owner| o.principal(owner)).collect();
    if principals.len() < 2 || sessions_of.is_empty() {
        return false;
    }
    // (session, event id) -> the data of every event delivered under that
    // session with that id: the same id with the same bytes is the same event.
    let mut delivered_on: BTreeMap<(&str, &str), BTreeSet<u64>> = BTreeMap::new();
    for c in o.conns.values() {
        let Some(token) = c.presented_token.as_deref() else { continue };
        for d in &c.delivered {
            if let Some(id) = d.id.as_deref() {
                delivered_on.entry((token, id)).or_default().insert(d.data_hash);
            }
        }
    }
    for c in o.conns.values() {
        let Some(token) = c.presented_token.as_deref() else { continue };
        let me = o.principal(&c.client);
        // (the other session's owner, what was delivered), in delivery order.
        let mut leaked: Vec<(&String, &super::observe::Delivered)> = Vec::new();
        for d in c.delivered.iter().filter(|d| d.rpc.is_some()) {
            let Some(id) = d.id.as_deref() else { continue };
            let Some(carriers) = sessions_of.get(id) else { continue };
            if carriers.contains(token) {
                continue;
            }
            // Another principal's session carried this very event: its id, and
            // its bytes as delivered there (servers that number each session's
            // events alike reuse ids, never the bytes of another's event).
            let foreign = carriers
                .iter()
                .filter(|t| delivered_on.get(&(**t, id)).is_some_and(|h| h.contains(&d.data_hash)))
                .filter_map(|t| o.token_owner.get(*t))
                .find(|owner| o.principal(owner) != me);
            if let Some(owner) = foreign {
                leaked.push((owner, d));
            }
        }
        let (Some((owner, first)), Some((_, last))) = (leaked.first(), leaked.last()) else { continue };
        let leaked_of: Vec<_> = leaked.iter().filter(|(o2, _)| o2 == owner).map(|(_, d)| *d).collect();
        let requests: Vec<Msg> = leaked_of
            .iter()
            .filter(|d| d.rpc.as_ref().is_some_and(|r| r.kind == RpcKind::Request))
            .map(|d| Msg { rpc: d.rpc.clone(), event: d.event.clone() })
            .collect();
        out.push(Violation {
            check: ID,
            finding: Finding::Leak {
                client: c.client.clone(),
                principal: me.to_string(),
                owner: (*owner).clone(),
                conn: c.conn,
                count: leaked_of.len(),
                first_id: first.id.clone(),
                last_id: last.id.clone(),
                requests,
                why: None,
                ended: None,
            },
            t: first.t,
            evidence: c.request_seq.into_iter().chain(leaked_of.iter().map(|d| d.seq)).collect(),
            inherent: false,
        });
    }
    true
}

/// Tool-list changes another principal asked for on a session it held by
/// its token (an `enable_tool` call): the server enabled the tool, or the
/// owner's stream was told of a change after the call while the owner had
/// asked for none. Returns whether there was any such call to judge.
fn foreign_tool_changes(o: &Observed, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for e in &o.tool_enables {
        let Some(c) = o.conns.get(&(e.client.clone(), e.conn)) else { continue };
        let Some(token) = c.presented_token.as_deref() else { continue };
        let Some(owner) = o.token_owner.get(token) else { continue };
        if o.principal(&c.client) == o.principal(owner) {
            continue;
        }
        judged = true;
        let Some(sent) = c.request_t else { continue };
        // The owner's own calls: a change it asked for is no injection.
        let owner_asked = o.tool_enables.iter().any(|x| {
            o.principal(&x.client) == o.principal(owner)
                && o.conns.get(&(x.client.clone(), x.conn)).is_some_and(|k| k.presented_token.as_deref() == Some(token))
        });
        let told = (!owner_asked)
            .then(|| {
                o.conns
                    .values()
                    .filter(|k| {
                        k.presented_token.as_deref() == Some(token) && o.principal(&k.client) == o.principal(owner)
                    })
                    .flat_map(|k| k.delivered.iter().map(move |d| (k.conn, d)))
                    .filter(|(_, d)| {
                        d.t >= sent && d.rpc.as_ref().and_then(|r| r.method.as_deref()) == Some(TOOLS_CHANGED)
                    })
                    .min_by_key(|(_, d)| (d.t, d.seq))
            })
            .flatten();
        let enabled = e.enabled == Some(true);
        if !enabled && told.is_none() {
            continue;
        }
        let why = o.indistinguishable(c, token, owner);
        let inherent = why.is_some();
        let t = told.map_or(e.t, |(_, d)| d.t.min(e.t));
        out.push(Violation {
            check: ID,
            finding: Finding::ForeignToolChange {
                client: c.client.clone(),
                principal: o.principal(&c.client).to_string(),
                owner: owner.clone(),
                conn: c.conn,
                tool: e.tool.clone(),
                enabled,
                told: told.map(|(k, d)| (k, d.id.clone(), d.t)),
                why,
            },
            t,
            evidence: c.request_seq.into_iter().chain([e.seq]).chain(told.map(|(_, d)| d.seq)).collect(),
            inherent,
        });
    }
    judged
}

/// What another principal did to a session that the server let through: a
/// DELETE that ended it, an answer the application applied. Returns whether
/// there was any such act to judge.
fn foreign_acts(o: &Observed, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for c in o.conns.values().filter(|c| c.method == "DELETE") {
        let Some(token) = c.presented_token.as_deref() else { continue };
        let Some(owner) = o.token_owner.get(token) else { continue };
        if o.principal(&c.client) == o.principal(owner) {
            continue;
        }
        judged = true;
        let Some((status, _, t, seq)) = c.response.filter(|r| (200..300).contains(&r.0)) else { continue };
        let why = o.indistinguishable(c, token, owner);
        let inherent = why.is_some();
        out.push(Violation {
            check: ID,
            finding: Finding::ForeignDelete {
                client: c.client.clone(),
                principal: o.principal(&c.client).to_string(),
                owner: owner.clone(),
                conn: c.conn,
                status,
                at: t,
                why,
            },
            t,
            evidence: c.request_seq.into_iter().chain([seq]).collect(),
            inherent,
        });
    }
    for r in o.requests.values() {
        let Some(token) = r.token() else { continue };
        // The session's owner is whoever opened it, not the client a step
        // named: a request issued "on a thief's session" goes on the stolen
        // session, whose owner answering it is no leak (found by fuzzing).
        let owner = o.token_owner.get(token).unwrap_or(&r.owner);
        for (t_o, seq_o, outcome, id, _) in &r.outcomes {
            if *outcome != Outcome::Answered {
                continue;
            }
            let sent: Vec<_> = o
                .answers
                .iter()
                .filter(|a| &a.id == id && a.session.as_deref() == Some(token) && a.maybe_sent_by(o, *t_o))
                .collect();
            let foreign: Vec<_> = sent.iter().filter(|a| o.principal(&a.client) != o.principal(owner)).collect();
            if foreign.is_empty() {
                continue;
            }
            judged = true;
            // Applied although only other principals had answered.
            let presented = |a: &Answer| match a.conn.and_then(|k| o.conns.get(&(a.client.clone(), k))) {
                Some(c) => o.presents(c).to_string(),
                None => o.speaks_as(&a.client, a.t).to_string(),
            };
            if foreign.len() < sent.len() || foreign.iter().any(|a| !o.foreign_as(&presented(a), token)) {
                continue;
            }
            out.push(Violation {
                check: ID,
                finding: Finding::ForeignAnswer {
                    label: r.label.clone(),
                    method: r.method.clone(),
                    owner: owner.clone(),
                    at: *t_o,
                    by: foreign.iter().map(|a| (a.client.clone(), o.principal(&a.client).to_string())).collect(),
                },
                t: *t_o,
                evidence: foreign.iter().map(|a| a.seq).chain([*seq_o]).collect(),
                inherent: false,
            });
        }
    }
    judged
}
