//! The verdict matrix: every bundled scenario (both dialects) against every
//! built-in server that speaks its dialect, judged by every check. The matrix
//! is `snapshots/matrix/matrix.snap`, each run's report
//! `snapshots/report/<dialect>/<scenario>__<server>.snap`.

use mcpsim::check::{self, Status, Verdict};
use mcpsim::scenario::{Dialect, Plan};
use mcpsim::server::policy::Mutation;
use std::collections::BTreeMap;
use std::path::Path;

/// Bundled scenarios, loaded by relative path so reports name them portably.
fn scenarios() -> Vec<Plan> {
    common::bundled_scenarios().iter().map(|p| Plan::load(p).unwrap()).collect()
}

mod common;

/// The servers that speak a stateful dialect (the matrix's columns; the
/// stateless dialect has its own matrix in `tests/stateless.rs`).
fn stateful_servers() -> Vec<&'static str> {
    mcpsim::server::known_servers()
        .into_iter()
        .filter(|s| mcpsim::server::dialects(s).iter().any(|d| d.has_sessions()))
        .collect()
}

/// Whether `server` speaks `plan`'s dialect.
fn applies(plan: &Plan, server: &str) -> bool {
    mcpsim::server::speaks(server, plan.dialect)
}

struct Cell {
    verdicts: Vec<Verdict>,
    expectation: Option<check::Expectation>,
    report: String,
    dialect: Dialect,
}

fn matrix() -> BTreeMap<(String, String), Cell> {
    let mut m = BTreeMap::new();
    for plan in scenarios() {
        for server in mcpsim::server::known_servers().into_iter().filter(|s| applies(&plan, s)) {
            let run = mcpsim::run(&plan, server, None).unwrap();
            let verdicts = check::judge(&run.trace);
            let e = check::expectation(&plan, server, &verdicts, &run.trace);
            let report = mcpsim::report::text(&run, &verdicts, e.as_ref());
            m.insert(
                (plan.name.clone(), server.to_string()),
                Cell { verdicts, expectation: e, report, dialect: plan.dialect },
            );
        }
    }
    m
}

fn violated(cell: &Cell) -> Vec<check::CheckId> {
    check::violated(&cell.verdicts)
}

#[test]
fn verdict_matrix_and_reports_match_their_snapshots() {
    let m = matrix();
    let servers = stateful_servers();
    let mut names: Vec<&String> = m.keys().map(|k| &k.0).collect();
    names.dedup();
    let w = names.iter().map(|n| n.len()).max().unwrap_or(0).max(36);
    let mut table = format!("{:<w$}", "scenario \\ server");
    for s in &servers {
        table.push_str(&format!(" {s:<18}"));
    }
    table.push('\n');
    for name in names {
        table.push_str(&format!("{name:<w$}"));
        for s in &servers {
            let Some(cell) = m.get(&(name.clone(), s.to_string())) else {
                table.push_str(&format!(" {:<18}", "-"));
                continue;
            };
            let short: Vec<String> = violated(cell)
                .iter()
                .map(|c| c.as_str().split('-').map(|w| w[..1].to_uppercase()).collect::<String>())
                .collect();
            let text = if short.is_empty() { "ok".to_string() } else { short.join(",") };
            table.push_str(&format!(" {text:<18}"));
        }
        table.push('\n');
    }
    table.push_str(
        "\nSB session-binding, RI replay-integrity, CC correlation-consistency, ID inflight-disposition,\n\
         C confidentiality, L liveness, RP rejection-protocol, SO stream-order;\n\
         - the server does not speak the scenario's dialect\n",
    );
    common::snapshot("matrix", "matrix", &table, None);
    for ((scenario, server), cell) in &m {
        let area = format!("report/{}", cell.dialect.name());
        common::snapshot(&area, &format!("{scenario}__{server}"), &cell.report, None);
    }
}

#[test]
fn the_matrix_proves_every_check_and_every_mutant() {
    let m = matrix();
    // Every scenario states its expectation for every built-in server, and meets it.
    for plan in scenarios() {
        for server in mcpsim::server::known_servers().into_iter().filter(|s| applies(&plan, s)) {
            let cell = &m[&(plan.name.clone(), server.to_string())];
            let e = cell.expectation.as_ref().unwrap_or_else(|| panic!("{} has no [expect] for {server}", plan.name));
            assert!(e.met, "{} on {server}: {}", plan.name, mcpsim::report::expectation_line(server, e));
        }
    }
    // Each mutant is caught by its own check in at least one scenario of each dialect.
    let streamable: Vec<String> =
        scenarios().into_iter().filter(|p| p.dialect == Dialect::StreamableHttp).map(|p| p.name).collect();
    for mutation in Mutation::ALL {
        for in_streamable in [false, true] {
            let by = mutation.caught_by();
            assert!(
                m.iter().any(|((sc, s), cell)| s == mutation.name()
                    && streamable.contains(sc) == in_streamable
                    && violated(cell).contains(&by)),
                "{} is never caught by {by} in {} scenarios",
                mutation.name(),
                if in_streamable { "streamable-http" } else { "legacy-sse" }
            );
        }
    }
    // guarded: its only violations are ones every server shares (a thief holding the
    // owner's credential cannot be told apart), so none is guarded's own doing.
    for ((scenario, server), cell) in &m {
        if server != "guarded" {
            continue;
        }
        for check_id in violated(cell) {
            for other in mcpsim::server::known_servers() {
                // Reference-engine servers only: an SDK may dodge a leak by accident.
                if mcpsim::server::is_sdk(other) {
                    continue;
                }
                let Some(other_cell) = m.get(&(scenario.clone(), other.to_string())) else { continue };
                assert!(
                    violated(other_cell).contains(&check_id),
                    "guarded violates {check_id} in {scenario}, but {other} does not"
                );
            }
        }
    }
    let guarded_clean = m.iter().filter(|((_, s), c)| s == "guarded" && violated(c).is_empty()).count();
    assert!(guarded_clean >= 18, "guarded passes all but the credential-theft scenarios");
    // naive fails both canonical scenarios.
    assert_eq!(violated(&m[&("nat-rebind".into(), "naive".into())]), ["session-binding", "liveness"]);
    assert_eq!(
        violated(&m[&("second-client-leak".into(), "naive".into())]),
        ["correlation-consistency", "confidentiality"]
    );
    // Every check fires somewhere, and is not-applicable or passed somewhere else.
    // (`protocol` needs a misbehaving server: tests/misbehaving.rs proves it.)
    for c in check::CHECKS.iter().filter(|c| c.id != "protocol") {
        let fired = m.values().any(|cell| violated(cell).contains(&c.id));
        let quiet = m
            .values()
            .any(|cell| cell.verdicts.iter().any(|v| v.check == c.id && !matches!(v.status, Status::Violated { .. })));
        assert!(fired && quiet, "{}: fired {fired}, quiet somewhere {quiet}", c.id);
    }
}

/// `[expect]` names every check violated, `[expect_inherent]` those violated
/// only inherently: a run is met only when both match, so an inherent
/// finding that turns plain (or a plain one called inherent) is not met.
#[test]
fn expect_inherent_must_match_as_well() {
    let file = |name: &str| Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(name);
    let judge = |text: &str, server: &str| {
        let plan = Plan::from_toml_str(text, "x.toml").unwrap();
        let run = mcpsim::run(&plan, server, None).unwrap();
        let verdicts = check::judge(&run.trace);
        let e = check::expectation(&plan, server, &verdicts, &run.trace).unwrap();
        (e.met, mcpsim::report::text(&run, &verdicts, Some(&e)))
    };
    // With the credential, guarded's leak is inherent: the bundled file says so and is met.
    let with = std::fs::read_to_string(file("theft-with-credential.toml")).unwrap();
    let (met, report) = judge(&with, "guarded");
    assert!(met, "{report}");
    assert!(report.contains("INHERENT") && !report.contains("VIOLATED"), "{report}");
    assert!(report.contains("expectation met: guarded violates nothing (inherent only: confidentiality)"), "{report}");
    // The same file without its [expect_inherent] table: the inherent finding is not expected as plain.
    let stripped = with[..with.find("[expect_inherent]").expect("the file lists its inherent findings")].to_string();
    let (met, report) = judge(&stripped, "guarded");
    assert!(!met, "{report}");
    // Without the credential naive's leak is plain: calling it inherent is not met.
    let without = std::fs::read_to_string(file("theft-without-credential.toml")).unwrap();
    assert!(without.contains("naive = [\"confidentiality\"]"), "the file's naive entry moved");
    let (met, _) = judge(&without, "naive");
    assert!(met);
    let (met, report) = judge(&format!("{without}\n[expect_inherent]\nnaive = [\"confidentiality\"]\n"), "naive");
    assert!(!met, "{report}");
    assert!(report.contains("VIOLATED"), "{report}");
}

/// `[expect_inherent]` may name only checks its server's `[expect]` lists.
#[test]
fn expect_inherent_names_only_what_expect_lists() {
    let with =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/clean-resume.toml")).unwrap();
    let err =
        Plan::from_toml_str(&format!("{with}\n[expect_inherent]\nguarded = [\"liveness\"]\n"), "x.toml").unwrap_err();
    let err = err.to_string();
    assert!(
        err.contains("[expect_inherent] names \"liveness\" for guarded, which its [expect] entry does not list"),
        "{err}"
    );
    assert!(err.contains("x.toml:"), "{err}");
}
