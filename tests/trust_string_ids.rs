//! Verdicts that must not depend on the shape of event ids: real servers
//! mint uuids and `stream_time_random` ids, and the checks judge them as
//! they judge numbers (split from tests/trust.rs).

use mcpsim::check::{self, Verdict};
use mcpsim::scenario::Plan;
use std::path::Path;

mod common;

use common::verdicts::{fires, quiet};

fn load(rel: &str) -> Plan {
    Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn judge(plan: &Plan, server: &str) -> Vec<Verdict> {
    check::judge(&mcpsim::run(plan, server, None).unwrap().trace)
}

/// Rewrites `trace` as a server whose event ids are strings would make it
/// (the TypeScript SDK's example store mints `<stream>_<ms>_<random>`, the
/// Python SDK's a uuid): every id the server minted below 5000 becomes
/// `ev-<n>-x`, wherever it shows.
fn string_ids(trace: &mut mcpsim::trace::Trace) {
    use mcpsim::trace::What;
    let s = |id: &mut String| {
        if id.parse::<u64>().is_ok_and(|n| n < 5000) {
            *id = format!("ev-{id}-x");
        }
    };
    for e in &mut trace.events {
        match &mut e.what {
            What::SseEvent { id: Some(id), .. } | What::RequestIssued { event_id: Some(id), .. } => s(id),
            What::HttpRequest { last_event_id: Some(id), .. } => s(id),
            What::DroppedWrite { events, .. } => events.iter_mut().filter_map(|e| e.id.as_mut()).for_each(s),
            What::Notified { event_ids, .. } => event_ids.iter_mut().for_each(s),
            _ => {}
        }
    }
}

/// The verdicts of `plan` on `server`, its ids made strings.
fn with_string_ids(plan: &Plan, server: &str) -> Vec<Verdict> {
    let mut trace = mcpsim::run(plan, server, None).unwrap().trace;
    string_ids(&mut trace);
    check::judge(&trace)
}

#[test]
fn every_verdict_stands_when_the_event_ids_are_strings() {
    // Real servers mint uuids and `stream_time_random` ids; the checks must
    // judge them as they judge numbers. Every cell of the verdict matrix
    // (every bundled scenario on every built-in server) is judged twice.
    let mut cells = 0;
    for path in common::bundled_scenarios() {
        let plan = Plan::load(&path).unwrap();
        for server in mcpsim::server::known_servers() {
            if !mcpsim::server::speaks(server, plan.dialect) {
                continue;
            }
            let mut trace = mcpsim::run(&plan, server, None).unwrap().trace;
            let numbers = check::violated(&check::judge(&trace));
            string_ids(&mut trace);
            let strings = check::violated(&check::judge(&trace));
            assert_eq!(numbers, strings, "{} on {server}: the verdicts change when the ids are strings", plan.name);
            cells += 1;
        }
    }
    assert!(cells > 300, "only {cells} cells judged");
}

#[test]
fn a_number_lies_in_no_window_of_a_session_whose_ids_are_strings() {
    // The TypeScript SDK accepted `Last-Event-ID: 5000` on a session whose
    // ids all had the form `_GET_stream_<ms>_<random>`, and replay-integrity
    // passed it: a number was left to the numeric rules, which judge only
    // sessions that show numbered ids.
    for rel in ["scenarios/future-id.toml", "scenarios/streamable-http/future-id.toml"] {
        let plan = load(rel);
        fires(
            &with_string_ids(&plan, "naive"),
            "replay-integrity",
            &["resumption from \"5000\" was accepted", "no event of the session ever carried that id"],
        );
        quiet(&with_string_ids(&plan, "guarded"), "replay-integrity");
        // Numbered ids keep their own rule (a future id, not a stranger).
        fires(&judge(&plan, "naive"), "replay-integrity", &["resumption from 5000 was accepted"]);
    }
}
