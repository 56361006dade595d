//! Precision: a fixed set of hunt seeds whose every violation a person read
//! and judged right (verdict and headline), kept in a reviewed snapshot. A
//! change to any verdict or headline on these runs shows up in review.
//!
//! The seeds were picked from `mcpsim hunt --server rmcp --seeds 500 --seed 0`
//! and `mcpsim hunt --server naive --seeds 300 --seed 0` to cover every shape
//! of headline those hunts produce, and the audit's former false positives
//! (rmcp 14, 136, 146, 230: correlation-consistency across sessions; 303:
//! the wrong request named).

mod common;

use mcpsim::check;
use mcpsim::scenario::Dialect;

fn listing(server: &str, dialect: Dialect, seeds: &[u64]) -> String {
    let mut out = String::new();
    for &seed in seeds {
        let plan = mcpsim::hunt::generate_in(seed, dialect);
        let run = mcpsim::run(&plan, server, None).unwrap();
        let verdicts = check::judge(&run.trace);
        out.push_str(&format!(
            "seed {seed}: {}\n",
            check::violated(&verdicts).iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
        ));
        for v in &verdicts {
            for x in v.violations() {
                let inherent = if x.inherent { " [inherent]" } else { "" };
                out.push_str(&format!("  {} {}{inherent}\n", v.check, x.headline()));
            }
        }
    }
    out
}

#[test]
fn rmcp_hunt_seeds_read_by_a_person() {
    let seeds = [2, 3, 14, 44, 45, 136, 141, 146, 230, 302, 303, 369, 381, 465];
    common::snapshot("precision", "rmcp", &listing("rmcp", Dialect::StreamableHttp, &seeds), None);
}

#[test]
fn naive_hunt_seeds_read_by_a_person() {
    let seeds = [9, 11, 25, 30, 171];
    common::snapshot("precision", "naive", &listing("naive", Dialect::LegacySse, &seeds), None);
}
