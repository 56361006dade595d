//! Hand-built traces: for server bugs the reference engine cannot have
//! (it settles a request once, by id, and never reuses an id).

mod common;

use mcpsim::check::{self, Verdict};
use mcpsim::trace::{ConnId, Event, MappingId, Outcome, Purpose, SimTime, Trace, What};
use mcpsim::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};

struct T(Vec<Event>);

impl T {
    fn new() -> Self {
        let mut t = T(Vec::new());
        t.at(
            0,
            What::RunStarted {
                scenario: "hand-built".into(),
                server: "buggy".into(),
                dialect: mcpsim::scenario::Dialect::LegacySse,
                seed: 0,
                duration_us: 60_000_000,
                liveness_bound_us: 30_000_000,
                authenticates: true,
                unreported_per_stream: 0,
                retention: None,
                fence_grace_us: None,
            },
        );
        t.at(
            0,
            What::ClientJoined {
                client: "alice".into(),
                principal: "alice".into(),
                heartbeat_timeout_us: 30_000_000,
                think_time_us: 1_000_000,
                max_backoff_us: 10_000_000,
            },
        );
        // alice's uplink (conn 1) on session tok-1.
        t.at(0, What::Connect { client: "alice".into(), conn: ConnId(1), port: 40001, purpose: Purpose::Uplink });
        t.at(
            10,
            What::HttpRequest {
                client: "alice".into(),
                conn: ConnId(1),
                method: "GET".into(),
                path: "/mcp/sse".into(),
                last_event_id: None,
                session: None,
                credential: None,
                rpc: None,
            },
        );
        t.at(
            100,
            What::HttpResponse {
                client: "alice".into(),
                conn: ConnId(1),
                status: 200,
                content_type: Some("text/event-stream".into()),
            },
        );
        t.at(100, What::SessionToken { client: "alice".into(), conn: ConnId(1), token: "tok-1".into() });
        t
    }
    fn at(&mut self, ms: u64, what: What) -> &mut Self {
        let seq = self.0.len() as u64;
        self.0.push(Event { seq, t_us: SimTime(ms * 1000), what });
        self
    }
    fn issue(&mut self, ms: u64, label: &str, method: &str, id: i64, event: u64) -> &mut Self {
        self.at(
            ms,
            What::RequestIssued {
                client: "alice".into(),
                label: label.into(),
                method: method.into(),
                id: RpcId::Num(id),
                event_id: Some(event.to_string()),
                session: Some("tok-1".into()),
                reissuable: true,
            },
        );
        self.at(
            ms + 40,
            What::SseEvent {
                client: "alice".into(),
                conn: ConnId(1),
                id: Some(event.to_string()),
                event: "message".into(),
                rpc: Some(RpcSummary {
                    kind: RpcKind::Request,
                    method: Some(method.into()),
                    id: Some(RpcId::Num(id)),
                    params: None,
                }),
                data: format!("{{\"id\":{id},\"method\":\"{method}\",\"label\":\"{label}\"}}"),
            },
        )
    }
    fn answer(&mut self, ms: u64, conn: u32, id: i64) -> &mut Self {
        let (port, conn) = (40000 + conn as u16, ConnId(conn));
        self.at(ms, What::Connect { client: "alice".into(), conn, port, purpose: Purpose::Post });
        self.at(
            ms + 10,
            What::HttpRequest {
                client: "alice".into(),
                conn,
                method: "POST".into(),
                path: "/mcp/messages?sessionId=tok-1".into(),
                last_event_id: None,
                session: None,
                credential: None,
                rpc: None,
            },
        );
        self.at(ms + 100, What::HttpResponse { client: "alice".into(), conn, status: 202, content_type: None });
        self.at(
            ms + 100,
            What::Answer {
                client: "alice".into(),
                id: RpcId::Num(id),
                method: "sampling/createMessage".into(),
                status: Some(202),
                session: Some("tok-1".into()),
                conn: Some(conn),
            },
        )
    }
    fn settled(&mut self, ms: u64, label: &str, id: i64) -> &mut Self {
        self.at(
            ms,
            What::RequestOutcome {
                label: label.into(),
                id: RpcId::Num(id),
                outcome: Outcome::Answered,
                new_id: None,
                detail: "answered".into(),
            },
        )
    }
    fn judge(&self) -> Vec<Verdict> {
        let mut events = self.0.clone();
        events.sort_by_key(|e| e.t_us);
        for (i, e) in events.iter_mut().enumerate() {
            e.seq = i as u64;
        }
        check::judge(&Trace { events })
    }
}

#[test]
fn a_second_answer_applied_to_one_request() {
    let mut t = T::new();
    t.issue(1000, "req-1", "sampling/createMessage", 0, 1001);
    t.answer(2000, 2, 0).settled(2050, "req-1", 0);
    let good = t.judge();
    common::verdicts::quiet(&good, "inflight-disposition");
    t.answer(3000, 3, 0).settled(3050, "req-1", 0);
    common::verdicts::fires(
        &t.judge(),
        "inflight-disposition",
        &["applied two answers to req-1", "a server request is settled once"],
    );
}

#[test]
fn an_answer_applied_before_anyone_answered() {
    let mut t = T::new();
    t.issue(1000, "req-1", "sampling/createMessage", 0, 1001);
    t.issue(1500, "req-2", "roots/list", 1, 1002);
    // alice answers id 0 (req-1), and the application settles req-2.
    t.answer(2000, 2, 0).settled(2050, "req-2", 1);
    common::verdicts::fires(
        &t.judge(),
        "inflight-disposition",
        &["reported req-2 (roots/list) answered", "no client had sent an answer to 1"],
    );
    let mut ok = T::new();
    ok.issue(1000, "req-1", "sampling/createMessage", 0, 1001);
    ok.answer(2000, 2, 0).settled(2050, "req-1", 0);
    common::verdicts::quiet(&ok.judge(), "inflight-disposition");
}

#[test]
fn one_id_for_two_pending_requests() {
    let mut t = T::new();
    t.issue(1000, "req-1", "sampling/createMessage", 0, 1001);
    t.issue(1500, "req-2", "roots/list", 0, 1002);
    common::verdicts::fires(
        &t.judge(),
        "correlation-consistency",
        &["delivered req-2 (roots/list) under JSON-RPC id 0", "while req-1 (sampling/createMessage) under the same id"],
    );
    // The same id again once the first was answered and settled is not this bug.
    let mut ok = T::new();
    ok.issue(1000, "req-1", "sampling/createMessage", 0, 1001);
    ok.answer(1100, 2, 0).settled(1150, "req-1", 0);
    ok.issue(1500, "req-2", "roots/list", 1, 1002);
    common::verdicts::quiet(&ok.judge(), "correlation-consistency");
}

impl T {
    fn notify(&mut self, ms: u64, conn: u32, ids: &[u64]) -> &mut Self {
        let conn = ConnId(conn);
        for id in ids {
            self.at(
                ms,
                What::SseEvent {
                    client: "alice".into(),
                    conn,
                    id: Some(id.to_string()),
                    event: "message".into(),
                    rpc: Some(RpcSummary {
                        kind: RpcKind::Notification,
                        method: Some("notifications/message".into()),
                        id: None,
                        params: None,
                    }),
                    data: format!("{{\"method\":\"notifications/message\",\"n\":{id}}}"),
                },
            );
        }
        self
    }
    /// alice's uplink drops (reset) and she resumes on conn 2 from `last`.
    fn resume(&mut self, ms: u64, last: u64) -> &mut Self {
        self.at(ms - 500, What::UplinkEnded { client: "alice".into(), conn: ConnId(1), reason: "reset".into() });
        self.at(ms, What::Connect { client: "alice".into(), conn: ConnId(2), port: 40002, purpose: Purpose::Uplink });
        self.at(
            ms + 10,
            What::HttpRequest {
                client: "alice".into(),
                conn: ConnId(2),
                method: "GET".into(),
                path: "/mcp/sse?sessionId=tok-1".into(),
                last_event_id: Some(last.to_string()),
                session: None,
                credential: None,
                rpc: None,
            },
        );
        self.at(
            ms + 100,
            What::HttpResponse {
                client: "alice".into(),
                conn: ConnId(2),
                status: 200,
                content_type: Some("text/event-stream".into()),
            },
        )
    }
    fn notified(&mut self, ms: u64, ids: &[u64]) -> &mut Self {
        self.at(
            ms,
            What::Notified {
                client: "alice".into(),
                event_ids: ids.iter().map(u64::to_string).collect(),
                session: Some("tok-1".into()),
                stream: None,
                replica: None,
            },
        )
    }
}

#[test]
fn a_hole_in_the_middle_or_at_the_end_of_a_replay() {
    // 1001-1005 were minted; alice saw 1001 and resumes from it.
    let base = || {
        let mut t = T::new();
        t.notify(200, 1, &[1000]).notified(1000, &[1001, 1002, 1003, 1004, 1005]).notify(1040, 1, &[1001]);
        t.resume(3000, 1001);
        t
    };
    let mut middle = base();
    middle.notify(3100, 2, &[1002, 1004, 1005]);
    common::verdicts::fires(&middle.judge(), "replay-integrity", &["left event 1003 of its replay window out"]);
    let mut end = base();
    end.notify(3100, 2, &[1002, 1003]);
    common::verdicts::fires(&end.judge(), "replay-integrity", &["left events 1004–1005 of its replay window out"]);
    let mut whole = base();
    whole.notify(3100, 2, &[1002, 1003, 1004, 1005]);
    common::verdicts::quiet(&whole.judge(), "replay-integrity");
}
#[test]
fn a_fence_that_comes_after_the_new_writer_is_attached() {
    use mcpsim::trace::SseSeen;
    // alice's uplink (conn 1) goes half-open; she resumes from 1001. The
    // replay (1002-1003) and the 200 reach her at 3.1 s; but at 3.05 s
    // the server had written 1004, newer than the replay, into the old
    // mapping: the old writer was still attached after the new one.
    let late = |write_id: u64, message: bool| {
        let mut t = T::new();
        t.at(
            0,
            What::MappingOpened { client: "alice".into(), mapping: MappingId(1), down_port: 40001, up_port: 50001 },
        );
        t.notify(200, 1, &[1000, 1001]).notified(1000, &[1002, 1003]);
        t.at(
            900,
            What::MappingDropped { client: "alice".into(), mapping: MappingId(1), fault: "sever".into(), step: None },
        );
        t.at(
            1000,
            What::DroppedWrite {
                client: "alice".into(),
                mapping: MappingId(1),
                bytes: 200,
                events: ["1002", "1003"]
                    .map(|i| SseSeen { id: Some(i.into()), event: "message".into(), rpc: None })
                    .to_vec(),
                response: None,
                closing: false,
            },
        );
        t.resume(3000, 1001);
        t.at(
            3050,
            What::DroppedWrite {
                client: "alice".into(),
                mapping: MappingId(1),
                bytes: 100,
                events: vec![SseSeen {
                    id: Some(write_id.to_string()),
                    event: "message".into(),
                    rpc: message.then(|| RpcSummary {
                        kind: RpcKind::Notification,
                        method: Some("notifications/message".into()),
                        id: None,
                        params: None,
                    }),
                }],
                response: None,
                closing: false,
            },
        );
        t.notify(3100, 2, &[1002, 1003]).notify(3300, 2, &[1004]);
        t
    };
    common::verdicts::fires(
        &late(1004, true).judge(),
        "session-binding",
        &["events newer than conn 2's replay, before its acceptance reached the client"],
    );
    // A write of an event the replay also carried could predate the attach: not proof.
    common::verdicts::quiet(&late(1003, true).judge(), "session-binding");
    // Nor could a priming event (no message): a replay never carries one.
    common::verdicts::quiet(&late(1004, false).judge(), "session-binding");
}
