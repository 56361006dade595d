//! A simulated deployment's server side: one `server` host, or a balancer on
//! `server` in front of `replica-1` to `replica-N`, with a shared store host
//! when the replicas share one (docs/replicas.md).

use super::{balancer, record_deployment, STORE_HOST, STORE_TIMEOUT};
use crate::inbox::Inbox;
use crate::scenario::{Plan, StoreKind};
use crate::server::{AppHook, AppReporter, ServerPlug};
use crate::trace::Recorder;
use std::rc::Rc;

/// The server side of a simulated world, once its hosts are added.
pub(super) struct Servers {
    /// The hosts that run the server: `server`, or each replica's.
    pub(super) hosts: Vec<String>,
    /// Each host's application hook, in the order of `hosts`.
    pub(super) apps: Vec<AppHook>,
    /// The balancer, in a deployment.
    pub(super) balancer: Option<Rc<balancer::Balancer>>,
}

impl Servers {
    /// Adds the server's hosts for `plan` to `sim`, each running `plug`.
    pub(super) fn start(sim: &mut turmoil::Sim<'_>, plan: &Plan, plug: &Rc<dyn ServerPlug>, rec: &Recorder) -> Self {
        let servers = if plan.deployment.replicas.max(1) == 1 {
            Servers {
                hosts: vec!["server".to_string()],
                apps: vec![AppHook::new(Inbox::new(), AppReporter::new(rec.clone()))],
                balancer: None,
            }
        } else {
            Self::deployment(sim, plan, rec)
        };
        // Each replica runs the one plug: its `serve` is called once per
        // replica (and again at each restart), as a deployment starts one
        // process per replica from one build. What the plug keeps across
        // `serve` calls is what its replicas share.
        for (host, app) in servers.hosts.iter().zip(&servers.apps) {
            let (plug, app) = (plug.clone(), app.clone());
            sim.host(host.as_str(), move || {
                let plug = plug.clone();
                let app = app.clone();
                async move {
                    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", crate::client::PORT)).await?.into();
                    plug.serve(listener, app).await;
                    Ok(())
                }
            });
        }
        servers
    }

    /// Several replicas: the balancer on `server`, the shared store's host
    /// when there is one, and each replica's hook. (The replicas' own hosts
    /// are added by [`Servers::start`].)
    fn deployment(sim: &mut turmoil::Sim<'_>, plan: &Plan, rec: &Recorder) -> Self {
        let replicas = plan.deployment.replicas;
        record_deployment(rec, plan, STORE_TIMEOUT.as_micros() as u64);
        let mut b =
            balancer::Balancer::new(replicas, plan.deployment.routing, plan.dialect.has_sessions(), rec.clone());
        if plan.deployment.timeout_server.is_some() || plan.deployment.timeout_tunnel.is_some() {
            b = b.with_timeouts(plan.deployment.balancer_timeouts());
        }
        let balancer = b.clone();
        sim.host("server", move || {
            let balancer = b.clone();
            async move { Ok(balancer.run().await?) }
        });
        // A shared store is its own host, reached over the network; otherwise
        // each server host keeps its own store, which outlives its restarts.
        let shared_store = plan.deployment.store == StoreKind::Shared;
        if shared_store {
            sim.host(STORE_HOST, || async {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", crate::store::PORT)).await?.into();
                crate::store::host::serve(listener).await;
                Ok(())
            });
        }
        let apps = (1..=replicas)
            .map(|n| {
                let app = AppHook::new(Inbox::new(), AppReporter::for_replica(rec.clone(), n));
                if shared_store {
                    app.with_shared_store(Rc::new(crate::store::RespStore::simulated(STORE_HOST, STORE_TIMEOUT)))
                } else {
                    app
                }
            })
            .collect();
        Servers { hosts: (1..=replicas).map(balancer::replica_host).collect(), apps, balancer: Some(balancer) }
    }
}
