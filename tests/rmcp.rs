//! The official Rust SDK (rmcp) under test: it completes the handshake and
//! resumes both kinds of stream inside the simulation, deterministically,
//! with session ids from the seed and keep-alive on simulated time.

use mcpsim::check;
use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::trace::{Outcome, Purpose, What};
use mcpsim::wire::jsonrpc::RpcKind;
use mcpsim::Run;
use std::path::Path;

fn run(file: &str, seed: Option<u64>) -> Run {
    let plan = Plan::load(Path::new(file)).expect("bundled scenario loads");
    mcpsim::run(&plan, "rmcp", seed.map(Seed)).expect("run completes")
}

fn whats(run: &Run) -> Vec<&What> {
    run.trace.events.iter().map(|e| &e.what).collect()
}

fn token(run: &Run) -> String {
    whats(run)
        .iter()
        .find_map(|x| match x {
            What::SessionToken { token, .. } => Some(token.clone()),
            _ => None,
        })
        .expect("rmcp returned an Mcp-Session-Id")
}

fn answered(run: &Run, label: &str) -> bool {
    whats(run)
        .iter()
        .any(|x| matches!(x, What::RequestOutcome { label: l, outcome: Outcome::Answered, .. } if l == label))
}

#[test]
fn rmcp_completes_the_handshake() {
    let r = run("scenarios/streamable-http/clean-resume.toml", None);
    let w = whats(&r);
    assert!(r.aborted.is_none());
    let t = token(&r);
    assert_eq!(t.len(), 36, "a UUID-shaped session id: {t}");
    // initialize answered 200, notifications/initialized accepted 202, the standalone GET streams.
    let statuses: Vec<(u16, bool)> = w
        .iter()
        .filter_map(|x| match x {
            What::HttpResponse { status, content_type, .. } => {
                Some((*status, content_type.as_deref().is_some_and(|c| c.starts_with("text/event-stream"))))
            }
            _ => None,
        })
        .collect();
    assert_eq!(&statuses[..3], [(200, true), (202, false), (200, true)]);
    // The session works: a standalone server request reaches alice and is answered.
    assert!(answered(&r, "req-1"));
}

#[test]
fn rmcp_resumes_the_standalone_stream() {
    let r = run("scenarios/streamable-http/clean-resume.toml", None);
    let w = whats(&r);
    // After the reset, alice GETs with Last-Event-ID and rmcp accepts.
    let resumed = w
        .iter()
        .find_map(|x| match x {
            What::HttpRequest { conn, method, last_event_id: Some(_), .. } if method == "GET" => Some(*conn),
            _ => None,
        })
        .expect("a resumption");
    assert!(w.iter().any(|x| matches!(x, What::HttpResponse { conn, status: 200, .. } if *conn == resumed)));
    // Later notifications and the standalone request arrive on the resumed stream.
    let kinds: Vec<RpcKind> = w
        .iter()
        .filter_map(|x| match x {
            What::SseEvent { conn, rpc: Some(r), .. } if *conn == resumed => Some(r.kind),
            _ => None,
        })
        .collect();
    assert!(kinds.iter().filter(|k| **k == RpcKind::Notification).count() >= 2, "{kinds:?}");
    assert!(kinds.contains(&RpcKind::Request));
    assert!(answered(&r, "req-1"));
    // Only rmcp's id findings (README: duplicate ids, the Last-Event-ID event sent again).
    assert_eq!(check::violated(&check::judge(&r.trace)), ["stream-order"]);
}

#[test]
fn rmcp_resumes_a_tool_calls_post_stream() {
    let r = run("scenarios/streamable-http/call-stream-reset.toml", None);
    let w = whats(&r);
    let calls: Vec<mcpsim::trace::ConnId> = w
        .iter()
        .filter_map(|x| match x {
            What::Connect { conn, purpose: Purpose::Call, .. } => Some(*conn),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "the tools/call POST and the GET that resumed its stream");
    let get = calls[1];
    let last = w
        .iter()
        .find_map(|x| match x {
            What::HttpRequest { conn, last_event_id, .. } if *conn == get => last_event_id.clone(),
            _ => None,
        })
        .expect("the GET presents the last id of the POST stream");
    assert!(last.contains('/'), "rmcp names a POST stream's events index/stream: {last}");
    // The pending request is replayed there, and the tool result follows once answered.
    let kinds: Vec<RpcKind> = w
        .iter()
        .filter_map(|x| match x {
            What::SseEvent { conn, rpc: Some(r), .. } if *conn == get => Some(r.kind),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [RpcKind::Request, RpcKind::Response]);
    assert!(answered(&r, "call-1"));
    assert_eq!(check::violated(&check::judge(&r.trace)), ["stream-order"]);
}

#[test]
fn rmcp_runs_are_deterministic_and_session_ids_come_from_the_seed() {
    let file = "scenarios/streamable-http/nat-rebind.toml";
    let a = run(file, Some(5));
    let b = run(file, Some(5));
    assert_eq!(a.trace.to_jsonl(), b.trace.to_jsonl());
    let c = run(file, Some(6));
    assert_ne!(token(&a), token(&c));
}

#[test]
fn rmcp_keep_alive_runs_on_simulated_time() {
    // rmcp's own keep-alive re-arms on the wall clock and floods a stream under
    // virtual time; ours pings once per [server] heartbeat (15 s) of silence.
    let r = run("scenarios/streamable-http/nat-rebind.toml", None);
    let pings: Vec<u64> = r
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::DroppedWrite { events, .. } if events.is_empty() => Some(e.t_us.0),
            _ => None,
        })
        .collect();
    assert!(pings.len() >= 3, "heartbeats reach the half-open mapping: {pings:?}");
    assert!(pings.windows(2).all(|p| p[1] - p[0] >= 15_000_000), "{pings:?}");
}

#[test]
fn rmcp_refuses_legacy_sse_scenarios_with_a_clear_error() {
    let plan = Plan::load(Path::new("scenarios/nat-rebind.toml")).unwrap();
    let err = mcpsim::run(&plan, "rmcp", None).unwrap_err().to_string();
    assert!(err.contains("speaks only dialect \"streamable-http\""), "{err}");
}

#[test]
fn rmcp_issues_sampling_roots_and_elicitation_related_to_a_tool_call_and_standalone() {
    let text = std::fs::read_to_string("scenarios/streamable-http/clean-resume.toml").unwrap();
    let head = &text[..text.find("[[step]]").unwrap()];
    let steps = r#"
[[step]]
at = "0s"
do = "connect"
client = "alice"
[[step]]
at = "2s"
do = "server-request"
client = "alice"
method = "elicitation/create"
label = "standalone-elicit"
[[step]]
at = "3s"
do = "server-request"
client = "alice"
method = "sampling/createMessage"
label = "standalone-sample"
[[step]]
at = "4s"
do = "call-tool"
client = "alice"
method = "elicitation/create"
label = "related-elicit"
[[step]]
at = "8s"
do = "call-tool"
client = "alice"
method = "roots/list"
label = "related-roots"
[[step]]
at = "12s"
do = "call-tool"
client = "alice"
method = "sampling/createMessage"
label = "related-sample"
"#;
    let plan = Plan::from_toml_str(&format!("{head}{steps}"), "kinds.toml").unwrap();
    let r = mcpsim::run(&plan, "rmcp", None).unwrap();
    for label in ["standalone-elicit", "standalone-sample", "related-elicit", "related-roots", "related-sample"] {
        assert!(answered(&r, label), "{label} answered");
    }
    // Related requests ride their tool call's POST stream, standalone ones the GET stream.
    let w = whats(&r);
    let purpose_of = |conn: mcpsim::trace::ConnId| {
        w.iter().find_map(|x| match x {
            What::Connect { client, conn: c, purpose, .. } if client == "alice" && *c == conn => Some(*purpose),
            _ => None,
        })
    };
    let methods_on = |p: Purpose| -> Vec<String> {
        w.iter()
            .filter_map(|x| match x {
                What::SseEvent { conn, rpc: Some(rpc), .. }
                    if rpc.kind == RpcKind::Request && purpose_of(*conn) == Some(p) =>
                {
                    rpc.method.clone()
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(methods_on(Purpose::Uplink), ["elicitation/create", "sampling/createMessage"]);
    assert_eq!(methods_on(Purpose::Call), ["elicitation/create", "roots/list", "sampling/createMessage"]);
}

#[test]
fn a_session_id_alone_takes_over_a_live_tool_call_on_rmcp() {
    let r = run("scenarios/streamable-http/call-stream-takeover.toml", None);
    assert!(check::violated(&check::judge(&r.trace)).contains(&check::CheckId::Confidentiality));
    let w = whats(&r);
    // The thief answers alice's related request, and rmcp takes that answer.
    let mallory_answered =
        w.iter().position(|x| matches!(x, What::Answer { client, status: Some(202), .. } if client == "mallory"));
    let alice_answered = w.iter().position(|x| matches!(x, What::Answer { client, .. } if client == "alice"));
    assert!(mallory_answered.is_some(), "the thief answered");
    // alice answers too (a real client answers what it received, whatever
    // became of its stream), but only after rmcp took the thief's answer.
    assert!(alice_answered > mallory_answered, "the thief answered first: {mallory_answered:?}, {alice_answered:?}");
    assert!(answered(&r, "call-1"));
    // guarded refuses the thief (403) and alice's call completes with her own answer.
    let g = mcpsim::run(
        &Plan::load(Path::new("scenarios/streamable-http/call-stream-takeover.toml")).unwrap(),
        "guarded",
        None,
    )
    .unwrap();
    assert!(check::violated(&check::judge(&g.trace)).is_empty());
    assert!(g.trace.events.iter().any(|e| matches!(&e.what, What::Answer { client, .. } if client == "alice")));
}

/// Issue 26, item 14 (rmcp hunt seed 18, cut down): a `resume` step 38 ms
/// after the client learned its session aborted the uplink task while it
/// was still POSTing `notifications/initialized`, so rmcp never registered
/// the session ("rmcp has no initialized session") and r2 went nowhere. The
/// handshake now runs in a task of its own that a resume does not abort.
#[test]
fn a_resume_right_after_connect_does_not_cut_the_handshake() {
    let toml = r#"
[scenario]
name = "resume-right-after-connect"
dialect = "streamable-http"
seed = 18
duration = "30s"

[server]
request_timeout = "8s"

[network]
latency = { min = "5ms", max = "10ms" }
tick = "200ms"

[[client]]
name = "alice"
think_time = "1511ms"

[[step]]
at = "0s"
do = "connect"
client = "alice"

[[step]]
at = "1038ms"
do = "resume"
client = "alice"
last_event_id = "last-seen"

[[step]]
at = "1706ms"
do = "server-request"
client = "alice"
method = "roots/list"
label = "r2"
"#;
    let plan = Plan::from_toml_str(toml, "resume-right-after-connect.toml").unwrap();
    let r = mcpsim::run(&plan, "rmcp", None).unwrap();
    let errors: Vec<&String> = whats(&r)
        .into_iter()
        .filter_map(|w| match w {
            What::AppError { error, .. } => Some(error),
            _ => None,
        })
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(answered(&r, "r2"));
}
