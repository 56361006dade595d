//! `liveness`: every server request resolves (answered or explicitly failed)
//! within the bound, and every client that keeps trying converges on a live
//! uplink once faults stop.
//!
//! Evidence: a request the application saw time out, or still open at the
//! end of a run longer than the bound after it, although its owner had a
//! usable uplink for the session long enough to answer (think time plus a
//! round trip) within the bound; a client (not crashed) whose
//! latest uplink at the end is missing, refused, ended or silently dropped
//! although the last fault was long enough before the end to recover.

use super::finding::{Finding, Rivalry, UplinkProblem};
use super::observe::{Observed, Request};
use super::{status, Status, Violation};
use crate::trace::{Outcome, SimTime};
use crate::vocab::CheckId;

pub const ID: CheckId = CheckId::Liveness;
pub const ABOUT: &str = "every server request resolves within the bound; every tool call gets its result; clients converge on a live uplink after faults";

/// Time to deliver a request and carry its answer back, beyond the think time.
const ROUND_TRIP_ALLOWANCE_US: u64 = 1_000_000;

/// The round trip `o`'s requests take: behind a balancer, with a shared
/// store, a request crosses the balancer both ways and the replica asks
/// the store twice before it answers (does it still hold the session;
/// the session written before the answer), so it is allowed three times
/// the time (found by hunting: 2 s was a tick short of a quiet answer).
pub(super) fn round_trip(o: &Observed) -> u64 {
    if o.shared_store == Some(true) {
        3 * ROUND_TRIP_ALLOWANCE_US
    } else {
        ROUND_TRIP_ALLOWANCE_US
    }
}

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "Every server request resolves (answered or failed explicitly) within the bound whenever its owner was reachable long enough to answer; every tool call a client makes gets its result or an explicit error; every client that keeps trying converges on a live uplink after faults stop.",
    evidence: "Application outcomes and their times, the owner's usable uplinks for the session (accepted, not yet dropped, ended or replaced), its think time; each client's latest uplink at the end of the run.",
    condition: "Operational effect: a request routed to a dead stream times out silently and health checks stay green.",
    to_pass: "Deliver server requests on the live uplink, re-issue them at resumption, and let clients reconnect after faults.",
};

pub fn judge(o: &Observed) -> Status {
    let mut out = unresolved_requests(o);
    out.extend(lost_results(o));
    out.extend(lost_notifications(o));
    out.extend(no_live_uplink(o));
    out.extend(sessions_elsewhere(o));
    status(out)
}

/// In a deployment: a live session's request, from its owner, that the
/// balancer sent to a replica other than the one that created it, refused
/// there as unknown (404), one finding per client and session (the first).
/// A session is live until a DELETE of it that was not refused (4xx), or a
/// refused resumption, may have ended it, or a network fault lost the answer
/// to one that may have. With a store per replica the deployment cannot keep its
/// promise, whatever the server does: inherent. With a shared store the
/// session was there to take over: a finding.
fn sessions_elsewhere(o: &Observed) -> Vec<Violation> {
    let Some(shared) = o.shared_store else { return Vec::new() };
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut conns: Vec<&super::observe::Conn> = o.conns.values().collect();
    conns.sort_by_key(|c| (c.opened, c.conn));
    // When each connection may have ended its session: the times after
    // which a 404 for it tells nothing.
    let mut ends: Vec<(SimTime, &str, (&str, crate::trace::ConnId))> = Vec::new();
    for c in &conns {
        let Some(token) = c.presented_token.as_deref() else { continue };
        // Ended by its owner, or refused (a refusal may end a session: the
        // seed's rule), also when the refusal went into a dropped mapping.
        let refused_unseen =
            o.mapping_of(c).is_some_and(|m| m.dropped_writes.iter().any(|w| w.3.iter().any(|ev| ev.event == "error")));
        // A resumption whose answer the client never saw (lost to a network
        // fault, given up as silent or for a newer one) may have been refused
        // too: the client cannot know, so neither can the check (found by
        // hunting). One sent to a replica that crashed (stopped for good)
        // before it ended was not decided.
        let sent = c.request_t.unwrap_or(c.opened);
        let until = c.ended.as_ref().map_or(o.end, |e| e.0);
        let crashed =
            o.replica_of(c).is_some_and(|(r, _)| o.replica_crashes.iter().any(|(x, t)| *x == r && *t <= until));
        let unanswered_resume = c.is_resumption() && c.response.is_none() && !crashed;
        // A DELETE ended it unless refused (4xx): one answered 5xx, or not
        // at all, may have ended it before its answer failed (found by
        // hunting: a deletion whose flush met a store partition).
        let deleted = c.method == "DELETE" && !c.response.is_some_and(|r| (400..500).contains(&r.0));
        // From the request on: the server decides before its answer arrives
        // (found by hunting: a refusal that reached its client after the
        // owner's 404 had ended the session before it).
        if deleted || c.rejected.is_some() || refused_unseen || unanswered_resume {
            ends.push((sent, token, c.conn_key()));
        }
    }
    for c in conns {
        let Some(token) = c.presented_token.as_deref() else { continue };
        // (Found by hunting: a thief's refused resumption, sent after the
        // owner's request and decided before it, ended the session first.)
        let live = |at: SimTime| !ends.iter().any(|(t, k, who)| *k == token && *t <= at && *who != c.conn_key());
        let Some((status, _, at, resp_seq)) = c.response else { continue };
        let (Some((replica, routed_seq)), Some(home)) = (o.replica_of(c), o.home_of(token)) else { continue };
        if status != 404 || replica == home || !live(at) || o.token_owner.get(token) != Some(&c.client) {
            continue;
        }
        if !seen.insert((c.client.clone(), token.to_string())) {
            continue;
        }
        out.push(Violation {
            check: ID,
            finding: Finding::SessionElsewhere {
                client: c.client.clone(),
                conn: c.conn,
                status,
                at,
                replica,
                home,
                shared,
            },
            t: at,
            evidence: c.request_seq.into_iter().chain([routed_seq, resp_seq]).collect(),
            inherent: !shared,
        });
    }
    out
}

/// Server requests whose owner could have answered them (a usable uplink
/// of the session for its think time and a round trip) that timed out, or
/// were still unresolved at the end, longer than the bound after issue.
fn unresolved_requests(o: &Observed) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in o.requests.values() {
        let deadline = SimTime(r.issued.0 .0 + o.liveness_bound.0);
        // No one can answer on a session whose client holds none, or crashed
        // (losing it) before the deadline: a timeout is then the right outcome.
        let token = match &r.session {
            None => continue,
            Some((_, since)) if o.crashed_between(&r.owner, *since, deadline) => continue,
            Some((token, _)) => token,
        };
        // Judge a request only if its owner was reachable long enough to answer
        // it: a usable uplink of the session for its think time plus a round trip.
        let needed = o.think_times.get(&r.owner).map_or(0, |t| t.0) + round_trip(o);
        // A request on a tool call's stream is reachable only through that
        // stream, also when it never carried it (found by hunting: a call
        // whose response never came left its request unreachable).
        let stream = o.carrier_of(r).filter(|s| s.is_call());
        let reachable = o.usable_streams(&r.owner, token, stream.as_ref()).iter().any(|(a, b)| {
            let (from, to) = ((*a).max(r.issued.0), (*b).min(deadline));
            to.0 > from.0 && to.0 - from.0 >= needed
        });
        // Unreachable only because the server refused her every
        // reconnection (a 409 while her old stream stays half-open): a
        // lock-out the server made, not an excuse.
        let settled = r.resolution().map_or(deadline, |x| x.0).min(deadline);
        let locked = if reachable { None } else { o.locked_out(&r.owner, token, r.issued.0, settled) };
        if !reachable && locked.is_none() {
            continue;
        }
        let stolen = o.rival_holder(&r.owner, token, deadline);
        let foreign = o.presented_foreign_credential(&r.owner, token, deadline);
        // Its owner's answer went to a replica cut from the shared store (a 503 it could not avoid).
        let cut = o.answers.iter().filter(|a| a.client == r.owner && r.ids.contains(&a.id)).any(|a| {
            let conn = a.conn.and_then(|n| o.conns.get(&(a.client.clone(), n)));
            conn.is_some_and(|c| a.status.is_some_and(|s| o.store_cut_explains(c, s).is_some()))
        });
        let held = held_for_store(o, r, token, needed, deadline);
        let elsewhere = answered_elsewhere(o, r, token);
        let inherent = stolen || foreign || cut || held.is_some() || elsewhere.is_some();
        let rivalry = if stolen {
            Rivalry::RivalHolder
        } else if foreign {
            Rivalry::ForeignCredential
        } else if cut {
            Rivalry::StoreCut
        } else if let Some(replica) = held {
            Rivalry::HeldForStore(replica)
        } else if let Some(replica) = elsewhere {
            Rivalry::AnsweredElsewhere(replica)
        } else if let Some((status, from, until)) = locked {
            Rivalry::LockedOut { status, from, until }
        } else {
            Rivalry::None
        };
        let (label, method, issued) = (r.label.clone(), r.method.clone(), r.issued.0);
        match r.resolution() {
            Some((t, seq, Outcome::TimedOut, _, _)) => out.push(Violation {
                check: ID,
                finding: Finding::TimedOut { label, method, issued, at: *t, rivalry },
                t: *t,
                evidence: vec![r.issued.1, *seq],
                inherent,
            }),
            None if o.end.0 >= r.issued.0 .0 + o.liveness_bound.0 => out.push(Violation {
                check: ID,
                finding: Finding::Unresolved { label, method, issued, bound: o.liveness_bound, rivalry },
                t: o.end,
                evidence: vec![r.issued.1],
                inherent,
            }),
            _ => {}
        }
    }
    out
}

/// The replica that held request `r` of session `token` for the shared
/// store it could not reach, until too late for its owner to answer it by
/// `deadline` (it needs `needed` µs).
fn held_for_store(o: &Observed, r: &Request, token: &str, needed: u64, deadline: SimTime) -> Option<u32> {
    // Written through to a store its replica could not reach, until too
    // late to be answered in time (found by hunting: a request held
    // during a partition reached its owner too late).
    // Or cut at any moment until the request first reached its owner,
    // which was then too late to answer in time (found by a replica
    // hunt, legacy-sse seed 9501047: cut 0.2 s after the issue, before
    // the write-through was taken; delivered 1.8 s after the link came back).
    let held_first = o
        .session_store_cut(&r.owner, token, r.issued.0, SimTime(r.issued.0 .0 + round_trip(o)))
        .filter(|(_, healed)| healed.is_none_or(|h| h.0 + needed > deadline.0));
    // (Only a request that did reach its owner: one never delivered was
    // lost some other way, a dead writer say. Looked up only when a
    // partition could have held it.)
    let held_late = || {
        if o.store_cuts.is_empty() {
            return None;
        }
        let is_it = |x: &crate::wire::jsonrpc::RpcSummary| {
            x.kind == crate::wire::jsonrpc::RpcKind::Request && x.id.as_ref().is_some_and(|i| r.ids.contains(i))
        };
        let delivered = o
            .conns
            .values()
            .filter(|c| c.client == r.owner && c.token() == Some(token))
            .flat_map(|c| c.delivered.iter())
            .filter(|d| d.rpc.as_ref().is_some_and(is_it))
            .map(|d| d.t)
            .min()?;
        (delivered.0 + needed > deadline.0).then(|| o.session_store_cut(&r.owner, token, r.issued.0, delivered))?
    };
    held_first.or_else(held_late).map(|(replica, _)| replica)
}

/// The replica that never held session `token` to which request `r`'s
/// owner sent its answer, and which refused it (404, 410): no replica
/// could have taken it.
fn answered_elsewhere(o: &Observed, r: &Request, token: &str) -> Option<u32> {
    o.answers
        .iter()
        .filter(|a| a.client == r.owner && r.ids.contains(&a.id) && matches!(a.status, Some(404 | 410)))
        .find_map(|a| {
            let c = o.conns.get(&(a.client.clone(), a.conn?))?;
            o.never_held(c, token).then(|| o.replica_of(c).map(|(r, _)| r)).flatten()
        })
}

/// Tool calls (`call-tool` steps) whose result never reached their client:
/// it gave up on the call's stream without the result (it could not resume
/// it, or the server ended it empty), or still waited at the end, the bound
/// and a round trip after sending the call. A refusal (an HTTP error, a
/// refused resumption of the stream) is an answer. Plain also when the
/// server keeps no event store: MCP 2025-11-25 lets a server make its
/// streams resumable ("to avoid message loss due to disconnection, the
/// server MAY make the stream resumable"), and a server that does not has
/// chosen to lose the result; the gate says it was lost (docs/checks.md, "A
/// client's own requests"). Not judged: a call whose POST never got its
/// response head (nothing named a stream to resume: the network lost the
/// call or the head, and the client does not send a tool call twice), one
/// whose client crashed, or left the session (a theft handed it another,
/// it started a new one, it ended the session) before the end of the wait.
fn lost_results(o: &Observed) -> Vec<Violation> {
    use super::observe::Fate;
    let mut out = Vec::new();
    for c in o.conns.values() {
        let Some((sent, call)) = c.sent.as_ref().and_then(|s| Some((s, s.call.as_ref()?))) else { continue };
        let (Some(since), Some(token), Some(_)) = (c.request_t, c.token(), c.response) else { continue };
        let (at, seq, why) = match o.fate(c) {
            Some(Fate::Lost(t, seq, why)) => (t, Some(seq), why),
            Some(Fate::Pending) if o.end.0 >= since.0 + o.liveness_bound.0 + round_trip(o) => {
                (o.end, None, "still awaited at the end".to_string())
            }
            _ => continue,
        };
        if o.crashed_between(&c.client, since, at) {
            continue;
        }
        let left = o.conns.values().any(|d| {
            d.client == c.client
                && d.request_t.is_some_and(|t| t >= since && t <= at)
                && d.token().is_some_and(|t| t != token)
        }) || o.thefts.iter().any(|(t, _, to, _)| to == &c.client && *t >= since && *t <= at)
            || o.reinits.iter().any(|(who, t)| *who == c.client && *t >= since && *t <= at)
            || o.conns.values().any(|d| {
                d.client == c.client
                    && d.method == "DELETE"
                    && d.token() == Some(token)
                    && d.request_t.is_some_and(|t| t >= since && t <= at)
            });
        if left {
            continue;
        }
        let stolen = o.rival_holder(&c.client, token, at);
        let foreign = o.presented_foreign_credential(&c.client, token, at);
        let rivalry = if stolen {
            Rivalry::RivalHolder
        } else if foreign {
            Rivalry::ForeignCredential
        } else {
            Rivalry::None
        };
        out.push(Violation {
            check: ID,
            finding: Finding::ResultLost {
                client: c.client.clone(),
                call: call.clone(),
                id: sent.id.clone(),
                sent: since,
                at,
                why,
                rivalry,
            },
            t: at,
            evidence: c.request_seq.into_iter().chain(seq).collect(),
            inherent: stolen || foreign,
        });
    }
    out
}

/// Clients that keep trying and still hold no live uplink at the end, once
/// the faults stopped long enough ago for them to notice and reconnect.
fn no_live_uplink(o: &Observed) -> Vec<Violation> {
    let mut out = Vec::new();
    let last_fault = o.steps.iter().filter(|s| s.2.is_fault()).map(|s| s.0).max().unwrap_or(SimTime(0));
    for (client, timeout) in &o.heartbeat_timeouts {
        if o.crashed.get(client).is_some_and(|t| !o.conns.values().any(|c| &c.client == client && c.opened > *t)) {
            continue; // crashed and never restarted
        }
        // Time to notice a dead uplink (twice: a resume may land on a stale
        // path once), plus the longest backoff between attempts.
        let backoff = o.max_backoffs.get(client).copied().unwrap_or_default();
        let settle = SimTime(timeout.0 * 2 + backoff.0);
        if o.end.0 < last_fault.0 + settle.0 {
            continue;
        }
        // An uplink opened within a round trip of the end, still unanswered,
        // has had no time to be answered: the client stands where its
        // previous uplink left it (found by fuzzing: a client polling a
        // streamable-http stream had just asked again when the run ended).
        let had_time = |c: &&super::observe::Conn| c.response.is_some() || c.opened.0 + round_trip(o) <= o.end.0;
        let Some(last) = o
            .conns
            .values()
            .filter(|c| &c.client == client && c.is_uplink())
            .filter(had_time)
            .max_by_key(|c| (c.opened, c.conn))
        else {
            continue; // never connected
        };
        if still_connecting(o, client, last) {
            continue;
        }
        // A thief presenting another principal's session is kept out by a
        // correct server: no convergence is owed to it (found by fuzzing).
        if last.token().is_some_and(|t| o.foreign_on(last, t)) {
            continue;
        }
        let problem = uplink_problem(o, last);
        if let Some(problem) = problem {
            // Two holders of one credential fence each other in turn: no server can settle that.
            let inherent = last.token().is_some_and(|t| {
                o.conns.values().any(|c| {
                    c.client != *client && c.presented_token.as_deref() == Some(t) && o.presents(c) == o.presents(last)
                })
            });
            out.push(Violation {
                check: ID,
                finding: Finding::NoLiveUplink {
                    client: client.clone(),
                    end: o.end,
                    conn: last.conn,
                    problem,
                    shared_credential: inherent,
                },
                t: o.end,
                evidence: last.request_seq.into_iter().collect(),
                inherent,
            });
        }
    }
    out
}

/// Whether `client`, whose latest answered uplink is `last`, is still
/// connecting at the end: a newer uplink, not yet answered, on a session of
/// its own or after a first refusal.
fn still_connecting(o: &Observed, client: &str, last: &super::observe::Conn) -> bool {
    // A newer uplink, on a session of its own, had no time to be
    // answered: the client left the session of `last` behind and is
    // still connecting (found by hunting: a client that took a 404 and
    // opened a new session, whose stream waited on the store at the end).
    let moving_on = o.conns.values().any(|c| {
        c.client == client
            && c.is_uplink()
            && (c.opened, c.conn) > (last.opened, last.conn)
            && c.token() != last.token()
    });
    if moving_on {
        return true;
    }
    // Refused once (4xx, not the session's end), and trying again: the
    // next attempt had no time to be answered. One refusal may pass (a
    // take-over refused while the fence through the shared store was
    // unconfirmed: replica hunt, streamable-http seed 9500014); two in a
    // row is a lock-out no retry ends, and is judged.
    let refused =
        |c: &super::observe::Conn| c.response.is_some_and(|r| (400..500).contains(&r.0) && !matches!(r.0, 404 | 410));
    let same_session = |c: &&super::observe::Conn| c.client == client && c.is_uplink() && c.token() == last.token();
    let retrying = o.conns.values().filter(same_session).any(|c| (c.opened, c.conn) > (last.opened, last.conn));
    let refused_before = o
        .conns
        .values()
        .filter(same_session)
        .filter(|c| (c.opened, c.conn) < (last.opened, last.conn))
        .max_by_key(|c| (c.opened, c.conn))
        .is_some_and(refused);
    retrying && refused(last) && !refused_before
}

/// What keeps a client's latest uplink from being live at the end, if anything.
fn uplink_problem(o: &Observed, last: &super::observe::Conn) -> Option<UplinkProblem> {
    let dropped = o.mapping_of(last).and_then(|m| m.dropped.clone().or(m.reset.map(|(t, s)| (t, s, "reset".into()))));
    if let Some((_, _, how)) = &last.rejected {
        Some(UplinkProblem::Refused(*how))
    } else if let Some((_, _, why)) = &last.ended {
        // In streamable-http a server may end any stream in good order:
        // the client polls again (MCP 2025-11-25, SEP-1699).
        let polling = last.session_header
            && why == crate::trace::SERVER_ENDED
            && matches!(last.response, Some((200, true, _, _)));
        (!polling).then(|| UplinkProblem::Ended(why.clone()))
    } else if let Some((_, _, fault)) = &dropped {
        Some(UplinkProblem::MappingDropped(fault.clone()))
    } else if !matches!(last.response, Some((200, true, _, _))) {
        Some(UplinkProblem::NeverAnswered)
    } else {
        None
    }
}

/// Notifications the application emitted while their client held a usable
/// uplink of the session, for a round trip at least, that never reached the
/// client: not on that uplink, nor in any replay later. A stream the server
/// accepted but no longer writes to (say, a resumed stream registered under
/// the wrong stream id) loses them silently, and no replay owes them: they
/// came after the resumption. Judged only where the application reports the
/// ids, and not on sessions a theft touched (confidentiality judges those).
fn lost_notifications(o: &Observed) -> Vec<Violation> {
    let mut out = Vec::new();
    // (Events of a tool call's stream are not the uplink's to carry.)
    for n in o.notifications.iter().filter(|n| !n.ids.is_empty() && n.stream.is_none()) {
        if o.thefts.iter().any(|(_, from, to, _)| from == &n.client || to == &n.client) {
            continue;
        }
        let covers = |(a, b): &(SimTime, SimTime)| *a <= n.t && b.0 >= n.t.0 + round_trip(o);
        let Some((since, until)) = o.usable_uplinks(&n.client, &n.token).into_iter().find(covers) else {
            continue;
        };
        let received: std::collections::BTreeSet<&str> = o
            .conns
            .values()
            .filter(|c| c.client == n.client && c.token() == Some(n.token.as_str()))
            // Replicas with counters of their own can mint the same id: an
            // id counts as received from the replica that minted it.
            .filter(|c| match (n.replica, o.replica_of(c)) {
                (Some(minted_by), Some((carried_by, _))) => minted_by == carried_by,
                _ => true,
            })
            .flat_map(|c| c.delivered.iter().filter_map(|d| d.id.as_deref()))
            .collect();
        let lost: Vec<&str> = n.ids.iter().map(String::as_str).filter(|i| !received.contains(i)).collect();
        let Some(first) = lost.first() else { continue };
        let uplink = o
            .conns
            .values()
            .filter(|c| c.client == n.client && c.is_uplink() && c.token() == Some(n.token.as_str()))
            .find(|c| matches!(c.response, Some((200, true, t, _)) if t == since));
        let mut evidence = vec![n.seq];
        evidence.extend(uplink.and_then(|c| c.response.map(|r| r.3)));
        evidence.sort();
        // Found by hunting: a replica held them for a store a partition cut
        // it from, then let the session go.
        let store_cut = o.session_cut_from_store(&n.client, &n.token, n.t, SimTime(n.t.0 + round_trip(o)));
        out.push(Violation {
            check: ID,
            finding: Finding::NotificationsLost {
                client: n.client.clone(),
                at: n.t,
                lost: lost.len(),
                emitted: n.ids.len(),
                first: first.to_string(),
                conn: uplink.map(|c| c.conn),
                live: (since, until),
                store_cut,
            },
            t: n.t,
            evidence,
            inherent: store_cut.is_some(),
        });
    }
    out
}
