//! `correlation-consistency`: the replay window never holds a server request
//! the client already answered.
//!
//! Evidence: a client is handed a server request (same JSON-RPC id) after the
//! server acknowledged the client's answer to it.

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};

pub const ID: &str = "correlation-consistency";
pub const ABOUT: &str = "no client is handed a server request whose answer the server already acknowledged";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "A replay must not hand a client a server request it already answered: replaying it duplicates, suppressing it leaves a gap.",
    evidence: "The client's answers the server acknowledged (HTTP 2xx) and every later delivery of a request with the same JSON-RPC id.",
    condition: "Correlation window consistency: no event in (Last-Event-ID, last_emitted] may be a server request already answered on the prior connection; if one is, fail the resumption.",
    to_pass: "Refuse resumptions whose replay window holds an answered server request (including answers to retired ids).",
};

pub fn judge(o: &Observed) -> Status {
    let acked: Vec<_> = o.answers.iter().filter(|a| a.status.is_some_and(|s| (200..300).contains(&s))).collect();
    if acked.is_empty() {
        return not_applicable("no client answer was acknowledged");
    }
    let mut out = Vec::new();
    for c in o.conns.values() {
        for d in &c.delivered {
            let Some(id) = d.request_id() else { continue };
            if let Some(a) = acked.iter().find(|a| a.client == c.client && &a.id == id && a.t < d.t) {
                let label = o.request_by_id(id).map_or_else(|| id.to_string(), |r| r.label.clone());
                let method = d.rpc.as_ref().and_then(|r| r.method.clone()).unwrap_or_default();
                out.push(Violation {
                    check: ID,
                    headline: format!(
                        "{} was handed {label} ({method}, event {}) again on conn {} at {}; its answer was acknowledged at {}",
                        c.client,
                        d.id.as_deref().unwrap_or("-"),
                        c.conn,
                        d.t,
                        a.t
                    ),
                    t: d.t,
                    evidence: vec![a.seq, d.seq], inherent: false });
            }
        }
    }
    status(out)
}
