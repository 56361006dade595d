//! `correlation-consistency`: the replay window never holds a server request
//! the client already answered.
//!
//! Evidence: a client is handed a server request (same JSON-RPC id on the
//! same session, and the same request by the application's account) after
//! the server acknowledged an answer to it on that session. Judged per
//! session, whoever holds it: a thief handed the owner's answered request
//! breaks the condition too. Ids are never compared across sessions, since
//! servers restart their request ids in every session.

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};

pub const ID: &str = "correlation-consistency";
pub const ABOUT: &str = "no client is handed a server request whose answer the server already acknowledged";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A replay must not hand a client a server request it already answered: replaying it duplicates, suppressing it leaves a gap.",
    evidence: "The answers the server acknowledged (HTTP 2xx) on each session and every later delivery, on a connection of the same session, of the same request under the same JSON-RPC id.",
    condition: "Correlation window consistency: no event in (Last-Event-ID, last_emitted] may be a server request already answered on the prior connection; if one is, fail the resumption.",
    to_pass: "Refuse resumptions whose replay window holds an answered server request (including answers to retired ids).",
};

pub fn judge(o: &Observed) -> Status {
    let acked: Vec<_> = o.answers.iter().filter(|a| a.acknowledged()).collect();
    if acked.is_empty() {
        return not_applicable("no client answer was acknowledged");
    }
    let mut out = Vec::new();
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
            let label = delivered_req.map_or_else(|| id.to_string(), |r| r.label.clone());
            let method = d.rpc.as_ref().and_then(|r| r.method.clone()).unwrap_or_default();
            let event = d.id.as_deref().unwrap_or("-");
            let headline = if a.client == c.client {
                format!(
                    "{} was handed {label} ({method}, event {event}) again on conn {} at {}; its answer was acknowledged at {}",
                    c.client, c.conn, d.t, a.t
                )
            } else {
                format!(
                    "{} was handed {label} ({method}, event {event}) on conn {} at {}, a request {} already answered on this session (acknowledged at {})",
                    c.client, c.conn, d.t, a.client, a.t
                )
            };
            out.push(Violation { check: ID, headline, t: d.t, evidence: vec![a.seq, d.seq], inherent: false });
        }
    }
    status(out)
}
