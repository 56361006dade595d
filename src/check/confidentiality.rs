//! `confidentiality`: no event of a session reaches a principal other than
//! the session's owner.
//!
//! Evidence: SSE messages delivered on a connection that presented a session
//! token to a client whose principal is not the token owner's. When the thief
//! also stole the owner's credential, no server can tell them apart: this
//! check still reports the leak, because it happened.

use super::observe::Observed;
use super::{not_applicable, status, Status, Violation};
use crate::report::describe_rpc;
use crate::wire::jsonrpc::RpcKind;

pub const ID: &str = "confidentiality";
pub const ABOUT: &str = "no event of a session is delivered to a principal other than the session's owner";

pub const EXPLAIN: super::Explain = super::Explain {
    meaning: "No event of a session is delivered to a principal other than the session's owner.",
    evidence: "Which client learned each session token (its owner), which client presented it, and the messages delivered on that connection; token thefts recorded by the harness.",
    condition: "The analysis's step 6: a token holder resuming from an old id must not receive another user's events; bind sessions to principals (MCP security best practices).",
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
        let (Some(first), Some(last)) = (leaked.first(), leaked.last()) else { continue };
        let ids = match (&first.id, &last.id) {
            (Some(a), Some(b)) if a != b => format!("events {a}–{b}"),
            (Some(a), _) => format!("event {a}"),
            _ => "events".into(),
        };
        let requests: Vec<String> = leaked
            .iter()
            .filter(|d| d.rpc.as_ref().is_some_and(|r| r.kind == RpcKind::Request))
            .map(|d| describe_rpc(&d.rpc, &d.event))
            .collect();
        let including =
            if requests.is_empty() { String::new() } else { format!(", including {}", requests.join(", ")) };
        // Did the thief also hold the owner's credential? Then no server could tell.
        let inherent =
            o.thefts.iter().any(|(t, from, to, cred)| *cred && from == owner && to == &c.client && *t <= c.opened);
        let note = if inherent { " (it held the owner's credential: no server can tell them apart)" } else { "" };
        out.push(Violation {
            check: ID,
            headline: format!(
                "{} (principal {}) received {} message(s) of {owner}'s session on conn {}: {ids}{including}{note}",
                c.client,
                o.principal(&c.client),
                leaked.len(),
                c.conn
            ),
            t: first.t,
            evidence: c.request_seq.into_iter().chain(leaked.iter().map(|d| d.seq)).collect(),
            inherent,
        });
    }
    if !judged {
        return not_applicable("no client presented another principal's session token");
    }
    status(out)
}
