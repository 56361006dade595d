//! Hunts in `stateless-http` (MCP 2026-07-28): the seeded generator of
//! stateless plans, and the situations a stateless run reached.
//!
//! A plan: one to three owners call the scenario's tools at random times
//! (a long tool with progress, a tool that asks for input first, a one-time
//! redemption, an idempotent one); a swarm of fault kinds, each at its own
//! rate, breaks their streams (rebind, sever, reset), steals, alters or
//! replays their `requestState`, or lets it expire. Faults stop at
//! [`FAULTS_END`]; the run goes on to [`DURATION`] so that re-issues can
//! complete.

use crate::check::stateless::Index;
use crate::scenario::{Action, ClientSpec, Dialect, Dur, NetworkConfig, Plan, ServerConfig, Step, Tamper, ToolSpec};
use crate::seed::Seed;
use crate::trace::stateless::{Attempt, ExecStep, StateHow};
use crate::trace::Trace;
use rand::seq::IndexedRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::time::Duration;

/// When faults stop.
pub const FAULTS_END: Duration = Duration::from_secs(12);
/// How long a generated stateless run lasts.
pub const DURATION: Duration = Duration::from_secs(40);

/// Fault kinds a stateless seed may enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StatelessFault {
    /// The NAT drops every live mapping of an owner silently.
    Rebind,
    /// The NAT drops the mapping of an owner's latest stream silently.
    Sever,
    /// The NAT resets the mapping of an owner's latest stream.
    Reset,
    /// A thief presents an owner's state (sometimes with the owner's credential).
    Steal,
    /// An owner presents its state altered, truncated or on another call.
    Tamper,
    /// An owner presents a completed round's state again.
    Replay,
    /// An owner thinks longer than the state lives.
    Expire,
    /// The server restarts between two rounds of an owner's call.
    Restart,
}

impl StatelessFault {
    /// Every kind, in the order a seed draws them.
    pub const ALL: [StatelessFault; 8] = [
        StatelessFault::Rebind,
        StatelessFault::Sever,
        StatelessFault::Reset,
        StatelessFault::Steal,
        StatelessFault::Tamper,
        StatelessFault::Replay,
        StatelessFault::Expire,
        StatelessFault::Restart,
    ];
}

/// The tools every generated plan offers. `once`: the seed's own stream
/// for what the one-time and the two-input tools draw (issue "Bugs that
/// escape", items 7 and 8), so that the other draws stay as they were.
fn tools(rng: &mut ChaCha8Rng, once: &mut ChaCha8Rng) -> Vec<ToolSpec> {
    let elicit = || vec!["elicitation/create".to_string()];
    let tool = |name: &str, runs: u64, progress: Option<u64>, input: Vec<String>, once: bool, idempotent: bool| {
        ToolSpec { name: name.into(), runs: ms(runs), progress_every: progress.map(ms), input, once, idempotent }
    };
    let work = tool("work", rng.random_range(2_000..10_000), Some(rng.random_range(500..1_500)), vec![], false, false);
    let ask = tool("ask", rng.random_range(0..3) * 1_000, Some(1_000), elicit(), false, false);
    // Half the plans give the redemption a duration: a second redemption
    // can then meet the first still running.
    let redeem_runs = if once.random_bool(0.5) { once.random_range(1_000..6_000) } else { 0 };
    let redeem = tool("redeem", redeem_runs, (redeem_runs > 0).then_some(1_000), elicit(), true, false);
    let lookup = tool("lookup", rng.random_range(0..2_000), Some(700), vec![], false, true);
    // Two inputs in one round: a confirmation and a summary.
    let two = vec!["elicitation/create".to_string(), "sampling/createMessage".to_string()];
    let deploy = tool("deploy", once.random_range(0..3) * 1_000, Some(1_000), two, false, false);
    vec![work, ask, redeem, lookup, deploy]
}

struct Draft {
    rng: ChaCha8Rng,
    owners: Vec<String>,
    clients: Vec<ClientSpec>,
    tools: Vec<ToolSpec>,
    steps: Vec<Step>,
    /// Each call made so far: (client, label, tool, when).
    calls: Vec<(String, String, String, Duration)>,
    thieves: usize,
    lifetime: Duration,
    /// The seed's stream for the one-time and input draws (`hunt.stateless.once`).
    once: ChaCha8Rng,
}

impl Draft {
    fn push(&mut self, at: Duration, action: Action) {
        self.steps.push(Step::generated(at, action));
    }

    fn call(&mut self, at: Duration, client: &str, tool: &str) {
        let label = format!("c{}", self.calls.len() + 1);
        self.calls.push((client.into(), label.clone(), tool.into(), at));
        self.push(at, Action::Call { client: client.into(), tool: tool.into(), label, decline: false });
    }

    /// A call of an owner to a tool that asks for input, made now, whose state a fault can use.
    fn input_call(&mut self, at: Duration, tool: &str) -> (String, String) {
        let o = self.owners.choose(&mut self.rng).expect("owners").clone();
        self.call(at, &o, tool);
        (o, self.calls.last().expect("just made").1.clone())
    }

    fn traffic(&mut self) {
        for o in self.owners.clone() {
            for _ in 0..self.rng.random_range(1..=3) {
                let at = ms(self.rng.random_range(200..FAULTS_END.as_millis() as u64));
                let tool = ["work", "ask", "redeem", "lookup"].choose(&mut self.rng).expect("tools").to_string();
                self.call(at, &o, &tool);
            }
        }
    }

    /// The input path (issue "Bugs that escape", item 8), from the seed's
    /// own stream: each owner may call the two-input tool, and a quarter of
    /// the calls made so far to a tool that asks for input decline it.
    fn inputs(&mut self) {
        for o in self.owners.clone() {
            if self.once.random_bool(0.5) {
                let at = ms(self.once.random_range(200..FAULTS_END.as_millis() as u64));
                self.call(at, &o, "deploy");
            }
        }
        let asking = ["ask", "deploy", "redeem"];
        for step in &mut self.steps {
            if let Action::Call { tool, decline, .. } = &mut step.action {
                if asking.contains(&tool.as_str()) && self.once.random_bool(0.25) {
                    *decline = true;
                }
            }
        }
    }

    /// Slows an owner's answers so that a fault lands between two rounds.
    fn slow(&mut self, o: &str, at_least: Duration) {
        if let Some(c) = self.clients.iter_mut().find(|c| c.name == o) {
            c.think_time = c.think_time.max(at_least);
        }
    }

    fn fault(&mut self, kind: StatelessFault) {
        let at = ms(self.rng.random_range(500..FAULTS_END.as_millis() as u64));
        let o = self.owners.choose(&mut self.rng).expect("owners").clone();
        match kind {
            StatelessFault::Rebind => self.push(at, Action::Rebind { client: o }),
            StatelessFault::Sever | StatelessFault::Reset => {
                // Half the time aimed at one call the owner made before, else at its latest stream.
                let earlier: Vec<String> =
                    self.calls.iter().filter(|c| c.0 == o && c.3 < at).map(|c| c.1.clone()).collect();
                let aimed = self.rng.random_bool(0.5).then(|| earlier.choose(&mut self.rng).cloned()).flatten();
                let sever = kind == StatelessFault::Sever;
                let action = match aimed {
                    Some(label) if sever => Action::SeverCall { client: o, label },
                    Some(label) => Action::ResetCall { client: o, label },
                    None if sever => Action::Sever { client: o },
                    None => Action::Reset { client: o },
                };
                self.push(at, action);
            }
            StatelessFault::Steal => {
                // A third of the thefts take a one-time state: the thief's presentation meets the registry.
                let tool = if self.once.random_bool(0.33) { "redeem" } else { "ask" };
                let (victim, label) = self.input_call(at, tool);
                self.slow(&victim, ms(3_000));
                self.thieves += 1;
                let thief = format!("thief{}", self.thieves);
                self.clients.push(client(&thief, ms(500)));
                let credential = self.rng.random_bool(0.3);
                let d = self.rng.random_range(500..2_500);
                self.push(at + ms(d), Action::StealRequestState { from: victim, to: thief, label, credential });
            }
            StatelessFault::Tamper => {
                let tool = if self.rng.random_bool(0.5) { "ask" } else { "redeem" };
                let (owner, label) = self.input_call(at, tool);
                self.slow(&owner, ms(3_000));
                let how = match self.rng.random_range(0..3) {
                    0 => Tamper::Flip,
                    1 => Tamper::Truncate,
                    _ => {
                        // Moved onto a one-time redemption a third of the time.
                        let onto_tool = if self.once.random_bool(0.33) { "redeem" } else { "ask" };
                        self.call(at + ms(100), &owner, onto_tool);
                        let onto = self.calls.last().expect("just made").1.clone();
                        Tamper::Move { onto, tool: onto_tool.into() }
                    }
                };
                let d = self.rng.random_range(500..2_500);
                self.push(at + ms(d), Action::TamperRequestState { client: owner, label, how });
            }
            StatelessFault::Replay => {
                let tool = if self.rng.random_bool(0.7) { "redeem" } else { "ask" };
                let (owner, label) = self.input_call(at, tool);
                let d = self.rng.random_range(2_000..6_000);
                self.push(at + ms(d), Action::ReplayRequestState { client: owner, label });
            }
            StatelessFault::Restart => {
                let (owner, _) = self.input_call(at, "ask");
                self.slow(&owner, ms(3_000));
                let d = self.rng.random_range(500..2_500);
                self.push(at + ms(d), Action::RestartServer);
            }
            StatelessFault::Expire => {
                self.lifetime = ms(self.rng.random_range(1_000..4_000));
                let (owner, _) = self.input_call(at, "ask");
                let think = self.lifetime + ms(self.rng.random_range(0..3_000));
                self.slow(&owner, think);
            }
        }
    }

    fn into_plan(mut self, seed: u64, faults: String) -> Plan {
        self.steps.sort_by_key(|s| s.at);
        let latency_max = ms(self.rng.random_range(5..40));
        let half_open_lifetime = Duration::from_secs(self.rng.random_range(5..20));
        Plan {
            name: format!("hunt-{seed}"),
            description: format!("generated from seed {seed}; faults: {faults}"),
            dialect: Dialect::StatelessHttp,
            seed: Seed(seed),
            duration: DURATION,
            server: ServerConfig {
                heartbeat: Dur(Duration::from_secs(2)),
                state_lifetime: Dur(self.lifetime),
                // Calls begin by 13 s; each must be done 20 s later.
                request_timeout: Dur(Duration::from_secs(20)),
                ..ServerConfig::default()
            },
            network: NetworkConfig { tick: super::TICK, latency_min: ms(5), latency_max, half_open_lifetime },
            deployment: crate::scenario::Deployment::default(),
            clients: self.clients,
            steps: self.steps,
            tools: self.tools,
            expect: BTreeMap::new(),
            expect_inherent: BTreeMap::new(),
            source: None,
        }
    }
}

fn client(name: &str, think_time: Duration) -> ClientSpec {
    ClientSpec {
        name: name.into(),
        principal: name.into(),
        think_time,
        heartbeat_timeout: Duration::from_secs(5),
        auto_answer: true,
    }
}

/// Draws the stateless plan of one seed (its own stream, `hunt.stateless`).
pub fn generate(seed: u64) -> Plan {
    let mut rng = Seed(seed).stream("hunt.stateless");
    let owners: Vec<String> = (1..=rng.random_range(1..=3usize)).map(|i| format!("owner{i}")).collect();
    let mut kinds: Vec<StatelessFault> = StatelessFault::ALL.iter().copied().filter(|_| rng.random_bool(0.4)).collect();
    if kinds.is_empty() {
        kinds.push(*StatelessFault::ALL.choose(&mut rng).expect("non-empty"));
    }
    let rates: Vec<(StatelessFault, u32)> = kinds.iter().map(|k| (*k, rng.random_range(1..=2))).collect();
    let clients = owners.iter().map(|o| client(o, ms(rng.random_range(200..1_500)))).collect();
    let mut once = Seed(seed).stream("hunt.stateless.once");
    let tools = tools(&mut rng, &mut once);
    let mut d = Draft {
        rng,
        owners,
        clients,
        tools,
        steps: Vec::new(),
        calls: Vec::new(),
        thieves: 0,
        lifetime: Duration::from_secs(60),
        once,
    };
    d.traffic();
    d.inputs();
    // Listen streams and tool-list changes, from their own stream (the draws above stay as they were).
    let mut listen = Seed(seed).stream("hunt.stateless.listen");
    for o in d.owners.clone() {
        if listen.random_bool(0.5) {
            d.push(ms(listen.random_range(100..1_000)), Action::Listen { client: o });
        }
    }
    for _ in 0..listen.random_range(0..=2) {
        d.push(ms(listen.random_range(2_000..FAULTS_END.as_millis() as u64 + 5_000)), Action::ChangeTools);
    }
    for &(kind, rate) in &rates {
        for _ in 0..rate {
            d.fault(kind);
        }
    }
    let faults = kinds.iter().map(|k| format!("{k:?}").to_lowercase()).collect::<Vec<_>>().join(", ");
    d.into_plan(seed, faults)
}

/// The stateless plan of one seed deployed on `replicas` replicas behind a
/// balancer that share a store: the only deployments a hunt draws, because
/// in them a correct server can keep every promise (with a store each, no
/// server keeps a one-time state one-time across replicas: the bundled
/// `stateless-once-per-replica-store` shows that, as inherent). The plan is
/// [`generate`]'s, with a routing and up to two partitions between a
/// replica and the store drawn from the seed's own stream
/// (`hunt.stateless.deploy`), so that one seed's traffic and faults are
/// the same with and without replicas.
pub fn generate_deployed(seed: u64, replicas: u32) -> Plan {
    use crate::scenario::{Deployment, Routing, StoreKind};
    let mut plan = generate(seed);
    let mut rng = Seed(seed).stream("hunt.stateless.deploy");
    let routing =
        *[Routing::RoundRobin, Routing::LeastConnections, Routing::Source].choose(&mut rng).expect("non-empty");
    plan.deployment = Deployment { replicas, routing, store: StoreKind::Shared, ..Deployment::default() };
    let cuts = rng.random_range(0..=2);
    for _ in 0..cuts {
        let at = ms(rng.random_range(500..FAULTS_END.as_millis() as u64));
        let replica = rng.random_range(1..=replicas);
        let lasts = Some(ms(rng.random_range(1_000..6_000)));
        plan.steps.push(Step::generated(at, Action::Partition { replica, lasts }));
    }
    // Stable: the generated steps keep their order among equal times.
    plan.steps.sort_by_key(|s| s.at);
    plan.description
        .push_str(&format!("; {replicas} replicas routing {}, one shared store, {cuts} partition(s)", routing.name()));
    plan
}

/// The situations a stateless hunt measures, in the order the summary prints them.
pub const SITUATIONS: [&str; 14] = [
    HALF_OPEN_MID_RUN,
    CLOSE_MID_RUN,
    REISSUED,
    RAN_TWICE,
    STOLEN,
    TAMPERED,
    EXPIRED,
    ONCE_AGAIN,
    INPUT_THEN_BREAK,
    RESTART_BETWEEN_ROUNDS,
    ONCE_WHILE_RUNNING,
    STOLEN_ONCE,
    TWO_INPUTS,
    DECLINED,
];

/// An execution was running when its stream went half-open.
pub const HALF_OPEN_MID_RUN: &str = "stream half-open while its execution ran";
/// A close (FIN or RST) reached the server while the execution ran.
pub const CLOSE_MID_RUN: &str = "close reached the server while its execution ran";
/// A call re-issued under a new id after a lost response.
pub const REISSUED: &str = "call re-issued after a lost response";
/// A tool that is not idempotent took effect twice for one call.
pub const RAN_TWICE: &str = "one call took effect twice";
/// Another client's state presented.
pub const STOLEN: &str = "stolen requestState presented";
/// An altered, truncated or moved state presented.
pub const TAMPERED: &str = "altered or moved requestState presented";
/// A state presented after the lifetime the server gave it.
pub const EXPIRED: &str = "expired requestState presented";
/// A one-time state presented again.
pub const ONCE_AGAIN: &str = "one-time requestState presented again";
/// A retry (carrying input responses) whose response was lost, then re-issued.
pub const INPUT_THEN_BREAK: &str = "retry with input responses re-issued";

/// A state minted before a server restart, presented after it.
pub const RESTART_BETWEEN_ROUNDS: &str = "state presented across a server restart";
/// A one-time state presented again while an execution it started still ran.
pub const ONCE_WHILE_RUNNING: &str = "one-time requestState presented while its redemption ran";
/// Another client's one-time state presented.
pub const STOLEN_ONCE: &str = "stolen one-time requestState presented";
/// A retry that answered two inputs of one round.
pub const TWO_INPUTS: &str = "retry answering two inputs";
/// A retry that declined an input.
pub const DECLINED: &str = "retry declining an input";

/// The situations a stateless run reached, read from its trace.
pub fn reached(trace: &Trace) -> Vec<&'static str> {
    reached_indexed(&Index::new(trace), trace)
}

/// [`reached`] on a trace already indexed (a hunt indexes it once for the checks and for this).
pub(crate) fn reached_indexed(ix: &Index, trace: &Trace) -> Vec<&'static str> {
    // Whether some execution was running when its mapping was dropped (or closed).
    let mid_run = |closed: bool| {
        ix.execs.values().any(|x| {
            let Some(i) = x.sent else { return false };
            let Some(f) = ix.fate(&ix.sent[i]) else { return false };
            let t = if closed { f.closed.map(|c| c.0) } else { f.dropped.map(|d| d.0) };
            let started = x.at(&ExecStep::Started).map(|s| s.0);
            let ended =
                x.steps.iter().find(|(s, _, _)| matches!(s, ExecStep::Completed | ExecStep::Cancelled)).map(|e| e.1);
            matches!((t, started), (Some(t), Some(s)) if t >= s && ended.is_none_or(|e| t < e))
        })
    };
    let mut effects: BTreeMap<(String, String), usize> = BTreeMap::new();
    for x in ix.execs.values().filter(|x| x.at(&ExecStep::Effect).is_some() && !ix.idempotent(&x.tool)) {
        *effects.entry((x.on_behalf_of.clone().unwrap_or_else(|| x.principal.clone()), x.call.clone())).or_default() +=
            1;
    }
    let how = |s: &crate::check::stateless::Sent| s.state.as_ref().map(|p| p.how.clone());
    let expired = ix.sent.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|p| ix.minted.get(&p.fp).is_some_and(|m| m.lifetime_us.is_some_and(|l| s.t.0 > m.t.0 + l)))
    });
    let once_again = ix.sent.iter().any(|s| {
        how(s) == Some(StateHow::Replayed)
            && s.state.as_ref().is_some_and(|p| ix.minted.get(&p.fp).is_some_and(|m| m.once))
    });
    let retry_reissued = ix
        .sent
        .iter()
        .any(|s| s.attempt == Attempt::Reissue && s.state.as_ref().is_some_and(|p| p.how == StateHow::AsReceived));
    let restarts: Vec<crate::trace::SimTime> = trace
        .iter()
        .filter(|e| matches!(&e.what, crate::trace::What::Step { action: crate::vocab::StepKind::RestartServer, .. }))
        .map(|e| e.t_us)
        .collect();
    let across_restart = ix.sent.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|p| ix.minted.get(&p.fp).is_some_and(|m| restarts.iter().any(|r| m.t < *r && *r < s.t)))
    });
    let once = |s: &crate::check::stateless::Sent| {
        s.state.as_ref().filter(|p| ix.minted.get(&p.fp).is_some_and(|m| m.once)).map(|p| p.fp.clone())
    };
    let once_while_running = ix.sent.iter().any(|s2| {
        let Some(fp) = once(s2) else { return false };
        ix.execs.values().any(|x| {
            let Some(i) = x.sent.filter(|i| ix.sent[*i].seq != s2.seq) else { return false };
            let started = x.at(&ExecStep::Started).map(|s| s.0);
            let ended =
                x.steps.iter().find(|(s, _, _)| matches!(s, ExecStep::Completed | ExecStep::Cancelled)).map(|e| e.1);
            once(&ix.sent[i]).as_ref() == Some(&fp)
                && started.is_some_and(|t| t <= s2.t)
                && ended.is_none_or(|e| s2.t < e)
        })
    });
    let found = [
        mid_run(false),
        mid_run(true),
        ix.sent.iter().any(|s| s.attempt == Attempt::Reissue),
        effects.values().any(|n| *n > 1),
        ix.sent.iter().any(|s| matches!(how(s), Some(StateHow::Stolen { .. }))),
        ix.sent.iter().any(|s| how(s).is_some_and(|h| h.is_tampered())),
        expired,
        once_again,
        retry_reissued,
        across_restart,
        once_while_running,
        ix.sent.iter().any(|s| matches!(how(s), Some(StateHow::Stolen { .. })) && once(s).is_some()),
        ix.sent.iter().any(|s| s.answers.len() >= 2),
        ix.sent.iter().any(|s| s.answers.iter().any(|a| a.declined)),
    ];
    SITUATIONS.iter().zip(found).filter(|(_, f)| *f).map(|(s, _)| *s).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
