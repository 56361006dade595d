//! `protocol`: the server speaks HTTP/1.1 and SSE well enough for a client
//! to follow: real HTTP, response headers in time, whole events of sane size,
//! streams that do not stop or stall mid-event.
//!
//! Evidence: the protocol errors clients observed, and every response with
//! a server error status (5xx: unhandled, whatever the request was). Stalls and cut streams
//! count only when the client's NAT mapping was live (a dropped or reset
//! mapping explains them).

use super::observe::Observed;
use super::{not_applicable, status, Finding, Status, Violation};
use crate::trace::What;
use crate::vocab::CheckId;

pub const ID: CheckId = CheckId::Protocol;
pub const ABOUT: &str = "responses are HTTP/1.1 with timely headers and whole SSE events of sane size";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A server under test must speak HTTP/1.1 and SSE a client can follow; garbage, missing headers, oversize events, streams cut mid-event or dripping bytes without completing events leave clients unable to resume.",
    evidence: "HTTP responses with a server error status (5xx), and protocol errors recorded by clients (not HTTP, no headers within the heartbeat timeout, an event over 1 MiB, a stream ending mid-event, bytes without a complete event for the heartbeat timeout), discounted when the client's NAT mapping was dropped or reset.",
    condition: "The analysis assumes a stream of whole events with ids; without it no resumption condition can be judged.",
    to_pass: "Never answer with a server error (a 4xx names what the client did wrong); answer with valid HTTP/1.1 headers promptly, send whole events (id, data, blank line), keep events small, and close streams between events.",
};

pub fn judge(o: &Observed) -> Status {
    let mut out = Vec::new();
    for e in &o.events {
        let What::ProtocolError { client, conn, problem, what } = &e.what else { continue };
        let network_explains = matches!(problem.as_str(), "no-headers" | "mid-event" | "drip")
            && o.conns.get(&(client.clone(), *conn)).and_then(|c| o.mapping_of(c)).is_some_and(|m| {
                m.dropped.as_ref().is_some_and(|d| d.0 <= e.t_us) || m.reset.is_some_and(|r| r.0 <= e.t_us)
            });
        if network_explains {
            continue;
        }
        // Headers a replica cut from the shared store could not send in time
        // (its store commands wait out their timeout first): inherent.
        let store_cut = (problem == "no-headers")
            .then(|| o.conns.get(&(client.clone(), *conn)).and_then(|c| o.store_cut_during(c, e.t_us)))
            .flatten();
        out.push(Violation {
            check: ID,
            finding: Finding::Protocol { client: client.clone(), conn: *conn, what: what.clone(), store_cut },
            t: e.t_us,
            evidence: vec![e.seq],
            inherent: store_cut.is_some(),
        });
    }
    // A 5xx is an unhandled server error: no client can act on it, unless a
    // fault explains it: a 503 from a replica cut from the shared store
    // (inherent: it cannot serve what lives there).
    for c in o.conns.values() {
        let Some((status @ 500..=599, _, t, seq)) = c.response else { continue };
        let store_cut = o.store_cut_explains(c, status);
        out.push(Violation {
            check: ID,
            finding: Finding::ServerError {
                client: c.client.clone(),
                conn: c.conn,
                method: c.method.clone(),
                status,
                store_cut,
            },
            t,
            evidence: c.request_seq.into_iter().chain([seq]).collect(),
            inherent: store_cut.is_some(),
        });
    }
    out.sort_by_key(|v| (v.t, v.evidence.clone()));
    if out.is_empty() && !o.conns.values().any(|c| c.is_uplink() && c.response.is_some()) {
        return not_applicable("no uplink was answered");
    }
    status(out)
}
