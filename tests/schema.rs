//! `mcpsim schema`: the JSON Schema accepts every bundled scenario and
//! rejects malformed ones, checked by an independent validator.

use std::path::PathBuf;

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(&mcpsim::scenario::json_schema()).unwrap();
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

fn as_json(toml_text: &str) -> serde_json::Value {
    toml::from_str(toml_text).expect("parses as TOML")
}

mod common;

fn scenario_files(dir: &str, out: &mut Vec<PathBuf>) {
    out.extend(common::toml_files_under(dir));
}

#[test]
fn every_bundled_scenario_validates() {
    let v = validator();
    let mut files = Vec::new();
    scenario_files("scenarios", &mut files);
    assert!(files.len() >= 10);
    for f in files {
        let doc = as_json(&std::fs::read_to_string(&f).unwrap());
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", f.display());
    }
    // A generated hunt plan, written out, validates too.
    let text = mcpsim::hunt::generate(3).to_toml(&[]);
    assert!(v.is_valid(&as_json(&text)), "{text}");
    let stateless = std::fs::read_to_string("scenarios/stateless-http/nat-rebind.toml").unwrap();
    let wrong = stateless.replace("naive = [\"cancellation\"", "naive = [\"session-binding\"");
    assert_ne!(wrong, stateless);
    assert!(!v.is_valid(&as_json(&wrong)), "a stateful check in a stateless scenario's [expect]");
    for seed in 0..50 {
        let plan = mcpsim::hunt::generate_in(seed, mcpsim::scenario::Dialect::StatelessHttp);
        let text = plan.to_toml(&[]);
        assert!(v.is_valid(&as_json(&text)), "{text}");
        let back = mcpsim::scenario::Plan::from_toml_str(&text, "generated.toml").expect("a written plan loads again");
        assert_eq!(back, plan, "a written stateless plan loads back the same (seed {seed})");
    }
    for seed in 0..20 {
        let text = mcpsim::hunt::generate_in(seed, mcpsim::scenario::Dialect::StreamableHttp).to_toml(&[]);
        assert!(v.is_valid(&as_json(&text)), "{text}");
        mcpsim::scenario::Plan::from_toml_str(&text, "generated.toml").expect("a written plan loads again");
    }
}

#[test]
fn malformed_scenarios_are_rejected() {
    let v = validator();
    let base = std::fs::read_to_string("scenarios/nat-rebind.toml").unwrap();
    for (what, bad) in [
        ("unknown key", base.replace("half_open_lifetime", "half_open_lifetim")),
        ("unknown step kind", base.replace("do = \"rebind\"", "do = \"rebnd\"")),
        ("malformed duration", base.replace("duration = \"400s\"", "duration = \"400 seconds\"")),
        ("unknown check", base.replace("\"liveness\"", "\"liveliness\"")),
        ("unknown server", base.replace("guarded = []", "guardd = []")),
        ("wrong type", base.replace("seed = 7", "seed = \"seven\"")),
        ("unknown method", base.replace("method = \"sampling/createMessage\"", "method = \"sampling/create\"")),
        ("another dialect's check", base.replace("\"liveness\"", "\"cancellation\"")),
        ("another dialect's server", base.replace("guarded = []", "uncancelled = []")),
    ] {
        assert_ne!(bad, base, "{what}: the replacement applied");
        assert!(!v.is_valid(&as_json(&bad)), "{what} should be rejected");
    }
}

#[test]
fn the_cli_prints_the_schema() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim")).arg("schema").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["title"], "mcpsim scenario (TOML v1)");
    assert_eq!(printed["additionalProperties"], false);
}
