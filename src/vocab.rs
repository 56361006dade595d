//! Shared vocabulary: names that layers which must not depend on each other
//! all use (a leaf module: it imports nothing of the crate).
//!
//! - [`CheckId`]: the checks, one list, from which the TOML names of
//!   `[expect]`, `mcpsim list checks`, the JSON report and the scenario
//!   schema derive.
//! - [`StepKind`]: what a scenario step does, named in TOML and traces.
//! - [`SERVERS`]: the built-in servers `--server` and `[expect]` accept
//!   (the `server` module builds each; a test there keeps the two in step).
//! - [`LIVE_SERVERS`]: servers that run only live (the SDK adapters under
//!   `adapters/`), whose names `[expect]` accepts too.
//! - [`ConnId`], [`MappingId`]: a client's number for a connection and a
//!   NAT's number for a mapping (two different things, never mixed up).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A number for one of a client's TCP connections (1, 2, ... per client).
/// Its local port names the NAT mapping that carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConnId(pub u32);

/// A number for one of a client's NAT mappings (1, 2, ... per NAT), in the
/// order the NAT opened them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MappingId(pub u32);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for MappingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An enum whose variants each have one name (in TOML, traces, reports and
/// JSON), with the list of all variants and of all names in one order.
macro_rules! named_enum {
    ($(#[$enum_doc:meta])* $enum:ident { $($(#[$doc:meta])* $variant:ident = $name:literal,)* }) => {
        $(#[$enum_doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $enum {
            $($(#[$doc])* $variant,)*
        }

        impl $enum {
            /// Every variant, in order.
            pub const ALL: &'static [$enum] = &[$($enum::$variant,)*];
            /// Their names, in the same order.
            pub const NAMES: &'static [&'static str] = &[$($name,)*];

            /// Its name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)*
                }
            }

            /// The variant named `name`, if any.
            pub fn from_name(name: &str) -> Option<$enum> {
                $enum::ALL.iter().copied().find(|c| c.as_str() == name)
            }
        }

        impl fmt::Display for $enum {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // `pad`, so that widths such as `{:<24}` apply.
                f.pad(self.as_str())
            }
        }

        impl From<$enum> for String {
            fn from(c: $enum) -> String {
                c.as_str().to_string()
            }
        }

        impl Serialize for $enum {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $enum {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = String::deserialize(d)?;
                $enum::from_name(&name).ok_or_else(|| {
                    serde::de::Error::custom(format!("unknown {} {name:?}", stringify!($enum)))
                })
            }
        }

        impl PartialEq<str> for $enum {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $enum {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<String> for $enum {
            fn eq(&self, other: &String) -> bool {
                self.as_str() == other
            }
        }
    };
}

named_enum! {
    /// A check (docs/design.md §1), named in TOML, reports and JSON by [`CheckId::as_str`].
    CheckId {
    /// Condition 1: one writer per stream, the prior one fenced first.
    SessionBinding = "session-binding",
    /// Condition 2: a resumption from N replays from N+1, without gaps.
    ReplayIntegrity = "replay-integrity",
    /// Condition 3: a replay never re-sends a request the client answered.
    CorrelationConsistency = "correlation-consistency",
    /// Condition 4: requests in flight at a resumption are re-issued or failed.
    InflightDisposition = "inflight-disposition",
    /// No principal receives or acts on another principal's session.
    Confidentiality = "confidentiality",
    /// Every server request ends answered or failed, within its bound.
    Liveness = "liveness",
    /// A refusal is explicit, and the client re-initializes after it.
    RejectionProtocol = "rejection-protocol",
    /// Within a stream, ids are unique and nothing is sent twice.
    StreamOrder = "stream-order",
    /// The server spoke the protocol the harness can read.
    Protocol = "protocol",
    /// stateless-http: state minted for one principal is refused from another.
    StateBinding = "state-binding",
    /// stateless-http: tampered, expired or moved state is refused and never acted on.
    StateIntegrity = "state-integrity",
    /// stateless-http: a `once` state is redeemed once; no preventable duplicate runs.
    ExactlyOnce = "exactly-once",
    /// stateless-http: a close that reached the server cancels its request.
    Cancellation = "cancellation",
    }
}

named_enum! {
    /// What a scenario step does (`do = "..."`).
    StepKind {
        /// A client opens a fresh session.
        Connect = "connect",
        /// The server's application issues a server request on a client's session.
        ServerRequest = "server-request",
        /// streamable-http: a client calls the `ask` tool; the server issues a request on the call's stream.
        CallTool = "call-tool",
        /// streamable-http: a client ends its session with DELETE.
        EndSession = "end-session",
        /// streamable-http: a client calls the server's `enable_tool` tool on the session it holds (the server tells the session's standalone stream its tool list changed).
        EnableTool = "enable-tool",
        /// The server's application emits notifications on a client's session.
        Notify = "notify",
        /// A client answers a labelled server request.
        Answer = "answer",
        /// A client's NAT drops every live mapping silently.
        Rebind = "rebind",
        /// A client's NAT drops the mapping of its latest stream silently.
        Sever = "sever",
        /// A client's NAT resets the mapping of its latest stream.
        Reset = "reset",
        /// A client resumes its session's stream with a chosen `Last-Event-ID`.
        Resume = "resume",
        /// One client takes another's session token (and credential, if asked).
        StealToken = "steal-token",
        /// A client host crashes and forgets everything.
        CrashClient = "crash-client",
        /// Does nothing.
        Wait = "wait",
        /// stateless-http: a client calls a tool the scenario declares.
        Call = "call",
        /// stateless-http: one client presents another's `requestState` (and credential, if asked).
        StealRequestState = "steal-request-state",
        /// stateless-http: a client presents its `requestState` altered (flipped, truncated, or on another call).
        TamperRequestState = "tamper-request-state",
        /// stateless-http: a client presents a completed round's `requestState` again.
        ReplayRequestState = "replay-request-state",
        /// stateless-http: the server's process restarts: its memory and per-process keys are gone.
        RestartServer = "restart-server",
        /// stateless-http: a client keeps a `subscriptions/listen` stream open.
        Listen = "listen",
        /// stateless-http: the server's tool list changes (listen streams are told).
        ChangeTools = "change-tools",
        /// A deployment with a shared store: the link between a replica and the store drops every message.
        Partition = "partition",
        /// A deployment: one replica's process restarts (its memory and per-process keys are gone).
        RestartReplica = "restart-replica",
        /// A deployment: one replica crashes and stays down (the balancer takes it out of rotation).
        CrashReplica = "crash-replica",
        /// A deployment: one replica gets no new connections; its open streams stay.
        Drain = "drain",
    }
}

impl CheckId {
    /// The checks of the stateful dialects (legacy-sse, streamable-http), in report order.
    pub const STATEFUL: &'static [CheckId] = &[
        CheckId::SessionBinding,
        CheckId::ReplayIntegrity,
        CheckId::CorrelationConsistency,
        CheckId::InflightDisposition,
        CheckId::Confidentiality,
        CheckId::Liveness,
        CheckId::RejectionProtocol,
        CheckId::StreamOrder,
        CheckId::Protocol,
    ];
    /// The checks of stateless-http, in report order.
    pub const STATELESS: &'static [CheckId] = &[
        CheckId::StateBinding,
        CheckId::StateIntegrity,
        CheckId::ExactlyOnce,
        CheckId::Cancellation,
        CheckId::Confidentiality,
        CheckId::Liveness,
        CheckId::Protocol,
    ];
}

/// The built-in servers that speak stateless-http: naive and guarded (which
/// speak every dialect), the stateless mutants, then rmcp (which also speaks
/// streamable-http) and rmcp-unsealed.
pub const STATELESS_SERVERS: &[&str] = &[
    "naive",
    "guarded",
    "unbound-state",
    "unsealed-state",
    "reusable-state",
    "uncancelled",
    "ephemeral-key",
    "local-once",
    "rmcp",
    "rmcp-unsealed",
];

/// The built-in servers that speak only stateless-http.
const STATELESS_ONLY: &[&str] = &[
    "unbound-state",
    "unsealed-state",
    "reusable-state",
    "uncancelled",
    "ephemeral-key",
    "local-once",
    "rmcp-unsealed",
];

/// Whether built-in server `name` speaks a stateful dialect (legacy-sse or streamable-http).
pub fn speaks_stateful(name: &str) -> bool {
    SERVERS.contains(&name) && !STATELESS_ONLY.contains(&name)
}

/// Whether built-in server `name` is an SDK's server (rmcp) rather than the
/// reference engine with a policy.
pub fn is_sdk(name: &str) -> bool {
    name == "rmcp" || name == "rmcp-unsealed"
}

impl StepKind {
    /// The faults: steps that break a connection, a client or a credential.
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            StepKind::Rebind
                | StepKind::Sever
                | StepKind::Reset
                | StepKind::CrashClient
                | StepKind::StealToken
                | StepKind::StealRequestState
                | StepKind::TamperRequestState
                | StepKind::ReplayRequestState
                | StepKind::RestartServer
                | StepKind::Partition
                | StepKind::RestartReplica
                | StepKind::CrashReplica
                | StepKind::Drain
        )
    }
}

/// Servers that run only live (`mcpsim run --live`): the adapters under
/// `adapters/`, by the name they give in `ready` (one per configuration:
/// `-no-store` without an event store, `-redis` with the Redis-backed
/// store a deployment with a shared store hands them, `-auth` with a
/// bearer-token verifier; docs/live-protocol.md), and the example adapter
/// of `examples/`. `[expect]` accepts them beside [`SERVERS`].
pub const LIVE_SERVERS: &[&str] = &[
    "typescript-sdk",
    "typescript-sdk-no-store",
    "typescript-sdk-auth",
    "typescript-sdk-no-store-auth",
    "python-sdk",
    "python-sdk-no-store",
    "python-sdk-auth",
    "python-sdk-no-store-auth",
    "python-sdk-redis",
    "python-sdk-redis-auth",
    "typescript-v2",
    "typescript-v2-no-store",
    "typescript-v2-auth",
    "typescript-v2-no-store-auth",
    "typescript-v2-redis",
    "typescript-v2-redis-auth",
    "fastmcp",
    "fastmcp-no-store",
    "fastmcp-auth",
    "fastmcp-no-store-auth",
    "fastmcp-redis",
    "fastmcp-redis-auth",
    "minimal-adapter",
];

/// The [`LIVE_SERVERS`] that speak stateless-http too (MCP 2026-07-28).
pub const LIVE_STATELESS: &[&str] = &[
    "typescript-v2",
    "typescript-v2-no-store",
    "typescript-v2-auth",
    "typescript-v2-no-store-auth",
    "typescript-v2-redis",
    "typescript-v2-redis-auth",
    "fastmcp",
    "fastmcp-no-store",
    "fastmcp-auth",
    "fastmcp-no-store-auth",
    "fastmcp-redis",
    "fastmcp-redis-auth",
];

/// The names `[expect]` accepts: [`SERVERS`], then [`LIVE_SERVERS`].
pub fn expect_keys() -> impl Iterator<Item = &'static str> {
    SERVERS.iter().chain(LIVE_SERVERS).copied()
}

/// The built-in servers, in listing order: the reference engine's policies
/// (naive, guarded, then guarded's mutants), then rmcp and rmcp-unsealed,
/// then the stateless server's mutants (naive and guarded speak every dialect).
pub const SERVERS: &[&str] = &[
    "naive",
    "guarded",
    "no-fence",
    "truncating-replay",
    "answered-replay",
    "orphaning",
    "unbound",
    "inclusive-replay",
    "empty-ok",
    "local-fence",
    "rmcp",
    "rmcp-unsealed",
    "unbound-state",
    "unsealed-state",
    "reusable-state",
    "uncancelled",
    "ephemeral-key",
    "local-once",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_one_name_and_is_found_by_it() {
        assert_eq!(CheckId::ALL.len(), CheckId::NAMES.len());
        for (c, n) in CheckId::ALL.iter().zip(CheckId::NAMES) {
            assert_eq!(c.as_str(), *n);
            assert_eq!(CheckId::from_name(n), Some(*c));
            assert_eq!(serde_json::to_string(c).unwrap(), format!("\"{n}\""));
        }
        assert_eq!(CheckId::from_name("liveliness"), None);
        assert_eq!(serde_json::from_str::<CheckId>("\"stream-order\"").unwrap(), CheckId::StreamOrder);
        assert!(serde_json::from_str::<CheckId>("\"stream\"").is_err());
    }

    #[test]
    fn every_step_kind_has_one_name_and_the_faults_are_the_ones_that_break_something() {
        for (k, n) in StepKind::ALL.iter().zip(StepKind::NAMES) {
            assert_eq!(StepKind::from_name(n), Some(*k));
        }
        let faults: Vec<&str> = StepKind::ALL.iter().filter(|k| k.is_fault()).map(|k| k.as_str()).collect();
        assert_eq!(
            faults,
            [
                "rebind",
                "sever",
                "reset",
                "steal-token",
                "crash-client",
                "steal-request-state",
                "tamper-request-state",
                "replay-request-state",
                "restart-server",
                "partition",
                "restart-replica",
                "crash-replica",
                "drain"
            ]
        );
    }
}
