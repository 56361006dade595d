//! Building the index: one pass over the trace's observable events.

use super::*;

impl<'a> Observed<'a> {
    /// Indexes `trace`. Long, for a reason: one `match` over every event
    /// kind, in trace order, each arm a few lines that file the event where
    /// the checks look for it; splitting the arms apart would hide that
    /// order, which the arms rely on (a response finds its connection).
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
                    o.streamable =
                        crate::check::Reading::of(*dialect) == crate::check::Reading::Sessions { polls: true };
                    o.unauthenticated = !*authenticates;
                    o.retention = *retention;
                    o.fence_grace = fence_grace_us.map(SimTime);
                    o.unreported_per_stream = u64::from(*unreported_per_stream);
                    o.end = o.end.max(SimTime(*duration_us));
                    o.liveness_bound = SimTime(*liveness_bound_us);
                }
                // Cut short: nothing after this moment happened, and nothing is judged past it.
                What::RunCut { .. } => cut = Some(t),
                What::ClientJoined { client, principal, heartbeat_timeout_us, think_time_us, max_backoff_us } => {
                    o.think_times.insert(client.clone(), SimTime(*think_time_us));
                    o.max_backoffs.insert(client.clone(), SimTime(*max_backoff_us));
                    o.principals.insert(client.clone(), principal.clone());
                    o.heartbeat_timeouts.insert(client.clone(), SimTime(*heartbeat_timeout_us));
                }
                What::Step { action, expect, call, .. } => {
                    o.steps.push((t, seq, *action));
                    if let Some(label) = call {
                        o.call_labels.insert(label.clone());
                    }
                    if let Some(e) = expect {
                        o.expected_resumptions.push((t, seq, e.client.clone(), e.resumption.clone()));
                    }
                }
                What::Connect { client, conn, port, purpose } => {
                    o.conns.insert(
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
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
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
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        let stream = content_type.as_deref().is_some_and(|ct| ct.starts_with("text/event-stream"));
                        c.response = Some((*status, stream, t, seq));
                    }
                }
                What::SseEvent { client, conn, id, event, rpc, data } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
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
                What::SessionToken { client, conn, token } => {
                    current.insert(client.clone(), (token.clone(), t));
                    o.token_owner.entry(token.clone()).or_insert_with(|| client.clone());
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.learned_token = Some(token.clone());
                    }
                }
                What::UplinkEnded { client, conn, reason } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.ended.get_or_insert((t, seq, reason.clone()));
                    }
                }
                What::UplinkSilent { client, conn, .. } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.ended.get_or_insert((t, seq, "gave up: silent".into()));
                    }
                }
                What::Rejected { client, conn, how } => {
                    if let Some(c) = o.conns.get_mut(&(client.clone(), *conn)) {
                        c.rejected = Some((t, seq, *how));
                    }
                }
                What::Answer { client, id, status, session, conn, .. } => o.answers.push(Answer {
                    client: client.clone(),
                    id: id.clone(),
                    t,
                    seq,
                    status: *status,
                    session: session.clone(),
                    conn: *conn,
                }),
                What::Notified { client, event_ids, session, stream, replica } => {
                    if let Some(token) = session.as_ref().or(current.get(client).map(|(t, _)| t)) {
                        // (`notified` holds the standalone stream's numbered ids.)
                        for id in event_ids.iter().filter(|_| stream.is_none()).filter_map(|i| i.parse().ok()) {
                            o.notified.push((token.clone(), t, id, seq));
                        }
                        o.notifications.push(super::Notification {
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
                What::TokenStolen { from, to, credential } => o.thefts.push((t, from.clone(), to.clone(), *credential)),
                What::ToolEnableEnded { client, conn, tool, enabled } => o.tool_enables.push(super::ToolEnable {
                    client: client.clone(),
                    conn: *conn,
                    tool: tool.clone(),
                    enabled: *enabled,
                    t,
                    seq,
                }),
                What::CallAbandoned { client, call, why } => {
                    o.abandoned_calls.push((client.clone(), call.clone(), t, seq, why.clone()))
                }
                What::Reinitialize { client, .. } => o.reinits.push((client.clone(), t)),
                What::ClientCrashed { client } => {
                    // The server's session outlives the client; the harness may still act on it.
                    o.crashes.push((client.clone(), t));
                    o.crashed.insert(client.clone(), t);
                }
                What::StorePartitioned { replica } => o.store_cuts.push((*replica, t, None)),
                What::ReplicaCrashed { replica, .. } => o.replica_crashes.push((*replica, t)),
                What::StoreHealed { replica } => {
                    if let Some(cut) = o.store_cuts.iter_mut().rev().find(|c| c.0 == *replica && c.2.is_none()) {
                        cut.2 = Some(t);
                    }
                }
                What::DeploymentStarted { replicas, store, .. } => {
                    o.shared_store = (*replicas > 1).then_some(store == "shared");
                }
                What::Routed { client, up_port, replica, .. } => {
                    // The latest mapping of that client from that port (the NAT's ports are not reused).
                    if let Some(m) =
                        o.mappings.values_mut().rev().find(|m| &m.client == client && m.up_port == *up_port)
                    {
                        m.routed = Some((*replica, seq));
                    }
                }
                What::MappingOpened { client, mapping, down_port, up_port } => {
                    o.mappings.insert(
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
                    if let Some(m) = o.mappings.get_mut(&(client.clone(), *mapping)) {
                        m.dropped = Some((t, seq, fault.clone()));
                    }
                }
                // The last chunk of a response is the server closing the
                // stream (its fence), not a write into it.
                What::DroppedWrite { closing: true, .. } => {}
                What::DroppedWrite { client, mapping, bytes, events, .. } => {
                    if let Some(m) = o.mappings.get_mut(&(client.clone(), *mapping)) {
                        m.dropped_writes.push((t, seq, *bytes, events.clone()));
                    }
                }
                What::MappingReset { client, mapping, .. } => {
                    if let Some(m) = o.mappings.get_mut(&(client.clone(), *mapping)) {
                        m.reset = Some((t, seq));
                    }
                }
                What::RequestIssued { client, label, method, id, event_id, session, reissuable } => {
                    // The session the application names, else the owner's current one.
                    let session = match (session, current.get(client)) {
                        (Some(s), Some((c, since))) if s == c => Some((s.clone(), *since)),
                        (Some(s), _) => Some((s.clone(), t)),
                        (None, cur) => cur.cloned(),
                    };
                    o.requests.insert(
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
                    if let Some(r) = o.requests.get_mut(label) {
                        if let Some(n) = new_id {
                            r.ids.push(n.clone());
                        }
                        r.outcomes.push((t, seq, *outcome, id.clone(), new_id.clone()));
                    }
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
