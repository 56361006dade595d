//! The simulated world: turmoil hosts built from a [`Plan`], and our own step
//! loop that applies each scenario step at its simulated time.
//!
//! Hosts: `server`; per client `c`, a NAT host `nat-c` and the client host `c`.
//! Clients reach the server only through their NAT.

mod nat;
mod panics;

pub use nat::NatCmd;

use crate::client::ResumeFrom;
use crate::client::{Client, ClientCmd, ClientShared};
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::{Action, LastEventId, Plan, SeenOn, Trigger};
use crate::seed::Seed;
use crate::server::{AppCommand, AppHook, AppReporter, ServerPlug};
use crate::trace::{Recorder, Run, SimTime, What};
use nat::Nat;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

/// The smallest network latency the world uses (a hop still takes a tick).
const MIN_LATENCY: Duration = Duration::from_micros(1);

/// The simulated epoch: the seed analysis's date of record, 2026-11-11.
const EPOCH_SECS: u64 = 1_794_355_200;

/// Why a build without `--cfg tokio_unstable` may not run: tokio then seeds
/// `select!` and its scheduler from the OS, and traces stop being
/// reproducible. `.cargo/config.toml` sets the flag for this repository; a
/// `RUSTFLAGS` variable replaces that setting, and a crate that uses mcpsim as
/// a library needs the flag in its own config.
pub const NEEDS_TOKIO_UNSTABLE: &str =
    "mcpsim was built without `--cfg tokio_unstable`, so runs would not be deterministic. \
Build with RUSTFLAGS=\"--cfg tokio_unstable\" (a RUSTFLAGS variable replaces the flag from .cargo/config.toml), \
or add `[build] rustflags = [\"--cfg\", \"tokio_unstable\"]` to your .cargo/config.toml";

/// Runs a plan against any server plug-in.
pub fn run_with(plan: &Plan, plug: Rc<dyn ServerPlug>, seed: Seed) -> Result<Run> {
    if !cfg!(tokio_unstable) {
        return Err(Error::usage(NEEDS_TOKIO_UNSTABLE));
    }
    plan.validate().map_err(|p| match p.step {
        Some(i) => Error::usage(format!("plan {:?}: step {i} {}", plan.name, p.message)),
        None => Error::usage(format!("plan {:?}: {}", plan.name, p.message)),
    })?;
    let rec = Recorder::with_clock(Rc::new(turmoil::sim_elapsed));
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(seed.derive("turmoil"))
        .epoch(UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
        .simulation_duration(plan.duration + Duration::from_secs(60))
        .tick_duration(plan.network.tick)
        // Never zero: a message must not reach a host that runs later in the
        // same tick, possibly at an earlier time on its clock than the send
        // (the trace's time order is causal only with this; see `trace`).
        .min_message_latency(plan.network.latency_min.max(MIN_LATENCY))
        .max_message_latency(plan.network.latency_max.max(MIN_LATENCY))
        .tcp_capacity(1 << 16);
    let mut sim = builder.build();

    rec.record(What::RunStarted {
        scenario: plan.name.clone(),
        server: plug.name().to_string(),
        seed: seed.0,
        duration_us: plan.duration.as_micros() as u64,
        liveness_bound_us: plan.server.request_timeout.0.as_micros() as u64,
    });
    for c in &plan.clients {
        rec.record(What::ClientJoined {
            client: c.name.clone(),
            principal: c.principal.clone(),
            heartbeat_timeout_us: c.heartbeat_timeout.as_micros() as u64,
            think_time_us: c.think_time.as_micros() as u64,
            max_backoff_us: crate::client::MAX_BACKOFF.as_micros() as u64,
        });
    }
    let app = AppHook { commands: Inbox::new(), report: AppReporter::new(rec.clone()) };
    {
        let plug = plug.clone();
        let app = app.clone();
        sim.host("server", move || {
            let plug = plug.clone();
            let app = app.clone();
            async move {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 80)).await?;
                plug.serve(listener, app).await;
                Ok(())
            }
        });
    }

    let mut clients: BTreeMap<String, (Inbox<ClientCmd>, Rc<ClientShared>)> = BTreeMap::new();
    let mut nats: BTreeMap<String, Inbox<NatCmd>> = BTreeMap::new();
    for spec in &plan.clients {
        let nat_name = format!("nat-{}", spec.name);
        let nat_inbox: Inbox<NatCmd> = Inbox::new();
        {
            let (client, rec, inbox, lifetime) =
                (spec.name.clone(), rec.clone(), nat_inbox.clone(), plan.network.half_open_lifetime);
            sim.host(nat_name.as_str(), move || {
                Nat::new(client.clone(), "server".into(), lifetime, rec.clone(), inbox.clone()).run()
            });
        }
        nats.insert(spec.name.clone(), nat_inbox);

        let inbox: Inbox<ClientCmd> = Inbox::new();
        let shared = Rc::new(ClientShared::default());
        {
            let (spec, rec, inbox, shared, dialect) =
                (spec.clone(), rec.clone(), inbox.clone(), shared.clone(), plan.dialect);
            let dialer: Rc<dyn crate::client::dial::Dialer> =
                Rc::new(crate::client::dial::SimDialer { host: nat_name.clone(), port: crate::client::PORT });
            let host = spec.name.clone();
            sim.host(host.as_str(), move || {
                // A (re)started client remembers nothing.
                inbox.clear();
                *shared.token.borrow_mut() = None;
                let c = Client::new(spec.clone(), dialect, dialer.clone(), rec.clone(), shared.clone(), inbox.clone());
                async move {
                    c.run().await;
                    Ok(())
                }
            });
        }
        clients.insert(spec.name.clone(), (inbox, shared));
    }

    let mut schedule = Schedule::new(plan.steps.len());
    let mut crashed: Vec<String> = Vec::new();
    let mut server_stopped = false;
    let mut aborted = None;
    panics::install();
    let tick = plan.network.tick;
    while sim.elapsed() < plan.duration {
        let now = sim.elapsed();
        rec.set_loop_now(now);
        // Hand over every step due before the end of the coming tick; actors
        // wait for the exact due time themselves.
        for (index, at) in schedule.due(plan, &rec, now, tick) {
            let step = &plan.steps[index];
            // What the step loop itself records happens at the step's time.
            rec.set_loop_now(at);
            rec.record_at(
                SimTime::from_duration(at),
                What::Step {
                    index,
                    action: step.action.kind(),
                    detail: step.action.describe(),
                    expect: match &step.action {
                        Action::Resume { client, expect: Some(e), .. } => {
                            Some(crate::trace::StepExpect { client: client.clone(), resumption: e.word().into() })
                        }
                        _ => None,
                    },
                },
            );
            let token_of = |c: &str| clients[c].1.token.borrow().clone();
            match &step.action {
                Action::Connect { client } => {
                    if let Some(i) = crashed.iter().position(|c| c == client) {
                        crashed.remove(i);
                        sim.bounce(client.as_str());
                    }
                    clients[client].0.push_at(at, ClientCmd::Connect);
                }
                Action::ServerRequest { client, method, label, reissuable } => match token_of(client) {
                    Some(token) => app.commands.push_at(
                        at,
                        AppCommand::ServerRequest {
                            client: client.clone(),
                            token,
                            method: method.clone(),
                            label: label.clone(),
                            reissuable: *reissuable,
                        },
                    ),
                    None => app.report.error(client, format!("cannot issue {label}: {client} holds no session")),
                },
                Action::CallTool { client, method, label } => {
                    clients[client].0.push_at(at, ClientCmd::CallTool { label: label.clone(), method: method.clone() })
                }
                Action::EndSession { client } => clients[client].0.push_at(at, ClientCmd::EndSession),
                Action::Notify { client, count } => match token_of(client) {
                    Some(token) => {
                        app.commands.push_at(at, AppCommand::Notify { client: client.clone(), token, count: *count })
                    }
                    None => app.report.error(client, format!("cannot notify: {client} holds no session")),
                },
                Action::Answer { client, label } => {
                    clients[client].0.push_at(at, ClientCmd::Answer(rec.ids_for_label(label)))
                }
                Action::Rebind { client } => nats[client].push_at(at, NatCmd::Rebind),
                Action::Sever { client } => nats[client].push_at(at, NatCmd::Sever),
                Action::Reset { client } => nats[client].push_at(at, NatCmd::Reset),
                Action::Resume { client, last_event_id, .. } => {
                    let from = match last_event_id {
                        LastEventId::LastSeen => Some(ResumeFrom::LastSeen),
                        LastEventId::None => Some(ResumeFrom::Nothing),
                        LastEventId::Id(n) => Some(ResumeFrom::Id(n.to_string())),
                        LastEventId::Raw(s) => Some(ResumeFrom::Id(s.clone())),
                        LastEventId::LastSeenPlus(k) => Some(ResumeFrom::LastSeenPlus(*k)),
                        // An id of the session the resuming client now holds (a thief: the victim's).
                        LastEventId::Seen { client: by, nth, stream } => {
                            let purpose = match stream {
                                SeenOn::Uplink => crate::trace::Purpose::Uplink,
                                SeenOn::Call => crate::trace::Purpose::Call,
                            };
                            token_of(client).and_then(|t| rec.nth_message_id(by, *nth, &t, purpose)).map(ResumeFrom::Id)
                        }
                    };
                    match from {
                        Some(from) => clients[client].0.push_at(at, ClientCmd::Resume(from)),
                        None => app.report.error(client, format!("cannot resume: {}", step.action.describe())),
                    }
                }
                Action::StealToken { from, to, credential } => {
                    let token = token_of(from);
                    rec.record_at(
                        SimTime::from_duration(at),
                        What::TokenStolen { from: from.clone(), to: to.clone(), credential: *credential },
                    );
                    if let Some(token) = token {
                        let cred = credential.then(|| clients[from].1.credential.borrow().clone());
                        clients[to].0.push_at(at, ClientCmd::Adopt { token, credential: cred });
                    }
                }
                Action::CrashClient { client } => {
                    if !crashed.contains(client) {
                        sim.crash(client.as_str());
                        crashed.push(client.clone());
                        // Crashes fire between ticks (`Schedule::due`): `at` is now.
                        rec.record_at(SimTime::from_duration(at), What::ClientCrashed { client: client.clone() });
                    }
                }
                Action::Wait => {}
            }
        }
        rec.set_loop_now(now);
        if !server_stopped && !sim.is_host_running("server") {
            // A misbehaving plug-in must not take the harness down: record it,
            // and let the clients observe a dead server until the end.
            server_stopped = true;
            rec.record(What::ServerStopped {
                why: format!("server {:?} stopped: its serve() returned or panicked", plug.name()),
            });
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.step())) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::io(format!("simulation failed at {:?} (seed {seed}): {e}", sim.elapsed())))
            }
            Err(_) => {
                // A host's code panicked (tokio_unstable makes turmoil re-raise it here).
                // The simulation cannot go on; keep everything recorded so far.
                let why = format!(
                    "a host panicked at {} with server {:?}: {}",
                    SimTime::from_duration(sim.elapsed()),
                    plug.name(),
                    panics::last().unwrap_or_else(|| "unknown panic".into())
                );
                rec.record(What::ServerStopped { why: why.clone() });
                aborted = Some(why);
                break;
            }
        }
    }
    Ok(Run {
        scenario: plan.name.clone(),
        server: plug.name().to_string(),
        by_name: false,
        seed,
        source: plan.source.clone(),
        duration: plan.duration,
        trace: rec.take(),
        aborted,
    })
}

/// Which steps fire when: `at` steps at their time, triggered steps after
/// their event (once every earlier step has fired); a crash at the first tick
/// boundary at or after that time.
struct Schedule {
    /// When each step fired, and how long the trace was then.
    fired: Vec<Option<(Duration, usize)>>,
}

impl Schedule {
    fn new(n: usize) -> Self {
        Self { fired: vec![None; n] }
    }

    /// The steps to hand over before the coming tick ends, with their due times, in order.
    fn due(&mut self, plan: &Plan, rec: &Recorder, now: Duration, tick: Duration) -> Vec<(usize, Duration)> {
        let mut out = Vec::new();
        // Clients whose crash waits for a later tick: their later steps wait too.
        let mut crashing: Vec<&str> = Vec::new();
        for i in 0..plan.steps.len() {
            if self.fired[i].is_some() {
                continue;
            }
            let step = &plan.steps[i];
            if step.action.clients().iter().any(|c| crashing.contains(c)) {
                continue;
            }
            let due = match &step.after {
                // (A step held back behind a crash fires now, not in the past.)
                None => (step.at < now + tick).then_some(step.at.max(now)),
                Some(after) => {
                    // Armed once every earlier step fired; look at events since the last of them.
                    let Some(since) = self.fired[..i].iter().try_fold(0usize, |m, f| f.map(|(_, len)| m.max(len)))
                    else {
                        continue;
                    };
                    self.trigger_time(plan, rec, &after.trigger, since)
                        .map(|t| (t + after.delay).max(now))
                        .filter(|due| *due < now + tick)
                }
            };
            // Actors wait for a due time inside the tick on their own clocks,
            // but a crash is done by the step loop, between ticks: it fires at
            // the first tick boundary at or after its time, and says so.
            let due = match (due, &step.action) {
                (Some(due), Action::CrashClient { client }) if due > now => {
                    crashing.push(client);
                    None
                }
                (Some(_), Action::CrashClient { .. }) => Some(now),
                (due, _) => due,
            };
            if let Some(due) = due {
                self.fired[i] = Some((due, rec.len()));
                out.push((i, due));
            }
        }
        out
    }

    /// When the trigger's event happened (first match at or after trace index `since`).
    fn trigger_time(&self, plan: &Plan, rec: &Recorder, trigger: &Trigger, since: usize) -> Option<Duration> {
        let t = match trigger {
            Trigger::Step { step } => {
                let j = plan.steps.iter().position(|s| s.id.as_deref() == Some(step))?;
                return self.fired[j].map(|(t, _)| t);
            }
            Trigger::Delivered { label, client } => {
                let ids = rec.ids_for_label(label);
                rec.find_from(since, |w| match w {
                    What::SseEvent { client: c, rpc: Some(r), .. } => {
                        client.as_ref().is_none_or(|x| x == c)
                            && r.kind == crate::wire::jsonrpc::RpcKind::Request
                            && r.id.as_ref().is_some_and(|id| ids.contains(id))
                    }
                    _ => false,
                })
            }
            Trigger::Answered { label } => rec.find_from(since, |w| {
                matches!(w, What::RequestOutcome { label: l, outcome: crate::trace::Outcome::Answered, .. } if l == label)
            }),
            Trigger::Accepted { client } => rec.find_from(since, |w| {
                matches!(w, What::HttpResponse { client: c, status: 200, content_type: Some(ct), .. }
                    if c == client && ct.starts_with("text/event-stream"))
            }),
        };
        t.map(SimTime::as_duration)
    }
}
