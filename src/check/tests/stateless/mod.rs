//! The stateless-http checks on hand-built traces: for each, a trace that
//! makes it fire and the smallest change that keeps it quiet.

use super::{headlines, passed, verdict};
use crate::check::{CheckId, Status};
use crate::trace::stateless::{Attempt, CallEnd, ExecStep, Presented, StateHow, StateVerdict};
use crate::trace::{ConnId, Event, MappingId, Purpose, SimTime, Trace, What};
use crate::wire::jsonrpc::RpcId;

mod liveness;
mod request_state;
mod work;

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

    fn end_listen(self, client: &str, conn: u32, id: i64, end: CallEnd) -> Sb {
        self.push(What::ListenEnded { client: client.into(), conn: ConnId(conn), id: RpcId::Num(id), end })
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
fn the_vocabulary_lists_each_dialects_checks_as_the_check_tables_do() {
    let ids = |cs: &[crate::check::Check]| cs.iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(&crate::check::CHECKS), CheckId::STATEFUL);
    assert_eq!(ids(&crate::check::stateless::CHECKS), CheckId::STATELESS);
}
