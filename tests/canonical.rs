//! The seed analysis's two observed failures, end to end, judged only from
//! what clients, the NAT and the server's application observed.

use mcpsim::scenario::Plan;
use mcpsim::trace::{ConnId, Event, MappingId, Outcome, SimTime, What};
use mcpsim::wire::jsonrpc::{RpcId, RpcKind};
use mcpsim::Run;
use std::path::Path;
use std::time::Duration;

fn run(scenario: &str, server: &str) -> Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(scenario);
    let plan = Plan::load(&path).expect("bundled scenario loads");
    mcpsim::run(&plan, server, None).expect("run completes")
}

fn events(run: &Run) -> impl Iterator<Item = &Event> {
    run.trace.iter()
}

fn req(label: &str) -> RpcId {
    RpcId::Str(label.into())
}

/// The time and connection at which `client` saw a resumption from `from` accepted (HTTP 200).
fn resume_accepted(run: &Run, client: &str, from: &str) -> (SimTime, ConnId) {
    let conn = events(run)
        .find_map(|e| match &e.what {
            What::HttpRequest { client: c, conn, last_event_id: Some(l), .. } if c == client && l == from => {
                Some(*conn)
            }
            _ => None,
        })
        .expect("the resume GET was sent");
    let t = events(run)
        .find_map(|e| match &e.what {
            What::HttpResponse { client: c, conn: k, status: 200, .. } if c == client && *k == conn => Some(e.t_us),
            _ => None,
        })
        .expect("the resume was answered 200");
    (t, conn)
}

fn dropped_mappings(run: &Run, client: &str) -> Vec<MappingId> {
    events(run)
        .filter_map(|e| match &e.what {
            What::MappingDropped { client: c, mapping, .. } if c == client => Some(*mapping),
            _ => None,
        })
        .collect()
}

fn delivered_to(run: &Run, client: &str, id: &RpcId) -> Vec<(SimTime, ConnId)> {
    events(run)
        .filter_map(|e| match &e.what {
            What::SseEvent { client: c, conn, rpc: Some(r), .. }
                if c == client && r.id.as_ref() == Some(id) && r.kind == RpcKind::Request =>
            {
                Some((e.t_us, *conn))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn nat_rebind_naive_writes_req43_into_the_dead_uplink_and_times_out() {
    let run = run("nat-rebind.toml", "naive");
    let (accepted, _) = resume_accepted(&run, "alice", "1007");
    let dropped = dropped_mappings(&run, "alice");
    assert!(!dropped.is_empty(), "the rebind dropped alice's mapping");

    let into_dead: Vec<&Event> = events(&run)
        .filter(|e| match &e.what {
            What::DroppedWrite { client, mapping, events, .. } => {
                client == "alice"
                    && dropped.contains(mapping)
                    && events.iter().any(|ev| ev.rpc.as_ref().and_then(|r| r.id.as_ref()) == Some(&req("req-43")))
            }
            _ => false,
        })
        .collect();
    assert_eq!(into_dead.len(), 1, "req-43 was written into alice's dropped mapping");
    assert!(
        into_dead[0].t_us > accepted,
        "... after her new uplink was accepted ({} > {})",
        into_dead[0].t_us,
        accepted
    );

    assert!(delivered_to(&run, "alice", &req("req-43")).is_empty(), "req-43 never reaches alice");

    let issued = events(&run)
        .find(|e| matches!(&e.what, What::RequestIssued { label, event_id: Some(ev), .. } if label == "req-43" && ev == "1009"))
        .expect("req-43 is event 1009")
        .t_us;
    let timed_out = events(&run)
        .find(
            |e| matches!(&e.what, What::RequestOutcome { label, outcome: Outcome::TimedOut, .. } if label == "req-43"),
        )
        .expect("the application reports req-43 timed out")
        .t_us;
    assert_eq!(timed_out.as_duration() - issued.as_duration(), Duration::from_secs(300));
    // req-42 (event 1007) was answered before the rebind, as in the seed.
    assert!(events(&run).any(
        |e| matches!(&e.what, What::RequestOutcome { label, outcome: Outcome::Answered, .. } if label == "req-42")
    ));
    assert!(events(&run).any(|e| matches!(&e.what, What::RequestIssued { label, event_id: Some(ev), .. } if label == "req-42" && ev == "1007")));
}

#[test]
fn nat_rebind_guarded_delivers_req43_on_the_new_uplink_and_nothing_enters_the_dead_one() {
    let run = run("nat-rebind.toml", "guarded");
    let (accepted, new_conn) = resume_accepted(&run, "alice", "1007");
    let dropped = dropped_mappings(&run, "alice");
    assert!(!dropped.is_empty());

    let got = delivered_to(&run, "alice", &req("req-43"));
    assert_eq!(got.len(), 1, "req-43 delivered once");
    assert_eq!(got[0].1, new_conn, "on the new uplink");

    let late_bytes: Vec<&Event> = events(&run)
        .filter(|e| matches!(&e.what, What::DroppedWrite { client, mapping, .. } if client == "alice" && dropped.contains(mapping)) && e.t_us > accepted)
        .collect();
    assert!(late_bytes.is_empty(), "no server byte enters the dropped mapping after acceptance: {late_bytes:?}");
    assert!(events(&run).any(
        |e| matches!(&e.what, What::RequestOutcome { label, outcome: Outcome::Answered, .. } if label == "req-43")
    ));
}

/// Connections on which `client` presented a token it did not obtain itself.
fn conns_with_foreign_token(run: &Run, client: &str) -> Vec<ConnId> {
    let own: Vec<String> = events(run)
        .filter_map(|e| match &e.what {
            What::SessionToken { client: c, token, .. } if c == client => Some(token.clone()),
            _ => None,
        })
        .collect();
    events(run)
        .filter_map(|e| match &e.what {
            What::HttpRequest { client: c, conn, method, path, .. }
                if c == client && method == "GET" && path.contains("sessionId=") =>
            {
                let token = path.split("sessionId=").nth(1).unwrap_or("");
                (!own.iter().any(|t| t == token)).then_some(*conn)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn second_client_leak_naive_hands_mallory_events_1001_to_1007() {
    let run = run("second-client-leak.toml", "naive");
    let stolen = conns_with_foreign_token(&run, "mallory");
    assert_eq!(stolen.len(), 1);
    let mut ids = Vec::new();
    let mut leaked_req42 = false;
    for e in events(&run) {
        if let What::SseEvent { client, conn, id, rpc, data, .. } = &e.what {
            if client == "mallory" && stolen.contains(conn) {
                ids.push(id.clone().unwrap_or_default());
                if rpc.as_ref().and_then(|r| r.id.as_ref()) == Some(&req("req-42")) {
                    assert_eq!(rpc.as_ref().unwrap().method.as_deref(), Some("sampling/createMessage"));
                    assert!(data.contains("continue alice's conversation"), "the content of req-42: {data}");
                    leaked_req42 = true;
                }
            }
        }
    }
    let expected: Vec<String> = (1001..=1007).map(|n| n.to_string()).collect();
    assert_eq!(ids, expected);
    assert!(leaked_req42);
}

#[test]
fn second_client_leak_guarded_refuses_mallory_and_alice_keeps_working() {
    let run = run("second-client-leak.toml", "guarded");
    let stolen = conns_with_foreign_token(&run, "mallory");
    assert_eq!(stolen.len(), 1);
    let alice_tokens: Vec<String> = events(&run)
        .filter_map(|e| match &e.what {
            What::SessionToken { client, token, .. } if client == "alice" => Some(token.clone()),
            _ => None,
        })
        .collect();
    // Mallory sees nothing on the stolen token's connection...
    assert!(!events(&run).any(
        |e| matches!(&e.what, What::SseEvent { client, conn, .. } if client == "mallory" && stolen.contains(conn))
    ));
    // ...and never holds alice's session through any other path.
    assert!(!events(&run).any(|e| matches!(&e.what, What::SessionToken { client, token, .. } if client == "mallory" && alice_tokens.contains(token))));
    // The refusal is explicit.
    let refusal = events(&run)
        .find(|e| matches!(&e.what, What::Rejected { client, conn, how } if client == "mallory" && stolen.contains(conn) && *how == mcpsim::trace::Refused::Status(403)))
        .expect("mallory is refused with 403");
    // Alice's original uplink still carries req-43 after the refusal, and she answers it.
    let first_conn = events(&run)
        .find_map(|e| match &e.what {
            What::SseEvent { client, conn, .. } if client == "alice" => Some(*conn),
            _ => None,
        })
        .unwrap();
    let got = delivered_to(&run, "alice", &req("req-43"));
    assert_eq!(got.len(), 1);
    assert!(got[0].0 > refusal.t_us);
    assert_eq!(got[0].1, first_conn, "alice's uplink survived the theft attempt");
    assert!(!events(&run).any(|e| matches!(&e.what, What::Reinitialize { client, .. } if client == "alice")));
    assert!(events(&run).any(
        |e| matches!(&e.what, What::RequestOutcome { label, outcome: Outcome::Answered, .. } if label == "req-43")
    ));
}
