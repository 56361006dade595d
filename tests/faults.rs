//! Each fault and client behaviour of the core, shown in a run.

use mcpsim::scenario::Plan;
use mcpsim::trace::{SimTime, What};
use mcpsim::Run;
use std::time::Duration;

const BASE: &str = r#"
[scenario]
name = "faults"
duration = "120s"
[server]
first_event_id = 1
heartbeat = "15s"
[network]
half_open_lifetime = "90s"
[[client]]
name = "alice"
[[client]]
name = "bob"
[[step]]
at = "0s"
do = "connect"
client = "alice"
[[step]]
at = "0s"
do = "connect"
client = "bob"
"#;

fn run(steps: &str, server: &str) -> Run {
    let plan = Plan::from_toml_str(&format!("{BASE}{steps}"), "faults.toml").expect("valid");
    mcpsim::run(&plan, server, None).expect("run completes")
}

fn secs(s: f64) -> SimTime {
    SimTime((s * 1e6) as u64)
}

#[test]
fn sever_half_opens_the_uplink_and_the_client_resumes_after_missed_heartbeats() {
    let run = run(
        "[[step]]\nat = \"5s\"\ndo = \"sever\"\nclient = \"alice\"\n[[step]]\nat = \"10s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 2\n",
        "guarded",
    );
    let ev: Vec<_> = run.trace.iter().collect();
    let dropped_at = ev
        .iter()
        .find(
            |e| matches!(&e.what, What::MappingDropped { client, fault, .. } if client == "alice" && fault == "sever"),
        )
        .unwrap()
        .t_us;
    assert_eq!(dropped_at, secs(5.0), "the step fires at its exact time");
    // The server's writes went into the dropped mapping and were recorded there.
    let ids: Vec<String> = ev
        .iter()
        .filter_map(|e| match &e.what {
            What::DroppedWrite { client, events, .. } if client == "alice" => {
                Some(events.iter().filter_map(|x| x.id.clone()).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(ids, ["2", "3"]);
    // Nothing reached alice until she noticed the silence (heartbeat_timeout = 2.5 x 15 s).
    let silent = ev
        .iter()
        .find(|e| matches!(&e.what, What::UplinkSilent { client, .. } if client == "alice"))
        .expect("alice notices");
    assert!(silent.t_us > secs(37.5) && silent.t_us < secs(38.0), "{}", silent.t_us);
    // She resumed from the last id she saw and got the missed events.
    assert!(ev.iter().any(
        |e| matches!(&e.what, What::HttpRequest { client, last_event_id: Some(l), .. } if client == "alice" && l == "1")
    ));
    let replayed: Vec<&str> = ev
        .iter()
        .filter_map(|e| match &e.what {
            What::SseEvent { client, id: Some(id), .. } if client == "alice" && e.t_us > silent.t_us => {
                Some(id.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(replayed, ["2", "3"]);
    // The NAT reset the half-open mapping after half_open_lifetime.
    let reset = ev.iter().find(|e| matches!(&e.what, What::MappingReset { client, why, .. } if client == "alice" && why.starts_with("keepalive"))).unwrap();
    assert_eq!(reset.t_us.as_duration() - dropped_at.as_duration(), Duration::from_secs(90));
    // bob was untouched.
    assert!(!ev.iter().any(|e| matches!(&e.what, What::MappingDropped { client, .. } if client == "bob")));
}

#[test]
fn reset_ends_the_uplink_at_once_and_the_client_resumes() {
    let run = run("[[step]]\nat = \"6s\"\ndo = \"reset\"\nclient = \"bob\"\n", "guarded");
    let ev: Vec<_> = run.trace.iter().collect();
    let ended = ev
        .iter()
        .find(
            |e| matches!(&e.what, What::UplinkEnded { client, conn: mcpsim::trace::ConnId(1), .. } if client == "bob"),
        )
        .expect("bob sees the reset");
    assert!(ended.t_us < secs(6.1), "seen within a hop: {}", ended.t_us);
    assert!(ev
        .iter()
        .any(|e| matches!(&e.what, What::HttpRequest { client, last_event_id: Some(_), .. } if client == "bob")));
    assert!(ev
        .iter()
        .any(|e| e.t_us > ended.t_us
            && matches!(&e.what, What::HttpResponse { client, status: 200, .. } if client == "bob")));
}

#[test]
fn a_crashed_client_forgets_its_session_and_reconnects_fresh() {
    let run = run("[[step]]\nat = \"20s\"\ndo = \"crash-client\"\nclient = \"bob\"\n[[step]]\nat = \"60s\"\ndo = \"connect\"\nclient = \"bob\"\n", "guarded");
    let tokens: Vec<(SimTime, String)> = run
        .trace
        .iter()
        .filter_map(|e| match &e.what {
            What::SessionToken { client, token, .. } if client == "bob" => Some((e.t_us, token.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0].1, tokens[1].1);
    assert!(tokens[1].0 > secs(60.0));
    assert!(run.trace.iter().any(|e| matches!(&e.what, What::ClientCrashed { client } if client == "bob")));
}

#[test]
fn after_a_rebind_the_next_connection_gets_a_new_upstream_port() {
    let run = run("[[step]]\nat = \"5s\"\ndo = \"rebind\"\nclient = \"alice\"\n[[step]]\nat = \"8s\"\ndo = \"resume\"\nclient = \"alice\"\n", "naive");
    let mut ports = std::collections::BTreeMap::new();
    let mut dropped = Vec::new();
    let mut after = None;
    for e in run.trace.iter() {
        match &e.what {
            What::MappingOpened { client, mapping, up_port, .. } if client == "alice" => {
                ports.insert(*mapping, *up_port);
                if !dropped.is_empty() && after.is_none() {
                    after = Some(*up_port);
                }
            }
            What::MappingDropped { client, mapping, .. } if client == "alice" => dropped.push(ports[mapping]),
            _ => {}
        }
    }
    let after = after.expect("alice connected again");
    assert!(!dropped.contains(&after), "new upstream port {after}, dropped {dropped:?}");
}

#[test]
fn answer_step_answers_a_request_now_when_auto_answer_is_off() {
    let toml = BASE.replace("[[client]]\nname = \"bob\"", "[[client]]\nname = \"bob\"\nauto_answer = false")
        + "[[step]]\nat = \"2s\"\ndo = \"server-request\"\nclient = \"bob\"\nmethod = \"roots/list\"\nlabel = \"r1\"\n[[step]]\nat = \"9s\"\ndo = \"answer\"\nclient = \"bob\"\nlabel = \"r1\"\n";
    let plan = Plan::from_toml_str(&toml, "answer.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let answer = run
        .trace
        .iter()
        .find(|e| matches!(&e.what, What::Answer { client, .. } if client == "bob"))
        .expect("bob answers");
    // Recorded when the server acknowledged the POST, one round trip after 9 s.
    assert!(answer.t_us > secs(9.0) && answer.t_us < secs(9.2), "{}", answer.t_us);
    assert!(matches!(&answer.what, What::Answer { status: Some(202), .. }));
    assert!(run.trace.iter().any(|e| matches!(&e.what, What::RequestOutcome { label, outcome: mcpsim::trace::Outcome::Answered, .. } if label == "r1")));
}

#[test]
fn guarded_reissues_a_request_in_flight_at_resume_and_tombstones_the_old_id() {
    let toml = BASE.replace("[[client]]\nname = \"alice\"", "[[client]]\nname = \"alice\"\nauto_answer = false")
        + "[[step]]\nat = \"2s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"elicitation/create\"\nlabel = \"e1\"\n\
           [[step]]\nat = \"4s\"\ndo = \"sever\"\nclient = \"alice\"\n\
           [[step]]\nat = \"6s\"\ndo = \"resume\"\nclient = \"alice\"\n\
           [[step]]\nat = \"9s\"\ndo = \"answer\"\nclient = \"alice\"\nlabel = \"e1\"\n";
    let plan = Plan::from_toml_str(&toml, "reissue.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let outcomes: Vec<(mcpsim::trace::Outcome, String, Option<String>)> = run
        .trace
        .iter()
        .filter_map(|e| match &e.what {
            What::RequestOutcome { label, outcome, id, new_id, .. } if label == "e1" => {
                Some((*outcome, id.to_string(), new_id.as_ref().map(|i| i.to_string())))
            }
            _ => None,
        })
        .collect();
    use mcpsim::trace::Outcome::*;
    assert_eq!(
        outcomes,
        vec![(Reissued, "e1".into(), Some("e1.r1".into())), (Answered, "e1.r1".into(), None)],
        "re-issued under a fresh id, then answered under it"
    );
    // The client saw both ids (the old one on the first uplink) and answered both;
    // the answer to the tombstoned id was not applied (one Answered outcome only).
    let answered: Vec<String> = run
        .trace
        .iter()
        .filter_map(|e| match &e.what {
            What::Answer { client, id, .. } if client == "alice" => Some(id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["e1", "e1.r1"]);
}

#[test]
fn naive_leaves_the_same_request_in_flight() {
    let toml = BASE.replace("[[client]]\nname = \"alice\"", "[[client]]\nname = \"alice\"\nauto_answer = false")
        + "[[step]]\nat = \"2s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"elicitation/create\"\nlabel = \"e1\"\n\
           [[step]]\nat = \"4s\"\ndo = \"sever\"\nclient = \"alice\"\n\
           [[step]]\nat = \"6s\"\ndo = \"resume\"\nclient = \"alice\"\n";
    let plan = Plan::from_toml_str(&toml, "orphan.toml").unwrap();
    let run = mcpsim::run(&plan, "naive", None).unwrap();
    assert!(!run.trace.iter().any(|e| matches!(&e.what, What::RequestOutcome { label, .. } if label == "e1")));
}

#[test]
fn guarded_rejects_an_evicted_id_explicitly_kills_the_token_and_the_client_reinitializes() {
    let toml = BASE.replace("first_event_id = 1", "first_event_id = 1\nretention = 4")
        + "[[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 10\n\
           [[step]]\nat = \"4s\"\ndo = \"steal-token\"\nfrom = \"alice\"\nto = \"bob\"\ncredential = true\n\
           [[step]]\nat = \"5s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = 2\n\
           [[step]]\nat = \"8s\"\ndo = \"resume\"\nclient = \"bob\"\nlast_event_id = 11\n";
    let plan = Plan::from_toml_str(&toml, "evicted.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let ev: Vec<_> = run.trace.iter().collect();
    let rejected = ev
        .iter()
        .find(|e| matches!(&e.what, What::Rejected { client, how, .. } if client == "alice" && *how == mcpsim::trace::Refused::ErrorEvent))
        .expect("explicit error event");
    let error_event = ev.iter().any(|e| matches!(&e.what, What::SseEvent { client, event, data, .. } if client == "alice" && event == "error" && data.contains("older than the retained window")));
    assert!(error_event, "the error event says why");
    assert!(ev
        .iter()
        .any(|e| e.t_us >= rejected.t_us && matches!(&e.what, What::Reinitialize { client, .. } if client == "alice")));
    let tokens: Vec<&String> = ev
        .iter()
        .filter_map(|e| match &e.what {
            What::SessionToken { client, token, .. } if client == "alice" => Some(token),
            _ => None,
        })
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0], tokens[1]);
    // The old token is dead: even with alice's credential and a valid id, bob gets 404.
    assert!(ev
        .iter()
        .any(|e| matches!(&e.what, What::Rejected { client, how, .. } if client == "bob" && *how == mcpsim::trace::Refused::Status(404))));
    // Naive replays what it still has instead (a silent truncation).
    let naive = mcpsim::run(&plan, "naive", None).unwrap();
    assert!(!naive.trace.iter().any(|e| matches!(&e.what, What::Rejected { .. })));
}

/// The steps of a run that acted on nothing, as the trace records them.
fn missed(run: &Run) -> Vec<(usize, String)> {
    run.trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::StepMissed { index, why, .. } => Some((*index, why.clone())),
            _ => None,
        })
        .collect()
}

/// A fault that hits nothing says so, and a run with `[expect]` is then not
/// met, unless the step says it may miss: a pass must prove itself.
#[test]
fn a_fault_that_hits_nothing_is_recorded_and_fails_expect_unless_it_may_miss() {
    // Alice's uplink is severed before her NAT has any mapping (her
    // connect is at 0 s; the NAT opens its mapping a hop later), then
    // severed again once it is open.
    let steps = |may: &str| {
        format!(
            "[[step]]\nat = \"0s\"\ndo = \"rebind\"\nclient = \"bob\"\n{may}\n\
             [[step]]\nat = \"5s\"\ndo = \"sever\"\nclient = \"alice\"\n\
             [expect]\nguarded = []\n"
        )
    };
    let plan = Plan::from_toml_str(&format!("{BASE}{}", steps("")), "faults.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let misses = missed(&run);
    assert_eq!(misses.len(), 1, "{misses:?}");
    assert_eq!(misses[0].0, 2, "the rebind at 0 s: {misses:?}");
    assert!(misses[0].1.contains("no connection open"), "{misses:?}");
    // The sever that landed is tied to its step: the mapping it dropped names it.
    assert!(run.trace.events.iter().any(|e| matches!(&e.what, What::MappingDropped { step: Some(3), .. })));
    let verdicts = mcpsim::check::judge(&run.trace);
    let e = mcpsim::check::expectation(&plan, "guarded", &verdicts, &run.trace).unwrap();
    assert!(!e.met, "a miss is not a pass: {e:?}");
    assert_eq!(e.missed.len(), 1, "{e:?}");
    let report = mcpsim::report::text(&run, &verdicts, Some(&e));
    assert!(report.contains("MISSED: step 2 (rebind) at 0.000 s acted on nothing"), "{report}");
    assert!(report.contains("EXPECTATION NOT MET: 1 step(s) acted on nothing"), "{report}");
    // JSON carries it too.
    let json =
        mcpsim::report::json(&[mcpsim::report::Judged { run: &run, verdicts: &verdicts, expectation: Some(&e) }]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["runs"][0]["missed_steps"][0]["step"], 2, "{json}");
    assert_eq!(v["runs"][0]["expectation"]["met"], false, "{json}");

    // The same step allowed to miss: the run is met, and the miss still shows.
    let plan = Plan::from_toml_str(&format!("{BASE}{}", steps("may_miss = true")), "faults.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    assert_eq!(missed(&run).len(), 1);
    let verdicts = mcpsim::check::judge(&run.trace);
    let e = mcpsim::check::expectation(&plan, "guarded", &verdicts, &run.trace).unwrap();
    assert!(e.met, "{e:?}");
    assert!(mcpsim::report::text(&run, &verdicts, Some(&e)).contains("MISSED: step 2"));
    // And it survives a write and a reload.
    assert!(Plan::from_toml_str(&plan.to_toml(&[]), "again.toml").unwrap().steps[2].may_miss);
}

/// A step whose client cannot carry it out acts on nothing: a resume with
/// no id to resume from, a step for a crashed client, a crash of a client
/// already down.
#[test]
fn steps_a_client_cannot_carry_out_are_misses() {
    let run = run(
        "[[step]]\nat = \"1s\"\ndo = \"resume\"\nclient = \"bob\"\nlast_event_id = { seen_by = \"alice\", nth = 40 }\n\
         [[step]]\nat = \"2s\"\ndo = \"crash-client\"\nclient = \"alice\"\n\
         [[step]]\nat = \"3s\"\ndo = \"crash-client\"\nclient = \"alice\"\n\
         [[step]]\nat = \"4s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = \"last-seen\"\n",
        "guarded",
    );
    let misses = missed(&run);
    let indexes: Vec<usize> = misses.iter().map(|m| m.0).collect();
    assert_eq!(indexes, [2, 4, 5], "{misses:?}");
    assert!(misses[0].1.contains("no id to resume from"), "{misses:?}");
    assert!(misses[1].1.contains("alice has crashed"), "{misses:?}");
    assert!(misses[2].1.contains("alice has crashed"), "{misses:?}");
}
