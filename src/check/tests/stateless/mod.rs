//! The stateless-http checks on hand-built traces: for each, a trace that
//! makes it fire and the smallest change that keeps it quiet.

use super::{headlines, passed, verdict};
use crate::check::{CheckId, Status};
use crate::trace::stateless::{Attempt, CallEnd, ExecStep, Presented, StateHow, StateVerdict};
use crate::trace::{ConnId, Event, MappingId, Purpose, SimTime, Trace, What};
use crate::wire::jsonrpc::RpcId;

/// A stateless trace under construction; times in ms. A client's
/// connection `n` goes out from port `40000 + n` through mapping `n`.
struct Sb {
    now_us: u64,
    events: Vec<(u64, What)>,
}

impl Sb {
    fn new(duration_s: u64) -> Sb {
        let started = What::RunStarted {
            scenario: "unit".into(),
            server: "unit".into(),
            dialect: crate::scenario::Dialect::StatelessHttp,
            seed: 0,
            duration_us: duration_s * 1_000_000,
            liveness_bound_us: 300_000_000,
            authenticates: true,
            unreported_per_stream: 0,
            retention: None,
            fence_grace_us: None,
        };
        Sb { now_us: 0, events: vec![(0, started)] }
    }

    fn at(mut self, ms: u64) -> Sb {
        self.now_us = ms * 1000;
        self
    }

    fn push(mut self, what: What) -> Sb {
        self.events.push((self.now_us, what));
        self
    }

    fn client(self, name: &str) -> Sb {
        self.push(What::ClientJoined {
            client: name.into(),
            principal: name.into(),
            heartbeat_timeout_us: 37_500_000,
            think_time_us: 1_000_000,
            max_backoff_us: 10_000_000,
        })
    }

    fn tool(self, name: &str, once: bool, idempotent: bool) -> Sb {
        self.push(What::ToolOffered { tool: name.into(), once, idempotent, input: Vec::new() })
    }

    /// `client` sends request `id` of `call` on conn `conn` (mapping `conn`).
    fn send(self, client: &str, conn: u32, call: &str, id: i64, attempt: Attempt, state: Option<Presented>) -> Sb {
        self.send_as(client, conn, call, id, attempt, state, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn send_as(
        self,
        client: &str,
        conn: u32,
        call: &str,
        id: i64,
        attempt: Attempt,
        state: Option<Presented>,
        credential: Option<&str>,
    ) -> Sb {
        let port = 40000 + conn as u16;
        self.push(What::Connect { client: client.into(), conn: ConnId(conn), port, purpose: Purpose::Call })
            .push(What::MappingOpened {
                client: client.into(),
                mapping: MappingId(conn),
                down_port: port,
                up_port: port,
            })
            .push(What::CallSent {
                client: client.into(),
                conn: ConnId(conn),
                call: call.into(),
                tool: "t".into(),
                id: RpcId::Num(id),
                attempt,
                state,
                credential: credential.map(String::from),
                answers: Vec::new(),
            })
    }

    fn end(self, client: &str, conn: u32, call: &str, id: i64, end: CallEnd) -> Sb {
        self.push(What::CallEnded {
            client: client.into(),
            conn: ConnId(conn),
            call: call.into(),
            id: RpcId::Num(id),
            end,
        })
    }

    fn exec(self, exec: u32, call: &str, id: i64, principal: &str, behalf: Option<&str>, step: ExecStep) -> Sb {
        self.push(What::Execution {
            exec,
            tool: "t".into(),
            call: call.into(),
            id: RpcId::Num(id),
            principal: principal.into(),
            on_behalf_of: behalf.map(String::from),
            step,
            inputs: Vec::new(),
            replica: None,
        })
    }

    fn reset(self, client: &str, mapping: u32) -> Sb {
        self.push(What::MappingReset {
            client: client.into(),
            mapping: MappingId(mapping),
            why: "reset".into(),
            step: None,
        })
    }

    fn dropped(self, client: &str, mapping: u32) -> Sb {
        self.push(What::MappingDropped {
            client: client.into(),
            mapping: MappingId(mapping),
            fault: "rebind".into(),
            step: None,
        })
    }

    fn minted(self, call: &str, id: i64, principal: &str, fp: &str, lifetime_s: u64, once: bool) -> Sb {
        self.push(What::StateMinted {
            call: call.into(),
            id: RpcId::Num(id),
            principal: principal.into(),
            fp: fp.into(),
            lifetime_us: Some(lifetime_s * 1_000_000),
            once,
            replica: None,
        })
    }

    fn checked(self, call: &str, id: i64, principal: &str, fp: &str, verdict: StateVerdict) -> Sb {
        self.push(What::StateChecked {
            call: call.into(),
            id: RpcId::Num(id),
            principal: principal.into(),
            fp: fp.into(),
            verdict,
            replica: None,
        })
    }

    fn trace(self) -> Trace {
        let events = self
            .events
            .into_iter()
            .enumerate()
            .map(|(i, (t, what))| Event { seq: i as u64, t_us: SimTime(t), what })
            .collect();
        Trace { events }
    }
}

fn complete(data_of: &str) -> CallEnd {
    CallEnd::Complete { is_error: false, data_of: Some(data_of.into()) }
}

fn state(fp: &str, how: StateHow) -> Option<Presented> {
    Some(Presented { fp: fp.into(), how, received_us: Some(1_000_000) })
}

fn inherent_only(trace: &Trace, id: CheckId) -> bool {
    match verdict(trace, id) {
        Status::Violated { violations } => violations.iter().all(|v| v.inherent),
        _ => false,
    }
}

/// alice's request 1 runs a 45 s tool; her NAT resets its stream at 20 s.
fn reset_mid_execution() -> Sb {
    Sb::new(120)
        .client("alice")
        .tool("t", false, false)
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .at(1_040)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(20_000)
        .reset("alice", 1)
}

#[test]
fn cancellation_fires_on_work_done_after_the_close_reached_the_server_and_not_on_a_prompt_stop() {
    let t = reset_mid_execution().at(46_000).exec(1, "c1", 1, "alice", None, ExecStep::Effect).trace();
    let h = headlines(&t, CheckId::Cancellation);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("did its side effect at 46.000 s, 26.0 s after its stream was reset at 20.000 s"), "{h:?}");
    let t = reset_mid_execution().at(20_020).exec(1, "c1", 1, "alice", None, ExecStep::Cancelled).trace();
    assert!(passed(&t, CheckId::Cancellation));
    // Within the grace a close takes to reach the work: no verdict against it.
    let t = reset_mid_execution().at(20_500).exec(1, "c1", 1, "alice", None, ExecStep::Effect).trace();
    assert!(passed(&t, CheckId::Cancellation));
}

#[test]
fn a_close_after_the_answer_or_before_the_start_is_judged_as_it_should_be() {
    // The client had its result at 10 s; its close at 20 s cancels nothing,
    // even when the application reports the completion late.
    let answered = Sb::new(120)
        .client("alice")
        .tool("t", false, false)
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(10_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Effect)
        .end("alice", 1, "c1", 1, complete("alice"))
        .at(20_000)
        .push(What::MappingClosed { client: "alice".into(), mapping: MappingId(1), by: "client".into() })
        .at(25_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Completed)
        .trace();
    assert!(!matches!(verdict(&answered, CheckId::Cancellation), Status::Violated { .. }));
    // A request whose stream was reset at 20 s, dequeued and started at 40 s.
    let late_start = Sb::new(120)
        .client("alice")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .at(20_000)
        .reset("alice", 1)
        .at(40_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .trace();
    assert!(headlines(&late_start, CheckId::Cancellation)[0]
        .contains("started at 40.000 s, 20.0 s after its stream was reset"));
}

#[test]
fn a_half_open_stream_is_reported_as_inherent() {
    let t = Sb::new(120)
        .client("alice")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(12_000)
        .dropped("alice", 1)
        .at(46_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Effect)
        .trace();
    assert!(inherent_only(&t, CheckId::Cancellation));
    assert!(headlines(&t, CheckId::Cancellation)[0].contains("ran to its side effect at 46.000 s (inherent"));
}

/// alice's call c1 took effect twice: request 1 (E1) and its re-issue 2 (E2).
fn two_effects(reset_first: bool, idempotent: bool) -> Trace {
    let mut b = Sb::new(200)
        .client("alice")
        .tool("t", false, idempotent)
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(12_000)
        .dropped("alice", 1)
        .at(50_000)
        .send("alice", 2, "c1", 2, Attempt::Reissue, None)
        .exec(2, "c1", 2, "alice", None, ExecStep::Started);
    if reset_first {
        b = b.at(102_000).reset("alice", 1);
    }
    b.at(121_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Effect)
        .at(170_000)
        .exec(2, "c1", 2, "alice", None, ExecStep::Effect)
        .trace()
}

#[test]
fn exactly_once_blames_a_duplicate_only_when_the_server_was_shown_the_cancellation() {
    let t = two_effects(true, false);
    let h = headlines(&t, CheckId::ExactlyOnce);
    assert!(
        h[0].contains("took effect 2 times (E1 at 121.000 s, E2 at 170.000 s); E1's request had been cancelled"),
        "{h:?}"
    );
    assert!(!inherent_only(&t, CheckId::ExactlyOnce));
    // No close ever reached the server: nothing told the two requests apart.
    assert!(inherent_only(&two_effects(false, false), CheckId::ExactlyOnce));
    // An idempotent tool may run twice.
    assert!(matches!(verdict(&two_effects(true, true), CheckId::ExactlyOnce), Status::NotApplicable { .. }));
}

fn once_state(second: StateVerdict) -> Trace {
    let accepted = second == StateVerdict::Accepted;
    let b = Sb::new(60)
        .client("alice")
        .tool("t", true, false)
        .at(1_000)
        .send("alice", 1, "v", 1, Attempt::First, None)
        .minted("v", 1, "alice", "fp1", 60, true)
        .at(2_000)
        .send("alice", 2, "v", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
        .checked("v", 2, "alice", "fp1", StateVerdict::Accepted)
        .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Started)
        .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Effect)
        .at(10_000)
        .send("alice", 3, "v", 3, Attempt::Presented, state("fp1", StateHow::Replayed))
        .checked("v", 3, "alice", "fp1", second);
    if accepted {
        b.exec(2, "v", 3, "alice", Some("alice"), ExecStep::Started)
            .exec(2, "v", 3, "alice", Some("alice"), ExecStep::Effect)
            .trace()
    } else {
        b.trace()
    }
}

#[test]
fn a_one_time_state_checked_twice_but_spent_once_is_not_redeemed_twice() {
    // Accepted at check, but no side effect followed the second acceptance.
    let t = Sb::new(60)
        .client("alice")
        .tool("t", true, false)
        .at(1_000)
        .send("alice", 1, "v", 1, Attempt::First, None)
        .minted("v", 1, "alice", "fp1", 60, true)
        .at(2_000)
        .send("alice", 2, "v", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
        .checked("v", 2, "alice", "fp1", StateVerdict::Accepted)
        .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Started)
        .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Effect)
        .at(10_000)
        .send("alice", 3, "v", 3, Attempt::Presented, state("fp1", StateHow::Replayed))
        .checked("v", 3, "alice", "fp1", StateVerdict::Accepted)
        .trace();
    assert!(passed(&t, CheckId::ExactlyOnce));
}

#[test]
fn exactly_once_fires_when_a_one_time_state_is_redeemed_twice() {
    let h = headlines(&once_state(StateVerdict::Accepted), CheckId::ExactlyOnce);
    assert!(h[0].contains("one-time requestState fp1 was redeemed twice"), "{h:?}");
    let refused = once_state(StateVerdict::Refused { why: "already redeemed".into() });
    assert!(passed(&refused, CheckId::ExactlyOnce));
}

/// mallory presents alice's state for c1 at 5 s; `end` is what she gets.
fn stolen(end: CallEnd, credential: Option<&str>) -> Trace {
    Sb::new(60)
        .client("alice")
        .client("mallory")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .minted("c1", 1, "alice", "fp1", 60, false)
        .at(5_000)
        .send_as(
            "mallory",
            1,
            "c1",
            1,
            Attempt::Presented,
            state("fp1", StateHow::Stolen { from: "alice".into() }),
            credential,
        )
        .at(5_100)
        .end("mallory", 1, "c1", 1, end)
        .trace()
}

#[test]
fn state_binding_and_confidentiality_fire_when_a_stolen_state_is_honoured() {
    let t = stolen(complete("alice"), None);
    assert!(headlines(&t, CheckId::StateBinding)[0].contains("presented alice's requestState as principal mallory"));
    assert!(headlines(&t, CheckId::Confidentiality)[0].contains("(principal mallory) received alice's result"));
    let refused = stolen(CallEnd::Error { code: -32602, message: "invalid requestState".into() }, None);
    assert!(passed(&refused, CheckId::StateBinding));
    // A server that ignored the state and acted for mallory misbound nothing.
    let own = stolen(complete("mallory"), None);
    assert!(passed(&own, CheckId::StateBinding));
    // An error result is a refusal.
    let error_result = stolen(CallEnd::Complete { is_error: true, data_of: None }, None);
    assert!(passed(&error_result, CheckId::StateBinding));
    // With alice's credential too, mallory is alice to any server.
    let t = stolen(complete("alice"), Some("alice"));
    assert!(inherent_only(&t, CheckId::StateBinding) && inherent_only(&t, CheckId::Confidentiality));
}

fn presented(how: StateHow, at_ms: u64, end: CallEnd) -> Trace {
    Sb::new(200)
        .client("alice")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .minted("c1", 1, "alice", "fp1", 60, false)
        .at(at_ms)
        .send("alice", 2, "c1", 2, Attempt::Presented, state("fp1", how))
        .at(at_ms + 100)
        .end("alice", 2, "c1", 2, end)
        .trace()
}

#[test]
fn state_integrity_fires_on_an_altered_or_expired_state_acted_on() {
    let t = presented(StateHow::Flipped, 5_000, complete("alice"));
    assert!(headlines(&t, CheckId::StateIntegrity)[0]
        .contains("altered (one character changed), and the server completed the call"));
    let refused = presented(StateHow::Flipped, 5_000, CallEnd::Error { code: -32602, message: "bad".into() });
    assert!(passed(&refused, CheckId::StateIntegrity));
    // Minted at 1 s for 60 s: sent at 90 s, it had expired.
    let t = presented(StateHow::AsReceived, 90_000, complete("alice"));
    assert!(headlines(&t, CheckId::StateIntegrity)[0].contains("that expired at 61.000 s"));
    // Refused: the call ended explicitly, and rightly.
    let refused = presented(StateHow::AsReceived, 90_000, CallEnd::Error { code: -32602, message: "expired".into() });
    assert!(passed(&refused, CheckId::StateIntegrity) && passed(&refused, CheckId::Liveness));
    let fresh = presented(StateHow::AsReceived, 30_000, complete("alice"));
    assert!(matches!(verdict(&fresh, CheckId::StateIntegrity), Status::NotApplicable { .. }));
}

#[test]
fn state_integrity_says_so_when_the_server_declared_no_lifetime() {
    // rmcp's codec reads the wall clock for its TTL, so the plug declares none:
    // a state presented long after is not judged expired, and the words say why.
    let mut t = presented(StateHow::AsReceived, 90_000, complete("alice"));
    for e in &mut t.events {
        if let What::StateMinted { lifetime_us, .. } = &mut e.what {
            *lifetime_us = None;
        }
    }
    let Status::NotApplicable { why } = verdict(&t, CheckId::StateIntegrity) else {
        panic!("judged without a lifetime")
    };
    assert!(why.contains("declared no lifetime"), "{why}");
    let with_lifetime = presented(StateHow::AsReceived, 30_000, complete("alice"));
    let Status::NotApplicable { why } = verdict(&with_lifetime, CheckId::StateIntegrity) else { panic!() };
    assert!(!why.contains("declared no lifetime"), "{why}");
}

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

#[test]
fn protocol_fires_on_a_server_error_and_an_unreadable_result() {
    let t = |end| {
        Sb::new(60)
            .client("alice")
            .at(1_000)
            .send("alice", 1, "c1", 1, Attempt::First, None)
            .end("alice", 1, "c1", 1, end)
            .trace()
    };
    assert!(headlines(&t(CallEnd::Status { status: 500 }), CheckId::Protocol)[0].contains("answered HTTP 500"));
    assert!(passed(&t(CallEnd::Status { status: 404 }), CheckId::Protocol));
    assert!(passed(&t(complete("alice")), CheckId::Protocol));
}

#[test]
fn a_stateless_trace_is_judged_by_its_own_checks_only() {
    let ids: Vec<CheckId> =
        crate::check::judge(&presented(StateHow::Flipped, 5_000, complete("alice"))).iter().map(|v| v.check).collect();
    assert_eq!(
        ids,
        [
            CheckId::StateBinding,
            CheckId::StateIntegrity,
            CheckId::ExactlyOnce,
            CheckId::Cancellation,
            CheckId::Confidentiality,
            CheckId::Liveness,
            CheckId::Protocol
        ]
    );
}

#[test]
fn the_vocabulary_lists_each_dialects_checks_as_the_check_tables_do() {
    let ids = |cs: &[crate::check::Check]| cs.iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(&crate::check::CHECKS), CheckId::STATEFUL);
    assert_eq!(ids(&crate::check::stateless::CHECKS), CheckId::STATELESS);
}

impl Sb {
    /// `client` opens listen stream `id` on conn `conn` (mapping `conn`), acknowledged at once.
    fn listen(self, client: &str, conn: u32, id: i64) -> Sb {
        let port = 40000 + conn as u16;
        self.push(What::Connect { client: client.into(), conn: ConnId(conn), port, purpose: Purpose::Uplink })
            .push(What::MappingOpened {
                client: client.into(),
                mapping: MappingId(conn),
                down_port: port,
                up_port: port,
            })
            .push(What::ListenSent { client: client.into(), conn: ConnId(conn), id: RpcId::Num(id) })
    }

    fn listen_event(self, client: &str, conn: u32, method: &str) -> Sb {
        let rpc = crate::wire::jsonrpc::RpcSummary {
            kind: crate::wire::jsonrpc::RpcKind::Notification,
            method: Some(method.into()),
            id: None,
            params: None,
        };
        self.push(What::SseEvent {
            client: client.into(),
            conn: ConnId(conn),
            id: None,
            event: "message".into(),
            rpc: Some(rpc),
            data: String::new(),
        })
    }
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

impl Sb {
    fn end_listen(self, client: &str, conn: u32, id: i64, end: CallEnd) -> Sb {
        self.push(What::ListenEnded { client: client.into(), conn: ConnId(conn), id: RpcId::Num(id), end })
    }
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

/// Issue 49, item 9: alice's retry with her one-time state is re-issued (its
/// response was lost) and the server redeems the state again: two side
/// effects of one call. That is the one-time state redeemed twice, which a
/// server can tell apart from a new call; no extra inherent "nothing tells
/// a re-issue from a new call" finding rides along. Two effects from two
/// different states (a re-issued first round) keep it.
#[test]
fn a_one_time_state_redeemed_by_a_reissued_retry_is_not_called_unpreventable() {
    let run = |second_fp: &str| {
        Sb::new(60)
            .client("alice")
            .tool("t", true, false)
            .at(1_000)
            .send("alice", 1, "v", 1, Attempt::First, None)
            .minted("v", 1, "alice", "fp1", 60, true)
            .minted("v", 1, "alice", "fp2", 60, true)
            .at(2_000)
            .send("alice", 2, "v", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
            .checked("v", 2, "alice", "fp1", StateVerdict::Accepted)
            .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Started)
            .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Effect)
            .at(30_000)
            .send("alice", 3, "v", 3, Attempt::Retry, state(second_fp, StateHow::AsReceived))
            .checked("v", 3, "alice", second_fp, StateVerdict::Accepted)
            .exec(2, "v", 3, "alice", Some("alice"), ExecStep::Started)
            .exec(2, "v", 3, "alice", Some("alice"), ExecStep::Effect)
            .trace()
    };
    let h = headlines(&run("fp1"), CheckId::ExactlyOnce);
    assert!(h.len() == 1 && h[0].contains("one-time requestState fp1 was redeemed twice"), "{h:?}");
    let h = headlines(&run("fp2"), CheckId::ExactlyOnce);
    assert!(h.iter().any(|h| h.contains("nothing in MCP 2026-07-28 tells a re-issue from a new call")), "{h:?}");
}
