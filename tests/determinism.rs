//! Same scenario + same seed ⇒ byte-identical trace (DESIGN.md §3).

use mcpsim::scenario::{Dialect, Plan};
use mcpsim::seed::Seed;
use std::path::Path;

fn bundled() -> Vec<Plan> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut paths: Vec<_> = [root.clone(), root.join("streamable-http")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 2);
    paths.iter().map(|p| Plan::load(p).unwrap()).collect()
}

#[test]
fn every_bundled_scenario_gives_byte_identical_traces() {
    for plan in bundled() {
        for server in mcpsim::server::known_servers() {
            if mcpsim::server::streamable_only(server) && plan.dialect != Dialect::StreamableHttp {
                continue;
            }
            let a = mcpsim::world::run(&plan, server, None).unwrap().trace.to_jsonl();
            let b = mcpsim::world::run(&plan, server, None).unwrap().trace.to_jsonl();
            assert!(!a.is_empty());
            assert!(a == b, "{} on {server}: traces differ", plan.name);
        }
    }
}

#[test]
fn the_seed_reaches_the_trace() {
    // A different seed mints different session tokens: the seed is really used.
    let plan = &bundled()[0];
    let a = mcpsim::world::run(plan, "guarded", Some(Seed(1))).unwrap().trace.to_jsonl();
    let b = mcpsim::world::run(plan, "guarded", Some(Seed(2))).unwrap().trace.to_jsonl();
    assert_ne!(a, b);
}
