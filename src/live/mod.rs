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

pub mod control;
mod deploy;
mod net;
mod process;
mod serve;

pub use serve::{serve, ServeOptions};

use crate::clock;
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::{Dialect, Plan, Routing};
use crate::server::{AppHook, AppReporter};
use crate::trace::LateStep;
use crate::trace::{LiveInfo, Recorder, Run, SimTime, What};
use crate::world::nat::{Fault, Nat, ServedBy};
use crate::world::{record_header, start_client, Hosts, Schedule, World};
use control::{FromServer, ToServer, PROTOCOL};
use process::{describe_exit, Process};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

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

/// One server process of a live run (one per replica in a deployment):
/// its environment, the process, and the tasks serving its control
/// connection.
struct Replica {
    env: Vec<(&'static str, String)>,
    process: Process,
    tasks: Option<ControlTasks>,
    app: AppHook,
}

impl Replica {
    /// Stops its control tasks and kills its process, and reaps it.
    async fn stop(&mut self) {
        if let Some(t) = self.tasks.take() {
            t.abort();
        }
        self.process.kill();
        let _ = self.process.exited().await;
        self.process.settle().await;
    }
}

/// Execution numbers as the trace shows them: each process numbers its own
/// from 1 (again after a restart); the trace numbers every execution of
/// the run once, in the order they are first reported.
#[derive(Default)]
struct ExecNumbers {
    next: u32,
    /// (replica index, life, the process's own number) → the trace's.
    map: BTreeMap<(usize, u32, u32), u32>,
}

impl ExecNumbers {
    fn number(&mut self, replica: usize, life: u32, own: u32) -> u32 {
        *self.map.entry((replica, life, own)).or_insert_with(|| {
            self.next += 1;
            self.next
        })
    }
}

async fn run_async(plan: &Plan, opts: &LiveOptions) -> Result<Run> {
    // Listen for Ctrl-C (and SIGTERM) before the process exists: from then
    // on mcpsim must live to kill its process group.
    let mut interrupt = Interrupt::new()?;
    let (mut port, control) = ports(opts.port).await?;
    let control_port = control.local_addr().map_err(|e| Error::io(e.to_string()))?.port();
    let deployed = !plan.deployment.is_single();
    // A deployment: Redis and the store links first, then the replicas, then HAProxy in front.
    let (store, mut slots) = if deployed {
        let (store, slots) = deploy::LiveStore::start(&plan.deployment, async || free_port().await).await?;
        (Some(Rc::new(RefCell::new(store))), slots)
    } else {
        (None, vec![deploy::ReplicaSlot { port, store: None }])
    };
    // The replicas share one clock origin, so that a state's expiry means the same on each.
    let origin_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let mut replicas: Vec<Replica> = Vec::new();
    let mut hellos = Vec::new();
    for (i, slot) in slots.iter_mut().enumerate() {
        // A port found free can be taken by another process before the
        // server binds it (a parallel run's own pick): a start that fails
        // on it gets another port, twice at most. A port the user fixed
        // (--live-port) is never changed.
        let mut retries = if opts.port.is_some() { 0 } else { 2 };
        // A start that misses the ready timeout (a loaded machine: two
        // Node or Python processes starting at once) is tried once more,
        // with twice the time.
        let mut ready_timeout = opts.ready_timeout;
        let mut slow_start_retried = false;
        let (env, process, ((server, dialects, authenticates), lines, writer)) = loop {
            let mut env = control::environment(
                slot.port,
                control_port,
                plan.dialect,
                &plan.server,
                &plan.tools,
                opts.time_scale,
                plan.seed.0,
            );
            env.extend(opts.config.environment());
            if deployed {
                env.push(("MCPSIM_CLOCK_ORIGIN_MS", origin_ms.to_string()));
                env.push(("MCPSIM_REPLICA", (i + 1).to_string()));
                env.push(("MCPSIM_REPLICAS", plan.deployment.replicas.to_string()));
            }
            if let Some(url) = &slot.store {
                env.push(("MCPSIM_STORE", url.clone()));
            }
            let mut process = Process::spawn(&opts.command, &env, opts.echo)
                .map_err(|e| Error::io(format!("cannot start the server command `{}`: {e}", opts.command)))?;
            let started = tokio::select! {
                biased;
                why = interrupt.recv() => return Err(Error::io(format!("{why} before the server process was ready"))),
                r = ready(&control, &mut process, opts, ready_timeout) => r,
            };
            match started {
                Ok(hello) => break (env, process, hello),
                Err(e) if !slow_start_retried && e.to_string().contains(NOT_READY) => {
                    slow_start_retried = true;
                    ready_timeout *= 2;
                    eprintln!(
                        "note: {} did not say `ready` within {:?}; starting it once more, with {:?}",
                        whose(deployed, i),
                        opts.ready_timeout,
                        ready_timeout
                    );
                    process.kill();
                    let _ = process.exited().await;
                }
                Err(e) if retries > 0 && port_was_taken(&e) => {
                    retries -= 1;
                    process.kill();
                    let _ = process.exited().await;
                    slot.port = free_port().await?;
                    if !deployed {
                        port = slot.port;
                    }
                }
                Err(e) => return Err(e),
            }
        };
        speaks(&server, dialects.as_deref(), plan)?;
        hellos.push((server, lines, writer, authenticates));
        replicas.push(Replica { env, process, tasks: None, app: AppHook::new(Inbox::new(), AppReporter::detached()) });
    }
    let mut balancer = None;
    if deployed {
        let ports: Vec<u16> = slots.iter().map(|s| s.port).collect();
        balancer = Some(tokio::select! {
            biased;
            why = interrupt.recv() => return Err(Error::io(format!("{why} before the load balancer was ready"))),
            r = deploy::Balancer::start(&plan.deployment, port, &ports, opts.time_scale) => r?,
        });
    }
    let server = hellos[0].0.clone();
    // Every replica runs the same command: the first one's word holds.
    let authenticates = hellos[0].3.unwrap_or(true);

    // Scenario time 0 is when the server is ready.
    let _clock = clock::go_live(opts.time_scale);
    let rec = Recorder::with_clock(Rc::new(clock::now));
    let traits = crate::world::ServerTraits { authenticates, unreported_per_stream: 0, resume_bounds: None };
    record_header(&rec, plan, &server, plan.seed, traits);
    if deployed {
        rec.record(What::DeploymentStarted {
            replicas: plan.deployment.replicas,
            routing: plan.deployment.routing.name().to_string(),
            store: plan.deployment.store.name().to_string(),
            store_timeout_us: (plan.deployment.store == crate::scenario::StoreKind::Shared)
                .then(|| (serve::STORE_TIMEOUT.as_secs_f64() / opts.time_scale * 1e6) as u64),
        });
    }
    let fatal: Rc<RefCell<Option<String>>> = Rc::default();
    let control = Control { fatal: fatal.clone(), scale: opts.time_scale, listener: control };
    let execs: Rc<RefCell<ExecNumbers>> = Rc::default();
    for (i, (r, (_, lines, writer, _))) in replicas.iter_mut().zip(hellos).enumerate() {
        let report =
            if deployed { AppReporter::for_replica(rec.clone(), i as u32 + 1) } else { AppReporter::new(rec.clone()) };
        r.app = AppHook::new(Inbox::new(), report);
        r.tasks = Some(control.spawn(&r.app, writer, lines, (i, 1), &execs));
    }
    // What the steps ask of the replicas, each one's life, and which are down (crashed).
    let orders: Rc<RefCell<Orders>> = Rc::default();
    let mut lives = vec![1u32; replicas.len()];
    let mut down = vec![false; replicas.len()];

    let mut world = build(plan, port, &rec, replicas[0].app.clone(), orders.clone(), store.clone()).await?;
    if deployed {
        world.set_replicas(replicas[1..].iter().map(|r| r.app.clone()).collect());
    }
    let mut schedule = Schedule::new(plan.steps.len());
    let tick = LOOP_EVERY.div_f64(opts.time_scale);
    let lateness_bound = (plan.network.tick * 2).max(Duration::from_millis(250));
    let mut late_steps = Vec::new();
    let mut stalls: Vec<(Duration, Duration)> = Vec::new();
    let injected = injected_step_delay()?;
    let mut aborted = None;
    'run: loop {
        let now = clock::now().unwrap_or_default();
        if now >= plan.duration {
            break;
        }
        world.heal_due(now);
        for (index, at) in schedule.due(plan, &rec, now, tick) {
            if let Some(delay) = injected.filter(|(i, _)| *i == index).map(|(_, d)| d) {
                tokio::time::sleep(delay).await;
            }
            // A step's lateness: from when it was meant to run to when the
            // loop hands it over (a due time still ahead waits inside the
            // actor, on time).
            let handed = clock::now().unwrap_or_default();
            if let Some(intended) = schedule.intended(index) {
                if handed > intended + lateness_bound {
                    late_steps.push(LateStep {
                        index,
                        action: plan.steps[index].action.kind().as_str().to_string(),
                        due: intended,
                        ran: handed,
                    });
                }
            }
            world.apply(&plan.steps[index], index, at);
        }
        let (crash, drain) = {
            let mut o = orders.borrow_mut();
            (std::mem::take(&mut o.crash), std::mem::take(&mut o.drain))
        };
        // crash-replica: the process is killed and stays down; HAProxy's
        // health check takes it out of rotation.
        for i in crash {
            replicas[i].stop().await;
            down[i] = true;
        }
        for i in drain {
            if let Some(b) = &balancer {
                if let Err(why) = b.drain(i as u32 + 1).await {
                    aborted = Some(format!("{why} (at {})", SimTime::from_duration(now)));
                    break 'run;
                }
            }
        }
        let which: Vec<usize> = std::mem::take(&mut orders.borrow_mut().restart).into_iter().collect();
        if !which.is_empty() {
            // restart-server (every process) or restart-replica (one): each is
            // killed and started again, with nothing of its memory; each must
            // say `ready` again. Meanwhile the NATs hold new connections (a
            // simulated restart takes no time).
            let gate = orders.borrow().gate.clone();
            gate.close();
            for &i in &which {
                replicas[i].stop().await;
            }
            for &i in &which {
                let r = &mut replicas[i];
                lives[i] += 1;
                down[i] = false;
                let life = lives[i];
                let mut env = r.env.clone();
                env.push(("MCPSIM_LIFE", life.to_string()));
                r.process = match Process::spawn(&opts.command, &env, opts.echo) {
                    Ok(p) => p,
                    Err(e) => {
                        aborted = Some(format!("cannot restart the server command `{}`: {e}", opts.command));
                        break 'run;
                    }
                };
                match ready(&control.listener, &mut r.process, opts, opts.ready_timeout * 2).await {
                    Ok((_hello, lines, writer)) => {
                        r.tasks = Some(control.spawn(&r.app, writer, lines, (i, life), &execs));
                        // Back in HAProxy's rotation before the run goes on (its
                        // health check took it out while it restarted).
                        let check = crate::world::balancer::HEALTH_CHECK.mul_f64(opts.time_scale);
                        if let Some(b) = &balancer {
                            if !b.wait_up(i as u32 + 1, check * 3 + Duration::from_secs(1)).await {
                                aborted = Some(format!(
                                    "haproxy (the load balancer) did not see {} up again after its restart",
                                    whose(deployed, i)
                                ));
                                break 'run;
                            }
                        }
                    }
                    Err(e) => {
                        aborted = Some(format!("{} did not come back after its restart: {e}", whose(deployed, i)));
                        break 'run;
                    }
                }
            }
            rec.record(What::ServerBack {
                replicas: if deployed { which.iter().map(|&i| i as u32 + 1).collect() } else { Vec::new() },
            });
            gate.open();
        }
        if let Some(why) = fatal.borrow_mut().take() {
            let tails: Vec<String> = replicas.iter().map(|r| r.process.tail()).collect();
            aborted = Some(format!(
                "{why} (at {})\nits last output lines:\n{}",
                SimTime::from_duration(now),
                tails.join("\n  --\n")
            ));
            break;
        }
        for (i, r) in replicas.iter_mut().enumerate().filter(|(i, _)| !down[*i]) {
            if let Some(status) = r.process.try_exited() {
                r.process.settle().await;
                aborted = Some(format!(
                    "{} {} at {}, before the scenario ended\nits last output lines:\n{}",
                    whose(deployed, i),
                    describe_exit(status),
                    SimTime::from_duration(clock::now().unwrap_or_default()),
                    r.process.tail()
                ));
                break 'run;
            }
        }
        let part_died =
            balancer.as_mut().and_then(|b| b.died()).or_else(|| store.as_ref().and_then(|s| s.borrow_mut().died()));
        if let Some(why) = part_died {
            aborted = Some(format!("{why} (at {})", SimTime::from_duration(now)));
            break;
        }
        let slept = clock::now().unwrap_or_default();
        tokio::select! {
            biased;
            why = interrupt.recv() => {
                aborted = Some(format!("{why} at {}", SimTime::from_duration(now)));
                break;
            }
            _ = tokio::time::sleep(LOOP_EVERY) => {}
        }
        // The loop's own wake-up is a probe of the machine: a sleep that
        // overran by more than a step may is a stall, and a timeout that ran
        // out during one rests on the machine, not on the server.
        let woke = clock::now().unwrap_or_default();
        if woke > slept + tick + lateness_bound {
            stalls.push((slept, woke));
        }
    }
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
    for r in replicas.iter_mut() {
        r.process.kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), r.process.exited()).await;
    }
    if let Some(b) = balancer.as_mut() {
        b.stop().await;
    }
    if let Some(s) = &store {
        let stopping = s.borrow_mut().take_redis();
        if let Some(mut redis) = stopping {
            redis.kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), redis.exited()).await;
        }
    }
    let notes = unreported(plan, &trace);
    let late_misses = late_misses(plan, &trace, !late_steps.is_empty());
    let mut late_waits = late_timeouts(&trace, &stalls);
    // Behind a balancer, replicas wait for their store and for each other
    // by design (an answer for a session another replica holds goes through
    // the store): their answers' speed says nothing of the machine's.
    if !deployed {
        late_waits.extend(slow_answers(&trace, lateness_bound));
    }
    Ok(Run {
        scenario: plan.name.clone(),
        server,
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
            late_steps,
            lateness_bound,
            late_misses,
            late_waits,
            max_time_scale: opts.time_scale,
            earlier: Vec::new(),
        }),
    })
}

/// The timeouts of a live run that ran out while the machine stalled (the
/// step loop woke later than a step may run late): a response head the
/// client waited for, a stream it found silent, a server request that timed
/// out. Each rests on the machine's speed, so the run's verdicts are not
/// counted as they are. In words, first to last.
fn late_timeouts(trace: &crate::trace::Trace, stalls: &[(Duration, Duration)]) -> Vec<String> {
    use crate::trace::Outcome;
    if stalls.is_empty() {
        return Vec::new();
    }
    let stalled = |from: u64, to: u64| {
        stalls
            .iter()
            .find(|(a, b)| (a.as_micros() as u64) < to && (b.as_micros() as u64) > from)
            .map(|(a, b)| (SimTime::from_duration(*a), SimTime::from_duration(*b)))
    };
    let bound = trace.events.iter().find_map(|e| match &e.what {
        What::RunStarted { liveness_bound_us, .. } => Some(*liveness_bound_us),
        _ => None,
    });
    let mut out = Vec::new();
    for e in &trace.events {
        let (from, what) = match &e.what {
            What::UplinkSilent { client, conn, silent_ms } => (
                e.t_us.0.saturating_sub(silent_ms * 1000),
                format!("{client}'s conn {conn} heard nothing for {silent_ms} ms of scenario time"),
            ),
            What::RequestOutcome { label, outcome: Outcome::TimedOut, .. } => {
                (e.t_us.0.saturating_sub(bound.unwrap_or(u64::MAX)), format!("{label} timed out"))
            }
            _ => continue,
        };
        if let Some((a, b)) = stalled(from, e.t_us.0) {
            out.push(format!("{what} at {}, and the machine stalled from {a} to {b}", e.t_us));
        }
    }
    out
}

/// What the server process answered later than a step may run late, where
/// no server waits by design: the 202 that accepts a client's answer or
/// notification, and the answer to `initialize`. A server slower than that
/// could not keep up (the machine starved it), and then the order in which
/// it took two requests, which verdicts rest on, is the machine's: found
/// under load, where the TypeScript SDK took a resumption after an answer
/// sent later and replayed the answered request (correlation-consistency),
/// with no step late. A request in flight across a restart, a crash, a
/// drain or a store partition is left out (the server may wait for those),
/// and so are deployments (the caller's: an answer for a session another
/// replica holds waits for the store). In words, first to last.
fn slow_answers(trace: &crate::trace::Trace, bound: Duration) -> Vec<String> {
    use crate::vocab::StepKind;
    // A partitioned replica waits for its store on every write until it heals.
    if trace.events.iter().any(|e| matches!(&e.what, What::Step { action: StepKind::Partition, .. })) {
        return Vec::new();
    }
    let bound_us = bound.as_micros() as u64;
    // The instants around which a server may wait by design.
    let waits: Vec<u64> = trace
        .events
        .iter()
        .filter(|e| match &e.what {
            What::Step { action, .. } => matches!(
                action,
                StepKind::RestartServer | StepKind::RestartReplica | StepKind::CrashReplica | StepKind::Drain
            ),
            What::ServerBack { .. } | What::ServerStopped { .. } => true,
            _ => false,
        })
        .map(|e| e.t_us.0)
        .collect();
    let mut sent: BTreeMap<(&str, crate::trace::ConnId), (u64, &str, bool)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in &trace.events {
        match &e.what {
            What::HttpRequest { client, conn, method, rpc, .. } => {
                let init = rpc.as_ref().is_some_and(|r| r.method == "initialize");
                sent.insert((client.as_str(), *conn), (e.t_us.0, method.as_str(), init));
            }
            What::HttpResponse { client, conn, status, .. } => {
                let Some((t, method, init)) = sent.remove(&(client.as_str(), *conn)) else { continue };
                let took = e.t_us.0.saturating_sub(t);
                if (*status == 202 || init) && took > bound_us && !waits.iter().any(|w| (t..=e.t_us.0).contains(w)) {
                    out.push(format!(
                        "the server took {:.3} s to answer {client}'s {method} on conn {conn} (sent at {})",
                        took as f64 / 1e6,
                        SimTime(t)
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// The steps of a live run that acted on nothing (and may not) for a reason
/// lateness explains: the run had late steps (`late`), or what the step
/// needed was on its way and came after it. For a resume with no id to
/// resume from: the client whose ids it takes received an event with an id
/// later. For a NAT fault that found nothing to cut: one of the client's
/// requests was in flight at the step (sent before it, answered after it).
/// A miss lateness does not explain (a step for a crashed client, a fault
/// on a feature the server does not offer) stays a miss, and the run is
/// not met.
fn late_misses(plan: &Plan, trace: &crate::trace::Trace, late: bool) -> Vec<String> {
    use crate::scenario::{Action, LastEventId};
    let explained = |m: &crate::trace::MissedStep| {
        let Some(step) = plan.steps.get(m.index) else { return false };
        match &step.action {
            Action::Resume { client, last_event_id, .. } => {
                let by = match last_event_id {
                    LastEventId::Seen { client, .. } => client,
                    _ => client,
                };
                trace
                    .events
                    .iter()
                    .filter(|e| e.t_us > m.t)
                    .any(|e| matches!(&e.what, What::SseEvent { client, id: Some(_), .. } if client == by))
            }
            Action::Rebind { client } | Action::Sever { client } | Action::Reset { client } => {
                let sent: Vec<crate::trace::ConnId> = trace
                    .events
                    .iter()
                    .filter(|e| e.t_us <= m.t)
                    .filter_map(|e| match &e.what {
                        What::HttpRequest { client: c, conn, .. } if c == client => Some(*conn),
                        _ => None,
                    })
                    .collect();
                trace.events.iter().filter(|e| e.t_us > m.t).any(|e| {
                    matches!(&e.what, What::HttpResponse { client: c, conn, .. } if c == client && sent.contains(conn))
                })
            }
            _ => false,
        }
    };
    crate::trace::missed_steps(plan, trace)
        .into_iter()
        .filter(|m| !m.allowed && (late || explained(m)))
        .map(|m| m.line())
        .collect()
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

/// A test hook: `MCPSIM_INJECT_STEP_DELAY=<step index>:<milliseconds>`
/// stalls the live step loop that long (real time) before it hands that
/// step over, as an overloaded machine would. It lets a test prove that a
/// late step makes the run "timing unreliable" without loading the machine.
fn injected_step_delay() -> Result<Option<(usize, Duration)>> {
    let Some(v) = std::env::var_os("MCPSIM_INJECT_STEP_DELAY") else { return Ok(None) };
    let v = v.to_string_lossy();
    let parsed = v.split_once(':').and_then(|(i, ms)| Some((i.parse().ok()?, Duration::from_millis(ms.parse().ok()?))));
    parsed.map(Some).ok_or_else(|| {
        Error::usage(format!("MCPSIM_INJECT_STEP_DELAY={v:?}: expected <step index>:<milliseconds>, e.g. 2:1500"))
    })
}

/// The first Ctrl-C or SIGTERM this process got, once a live run listened
/// for them: one listener for the process, so that one Ctrl-C stops every
/// run in flight and no run starts after it.
static SIGNALLED: std::sync::Mutex<Option<tokio::sync::watch::Receiver<Option<&'static str>>>> =
    std::sync::Mutex::new(None);

/// Whether a Ctrl-C (or SIGTERM) came since a live run first listened:
/// its words ("interrupted (Ctrl-C)"). A gate or hunt starts no run after it.
pub fn interrupted() -> Option<&'static str> {
    SIGNALLED.lock().ok()?.as_ref().and_then(|rx| *rx.borrow())
}

/// The process's signal listener, started by the first live run: a thread
/// of its own that records the first signal for every run to see.
fn signals() -> Result<tokio::sync::watch::Receiver<Option<&'static str>>> {
    let mut slot = SIGNALLED.lock().map_err(|_| Error::io("the signal listener broke"))?;
    if let Some(rx) = slot.as_ref() {
        return Ok(rx.clone());
    }
    let (tx, rx) = tokio::sync::watch::channel(None);
    let (up_tx, up_rx) = std::sync::mpsc::channel::<std::result::Result<(), String>>();
    std::thread::Builder::new()
        .name("mcpsim-signals".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = up_tx.send(Err(e.to_string()));
                    return;
                }
            };
            rt.block_on(async move {
                #[cfg(unix)]
                {
                    use tokio::signal::unix::{signal, SignalKind};
                    let (mut int, mut term) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
                        (Ok(i), Ok(t)) => (i, t),
                        (Err(e), _) | (_, Err(e)) => {
                            let _ = up_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = up_tx.send(Ok(()));
                    loop {
                        let why = tokio::select! {
                            _ = int.recv() => "interrupted (Ctrl-C)",
                            _ = term.recv() => "terminated (SIGTERM)",
                        };
                        tx.send_if_modified(|v| v.is_none() && v.replace(why).is_none());
                    }
                }
                #[cfg(not(unix))]
                {
                    let _ = up_tx.send(Ok(()));
                    loop {
                        let _ = tokio::signal::ctrl_c().await;
                        tx.send_if_modified(|v| v.is_none() && v.replace("interrupted (Ctrl-C)").is_none());
                    }
                }
            });
        })
        .map_err(|e| Error::io(format!("cannot catch signals: {e}")))?;
    match up_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::io(format!("cannot catch signals: {e}"))),
        Err(_) => return Err(Error::io("cannot catch signals: the listener did not start")),
    }
    *slot = Some(rx.clone());
    Ok(rx)
}

/// Ctrl-C and SIGTERM, caught so that the process group is always killed.
struct Interrupt {
    signalled: tokio::sync::watch::Receiver<Option<&'static str>>,
}

impl Interrupt {
    fn new() -> Result<Self> {
        Ok(Interrupt { signalled: signals()? })
    }

    /// Waits for a signal (at once if one came already); says which.
    async fn recv(&mut self) -> &'static str {
        match self.signalled.wait_for(Option::is_some).await {
            Ok(why) => why.unwrap_or("interrupted"),
            // The listener is gone: no signal can come.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Whether a server's failed start says its port was taken (the message
/// Rust, Node and Python print for EADDRINUSE).
fn port_was_taken(e: &Error) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("address already in use") || text.contains("eaddrinuse")
}

/// The server's MCP port (checked free) and the control listener.
async fn ports(port: Option<u16>) -> Result<(u16, TcpListener)> {
    let port = match port {
        Some(p) => {
            // Taken already: say so now, not after a confusing process failure.
            TcpListener::bind(("127.0.0.1", p))
                .await
                .map_err(|e| Error::io(format!("port {p} on 127.0.0.1 is not free for the server: {e}")))?;
            p
        }
        None => free_port().await?,
    };
    let control = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::io(format!("cannot listen for the control connection: {e}")))?;
    Ok((port, control))
}

/// A free port for the server, below Linux's ephemeral range (32768 on):
/// a port the kernel handed out for `:0` may be handed out again, to an
/// outgoing connection of a parallel run, before the server process binds it
/// (a possible cause of one failed start in 240 parallel live runs). Ports are tried
/// along a walk of the span drawn for each process ([`port_walk`]), each
/// checked free by binding it. Within one process the ports handed out cycle
/// through all 12,000 before one comes again: a run whose server restarts
/// leaves its port free for a moment, and a parallel run of the same process
/// (`run --jobs`, the tests) must not take it then (it did once: the
/// restarted server found its port in use).
async fn free_port() -> Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static WALK: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    // Wall clock and pid only draw the walk: ports are no part of any trace.
    let (start, stride) = *WALK.get_or_init(|| {
        port_walk(
            std::process::id().wrapping_mul(7_919)
                ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos()),
        )
    });
    for _ in 0..200 {
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (PORT_SPAN.0 + (start + (k % PORT_SPAN.1) * stride) % PORT_SPAN.1) as u16;
        if TcpListener::bind(("127.0.0.1", port)).await.is_ok() {
            return Ok(port);
        }
    }
    let l = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::io(format!("cannot find a free port on 127.0.0.1: {e}")))?;
    Ok(l.local_addr().map_err(|e| Error::io(e.to_string()))?.port())
}

/// The ports [`free_port`] hands out: the first, and how many.
const PORT_SPAN: (u32, u32) = (20_000, 12_000);

/// A process's walk of the span, drawn from `seed`: where it starts, and
/// its step, prime to the span's length (so that it visits every port once
/// per 12,000 steps). Both differ between processes: with one step for all
/// (613 until 2026-12-07), two processes walked the same order from two
/// starts, and one whose start trailed the other's by a few steps took, a
/// moment later, each port the other had just checked free (a Redis found
/// its port held by a parallel run's server).
fn port_walk(seed: u32) -> (u32, u32) {
    let h = u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let span = PORT_SPAN.1;
    let start = ((h >> 32) as u32) % span;
    let mut stride = (h as u32) % span;
    // 12,000 = 2^5 * 3 * 5^3.
    while stride % 2 == 0 || stride % 3 == 0 || stride % 5 == 0 {
        stride += 1;
    }
    (start, stride % span)
}

type Lines = tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>;
type Writer = tokio::net::tcp::OwnedWriteHalf;

/// Waits for the process to connect to the control port and say `ready`.
/// A process's name, the dialects it declared in `ready`, and whether it said it authenticates.
type Hello = (String, Option<Vec<String>>, Option<bool>);

/// The words of a start that missed the ready timeout.
const NOT_READY: &str = "did not say `ready` on the control port within";

/// "the server process", or "the server process of replica N".
fn whose(deployed: bool, i: usize) -> String {
    if deployed {
        format!("the server process of replica {}", i + 1)
    } else {
        "the server process".to_string()
    }
}

async fn ready(
    control: &TcpListener,
    process: &mut Process,
    opts: &LiveOptions,
    within: Duration,
) -> Result<(Hello, Lines, Writer)> {
    let fail = |what: String, process: &Process| {
        Error::io(format!("{what}\nthe server command: {}\nits last output lines:\n{}", opts.command, process.tail()))
    };
    let hello = async {
        let (stream, _) = control.accept().await?;
        let (r, w) = stream.into_split();
        let mut lines = BufReader::new(r).lines();
        let first = lines.next_line().await?;
        Ok::<_, std::io::Error>((first, lines, w))
    };
    let (first, lines, writer) = tokio::select! {
        biased;
        status = process.exited() => {
            let how = status.map_or_else(|e| format!("could not be waited for: {e}"), describe_exit);
            process.settle().await;
            return Err(fail(format!("the server process {how} before it was ready"), process));
        }
        r = tokio::time::timeout(within, hello) => match r {
            Err(_) => {
                return Err(fail(format!(
                    "the server process {NOT_READY} {:?}: does it speak {PROTOCOL} \
                     (docs/live-protocol.md)? It must connect to 127.0.0.1:$MCPSIM_CONTROL_PORT and send \
                     {{\"type\":\"ready\",\"protocol\":\"{PROTOCOL}\",\"server\":\"NAME\"}}",
                    within
                ), process))
            }
            Ok(Err(e)) => return Err(fail(format!("the control connection failed before `ready`: {e}"), process)),
            Ok(Ok(x)) => x,
        },
    };
    let Some(first) = first else {
        return Err(fail("the server process closed the control connection without saying `ready`".into(), process));
    };
    match serde_json::from_str::<FromServer>(&first) {
        Ok(FromServer::Ready { protocol, server, dialects, authenticates }) if protocol == PROTOCOL => {
            Ok(((server, dialects, authenticates), lines, writer))
        }
        Ok(FromServer::Ready { protocol, .. }) => Err(fail(
            format!("the server process speaks control protocol {protocol:?}; this mcpsim speaks {PROTOCOL:?}"),
            process,
        )),
        Ok(_) => Err(fail(format!("the server process's first control line must be `ready`, not: {first}"), process)),
        Err(e) => {
            Err(fail(format!("the server process's first control line is not {PROTOCOL}: {e}: {first}"), process))
        }
    }
}

/// The control connection's side of a live run: what a (re)started
/// process's reports and commands go through.
struct Control {
    fatal: Rc<RefCell<Option<String>>>,
    scale: f64,
    listener: TcpListener,
}

/// The two tasks serving one process's control connection.
struct ControlTasks(tokio::task::AbortHandle, tokio::task::AbortHandle);

impl ControlTasks {
    fn abort(&self) {
        self.0.abort();
        self.1.abort();
    }
}

impl Control {
    /// Forwards `app`'s commands to, and records through `app` the reports
    /// of, a process that said `ready`: replica `who.0` (from 0) in its
    /// life `who.1`, whose execution numbers `execs` maps to the trace's.
    fn spawn(
        &self,
        app: &AppHook,
        writer: Writer,
        lines: Lines,
        who: (usize, u32),
        execs: &Rc<RefCell<ExecNumbers>>,
    ) -> ControlTasks {
        let fwd = tokio::task::spawn_local(forward_commands(app.commands.clone(), writer, self.fatal.clone()));
        let read = tokio::task::spawn_local(read_reports(
            lines,
            app.report.clone(),
            self.fatal.clone(),
            self.scale,
            (who, execs.clone()),
        ));
        ControlTasks(fwd.abort_handle(), read.abort_handle())
    }
}

/// Sends the step loop's application commands to the process, each at its
/// due time.
async fn forward_commands(
    commands: Inbox<crate::server::AppCommand>,
    mut w: Writer,
    fatal: Rc<RefCell<Option<String>>>,
) {
    loop {
        let cmd = ToServer::from(commands.recv().await);
        let mut line = serde_json::to_string(&cmd).expect("commands serialize");
        line.push('\n');
        if let Err(e) = w.write_all(line.as_bytes()).await {
            fatal.borrow_mut().get_or_insert(format!("the control connection broke while sending a command: {e}"));
            return;
        }
    }
}

/// Records what the process reports; a line outside the protocol ends the run.
async fn read_reports(
    mut lines: Lines,
    rec: AppReporter,
    fatal: Rc<RefCell<Option<String>>>,
    scale: f64,
    ((replica, life), execs): ((usize, u32), Rc<RefCell<ExecNumbers>>),
) {
    loop {
        match lines.next_line().await {
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => match serde_json::from_str::<FromServer>(&line)
                .map_err(|e| e.to_string())
                .and_then(|m| m.into_what(scale))
            {
                Ok(Some(mut what)) => {
                    if let What::Execution { exec, .. } = &mut what {
                        *exec = execs.borrow_mut().number(replica, life, *exec);
                    }
                    rec.record(what)
                }
                Ok(None) => {}
                Err(e) => {
                    fatal.borrow_mut().get_or_insert(format!("the server process broke {PROTOCOL}: {e}: {line}"));
                    return;
                }
            },
            Ok(None) => {
                // The process may be exiting: the step loop names that first.
                tokio::time::sleep(Duration::from_millis(200)).await;
                fatal.borrow_mut().get_or_insert("the server process closed the control connection".into());
                return;
            }
            Err(e) => {
                fatal.borrow_mut().get_or_insert(format!("the control connection failed: {e}"));
                return;
            }
        }
    }
}

/// Client tasks that can crash and restart. Each client runs in its own
/// `LocalSet`, so a crash drops every task it spawned, and its sockets.
struct LiveHosts {
    starts: BTreeMap<String, Box<dyn Fn() -> tokio::task::AbortHandle>>,
    running: BTreeMap<String, tokio::task::AbortHandle>,
    /// What the step loop must do to the server processes.
    orders: Rc<RefCell<Orders>>,
    /// A deployment's store links (`partition` cuts them).
    store: Option<Rc<RefCell<deploy::LiveStore>>>,
}

impl Hosts for LiveHosts {
    fn crash(&mut self, client: &str) {
        if let Some(h) = self.running.remove(client) {
            h.abort();
        }
    }
    fn restart(&mut self, client: &str) {
        self.crash(client);
        if let Some(start) = self.starts.get(client) {
            self.running.insert(client.to_string(), start());
        }
    }
    fn restart_server(&mut self) -> Result<(), String> {
        self.orders.borrow_mut().restart.insert(0);
        Ok(())
    }
    fn restart_host(&mut self, host: &str) -> Result<(), String> {
        let i = replica_index(host)?;
        self.orders.borrow_mut().restart.insert(i);
        Ok(())
    }
    fn crash_host(&mut self, host: &str) -> Result<(), String> {
        let i = replica_index(host)?;
        self.orders.borrow_mut().crash.insert(i);
        Ok(())
    }
    fn drain_host(&mut self, host: &str) -> Result<(), String> {
        let i = replica_index(host)?;
        self.orders.borrow_mut().drain.insert(i);
        Ok(())
    }
    fn store_link(&mut self, host: &str, cut: bool) -> Result<(), String> {
        let replica = host.strip_prefix("replica-").and_then(|n| n.parse().ok());
        match (&self.store, replica) {
            (Some(s), Some(n)) => s.borrow().set_cut(n, cut),
            _ => Err(format!("{host} has no link to a shared store")),
        }
    }
}

/// What the steps asked of the server processes (by replica index), for
/// the step loop to carry out: it owns the processes and HAProxy.
#[derive(Default)]
struct Orders {
    /// Restart: every one for `restart-server`, one for `restart-replica`.
    restart: std::collections::BTreeSet<usize>,
    /// Kill, and leave down (`crash-replica`).
    crash: std::collections::BTreeSet<usize>,
    /// Drain through HAProxy's runtime API (`drain`).
    drain: std::collections::BTreeSet<usize>,
    /// Closed while the step loop restarts server processes.
    gate: Rc<net::RestartGate>,
}

/// The index of replica host `replica-N` (N from 1).
fn replica_index(host: &str) -> Result<usize, String> {
    host.strip_prefix("replica-")
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .ok_or(format!("no server host {host}"))
}

impl LiveHosts {
    fn stop_all(&mut self) {
        for (_, h) in std::mem::take(&mut self.running) {
            h.abort();
        }
    }
}

/// The NATs and clients of `plan`, in front of the server on `port`.
async fn build(
    plan: &Plan,
    port: u16,
    rec: &Recorder,
    app: AppHook,
    orders: Rc<RefCell<Orders>>,
    store: Option<Rc<RefCell<deploy::LiveStore>>>,
) -> Result<World<LiveHosts>> {
    let mut clients = BTreeMap::new();
    let mut nats = BTreeMap::new();
    let mut hosts = LiveHosts { starts: BTreeMap::new(), running: BTreeMap::new(), orders, store };
    // In a deployment, each NAT states its public address to HAProxy in a
    // PROXY line, drawn from the stream the simulation draws it from (so
    // `balance source` picks the replica the simulated balancer picks),
    // and learns from HAProxy's tags which replica served each connection.
    let homes = (!plan.deployment.is_single()).then(|| Rc::new(crate::world::balancer::Homes::default()));
    for spec in &plan.clients {
        let gate = hosts.orders.borrow().gate.clone();
        let (nat_net, nat_port) =
            net::TcpNat::bind(port, gate).await.map_err(|e| Error::io(format!("cannot listen for a NAT: {e}")))?;
        let nat_inbox: Inbox<Fault> = Inbox::new();
        let (client, lifetime) = (spec.name.clone(), plan.network.half_open_lifetime);
        let nat = match &homes {
            None => Nat::new(nat_net, client, lifetime, rec.clone(), nat_inbox.clone()),
            Some(homes) => {
                let address = plan.seed.stream(&format!("nat.{}.address", spec.name));
                let by = ServedBy { homes: homes.clone(), routing: plan.deployment.routing.name().to_string() };
                let nat = Nat::with_public_address(nat_net, client, lifetime, rec.clone(), nat_inbox.clone(), address)
                    .served_by(by);
                let d = &plan.deployment;
                match d.timeout_server.is_some() || d.timeout_tunnel.is_some() {
                    true => nat.with_balancer_timeouts(d.balancer_timeouts()),
                    false => nat,
                }
            }
        };
        tokio::task::spawn_local(async move {
            let _ = nat.run().await;
        });
        nats.insert(spec.name.clone(), nat_inbox);

        let inbox = Inbox::new();
        let shared = Rc::new(crate::client::ClientShared::default());
        let dialer: Rc<dyn crate::client::dial::Dialer> =
            Rc::new(net::TcpDialer { port: nat_port, authority: format!("127.0.0.1:{port}") });
        let (spec2, rec2, shared2, inbox2, dialect) =
            (spec.clone(), rec.clone(), shared.clone(), inbox.clone(), plan.dialect);
        let start = move || {
            let body = start_client(&spec2, dialect, dialer.clone(), &rec2, &shared2, &inbox2);
            let set = tokio::task::LocalSet::new();
            set.spawn_local(body);
            tokio::task::spawn_local(set).abort_handle()
        };
        hosts.running.insert(spec.name.clone(), start());
        hosts.starts.insert(spec.name.clone(), Box::new(start));
        clients.insert(spec.name.clone(), (inbox, shared));
    }
    let mut world = World::assemble(hosts, rec.clone(), app, clients, nats);
    world.homes = homes;
    Ok(world)
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

    /// Ports handed out within one process do not come again soon, even
    /// once free: a restarting server's port stays its own.
    #[test]
    fn free_ports_of_one_process_do_not_repeat() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let ports: Vec<u16> = rt.block_on(async {
            let mut v = Vec::new();
            for _ in 0..300 {
                v.push(free_port().await.unwrap());
            }
            v
        });
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port came twice: {ports:?}");
        assert!(ports.iter().all(|p| (20_000..32_000).contains(p)), "{ports:?}");
    }

    /// Each process walks the span in its own order: two processes share
    /// few of their first hundred ports, however their starts fall (with
    /// one step for all, a process starting a step behind another took
    /// each port the other took, a moment later).
    #[test]
    fn two_processes_walk_the_ports_in_different_orders() {
        let walk = |seed: u32| {
            let (start, stride) = port_walk(seed);
            assert!(stride % 2 != 0 && stride % 3 != 0 && stride % 5 != 0, "{stride}");
            (0..100u32).map(move |k| (start + k * stride) % PORT_SPAN.1).collect::<std::collections::BTreeSet<_>>()
        };
        for (a, b) in [(1, 2), (7_919, 15_838), (123_456, 123_457), (0, u32::MAX)] {
            let shared = walk(a).intersection(&walk(b)).count();
            assert!(shared < 10, "seeds {a} and {b} share {shared} of their first 100 ports");
        }
        // Every port of the span, once per cycle.
        let (start, stride) = port_walk(42);
        let all: std::collections::BTreeSet<u32> =
            (0..PORT_SPAN.1).map(|k| (start + k * stride) % PORT_SPAN.1).collect();
        assert_eq!(all.len() as u32, PORT_SPAN.1);
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
