//! The server side of a live run, from start to teardown: the server
//! processes (one per replica), HAProxy in front of a deployment, and the
//! Redis its replicas share. What the steps ask of them (`restart-server`,
//! `restart-replica`, `crash-replica`, `drain`) is carried out here, between
//! turns of the step loop.

use super::actors::Orders;
use super::link::{Control, ControlTasks, ExecNumbers};
use super::process::{describe_exit, Process};
use super::startup::{free_port, port_was_taken, ready, whose, Interrupt, Lines, Writer, NOT_READY};
use super::{control, deploy, speaks, LiveOptions};
use crate::clock;
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::Plan;
use crate::server::{AppHook, AppReporter};
use crate::trace::{Recorder, SimTime, What};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

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

/// A process's control connection, as it said `ready` on it.
struct Hello {
    lines: Lines,
    writer: Writer,
}

/// The server processes of a live run, and a deployment's HAProxy and Redis.
pub(super) struct Servers {
    /// Several replicas behind HAProxy.
    deployed: bool,
    /// Where the clients' NATs connect: the server's port, or HAProxy's.
    pub(super) port: u16,
    /// A deployment's store links (`partition` cuts them), and its Redis.
    pub(super) store: Option<Rc<RefCell<deploy::LiveStore>>>,
    replicas: Vec<Replica>,
    /// Each replica's control connection, until [`Servers::attach`].
    hellos: Vec<Hello>,
    balancer: Option<deploy::Balancer>,
    /// Each replica's life (1, then one more per restart).
    lives: Vec<u32>,
    /// The replicas a `crash-replica` took down.
    down: Vec<bool>,
    /// The name the first process gave (every replica runs the same command).
    pub(super) server: String,
    /// Whether it said it authenticates its clients.
    pub(super) authenticates: bool,
}

impl Servers {
    /// Starts `plan`'s servers: a deployment's Redis and store links first,
    /// then each server process until it says `ready` on `control`, then
    /// HAProxy in front. `port` is the server's port (one server), or
    /// HAProxy's.
    pub(super) async fn start(
        plan: &Plan,
        opts: &LiveOptions,
        port: u16,
        control: &tokio::net::TcpListener,
        interrupt: &mut Interrupt,
    ) -> Result<Servers> {
        let deployed = !plan.deployment.is_single();
        let mut port = port;
        let control_port = control.local_addr().map_err(|e| Error::io(e.to_string()))?.port();
        let (store, mut slots) = if deployed {
            let (store, slots) = deploy::LiveStore::start(&plan.deployment, async || free_port().await).await?;
            (Some(Rc::new(RefCell::new(store))), slots)
        } else {
            (None, vec![deploy::ReplicaSlot { port, store: None }])
        };
        // The replicas share one clock origin, so that a state's expiry means the same on each.
        let origin_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let mut replicas = Vec::new();
        let mut hellos = Vec::new();
        let mut first: Option<(String, Option<bool>)> = None;
        for (i, slot) in slots.iter_mut().enumerate() {
            // The process's environment on `port` (a retry may change the port).
            let env_for = |port: u16| environment(plan, opts, (control_port, port), origin_ms, (deployed, i));
            let (env, process, (hello, lines, writer)) =
                start_one(opts, control, interrupt, (deployed, i), slot, &env_for).await?;
            if !deployed {
                port = slot.port;
            }
            let (server, dialects, authenticates) = hello;
            speaks(&server, dialects.as_deref(), plan)?;
            first.get_or_insert((server, authenticates));
            hellos.push(Hello { lines, writer });
            replicas.push(Replica {
                env,
                process,
                tasks: None,
                app: AppHook::new(Inbox::new(), AppReporter::detached()),
            });
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
        let (server, authenticates) = first.expect("at least one server process");
        let n = replicas.len();
        Ok(Servers {
            deployed,
            port,
            store,
            replicas,
            hellos,
            balancer,
            lives: vec![1; n],
            down: vec![false; n],
            server,
            // Every replica runs the same command: the first one's word holds.
            authenticates: authenticates.unwrap_or(true),
        })
    }

    /// Serves each process's control connection, recording its reports to
    /// `rec` (in a deployment, as its replica's).
    pub(super) fn attach(&mut self, rec: &Recorder, control: &Control, execs: &Rc<RefCell<ExecNumbers>>) {
        for (i, (r, hello)) in self.replicas.iter_mut().zip(std::mem::take(&mut self.hellos)).enumerate() {
            let report = if self.deployed {
                AppReporter::for_replica(rec.clone(), i as u32 + 1)
            } else {
                AppReporter::new(rec.clone())
            };
            r.app = AppHook::new(Inbox::new(), report);
            r.tasks = Some(control.spawn(&r.app, hello.writer, hello.lines, (i, 1), execs));
        }
    }

    /// The application hook of each replica, the first one's first.
    pub(super) fn apps(&self) -> Vec<AppHook> {
        self.replicas.iter().map(|r| r.app.clone()).collect()
    }

    /// Carries out what the steps of the last turn asked of the servers:
    /// crashes, drains, restarts. An error ends the run, and says why.
    pub(super) async fn carry_out(
        &mut self,
        orders: &Rc<RefCell<Orders>>,
        opts: &LiveOptions,
        control: &Control,
        execs: &Rc<RefCell<ExecNumbers>>,
        (rec, now): (&Recorder, Duration),
    ) -> std::result::Result<(), String> {
        let (crash, drain) = {
            let mut o = orders.borrow_mut();
            (std::mem::take(&mut o.crash), std::mem::take(&mut o.drain))
        };
        // crash-replica: the process is killed and stays down; HAProxy's
        // health check takes it out of rotation.
        for i in crash {
            self.replicas[i].stop().await;
            self.down[i] = true;
        }
        for i in drain {
            if let Some(b) = &self.balancer {
                b.drain(i as u32 + 1).await.map_err(|why| format!("{why} (at {})", SimTime::from_duration(now)))?;
            }
        }
        let which: Vec<usize> = std::mem::take(&mut orders.borrow_mut().restart).into_iter().collect();
        if which.is_empty() {
            return Ok(());
        }
        // restart-server (every process) or restart-replica (one): each is
        // killed and started again, with nothing of its memory; each must
        // say `ready` again. Meanwhile the NATs hold new connections (a
        // simulated restart takes no time).
        let gate = orders.borrow().gate.clone();
        gate.close();
        for &i in &which {
            self.replicas[i].stop().await;
        }
        for &i in &which {
            self.restart(i, opts, control, execs).await?;
        }
        rec.record(What::ServerBack {
            replicas: if self.deployed { which.iter().map(|&i| i as u32 + 1).collect() } else { Vec::new() },
        });
        gate.open();
        Ok(())
    }

    /// Starts replica `i`'s process again, in its next life, and waits until
    /// it is ready and (in a deployment) back in HAProxy's rotation.
    async fn restart(
        &mut self,
        i: usize,
        opts: &LiveOptions,
        control: &Control,
        execs: &Rc<RefCell<ExecNumbers>>,
    ) -> std::result::Result<(), String> {
        let deployed = self.deployed;
        let r = &mut self.replicas[i];
        self.lives[i] += 1;
        self.down[i] = false;
        let life = self.lives[i];
        let mut env = r.env.clone();
        env.push(("MCPSIM_LIFE", life.to_string()));
        r.process = Process::spawn(&opts.command, &env, opts.echo)
            .map_err(|e| format!("cannot restart the server command `{}`: {e}", opts.command))?;
        let (_hello, lines, writer) = ready(&control.listener, &mut r.process, opts, opts.ready_timeout * 2)
            .await
            .map_err(|e| format!("{} did not come back after its restart: {e}", whose(deployed, i)))?;
        r.tasks = Some(control.spawn(&r.app, writer, lines, (i, life), execs));
        // Back in HAProxy's rotation before the run goes on (its
        // health check took it out while it restarted).
        let check = crate::world::balancer::HEALTH_CHECK.mul_f64(opts.time_scale);
        if let Some(b) = &self.balancer {
            if !b.wait_up(i as u32 + 1, check * 3 + Duration::from_secs(1)).await {
                return Err(format!(
                    "haproxy (the load balancer) did not see {} up again after its restart",
                    whose(deployed, i)
                ));
            }
        }
        Ok(())
    }

    /// Why the run cannot go on, if it cannot: the control connection broke
    /// (`fatal`), a process that no step took down exited, or HAProxy or
    /// Redis died.
    pub(super) async fn failure(&mut self, fatal: &RefCell<Option<String>>, now: Duration) -> Option<String> {
        if let Some(why) = fatal.borrow_mut().take() {
            let tails: Vec<String> = self.replicas.iter().map(|r| r.process.tail()).collect();
            return Some(format!(
                "{why} (at {})\nits last output lines:\n{}",
                SimTime::from_duration(now),
                tails.join("\n  --\n")
            ));
        }
        let deployed = self.deployed;
        for (i, r) in self.replicas.iter_mut().enumerate().filter(|(i, _)| !self.down[*i]) {
            if let Some(status) = r.process.try_exited() {
                r.process.settle().await;
                return Some(format!(
                    "{} {} at {}, before the scenario ended\nits last output lines:\n{}",
                    whose(deployed, i),
                    describe_exit(status),
                    SimTime::from_duration(clock::now().unwrap_or_default()),
                    r.process.tail()
                ));
            }
        }
        let part_died = self
            .balancer
            .as_mut()
            .and_then(|b| b.died())
            .or_else(|| self.store.as_ref().and_then(|s| s.borrow_mut().died()));
        part_died.map(|why| format!("{why} (at {})", SimTime::from_duration(now)))
    }

    /// Stops every process the run started, and reaps it: the server
    /// processes, HAProxy, Redis.
    pub(super) async fn teardown(&mut self) {
        for r in self.replicas.iter_mut() {
            r.process.kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), r.process.exited()).await;
        }
        if let Some(b) = self.balancer.as_mut() {
            b.stop().await;
        }
        if let Some(s) = &self.store {
            let stopping = s.borrow_mut().take_redis();
            if let Some(mut redis) = stopping {
                redis.kill();
                let _ = tokio::time::timeout(Duration::from_secs(2), redis.exited()).await;
            }
        }
    }
}

/// The environment of the server process of replica `who.1` (of a
/// deployment, when `who.0`) serving on `ports.1`, with the control port `ports.0`.
fn environment(
    plan: &Plan,
    opts: &LiveOptions,
    (control_port, port): (u16, u16),
    origin_ms: u128,
    (deployed, i): (bool, usize),
) -> Vec<(&'static str, String)> {
    let mut env =
        control::environment(port, control_port, plan.dialect, &plan.server, &plan.tools, opts.time_scale, plan.seed.0);
    env.extend(opts.config.environment());
    if deployed {
        env.push(("MCPSIM_CLOCK_ORIGIN_MS", origin_ms.to_string()));
        env.push(("MCPSIM_REPLICA", (i + 1).to_string()));
        env.push(("MCPSIM_REPLICAS", plan.deployment.replicas.to_string()));
    }
    env
}

/// Starts the server process of `slot` (replica `who.1` of a deployment
/// when `who.0`) until it says `ready`. A port found free can be taken by
/// another process before the server binds it (a parallel run's own pick):
/// a start that fails on it gets another port, twice at most; a port the
/// user fixed (--live-port) is never changed. A start that misses the
/// ready timeout (a loaded machine: two Node or Python processes starting
/// at once) is tried once more, with twice the time.
async fn start_one(
    opts: &LiveOptions,
    control: &tokio::net::TcpListener,
    interrupt: &mut Interrupt,
    (deployed, i): (bool, usize),
    slot: &mut deploy::ReplicaSlot,
    env_for: &dyn Fn(u16) -> Vec<(&'static str, String)>,
) -> Result<(Vec<(&'static str, String)>, Process, (super::startup::Hello, Lines, Writer))> {
    let mut retries = if opts.port.is_some() { 0 } else { 2 };
    let mut ready_timeout = opts.ready_timeout;
    let mut slow_start_retried = false;
    loop {
        let mut env = env_for(slot.port);
        if let Some(url) = &slot.store {
            env.push(("MCPSIM_STORE", url.clone()));
        }
        let mut process = Process::spawn(&opts.command, &env, opts.echo)
            .map_err(|e| Error::io(format!("cannot start the server command `{}`: {e}", opts.command)))?;
        let started = tokio::select! {
            biased;
            why = interrupt.recv() => return Err(Error::io(format!("{why} before the server process was ready"))),
            r = ready(control, &mut process, opts, ready_timeout) => r,
        };
        match started {
            Ok(hello) => return Ok((env, process, hello)),
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
            }
            Err(e) => return Err(e),
        }
    }
}
