//! The world of a live run: per client a TCP proxy playing its NAT and the
//! simulation's client code, as tasks that can crash and restart, in front
//! of the server processes.

use super::{deploy, net};
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::Plan;
use crate::server::AppHook;
use crate::trace::Recorder;
use crate::world::nat::{Fault, Nat, ServedBy};
use crate::world::{start_client, Hosts, World};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Client tasks that can crash and restart. Each client runs in its own
/// `LocalSet`, so a crash drops every task it spawned, and its sockets.
pub(super) struct LiveHosts {
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
pub(super) struct Orders {
    /// Restart: every one for `restart-server`, one for `restart-replica`.
    pub(super) restart: std::collections::BTreeSet<usize>,
    /// Kill, and leave down (`crash-replica`).
    pub(super) crash: std::collections::BTreeSet<usize>,
    /// Drain through HAProxy's runtime API (`drain`).
    pub(super) drain: std::collections::BTreeSet<usize>,
    /// Closed while the step loop restarts server processes.
    pub(super) gate: Rc<net::RestartGate>,
}

/// The index of replica host `replica-N` (N from 1).
pub(super) fn replica_index(host: &str) -> Result<usize, String> {
    host.strip_prefix("replica-")
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .ok_or(format!("no server host {host}"))
}

impl LiveHosts {
    pub(super) fn stop_all(&mut self) {
        for (_, h) in std::mem::take(&mut self.running) {
            h.abort();
        }
    }
}

/// The NATs and clients of `plan`, in front of the server on `port`.
pub(super) async fn build(
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
    let mut world = World::assemble(hosts, plan, rec.clone(), app, clients, nats);
    world.homes = homes;
    Ok(world)
}
