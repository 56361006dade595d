//! One trace event in words ([`describe`]): for the text report's
//! timeline, violation evidence, and the HTML timeline's titles.

use crate::trace::{describe_rpc, outcome_word, What};

/// One event in words (used for timelines and violation evidence). Each
/// section of [`What`]'s variants is worded by a function of its own.
pub fn describe(what: &What) -> String {
    match what {
        What::RunStarted { .. } | What::ClientJoined { .. } | What::Step { .. } | What::StepMissed { .. } => {
            run_words(what)
        }
        What::Connect { .. }
        | What::ConnectFailed { .. }
        | What::HttpRequest { .. }
        | What::HttpResponse { .. }
        | What::SseEvent { .. }
        | What::UplinkEnded { .. }
        | What::ProtocolError { .. }
        | What::UplinkSilent { .. }
        | What::SessionToken { .. }
        | What::Answer { .. }
        | What::Abandoned { .. }
        | What::Rejected { .. }
        | What::Reinitialize { .. }
        | What::TokenStolen { .. }
        | What::ClientCrashed { .. }
        | What::ToolEnableEnded { .. } => client_words(what),
        What::DeploymentStarted { .. }
        | What::StorePartitioned { .. }
        | What::StoreHealed { .. }
        | What::ServerBack { .. }
        | What::ReplicaCrashed { .. }
        | What::ReplicaDrained { .. }
        | What::Routed { .. } => deployment_words(what),
        What::MappingOpened { .. }
        | What::MappingDropped { .. }
        | What::DroppedWrite { .. }
        | What::MappingReset { .. }
        | What::MappingClosed { .. } => nat_words(what),
        What::RequestIssued { .. }
        | What::RequestOutcome { .. }
        | What::ServerStopped { .. }
        | What::RunCut { .. }
        | What::AppError { .. }
        | What::Notified { .. }
        | What::ServerNote { .. } => app_words(what),
        What::ToolOffered { .. }
        | What::CallSent { .. }
        | What::CallEnded { .. }
        | What::ListenSent { .. }
        | What::ListenEnded { .. }
        | What::ToolsChanged { .. }
        | What::CallAbandoned { .. } => call_words(what),
        What::Execution { .. } | What::StateMinted { .. } | What::StateChecked { .. } => execution_words(what),
    }
}

/// " on replica N", for an application report that names its replica.
fn on(replica: &Option<u32>) -> String {
    replica.map(|r| format!(" on replica {r}")).unwrap_or_default()
}

/// The run's header, its clients, and its steps. (Only these events are routed here.)
fn run_words(what: &What) -> String {
    match what {
        What::RunStarted { scenario, server, seed, .. } => format!("run of {scenario} on {server}, seed {seed}"),
        What::ClientJoined { client, principal, .. } => format!("client {client} (principal {principal})"),
        What::Step { detail, .. } => format!("step: {detail}"),
        What::StepMissed { index, action, why } => format!("step {index} ({action}) acted on nothing: {why}"),
        _ => unreachable!("describe routes only these events here"),
    }
}

/// What a client saw and did. (Only these events are routed here.)
fn client_words(what: &What) -> String {
    match what {
        What::Connect { client, conn, port, purpose } => {
            format!("{client} opened conn {conn} (port {port}, {purpose:?})")
        }
        What::ConnectFailed { client, conn, error } => format!("{client} could not connect (conn {conn}): {error}"),
        What::HttpRequest { client, conn, method, path, last_event_id, credential, .. } => format!(
            "{client} sent {method} {path} on conn {conn}{}{}",
            last_event_id.as_ref().map(|l| format!(" with Last-Event-ID {l}")).unwrap_or_default(),
            credential.as_ref().map(|p| format!(", presenting principal {p}'s credential")).unwrap_or_default()
        ),
        What::HttpResponse { client, conn, status, .. } => format!("{client} got HTTP {status} on conn {conn}"),
        What::SseEvent { client, conn, id, event, rpc, .. } => format!(
            "{client} received event {} on conn {conn}: {}",
            id.as_deref().unwrap_or("-"),
            describe_rpc(rpc, event)
        ),
        What::UplinkEnded { client, conn, reason } => format!("{client}'s conn {conn} ended: {reason}"),
        What::ProtocolError { client, conn, what, .. } => format!("{client}'s conn {conn}: protocol error: {what}"),
        What::UplinkSilent { client, conn, silent_ms } => {
            format!("{client} gave up on silent conn {conn} after {:.1} s", *silent_ms as f64 / 1000.0)
        }
        What::SessionToken { client, token, .. } => format!("{client} holds session token {token}"),
        What::Answer { client, id, status, .. } => {
            format!("{client} answered {id} ({})", status.map_or("no response".to_string(), |s| format!("HTTP {s}")))
        }
        What::Abandoned { client, id, why } => format!("{client} abandons {id}: {why}"),
        What::Rejected { client, conn, how } => format!("{client}'s resumption refused on conn {conn}: {how}"),
        What::Reinitialize { client, why } => format!("{client} re-initializes: {why}"),
        What::TokenStolen { from, to, credential } => {
            format!("{to} now holds {from}'s session token{}", if *credential { " and credential" } else { "" })
        }
        What::ClientCrashed { client } => format!("{client} crashed"),
        What::ToolEnableEnded { client, conn, tool, enabled } => match enabled {
            Some(true) => format!("{client}'s enable_tool call on conn {conn}: the server enabled {tool}"),
            Some(false) => format!("{client}'s enable_tool call on conn {conn}: refused ({tool} not enabled)"),
            None => format!("{client}'s enable_tool call on conn {conn} got no answer: {tool} may be enabled"),
        },
        _ => unreachable!("describe routes only these events here"),
    }
}

/// A deployment of several replicas, and its faults. (Only these events are routed here.)
fn deployment_words(what: &What) -> String {
    match what {
        What::DeploymentStarted { replicas, routing, store, .. } => {
            let store = if store == "shared" { "one shared store" } else { "a store each" };
            format!("deployment: {replicas} replicas behind a balancer routing {routing}, with {store}")
        }
        What::StorePartitioned { replica } => format!("replica {replica} is cut from the store"),
        What::StoreHealed { replica } => format!("replica {replica}'s link to the store is back"),
        What::ServerBack { replicas } => {
            let (who, it) = match replicas[..] {
                [] => ("the server process is".to_string(), "it"),
                [r] => (format!("replica {r}'s process is"), "it"),
                _ => (
                    format!(
                        "the processes of replicas {} are",
                        replicas.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
                    ),
                    "them",
                ),
            };
            format!("{who} back after the restart (new connections waited for {it} at the NATs)")
        }
        What::ReplicaCrashed { replica, out_after_us } => format!(
            "replica {replica} crashed; the balancer's health check takes it out of rotation {} later",
            crate::scenario::format_duration(std::time::Duration::from_micros(*out_after_us))
        ),
        What::ReplicaDrained { replica } => {
            format!("replica {replica} is drained: the balancer sends it no new connection")
        }
        What::Routed { client, up_port, replica, routing, source } => {
            let from = source.as_ref().map_or_else(|| format!("port {up_port}"), |a| format!("{a}:{up_port}"));
            format!("balancer: {client}'s connection from {from} → replica {replica} ({routing})")
        }
        _ => unreachable!("describe routes only these events here"),
    }
}

/// What a NAT saw of its mappings. (Only these events are routed here.)
fn nat_words(what: &What) -> String {
    match what {
        What::MappingOpened { client, mapping, down_port, up_port } => {
            format!("nat-{client}: mapping {mapping} opened ({down_port} → server from port {up_port})")
        }
        What::MappingDropped { client, mapping, fault, .. } => {
            format!("nat-{client}: mapping {mapping} dropped silently ({fault})")
        }
        What::DroppedWrite { client, mapping, bytes, events, response, closing } => {
            if *closing {
                return format!(
                    "nat-{client}: server wrote {bytes} bytes into dropped mapping {mapping}: the end of its response (it closed the stream)"
                );
            }
            let mut what: Vec<String> = events
                .iter()
                .map(|ev| format!("{} {}", ev.id.as_deref().unwrap_or("-"), describe_rpc(&ev.rpc, &ev.event)))
                .collect();
            what.extend(response.clone());
            let what = if what.is_empty() { "no event (heartbeats)".to_string() } else { what.join(", ") };
            format!("nat-{client}: server wrote {bytes} bytes into dropped mapping {mapping}: {what}")
        }
        What::MappingReset { client, mapping, why, .. } => format!("nat-{client}: mapping {mapping} reset ({why})"),
        What::MappingClosed { client, mapping, by } => format!("nat-{client}: mapping {mapping} closed by the {by}"),
        _ => unreachable!("describe routes only these events here"),
    }
}

/// What the server's application reported, and the server's own notes. (Only these events are routed here.)
fn app_words(what: &What) -> String {
    match what {
        What::RequestIssued { label, method, event_id, client, .. } => format!(
            "app: {label} ({method}) issued on {client}'s session{}",
            event_id.as_ref().map(|e| format!(" as event {e}")).unwrap_or_default()
        ),
        What::RequestOutcome { label, outcome, detail, .. } => {
            format!("app: {label} {}: {detail}", outcome_word(*outcome))
        }
        What::ServerStopped { why } => why.clone(),
        What::RunCut { why } => format!("the run was cut short here: {why}; the checks judge only up to this moment"),
        What::AppError { client, error } => format!("app error ({client}): {error}"),
        What::Notified { client, event_ids, .. } => {
            format!("app: notified {client}'s session as events {}", event_ids.join(", "))
        }
        What::ServerNote { session, note, replica, .. } => format!("server{} ({session}): {note}", on(replica)),
        _ => unreachable!("describe routes only these events here"),
    }
}

/// stateless-http, the clients' side: tools, calls and listen streams. (Only these events are routed here.)
fn call_words(what: &What) -> String {
    match what {
        What::ToolOffered { tool, once, idempotent, input } => format!(
            "tool {tool}{}{}{}",
            if input.is_empty() { String::new() } else { format!(" (asks {} first)", input.join(" and ")) },
            if *once { " (one-time state)" } else { "" },
            if *idempotent { " (idempotent)" } else { "" }
        ),
        What::CallSent { client, conn, call, tool, id, attempt, state, credential, answers } => {
            use crate::trace::stateless::{Attempt, StateHow};
            let why = match attempt {
                Attempt::First => "calls",
                Attempt::Retry => "retries (input responses)",
                Attempt::Reissue => "re-issues",
                Attempt::Presented => "presents state on",
            };
            let st = state.as_ref().map_or(String::new(), |p| match &p.how {
                StateHow::AsReceived => format!(" with requestState {}", p.fp),
                StateHow::Stolen { from } => format!(" with {from}'s requestState {}", p.fp),
                StateHow::Flipped => format!(" with an altered requestState {}", p.fp),
                StateHow::Truncated => format!(" with a truncated requestState {}", p.fp),
                StateHow::Moved { from_call } => format!(" with the requestState of {from_call} ({})", p.fp),
                StateHow::Replayed => format!(" with a spent round's requestState {}", p.fp),
            });
            let cred =
                credential.as_ref().map(|p| format!(", presenting principal {p}'s credential")).unwrap_or_default();
            let answered: Vec<String> = answers
                .iter()
                .map(|a| if a.declined { format!("{} (declined)", a.key) } else { a.key.clone() })
                .collect();
            let answering =
                if answered.is_empty() { String::new() } else { format!(", answering {}", answered.join(", ")) };
            format!("{client} {why} {tool} ({call}) as request {id} on conn {conn}{st}{cred}{answering}")
        }
        What::CallEnded { client, conn, call, id, end } => {
            use crate::trace::stateless::CallEnd;
            let how = match end {
                CallEnd::Complete { is_error: false, .. } => "got the result".to_string(),
                CallEnd::Complete { is_error: true, .. } => "got an error result".to_string(),
                CallEnd::InputRequired { requests, .. } if requests.is_empty() => {
                    "was answered input_required with no inputRequests".to_string()
                }
                CallEnd::InputRequired { requests, .. } => {
                    let asked: Vec<String> = requests.iter().map(|r| format!("{} ({})", r.key, r.method)).collect();
                    format!("was asked for input (input_required: {})", asked.join(", "))
                }
                CallEnd::Error { code, message } => format!("got JSON-RPC error {code} ({message})"),
                CallEnd::Status { status } => format!("got HTTP {status}"),
                CallEnd::Lost { why } => format!("lost the response: {why}"),
                CallEnd::Garbled { what } => format!("could not read the response: {what}"),
            };
            format!("{client}'s request {id} ({call}) on conn {conn} {how}")
        }
        What::ListenSent { client, conn, id } => {
            format!("{client} listens for tool-list changes (subscriptions/listen {id}) on conn {conn}")
        }
        What::ListenEnded { client, conn, id, end } => {
            use crate::trace::stateless::CallEnd;
            let how = match end {
                CallEnd::Complete { .. } => "was closed by the server with its result".to_string(),
                CallEnd::Error { code, message } => format!("was refused: JSON-RPC error {code} ({message})"),
                CallEnd::Status { status } => format!("was refused: HTTP {status}"),
                CallEnd::Lost { why } => format!("ended: {why}"),
                CallEnd::Garbled { what } => format!("was unreadable: {what}"),
                CallEnd::InputRequired { .. } => "asked for input".to_string(),
            };
            format!("{client}'s listen stream {id} on conn {conn} {how}")
        }
        What::ToolsChanged { n, streams } => {
            format!("app: tool list changed (change {n}); told {streams} open listen stream(s)")
        }
        What::CallAbandoned { client, call, why } => format!("{client} gives up on {call}: {why}"),
        _ => unreachable!("describe routes only these events here"),
    }
}

/// stateless-http, the application's side: executions and request states. (Only these events are routed here.)
fn execution_words(what: &What) -> String {
    match what {
        What::Execution { exec, tool, call, id, principal, on_behalf_of, step, inputs, replica } => {
            use crate::trace::stateless::ExecStep;
            let what = match step {
                ExecStep::Started => "started",
                ExecStep::Effect => "did its side effect",
                ExecStep::Cancelled => "was cancelled",
                ExecStep::Completed => "completed",
            };
            let behalf = on_behalf_of
                .as_ref()
                .filter(|b| *b != principal)
                .map(|b| format!(", acting for {b}"))
                .unwrap_or_default();
            let keys: Vec<&str> = inputs.iter().map(|r| r.key.as_str()).collect();
            let read =
                if keys.is_empty() { String::new() } else { format!(" on the answers under {}", keys.join(", ")) };
            format!(
                "app{}: execution E{exec} of {tool} ({call}, request {id} from {principal}{behalf}) {what}{read}",
                on(replica)
            )
        }
        What::StateMinted { call, id, principal, fp, lifetime_us, once, replica } => format!(
            "app{}: minted requestState {fp} for {principal} ({call}, request {id}){}{}",
            on(replica),
            lifetime_us.map(|l| format!(", valid {:.1} s", l as f64 / 1e6)).unwrap_or_default(),
            if *once { ", one-time" } else { "" }
        ),
        What::StateChecked { call, id, principal, fp, verdict, replica } => {
            use crate::trace::stateless::StateVerdict;
            let on = on(replica);
            match verdict {
                StateVerdict::Accepted => {
                    format!("app{on}: accepted requestState {fp} from {principal} ({call}, request {id})")
                }
                StateVerdict::Refused { why } => {
                    format!("app{on}: refused requestState {fp} from {principal} ({call}, request {id}): {why}")
                }
            }
        }
        _ => unreachable!("describe routes only these events here"),
    }
}
