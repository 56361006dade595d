//! The reference MCP server engine, its resumption policies and the plug-in
//! boundary for servers under test.

mod engine;
mod http;
pub mod plug;
pub mod policy;
#[cfg(feature = "rmcp")]
pub mod rmcp;
#[cfg(feature = "rmcp")]
mod rmcp_shared;
#[cfg(feature = "rmcp")]
pub mod rmcp_stateless;
#[cfg(feature = "rmcp")]
mod rmcp_tap;
pub mod stateless;

pub use crate::inbox::Inbox;
pub use engine::Engine;
pub use plug::{AppCommand, AppHook, AppReporter, ExecutionOf, ServerPlug};
pub use policy::{Decision, ResumptionPolicy};

use crate::error::{Error, Result};
use crate::scenario::{Dialect, Plan, ServerConfig};
use crate::seed::Seed;
use std::rc::Rc;

/// The names `--server` accepts.
pub fn known_servers() -> Vec<&'static str> {
    crate::vocab::SERVERS.to_vec()
}

/// How the built-in servers serve a dialect: the server layer's one choice
/// of dialect (docs/design.md §7).
#[derive(Clone, Copy)]
pub(crate) enum Wire {
    /// Sessions: the reference engine's routes for it, and whether rmcp's
    /// `StreamableHttpService` speaks it too.
    Sessions { engine: engine::EngineWire, rmcp: bool },
    /// No sessions: the stateless servers ([`stateless`], rmcp's stateless service).
    Stateless,
}

impl Wire {
    pub(crate) fn of(dialect: Dialect) -> Wire {
        match dialect {
            Dialect::LegacySse => Wire::Sessions { engine: engine::EngineWire::LEGACY, rmcp: false },
            Dialect::StreamableHttp => Wire::Sessions { engine: engine::EngineWire::STREAMABLE, rmcp: true },
            Dialect::StatelessHttp => Wire::Stateless,
        }
    }
}

/// The dialects built-in server `name` speaks (none for an unknown name).
pub fn dialects(name: &str) -> Vec<Dialect> {
    let stateful = policy::builtin_policies().iter().any(|p| p.name() == name);
    let stateless = crate::vocab::STATELESS_SERVERS.contains(&name);
    Dialect::ALL
        .into_iter()
        .filter(|d| match Wire::of(*d) {
            Wire::Sessions { rmcp, .. } => stateful || (rmcp && name == "rmcp"),
            Wire::Stateless => stateless,
        })
        .collect()
}

/// Whether built-in server `name` is an SDK's server (rmcp), not the
/// reference engine under a policy.
pub fn is_sdk(name: &str) -> bool {
    crate::vocab::is_sdk(name)
}

/// Whether built-in server `name` speaks `dialect`.
pub fn speaks(name: &str, dialect: Dialect) -> bool {
    dialects(name).contains(&dialect)
}

/// Whether `--server` accepts `name`.
pub fn is_known_server(name: &str) -> bool {
    known_servers().contains(&name)
}

/// One-line descriptions of the built-in servers.
pub fn describe_servers() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = policy::builtin_policies()
        .iter()
        .map(|p| {
            let about = match stateless::POLICIES.iter().find(|s| s.name == p.name()) {
                Some(s) => format!("{}; in stateless-http: {}", p.description(), s.description),
                None => p.description().to_string(),
            };
            (p.name().to_string(), about)
        })
        .collect();
    all.push((
        "rmcp".into(),
        "the official Rust SDK's StreamableHttpService (rmcp 3.11.0); in stateless-http: requestState sealed with its RequestStateCodec, bound to principal and request".into(),
    ));
    all.push((
        "rmcp-unsealed".into(),
        "rmcp 3.11.0 in stateless-http with the plain from_request_state path: JSON state checked field by field, no integrity".into(),
    ));
    // naive and guarded speak every dialect (their line says both); the stateless mutants follow.
    let stateless_only: Vec<(String, String)> = stateless::POLICIES
        .iter()
        .filter(|p| !all.iter().any(|(n, _)| n == p.name))
        .map(|p| (p.name.to_string(), p.description.to_string()))
        .collect();
    all.extend(stateless_only);
    all
}

/// The built-in server `name`, configured for `plan`; the error names the
/// known servers, or the dialect the server lacks.
pub fn for_plan(name: &str, plan: &Plan, seed: Seed) -> Result<Rc<dyn ServerPlug>> {
    start(name, plan.dialect, &plan.server, &plan.tools, seed, 1).map_err(|e| match lacks(name, plan.dialect) {
        Some(why) => Error::usage(format!("{why}; scenario {:?} is {:?}", plan.name, plan.dialect.name())),
        None => e,
    })
}

/// Why built-in server `name` cannot serve `dialect`, when it is known but
/// speaks other dialects only.
fn lacks(name: &str, dialect: Dialect) -> Option<String> {
    let speaks_it = dialects(name);
    if speaks_it.is_empty() || speaks_it.contains(&dialect) {
        return None;
    }
    let names: Vec<String> = speaks_it.iter().map(|d| format!("{:?}", d.name())).collect();
    Some(format!("server {name:?} speaks only dialect {}", names.join(" and ")))
}

/// Built-in server `name` speaking `dialect`, configured by `cfg` (and
/// offering `tools`, in stateless-http), as the `life`th process of its
/// server (counted from 1: a live deployment's replicas and restarts are
/// processes of their own, and each draws the session tokens, or the
/// per-process key, that the simulation's `life`th `serve` draws). The one
/// place a built-in server is chosen: simulation (`for_plan`) and `mcpsim
/// serve` both start theirs here.
pub fn start(
    name: &str,
    dialect: Dialect,
    cfg: &ServerConfig,
    tools: &[crate::scenario::ToolSpec],
    seed: Seed,
    life: u32,
) -> Result<Rc<dyn ServerPlug>> {
    if let Some(why) = lacks(name, dialect) {
        return Err(Error::usage(why));
    }
    if is_sdk(name) && !cfg!(feature = "rmcp") {
        return Err(Error::usage(format!(
            "server {name:?} is rmcp, which this build of mcpsim leaves out: build it with the `rmcp` feature (on by default)"
        )));
    }
    let plug = match Wire::of(dialect) {
        Wire::Sessions { engine, .. } => with_sessions(name, cfg, engine, seed, life),
        Wire::Stateless => stateless_by_name(name, cfg, tools, seed, life),
    };
    plug.ok_or_else(|| Error::usage(format!("unknown server {name:?} (known: {})", known_servers().join(", "))))
}

/// A built-in stateless-http server by name, offering `tools`, in its `life`th life.
fn stateless_by_name(
    name: &str,
    cfg: &ServerConfig,
    tools: &[crate::scenario::ToolSpec],
    seed: Seed,
    life: u32,
) -> Option<Rc<dyn ServerPlug>> {
    #[cfg(feature = "rmcp")]
    if let Some(i) = rmcp_stateless::NAMES.iter().position(|n| *n == name) {
        return Some(Rc::new(rmcp_stateless::RmcpStateless::new(i == 0, cfg, tools.to_vec(), seed).in_life(life)));
    }
    let policy = *stateless::POLICIES.iter().find(|p| p.name == name)?;
    Some(Rc::new(stateless::StatelessServer::new(policy, cfg.clone(), tools.to_vec(), seed).in_life(life)))
}

/// A built-in server with sessions by name, serving `engine`'s routes (rmcp serves its own).
fn with_sessions(
    name: &str,
    cfg: &ServerConfig,
    engine: engine::EngineWire,
    seed: Seed,
    life: u32,
) -> Option<Rc<dyn ServerPlug>> {
    #[cfg(feature = "rmcp")]
    if name == "rmcp" {
        return Some(Rc::new(rmcp::Rmcp::new(cfg.clone(), seed).in_life(life)));
    }
    let policy: Rc<dyn ResumptionPolicy> = policy::builtin_policies().into_iter().find(|p| p.name() == name)?.into();
    Some(Rc::new(Engine::speaking(cfg.clone(), engine, policy, seed).in_life(life)))
}

/// A built-in server by name speaking `dialect` ([`start`], for a first
/// process with no tools), or None.
pub fn builtin(name: &str, cfg: &ServerConfig, dialect: Dialect, seed: Seed) -> Option<Rc<dyn ServerPlug>> {
    start(name, dialect, cfg, &[], seed, 1).ok()
}

#[cfg(all(test, feature = "rmcp"))]
mod tests {
    use super::*;

    #[test]
    fn the_server_vocabulary_names_exactly_the_servers_that_build() {
        let mut built: Vec<&str> = policy::builtin_policies().iter().map(|p| p.name()).collect();
        built.extend(rmcp_stateless::NAMES);
        built.extend(stateless::POLICIES.iter().map(|p| p.name).filter(|n| !["naive", "guarded"].contains(n)));
        assert_eq!(built, crate::vocab::SERVERS);
        for (file, dialect) in [
            ("streamable-http/clean-resume.toml", Dialect::StreamableHttp),
            ("stateless-http/nat-rebind.toml", Dialect::StatelessHttp),
        ] {
            let file = format!("{}/scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
            let plan = Plan::load(file.as_ref()).unwrap();
            for name in crate::vocab::SERVERS {
                assert_eq!(for_plan(name, &plan, Seed(1)).is_ok(), speaks(name, dialect), "{name} on {file}");
            }
        }
        assert_eq!(dialects("naive"), Dialect::ALL);
        assert_eq!(dialects("rmcp"), [Dialect::StreamableHttp, Dialect::StatelessHttp]);
        assert_eq!(dialects("rmcp-unsealed"), [Dialect::StatelessHttp]);
        assert_eq!(dialects("uncancelled"), [Dialect::StatelessHttp]);
        assert_eq!(dialects("no-fence"), [Dialect::LegacySse, Dialect::StreamableHttp]);
        assert!(dialects("nope").is_empty());
        let mut stateless: Vec<&str> = stateless::POLICIES.iter().map(|p| p.name).collect();
        stateless.extend(rmcp_stateless::NAMES);
        assert_eq!(stateless, crate::vocab::STATELESS_SERVERS);
        for name in crate::vocab::SERVERS {
            assert_eq!(crate::vocab::speaks_stateful(name), dialects(name).iter().any(|d| d.has_sessions()), "{name}");
        }
    }
}
