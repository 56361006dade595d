//! Live mode: the same scenarios and checks against a real server process,
//! over real sockets on 127.0.0.1, in (scaled) real time.
//!
//! [`run`] starts the server command in its own process group with the
//! environment of `mcpsim-control/1` ([`control`]), waits for it to say
//! `ready`, then plays the plan: one TCP proxy per client plays its NAT (the
//! simulation's NAT code over real sockets, every fault included; a `reset`
//! is a real RST), the simulation's client code dials it, and the step loop
//! of the simulation hands out the steps on the wall clock, scaled by the
//! time scale (the crate's scenario clock). The trace holds the same kinds of events as
//! a simulated one, in scenario time, so every check and report works
//! unchanged; the server's application side (requests issued, outcomes,
//! notifications) comes over the control connection.
//!
//! What live mode gives up: byte-identical replay (real scheduling and real
//! sockets), and `[network]` latencies and tick (loopback is as fast as it
//! is). Hunts play live too (`hunt --live`), shrinking with live runs. The process group is killed when the run ends, however it
//! ends (an error, Ctrl-C, a panic unwinding through here).
//!
//! [`serve`] is the other side: the reference engines served on real TCP,
//! speaking the control protocol (`mcpsim serve`).

mod actors;
pub mod control;
mod deploy;
mod lateness;
mod link;
mod net;
mod process;
mod serve;
mod servers;
mod startup;

pub use serve::{serve, ServeOptions};
pub use startup::interrupted;

use crate::clock;
use crate::error::{Error, Result};
use crate::scenario::{Dialect, Plan, Routing};
use crate::trace::LateStep;
use crate::trace::{LiveInfo, Recorder, Run, SimTime, What};
use crate::world::{record_deployment, record_header, World};
use actors::{LiveHosts, Orders};
use lateness::{injected_step_delay, late_misses, late_timeouts, slow_answers};
use link::{Control, ExecNumbers};
use servers::Servers;
use startup::{ports, Interrupt};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How to run a plan live.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The server command, run with `sh -c`.
    pub command: String,
    /// Real seconds per scenario second (0.1: ten times faster).
    pub time_scale: f64,
    /// How long (real time) the process may take to say `ready`.
    pub ready_timeout: Duration,
    /// The port the server must serve MCP on; a free one when `None`.
    pub port: Option<u16>,
    /// Echo the process's output to stderr as it comes.
    pub echo: bool,
    /// The configuration asked of the adapter (`--event-store`, `--auth`).
    pub config: AdapterConfig,
    /// The slowest time scale a late run is replayed at: a run whose timing
    /// was unreliable is played again at twice its scale, up to this one
    /// (`--max-time-scale`). Only a run still late here is "timing
    /// unreliable". At or below `time_scale`: no replay.
    pub max_time_scale: f64,
}

/// What a live run asks of the server's configuration, passed on in its
/// environment (docs/live-protocol.md section 1). Unset, the adapter keeps
/// its own default; an adapter without such a setting says so on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdapterConfig {
    /// `MCPSIM_EVENT_STORE`: resumability through an event store, or none.
    pub event_store: Option<EventStore>,
    /// `MCPSIM_AUTH`: a bearer-token verifier, or none.
    pub auth: Option<Auth>,
}

/// `MCPSIM_EVENT_STORE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStore {
    /// The SDK's example in-memory store (resumption works).
    Memory,
    /// No event store: most SDKs' default (resumption cannot work).
    None,
}

/// `MCPSIM_AUTH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// No authentication.
    Off,
    /// A bearer-token verifier whose token is the principal's name; sessions
    /// bound to the principal that opened them.
    Bearer,
}

impl AdapterConfig {
    /// The environment variables it sets.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        let mut env = Vec::new();
        if let Some(s) = self.event_store {
            env.push(("MCPSIM_EVENT_STORE", if s == EventStore::Memory { "memory" } else { "none" }.to_string()));
        }
        if let Some(a) = self.auth {
            env.push(("MCPSIM_AUTH", if a == Auth::Off { "off" } else { "bearer" }.to_string()));
        }
        env
    }

    /// The command-line flags that ask for it, each with a leading space.
    pub fn flags(&self) -> String {
        self.environment()
            .iter()
            .map(|(k, v)| format!(" --{} {v}", if *k == "MCPSIM_AUTH" { "auth" } else { "event-store" }))
            .collect()
    }
}

impl LiveOptions {
    /// Options for `command` at time scale 1, with a 10 s readiness bound,
    /// and no replay of a late run.
    pub fn new(command: impl Into<String>) -> Self {
        LiveOptions {
            command: command.into(),
            time_scale: 1.0,
            ready_timeout: Duration::from_secs(10),
            port: None,
            echo: false,
            config: AdapterConfig::default(),
            max_time_scale: 0.0,
        }
    }
}

/// How often (real time) the live step loop looks for due steps and for a
/// process that died.
const LOOP_EVERY: Duration = Duration::from_millis(2);

/// What live mode does differently per dialect: the live layer's one choice
/// of dialect (docs/design.md §7).
pub(crate) struct LiveWire {
    /// The path a client opens first (`mcpsim serve` names it).
    pub(crate) endpoint: &'static str,
    /// Whether HAProxy can route a session to its replica: it learns a
    /// session from a response header, never from a stream's events.
    pub(crate) haproxy_routes_sessions: bool,
}

impl LiveWire {
    pub(crate) fn of(dialect: Dialect) -> LiveWire {
        match dialect {
            // The session is named only in the stream's first event (its `endpoint`).
            Dialect::LegacySse => LiveWire { endpoint: crate::wire::legacy::SSE_PATH, haproxy_routes_sessions: false },
            // `Mcp-Session-Id` is a response header.
            Dialect::StreamableHttp => {
                LiveWire { endpoint: crate::client::streamable::ENDPOINT, haproxy_routes_sessions: true }
            }
            // No sessions (the scenario refuses session routing).
            Dialect::StatelessHttp => LiveWire { endpoint: crate::wire::mrtr::ENDPOINT, haproxy_routes_sessions: true },
        }
    }
}

/// Runs `plan` against the server process `opts.command`.
///
/// Errors before the run starts (the command cannot start, exits or never
/// says `ready`, the port is taken) are `Err` with the process's last output
/// lines. Faults after it started (the process exits or breaks the control
/// protocol, Ctrl-C) end the run early: the `Run` is returned with `aborted`
/// set and the trace up to that point.
pub fn run(plan: &Plan, opts: &LiveOptions) -> Result<Run> {
    if !(opts.time_scale > 0.0 && opts.time_scale.is_finite()) {
        return Err(Error::usage(format!("--time-scale must be a positive number, not {}", opts.time_scale)));
    }
    plan.validate().map_err(|p| Error::usage(format!("plan {:?}: {}", plan.name, p.message)))?;
    if !plan.deployment.is_single()
        && !LiveWire::of(plan.dialect).haproxy_routes_sessions
        && plan.deployment.routing == Routing::Session
    {
        return Err(Error::usage(format!(
            "scenario {:?} routes legacy-sse sessions to their replica: HAProxy learns a session from a response header, and a legacy-sse session is named only in its stream's first event (its `endpoint`), which HAProxy does not read; live, route legacy-sse deployments by source (`routing = \"source\"`), or run it in simulation",
            plan.name
        )));
    }
    if !plan.deployment.is_single() && opts.port.is_some() {
        return Err(Error::usage(format!(
            "scenario {:?} deploys {} replicas: --live-port fixes one server's port, and a deployment starts one per replica behind HAProxy",
            plan.name, plan.deployment.replicas
        )));
    }
    let ceiling = opts.max_time_scale.max(opts.time_scale);
    let mut at = opts.clone();
    let mut earlier = Vec::new();
    loop {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io(format!("cannot start a runtime: {e}")))?;
        let local = tokio::task::LocalSet::new();
        let mut run = local.block_on(&rt, run_async(plan, &at))?;
        let live = run.live.as_mut().expect("a live run has its live info");
        live.max_time_scale = ceiling;
        // A late run is played again, slower, unless it was cut (Ctrl-C,
        // a process that died): then it is judged as far as it went.
        if live.timing_unreliable() && at.time_scale < ceiling && run.aborted.is_none() {
            earlier.push(crate::trace::EarlierTry {
                time_scale: at.time_scale,
                why: live.late_reason().unwrap_or_default(),
            });
            at.time_scale = (at.time_scale * 2.0).min(ceiling);
            continue;
        }
        live.earlier = earlier;
        return Ok(run);
    }
}

async fn run_async(plan: &Plan, opts: &LiveOptions) -> Result<Run> {
    // Listen for Ctrl-C (and SIGTERM) before the process exists: from then
    // on mcpsim must live to kill its process group.
    let mut interrupt = Interrupt::new()?;
    let (port, control) = ports(opts.port).await?;
    let mut servers = Servers::start(plan, opts, port, &control, &mut interrupt).await?;
    let deployed = !plan.deployment.is_single();

    // Scenario time 0 is when the server is ready.
    let _clock = clock::go_live(opts.time_scale);
    let rec = Recorder::with_clock(Rc::new(clock::now));
    let traits = crate::world::ServerTraits {
        authenticates: servers.authenticates,
        unreported_per_stream: 0,
        resume_bounds: None,
    };
    record_header(&rec, plan, &servers.server, plan.seed, traits);
    if deployed {
        record_deployment(&rec, plan, (serve::STORE_TIMEOUT.as_secs_f64() / opts.time_scale * 1e6) as u64);
    }
    let fatal: Rc<RefCell<Option<String>>> = Rc::default();
    let control = Control { fatal: fatal.clone(), scale: opts.time_scale, listener: control };
    let execs: Rc<RefCell<ExecNumbers>> = Rc::default();
    servers.attach(&rec, &control, &execs);
    // What the steps ask of the server processes, for the loop to carry out.
    let orders: Rc<RefCell<Orders>> = Rc::default();
    let mut apps = servers.apps();
    let mut world =
        actors::build(plan, servers.port, &rec, apps.remove(0), orders.clone(), servers.store.clone()).await?;
    if deployed {
        world.set_replicas(apps);
    }
    let mut turns = Turns::new(plan, opts)?;
    let aborted = turns.drive(plan, &mut world, &mut servers, (&orders, opts, &control, &execs), &mut interrupt).await;
    if let Some(why) = &aborted {
        let first = why.lines().next().unwrap_or_default().to_string();
        rec.record(What::ServerStopped { why: first.clone() });
        rec.record(What::RunCut { why: first });
    }
    // The clients stop and the trace is taken before any process is killed:
    // a client must not see the server go away at the end of the run (and
    // the waits below let its tasks run).
    world.sim.stop_all();
    let trace = rec.take();
    // Every process the run started is stopped, and reaped.
    servers.teardown().await;
    let notes = unreported(plan, &trace);
    let late_misses = late_misses(plan, &trace, !turns.late_steps.is_empty());
    let mut late_waits = late_timeouts(&trace, &turns.stalls);
    // Behind a balancer, replicas wait for their store and for each other
    // by design (an answer for a session another replica holds goes through
    // the store): their answers' speed says nothing of the machine's.
    if !deployed {
        late_waits.extend(slow_answers(&trace, turns.lateness_bound));
    }
    Ok(Run {
        scenario: plan.name.clone(),
        server: servers.server.clone(),
        by_name: false,
        seed: plan.seed,
        source: plan.source.clone(),
        duration: plan.duration,
        simulated: plan.duration,
        trace,
        aborted,
        live: Some(LiveInfo {
            command: opts.command.clone(),
            flags: opts.config.flags(),
            time_scale: opts.time_scale,
            notes,
            late_steps: turns.late_steps,
            lateness_bound: turns.lateness_bound,
            late_misses,
            late_waits,
            max_time_scale: opts.time_scale,
            earlier: Vec::new(),
        }),
    })
}

/// A live run's step loop, and what it learns of the machine's timing on
/// the way: the same turn as the simulation's ([`World::due`], then
/// [`World::apply`]) on the wall clock, with the servers' own work between
/// turns.
struct Turns {
    /// The loop's period, in scenario time.
    tick: Duration,
    /// How late a step may be handed over and still count as on time.
    lateness_bound: Duration,
    /// The steps handed over later than that.
    late_steps: Vec<LateStep>,
    /// When the loop itself woke later than that (from, to).
    stalls: Vec<(Duration, Duration)>,
    /// A test hook: a step to hand over late, and by how much.
    injected: Option<(usize, Duration)>,
}

/// What the loop hands the servers each turn: the steps' orders, the
/// options, the control connection and the execution numbers.
type ServerWork<'a> = (&'a Rc<RefCell<Orders>>, &'a LiveOptions, &'a Control, &'a Rc<RefCell<ExecNumbers>>);

impl Turns {
    fn new(plan: &Plan, opts: &LiveOptions) -> Result<Turns> {
        Ok(Turns {
            tick: LOOP_EVERY.div_f64(opts.time_scale),
            lateness_bound: (plan.network.tick * 2).max(Duration::from_millis(250)),
            late_steps: Vec::new(),
            stalls: Vec::new(),
            injected: injected_step_delay()?,
        })
    }

    /// Plays `plan` on `world` until its end; returns why it stopped early, if it did.
    async fn drive(
        &mut self,
        plan: &Plan,
        world: &mut World<LiveHosts>,
        servers: &mut Servers,
        (orders, opts, control, execs): ServerWork<'_>,
        interrupt: &mut Interrupt,
    ) -> Option<String> {
        loop {
            let now = clock::now().unwrap_or_default();
            if now >= plan.duration {
                return None;
            }
            for (index, at) in world.due(plan, now, self.tick) {
                self.hand_over(world, plan, index, at).await;
            }
            if let Err(why) = servers.carry_out(orders, opts, control, execs, (&world.rec, now)).await {
                return Some(why);
            }
            if let Some(why) = servers.failure(&control.fatal, now).await {
                return Some(why);
            }
            let slept = clock::now().unwrap_or_default();
            tokio::select! {
                biased;
                why = interrupt.recv() => return Some(format!("{why} at {}", SimTime::from_duration(now))),
                _ = tokio::time::sleep(LOOP_EVERY) => {}
            }
            // The loop's own wake-up is a probe of the machine: a sleep that
            // overran by more than a step may is a stall, and a timeout that ran
            // out during one rests on the machine, not on the server.
            let woke = clock::now().unwrap_or_default();
            if woke > slept + self.tick + self.lateness_bound {
                self.stalls.push((slept, woke));
            }
        }
    }

    /// Applies step `index`, noting it when it is handed over late: from
    /// when it was meant to run to now (a due time still ahead waits inside
    /// the actor, on time).
    async fn hand_over(&mut self, world: &mut World<LiveHosts>, plan: &Plan, index: usize, at: Duration) {
        if let Some(delay) = self.injected.filter(|(i, _)| *i == index).map(|(_, d)| d) {
            tokio::time::sleep(delay).await;
        }
        let handed = clock::now().unwrap_or_default();
        if let Some(intended) = world.intended(index) {
            if handed > intended + self.lateness_bound {
                self.late_steps.push(LateStep {
                    index,
                    action: plan.steps[index].action.kind().as_str().to_string(),
                    due: intended,
                    ran: handed,
                });
            }
        }
        world.apply(&plan.steps[index], index, at);
    }
}

/// Whether the process `server`, which declared `dialects` in `ready`,
/// speaks `plan`'s dialect: an error of kind `Dialect` when it does not. A
/// `ready` without the field is taken to speak every dialect, with a
/// warning (once per mcpsim process).
fn speaks(server: &str, dialects: Option<&[String]>, plan: &Plan) -> Result<()> {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(names) = dialects else {
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "warning: the server process {server:?} names no dialects in its `ready` message; taking it to speak \
                 every dialect (add \"dialects\": [\"{}\"] to say which; docs/live-protocol.md)",
                plan.dialect.name()
            );
        }
        return Ok(());
    };
    if let Some(bad) = names.iter().find(|n| Dialect::from_name(n).is_none()) {
        return Err(Error::io(format!(
            "the server process {server:?} declares an unknown dialect {bad:?} in `ready` (known: {})",
            Dialect::ALL.map(|d| d.name()).join(", ")
        )));
    }
    if names.iter().any(|n| n == plan.dialect.name()) {
        return Ok(());
    }
    let list: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    Err(Error::new(
        crate::error::ErrorKind::Dialect,
        format!(
            "the server process {server:?} speaks only dialect {}; scenario {:?} is {:?}",
            if list.is_empty() { "(none)".to_string() } else { list.join(" and ") },
            plan.name,
            plan.dialect.name()
        ),
    ))
}

/// What the process never told, said plainly: the checks that need it judge
/// only what was reported.
fn unreported(plan: &Plan, trace: &crate::trace::Trace) -> Vec<String> {
    let mut notes = Vec::new();
    let issued: Vec<&str> = trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::RequestIssued { label, .. } => Some(label.as_str()),
            _ => None,
        })
        .collect();
    if !plan.dialect.has_sessions() {
        let calls = plan.steps.iter().any(|s| matches!(s.action, crate::scenario::Action::Call { .. }));
        let reported = |f: fn(&What) -> bool| trace.events.iter().any(|e| f(&e.what));
        if calls && !reported(|w| matches!(w, What::Execution { .. })) {
            notes.push(
                "the server never reported a tool execution: exactly-once and cancellation see only what reached \
                 the clients"
                    .into(),
            );
        }
        let minted = plan.tools.iter().any(|t| !t.input.is_empty());
        if calls && minted && !reported(|w| matches!(w, What::StateMinted { .. })) {
            notes.push(
                "the server never reported minting a requestState: state-binding and state-integrity judge only \
                 what the clients saw"
                    .into(),
            );
        }
        let changes = plan.steps.iter().any(|s| matches!(s.action, crate::scenario::Action::ChangeTools));
        if changes && !reported(|w| matches!(w, What::ToolsChanged { .. })) {
            notes.push("the server never reported a tool-list change: liveness cannot follow them".into());
        }
        return notes;
    }
    let notifies = plan.steps.iter().any(|s| matches!(s.action, crate::scenario::Action::Notify { .. }));
    if notifies && !trace.events.iter().any(|e| matches!(e.what, What::Notified { .. })) {
        notes.push(
            "the server never reported the event ids of its notifications: replay-integrity sees only the events \
             that reached a socket"
                .into(),
        );
    }
    for step in &plan.steps {
        if let crate::scenario::Action::ServerRequest { label, .. } = &step.action {
            if !issued.contains(&label.as_str()) {
                notes.push(format!(
                    "the server never reported issuing {label}: liveness and in-flight disposition cannot follow it"
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod config_tests {
    use super::*;

    /// Issue "A gate that holds under CI load", item 1: a timeout that ran
    /// out while the step loop stalled rests on the machine; one whose
    /// window saw no stall rests on the server.
    #[test]
    fn a_timeout_is_late_only_when_the_machine_stalled_during_it() {
        use crate::trace::{Event, Outcome, Trace};
        use crate::wire::jsonrpc::RpcId;
        let at = |seq: u64, s: f64, what: What| Event { seq, t_us: SimTime((s * 1e6) as u64), what };
        let trace = Trace {
            events: vec![
                at(
                    0,
                    12.0,
                    What::UplinkSilent { client: "alice".into(), conn: crate::trace::ConnId(3), silent_ms: 5_000 },
                ),
                at(
                    1,
                    40.0,
                    What::RequestOutcome {
                        label: "req-1".into(),
                        id: RpcId::Num(1),
                        outcome: Outcome::TimedOut,
                        new_id: None,
                        detail: String::new(),
                    },
                ),
            ],
        };
        let s = |a: f64, b: f64| (Duration::from_secs_f64(a), Duration::from_secs_f64(b));
        assert!(late_timeouts(&trace, &[]).is_empty());
        // A stall before the head's wait (7–12 s) and before req-1's bound (300 s, from 0): only req-1's.
        let late = late_timeouts(&trace, &[s(2.0, 3.0)]);
        assert_eq!(late, vec!["req-1 timed out at 40.000 s, and the machine stalled from 2.000 s to 3.000 s"]);
        // A stall within the head's wait: both.
        let late = late_timeouts(&trace, &[s(8.0, 8.5)]);
        assert_eq!(late.len(), 2, "{late:?}");
        assert!(
            late[0].starts_with("alice's conn 3 heard nothing for 5000 ms of scenario time at 12.000 s"),
            "{late:?}"
        );
    }

    /// A 202 or an `initialize` answer slower than the bound says the server
    /// could not keep up, unless a restart fell inside the wait; a slow GET
    /// (a resumption may wait for a fence by design) says nothing.
    #[test]
    fn a_slow_answer_where_no_server_waits_is_the_machines() {
        use crate::trace::{ConnId, Event, Trace};
        use crate::wire::jsonrpc::RpcId;
        let at = |seq: u64, ms: u64, what: What| Event { seq, t_us: SimTime(ms * 1000), what };
        let req = |conn: u32, method: &str, rpc: Option<&str>| What::HttpRequest {
            client: "alice".into(),
            conn: ConnId(conn),
            method: method.into(),
            path: "/mcp".into(),
            last_event_id: None,
            session: None,
            credential: None,
            rpc: rpc.map(|m| crate::trace::Sent { id: RpcId::Num(1), method: m.into(), call: None }),
        };
        let resp = |conn: u32, status: u16| What::HttpResponse {
            client: "alice".into(),
            conn: ConnId(conn),
            status,
            content_type: None,
        };
        let bound = Duration::from_millis(250);
        // initialize answered in 0.3 s; a 202 in 0.1 s; a GET in 2 s; a 202 in 0.4 s.
        let t = Trace {
            events: vec![
                at(0, 0, req(1, "POST", Some("initialize"))),
                at(1, 300, resp(1, 200)),
                at(2, 1000, req(2, "POST", None)),
                at(3, 1100, resp(2, 202)),
                at(4, 2000, req(3, "GET", None)),
                at(5, 4000, resp(3, 200)),
                at(6, 5000, req(4, "POST", None)),
                at(7, 5400, resp(4, 202)),
            ],
        };
        assert_eq!(
            slow_answers(&t, bound),
            vec![
                "the server took 0.300 s to answer alice's POST on conn 1 (sent at 0.000 s)",
                "the server took 0.400 s to answer alice's POST on conn 4 (sent at 5.000 s)",
            ]
        );
        // A 202 that waited across a restart's return.
        let t = Trace {
            events: vec![
                at(0, 1000, req(2, "POST", None)),
                at(1, 1500, What::ServerBack { replicas: Vec::new() }),
                at(2, 1800, resp(2, 202)),
            ],
        };
        assert!(slow_answers(&t, bound).is_empty());
    }

    #[test]
    fn an_adapter_configuration_reaches_the_environment_and_the_repro_flags() {
        assert!(AdapterConfig::default().environment().is_empty());
        assert_eq!(AdapterConfig::default().flags(), "");
        let c = AdapterConfig { event_store: Some(EventStore::None), auth: Some(Auth::Bearer) };
        assert_eq!(
            c.environment(),
            vec![("MCPSIM_EVENT_STORE", "none".to_string()), ("MCPSIM_AUTH", "bearer".to_string())]
        );
        assert_eq!(c.flags(), " --event-store none --auth bearer");
        let c = AdapterConfig { event_store: Some(EventStore::Memory), auth: Some(Auth::Off) };
        assert_eq!(c.flags(), " --event-store memory --auth off");
    }
}
