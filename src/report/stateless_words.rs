//! The words for stateless-http findings: who, which request, what the
//! server did, and when.

use crate::check::stateless::finding::{Req, StatelessFinding as F};
use crate::trace::SimTime;
use std::fmt;

impl fmt::Display for Req {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}'s request {} ({}, tool {})", self.client, self.id, self.call, self.tool)
    }
}

fn effects(list: &[(u32, SimTime)]) -> String {
    list.iter().map(|(e, t)| format!("E{e} at {t}")).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for F {
    // One arm per finding kind: a long match is the clearest form here (it
    // counts toward the house's 12 long functions, docs/design.md §9).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            F::WorkAfterOwnCancel { exec, req, cancelled_at, what, at } => write!(
                f,
                "execution E{exec} of {req} {what} at {at}, after the server itself reported it cancelled at {cancelled_at}: work after its own cancellation, however soon (MCP 2026-07-28: the server SHOULD stop the work)"
            ),
            F::RanAfterClose { exec, req, closed, closed_at, what, at } => write!(
                f,
                "execution E{exec} of {req} {what} at {at}, {:.1} s after its stream was {closed} at {closed_at}; the close is the cancellation, and it had reached the server ({})",
                at.secs_f64() - closed_at.secs_f64(),
                if *what == "completed" {
                    "MCP 2026-07-28: the server MUST NOT send further messages for it"
                } else {
                    "MCP 2026-07-28: the server SHOULD stop the work"
                }
            ),
            F::HalfOpen { exec, req, mapping, dropped_at, dead_bytes, effect_at } => write!(
                f,
                "the stream of {req} went half-open at {dropped_at} (mapping {mapping}): the server wrote {dead_bytes} bytes into the dead mapping, and execution E{exec} {} (inherent: no server sees a close that never reaches it)",
                match effect_at {
                    Some(t) => format!("ran to its side effect at {t}"),
                    None => "did not reach its side effect".into(),
                }
            ),
            F::DuplicateAfterClose { call, tool, effects: list, cancelled_exec, closed_at } => write!(
                f,
                "{call} ({tool}, not idempotent) took effect {} times ({}); E{cancelled_exec}'s request had been cancelled by a close that reached the server at {closed_at}, so the server could have stopped it",
                list.len(),
                effects(list)
            ),
            F::DuplicateUnpreventable { call, tool, effects: list } => write!(
                f,
                "{call} ({tool}, not idempotent) took effect {} times ({}); no close reached the server before the effects, and nothing in MCP 2026-07-28 tells a re-issue from a new call",
                list.len(),
                effects(list)
            ),
            F::OneRequestManyEffects { exec, call, tool, effects: list } => write!(
                f,
                "execution E{exec} of {call} ({tool}, not idempotent) took effect {} times for one request ({})",
                list.len(),
                list.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
            ),
            F::OnceRedeemedTwice { fp, call, first, second, by, replicas, shared_store, first_cut } => {
                write!(
                    f,
                    "one-time requestState {fp} was redeemed twice: for request {} at {}, and again for {by}'s request {} ({call}) at {}",
                    first.0, first.1, second.0, second.1
                )?;
                match replicas {
                    Some((a, b)) if a != b && !shared_store => write!(
                        f,
                        ", on replica {a} then replica {b}, which keep a store each: no replica can know what another redeemed (the deployment needs a shared store)"
                    ),
                    Some((a, b)) if a != b && *first_cut => write!(
                        f,
                        ", on replica {a} while a partition cut it from the shared store (it redeemed without consulting the single-use registry, where refusing keeps the state one-time), then on replica {b}"
                    ),
                    Some((a, b)) if a != b => write!(
                        f,
                        ", on replica {a} then replica {b}, which share a store that could have refused it"
                    ),
                    Some((a, _)) => write!(f, ", both on replica {a}"),
                    None => Ok(()),
                }
            }
            F::StolenStateHonoured { req, victim, thief_principal, at, how, with_credential, unauthenticated } => {
                if *unauthenticated && !*with_credential {
                    write!(
                        f,
                        "{req} presented {victim}'s requestState as principal {thief_principal}, and the server {how} at {at}: the server authenticates no one, so a principal is only the name a request asserts, and the thief could assert {victim}'s as easily (MRTR binds the authenticated principal)"
                    )
                } else if *with_credential {
                    write!(
                        f,
                        "{req} presented {victim}'s requestState and {victim}'s credential, and the server {how} at {at}: no server can tell the thief from {victim}"
                    )
                } else {
                    write!(
                        f,
                        "{req} presented {victim}'s requestState as principal {thief_principal}, and the server {how} at {at} (MRTR: binding state to its principal is a SHOULD, and a MUST for an elicitation)"
                    )
                }
            }
            F::TamperedStateHonoured { req, tamper, at, how } => {
                let rule = if tamper.starts_with("minted for") {
                    "MRTR: binding state to its originating request is a SHOULD"
                } else {
                    "MRTR: state that fails verification MUST be rejected"
                };
                write!(f, "{req} presented a requestState {tamper}, and the server {how} at {at} ({rule})")
            }
            F::AnswerMisread { exec, req, key, sent_under, at } => write!(
                f,
                "execution E{exec} of {req} acted, under input {key:?}, on {} at {at} (MRTR: inputResponses are keyed by the server's own keys, and each answer belongs to its key)",
                match sent_under {
                    Some(other) => format!("the answer the request sent under {other:?}"),
                    None => "a value the request never sent under that key".to_string(),
                }
            ),
            F::RanPastDecline { exec, req, key, at } => write!(
                f,
                "{req} declined the input {key:?}, yet execution E{exec} did its side effect at {at}: it ran as if the input had been accepted"
            ),
            F::RanUnanswered { exec, req, input, at } => write!(
                f,
                "execution E{exec} of {req} started at {at}, but the tool asks for {} first and the request answered none of it (inputResponses absent)",
                input.join(" and ")
            ),
            F::ExpiredStateHonoured { req, expired_at, sent_at, how } => write!(
                f,
                "{req} presented a requestState at {sent_at} that expired at {expired_at} by the server's own lifetime, and the server {how} (MRTR: a short expiry is a SHOULD)"
            ),
            F::OtherPrincipalsResult { req, principal, data_of, at, with_credential, unauthenticated } => write!(
                f,
                "{req} (principal {principal}) received {data_of}'s result at {at}{}",
                if *with_credential {
                    format!(", presenting {data_of}'s credential: no server can tell them apart")
                } else if *unauthenticated {
                    ", from a server that authenticates no one: principals there are self-asserted names, and no server can tell them apart".to_string()
                } else {
                    String::new()
                }
            ),
            F::AskedAgain { client, call, rounds, at } => write!(
                f,
                "{client}'s call {call} answered every input the server asked for and had its state accepted, yet was asked for input again {rounds} rounds in a row with nothing executed (the last at {at}): it can never complete"
            ),
            F::CallNeverCompleted { client, call, attempts, last } => {
                write!(f, "{client}'s call {call} never completed after {attempts} request(s): {last}")
            }
            F::ListenRefused { client, id, at, how, times, until } => write!(
                f,
                "{client}'s listen {id} was refused at {at} ({how}){}: its earlier listen stream was dead, and nothing else could tell it of changes (a client must be able to listen again)",
                if *times > 1 { format!(", and {} listens after it until {until}", times - 1) } else { String::new() }
            ),
            F::ChangeNotDelivered { client, n, changed_at, id, half_open } => {
                if *half_open {
                    write!(
                        f,
                        "tool-list change {n} at {changed_at} was written into {client}'s half-open listen stream {id} and lost (inherent: a listen stream has nothing to resume from; the client must listen again)"
                    )
                } else {
                    write!(f, "tool-list change {n} at {changed_at} never reached {client}, whose listen stream {id} was open")
                }
            }
            F::Wire { client, conn, problem, what } => write!(f, "{client}'s conn {conn}: {problem}: {what}"),
            F::ServerError { req, status } => write!(f, "{req} was answered HTTP {status}: the server failed"),
        }
    }
}
