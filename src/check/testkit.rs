//! Hand-built traces for the checks' unit tests: no world runs, so a test
//! shows exactly which events make a check fire and which keep it quiet.
//!
//! Conventions, so that tests stay short: a client's connection `n` goes out
//! from port `40000 + n` through NAT mapping `n`; legacy-sse paths
//! (`GET /mcp/sse`, `?sessionId=` in the URL); times in milliseconds, set
//! with [`Tb::at`] and kept until the next `at`.

use crate::trace::{ConnId, Event, MappingId, Outcome, Purpose, Refused, SimTime, SseSeen, Trace, What};
use crate::vocab::StepKind;
use crate::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};

/// A trace under construction.
pub(crate) struct Tb {
    now_us: u64,
    events: Vec<(u64, What)>,
    /// Each client's principal, and the credential it presents when it
    /// took another's.
    principals: std::collections::BTreeMap<String, String>,
    presenting: std::collections::BTreeMap<String, String>,
}

/// A notification's summary (as the client's SSE decoder records it).
fn notification() -> Option<RpcSummary> {
    Some(RpcSummary {
        kind: RpcKind::Notification,
        method: Some("notifications/message".into()),
        id: None,
        params: None,
    })
}

/// A server request's summary (every request built here carries the same params).
fn request(rpc_id: &str) -> Option<RpcSummary> {
    request_with(rpc_id, "params-digest")
}

/// A server request's summary, with `params` as its params digest.
fn request_with(rpc_id: &str, params: &str) -> Option<RpcSummary> {
    Some(RpcSummary {
        kind: RpcKind::Request,
        method: Some("sampling/createMessage".into()),
        id: Some(RpcId::Str(rpc_id.into())),
        params: Some(params.into()),
    })
}

impl Tb {
    /// A run of `duration_s` seconds with the default liveness bound (300 s).
    pub fn new(duration_s: u64) -> Tb {
        let started = What::RunStarted {
            scenario: "unit".into(),
            server: "unit".into(),
            dialect: crate::scenario::Dialect::LegacySse,
            seed: 0,
            duration_us: duration_s * 1_000_000,
            liveness_bound_us: 300_000_000,
            authenticates: true,
            unreported_per_stream: 0,
            retention: None,
            fence_grace_us: None,
        };
        Tb { now_us: 0, events: vec![(0, started)], principals: Default::default(), presenting: Default::default() }
    }

    /// The server may mint `n` event ids per stream that it does not report.
    pub fn unreported_per_stream(mut self, n: u32) -> Tb {
        if let Some((_, What::RunStarted { unreported_per_stream, .. })) = self.events.first_mut() {
            *unreported_per_stream = n;
        }
        self
    }

    /// The server says it keeps `retention` events per session and waits
    /// `fence_grace_ms` for a prior writer's fence.
    pub fn resume_bounds(mut self, retention: u64, fence_grace_ms: u64) -> Tb {
        if let Some((_, What::RunStarted { retention: r, fence_grace_us, .. })) = self.events.first_mut() {
            *r = Some(retention);
            *fence_grace_us = Some(fence_grace_ms * 1_000);
        }
        self
    }

    /// The server's request timeout (the liveness bound) is `secs`.
    pub fn bound(mut self, secs: u64) -> Tb {
        if let Some((_, What::RunStarted { liveness_bound_us, .. })) = self.events.first_mut() {
            *liveness_bound_us = secs * 1_000_000;
        }
        self
    }

    /// The server authenticates no one (the header says so).
    pub fn unauthenticated(mut self) -> Tb {
        if let Some((_, What::RunStarted { authenticates, .. })) = self.events.first_mut() {
            *authenticates = false;
        }
        self
    }

    /// Moves the clock to `ms` (never backwards).
    pub fn at(mut self, ms: u64) -> Tb {
        assert!(ms * 1000 >= self.now_us, "hand-built traces run forwards");
        self.now_us = ms * 1000;
        self
    }

    /// Records `what` now.
    pub fn push(mut self, what: What) -> Tb {
        self.events.push((self.now_us, what));
        self
    }

    /// A client whose principal is its name.
    pub fn client(self, name: &str) -> Tb {
        self.client_as(name, name)
    }

    /// A client presenting `principal`.
    pub fn client_as(mut self, name: &str, principal: &str) -> Tb {
        self.principals.insert(name.into(), principal.into());
        self.push(What::ClientJoined {
            client: name.into(),
            principal: principal.into(),
            heartbeat_timeout_us: 37_500_000,
            think_time_us: 1_000_000,
            max_backoff_us: 10_000_000,
        })
    }

    /// A scenario step of kind `action`.
    pub fn step(self, action: StepKind, detail: &str) -> Tb {
        let index = self.events.iter().filter(|e| matches!(e.1, What::Step { .. })).count();
        self.push(What::Step { index, action, detail: detail.into(), expect: None, call: None })
    }

    /// `client` opens connection `conn` (and the NAT its mapping) and sends
    /// its request.
    pub fn request(
        self,
        client: &str,
        conn: u32,
        purpose: Purpose,
        method: &str,
        path: &str,
        last: Option<&str>,
    ) -> Tb {
        let port = 40000 + conn as u16;
        let credential = self.presenting.get(client).cloned();
        self.push(What::Connect { client: client.into(), conn: ConnId(conn), port, purpose })
            .push(What::MappingOpened {
                client: client.into(),
                mapping: MappingId(conn),
                down_port: port,
                up_port: port,
            })
            .push(What::HttpRequest {
                client: client.into(),
                conn: ConnId(conn),
                method: method.into(),
                path: path.into(),
                last_event_id: last.map(String::from),
                session: None,
                credential,
                rpc: None,
            })
    }

    /// streamable-http: a GET on `conn` for session `token`'s standalone
    /// stream (`Mcp-Session-Id` presented; `last`, a resumption), not answered yet.
    pub fn standalone_get(self, client: &str, conn: u32, token: &str, last: Option<&str>) -> Tb {
        let mut t = self.request(client, conn, Purpose::Uplink, "GET", "/mcp", last);
        if let Some((_, What::HttpRequest { session, .. })) = t.events.last_mut() {
            *session = Some(token.into());
        }
        t
    }

    /// A fresh uplink on `conn`: `GET /mcp/sse`, answered with a stream that
    /// hands out `token`.
    pub fn uplink(self, client: &str, conn: u32, token: &str) -> Tb {
        self.request(client, conn, Purpose::Uplink, "GET", "/mcp/sse", None)
            .stream(client, conn)
            .push(What::SessionToken { client: client.into(), conn: ConnId(conn), token: token.into() })
    }

    /// The builder through `f`: a sequence a test module names once.
    pub fn then(self, f: impl FnOnce(Tb) -> Tb) -> Tb {
        f(self)
    }

    /// [`Tb::uplink`], routed by the balancer to `replica`.
    pub fn uplink_on(self, client: &str, conn: u32, replica: u32, token: &str) -> Tb {
        self.request(client, conn, Purpose::Uplink, "GET", "/mcp/sse", None)
            .routed(client, conn, replica)
            .stream(client, conn)
            .push(What::SessionToken { client: client.into(), conn: ConnId(conn), token: token.into() })
    }

    /// A resumption of session `token` on `conn` from `last` (not answered yet).
    pub fn resume(self, client: &str, conn: u32, token: &str, last: Option<&str>) -> Tb {
        self.request(client, conn, Purpose::Uplink, "GET", &format!("/mcp/sse?sessionId={token}"), last)
    }

    /// An answer of 200 with an event stream on `conn`.
    pub fn stream(self, client: &str, conn: u32) -> Tb {
        self.status(client, conn, 200, Some("text/event-stream"))
    }

    /// An answer of `status` on `conn`.
    pub fn status(self, client: &str, conn: u32, status: u16, content_type: Option<&str>) -> Tb {
        self.push(What::HttpResponse {
            client: client.into(),
            conn: ConnId(conn),
            status,
            content_type: content_type.map(String::from),
        })
    }

    /// Notifications under `ids`, delivered on `conn`.
    pub fn notes(mut self, client: &str, conn: u32, ids: &[&str]) -> Tb {
        for id in ids {
            self = self.event(client, conn, Some(id), notification(), &format!("note {id}"));
        }
        self
    }

    /// Server request `rpc_id` as event `id`, delivered on `conn`.
    pub fn request_event(self, client: &str, conn: u32, id: &str, rpc_id: &str) -> Tb {
        self.event(client, conn, Some(id), request(rpc_id), rpc_id)
    }

    /// Server request `rpc_id` as event `id`, delivered on `conn`, its params digesting as `params`.
    pub fn request_event_with(self, client: &str, conn: u32, id: &str, rpc_id: &str, params: &str) -> Tb {
        self.event(client, conn, Some(id), request_with(rpc_id, params), rpc_id)
    }

    /// An SSE event delivered on `conn`.
    pub fn event(self, client: &str, conn: u32, id: Option<&str>, rpc: Option<RpcSummary>, data: &str) -> Tb {
        self.push(What::SseEvent {
            client: client.into(),
            conn: ConnId(conn),
            id: id.map(String::from),
            event: "message".into(),
            rpc,
            data: data.into(),
        })
    }

    /// The client's connection `conn` ended.
    pub fn ended(self, client: &str, conn: u32, reason: &str) -> Tb {
        self.push(What::UplinkEnded { client: client.into(), conn: ConnId(conn), reason: reason.into() })
    }

    /// A deployment of `replicas` replicas routing by source, with `store`
    /// (`shared`, or `per-replica`: a store each).
    pub fn deployment(self, replicas: u32, store: &str) -> Tb {
        self.push(What::DeploymentStarted {
            replicas,
            routing: "source".into(),
            store: store.into(),
            store_timeout_us: None,
        })
    }

    /// The balancer sent `client`'s connection `conn` to `replica`.
    pub fn routed(self, client: &str, conn: u32, replica: u32) -> Tb {
        self.push(What::Routed {
            client: client.into(),
            up_port: 40000 + conn as u16,
            replica,
            routing: "source".into(),
            source: None,
        })
    }

    /// The client saw its resumption on `conn` refused.
    pub fn refused(self, client: &str, conn: u32, how: Refused) -> Tb {
        self.push(What::Rejected { client: client.into(), conn: ConnId(conn), how })
    }

    /// The NAT dropped mapping `m` silently (`fault`: rebind, sever).
    pub fn drop_mapping(self, client: &str, m: u32, fault: &str) -> Tb {
        self.push(What::MappingDropped {
            client: client.into(),
            mapping: MappingId(m),
            fault: fault.into(),
            step: None,
        })
    }

    /// The server wrote notifications `ids` into dropped mapping `m`.
    pub fn dropped_notes(self, client: &str, m: u32, ids: &[&str]) -> Tb {
        let events =
            ids.iter().map(|id| SseSeen { id: Some((*id).into()), event: "message".into(), rpc: notification() });
        self.push(What::DroppedWrite {
            client: client.into(),
            mapping: MappingId(m),
            bytes: 100 * ids.len(),
            events: events.collect(),
            response: None,
            closing: false,
        })
    }

    /// The server wrote server request `rpc_id` as event `id` into dropped mapping `m`.
    pub fn dropped_request(self, client: &str, m: u32, id: &str, rpc_id: &str) -> Tb {
        let events = vec![SseSeen { id: Some(id.into()), event: "message".into(), rpc: request(rpc_id) }];
        self.push(What::DroppedWrite {
            client: client.into(),
            mapping: MappingId(m),
            bytes: 200,
            events,
            response: None,
            closing: false,
        })
    }

    /// Like [`Tb::notified`], minted on the server's stream `stream` (a tool call's POST stream).
    pub fn notified_on_stream(self, client: &str, token: &str, ids: &[&str], stream: &str) -> Tb {
        self.push(What::Notified {
            client: client.into(),
            event_ids: ids.iter().map(|i| (*i).to_string()).collect(),
            session: Some(token.into()),
            stream: Some(stream.into()),
            replica: None,
        })
    }

    /// The application emitted notifications `ids` on `client`'s session `token`.
    pub fn notified(self, client: &str, token: &str, ids: &[&str]) -> Tb {
        self.push(What::Notified {
            client: client.into(),
            event_ids: ids.iter().map(|i| (*i).to_string()).collect(),
            session: Some(token.into()),
            stream: None,
            replica: None,
        })
    }

    /// Like [`Tb::notified`], minted by `replica` of a deployment.
    pub fn notified_by(self, replica: u32, client: &str, token: &str, ids: &[&str]) -> Tb {
        let mut what = What::Notified {
            client: client.into(),
            event_ids: ids.iter().map(|i| (*i).to_string()).collect(),
            session: Some(token.into()),
            stream: None,
            replica: None,
        };
        what.set_replica(replica);
        self.push(what)
    }

    /// The application issued request `label` (JSON-RPC id = label) as event
    /// `event_id` on `client`'s session `token`.
    pub fn issued(self, client: &str, label: &str, token: &str, event_id: &str) -> Tb {
        self.push(What::RequestIssued {
            client: client.into(),
            label: label.into(),
            method: "sampling/createMessage".into(),
            id: RpcId::Str(label.into()),
            event_id: Some(event_id.into()),
            session: Some(token.into()),
            reissuable: true,
        })
    }

    /// What became of request `label`, as the application saw it.
    pub fn outcome(self, label: &str, outcome: Outcome) -> Tb {
        self.push(What::RequestOutcome {
            label: label.into(),
            id: RpcId::Str(label.into()),
            outcome,
            new_id: None,
            detail: String::new(),
        })
    }

    /// `client` answered request `rpc_id` on session `token` with a POST on
    /// `conn` that got `status`.
    pub fn answer(self, client: &str, conn: u32, token: &str, rpc_id: &str, status: u16) -> Tb {
        self.request(client, conn, Purpose::Post, "POST", &format!("/mcp/messages?sessionId={token}"), None)
            .status(client, conn, status, None)
            .push(What::Answer {
                client: client.into(),
                id: RpcId::Str(rpc_id.into()),
                method: "sampling/createMessage".into(),
                status: Some(status),
                session: Some(token.into()),
                conn: Some(ConnId(conn)),
            })
    }

    /// `client` ends session `token` with a DELETE on `conn` that got `status`.
    pub fn delete(self, client: &str, conn: u32, token: &str, status: u16) -> Tb {
        self.request(client, conn, Purpose::Post, "DELETE", &format!("/mcp/messages?sessionId={token}"), None)
            .status(client, conn, status, None)
    }

    /// `to` takes `from`'s session token (and credential: `to`'s requests
    /// present it from now on, as the client records them). A theft that
    /// takes no effect is a bare `TokenStolen` event.
    pub fn steal(mut self, from: &str, to: &str, credential: bool) -> Tb {
        if credential {
            let taken = self.presenting.get(from).or(self.principals.get(from)).cloned().unwrap_or_else(|| from.into());
            if self.principals.get(to) == Some(&taken) {
                self.presenting.remove(to);
            } else {
                self.presenting.insert(to.into(), taken);
            }
        }
        self.push(What::TokenStolen { from: from.into(), to: to.into(), credential })
    }

    /// `client` crashes and is started again: its requests present its own
    /// credential once more (as `Client::new` resets it).
    pub fn crash_and_restart(mut self, client: &str) -> Tb {
        self.presenting.remove(client);
        self.push(What::ClientCrashed { client: client.into() })
    }

    /// The finished trace: `seq` is each event's place.
    pub fn trace(self) -> Trace {
        let events = self
            .events
            .into_iter()
            .enumerate()
            .map(|(i, (t, what))| Event { seq: i as u64, t_us: SimTime(t), what })
            .collect();
        Trace { events }
    }
}
