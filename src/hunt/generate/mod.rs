//! The seeded scenario generator (swarm testing).
//!
//! From one u64 a ChaCha stream draws a [`Plan`]: owners that connect at the
//! start, server requests and notification bursts at random times, and a
//! fault profile. Swarm testing: each seed enables a random subset of fault
//! kinds, each at its own rate, so some seeds hammer one fault and others mix
//! many. Faults stop at [`FAULTS_END`]; a heal phase follows, with one probe
//! request per owner, and liveness is judged at the end.

mod situations;

pub use situations::ReachKind;

use crate::scenario::{Action, ClientSpec, Dialect, Dur, LastEventId, NetworkConfig, Plan, ServerConfig, Step};
use crate::seed::Seed;
use rand::seq::IndexedRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::time::Duration;

/// Fault kinds a seed may enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The NAT drops every live mapping of an owner silently.
    Rebind,
    /// The NAT drops the mapping of an owner's latest stream silently.
    Sever,
    /// The NAT resets the mapping of an owner's latest stream.
    Reset,
    /// A new client steals an owner's session token and resumes with an id the owner saw.
    Theft,
    /// Like `Theft`, with the owner's credential too.
    TheftWithCredential,
    /// A small retention window and a notification burst that evicts events from it.
    Eviction,
    /// An owner crashes; most of the time it connects again later.
    Crash,
    /// An owner resumes with an old id (one of the first few), often with a
    /// request in the window behind it that it has answered meanwhile.
    ResumeStale,
    /// An owner resumes with an id far ahead of any the server minted (the first id + 500).
    ResumeFuture,
    /// An owner resumes from its last seen id, often right after a silent fault.
    ResumeValid,
}

impl FaultKind {
    /// Every fault kind, in the order a seed draws them.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Rebind,
        FaultKind::Sever,
        FaultKind::Reset,
        FaultKind::Theft,
        FaultKind::TheftWithCredential,
        FaultKind::Eviction,
        FaultKind::Crash,
        FaultKind::ResumeStale,
        FaultKind::ResumeFuture,
        FaultKind::ResumeValid,
    ];
}

/// What sets a stateful dialect's plans apart; the draws ask these, never
/// the dialect's name.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    /// The dialect whose plans these are.
    dialect: Dialect,
    /// Tool calls (whose POST streams carry related requests) and DELETE exist.
    tool_calls: bool,
    /// A resumption names an id a client saw (a session's streams share one
    /// opaque id space), not a number counted from the first id.
    seen_ids: bool,
    /// A late answer is one given after the server timed the request out
    /// (legacy-sse: the request's stream is the uplink, which the client
    /// resumes before it answers).
    late_answer_after_timeout: bool,
}

impl Draws {
    /// legacy-sse's.
    pub(crate) const LEGACY: Draws =
        Draws { dialect: Dialect::LegacySse, tool_calls: false, seen_ids: false, late_answer_after_timeout: true };
    /// streamable-http's.
    pub(crate) const STREAMABLE: Draws =
        Draws { dialect: Dialect::StreamableHttp, tool_calls: true, seen_ids: true, late_answer_after_timeout: false };
}

/// Faults happen before this; the rest of the run is the heal phase.
pub const FAULTS_END: Duration = Duration::from_secs(8);
/// How long a generated plan runs.
pub const DURATION: Duration = Duration::from_secs(30);
pub use super::TICK;
const FIRST_EVENT_ID: u64 = 1000;
/// The request timeout of generated plans.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

/// Draws the (legacy-sse) plan of one seed.
pub fn generate(seed: u64) -> Plan {
    stateful(seed, Draws::LEGACY)
}

/// The stateful plan of one seed (in `dialect`) deployed on `replicas`
/// replicas that share a store, where sessions live: the only stateful
/// deployments in which a correct server keeps every session wherever the
/// balancer sends it. The plan is [`stateful`]'s, with a routing (sticky
/// sessions or the client's address) and up to two partitions between a
/// replica and the store drawn from the seed's own stream
/// (`hunt.deploy`), so that one seed's traffic and faults are the same with
/// and without replicas.
pub fn stateful_deployed(seed: u64, draws: Draws, replicas: u32) -> Plan {
    use crate::scenario::{Deployment, Routing, StoreKind};
    let mut plan = stateful(seed, draws);
    let mut rng = Seed(seed).stream("hunt.deploy");
    let routing = *[Routing::Session, Routing::Source].choose(&mut rng).expect("non-empty");
    plan.deployment = Deployment { replicas, routing, store: StoreKind::Shared, ..Deployment::default() };
    let cuts = rng.random_range(0..=2);
    for _ in 0..cuts {
        let at = Duration::from_millis(rng.random_range(500..FAULTS_END.as_millis() as u64));
        let replica = rng.random_range(1..=replicas);
        let lasts = Some(Duration::from_millis(rng.random_range(1_000..6_000)));
        plan.steps.push(Step::generated(at, Action::Partition { replica, lasts }));
    }
    // Stable: the generated steps keep their order among equal times.
    plan.steps.sort_by_key(|s| s.at);
    plan.description
        .push_str(&format!("; {replicas} replicas routing {}, one shared store, {cuts} partition(s)", routing.name()));
    plan
}

/// Draws the plan of one seed in stateful `dialect` ([`super::generate_in`]
/// draws any dialect's). In streamable-http, some server
/// requests come from tool calls (related requests on the call's POST
/// stream), and replayed ids are ids a client really saw (any server's
/// format); the legacy-sse draws are unchanged.
///
/// The draws happen in a fixed order (owners, fault kinds and rates,
/// clients, traffic, faults, heal probes, then the reach situations from
/// their own stream, then the network): changing that order changes every
/// seed's plan, and so every hunt repro.
pub fn stateful(seed: u64, draws: Draws) -> Plan {
    let mut rng = Seed(seed).stream("hunt.plan");
    let owners = rng.random_range(1..=3usize);
    let mut kinds: Vec<FaultKind> = FaultKind::ALL.iter().copied().filter(|_| rng.random_bool(0.4)).collect();
    if kinds.is_empty() {
        kinds.push(*FaultKind::ALL.choose(&mut rng).expect("non-empty"));
    }
    let rates: BTreeMap<FaultKind, u32> = kinds.iter().map(|k| (*k, rng.random_range(1..=3))).collect();
    let mut d = Draft::new(rng, owners, draws);
    d.traffic();
    for (&kind, &rate) in &rates {
        for _ in 0..rate {
            d.fault(kind);
        }
    }
    d.heal();
    // The later situations, from their own stream (see [`ReachKind`]).
    let mut reach = Seed(seed).stream("hunt.reach");
    let reach_kinds: Vec<ReachKind> =
        ReachKind::ALL.into_iter().filter(|kind| kind.fits(draws) && reach.random_bool(0.2)).collect();
    for &kind in &reach_kinds {
        d.reach(kind, &mut reach);
    }
    let later_kinds = d.reach_from(Seed(seed).stream("hunt.reach2"), &ReachKind::LATER);
    // Each later one from a stream of its own, so the draws above stay as they were.
    let edge_kinds = d.reach_from(Seed(seed).stream("hunt.reach3"), &[ReachKind::StreamableWindowEdge]);
    let retired_kinds = d.reach_from(Seed(seed).stream("hunt.reach4"), &[ReachKind::StaleOverRetired]);
    let inject_kinds = d.reach_from(Seed(seed).stream("hunt.reach5"), &[ReachKind::InjectTool]);
    let narrow_kinds = d.reach_from(
        Seed(seed).stream("hunt.reach6"),
        &[ReachKind::StaleAfterReissueTimeout, ReachKind::ResumeBeforeRequest],
    );
    let faults = kinds.iter().map(|k| format!("{k:?}")).chain(
        reach_kinds
            .iter()
            .chain(&later_kinds)
            .chain(&edge_kinds)
            .chain(&retired_kinds)
            .chain(&inject_kinds)
            .chain(&narrow_kinds)
            .map(|k| format!("{k:?}")),
    );
    d.into_plan(seed, draws.dialect, faults.collect::<Vec<_>>().join(", "))
}

/// A plan being drawn: the main stream, the clients (owners first, then
/// thieves), the steps so far, and what later draws depend on.
struct Draft {
    rng: ChaCha8Rng,
    draws: Draws,
    clients: Vec<ClientSpec>,
    owners: Vec<String>,
    steps: Vec<Step>,
    /// The last request label drawn (`r<n>`).
    label: u32,
    retention: usize,
    fence_delay: Duration,
    thieves: usize,
}

impl Draft {
    /// `owners` owners (alice, bob, carol), each with a drawn think time,
    /// connecting 100 ms apart.
    fn new(mut rng: ChaCha8Rng, owners: usize, draws: Draws) -> Self {
        let names = ["alice", "bob", "carol"];
        let clients: Vec<ClientSpec> = names[..owners]
            .iter()
            .map(|n| ClientSpec {
                name: n.to_string(),
                principal: n.to_string(),
                think_time: ms(rng.random_range(100..3000)),
                heartbeat_timeout: Duration::from_secs(5),
                auto_answer: true,
            })
            .collect();
        let owners: Vec<String> = clients.iter().map(|c| c.name.clone()).collect();
        let mut d = Draft {
            rng,
            draws,
            clients,
            owners,
            steps: Vec::new(),
            label: 0,
            retention: 64,
            fence_delay: Duration::ZERO,
            thieves: 0,
        };
        for (i, o) in d.owners.clone().into_iter().enumerate() {
            d.push(ms(i as u64 * 100), Action::Connect { client: o });
        }
        d
    }

    fn push(&mut self, at: Duration, action: Action) {
        self.steps.push(Step::generated(at, action));
    }

    fn owner(&mut self) -> String {
        self.owners.choose(&mut self.rng).expect("owners").clone()
    }

    /// A server request to `client` at `at` (in streamable-http, half of
    /// them come from a tool call).
    fn request(&mut self, at: Duration, client: &str) {
        self.label += 1;
        let method = ["sampling/createMessage", "roots/list", "elicitation/create"].choose(&mut self.rng);
        let (client, method, label) =
            (client.to_string(), method.expect("non-empty").to_string(), format!("r{}", self.label));
        let action = if self.draws.tool_calls && self.rng.random_bool(0.5) {
            Action::CallTool { client, method, label }
        } else {
            Action::ServerRequest { client, method, label, reissuable: true }
        };
        self.push(at, action);
    }

    /// 1-4 server requests and 0-3 notification bursts at random times.
    fn traffic(&mut self) {
        for _ in 0..self.rng.random_range(1..=4) {
            let at = ms(self.rng.random_range(500..14_000));
            let o = self.owner();
            self.request(at, &o);
        }
        for _ in 0..self.rng.random_range(0..=3) {
            let at = ms(self.rng.random_range(500..14_000));
            let o = self.owner();
            let count = self.rng.random_range(1..=4);
            self.push(at, Action::Notify { client: o, count });
        }
    }

    /// An id the owner saw on its standalone stream (streamable-http), or
    /// the legacy id `nth` after the first.
    fn seen(&self, o: String, nth: u64) -> LastEventId {
        if self.draws.seen_ids {
            LastEventId::Seen { client: o, nth: nth as usize + 1, stream: Default::default() }
        } else {
            LastEventId::Id(FIRST_EVENT_ID + nth)
        }
    }

    /// One fault of `kind` at a random time before [`FAULTS_END`].
    fn fault(&mut self, kind: FaultKind) {
        let at = ms(self.rng.random_range(1_000..FAULTS_END.as_millis() as u64));
        let o = self.owner();
        match kind {
            FaultKind::Rebind => self.push(at, Action::Rebind { client: o }),
            FaultKind::Sever => self.push(at, Action::Sever { client: o }),
            FaultKind::Reset => self.push(at, Action::Reset { client: o }),
            FaultKind::Theft | FaultKind::TheftWithCredential => {
                let auto_answer = self.rng.random_bool(0.5);
                let thief = new_thief(&mut self.thieves, &mut self.clients, auto_answer);
                let credential = kind == FaultKind::TheftWithCredential;
                self.push(at, Action::StealToken { from: o.clone(), to: thief.clone(), credential });
                let nth = self.rng.random_range(0..4);
                let from = self.seen(o, nth);
                let later = at + ms(self.rng.random_range(100..2_000));
                self.push(later, Action::Resume { client: thief, last_event_id: from, expect: None });
            }
            FaultKind::Eviction => {
                self.retention = self.rng.random_range(2..=6);
                let count = self.rng.random_range(4..=12);
                self.push(at, Action::Notify { client: o, count });
            }
            FaultKind::Crash => {
                self.push(at, Action::CrashClient { client: o.clone() });
                if self.rng.random_bool(0.8) {
                    let later = at + ms(self.rng.random_range(500..5_000));
                    self.push(later, Action::Connect { client: o });
                }
            }
            FaultKind::ResumeStale => {
                // A stale cursor is most telling when the window behind it holds
                // a request the client has answered meanwhile.
                let think = self.clients.iter().find(|c| c.name == o).map_or(ms(1000), |c| c.think_time);
                if self.rng.random_bool(0.5) && at > think + ms(2_000) {
                    self.request(at - think - ms(1_500), &o);
                }
                let nth = self.rng.random_range(0..3);
                let last_event_id = self.seen(o.clone(), nth);
                self.push(at, Action::Resume { client: o, last_event_id, expect: None })
            }
            FaultKind::ResumeFuture => self.push(
                at,
                Action::Resume { client: o, last_event_id: LastEventId::Id(FIRST_EVENT_ID + 500), expect: None },
            ),
            FaultKind::ResumeValid => {
                // Most useful right after a silent fault: resume before heartbeats notice.
                if self.rng.random_bool(0.5) {
                    let fault = if self.rng.random_bool(0.5) {
                        Action::Rebind { client: o.clone() }
                    } else {
                        Action::Sever { client: o.clone() }
                    };
                    self.push(at, fault);
                }
                let later = at + ms(self.rng.random_range(200..3_000));
                self.push(later, Action::Resume { client: o, last_event_id: LastEventId::LastSeen, expect: None });
            }
        }
    }

    /// The heal phase: one probe request per owner, well after the faults.
    fn heal(&mut self) {
        for o in self.owners.clone() {
            let at = ms(self.rng.random_range(12_000..15_000));
            self.request(at, &o);
        }
    }

    /// Makes the client think long enough that a request is still pending at the resumes.
    fn slow(&mut self, o: &str) {
        if let Some(c) = self.clients.iter_mut().find(|c| c.name == o) {
            c.think_time = c.think_time.max(ms(2_500));
        }
    }

    /// The plan: steps in time order (steps drawn for the same instant keep
    /// their drawing order), then the network's last two draws.
    fn into_plan(mut self, seed: u64, dialect: Dialect, faults: String) -> Plan {
        self.steps.sort_by_key(|s| s.at);
        let latency_max = ms(self.rng.random_range(5..40));
        let half_open_lifetime = Duration::from_secs(self.rng.random_range(5..20));
        Plan {
            name: format!("hunt-{seed}"),
            description: format!("generated from seed {seed}; faults: {faults}"),
            dialect,
            seed: Seed(seed),
            duration: DURATION,
            server: ServerConfig {
                first_event_id: FIRST_EVENT_ID,
                retention: self.retention,
                heartbeat: Dur(Duration::from_secs(2)),
                fence_grace: Dur(Duration::from_secs(2)),
                fence_delay: Dur(self.fence_delay),
                request_timeout: Dur(REQUEST_TIMEOUT),
                ..ServerConfig::default()
            },
            network: NetworkConfig { tick: TICK, latency_min: ms(5), latency_max, half_open_lifetime },
            deployment: crate::scenario::Deployment::default(),
            clients: self.clients,
            steps: self.steps,
            tools: Vec::new(),
            expect: BTreeMap::new(),
            expect_inherent: BTreeMap::new(),
            source: None,
        }
    }
}

/// Adds the next thief (`thief<n>`, its own principal) to the plan's clients.
fn new_thief(thieves: &mut usize, clients: &mut Vec<ClientSpec>, auto_answer: bool) -> String {
    *thieves += 1;
    let thief = format!("thief{thieves}");
    clients.push(ClientSpec {
        name: thief.clone(),
        principal: thief.clone(),
        think_time: ms(500),
        heartbeat_timeout: Duration::from_secs(5),
        auto_answer,
    });
    thief
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
