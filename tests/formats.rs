//! `--format json` and `--format junit`: stable structure a CI can consume.

mod common;

/// The exit code and stdout of the binary.
fn mcpsim(args: &[&str]) -> (Option<i32>, String) {
    let out = common::mcpsim(args);
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

fn wrong_expectation_file() -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("formats");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wrong.toml");
    let text = std::fs::read_to_string("scenarios/nat-rebind.toml")
        .unwrap()
        .replace("guarded = []", "guarded = [\"liveness\"]");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn json_report_has_the_documented_schema() {
    let (code, out) = mcpsim(&[
        "run",
        "scenarios/nat-rebind.toml",
        "scenarios/second-client-leak.toml",
        "--server",
        "naive",
        "--server",
        "guarded",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "mcpsim.run-report/1");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    assert_eq!(v["summary"]["runs"], 4);
    assert_eq!(v["summary"]["met"], 4);
    let naive = &runs[0];
    assert_eq!(
        (naive["scenario"].as_str(), naive["server"].as_str(), naive["seed"].as_u64()),
        (Some("nat-rebind"), Some("naive"), Some(7))
    );
    assert_eq!(naive["expectation"]["met"], true);
    let verdicts = naive["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), mcpsim::check::CHECKS.len());
    let sb = verdicts.iter().find(|x| x["check"] == "session-binding").unwrap();
    assert_eq!(sb["status"], "violated");
    assert!(sb["violations"][0]["headline"]
        .as_str()
        .unwrap()
        .starts_with("req-43 (sampling/createMessage, event 1009)"));
    assert!(sb["violations"][0]["evidence"].as_array().unwrap().len() >= 3);
    let na = verdicts.iter().find(|x| x["status"] == "not-applicable").unwrap();
    assert!(na["why"].is_string());
}

#[test]
fn junit_has_one_testcase_per_scenario_and_server_and_failures_carry_evidence() {
    let wrong = wrong_expectation_file();
    let (code, out) =
        mcpsim(&["run", "scenarios/second-client-leak.toml", &wrong, "scenarios/regressions", "--format", "junit"]);
    assert_eq!(code, Some(1), "an unmet expectation fails the run");
    // No wall clock in the report: the same runs give the same bytes.
    let (_, again) =
        mcpsim(&["run", "scenarios/second-client-leak.toml", &wrong, "scenarios/regressions", "--format", "junit"]);
    assert_eq!(again, out, "JUnit is byte-identical between two runs");
    let doc = roxmltree::Document::parse(&out).expect("JUnit output is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    // Servers sit out files of dialects they do not speak.
    let speaking = |d| mcpsim::server::known_servers().iter().filter(|s| mcpsim::server::speaks(s, d)).count();
    let all = speaking(mcpsim::scenario::Dialect::StreamableHttp);
    let legacy_servers = speaking(mcpsim::scenario::Dialect::LegacySse);
    let regressions: Vec<mcpsim::scenario::Plan> = std::fs::read_dir("scenarios/regressions")
        .unwrap()
        .map(|e| mcpsim::scenario::Plan::load(&e.unwrap().path()).unwrap())
        .collect();
    let streamable = regressions.iter().filter(|p| p.dialect == mcpsim::scenario::Dialect::StreamableHttp).count();
    let legacy = regressions.len() - streamable;
    let suites: Vec<_> = root.children().filter(|n| n.has_tag_name("testsuite")).collect();
    assert_eq!(suites.len(), 2 + regressions.len(), "second-client-leak, nat-rebind (wrong), and the regressions");
    let cases: Vec<_> = root.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), (2 + legacy) * legacy_servers + streamable * all);
    assert_eq!(root.attribute("tests"), Some(cases.len().to_string().as_str()));
    for s in &suites {
        let n = s.children().filter(|c| c.has_tag_name("testcase")).count();
        assert_eq!(s.attribute("tests"), Some(n.to_string().as_str()));
    }
    let failures: Vec<_> = root.descendants().filter(|n| n.has_tag_name("failure")).collect();
    assert_eq!(failures.len(), 1);
    assert_eq!(root.attribute("failures"), Some("1"));
    let failing_case = failures[0].parent().unwrap();
    assert_eq!(failing_case.attribute("name"), Some("guarded"));
    assert!(failures[0].attribute("message").unwrap().contains("expected to violate liveness"));
    let body = failures[0].text().unwrap();
    assert!(body.contains("session-binding") && body.contains("repro: mcpsim run"), "{body}");
    // No wall time in a report: the simulated seconds are a property.
    for case in &cases {
        assert_eq!(case.attribute("time"), None, "no wall clock in the JUnit report");
        let sim = case
            .descendants()
            .find(|n| n.has_tag_name("property") && n.attribute("name") == Some("simulated_seconds"))
            .expect("simulated_seconds property");
        assert!(sim.attribute("value").unwrap().parse::<f64>().unwrap() >= 1.0);
    }
    // Every bundled scenario, regressions included, states an expectation
    // for every server that speaks its dialect: nothing is skipped.
    let skipped = root.descendants().filter(|n| n.has_tag_name("skipped")).count();
    assert_eq!(skipped, 0);
}

#[test]
fn text_is_plain_when_not_a_terminal() {
    let (_, out) = mcpsim(&["run", "scenarios/nat-rebind.toml", "--server", "naive"]);
    assert!(!out.contains('\x1b'));
    let coloured = mcpsim::report::colorize(&out);
    assert!(coloured.contains("\x1b[1;31mVIOLATED\x1b[0m"));
}

/// Issue "A gate that holds under CI load", item 6 and item 2: with
/// `--format junit` the console still says why each run failed, and a run
/// that errored before it was judged (its server never said `ready`) is a
/// test case with an `<error>`: one per run, never missing.
#[test]
fn junit_names_failures_on_the_console_and_keeps_runs_that_errored() {
    let out = common::mcpsim(&["run", &wrong_expectation_file(), "--server", "guarded", "--format", "junit"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("nat-rebind on guarded (seed 7): no violation"), "{err}");
    let out = common::mcpsim(&["run", "scenarios/nat-rebind.toml", "--server", "naive", "--gate", "--format", "junit"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("nat-rebind on naive (seed 7): session-binding: "), "{err}");
    // A live server that exits at once: neither run is judged.
    let out = common::mcpsim(&[
        "run",
        "--live",
        "true",
        "scenarios/nat-rebind.toml",
        "scenarios/garbage-id.toml",
        "--format",
        "junit",
        "--ready-timeout",
        "5",
    ]);
    let xml = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(4), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert_eq!(xml.matches("type=\"error\"").count(), 2, "{xml}");
    assert!(xml.contains("tests=\"2\" failures=\"0\" errors=\"2\""), "{xml}");
}
