//! Reach: which hard situations a run actually got into.
//!
//! A generator can draw a step without the run ever reaching the situation
//! the step aims at (the resume came before any event, the answer before the
//! re-issue). So reach is read from what was observed, not from the plan:
//! each situation below is a predicate over the judged trace. A hunt counts,
//! per situation, the seeds that reached it, and prints the counts so that a
//! user can tell a clean hunt from a hunt that never tried.
//!
//! The predicates use what the wire showed. "The newest id" is the highest
//! event id seen on any socket of the session; a server that minted ids no
//! socket carried has a newer edge than the one measured here.

use crate::check::observe::Observed;
use crate::scenario::ServerConfig;
use crate::trace::Trace;
use crate::trace::{Outcome, Purpose};

/// The situations a hunt measures, in the order the summary prints them.
pub const SITUATIONS: [&str; 15] = [
    WINDOW_EDGE,
    PENDING_RESUMES,
    ANSWER_AFTER_REISSUE,
    ANSWER_AFTER_TIMEOUT,
    CALL_STREAM_THEFT,
    OWNER_DELETE,
    FOREIGN_DELETE,
    RETENTION_OVERFLOW,
    FENCE_DELAY,
    NOT_REISSUABLE,
    STALE_OVER_SETTLED,
    SPANS_STREAMS,
    STALE_OVER_RETIRED,
    RETIRED_AFTER_TIMEOUT,
    BEFORE_ANSWERED,
];

/// A late answer to a retired id, its re-issue timed out unanswered, then a
/// stale resume from an id before the request.
pub const RETIRED_AFTER_TIMEOUT: &str = "stale resume over a retired id after its re-issue timed out";
/// A resume from the id just before a request its owner had answered.
pub const BEFORE_ANSWERED: &str = "resume from just before an answered request";

/// A late answer to a retired id, the re-issue still unanswered, then a
/// stale resume from an id before the request.
pub const STALE_OVER_RETIRED: &str = "stale resume over a retired id and a pending re-issue";

/// A resume of one stream from an id below events another stream of the
/// session carried (session-wide numbering): its window spans them.
pub const SPANS_STREAMS: &str = "resume whose window spans another stream's events";

/// A resume from an id older than the window's edge: evicted, the retention overflowed.
pub const RETENTION_OVERFLOW: &str = "resume from an id the retention let go";
/// A resume sent while the prior stream was half-open, to a server that delays its fences.
pub const FENCE_DELAY: &str = "resume under a delayed fence";
/// A resume while a request marked not reissuable was pending on the session.
pub const NOT_REISSUABLE: &str = "resume while a non-reissuable request is pending";
/// A resume from an id before a request its owner had answered late.
pub const STALE_OVER_SETTLED: &str = "stale resume over a late-answered request";

/// A resume from the oldest retained id minus one or two, or from the next id to be minted.
pub const WINDOW_EDGE: &str = "resume at the window's edge";
/// Two resume attempts on a session while one of its requests was still unsettled.
pub const PENDING_RESUMES: &str = "two resumes while a request is pending";
/// The owner answered a request under an id the server had already re-issued under a newer one.
pub const ANSWER_AFTER_REISSUE: &str = "owner's answer under an id already re-issued";
/// The owner answered a request after the server had timed it out.
pub const ANSWER_AFTER_TIMEOUT: &str = "owner's answer after the request timed out";
/// A client other than the owner resumed a tool call's stream.
pub const CALL_STREAM_THEFT: &str = "a tool call's stream resumed by a non-owner";
/// The session's owner sent a DELETE for it.
pub const OWNER_DELETE: &str = "DELETE by the session's owner";
/// A client other than the owner sent a DELETE presenting the session's token.
pub const FOREIGN_DELETE: &str = "DELETE by a non-owner";

/// The situations a run reached, read from its trace, in [`SITUATIONS`]
/// order. `server` is the plan's `[server]`: its replay window
/// (`retention`) and its `fence_delay`.
pub fn reached(trace: &Trace, server: &ServerConfig) -> Vec<&'static str> {
    reached_observed(&Observed::new(trace), server)
}

/// [`reached`] on a trace already indexed (a hunt indexes it once for the
/// checks and for this).
pub(crate) fn reached_observed(o: &Observed, server: &ServerConfig) -> Vec<&'static str> {
    let retention = server.retention;
    let found = [
        window_edge(o, retention),
        pending_resumes(o),
        late_answer(o, false),
        late_answer(o, true),
        call_stream_theft(o),
        delete(o, true),
        delete(o, false),
        retention_overflow(o, retention),
        !server.fence_delay.0.is_zero() && resumed_past_half_open(o),
        not_reissuable_pending(o),
        stale_over_settled(o),
        spans_streams(o),
        stale_over_retired(o, false),
        stale_over_retired(o, true),
        before_answered(o),
    ];
    SITUATIONS.iter().zip(found).filter(|(_, hit)| *hit).map(|(s, _)| *s).collect()
}

/// A resumption from the oldest retained id minus one or two, or from the
/// next id to be minted (newest + 1), as the session's ids stood when the
/// resume was sent.
fn window_edge(o: &Observed, retention: usize) -> bool {
    let r = retention as u64;
    o.conns.values().any(|c| {
        let (Some(l), Some(tok), Some(t)) = (c.last_event_id_number(), c.presented_token.as_deref(), c.request_t)
        else {
            return false;
        };
        let Some(newest) = o.max_id_seen(tok, t) else { return false };
        let oldest_minus = |k: u64| newest.checked_sub(r + k - 1);
        l == newest + 1 || Some(l) == oldest_minus(1) || Some(l) == oldest_minus(2)
    })
}

/// At least two resume attempts (GETs with `Last-Event-ID`) on a session
/// between the issue of one of its requests and that request's settling.
fn pending_resumes(o: &Observed) -> bool {
    o.requests.values().any(|r| {
        let Some(tok) = r.token() else { return false };
        let from = r.issued.0;
        let to = r.resolution().map_or(o.end, |x| x.0);
        let resumes = o
            .conns
            .values()
            .filter(|c| c.last_event_id.is_some() && c.presented_token.as_deref() == Some(tok))
            .filter(|c| c.request_t.is_some_and(|t| from < t && t < to))
            .count();
        resumes >= 2
    })
}

/// The owner answered a request under an id after the server had moved it
/// on: re-issued it under a newer id, or (`timed_out`) given it up as timed out.
fn late_answer(o: &Observed, timed_out: bool) -> bool {
    o.requests.values().any(|r| {
        o.answers.iter().filter(|a| a.client == r.owner && a.session.as_deref() == r.token()).any(|a| {
            let Some(k) = r.ids.iter().position(|id| *id == a.id) else { return false };
            if timed_out {
                r.resolution().is_some_and(|x| x.2 == Outcome::TimedOut && x.0 <= a.t)
            } else {
                r.ids.get(k + 1).and_then(|next| r.id_since(next)).is_some_and(|s| s <= a.t)
            }
        })
    })
}

/// A GET resuming a tool call's stream (its `Last-Event-ID` was seen on
/// the call's POST stream), sent by a client that is not the session's owner.
fn call_stream_theft(o: &Observed) -> bool {
    o.conns.values().any(|c| {
        c.purpose != Purpose::Post
            && c.stream.is_call()
            && c.last_event_id.is_some()
            && c.presented_token.as_deref().and_then(|t| o.token_owner.get(t)).is_some_and(|owner| *owner != c.client)
    })
}

/// A DELETE presenting a session token, sent by its owner (`by_owner`) or by another client.
fn delete(o: &Observed, by_owner: bool) -> bool {
    o.conns.values().any(|c| {
        c.method == "DELETE"
            && c.presented_token
                .as_deref()
                .and_then(|t| o.token_owner.get(t))
                .is_some_and(|owner| (*owner == c.client) == by_owner)
    })
}

/// A resumption from an id more than one below the oldest retained id (the
/// newest id the session showed minus the retention): one the window let go.
fn retention_overflow(o: &Observed, retention: usize) -> bool {
    o.conns.values().any(|c| {
        let (Some(l), Some(tok), Some(t)) = (c.last_event_id_number(), c.presented_token.as_deref(), c.request_t)
        else {
            return false;
        };
        o.max_id_seen(tok, t).is_some_and(|newest| l + (retention as u64) + 2 < newest)
    })
}

/// A resume (a GET with `Last-Event-ID`) sent while an earlier connection
/// of the same stream was half-open (its mapping dropped silently before):
/// the server has a writer to fence.
fn resumed_past_half_open(o: &Observed) -> bool {
    o.conns.values().any(|new| {
        let Some(sent) = new.request_t.filter(|_| new.last_event_id.is_some()) else { return false };
        o.conns.values().any(|prior| {
            prior.client == new.client
                && prior.conn != new.conn
                && prior.stream == new.stream
                && !prior.stream.is_none()
                && o.mapping_of(prior).and_then(|m| m.dropped.as_ref()).is_some_and(|d| d.0 < sent)
        })
    })
}

/// A resume (a GET with `Last-Event-ID`) on a session while one of its
/// requests marked not reissuable was unsettled.
fn not_reissuable_pending(o: &Observed) -> bool {
    o.requests.values().filter(|r| !r.reissuable).any(|r| {
        let Some(tok) = r.token() else { return false };
        let to = r.resolution().map_or(o.end, |x| x.0);
        o.conns.values().any(|c| {
            c.last_event_id.is_some()
                && c.presented_token.as_deref() == Some(tok)
                && c.request_t.is_some_and(|t| r.issued.0 < t && t < to)
        })
    })
}

/// The owner answered a request late (after its timeout or its re-issue),
/// then resumed from an id below the request's event: a window over a
/// request the server had settled.
fn stale_over_settled(o: &Observed) -> bool {
    o.requests.values().any(|r| {
        let Some(event) = r.event_id.as_deref().and_then(|e| e.parse::<u64>().ok()) else { return false };
        let late = o.answers.iter().filter(|a| a.client == r.owner && a.session.as_deref() == r.token()).find(|a| {
            r.resolution().is_some_and(|x| x.2 == Outcome::TimedOut && x.0 <= a.t)
                || r.ids
                    .iter()
                    .position(|id| *id == a.id)
                    .is_some_and(|k| r.ids.get(k + 1).and_then(|next| r.id_since(next)).is_some_and(|s| s <= a.t))
        });
        let Some(late) = late else { return false };
        o.conns.values().any(|c| {
            c.client == r.owner
                && c.request_t.is_some_and(|t| t > late.t)
                && c.last_event_id_number().is_some_and(|l| l < event)
        })
    })
}

/// The owner answered a request's first id after the server had re-issued
/// it (a late answer to a retired id), then resumed from an id below the
/// request's event: before anyone answered the re-issue, or
/// (`after_timeout`) after the request timed out with the re-issue
/// unanswered.
fn stale_over_retired(o: &Observed, after_timeout: bool) -> bool {
    o.requests.values().any(|r| {
        let Some(event) = r.event_id.as_deref().and_then(|e| e.parse::<u64>().ok()) else { return false };
        let (Some(first), Some(next)) = (r.ids.first(), r.ids.get(1)) else { return false };
        let Some(reissued) = r.id_since(next) else { return false };
        let answered = |id: &crate::wire::jsonrpc::RpcId| {
            o.answers
                .iter()
                .filter(|a| a.client == r.owner && a.session.as_deref() == r.token() && &a.id == id)
                .map(|a| a.t)
                .min()
        };
        let Some(late) = answered(first).filter(|t| *t >= reissued) else { return false };
        let unanswered_until = answered(next);
        // When the stale resume may come, and until when.
        let (from, until) = if after_timeout {
            let timed_out = r.outcomes.iter().find(|x| x.2 == Outcome::TimedOut && x.3 == *next).map(|x| x.0);
            match timed_out.filter(|t| unanswered_until.is_none_or(|a| a > *t)) {
                Some(t) => (late.max(t), None),
                None => return false,
            }
        } else {
            (late, unanswered_until)
        };
        o.conns.values().any(|c| {
            c.client == r.owner
                && c.request_t.is_some_and(|t| t > from && until.is_none_or(|n| t < n))
                && c.last_event_id_number().is_some_and(|l| l < event)
        })
    })
}

/// A resume from the id just before a request's event (numeric ids), sent
/// after the owner had answered the request.
fn before_answered(o: &Observed) -> bool {
    o.requests.values().any(|r| {
        let Some(event) = r.event_id.as_deref().and_then(|e| e.parse::<u64>().ok()) else { return false };
        let answered = o
            .answers
            .iter()
            .filter(|a| a.client == r.owner && a.session.as_deref() == r.token() && r.ids.contains(&a.id))
            .map(|a| a.t)
            .min();
        let Some(answered) = answered else { return false };
        o.conns.values().any(|c| {
            c.client == r.owner
                && c.request_t.is_some_and(|t| t > answered)
                && c.last_event_id_number() == Some(event - 1)
        })
    })
}

/// A resume (numeric `Last-Event-ID` L) of a stream while another stream of
/// the session had carried, before the resume went out, an event numbered
/// above L: under session-wide numbering the window from L spans it.
fn spans_streams(o: &Observed) -> bool {
    o.conns.values().any(|c| {
        let (Some(l), Some(tok), Some(t)) = (c.last_event_id_number(), c.presented_token.as_deref(), c.request_t)
        else {
            return false;
        };
        let others: std::collections::BTreeSet<&crate::check::observe::StreamKey> = o
            .conns
            .values()
            .filter(|d| d.token() == Some(tok) && !d.stream.is_none() && d.stream != c.stream)
            .map(|d| &d.stream)
            .collect();
        others
            .into_iter()
            .any(|s| o.stream_ids(s, t).iter().any(|(_, id, msg)| *msg && id.parse::<u64>().is_ok_and(|i| i > l)))
    })
}
