//! Scenario files (TOML v1, docs/design.md §4) and the validated [`Plan`] they become.
//!
//! ```
//! let plan = mcpsim::scenario::Plan::from_toml_str(r#"
//! [scenario]
//! name = "tiny"
//! duration = "10s"
//! [[client]]
//! name = "alice"
//! [[step]]
//! at = "0s"
//! do = "connect"
//! client = "alice"
//! "#, "tiny.toml").unwrap();
//! assert_eq!(plan.clients[0].name, "alice");
//! ```

mod duration;

pub use duration::{format_duration, parse_duration, Dur};

use crate::error::{Error, Result};
use crate::seed::Seed;
use crate::wire::jsonrpc::mcp::SERVER_REQUEST_METHODS;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

mod config;
mod load;
mod raw;
mod step;
mod validate;
mod write;
pub use crate::vocab::StepKind;
pub use config::{
    ClientSpec, Deployment, NetworkConfig, Routing, ServerConfig, StoreKind, ToolSpec, DEFAULT_TICK, MAX_REPLICAS,
};
pub use raw::json_schema;
pub use step::{Action, After, LastEventId, ResumeExpect, SeenOn, Step, Tamper, Trigger};
pub use validate::PlanProblem;

/// The property ids a scenario's `[expect]` may name (docs/design.md §1).
pub const CHECK_IDS: &[&str] = crate::vocab::CheckId::NAMES;

/// The step kinds (`do = "..."`).
pub const STEP_KINDS: &[&str] = StepKind::NAMES;

/// The wire dialect a run speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// The seed's: `GET /mcp/sse`, `event: endpoint`, POST downlink.
    #[default]
    LegacySse,
    /// MCP 2025-11-25 Streamable HTTP: one endpoint, `Mcp-Session-Id`, resume by GET.
    StreamableHttp,
    /// MCP 2026-07-28: no sessions; every request is its own POST, and a
    /// server's questions are Multi Round-Trip Requests carrying `requestState`.
    StatelessHttp,
}

/// The two families of dialects: with sessions, whose streams resume by
/// `Last-Event-ID` (legacy-sse, streamable-http), or without (stateless-http).
/// Layers that differ only by family choose by it; a layer that tells the
/// dialects of one family apart makes its one choice by [`Dialect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Sessions, streams and `Last-Event-ID` (MCP 2024-11-05, 2025-11-25).
    Stateful,
    /// No session: each request its own POST, state in `requestState` (MCP 2026-07-28).
    Stateless,
}

/// What the scenario layer knows of a dialect (see [`Dialect::spec`]).
struct Spec {
    name: &'static str,
    family: Family,
    steps: &'static [StepKind],
}

impl Dialect {
    /// Every dialect, in listing order (a new variant goes here and in [`Dialect::spec`]).
    pub const ALL: [Dialect; 3] = [Dialect::LegacySse, Dialect::StreamableHttp, Dialect::StatelessHttp];

    /// The scenario layer's one choice of dialect (docs/design.md §7): its
    /// name, family and step kinds.
    const fn spec(self) -> Spec {
        use StepKind::*;
        match self {
            Dialect::LegacySse => Spec {
                name: "legacy-sse",
                family: Family::Stateful,
                steps: &[
                    Connect,
                    ServerRequest,
                    Notify,
                    Answer,
                    Rebind,
                    Sever,
                    Reset,
                    Resume,
                    StealToken,
                    CrashClient,
                    RestartReplica,
                    CrashReplica,
                    Drain,
                    Partition,
                    Wait,
                ],
            },
            Dialect::StreamableHttp => Spec {
                name: "streamable-http",
                family: Family::Stateful,
                steps: &[
                    Connect,
                    ServerRequest,
                    CallTool,
                    EndSession,
                    EnableTool,
                    Notify,
                    Answer,
                    Rebind,
                    Sever,
                    Reset,
                    Resume,
                    StealToken,
                    CrashClient,
                    RestartReplica,
                    CrashReplica,
                    Drain,
                    Partition,
                    Wait,
                ],
            },
            Dialect::StatelessHttp => Spec {
                name: "stateless-http",
                family: Family::Stateless,
                steps: &[
                    Call,
                    StealRequestState,
                    TamperRequestState,
                    ReplayRequestState,
                    RestartServer,
                    Listen,
                    ChangeTools,
                    Partition,
                    RestartReplica,
                    CrashReplica,
                    Drain,
                    Rebind,
                    Sever,
                    Reset,
                    CrashClient,
                    Wait,
                ],
            },
        }
    }

    /// Its name in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The dialect called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The step kinds a scenario of this dialect may use.
    pub fn step_kinds(self) -> &'static [StepKind] {
        self.spec().steps
    }

    /// Its family: with sessions, or stateless.
    pub fn family(self) -> Family {
        self.spec().family
    }

    /// Whether a session (and `Last-Event-ID`) exists in this dialect.
    pub fn has_sessions(self) -> bool {
        self.family() == Family::Stateful
    }
}

/// A validated scenario: everything a run needs, nothing left to check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The scenario's name (`[scenario] name`).
    pub name: String,
    /// What the scenario is about, in words (may be empty).
    pub description: String,
    /// The wire dialect the clients speak.
    pub dialect: Dialect,
    /// The seed a run uses unless one is given.
    pub seed: Seed,
    /// How long a run lasts, in simulated time.
    pub duration: Duration,
    /// `[server]`: how the reference engine is configured.
    pub server: ServerConfig,
    /// `[network]`: latency, tick and NAT lifetimes.
    pub network: NetworkConfig,
    /// `[deployment]`: the replicas and the balancer's routing.
    #[serde(skip_serializing_if = "Deployment::is_single")]
    pub deployment: Deployment,
    /// The clients, in file order.
    pub clients: Vec<ClientSpec>,
    /// The steps, in file order.
    pub steps: Vec<Step>,
    /// `[[tool]]` (stateless-http): the tools the server offers, in file order.
    pub tools: Vec<ToolSpec>,
    /// server name → the checks it must violate (empty: must pass all).
    pub expect: BTreeMap<String, Vec<String>>,
    /// server name → the checks of its `expect` entry that it violates only
    /// inherently (`[expect_inherent]`; none listed: none may be inherent).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub expect_inherent: BTreeMap<String, Vec<String>>,
    /// The file the plan was loaded from (set by [`Plan::load`]; none for a plan built in code).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}
