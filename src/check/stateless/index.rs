//! What the stateless checks read of a trace, indexed once: each attempt a
//! client sent and how it ended, each execution the application reported
//! and its steps, the states it minted and checked, and which NAT mapping
//! carried each attempt (and when its close reached the server, or when it
//! went half-open).

use crate::trace::stateless::{Attempt, CallEnd, ExecStep, InputAnswer, InputRead, Presented, StateVerdict};
use crate::trace::{ConnId, MappingId, SimTime, Trace, What};
use crate::wire::jsonrpc::RpcId;
use std::collections::BTreeMap;

/// One attempt of a call, as the client sent it.
#[derive(Clone, Debug)]
pub(crate) struct Sent {
    pub seq: u64,
    pub t: SimTime,
    pub client: String,
    pub conn: ConnId,
    pub call: String,
    pub tool: String,
    pub id: RpcId,
    pub attempt: Attempt,
    pub state: Option<Presented>,
    /// The answers it carried in `inputResponses`.
    pub answers: Vec<InputAnswer>,
    /// The principal whose credential it presented.
    pub principal: String,
    /// How it ended, when, and the event's seq.
    pub end: Option<(CallEnd, SimTime, u64)>,
    /// The NAT mapping that carried it.
    pub mapping: Option<MappingId>,
}

/// One execution, as the application reported it.
#[derive(Clone, Debug)]
pub(crate) struct Exec {
    pub exec: u32,
    pub tool: String,
    pub call: String,
    pub id: RpcId,
    pub principal: String,
    pub on_behalf_of: Option<String>,
    /// Each step, when, and its seq.
    pub steps: Vec<(ExecStep, SimTime, u64)>,
    /// The answers it acted on, as the application reported them with its start.
    pub inputs: Vec<InputRead>,
    /// The attempt it serves (index into `sent`).
    pub sent: Option<usize>,
}

impl Exec {
    /// When it reached `step`, if it did.
    pub fn at(&self, step: &ExecStep) -> Option<(SimTime, u64)> {
        self.steps.iter().find(|(s, _, _)| s == step).map(|(_, t, q)| (*t, *q))
    }
}

/// What happened to a NAT mapping.
#[derive(Clone, Debug, Default)]
pub(crate) struct MappingFate {
    /// When the client's close or a reset went upstream to the server (and the event's seq, and which).
    pub closed: Option<(SimTime, u64, &'static str)>,
    /// When it went half-open (silently dropped), and the event's seq.
    pub dropped: Option<(SimTime, u64)>,
    /// Bytes the server wrote into it after it was dropped, and the seqs.
    pub dead_bytes: usize,
    pub dead_writes: Vec<u64>,
}

/// A minted state.
#[derive(Clone, Debug)]
pub(crate) struct Minted {
    pub t: SimTime,
    pub seq: u64,
    pub lifetime_us: Option<u64>,
    pub once: bool,
}

/// A listen stream a client opened.
#[derive(Clone, Debug)]
pub(crate) struct Listen {
    pub client: String,
    pub conn: ConnId,
    pub id: RpcId,
    pub seq: u64,
    /// When the client saw it acknowledged.
    pub acked: Option<SimTime>,
    /// How it ended, when, and the event's seq.
    pub end: Option<(CallEnd, SimTime, u64)>,
    /// When the client received a tool-list change on it.
    pub changes: Vec<SimTime>,
}

/// A state check: (call, id, principal, fp, verdict, t, seq, replica).
pub(crate) type Checked = (String, RpcId, String, String, StateVerdict, SimTime, u64, Option<u32>);

/// The index.
#[derive(Default)]
pub(crate) struct Index {
    /// Listen streams, in the order clients opened them.
    pub listens: Vec<Listen>,
    /// Tool-list changes the application reported: (n, when, seq).
    pub tool_changes: Vec<(u32, SimTime, u64)>,
    /// The mapping of each listen stream's connection.
    pub listen_ports: BTreeMap<(String, ConnId), MappingId>,
    pub clients: BTreeMap<String, String>,
    pub tools: BTreeMap<String, (bool, bool)>,
    /// The inputs each tool that asks any declares, by method.
    pub inputs: BTreeMap<String, Vec<String>>,
    pub sent: Vec<Sent>,
    pub execs: BTreeMap<u32, Exec>,
    pub mappings: BTreeMap<(String, MappingId), MappingFate>,
    pub minted: BTreeMap<String, Minted>,
    /// (call, id, principal, fp, verdict, t, seq)
    /// The deployment's replicas share one store (`deployment-started`).
    pub shared_store: bool,
    /// How long a replica waits for the shared store before it gives up.
    pub store_timeout: SimTime,
    /// Each replica's cuts from the store: (replica, from, until; `None`: to the end).
    pub store_cuts: Vec<(u32, SimTime, Option<SimTime>)>,
    /// When the server restarted (`restart-server` steps).
    pub restarts: Vec<SimTime>,
    pub checked: Vec<Checked>,
    pub abandoned: Vec<(String, String, String, SimTime, u64)>,
    pub crashed: BTreeMap<String, Vec<SimTime>>,
    /// Protocol problems clients saw: (client, conn, problem, what, t, seq).
    pub problems: Vec<(String, ConnId, String, String, SimTime, u64)>,
    pub end: SimTime,
    /// How long a call may take (`[server] request_timeout`).
    pub bound: SimTime,
    /// The server authenticates no one (the header says so): a principal
    /// is only the name a request asserts.
    pub unauthenticated: bool,
}

impl Index {
    /// Whether `replica` was cut from the store when it checked a state at
    /// `at` (its wait for the store's answer may end after the cut healed).
    pub(crate) fn cut_from_store(&self, replica: u32, at: SimTime) -> bool {
        self.store_cuts.iter().any(|&(r, from, until)| {
            r == replica && from <= at && until.is_none_or(|u| at.0 <= u.0 + self.store_timeout.0)
        })
    }

    /// Indexes `trace` in one pass, in trace order: each event goes to the
    /// method for its group (a call's end finds its attempt, an execution
    /// the attempt it serves, so order matters).
    pub(crate) fn new(trace: &Trace) -> Index {
        let mut ix = Index::default();
        let mut ports: BTreeMap<(String, ConnId), u16> = BTreeMap::new();
        let mut by_port: BTreeMap<(String, u16), MappingId> = BTreeMap::new();
        let mut cut = None;
        for e in trace.iter() {
            let (t, seq) = (e.t_us, e.seq);
            match &e.what {
                // Cut short: nothing is judged past this moment.
                What::RunCut { .. } => cut = Some(t),
                What::Connect { client, conn, port, .. } => {
                    ports.insert((client.clone(), *conn), *port);
                }
                What::MappingOpened { client, mapping, down_port, .. } => {
                    by_port.insert((client.clone(), *down_port), *mapping);
                }
                w @ (What::RunStarted { .. }
                | What::ClientJoined { .. }
                | What::ToolOffered { .. }
                | What::DeploymentStarted { .. }
                | What::StorePartitioned { .. }
                | What::StoreHealed { .. }
                | What::Step { .. }
                | What::ClientCrashed { .. }) => ix.run_event(w, t),
                w @ (What::MappingDropped { .. }
                | What::MappingReset { .. }
                | What::MappingClosed { .. }
                | What::DroppedWrite { .. }) => ix.nat_event(w, t, seq),
                w @ (What::CallSent { .. }
                | What::CallEnded { .. }
                | What::CallAbandoned { .. }
                | What::ProtocolError { .. }) => ix.call_event(w, t, seq),
                w @ (What::ListenSent { .. }
                | What::ListenEnded { .. }
                | What::SseEvent { .. }
                | What::ToolsChanged { .. }) => ix.listen_event(w, t, seq),
                w @ (What::Execution { .. } | What::StateMinted { .. } | What::StateChecked { .. }) => {
                    ix.app_event(w, t, seq)
                }
                _ => {}
            }
        }
        ix.file_mappings(&ports, &by_port);
        if let Some(cut) = cut {
            ix.end = ix.end.min(cut);
        }
        ix
    }

    /// The run's header, its clients and tools, the deployment and its
    /// store, and the steps that restart a server or crash a client. (The
    /// other events are not routed here.)
    fn run_event(&mut self, w: &What, t: SimTime) {
        match w {
            What::RunStarted { duration_us, liveness_bound_us, authenticates, .. } => {
                self.end = SimTime(*duration_us);
                self.bound = SimTime(*liveness_bound_us);
                self.unauthenticated = !*authenticates;
            }
            What::ClientJoined { client, principal, .. } => {
                self.clients.insert(client.clone(), principal.clone());
            }
            What::ToolOffered { tool, once, idempotent, input } => {
                self.tools.insert(tool.clone(), (*once, *idempotent));
                if !input.is_empty() {
                    self.inputs.insert(tool.clone(), input.clone());
                }
            }
            What::DeploymentStarted { store, store_timeout_us, .. } => {
                self.shared_store = store == "shared";
                self.store_timeout = SimTime(store_timeout_us.unwrap_or(0));
            }
            What::StorePartitioned { replica } => self.store_cuts.push((*replica, t, None)),
            What::Step {
                action: crate::vocab::StepKind::RestartServer | crate::vocab::StepKind::RestartReplica,
                ..
            } => self.restarts.push(t),
            What::StoreHealed { replica } => {
                if let Some(c) = self.store_cuts.iter_mut().rev().find(|c| c.0 == *replica && c.2.is_none()) {
                    c.2 = Some(t);
                }
            }
            What::ClientCrashed { client } => {
                self.crashed.entry(client.clone()).or_default().push(t);
            }
            _ => {}
        }
    }

    /// What the NAT saw become of a mapping: dropped (half-open), reset,
    /// closed by the client, and what the server wrote into it once dropped.
    fn nat_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::MappingDropped { client, mapping, .. } => {
                self.mappings.entry((client.clone(), *mapping)).or_default().dropped.get_or_insert((t, seq));
            }
            What::MappingReset { client, mapping, .. } => {
                self.mappings.entry((client.clone(), *mapping)).or_default().closed.get_or_insert((t, seq, "reset"));
            }
            What::MappingClosed { client, mapping, by } if by == "client" => {
                let f = self.mappings.entry((client.clone(), *mapping)).or_default();
                if f.dropped.is_none() {
                    f.closed.get_or_insert((t, seq, "closed by the client"));
                }
            }
            What::DroppedWrite { client, mapping, bytes, .. } => {
                let f = self.mappings.entry((client.clone(), *mapping)).or_default();
                if f.closed.is_none() {
                    f.dead_bytes += bytes;
                    f.dead_writes.push(seq);
                }
            }
            _ => {}
        }
    }

    /// A client's attempts of a call and how each ended, a call it gave up
    /// on, and what it could not read.
    fn call_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::CallSent { client, conn, call, tool, id, attempt, state, credential, answers } => {
                let own = self.clients.get(client).cloned().unwrap_or_default();
                self.sent.push(Sent {
                    seq,
                    t,
                    client: client.clone(),
                    conn: *conn,
                    call: call.clone(),
                    tool: tool.clone(),
                    id: id.clone(),
                    attempt: attempt.clone(),
                    state: state.clone(),
                    answers: answers.clone(),
                    principal: credential.clone().unwrap_or(own),
                    end: None,
                    mapping: None,
                });
            }
            What::CallEnded { client, conn, end, .. } => {
                if let Some(s) = self.sent.iter_mut().rev().find(|s| &s.client == client && s.conn == *conn) {
                    s.end.get_or_insert((end.clone(), t, seq));
                }
            }
            What::CallAbandoned { client, call, why } => {
                self.abandoned.push((client.clone(), call.clone(), why.clone(), t, seq));
            }
            What::ProtocolError { client, conn, problem, what } => {
                self.problems.push((client.clone(), *conn, problem.clone(), what.clone(), t, seq));
            }
            _ => {}
        }
    }

    /// Listen streams: opened, acknowledged, told of a tool-list change,
    /// ended; and the changes the application reported.
    fn listen_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::ListenSent { client, conn, id } => self.listens.push(Listen {
                client: client.clone(),
                conn: *conn,
                id: id.clone(),
                seq,
                acked: None,
                end: None,
                changes: Vec::new(),
            }),
            What::ListenEnded { client, conn, end, .. } => {
                if let Some(l) = self.listens.iter_mut().rev().find(|l| &l.client == client && l.conn == *conn) {
                    l.end.get_or_insert((end.clone(), t, seq));
                }
            }
            What::SseEvent { client, conn, rpc: Some(r), .. } => {
                let method = r.method.as_deref().unwrap_or("");
                if let Some(l) = self.listens.iter_mut().rev().find(|l| &l.client == client && l.conn == *conn) {
                    if method == crate::wire::mrtr::ACKNOWLEDGED {
                        l.acked.get_or_insert(t);
                    } else if method == crate::wire::mrtr::TOOLS_CHANGED {
                        l.changes.push(t);
                    }
                }
            }
            What::ToolsChanged { n, .. } => self.tool_changes.push((*n, t, seq)),
            _ => {}
        }
    }

    /// The application's reports: an execution's steps (filed under the
    /// attempt it serves), and the states it minted and checked.
    fn app_event(&mut self, w: &What, t: SimTime, seq: u64) {
        match w {
            What::Execution { exec, tool, call, id, principal, on_behalf_of, step, inputs, .. } => {
                let sent = self
                    .sent
                    .iter()
                    .rposition(|s| &s.call == call && &s.id == id && &s.principal == principal && s.t <= t);
                let x = self.execs.entry(*exec).or_insert_with(|| Exec {
                    exec: *exec,
                    tool: tool.clone(),
                    call: call.clone(),
                    id: id.clone(),
                    principal: principal.clone(),
                    on_behalf_of: on_behalf_of.clone(),
                    steps: Vec::new(),
                    inputs: Vec::new(),
                    sent,
                });
                x.steps.push((step.clone(), t, seq));
                x.inputs.extend(inputs.iter().cloned());
            }
            What::StateMinted { fp, lifetime_us, once, .. } => {
                self.minted.entry(fp.clone()).or_insert(Minted { t, seq, lifetime_us: *lifetime_us, once: *once });
            }
            What::StateChecked { call, id, principal, fp, verdict, replica } => {
                self.checked.push((
                    call.clone(),
                    id.clone(),
                    principal.clone(),
                    fp.clone(),
                    verdict.clone(),
                    t,
                    seq,
                    *replica,
                ));
            }
            _ => {}
        }
    }

    /// Files the NAT mapping that carried each attempt and listen stream:
    /// the client's connection's port (`ports`) is the mapping's downstream
    /// port (`by_port`).
    fn file_mappings(&mut self, ports: &BTreeMap<(String, ConnId), u16>, by_port: &BTreeMap<(String, u16), MappingId>) {
        for s in &mut self.sent {
            s.mapping =
                ports.get(&(s.client.clone(), s.conn)).and_then(|p| by_port.get(&(s.client.clone(), *p))).copied();
        }
        for l in &self.listens {
            let key = (l.client.clone(), l.conn);
            if let Some(m) = ports.get(&key).and_then(|p| by_port.get(&(l.client.clone(), *p))) {
                self.listen_ports.insert(key, *m);
            }
        }
    }

    /// What became of the mapping that carried attempt `s`.
    pub(crate) fn fate(&self, s: &Sent) -> Option<&MappingFate> {
        self.mappings.get(&(s.client.clone(), s.mapping?))
    }

    /// The NAT mapping that carried listen stream `l`.
    pub(crate) fn listen_mapping(&self, l: &Listen) -> Option<MappingId> {
        self.listen_ports.get(&(l.client.clone(), l.conn)).copied()
    }

    /// The executions that serve attempt `i`.
    pub(crate) fn execs_of(&self, i: usize) -> impl Iterator<Item = &Exec> {
        self.execs.values().filter(move |x| x.sent == Some(i))
    }

    /// Whether the tool is declared idempotent.
    pub(crate) fn idempotent(&self, tool: &str) -> bool {
        self.tools.get(tool).is_some_and(|t| t.1)
    }
}
