//! `session-binding`: the new uplink becomes the sole writer of its session;
//! the prior writer is fenced first, never raced.
//!
//! Evidence: after a client's resumption of session S was accepted, the
//! server still wrote bytes into a NAT mapping that carried an earlier,
//! dropped uplink of S. Those bytes can only come from a second writer. So
//! can events written there before the acceptance reached the client whose
//! ids are newer than anything the new connection's replay carried (a fence
//! that came after the new writer was attached).

use super::finding::{Finding, LateWrite, Msg};
use super::observe::{Conn, Observed};
use super::{not_applicable, status, Status, Violation};
use crate::trace::SimTime;
use crate::vocab::CheckId;
use crate::wire::jsonrpc::RpcKind;

pub const ID: CheckId = CheckId::SessionBinding;
pub const ABOUT: &str = "after a resumption is accepted, no server byte of the session enters the prior (dead) uplink";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "When a client resumes a session on a new connection, the new uplink must become the session's only writer; the old writer is fenced first, never raced.",
    evidence: concat!(
        "NAT records of bytes the server wrote into a client's dropped mapping after a resumption of the same session (same token) was accepted; the application's outcome for any server request among them.",
        super::writer_or_gap_rule!()
    ),
    condition: "Session binding: the prior uplink must be retired (closed and its writer fenced) before the new writer is attached; if it cannot be proven dead it must be fenced, not raced.",
    to_pass: "Fence every prior uplink of the session (bounded by a grace period) before attaching the new one; refuse the resumption if the fence cannot be confirmed.",
};

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    // One violation per dropped mapping: the first resumption accepted after
    // it sees every later write (a client that polls, MCP 2025-11-25, is
    // accepted many times while the old writer goes on).
    let mut reported = std::collections::BTreeSet::new();
    for new in o.conns.values() {
        let Some((t_acc, acc_seq)) = new.accepted_resumption() else { continue };
        if another_streams_id(o, new) {
            continue;
        }
        // The connections that carried the same stream before it (a session's
        // uplinks; in streamable-http, the stream the Last-Event-ID belongs to).
        for prior in o.conns.values().filter(|c| {
            c.client == new.client
                && !c.stream.is_none()
                && c.stream == new.stream
                && c.conn != new.conn
                && c.opened <= new.opened
        }) {
            let Some(m) = o.mapping_of(prior) else { continue };
            let Some((_, drop_seq, _)) = &m.dropped else { continue };
            judged = true;
            // Bytes after the client saw the acceptance; and, before that,
            // events newer than anything the new connection's replay carried
            // (so minted after the new writer was attached): the NAT saw them
            // before the 200 reached the client, but they still prove a
            // writer raced the new one (a fence that came late). Only events
            // that carry a message count: a replay leaves out priming events,
            // so one newer than the replay proves nothing. And only writes
            // after the request went out: the server cannot have attached the
            // new writer before (found by fuzzing: guarded's priming event for
            // the prior GET, written at the instant the new GET was sent).
            // Events the trace proves were minted before the attach (the
            // rule in `explain`) are the replay's to carry: a replay that
            // left one out is replay-integrity's gap, not a second writer.
            let bound = replay_bound(new);
            let token = new.token().unwrap_or_default();
            let floor = o.replay_floor(new, token);
            let raced = |e: &crate::trace::SseSeen, b: u64| {
                e.rpc.is_some()
                    && e.id.as_deref().and_then(|i| i.parse::<u64>().ok()).is_some_and(|i| {
                        i > b
                            && !o.minted_before_attach(new, floor, token, i)
                            && (!new.delivered.is_empty() || unseen(o, new, i))
                    })
            };
            let after_attach = |w: &&(SimTime, u64, usize, Vec<crate::trace::SseSeen>)| {
                w.0 > t_acc
                    || bound.is_some_and(|b| new.request_t.is_some_and(|r| w.0 > r) && w.3.iter().any(|e| raced(e, b)))
            };
            let late: Vec<_> = m.dropped_writes.iter().filter(after_attach).collect();
            let Some(first) = late.first() else { continue };
            if !reported.insert((m.client.clone(), m.mapping)) {
                continue;
            }
            let mut evidence = vec![*drop_seq, acc_seq];
            evidence.extend(late.iter().map(|w| w.1));
            let finding = late_writes(o, new, m.mapping, &late, t_acc);
            out.push(Violation { check: ID, finding, t: first.0, evidence, inherent: false });
        }
    }
    judged |= fresh_streams(o, &mut out);
    if !judged {
        return not_applicable("no resumption was accepted after an uplink of the same session was dropped");
    }
    status(out)
}

/// What a dropped mapping received after a resumption was accepted: the
/// worst thing among the writes (a server request, and what became of it;
/// else the first message; else heartbeats only). `late` is not empty.
fn late_writes(
    o: &Observed,
    new: &super::observe::Conn,
    mapping: crate::trace::MappingId,
    late: &[&(SimTime, u64, usize, Vec<crate::trace::SseSeen>)],
    t_acc: SimTime,
) -> Finding {
    // Before the acceptance reached the client, a message never delivered
    // anywhere may have been minted before the attach (and skipped by the
    // replay) or after it (and raced): say so when nothing settles it.
    // (A write after the client saw the acceptance proves the prior writer
    // outlived the attach: a second writer, whatever the earlier ones were.)
    let or_gap = late[0].0 <= t_acc && late.iter().all(|w| w.0 <= t_acc) && {
        let ids = late.iter().filter(|w| w.0 <= t_acc).flat_map(|w| w.3.iter()).filter(|e| e.rpc.is_some());
        let ids: Vec<u64> = ids.filter_map(|e| e.id.as_deref()?.parse().ok()).collect();
        !ids.is_empty() && ids.iter().all(|i| delivered_nowhere(o, new, *i))
    };
    let write = LateWrite { client: new.client.clone(), mapping, conn: new.conn, accepted_at: t_acc, or_gap };
    let msg = |e: &crate::trace::SseSeen| Msg { rpc: e.rpc.clone(), event: e.event.clone() };
    // Name the worst thing written: a server request, else any event, else heartbeats.
    let request = late.iter().find_map(|w| {
        w.3.iter().find(|e| e.rpc.as_ref().is_some_and(|r| r.kind == RpcKind::Request)).map(|e| (w.0, e))
    });
    match request {
        Some((t, ev)) => {
            let rpc = ev.rpc.as_ref().expect("filtered on rpc");
            let id = rpc.id.clone();
            let req = id.as_ref().and_then(|i| o.request_at(new.token(), i, t));
            let delivered_elsewhere = id.as_ref().is_some_and(|i| {
                o.conns.values().any(|c| {
                    c.client == new.client
                        && c.token() == new.token()
                        && c.delivered.iter().any(|d| d.request_id() == Some(i))
                })
            });
            Finding::RequestToDeadUplink {
                write,
                label: req.map(|r| r.label.clone()),
                msg: msg(ev),
                method: rpc.method.clone().unwrap_or_default(),
                event: ev.id.clone(),
                at: t,
                delivered_elsewhere,
                fate: req.and_then(|r| r.resolution()).map(|(t_o, _, outcome, _, _)| (*outcome, *t_o)),
            }
        }
        None => Finding::SecondWriter {
            write,
            bytes: late.iter().map(|w| w.2).sum(),
            from: late[0].0,
            // With no request among them: the first message they carried,
            // or none (heartbeats only).
            carried: late.iter().flat_map(|w| w.3.iter()).find(|e| e.rpc.is_some()).map(|e| (msg(e), e.id.clone())),
        },
    }
}

/// A bound on the ids a session had minted when the new writer was
/// attached: the Last-Event-ID, and the newest id of the first burst the new
/// connection delivered (its replay, which runs to the newest id; or, with
/// nothing to replay, its first live events, newer still). An event above
/// it was minted after the attach. `None` where ids are not numbers.
fn replay_bound(new: &super::observe::Conn) -> Option<u64> {
    let n = new.last_event_id_number()?;
    let Some(first) = new.delivered.first().map(|d| d.t) else { return Some(n) };
    let burst = new.delivered.iter().take_while(|d| d.t == first).filter_map(|d| d.numeric_id()).max();
    Some(burst.map_or(n, |b| b.max(n)))
}

/// Whether event `id` reached the client nowhere: not delivered on any of
/// its connections of the session, nor written into the new connection's
/// mapping (where a replay that did carry it may have gone, if that
/// mapping was dropped in turn). Judged when the new connection delivered
/// nothing at all.
fn unseen(o: &Observed, new: &super::observe::Conn, id: u64) -> bool {
    let written_to_new = o.mapping_of(new).is_some_and(|m| {
        m.dropped_writes.iter().any(|w| w.3.iter().any(|e| e.id.as_deref().and_then(|i| i.parse().ok()) == Some(id)))
    });
    delivered_nowhere(o, new, id) && !written_to_new
}

/// Whether event `id` of `new`'s session was delivered on none of its client's connections.
fn delivered_nowhere(o: &Observed, new: &super::observe::Conn, id: u64) -> bool {
    let of = |c: &&super::observe::Conn| c.client == new.client && c.token() == new.token();
    !o.conns.values().filter(of).any(|c| c.delivered.iter().any(|d| d.numeric_id() == Some(id)))
}

/// streamable-http: a fresh standalone GET (no `Last-Event-ID`) accepted
/// while the session's prior standalone stream was half-open. MCP
/// 2025-11-25 lets a client hold several streams, but the server sends
/// each message on one of them: a message written into the dropped
/// mapping after the fresh stream was accepted, and delivered on none of
/// the client's connections, was lost to a second writer. Returns whether
/// there was such a pair to judge.
fn fresh_streams(o: &Observed, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for new in o.conns.values() {
        let fresh = new.is_uplink() && new.session_header && new.method == "GET" && new.last_event_id.is_none();
        let Some((200, true, t_acc, acc_seq)) = new.response.filter(|_| fresh && new.rejected.is_none()) else {
            continue;
        };
        for prior in o.conns.values().filter(|c| {
            c.client == new.client && c.stream == new.stream && c.conn != new.conn && c.opened <= new.opened
        }) {
            let Some(m) = o.mapping_of(prior) else { continue };
            let Some((t_drop, drop_seq, _)) = &m.dropped else { continue };
            if *t_drop > t_acc {
                continue;
            }
            judged = true;
            let lost = m.dropped_writes.iter().filter(|w| w.0 > t_acc).find_map(|w| {
                let e = w.3.iter().find(|e| e.rpc.is_some() && !delivered_to(o, new, e))?;
                Some((w, e))
            });
            let Some((w, e)) = lost else { continue };
            out.push(Violation {
                check: ID,
                finding: Finding::LostToOldStream {
                    client: new.client.clone(),
                    mapping: m.mapping,
                    conn: new.conn,
                    opened_at: t_acc,
                    msg: Msg { rpc: e.rpc.clone(), event: e.event.clone() },
                    event: e.id.clone(),
                    at: w.0,
                },
                t: w.0,
                evidence: vec![*drop_seq, acc_seq, w.1],
                inherent: false,
            });
        }
    }
    judged
}

/// Whether the message of a dropped write reached `new`'s client on any of
/// its connections of the session: the same event id, or, without one, the
/// same message.
fn delivered_to(o: &Observed, new: &super::observe::Conn, e: &crate::trace::SseSeen) -> bool {
    o.conns.values().filter(|c| c.client == new.client && c.token() == new.token()).any(|c| {
        c.delivered.iter().any(|d| match &e.id {
            Some(id) => d.id.as_deref() == Some(id.as_str()),
            None => d.rpc == e.rpc,
        })
    })
}

/// streamable-http: a resumption from an id the client never saw, while a
/// tool call's stream of the session was open. The server may have minted
/// that id on the call's stream by the time the request reached it, and
/// then resumed that stream, not the one whose dropped writer this would
/// be: which stream it resumed, the trace cannot tell (found by a replica
/// hunt, streamable-http seed 9500849: "last seen id +1" was the tool
/// result, minted on the call's stream as the request travelled).
fn another_streams_id(o: &Observed, new: &Conn) -> bool {
    let (Some(token), Some(last), Some(sent)) = (new.token(), new.last_event_id.as_deref(), new.request_t) else {
        return false;
    };
    new.session_header
        && o.stream_of_id(token, last, new.request_seq).is_none()
        && o.conns.values().any(|c| {
            c.client == new.client
                && c.token() == Some(token)
                && c.stream.is_call()
                && c.opened <= sent
                && c.ended.as_ref().is_none_or(|e| e.0 >= sent)
        })
}
