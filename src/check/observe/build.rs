//! Building the index: one pass over the trace's observable events.

use super::*;

impl<'a> Observed<'a> {
    /// Indexes `trace`: one pass over its events in trace order, each sent
    /// to the method for its group, which files it where the checks look
    /// for it. The methods rely on that order (a response finds its
    /// connection; a report finds the client's current session).
    pub fn new(trace: &'a Trace) -> Self {
        let mut o = Observed::default();
        // Each client's current session token and when it got it.
        let mut current: BTreeMap<String, (String, SimTime)> = BTreeMap::new();
        let mut cut = None;
        for e in trace.iter().filter(|e| !e.what.is_explanation()) {
            o.events.push(e);
            let (t, seq) = (e.t_us, e.seq);
            o.end = o.end.max(t);
            match &e.what {
                // Cut short: nothing after this moment happened, and nothing is judged past it.
                What::RunCut { .. } => cut = Some(t),
                What::SessionToken { client, conn, token } => o.token_learned((client, *conn, token), t, &mut current),
                w @ (What::RunStarted { .. } | What::ClientJoined { .. } | What::Step { .. }) => o.run_event(w, t, seq),
                w @ (What::Connect { .. } | What::HttpRequest { .. } | What::HttpResponse { .. }) => {
                    o.conn_event(w, t, seq)
                }
                w @ (What::SseEvent { .. }
                | What::UplinkEnded { .. }
                | What::UplinkSilent { .. }
                | What::Rejected { .. }) => o.delivery_event(w, t, seq),
                w @ (What::Answer { .. }
                | What::TokenStolen { .. }
                | What::ToolEnableEnded { .. }
                | What::CallAbandoned { .. }
                | What::Reinitialize { .. }
                | What::ClientCrashed { .. }) => o.client_event(w, t, seq),
                w @ (What::StorePartitioned { .. }
                | What::ReplicaCrashed { .. }
                | What::StoreHealed { .. }
                | What::DeploymentStarted { .. }
                | What::Routed { .. }) => o.deployment_event(w, t, seq),
                w @ (What::MappingOpened { .. }
                | What::MappingDropped { .. }
                | What::DroppedWrite { .. }
                | What::MappingReset { .. }) => o.nat_event(w, t, seq),
                w @ (What::Notified { .. } | What::RequestIssued { .. } | What::RequestOutcome { .. }) => {
                    o.app_event(w, t, seq, &current)
                }
                _ => {}
            }
        }
        if o.end == SimTime(0) {
            o.end = trace.events.last().map_or(SimTime(0), |e| e.t_us);
        }
        if let Some(cut) = cut {
            o.end = o.end.min(cut);
        }
        o.assign_streams();
        o
    }

    /// The run's header, its clients, and its steps.
    fn run_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::RunStarted {
                dialect,
                duration_us,
                liveness_bound_us,
                authenticates,
                unreported_per_stream,
                retention,
                fence_grace_us,
                ..
            } => {
                self.streamable =
                    crate::check::Reading::of(*dialect) == crate::check::Reading::Sessions { polls: true };
                self.unauthenticated = !*authenticates;
                self.retention = *retention;
                self.fence_grace = fence_grace_us.map(SimTime);
                self.unreported_per_stream = u64::from(*unreported_per_stream);
                self.end = self.end.max(SimTime(*duration_us));
                self.liveness_bound = SimTime(*liveness_bound_us);
            }
            What::ClientJoined { client, principal, heartbeat_timeout_us, think_time_us, max_backoff_us } => {
                self.think_times.insert(client.clone(), SimTime(*think_time_us));
                self.max_backoffs.insert(client.clone(), SimTime(*max_backoff_us));
                self.principals.insert(client.clone(), principal.clone());
                self.heartbeat_timeouts.insert(client.clone(), SimTime(*heartbeat_timeout_us));
            }
            What::Step { action, expect, call, .. } => {
                self.steps.push((t, seq, *action));
                if let Some(label) = call {
                    self.call_labels.insert(label.clone());
                }
                if let Some(e) = expect {
                    self.expected_resumptions.push((t, seq, e.client.clone(), e.resumption.clone()));
                }
            }
            _ => {}
        }
    }

    /// A client's connection: opened, its request, the head of its response.
    fn conn_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::Connect { client, conn, port, purpose } => {
                self.conns.insert(
                    (client.clone(), *conn),
                    Conn {
                        client: client.clone(),
                        conn: *conn,
                        purpose: *purpose,
                        port: *port,
                        opened: t,
                        presented_token: None,
                        credential: None,
                        session_header: false,
                        learned_token: None,
                        last_event_id: None,
                        method: String::new(),
                        request_seq: None,
                        request_t: None,
                        response: None,
                        delivered: Vec::new(),
                        ended: None,
                        rejected: None,
                        stream: StreamKey::None,
                        sent: None,
                    },
                );
            }
            What::HttpRequest { client, conn, method, path, last_event_id, session, credential, rpc } => {
                if let Some(c) = self.conns.get_mut(&(client.clone(), *conn)) {
                    c.sent = rpc.clone();
                    c.method = method.clone();
                    c.credential = credential.clone();
                    c.request_t = Some(t);
                    c.session_header = session.is_some();
                    c.presented_token =
                        session.clone().or_else(|| crate::wire::legacy::session_token(path).map(String::from));
                    c.last_event_id = last_event_id.clone();
                    c.request_seq = Some(seq);
                }
            }
            What::HttpResponse { client, conn, status, content_type } => {
                if let Some(c) = self.conns.get_mut(&(client.clone(), *conn)) {
                    let stream = content_type.as_deref().is_some_and(|ct| ct.starts_with("text/event-stream"));
                    c.response = Some((*status, stream, t, seq));
                }
            }
            _ => {}
        }
    }

    /// What a connection's stream delivered, and how it ended or was refused.
    fn delivery_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::SseEvent { client, conn, id, event, rpc, data } => {
                if let Some(c) = self.conns.get_mut(&(client.clone(), *conn)) {
                    let data_hash = {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::hash::DefaultHasher::new();
                        data.hash(&mut h);
                        h.finish()
                    };
                    c.delivered.push(Delivered {
                        t,
                        seq,
                        id: id.clone(),
                        event: event.clone(),
                        rpc: rpc.clone(),
                        data_hash,
                    });
                }
            }
            What::UplinkEnded { client, conn, reason } => {
                if let Some(c) = self.conns.get_mut(&(client.clone(), *conn)) {
                    c.ended.get_or_insert((t, seq, reason.clone()));
                }
            }
            What::UplinkSilent { client, conn, .. } => {
                if let Some(c) = self.conns.get_mut(&(client.clone(), *conn)) {
                    c.ended.get_or_insert((t, seq, "gave up: silent".into()));
                }
            }
            What::Rejected { client, conn, how } => {
                if let Some(c) = self.conns.get_mut(&(client.clone(), *conn)) {
                    c.rejected = Some((t, seq, *how));
                }
            }
            _ => {}
        }
    }

    /// What a client did besides its connections: its answers to server
    /// requests, a stolen token, a tool enabled, a call given up, a fresh
    /// session, a crash.
    fn client_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::Answer { client, id, status, session, conn, .. } => self.answers.push(Answer {
                client: client.clone(),
                id: id.clone(),
                t,
                seq,
                status: *status,
                session: session.clone(),
                conn: *conn,
            }),
            What::TokenStolen { from, to, credential } => self.thefts.push((t, from.clone(), to.clone(), *credential)),
            What::ToolEnableEnded { client, conn, tool, enabled } => self.tool_enables.push(super::ToolEnable {
                client: client.clone(),
                conn: *conn,
                tool: tool.clone(),
                enabled: *enabled,
                t,
                seq,
            }),
            What::CallAbandoned { client, call, why } => {
                self.abandoned_calls.push((client.clone(), call.clone(), t, seq, why.clone()))
            }
            What::Reinitialize { client, .. } => self.reinits.push((client.clone(), t)),
            What::ClientCrashed { client } => {
                // The server's session outlives the client; the harness may still act on it.
                self.crashes.push((client.clone(), t));
                self.crashed.insert(client.clone(), t);
            }
            _ => {}
        }
    }

    /// A deployment of several replicas: its store and partitions from it,
    /// crashed replicas, and which replica the balancer sent a mapping to.
    fn deployment_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::StorePartitioned { replica } => self.store_cuts.push((*replica, t, None)),
            What::ReplicaCrashed { replica, .. } => self.replica_crashes.push((*replica, t)),
            What::StoreHealed { replica } => {
                if let Some(cut) = self.store_cuts.iter_mut().rev().find(|c| c.0 == *replica && c.2.is_none()) {
                    cut.2 = Some(t);
                }
            }
            What::DeploymentStarted { replicas, store, .. } => {
                self.shared_store = (*replicas > 1).then_some(store == "shared");
            }
            What::Routed { client, up_port, replica, .. } => {
                // The latest mapping of that client from that port (the NAT's ports are not reused).
                if let Some(m) = self.mappings.values_mut().rev().find(|m| &m.client == client && m.up_port == *up_port)
                {
                    m.routed = Some((*replica, seq));
                }
            }
            _ => {}
        }
    }

    /// The NAT's mappings: opened, dropped (half-open), written into once
    /// dropped, reset.
    fn nat_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::MappingOpened { client, mapping, down_port, up_port } => {
                self.mappings.insert(
                    (client.clone(), *mapping),
                    Mapping {
                        client: client.clone(),
                        mapping: *mapping,
                        down_port: *down_port,
                        up_port: *up_port,
                        routed: None,
                        dropped: None,
                        reset: None,
                        dropped_writes: Vec::new(),
                    },
                );
            }
            What::MappingDropped { client, mapping, fault, .. } => {
                if let Some(m) = self.mappings.get_mut(&(client.clone(), *mapping)) {
                    m.dropped = Some((t, seq, fault.clone()));
                }
            }
            // The last chunk of a response is the server closing the
            // stream (its fence), not a write into it.
            What::DroppedWrite { closing: true, .. } => {}
            What::DroppedWrite { client, mapping, bytes, events, .. } => {
                if let Some(m) = self.mappings.get_mut(&(client.clone(), *mapping)) {
                    m.dropped_writes.push((t, seq, *bytes, events.clone()));
                }
            }
            What::MappingReset { client, mapping, .. } => {
                if let Some(m) = self.mappings.get_mut(&(client.clone(), *mapping)) {
                    m.reset = Some((t, seq));
                }
            }
            _ => {}
        }
    }

    /// The application's reports: notifications it emitted, and the server
    /// requests it issued and what became of them. A report that names no
    /// session is filed under the client's `current` one.
    fn app_event(&mut self, w: &What, t: SimTime, seq: u64, current: &BTreeMap<String, (String, SimTime)>) {
        match w {
            What::Notified { client, event_ids, session, stream, replica } => {
                if let Some(token) = session.as_ref().or(current.get(client).map(|(t, _)| t)) {
                    // (`notified` holds the standalone stream's numbered ids.)
                    for id in event_ids.iter().filter(|_| stream.is_none()).filter_map(|i| i.parse().ok()) {
                        self.notified.push((token.clone(), t, id, seq));
                    }
                    self.notifications.push(super::Notification {
                        client: client.clone(),
                        token: token.clone(),
                        t,
                        seq,
                        ids: event_ids.clone(),
                        stream: stream.clone(),
                        replica: *replica,
                    });
                }
            }
            What::RequestIssued { client, label, method, id, event_id, session, reissuable } => {
                // The session the application names, else the owner's current one.
                let session = match (session, current.get(client)) {
                    (Some(s), Some((c, since))) if s == c => Some((s.clone(), *since)),
                    (Some(s), _) => Some((s.clone(), t)),
                    (None, cur) => cur.cloned(),
                };
                self.requests.insert(
                    label.clone(),
                    Request {
                        label: label.clone(),
                        owner: client.clone(),
                        method: method.clone(),
                        ids: vec![id.clone()],
                        event_id: event_id.clone(),
                        issued: (t, seq),
                        session,
                        outcomes: Vec::new(),
                        reissuable: *reissuable,
                    },
                );
            }
            What::RequestOutcome { label, id, outcome, new_id, .. } => {
                if let Some(r) = self.requests.get_mut(label) {
                    if let Some(n) = new_id {
                        r.ids.push(n.clone());
                    }
                    r.outcomes.push((t, seq, *outcome, id.clone(), new_id.clone()));
                }
            }
            _ => {}
        }
    }

    /// Session token `token`, learned by `client` on `conn` at `t`: the
    /// client's current one from now on (in `current`); its first holder owns it.
    fn token_learned(
        &mut self,
        (client, conn, token): (&String, ConnId, &String),
        t: SimTime,
        current: &mut BTreeMap<String, (String, SimTime)>,
    ) {
        current.insert(client.clone(), (token.clone(), t));
        self.token_owner.entry(token.clone()).or_insert_with(|| client.clone());
        if let Some(c) = self.conns.get_mut(&(client.clone(), conn)) {
            c.learned_token = Some(token.clone());
        }
    }

    /// Works out [`Conn::stream`] for every connection, in request order.
    fn assign_streams(&mut self) {
        let mut order: Vec<(u64, (String, ConnId))> =
            self.conns.iter().map(|(k, c)| (c.request_seq.unwrap_or(u64::MAX), k.clone())).collect();
        order.sort();
        for (_, key) in order {
            let c = &self.conns[&key];
            let stream = match (c.purpose, c.token(), c.last_event_id.as_deref()) {
                (Purpose::Post, _, _) | (_, None, _) => StreamKey::None,
                (Purpose::Call, Some(_), None) => StreamKey::Call { client: c.client.clone(), conn: c.conn },
                (purpose, Some(token), Some(last)) => {
                    self.stream_of_id(token, last, c.request_seq).unwrap_or_else(|| {
                        if purpose == Purpose::Call {
                            StreamKey::Call { client: c.client.clone(), conn: c.conn }
                        } else {
                            StreamKey::Get(token.to_string())
                        }
                    })
                }
                (Purpose::Uplink, Some(token), None) => StreamKey::Get(token.to_string()),
            };
            self.conns.get_mut(&key).expect("key from the map").stream = stream;
        }
    }

    /// The stream of the latest connection of session `token` whose request
    /// went out before the request `before` (a trace seq) that carried event
    /// `id` (delivered, or written into its dropped mapping). By request, not
    /// by opening time: a tool call's POST and a GET that resumes its stream
    /// can open at one instant (found by fuzzing: such a GET was taken for a
    /// resumption of the standalone stream, and guarded's untouched
    /// standalone writer for a second writer on it).
    pub(crate) fn stream_of_id(&self, token: &str, id: &str, before: Option<u64>) -> Option<StreamKey> {
        self.conns
            .values()
            .filter(|d| {
                d.token() == Some(token) && !d.stream.is_none() && d.request_seq.is_some() && d.request_seq < before
            })
            .filter(|d| {
                d.delivered.iter().any(|e| e.id.as_deref() == Some(id))
                    || self.mapping_of(d).is_some_and(|m| {
                        m.dropped_writes.iter().any(|w| w.3.iter().any(|e| e.id.as_deref() == Some(id)))
                    })
            })
            .max_by_key(|d| (d.opened, d.conn))
            .map(|d| d.stream.clone())
    }
}
