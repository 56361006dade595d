//! The reference MCP server engine, its resumption policies and the plug-in
//! boundary for servers under test.

mod engine;
pub mod plug;
pub mod policy;
pub mod rmcp;

pub use crate::inbox::Inbox;
pub use engine::Engine;
pub use plug::{AppCommand, AppHook, AppReporter, ServerPlug};
pub use policy::{Decision, ResumptionPolicy};

use crate::error::{Error, Result};
use crate::scenario::{Dialect, Plan, ServerConfig};
use crate::seed::Seed;
use std::rc::Rc;

/// The names `--server` accepts.
pub fn known_servers() -> Vec<&'static str> {
    crate::vocab::SERVERS.to_vec()
}

/// Servers that speak only `streamable-http`.
pub fn streamable_only(name: &str) -> bool {
    name == "rmcp"
}

/// Whether `--server` accepts `name`.
pub fn is_known_server(name: &str) -> bool {
    known_servers().contains(&name)
}

/// One-line descriptions of the built-in servers.
pub fn describe_servers() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<_> = policy::builtin_policies().iter().map(|p| (p.name(), p.description())).collect();
    all.push(("rmcp", "the official Rust SDK's StreamableHttpService (rmcp 3.11.0), streamable-http only"));
    all
}

/// The built-in server `name`, configured for `plan`; the error names the
/// known servers, or the dialect the server lacks.
pub fn for_plan(name: &str, plan: &Plan, seed: Seed) -> Result<Rc<dyn ServerPlug>> {
    if streamable_only(name) && plan.dialect != Dialect::StreamableHttp {
        return Err(Error::usage(format!(
            "server {name:?} speaks only dialect \"streamable-http\"; scenario {:?} is \"legacy-sse\"",
            plan.name
        )));
    }
    builtin(name, &plan.server, plan.dialect, seed)
        .ok_or_else(|| Error::usage(format!("unknown server {name:?} (known: {})", known_servers().join(", "))))
}

/// A built-in server by name.
pub fn builtin(name: &str, cfg: &ServerConfig, dialect: Dialect, seed: Seed) -> Option<Rc<dyn ServerPlug>> {
    if name == "rmcp" {
        return Some(Rc::new(rmcp::Rmcp::new(cfg.clone(), seed)));
    }
    let policy: Rc<dyn ResumptionPolicy> = policy::builtin_policies().into_iter().find(|p| p.name() == name)?.into();
    Some(Rc::new(Engine::new(cfg.clone(), dialect, policy, seed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_vocabulary_names_exactly_the_servers_that_build() {
        let mut built: Vec<&str> = policy::builtin_policies().iter().map(|p| p.name()).collect();
        built.push("rmcp");
        assert_eq!(built, crate::vocab::SERVERS);
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/streamable-http/clean-resume.toml");
        let plan = Plan::load(file.as_ref()).unwrap();
        for name in crate::vocab::SERVERS {
            assert!(for_plan(name, &plan, Seed(1)).is_ok(), "{name}");
        }
    }
}
