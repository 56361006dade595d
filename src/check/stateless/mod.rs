//! The checks of `stateless-http` (MCP 2026-07-28): the seed's four
//! conditions restated for a protocol without sessions or resumption
//! (`docs/stateless-http.md`, Part 2):
//!
//! | seed condition | check |
//! |---|---|
//! | session binding | `state-binding` (and `confidentiality`) |
//! | replay-window integrity | `state-integrity` |
//! | correlation-window consistency | `exactly-once` |
//! | in-flight request disposition | `cancellation` (and `liveness`) |
//!
//! One rule for all: a break that never reached the server is not the
//! server's fault. A half-open socket gives the server no close; what
//! follows from it is reported as inherent, with its reason.

pub mod finding;
mod index;
mod liveness;
mod state;
mod work;

use super::{not_applicable, status, Check, CheckId, Explain, Finding, Judge, Status, Violation};
use crate::trace::stateless::{CallEnd, ExecStep};
use crate::trace::SimTime;
use finding::{Req, StatelessFinding as F};
pub(crate) use index::{Index, Sent};
use liveness::liveness;
use state::{state_binding, state_integrity};
use work::{cancellation, exactly_once};

/// How long a close takes to reach the server and stop an execution, at
/// most, before running on counts against it: a hop is 5 to 40 ms in the
/// bundled scenarios and hunts, and the tick 20 ms; one second is far above both.
pub const CLOSE_GRACE: SimTime = SimTime(1_000_000);

fn v(check: CheckId, finding: F, t: SimTime, evidence: Vec<u64>, inherent: bool) -> Violation {
    Violation { check, finding: Finding::Stateless(finding), t, evidence, inherent }
}

fn req(ix: &Index, i: usize) -> Req {
    let s = &ix.sent[i];
    Req { client: s.client.clone(), call: s.call.clone(), tool: s.tool.clone(), id: s.id.clone() }
}

/// When the close of the stream of `x`'s request reached the server while
/// `x` ran and before the client had its answer, if it did.
fn close_shown(ix: &Index, x: &index::Exec) -> Option<(SimTime, u64, &'static str)> {
    let i = x.sent?;
    let (closed_at, seq, how) = ix.fate(&ix.sent[i])?.closed?;
    let ended =
        x.steps.iter().any(|(s, u, _)| matches!(s, ExecStep::Completed | ExecStep::Cancelled) && *u <= closed_at);
    let answered =
        ix.sent[i].end.as_ref().is_some_and(|(e, u, _)| !matches!(e, CallEnd::Lost { .. }) && *u <= closed_at);
    (!ended && !answered).then_some((closed_at, seq, how))
}

/// `confidentiality`: no client receives another principal's results.
fn confidentiality(ix: &Index) -> Status {
    let mut out = Vec::new();
    let mut judged = false;
    for (i, s) in ix.sent.iter().enumerate() {
        let Some((CallEnd::Complete { data_of: Some(d), .. }, at, seq)) = &s.end else { continue };
        judged = true;
        let own = ix.clients.get(&s.client).cloned().unwrap_or_default();
        if *d != own {
            let with_credential = s.principal == *d;
            out.push(v(
                CheckId::Confidentiality,
                F::OtherPrincipalsResult {
                    req: req(ix, i),
                    principal: own,
                    data_of: d.clone(),
                    at: *at,
                    with_credential,
                    unauthenticated: ix.unauthenticated,
                },
                *at,
                vec![s.seq, *seq],
                with_credential || ix.unauthenticated,
            ));
        }
    }
    if !judged {
        return not_applicable("no call completed with a result that names whose data it carries");
    }
    status(out)
}

/// `protocol`: the server spoke MCP 2026-07-28 as a client can read it.
fn protocol(ix: &Index) -> Status {
    let mut out = Vec::new();
    for (client, conn, problem, what, t, seq) in &ix.problems {
        out.push(v(
            CheckId::Protocol,
            F::Wire { client: client.clone(), conn: *conn, problem: problem.clone(), what: what.clone() },
            *t,
            vec![*seq],
            false,
        ));
    }
    for (i, s) in ix.sent.iter().enumerate() {
        if let Some((CallEnd::Status { status }, t, seq)) = &s.end {
            if *status >= 500 {
                out.push(v(
                    CheckId::Protocol,
                    F::ServerError { req: req(ix, i), status: *status },
                    *t,
                    vec![s.seq, *seq],
                    false,
                ));
            }
        }
    }
    if ix.sent.iter().all(|s| s.end.is_none())
        && ix.listens.iter().all(|l| l.acked.is_none() && l.end.is_none())
        && out.is_empty()
    {
        return not_applicable("no request was answered");
    }
    out.sort_by_key(|v| v.t);
    status(out)
}

const fn check(id: CheckId, about: &'static str, explain: Explain, judge: fn(&Index) -> Status) -> Check {
    Check { id, about, explain, judge: Judge::Stateless(judge) }
}

/// The checks of stateless-http, in the order of the seed's conditions.
pub const CHECKS: [Check; 7] = [
    check(
        CheckId::StateBinding,
        "state minted for one principal is refused when another presents it",
        Explain {
            meaning: "A requestState handed to principal P is honoured only on a request authenticated as P.",
            evidence: "A request that presented another client's requestState (steal-request-state), and whether the server acted on it: the call completed, or the application reported an execution for it. A thief who also presents the victim's credential is the victim to any server: inherent.",
            condition: "Session binding (condition 1): the session's event sequence belonged to the principal that created it; here the state does.",
            to_pass: "Bind the principal into the state and refuse it from anyone else (MRTR: SHOULD; MUST when the state carries an elicitation).",
        },
        state_binding,
    ),
    check(
        CheckId::StateIntegrity,
        "altered, moved or expired state is refused and never acted on; a tool acts on the answers its request carried",
        Explain {
            meaning: "The server acts only on state it minted, unmodified, unexpired, for this very request (tool and arguments), and on the input responses that request carried, each under its own key.",
            evidence: "A request whose requestState was altered or truncated (tamper-request-state), moved onto another call, or sent after the lifetime the application declared when minting it, and whether the server acted on it. For a tool that asks for input: the answers each retry carried (by key, declined or not) against the answers the application says its execution read, its side effect after a declined input, and an execution for a request that answered nothing.",
            condition: "Replay-window integrity (condition 2): a resumption from N was valid only inside the retained window; here a state is valid only as minted, in its lifetime, for its request.",
            to_pass: "Seal the state (HMAC or AEAD), bind it to the tool and a digest of the arguments, give it a short expiry, and refuse whatever fails. Read each answer under the key you asked it by, and do not run what was declined.",
        },
        state_integrity,
    ),
    check(
        CheckId::ExactlyOnce,
        "a one-time state is redeemed once; no duplicate side effect the server could have prevented",
        Explain {
            meaning: "A one-time state is acted on once. A call's side effect happens once, unless nothing the server saw told the requests apart.",
            evidence: "The application's side effects per call and acting principal, and which request's close reached the server before its effect; the application's acceptances of a one-time state. A re-issue after a half-open break runs a tool that is not idempotent twice, and no server can tell a re-issue from a new call: inherent.",
            condition: "Correlation-window consistency (condition 3): an answered request was never re-sent; here a settled action is never done again.",
            to_pass: "Keep a single-use registry for one-time states, and stop an execution whose request was cancelled.",
        },
        exactly_once,
    ),
    check(
        CheckId::Cancellation,
        "a close that reached the server cancels its request",
        Explain {
            meaning: "Once the client's close of a response stream (FIN or RST) has reached the server, the server sends nothing more for that request and does no more of its work.",
            evidence: "The NAT's record of the close going upstream (a reset, or the client's close of a live mapping) and the application's report of the execution's side effect or completion more than a second later. A half-open break never reaches the server: what it wrote into the dead mapping, and whether the work ran to its effect, is reported as inherent.",
            condition: "In-flight request disposition (condition 4): a request in flight at a resumption was re-issued or failed; here the close is the disposition.",
            to_pass: "Treat the close of the response stream as cancellation: stop the work and write nothing more.",
        },
        cancellation,
    ),
    check(
        CheckId::Confidentiality,
        "no client receives another principal's results",
        Explain {
            meaning: "Nothing computed for principal P reaches a client of another principal.",
            evidence: "Each completed result, and the principal whose data it names, against the principal of the client that received it.",
            condition: "Session binding (condition 1), seen from the victim's side.",
            to_pass: "Act for the principal that authenticated the request, never for the one a state names.",
        },
        confidentiality,
    ),
    check(
        CheckId::Liveness,
        "every call completes, re-issued if its response was lost",
        Explain {
            meaning: "Every call a client makes ends with its result; a lost response is re-issued under a new id and completes.",
            evidence: "Each call's attempts and how each ended. A call still under way at the end is not judged.",
            condition: "In-flight request disposition (condition 4): nothing waits forever.",
            to_pass: "Answer every request; accept a re-issue.",
        },
        liveness,
    ),
    check(
        CheckId::Protocol,
        "the server spoke MCP 2026-07-28 as a client can read it",
        Explain {
            meaning: "Responses are JSON or SSE; every result carries a known resultType; no server-initiated request; no 5xx.",
            evidence: "What clients could not read, server requests on a response stream, and server errors.",
            condition: "None: the harness can judge the four conditions only over a protocol it can read.",
            to_pass: "Speak MCP 2026-07-28.",
        },
        protocol,
    ),
];
