//! `rejection-protocol`: a refused resumption is explicit (an error event or
//! an HTTP error, never an empty 200), the refused owner's token is dead
//! afterwards, and the owner re-initializes.
//!
//! Evidence: a resumption answered with a server error (5xx: a crash, not a
//! refusal); a resumption answered 200 whose stream ended with no event (in
//! legacy-sse: in streamable-http a server may end any stream, and an empty
//! one is SSE polling, MCP 2025-11-25; the client polls again); a
//! request that still succeeded with a token after its owner was refused
//! (the seed analysis requires the refusal to invalidate the token); an
//! owner that never obtained a new session after a refusal; an owner whose
//! session died with a refused thief's resumption (the owner's next use of
//! the token found no session, with no refusal of its own in between); a
//! resumption whose outcome differs from its step's `expect`; a refused
//! resumption the trace proves valid (from an id the client received, on
//! its own live session, over a window that is empty or holds only
//! notifications the server says it keeps: see `valid_refused` for the
//! rule).

use super::observe::{Conn, Observed};
use super::{not_applicable, status, Finding, Status, Violation};
use crate::trace::{Refused, SimTime};
use crate::vocab::{CheckId, StepKind};

pub const ID: CheckId = CheckId::RejectionProtocol;
pub const ABOUT: &str =
    "refusals are explicit, kill the owner's token (not when a thief is refused), and the owner re-initializes";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A refused resumption is explicit, kills the owner's token, and the owner re-initializes.",
    evidence: "Resumption responses (status, stream, first events), later uses of the same token and whether they were served, and the owner's next session token. A refusal is judged wrong where the trace proves the resumption valid: the client presented its own session and credential on the session's GET stream, from a numeric id it had received there, with no other request (a POST's response, another stream's priming event) or re-issue since that could have minted one unseen; the window up to the newest id the session showed anywhere (delivered, written into a dropped mapping, reported by the application) was empty, or held only notifications the application reported on that stream, no more than the retention the server declares (so no request lies in it and the server keeps all of it, up to the oldest id it keeps); no server request of the session was in flight (one that cannot be carried over is a reason to refuse); no earlier connection of the stream was still half-open, unless a single server that declares its fence grace refused sooner than that (a fence that cannot be confirmed is a reason to refuse, but only once it was waited for); and nothing had ended the session (no DELETE, end-session step or earlier refusal; a 404 or 410 may be the server's own expiry and is not judged).",
    condition: "The seed analysis, Condition of Validity: \"If any condition fails, the server must reject the resumption: close the new uplink with an explicit error event, invalidate the session token, and require the client to open a fresh session. The client's correct response to this rejection is to re-initialize.\" A thief's refusal is not the owner's: refusing a foreign principal must leave the owner's session alive (MCP security best practices: bind sessions to users).",
    to_pass: "Accept a resumption from an id the client received on its own live session when its window holds nothing but notifications you keep, and fence a half-open prior writer before you give up on it. Refuse with an error event or an HTTP client error (never an empty 200, never a 5xx: a server error is a crash, not a refusal) and invalidate the token of a refused owner (a refused thief may be turned away without touching the owner's session).",
};

/// How long a refused client gets to obtain a new session (a few round trips;
/// in streamable-http, initialize and initialized POSTs first).
const RENEW_ALLOWANCE_US: u64 = 5_000_000;

pub fn judge(o: &Observed) -> Status {
    let mut judged = false;
    let mut out = Vec::new();
    judged |= expectations(o, &mut out);
    for c in o.conns.values() {
        if let Some(v) = refusal_in_disguise(o, c) {
            judged = true;
            out.push(v);
        }
        let Some((t_rej, rej_seq, how)) = &c.rejected else { continue };
        judged = true;
        let judged_by_step = out.iter().any(
            |v| matches!(&v.finding, Finding::ValidRefused { client, conn, .. } if *client == c.client && *conn == c.conn),
        );
        if !judged_by_step {
            out.extend(valid_refused(o, c, (*t_rej, *rej_seq, *how)));
        }
        if *how == Refused::EmptyStream {
            out.push(Violation {
                check: ID,
                finding: Finding::SilentRefusal { client: c.client.clone(), conn: c.conn },
                t: *t_rej,
                evidence: c.request_seq.into_iter().chain([*rej_seq]).collect(),
                inherent: false,
            });
        }
        // A server error is a crash, not a refusal: the client cannot tell
        // it from a transient failure, and nothing says the session is dead
        // (the Python SDK without an event store answers 500 to every
        // resumption). No fault a plan can schedule today makes a 5xx the
        // network's doing; a balancer's 502 while a replica is down will.
        if let Refused::Status(s @ 500..=599) = how {
            let store_cut = o.store_cut_explains(c, *s);
            out.push(Violation {
                check: ID,
                finding: Finding::RefusedByServerError {
                    client: c.client.clone(),
                    conn: c.conn,
                    status: *s,
                    store_cut,
                },
                t: *t_rej,
                evidence: c.request_seq.into_iter().chain([*rej_seq]).collect(),
                inherent: store_cut.is_some(),
            });
            // A replica cut from the store could not decide anything: the
            // session lives on in the store, and its token with it.
            if store_cut.is_some() {
                continue;
            }
        }
        // A refused tool-call stream (streamable-http) leaves the session alive:
        // only a refused session resumption kills the token.
        if !c.is_uplink() {
            continue;
        }
        let Some(token) = c.presented_token.as_deref() else { continue };
        let Some(owner) = o.token_owner.get(token) else { continue };
        // A refused client the server could tell from the session's holder
        // is a thief: the owner's session must live on. A server that kills
        // it lets anyone holding the token end the owner's session. One it
        // could not tell apart (the owner; a client presenting the
        // session's credential) is the owner by the seed's rules.
        if o.foreign_on(c, token) {
            out.extend(owner_session_killed(o, c, token, owner, (*t_rej, *rej_seq)));
            continue;
        }
        // The token must be dead afterwards.
        token_still_worked(o, token, owner, (*t_rej, *rej_seq), &mut out);
        // The owner re-initializes: it obtains a new session.
        out.extend(never_renewed(o, c, (*t_rej, *rej_seq)));
    }
    if !judged {
        return not_applicable("no resumption was refused");
    }
    status(out)
}

/// A resumption `c` that was refused in disguise ([`super::replay_integrity::refused_in_disguise`]).
fn refusal_in_disguise(o: &Observed, c: &Conn) -> Option<Violation> {
    if !super::replay_integrity::refused_in_disguise(o, c) {
        return None;
    }
    let (t, seq, _) = c.ended.clone().expect("an ended stream");
    Some(Violation {
        check: ID,
        finding: Finding::RefusalInDisguise {
            client: c.client.clone(),
            conn: c.conn,
            last: c.last_event_id.clone().unwrap_or_default(),
        },
        t,
        evidence: c.request_seq.into_iter().chain([seq]).collect(),
        inherent: false,
    })
}

/// Each use of `owner`'s session `token` after the owner was refused (at
/// `t_rej`) that the server still served: a 2xx, or a stream that delivered.
fn token_still_worked(
    o: &Observed,
    token: &str,
    owner: &str,
    (t_rej, rej_seq): (SimTime, u64),
    out: &mut Vec<Violation>,
) {
    for later in o.conns.values().filter(|l| l.presented_token.as_deref() == Some(token) && l.opened > t_rej) {
        let ok = match later.response {
            Some((200, true, _, _)) => !later.delivered.is_empty() && later.rejected.is_none(),
            Some((s, false, _, _)) => (200..300).contains(&s),
            _ => false,
        };
        if ok {
            let (_, _, t, seq) = later.response.expect("matched above");
            out.push(Violation {
                check: ID,
                finding: Finding::TokenStillWorked {
                    owner: owner.to_string(),
                    refused_at: t_rej,
                    client: later.client.clone(),
                    conn: later.conn,
                    at: t,
                },
                t,
                evidence: vec![rej_seq, seq],
                inherent: false,
            });
        }
    }
}

/// The owner refused on `c` (at `t_rej`) that obtained no new session by
/// the end, where it had the time and the network let it try.
fn never_renewed(o: &Observed, c: &Conn, (t_rej, rej_seq): (SimTime, u64)) -> Option<Violation> {
    // (A client that crashed meanwhile re-initializes only if restarted.)
    // (A run that ends soon after the refusal leaves no time to re-initialize.)
    let crashed = o.crashed_between(&c.client, t_rej, o.end);
    let has_time = o.end.0 >= t_rej.0 + RENEW_ALLOWANCE_US;
    // (Nor does one whose attempts the network ate: judged only if an
    // attempt on a mapping that no fault touched went out in time. Found
    // by fuzzing: a rebind dropped the initialize POST, and the client
    // waits a heartbeat timeout before it tries again.)
    let attempts: Vec<&Conn> = o.conns.values().filter(|n| n.client == c.client && n.opened >= t_rej).collect();
    let faulted = |n: &Conn| o.mapping_of(n).is_some_and(|m| m.dropped.is_some() || m.reset.is_some());
    let lost = attempts.iter().any(|n| faulted(n))
        && !attempts.iter().any(|n| !faulted(n) && n.opened.0 + RENEW_ALLOWANCE_US <= o.end.0);
    if crashed || !has_time || lost {
        return None;
    }
    let renewed = o.conns.values().any(|n| n.client == c.client && n.opened >= t_rej && n.learned_token.is_some());
    (!renewed).then(|| Violation {
        check: ID,
        finding: Finding::NeverRenewed { client: c.client.clone(), refused_at: t_rej },
        t: o.end,
        evidence: vec![rej_seq],
        inherent: false,
    })
}

/// A refused thief must not take the owner's session down with it: the
/// owner's first use of the token after the refusal finds the session gone
/// (HTTP 404), and nothing of the owner's own ended it in between (a refusal
/// of the owner, a crash), nor a DELETE of the session.
fn owner_session_killed(
    o: &Observed,
    thief: &Conn,
    token: &str,
    owner: &str,
    (t_rej, rej_seq): (SimTime, u64),
) -> Option<Violation> {
    let next = o
        .conns
        .values()
        .filter(|l| l.client == owner && l.presented_token.as_deref() == Some(token) && l.opened > t_rej)
        .min_by_key(|l| (l.opened, l.conn))?;
    let (status, _, t, seq) = next.response?;
    if status != 404 {
        return None;
    }
    // Someone the server cannot tell from the owner (the owner, a client
    // presenting the session's credential) may have been refused meanwhile:
    // that refusal kills the token by the seed's rule.
    let as_owner = |l: &Conn| !o.foreign_on(l, token);
    // (A refusal the owner never saw counts too: a resumption of its that
    // went out before the 404 and was not seen accepted.)
    let own_end = o.conns.values().any(|l| {
        // (Any GET with the token: in legacy-sse one without an id is a resumption too.)
        let resumption = l.method == "GET";
        let accepted = matches!(l.response, Some((200, true, _, _))) && l.rejected.is_none();
        l.conn_key() != next.conn_key()
            && l.presented_token.as_deref() == Some(token)
            && as_owner(l)
            && (l.rejected.as_ref().is_some_and(|r| r.0 <= t)
                || (resumption && !accepted && l.request_t.is_some_and(|s| s <= t)))
    }) || o.crashed_between(owner, t_rej, t)
        || o.steps.iter().any(|s| s.2 == StepKind::EndSession && s.0 >= t_rej && s.0 <= t)
        // A DELETE of the session that the server did not refuse, before or
        // after the refusal, explains the 404 (a foreign one is judged by
        // `confidentiality`, not blamed on this refusal).
        || o.conns.values().any(|l| {
            l.method == "DELETE"
                && l.presented_token.as_deref() == Some(token)
                && l.request_t.is_some_and(|s| s <= t)
                && l.response.is_none_or(|r| r.0 < 400)
        });
    if own_end {
        return None;
    }
    Some(Violation {
        check: ID,
        finding: Finding::OwnerSessionKilled {
            thief: thief.client.clone(),
            refused_at: t_rej,
            owner: owner.to_string(),
            conn: next.conn,
            at: t,
        },
        t,
        evidence: thief.request_seq.into_iter().chain([rej_seq, seq]).collect(),
        inherent: false,
    })
}

/// A refusal of a resumption the trace proves valid, with no step to say
/// so. Proven where: the client presented its own session, with its own
/// credential, on the session's GET stream; `Last-Event-ID` is a number
/// the client had received on that stream, with no other request (a
/// POST's response, a stream's priming event) or re-issue since that could
/// have minted an id unseen. The window from it to the newest id the
/// session showed anywhere before the refusal (delivered, written into a
/// dropped mapping, or reported by the application) is empty, or holds
/// only notifications the application reported on that stream, no more
/// than the retention the server declares: no request lies in it, and the
/// server keeps all of it (up to the window's edge, the oldest id kept).
/// No server request of the session was in flight (condition 4 may
/// require refusing a resumption over one that cannot be carried over).
/// An earlier connection of the stream still half-open is a reason to
/// refuse only once a fence was tried: a single server that declares its
/// fence grace and refused sooner than that never waited for one.
/// The session was alive: nothing ended it (no DELETE, no `end-session`
/// step, no earlier refusal of the owner), and the refusal did not say it
/// was gone (404 and 410 may be a server's own expiry: not judged; nor is
/// a 5xx, which is a crash and judged as one).
fn valid_refused(o: &Observed, c: &Conn, (t_rej, rej_seq, how): (SimTime, u64, Refused)) -> Option<Violation> {
    if matches!(how, Refused::Status(404 | 410 | 500..=599)) || !c.stream.is_get() || c.method != "GET" {
        return None;
    }
    let last = c.last_event_id_number()?;
    let token = c.presented_token.as_deref()?;
    let t_req = c.request_t?;
    if o.token_owner.get(token) != Some(&c.client) || c.credential.is_some() || o.foreign_on(c, token) {
        return None;
    }
    // A replica that never held the session (a store each, and not the
    // replica that created it) cannot resume it: any explicit refusal of its
    // own is valid, whatever status or event it uses.
    if o.never_held(c, token) {
        return None;
    }
    // Received on this stream, before the request went out.
    let received = o
        .conns
        .values()
        .filter(|d| d.client == c.client && d.stream == c.stream && d.token() == Some(token))
        .flat_map(|d| d.delivered.iter())
        .filter(|e| e.t <= t_req && e.numeric_id() == Some(last))
        .map(|e| e.t)
        .min()?;
    // The newest the session showed, and nothing could have been minted
    // unseen since: the window is empty, or holds notifications alone that
    // the server says it keeps.
    let newest = o.max_id_seen_before(token, rej_seq)?;
    if newest < last || (newest > last && !o.window_kept(token, last, newest, t_rej)) {
        return None;
    }
    let since = o.reported_at(token, last).unwrap_or(received).min(received);
    if minted_unseen(o, c, token, since, (t_req, t_rej)) {
        return None;
    }
    // Nor may a prior connection of the stream still be half-open: a server
    // that cannot confirm its writer dead must fence it, and refuses if the
    // fence is not confirmed in time (the seed's rule; found by a hunt with
    // `fence_delay` past `fence_grace`).
    let half_open_prior = o.conns.values().any(|p| {
        p.client == c.client
            && p.conn != c.conn
            && p.stream == c.stream
            && p.opened < t_req
            && o.mapping_of(p).is_some_and(|m| m.dropped.is_some() && m.reset.is_none_or(|r| r.0 > t_req))
    });
    // Unless the refusal came before the fence could have been waited for:
    // a server that says how long it waits for a fence and refused sooner
    // never tried to fence (one server: a replica's take-over has refusals
    // of its own).
    let fence_never_tried =
        o.shared_store.is_none() && o.fence_grace.is_some_and(|g| t_rej.0.saturating_sub(t_req.0) < g.0);
    if half_open_prior && !fence_never_tried {
        return None;
    }
    // Alive, as far as anything in the trace says.
    if ended_before(o, token, t_req) {
        return None;
    }
    Some(Violation {
        check: ID,
        finding: Finding::ValidRefusedProven {
            client: c.client.clone(),
            conn: c.conn,
            how,
            last,
            at: t_rej,
            window: (newest > last).then(|| (newest - last, newest, o.retention.unwrap_or_default())),
            unfenced: half_open_prior.then(|| (SimTime(t_rej.0 - t_req.0), o.fence_grace.unwrap_or_default())),
        },
        t: t_rej,
        evidence: c.request_seq.into_iter().chain([rej_seq]).collect(),
        inherent: false,
    })
}

/// Whether something ended session `token` before `t_req`: a DELETE, a
/// refusal, or an `end-session` step.
fn ended_before(o: &Observed, token: &str, t_req: SimTime) -> bool {
    o.conns.values().any(|d| {
        d.presented_token.as_deref() == Some(token)
            && d.request_t.is_some_and(|r| r < t_req)
            && (d.method == "DELETE" || d.rejected.is_some())
    }) || o.steps.iter().any(|s| s.2 == StepKind::EndSession && s.0 <= t_req)
}

/// Whether an id could have been minted unseen on session `token` since
/// `since`, before resumption `c` (sent at `t_req`, refused at `t_rej`):
/// another request on the session, a re-issue, or a server request in flight.
fn minted_unseen(o: &Observed, c: &Conn, token: &str, since: SimTime, (t_req, t_rej): (SimTime, SimTime)) -> bool {
    let answer_posts: Vec<_> = o.answers.iter().filter(|a| a.client == c.client).filter_map(|a| a.conn).collect();
    // Any other request on the session since may have minted an id no one
    // saw: a POST's response, and in streamable-http any stream's priming
    // event (a GET the server accepted after the client gave up on it).
    let minting_post = o.conns.values().any(|d| {
        d.conn_key() != c.conn_key()
            && d.method != "DELETE"
            && d.presented_token.as_deref() == Some(token)
            && d.opened >= since
            && !(d.client == c.client && answer_posts.contains(&d.conn))
    });
    let reissued = o
        .requests
        .values()
        .filter(|r| r.token() == Some(token))
        .any(|r| r.outcomes.iter().any(|x| x.2 == crate::trace::Outcome::Reissued && x.0 >= since && x.0 <= t_rej));
    // Nor may a server request be in flight: one that cannot be carried
    // over (not reissuable) is a reason to refuse by condition 4.
    let in_flight = o
        .requests
        .values()
        .filter(|r| r.token() == Some(token))
        .any(|r| r.issued.0 <= t_rej && r.resolution().is_none_or(|x| x.0 >= t_req));
    minting_post || reissued || in_flight
}

/// A resume step that says what the server must do (`expect = "accepted"`
/// or `"refused"`): the client's first resumption request (a GET with
/// `Last-Event-ID`) from the step on must have had that outcome. A plain
/// GET is not one: when the step could not be sent (a server that exposes
/// no event ids gives the client none to resume from), the client's own
/// reconnect without an id is not judged against the step. A wrongly refused resumption passes every
/// other check (the refusal is explicit and the client re-initializes), yet
/// costs the client its session: only the scenario's author can say it was
/// valid. Returns whether there was any such step to judge.
fn expectations(o: &Observed, out: &mut Vec<Violation>) -> bool {
    for (t, seq, client, expected) in &o.expected_resumptions {
        let Some(c) = o
            .conns
            .values()
            .filter(|c| {
                &c.client == client
                    && c.method == "GET"
                    && c.last_event_id.is_some()
                    && c.request_t.is_some_and(|r| r >= *t)
            })
            .min_by_key(|c| (c.request_t, c.conn))
        else {
            continue;
        };
        let got = if c.accepted_resumption().is_some() {
            "accepted"
        } else if let Some((_, _, how)) = &c.rejected {
            if expected == "refused" {
                continue;
            }
            out.push(Violation {
                check: ID,
                finding: Finding::ValidRefused { client: client.clone(), conn: c.conn, how: *how, step_at: *t },
                t: c.rejected.as_ref().map_or(*t, |r| r.0),
                evidence: [*seq].into_iter().chain(c.request_seq).chain(c.rejected.as_ref().map(|r| r.1)).collect(),
                inherent: false,
            });
            continue;
        } else {
            match c.response {
                Some((s, _, _, _)) if s != 200 => "refused",
                _ => continue, // no answer: nothing to compare
            }
        };
        if got != expected {
            let (t_r, r_seq) = c.response.map_or((*t, *seq), |r| (r.2, r.3));
            out.push(Violation {
                check: ID,
                finding: Finding::ExpectationMissed {
                    client: client.clone(),
                    conn: c.conn,
                    got: got.to_string(),
                    expected: expected.to_string(),
                    step_at: *t,
                },
                t: t_r,
                evidence: [*seq].into_iter().chain(c.request_seq).chain([r_seq]).collect(),
                inherent: false,
            });
        }
    }
    !o.expected_resumptions.is_empty()
}
