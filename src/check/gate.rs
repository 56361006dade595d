//! `mcpsim run --gate`: a run fails on any violation that is not inherent,
//! whatever `[expect]` says or leaves out, unless a baseline file accepts
//! it. A baseline lists accepted findings by scenario and check (as the MCP
//! conformance suite's `--expected-failures` does); an entry that no longer
//! fails is stale, and a stale entry fails the gate too, so the baseline
//! shrinks as the server gets better.
//!
//! ```toml
//! # mcpsim gate baseline: findings this server is known to have.
//! [accepted]
//! nat-rebind = ["session-binding", "liveness"]
//! "stateless-nat-rebind" = ["exactly-once"]
//! ```

use super::{CheckId, Expectation, Verdict};
use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Accepted findings: scenario name → the checks it may violate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    accepted: BTreeMap<String, Vec<CheckId>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    accepted: BTreeMap<String, Vec<String>>,
}

impl Baseline {
    /// No accepted findings: every violation that is not inherent fails.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Reads a baseline file; the error names the file, and the line and
    /// column or the unknown check.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::usage(format!("{}: cannot read the baseline: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| Error::usage(format!("{}: {e}", path.display())))
    }

    /// A baseline from its TOML text.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let raw: Raw = toml::from_str(text).map_err(|e| format!("not a baseline: {e}"))?;
        let mut accepted = BTreeMap::new();
        for (scenario, checks) in raw.accepted {
            let mut ids = Vec::new();
            for c in checks {
                let id = CheckId::from_name(&c).ok_or_else(|| {
                    format!("[accepted] {scenario:?}: unknown check {c:?} (known: {})", CheckId::NAMES.join(", "))
                })?;
                ids.push(id);
            }
            accepted.insert(scenario, ids);
        }
        Ok(Baseline { accepted })
    }

    /// The checks accepted for `scenario`.
    pub fn accepted(&self, scenario: &str) -> &[CheckId] {
        self.accepted.get(scenario).map_or(&[], Vec::as_slice)
    }

    /// The key of `plan`'s entry: its scenario name, or the path of its
    /// file as a user sees it (as written, or any tail of it: the file name
    /// with or without `.toml`).
    pub fn key_for(&self, plan: &crate::scenario::Plan) -> Option<&str> {
        self.accepted.keys().map(String::as_str).find(|k| names(plan, k))
    }

    /// The keys that name none of `plans`: a typo, or a scenario this run
    /// does not play (an error: a key that names nothing accepts nothing).
    pub fn unknown_keys(&self, plans: &[&crate::scenario::Plan]) -> Vec<String> {
        self.accepted.keys().filter(|k| !plans.iter().any(|p| names(p, k))).cloned().collect()
    }

    /// A baseline file accepting `entries` (key → checks), keyed as given.
    pub fn text(entries: &BTreeMap<String, Vec<CheckId>>) -> String {
        let mut out = String::from(
            "# mcpsim gate baseline: findings this server is known to have (mcpsim run --gate --write-baseline).\n\
             # An entry that no longer fails is stale and fails the gate: remove it as the server gets better.\n\
             [accepted]\n",
        );
        for (key, checks) in entries.iter().filter(|(_, c)| !c.is_empty()) {
            let checks: Vec<String> = checks.iter().map(|c| format!("{:?}", c.as_str())).collect();
            out.push_str(&format!("{key:?} = [{}]\n", checks.join(", ")));
        }
        out
    }
}

/// Whether baseline key `key` names `plan`: its scenario name, or its file.
fn names(plan: &crate::scenario::Plan, key: &str) -> bool {
    if key == plan.name {
        return true;
    }
    let Some(path) = &plan.source else { return false };
    let key = key.trim_start_matches("./");
    let path = path.to_string_lossy();
    let with_toml = if key.ends_with(".toml") { key.to_string() } else { format!("{key}.toml") };
    path == with_toml || path.ends_with(&format!("/{with_toml}"))
}

/// The checks with at least one violation that is not inherent.
pub fn failing(verdicts: &[Verdict]) -> Vec<CheckId> {
    verdicts.iter().filter(|v| v.violations().iter().any(|x| !x.inherent)).map(|v| v.check).collect()
}

/// The gate's judgement of one run of `scenario`: it passes when every
/// check that failed (not inherently) is accepted by the baseline, and
/// every accepted check still fails.
pub fn gate(scenario: &str, verdicts: &[Verdict], baseline: &Baseline) -> Expectation {
    gate_with(baseline.accepted(scenario), verdicts)
}

/// [`gate`] for `plan`, whose entry the baseline may key by its scenario
/// name or by its file.
pub fn gate_plan(plan: &crate::scenario::Plan, verdicts: &[Verdict], baseline: &Baseline) -> Expectation {
    gate_with(baseline.key_for(plan).map_or(&[], |k| baseline.accepted(k)), verdicts)
}

fn gate_with(accepted: &[CheckId], verdicts: &[Verdict]) -> Expectation {
    let failing = failing(verdicts);
    let stale: Vec<String> = accepted.iter().filter(|c| !failing.contains(c)).map(|c| c.to_string()).collect();
    let met = failing.iter().all(|c| accepted.contains(c)) && stale.is_empty();
    Expectation {
        expected: accepted.iter().map(|c| c.to_string()).collect(),
        expected_inherent: Vec::new(),
        violated: failing.iter().map(|c| c.to_string()).collect(),
        inherent: Vec::new(),
        missed: Vec::new(),
        met,
        gate: true,
        stale,
        cut: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::finding::Finding;
    use crate::check::{Status, Violation};
    use crate::trace::SimTime;

    fn violated(check: CheckId, inherent: bool) -> Verdict {
        let finding = Finding::NeverShownAbove {
            client: "alice".into(),
            conn: crate::trace::ConnId(1),
            from: 9,
            newest: 1,
            unseen: 0,
        };
        let v = Violation { check, finding, t: SimTime(0), evidence: vec![], inherent };
        Verdict { check, status: Status::Violated { violations: vec![v] } }
    }

    #[test]
    fn the_gate_fails_on_what_is_not_inherent_unless_accepted_and_fails_on_stale_entries() {
        let verdicts = [
            violated(CheckId::SessionBinding, false),
            violated(CheckId::Liveness, true),
            Verdict { check: CheckId::Protocol, status: Status::Passed },
        ];
        assert_eq!(failing(&verdicts), [CheckId::SessionBinding]);
        let e = gate("nat-rebind", &verdicts, &Baseline::empty());
        assert!(!e.met && e.gate);
        assert_eq!(e.violated, ["session-binding"]);
        let accepted = Baseline::parse("[accepted]\nnat-rebind = [\"session-binding\"]\n").unwrap();
        assert!(gate("nat-rebind", &verdicts, &accepted).met);
        // Accepted for another scenario only: it still fails here.
        assert!(!gate("clean-resume", &verdicts, &accepted).met);
        // An inherent violation alone passes; an accepted check that no longer fails is stale.
        let stale = gate("nat-rebind", &verdicts[1..], &accepted);
        assert!(!stale.met);
        assert_eq!(stale.stale, ["session-binding"]);
        assert!(gate("other", &verdicts[1..], &accepted).met);
    }

    #[test]
    fn a_bad_baseline_is_named_with_where_and_what() {
        let err = Baseline::parse("[accepted]\nnat-rebind = [\"sesion-binding\"]\n").unwrap_err();
        assert!(err.contains("unknown check \"sesion-binding\"") && err.contains("nat-rebind"), "{err}");
        let err = Baseline::parse("[accepted\n").unwrap_err();
        assert!(err.contains("line 1"), "{err}");
        let err = Baseline::parse("[acepted]\n").unwrap_err();
        assert!(err.contains("acepted"), "{err}");
    }
}
