//! Shared vocabulary: names that layers which must not depend on each other
//! all use (a leaf module: it imports nothing of the crate).
//!
//! - [`CheckId`]: the checks, one list, from which the TOML names of
//!   `[expect]`, `mcpsim list checks`, the JSON report and the scenario
//!   schema derive.
//! - [`SERVERS`]: the built-in servers `--server` and `[expect]` accept
//!   (the `server` module builds each; a test there keeps the two in step).

use serde::{Serialize, Serializer};
use std::fmt;

macro_rules! check_ids {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A check (DESIGN.md §1), named in TOML, reports and JSON by [`CheckId::as_str`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CheckId {
            $($(#[$doc])* $variant,)*
        }

        impl CheckId {
            /// Every check, in the order of DESIGN.md §1, then `protocol`.
            pub const ALL: &'static [CheckId] = &[$(CheckId::$variant,)*];
            /// Their names, in the same order.
            pub const NAMES: &'static [&'static str] = &[$($name,)*];

            /// The name in TOML, reports and JSON (`"session-binding"`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(CheckId::$variant => $name,)*
                }
            }
        }
    };
}

check_ids! {
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
}

impl CheckId {
    /// The check named `name`, if any.
    pub fn from_name(name: &str) -> Option<CheckId> {
        CheckId::ALL.iter().copied().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so that widths such as `{:<24}` apply.
        f.pad(self.as_str())
    }
}

impl From<CheckId> for String {
    fn from(c: CheckId) -> String {
        c.as_str().to_string()
    }
}

impl Serialize for CheckId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<str> for CheckId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CheckId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for CheckId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// The built-in servers, in listing order: the reference engine's policies
/// (naive, guarded, then guarded's mutants), then rmcp.
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
    "rmcp",
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
    }
}
