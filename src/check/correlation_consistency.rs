//! `correlation-consistency`: the replay window never holds a server request
//! the client already answered.
//!
//! Evidence: a client is handed a server request (same JSON-RPC id on the
//! same session, and the same request by the application's account) after
//! the server acknowledged an answer to it on that session. Judged per
//! session, whoever holds it: a thief handed the owner's answered request
//! breaks the condition too. Ids are never compared across sessions, since
//! servers restart their request ids in every session. Also: two different
//! server requests under one JSON-RPC id on one connection while the first
//! is pending (no answer can be correlated).

use super::observe::{Delivered, Observed};
use super::{not_applicable, status, Finding, Status, Violation};
use crate::trace::Outcome;
use crate::vocab::CheckId;

pub const ID: CheckId = CheckId::CorrelationConsistency;
pub const ABOUT: &str = "no client is handed a server request whose answer the server already acknowledged";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A replay must not hand a client a server request it already answered: replaying it duplicates, suppressing it leaves a gap.",
    evidence: "The answers the server acknowledged (HTTP 2xx) on each session and every later delivery, on a connection of the same session, of the same request under the same JSON-RPC id.",
    condition: "Correlation window consistency: no event in (Last-Event-ID, last_emitted] may be a server request already answered on the prior connection; if one is, fail the resumption.",
    to_pass: "Refuse resumptions whose replay window holds an answered server request (including answers to retired ids).",
};

pub fn judge(o: &Observed) -> Status {
    let acked: Vec<_> = o.answers.iter().filter(|a| a.acknowledged()).collect();
    let mut out = Vec::new();
    let reused = id_reuse(o, &mut out);
    if acked.is_empty() && !reused {
        return not_applicable("no client answer was acknowledged");
    }
    for c in o.conns.values() {
        let Some(token) = c.token() else { continue };
        for d in &c.delivered {
            let Some(id) = d.request_id() else { continue };
            // JSON-RPC ids are unique only within a session: match the answer
            // by session (whoever held it), and only to the same request.
            let delivered_req = o.request_at(Some(token), id, d.t);
            let answered = acked.iter().find(|a| {
                let same_session = match &a.session {
                    Some(s) => s == token,
                    None => a.client == c.client,
                };
                same_session
                    && &a.id == id
                    && a.t < d.t
                    && match (delivered_req, o.request_at(Some(token), id, a.t)) {
                        (Some(x), Some(y)) => x.label == y.label,
                        _ => true,
                    }
            });
            let Some(a) = answered else { continue };
            let finding = Finding::HandedAgain {
                client: c.client.clone(),
                conn: c.conn,
                label: delivered_req.map_or_else(|| id.to_string(), |r| r.label.clone()),
                method: d.rpc.as_ref().and_then(|r| r.method.clone()).unwrap_or_default(),
                event: d.id.clone().unwrap_or_else(|| "-".into()),
                at: d.t,
                answered_by: a.client.clone(),
                acked_at: a.t,
            };
            out.push(Violation { check: ID, finding, t: d.t, evidence: vec![a.seq, d.seq], inherent: false });
        }
    }
    status(out)
}

/// Two different server requests under one JSON-RPC id on one connection
/// while the first is still pending: an answer to that id cannot be
/// correlated with either. "Different" by the method, or by the
/// application's account (two labels). Returns whether any connection
/// carried two server requests to compare.
fn id_reuse(o: &Observed, out: &mut Vec<Violation>) -> bool {
    let mut judged = false;
    for c in o.conns.values() {
        let requests: Vec<_> = c.delivered.iter().filter(|d| d.request_id().is_some()).collect();
        judged |= requests.len() > 1;
        for (k, second) in requests.iter().enumerate() {
            let id = second.request_id().expect("filtered");
            let Some(first) = requests[..k].iter().find(|d| d.request_id() == Some(id)) else { continue };
            let method = |d: &Delivered| d.rpc.as_ref().and_then(|r| r.method.clone()).unwrap_or_default();
            let label = |d: &Delivered| o.request_at(c.token(), id, d.t).map(|r| r.label.clone());
            let (l1, l2) = (label(first), label(second));
            if method(first) == method(second) && l1 == l2 {
                continue; // the same request again (stream-order judges repeats)
            }
            // Still pending: the client had not answered it, and the application had not settled it.
            let answered =
                o.answers.iter().any(|a| a.client == c.client && &a.id == id && a.t > first.t && a.t < second.t);
            let settled = o
                .request_at(c.token(), id, first.t)
                .is_some_and(|r| r.outcomes.iter().any(|x| &x.3 == id && x.0 < second.t && x.2 != Outcome::Reissued));
            if answered || settled {
                continue;
            }
            let name = |l: Option<String>, d: &Delivered| l.unwrap_or_else(|| method(d));
            out.push(Violation {
                check: ID,
                finding: Finding::IdReused {
                    client: c.client.clone(),
                    conn: c.conn,
                    id: id.clone(),
                    first: (name(l1, first), method(first), first.t),
                    second: (name(l2, second), method(second), second.t),
                },
                t: second.t,
                evidence: vec![first.seq, second.seq],
                inherent: false,
            });
        }
    }
    judged
}
