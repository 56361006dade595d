//! Protocol-aware triggers: a step may fire `after` an observable event
//! (a delivery, an answer, an accepted uplink, another step), with a delay.

use mcpsim::scenario::Plan;
use mcpsim::trace::{Event, SimTime, What};
use mcpsim::wire::jsonrpc::RpcId;

const HEAD: &str = "[scenario]\nname = \"t\"\nduration = \"60s\"\n[server]\nfirst_event_id = 1000\nrequest_timeout = \"20s\"\n[[client]]\nname = \"alice\"\n[[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n";

fn run(steps: &str) -> Vec<Event> {
    let plan = Plan::from_toml_str(&format!("{HEAD}{steps}"), "t.toml").unwrap();
    mcpsim::run(&plan, "guarded", None).unwrap().trace.events
}

fn step_time(events: &[Event], action: &str) -> SimTime {
    events.iter().find(|e| matches!(&e.what, What::Step { action: a, .. } if *a == action)).expect(action).t_us
}

/// The simulation tick of these plans: a trigger fires at its event (plus
/// delay), or at the next tick boundary if that instant already passed.
const TICK_US: u64 = 20_000;

#[test]
fn after_delivered_fires_right_after_the_delivery() {
    let ev = run("[[step]]\nat = \"2s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r\"\n\
                  [[step]]\nafter = { event = \"delivered\", label = \"r\", client = \"alice\" }\ndo = \"sever\"\nclient = \"alice\"\n");
    let delivered = ev
        .iter()
        .find(|e| matches!(&e.what, What::SseEvent { rpc: Some(r), .. } if r.id == Some(RpcId::Str("r".into()))))
        .unwrap()
        .t_us;
    let cut = step_time(&ev, "sever");
    assert!(cut >= delivered && cut.0 - delivered.0 <= TICK_US, "delivered {delivered}, cut {cut}");
    let dropped = ev.iter().find(|e| matches!(&e.what, What::MappingDropped { .. })).unwrap().t_us;
    assert_eq!(dropped, cut);
}

#[test]
fn after_answered_with_a_delay() {
    let ev = run("[[step]]\nat = \"2s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r\"\n\
                  [[step]]\nafter = { event = \"answered\", label = \"r\" }\ndelay = \"500ms\"\ndo = \"notify\"\nclient = \"alice\"\n");
    let answered = ev.iter().find(|e| matches!(&e.what, What::RequestOutcome { .. })).unwrap().t_us;
    let notify = step_time(&ev, "notify");
    assert_eq!(notify.0, answered.0 + 500_000);
}

#[test]
fn after_accepted_waits_for_the_uplink_accepted_after_it_was_armed() {
    let ev = run("[[step]]\nat = \"2s\"\ndo = \"sever\"\nclient = \"alice\"\n\
                  [[step]]\nat = \"3s\"\ndo = \"resume\"\nclient = \"alice\"\n\
                  [[step]]\nafter = { event = \"accepted\", client = \"alice\" }\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r\"\n");
    let accepted: Vec<SimTime> = ev
        .iter()
        .filter(|e| matches!(&e.what, What::HttpResponse { status: 200, content_type: Some(_), .. }))
        .map(|e| e.t_us)
        .collect();
    assert_eq!(accepted.len(), 2, "the initial uplink and the resumed one");
    let issued = step_time(&ev, "server-request");
    assert!(issued >= accepted[1] && issued.0 - accepted[1].0 <= TICK_US, "not the first acceptance: {issued}");
}

#[test]
fn after_another_step_by_id() {
    let ev = run("[[step]]\nid = \"cut\"\nat = \"2s\"\ndo = \"rebind\"\nclient = \"alice\"\n\
                  [[step]]\nafter = { event = \"step\", step = \"cut\" }\ndelay = \"1500ms\"\ndo = \"resume\"\nclient = \"alice\"\n");
    assert_eq!(step_time(&ev, "resume").0, step_time(&ev, "rebind").0 + 1_500_000);
}

#[test]
fn triggered_runs_are_deterministic() {
    let plan = Plan::load("scenarios/rebind-on-delivery.toml".as_ref()).unwrap();
    let a = mcpsim::run(&plan, "naive", None).unwrap().trace.to_jsonl();
    let b = mcpsim::run(&plan, "naive", None).unwrap().trace.to_jsonl();
    assert_eq!(a, b);
    // ...and survive a round trip through to_toml.
    let back = Plan::from_toml_str(&plan.to_toml(&[]), "rt.toml").unwrap();
    assert_eq!(back.steps, plan.steps);
}

#[test]
fn trigger_errors_are_located() {
    let bad = |steps: &str| Plan::from_toml_str(&format!("{HEAD}{steps}"), "t.toml").unwrap_err().to_string();
    assert!(bad("[[step]]\nafter = { event = \"answered\", label = \"nope\" }\ndo = \"wait\"\n")
        .contains("trigger names label \"nope\""));
    assert!(bad("[[step]]\nat = \"1s\"\nafter = { event = \"step\", step = \"x\" }\ndo = \"wait\"\n")
        .contains("either `at` or `after`, not both"));
    assert!(bad("[[step]]\ndo = \"wait\"\n").contains("needs `at` (a time) or `after` (an event)"));
    assert!(bad("[[step]]\nafter = { event = \"step\", step = \"cutt\" }\ndo = \"wait\"\n")
        .contains("not the id of an earlier step"));
    assert!(bad("[[step]]\nafter = { event = \"acepted\", client = \"alice\" }\ndo = \"wait\"\n")
        .contains("unknown variant `acepted`"));
    assert!(bad("[[step]]\nat = \"1s\"\ndelay = \"1s\"\ndo = \"wait\"\n").contains("`delay` goes with `after`"));
}
