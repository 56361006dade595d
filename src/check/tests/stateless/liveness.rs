//! `liveness` on hand-built stateless traces: calls, refusals, and listen streams.

use super::*;

#[test]
fn liveness_fires_on_a_call_given_up_and_not_on_one_still_running() {
    let base = || {
        Sb::new(60).client("alice").at(1_000).send("alice", 1, "c1", 1, Attempt::First, None).at(40_000).end(
            "alice",
            1,
            "c1",
            1,
            CallEnd::Lost { why: "silent".into() },
        )
    };
    let t = base()
        .push(What::CallAbandoned { client: "alice".into(), call: "c1".into(), why: "5 re-issues lost".into() })
        .trace();
    assert!(headlines(&t, CheckId::Liveness)[0]
        .contains("alice's call c1 never completed after 1 request(s): the client gave up"));
    let running = base().at(41_000).send("alice", 2, "c1", 2, Attempt::Reissue, None).trace();
    assert!(passed(&running, CheckId::Liveness));
    // Past the bound (300 s here), a call still under way is stuck.
    let stuck = Sb::new(400).client("alice").at(1_000).send("alice", 1, "c1", 1, Attempt::First, None).trace();
    assert!(headlines(&stuck, CheckId::Liveness)[0].contains("not completed within 300 s"));
    let done = base()
        .at(41_000)
        .send("alice", 2, "c1", 2, Attempt::Reissue, None)
        .end("alice", 2, "c1", 2, complete("alice"))
        .trace();
    assert!(passed(&done, CheckId::Liveness));
}

#[test]
fn liveness_fires_on_a_valid_state_refused_and_not_on_an_expired_one() {
    let retry = |at_ms: u64| {
        Sb::new(200)
            .client("alice")
            .at(1_000)
            .send("alice", 1, "c1", 1, Attempt::First, None)
            .minted("c1", 1, "alice", "fp1", 60, false)
            .end("alice", 1, "c1", 1, CallEnd::InputRequired { state: Some("fp1".into()), requests: Vec::new() })
            .at(at_ms)
            .send("alice", 2, "c1", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
            .end("alice", 2, "c1", 2, CallEnd::Error { code: -32602, message: "invalid requestState".into() })
            .trace()
    };
    assert!(
        headlines(&retry(30_000), CheckId::Liveness)[0].contains("its last request, valid, got JSON-RPC error -32602")
    );
    assert!(passed(&retry(90_000), CheckId::Liveness));
}

/// A one-time state presented by a request that went unanswered across a
/// server restart may have been redeemed before the process died (the store
/// outlives it): the later refusal of the client's retry is inherent. The
/// same refusal with no restart is the server's doing.
#[test]
fn a_one_time_state_spent_by_a_request_lost_to_a_restart_is_an_inherent_refusal() {
    let trace = |restart: bool| {
        let b = Sb::new(200)
            .client("alice")
            .tool("t", true, false)
            .at(1_000)
            .send("alice", 1, "c1", 1, Attempt::First, None)
            .minted("c1", 1, "alice", "fp1", 60, true)
            .end("alice", 1, "c1", 1, CallEnd::InputRequired { state: Some("fp1".into()), requests: Vec::new() })
            .at(2_000)
            .send("alice", 2, "c1", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
            .at(2_100);
        let b = if restart {
            b.push(What::Step {
                index: 0,
                action: crate::vocab::StepKind::RestartServer,
                detail: "the server restarts".into(),
                expect: None,
                call: None,
            })
        } else {
            b
        };
        b.at(2_500)
            .end("alice", 2, "c1", 2, CallEnd::Lost { why: "connection closed".into() })
            .at(3_000)
            .send("alice", 3, "c1", 3, Attempt::Reissue, state("fp1", StateHow::AsReceived))
            .checked("c1", 3, "alice", "fp1", StateVerdict::Refused { why: "already redeemed".into() })
            .end("alice", 3, "c1", 3, CallEnd::Error { code: -32602, message: "already redeemed".into() })
            .trace()
    };
    let with = trace(true);
    assert!(inherent_only(&with, CheckId::Liveness));
    assert!(headlines(&with, CheckId::Liveness)[0].contains("went unanswered across a server restart"));
    let without = trace(false);
    assert!(!inherent_only(&without, CheckId::Liveness));
    assert!(headlines(&without, CheckId::Liveness)[0].contains("its last request, valid, got JSON-RPC error -32602"));
}

/// alice listens (acknowledged at 1.1 s); the tool list changes at 20 s.
fn listening() -> Sb {
    Sb::new(60).client("alice").at(1_000).listen("alice", 1, 1).at(1_100).listen_event(
        "alice",
        1,
        crate::wire::mrtr::ACKNOWLEDGED,
    )
}

#[test]
fn liveness_fires_on_a_change_that_never_reached_an_open_listen_and_on_a_lock_out() {
    let changed = |b: Sb| b.at(20_000).push(What::ToolsChanged { n: 1, streams: 1 });
    let lost = changed(listening()).trace();
    assert!(headlines(&lost, CheckId::Liveness)[0].contains("tool-list change 1 at 20.000 s never reached alice"));
    let told = changed(listening()).at(20_050).listen_event("alice", 1, crate::wire::mrtr::TOOLS_CHANGED).trace();
    assert!(passed(&told, CheckId::Liveness));
    // Live, the report can reach the trace a moment after the notification reached the client.
    let reported_late = listening()
        .at(19_990)
        .listen_event("alice", 1, crate::wire::mrtr::TOOLS_CHANGED)
        .at(20_000)
        .push(What::ToolsChanged { n: 1, streams: 1 })
        .trace();
    assert!(passed(&reported_late, CheckId::Liveness));
    // A notification seconds before is another change's, not this one's.
    let earlier = listening()
        .at(15_000)
        .listen_event("alice", 1, crate::wire::mrtr::TOOLS_CHANGED)
        .at(20_000)
        .push(What::ToolsChanged { n: 1, streams: 1 })
        .trace();
    assert!(headlines(&earlier, CheckId::Liveness)[0].contains("tool-list change 1 at 20.000 s never reached alice"));
    // Written into a half-open stream: lost, and inherent.
    let half_open = changed(listening().at(10_000).dropped("alice", 1)).trace();
    assert!(inherent_only(&half_open, CheckId::Liveness));
    // A listen refused (409) twice in a row: one lock-out.
    let refused = |b: Sb, conn: u32, id: i64| {
        b.listen("alice", conn, id).end_listen("alice", conn, id, CallEnd::Status { status: 409 })
    };
    let locked = refused(refused(listening().at(10_000).dropped("alice", 1).at(40_000), 2, 2).at(42_000), 3, 3).trace();
    let h = headlines(&locked, CheckId::Liveness);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("alice's listen 2 was refused at 40.000 s (HTTP 409), and 1 listens after it until 42.000 s"));
}

/// Issue 49, item 7: a server that never accepted a listen and answers it
/// "method not found" (FastMCP, `tools.listChanged = false`) does not offer
/// the feature: no lock-out. A server that accepted one and then answers
/// -32601 to the next has locked the client out.
#[test]
fn a_listen_a_server_does_not_offer_is_not_a_lock_out() {
    let not_found = || CallEnd::Error { code: -32601, message: "Method not found".into() };
    let never = Sb::new(60)
        .client("alice")
        .at(1_000)
        .listen("alice", 1, 1)
        .end_listen("alice", 1, 1, not_found())
        .at(20_000)
        .listen("alice", 2, 2)
        .end_listen("alice", 2, 2, not_found())
        .trace();
    assert!(
        !matches!(verdict(&never, CheckId::Liveness), Status::Violated { .. }),
        "{:?}",
        verdict(&never, CheckId::Liveness)
    );
    let withdrawn = listening().at(10_000).dropped("alice", 1).at(40_000).listen("alice", 2, 2);
    let withdrawn = withdrawn.end_listen("alice", 2, 2, not_found()).trace();
    let h = headlines(&withdrawn, CheckId::Liveness);
    assert!(h.len() == 1 && h[0].contains("alice's listen 2 was refused at 40.000 s (JSON-RPC error -32601"), "{h:?}");
}
