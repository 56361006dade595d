//! The streamable-http dialect (MCP 2025-11-25), reference engine and client:
//! one endpoint, Mcp-Session-Id, priming events, tool-call streams resumed by
//! GET with Last-Event-ID, 404 for a dead session, DELETE.

use mcpsim::check;
use mcpsim::scenario::{Dialect, Plan};
use mcpsim::trace::{Purpose, What};
use mcpsim::Run;
use std::path::Path;

fn run(file: &str, server: &str) -> Run {
    let plan = Plan::load(Path::new(file)).expect("bundled scenario loads");
    assert_eq!(plan.dialect, Dialect::StreamableHttp);
    mcpsim::run(&plan, server, None).expect("run completes")
}

fn whats(run: &Run) -> Vec<&What> {
    run.trace.events.iter().map(|e| &e.what).collect()
}

#[test]
fn session_opens_by_post_and_every_stream_starts_with_a_priming_event() {
    let r = run("scenarios/streamable-http/clean-resume.toml", "guarded");
    let w = whats(&r);
    // initialize: POST /mcp without a session, answered 200 with the session id.
    let Some(What::HttpRequest { conn: init, method, path, session: None, .. }) =
        w.iter().find(|x| matches!(x, What::HttpRequest { .. }))
    else {
        panic!("the first request is a POST without a session")
    };
    assert_eq!((method.as_str(), path.as_str()), ("POST", "/mcp"));
    assert!(w.iter().any(|x| matches!(x, What::HttpResponse { conn, status: 200, .. } if conn == init)));
    let token = w
        .iter()
        .find_map(|x| match x {
            What::SessionToken { conn, token, .. } if conn == init => Some(token.clone()),
            _ => None,
        })
        .expect("the Mcp-Session-Id header is kept");
    // Every later request presents it on the same endpoint.
    let later: Vec<_> = w
        .iter()
        .filter_map(|x| match x {
            What::HttpRequest { conn, path, session, .. } if conn != init => Some((path, session)),
            _ => None,
        })
        .collect();
    assert!(later.len() >= 4);
    assert!(later.iter().all(|(p, s)| p.as_str() == "/mcp" && s.as_deref() == Some(token.as_str())));
    // notifications/initialized is accepted with 202.
    assert!(w.iter().any(|x| matches!(x, What::HttpResponse { status: 202, .. })));
    // Every stream's first event is a priming event: an id and empty data.
    let mut first_on_conn = std::collections::BTreeMap::new();
    for x in &w {
        if let What::SseEvent { conn, id, data, rpc, .. } = x {
            first_on_conn.entry(*conn).or_insert((id.clone(), data.clone(), rpc.is_none()));
        }
    }
    assert!(first_on_conn.len() >= 2, "the standalone stream and the tool call's stream");
    let resumed: Vec<mcpsim::trace::ConnId> = w
        .iter()
        .filter_map(|x| match x {
            What::HttpRequest { conn, last_event_id: Some(_), .. } => Some(*conn),
            _ => None,
        })
        .collect();
    for (conn, (id, data, no_msg)) in first_on_conn {
        if resumed.contains(&conn) {
            continue; // a resumed stream starts with its replay
        }
        assert!(id.is_some() && data.is_empty() && no_msg, "conn {conn} starts with a priming event");
    }
    // The resumption went by GET with Last-Event-ID and was accepted.
    assert!(w.iter().any(|x| matches!(x, What::HttpRequest { method, last_event_id: Some(_), .. } if method == "GET")));
    assert!(check::violated(&check::judge(&r.trace)).is_empty());
}

#[test]
fn a_tool_calls_stream_is_resumed_by_get_and_delivers_the_result() {
    let r = run("scenarios/streamable-http/call-stream-reset.toml", "guarded");
    let w = whats(&r);
    let call_conns: Vec<mcpsim::trace::ConnId> = w
        .iter()
        .filter_map(|x| match x {
            What::Connect { conn, purpose: Purpose::Call, .. } => Some(*conn),
            _ => None,
        })
        .collect();
    assert_eq!(call_conns.len(), 2, "the POST and the GET that resumed it");
    let resumed = call_conns[1];
    assert!(w.iter().any(|x| matches!(x,
        What::HttpRequest { conn, method, last_event_id: Some(_), .. } if *conn == resumed && method == "GET")));
    // The re-issued request and then the tool result (the response to tools/call) arrive on it.
    let on_resumed: Vec<_> = w
        .iter()
        .filter_map(|x| match x {
            What::SseEvent { conn, rpc: Some(rpc), .. } if *conn == resumed => Some(rpc.kind),
            _ => None,
        })
        .collect();
    use mcpsim::wire::jsonrpc::RpcKind;
    assert_eq!(on_resumed, [RpcKind::Request, RpcKind::Response]);
    assert!(w.iter().any(|x| matches!(x,
        What::RequestOutcome { label, outcome: mcpsim::trace::Outcome::Answered, .. } if label == "call-1")));
    assert!(check::violated(&check::judge(&r.trace)).is_empty());
}

#[test]
fn a_deleted_session_answers_404_and_the_client_reinitializes() {
    let r = run("scenarios/streamable-http/deleted-session.toml", "guarded");
    let w = whats(&r);
    let delete = w
        .iter()
        .find_map(|x| match x {
            What::HttpRequest { conn, method, client, .. } if method == "DELETE" && client == "alice" => Some(*conn),
            _ => None,
        })
        .expect("alice sent DELETE");
    assert!(w.iter().any(
        |x| matches!(x, What::HttpResponse { conn, status: 200, client, .. } if *conn == delete && client == "alice")
    ));
    assert!(w.iter().any(|x| matches!(x, What::HttpResponse { status: 404, client, .. } if client == "mallory")));
    assert!(w.iter().any(|x| matches!(x, What::Reinitialize { client, .. } if client == "mallory")));
    // Nothing of alice's reached mallory.
    let verdicts = check::judge(&r.trace);
    assert!(check::violated(&verdicts).is_empty());
}

#[test]
fn steps_that_need_streamable_http_are_refused_in_legacy_sse() {
    let text = "[scenario]\nname = \"x\"\nduration = \"10s\"\n[[client]]\nname = \"a\"\n[[step]]\nat = \"0s\"\ndo = \"call-tool\"\nclient = \"a\"\nmethod = \"roots/list\"\nlabel = \"c\"\n";
    let err = Plan::from_toml_str(text, "x.toml").unwrap_err().to_string();
    assert!(err.contains("needs dialect = \"streamable-http\""), "{err}");
}

#[test]
fn every_bundled_legacy_scenario_has_a_streamable_twin() {
    for entry in std::fs::read_dir("scenarios").unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let twin = Path::new("scenarios/streamable-http").join(p.file_name().unwrap());
            let plan = Plan::load(&twin).unwrap_or_else(|e| panic!("{} has no twin: {e}", p.display()));
            assert_eq!(plan.dialect, Dialect::StreamableHttp);
        }
    }
}

/// Raw HTTP against the reference engine's one endpoint: status codes of the
/// 2025-11-25 transport for requests the well-behaved client never sends.
#[test]
fn the_endpoint_answers_bad_requests_with_the_transports_status_codes() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::TokioIo;
    use mcpsim::server::{AppHook, AppReporter};
    use std::rc::Rc;
    use std::sync::{Arc, Mutex};

    let mut sim = turmoil::Builder::new().build();
    let plug = mcpsim::server::builtin(
        "guarded",
        &mcpsim::scenario::ServerConfig::default(),
        Dialect::StreamableHttp,
        mcpsim::seed::Seed(1),
    )
    .unwrap();
    let app = AppHook::new(mcpsim::server::Inbox::new(), AppReporter::detached());
    sim.host("server", move || {
        let (plug, app) = (Rc::clone(&plug), app.clone());
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 80)).await?.into();
            plug.serve(listener, app).await;
            Ok(())
        }
    });
    let seen: Arc<Mutex<Vec<(String, u16)>>> = Arc::default();
    let out = seen.clone();
    sim.client("probe", async move {
        let send = |method: &'static str, headers: Vec<(&'static str, String)>, body: &'static str| async move {
            let s = turmoil::net::TcpStream::connect(("server", 80)).await.unwrap();
            let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s)).await.unwrap();
            tokio::task::spawn_local(conn);
            let mut req = hyper::Request::builder().method(method).uri("/mcp").header("host", "server");
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let resp = tx.send_request(req.body(Full::new(Bytes::from(body))).unwrap()).await.unwrap();
            let session = resp.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
            let status = resp.status().as_u16();
            if !method.eq("GET") {
                let _ = resp.into_body().collect().await;
            }
            (status, session)
        };
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
        let (s, token) = send("POST", vec![("authorization", "Bearer alice".into())], init).await;
        let token = token.expect("initialize returns Mcp-Session-Id");
        let record = |what: &str, s: u16| out.lock().unwrap().push((what.to_string(), s));
        record("initialize", s);
        let (s, _) = send("POST", vec![], ping).await;
        record("request without a session", s);
        let (s, _) = send("POST", vec![("mcp-session-id", "tok-nope".into())], ping).await;
        record("unknown session", s);
        let auth = ("authorization", "Bearer alice".to_string());
        let (s, _) = send(
            "POST",
            vec![auth.clone(), ("mcp-session-id", token.clone()), ("mcp-protocol-version", "1999-01-01".into())],
            ping,
        )
        .await;
        record("unsupported protocol version", s);
        let (s, _) = send("POST", vec![auth.clone(), ("mcp-session-id", token.clone())], ping).await;
        record("ping", s);
        let (s, _) =
            send("POST", vec![("authorization", "Bearer mallory".into()), ("mcp-session-id", token.clone())], ping)
                .await;
        record("someone else's session", s);
        let (s, _) = send("PUT", vec![("mcp-session-id", token.clone())], "").await;
        record("PUT", s);
        let (s, _) = send("DELETE", vec![auth.clone(), ("mcp-session-id", token.clone())], "").await;
        record("DELETE", s);
        let (s, _) = send("POST", vec![auth, ("mcp-session-id", token)], ping).await;
        record("after DELETE", s);
        Ok(())
    });
    sim.run().unwrap();
    let seen = seen.lock().unwrap().clone();
    let expect = [
        ("initialize", 200),
        ("request without a session", 400),
        ("unknown session", 404),
        ("unsupported protocol version", 400),
        ("ping", 200),
        ("someone else's session", 403),
        ("PUT", 405),
        ("DELETE", 200),
        ("after DELETE", 404),
    ];
    let expect: Vec<(String, u16)> = expect.iter().map(|(w, s)| (w.to_string(), *s)).collect();
    assert_eq!(seen, expect);
}

#[test]
fn the_trace_header_names_the_dialect() {
    let r = run("scenarios/streamable-http/clean-resume.toml", "guarded");
    assert!(matches!(&r.trace.events[0].what, What::RunStarted { dialect: Dialect::StreamableHttp, .. }));
    let legacy = mcpsim::run(&Plan::load(Path::new("scenarios/clean-resume.toml")).unwrap(), "guarded", None).unwrap();
    assert!(matches!(&legacy.trace.events[0].what, What::RunStarted { dialect: Dialect::LegacySse, .. }));
    let first = legacy.trace.to_jsonl().lines().next().unwrap().to_string();
    assert!(first.contains(r#""server":"guarded","dialect":"legacy-sse","seed":"#), "{first}");
}
