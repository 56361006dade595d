//! `mcpsim run --gate`: a user's CI gate, fail-closed. A run fails on any
//! violation that is not inherent, whatever `[expect]` says or leaves out,
//! unless a baseline accepts it; a baseline entry that no longer fails is
//! stale and fails the gate too. Played in simulation and, end to end, live
//! against `mcpsim serve` (a broken server and a correct one), with JUnit.

mod common;
use common::{mcpsim, text, tmp};

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

#[test]
fn the_gate_fails_a_broken_server_and_passes_a_correct_one() {
    let out = mcpsim(&["run", "--gate", "--server", "naive", "scenarios/nat-rebind.toml", "--quiet"]);
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 1, "{stdout}");
    assert!(
        stdout.contains("nat-rebind · naive · seed 7 · violated: ") && stdout.contains("GATE FAILED: naive violated "),
        "{stdout}"
    );
    assert!(stdout.lines().last().unwrap().starts_with("1 run(s): 0 passed the gate, 1 failed it"), "{stdout}");
    let out = mcpsim(&["run", "--gate", "--server", "guarded", "scenarios/nat-rebind.toml", "--quiet"]);
    assert_eq!(code(&out), 0, "{}", text(&out.stdout));
    // --quiet prints a passing run not at all: only the tally.
    assert_eq!(text(&out.stdout).trim(), "1 run(s): 1 passed the gate, 0 failed it", "{}", text(&out.stdout));
    let out =
        mcpsim(&["run", "--gate", "--server", "guarded", "scenarios/nat-rebind.toml", "scenarios/clean-resume.toml"]);
    assert_eq!(code(&out), 0, "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("nat-rebind · guarded · seed 7 · no violation · gate passed"));
    // Inherent violations pass the gate: guarded's only violations in the credential theft are inherent.
    let out = mcpsim(&[
        "run",
        "--gate",
        "--server",
        "guarded",
        "scenarios/stateless-http/second-client-leak-credential.toml",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}");
    // Inherent findings print as INHERENT, never as the server's VIOLATED.
    assert!(
        stdout.contains("INHERENT")
            && !stdout.contains("VIOLATED")
            && stdout.contains("gate passed: guarded violates nothing that is not inherent"),
        "{stdout}"
    );
}

#[test]
fn the_gate_judges_what_expect_leaves_out() {
    // No [expect] entry for naive: without --gate the run counts for nothing (exit 0).
    let own = tmp("gate", "no-naive.toml");
    let text_of = std::fs::read_to_string("scenarios/regressions/no-fence-1-session-binding.toml").unwrap();
    let text_of: String = text_of.lines().filter(|l| !l.starts_with("naive = ")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&own, text_of).unwrap();
    let file = own.to_str().unwrap();
    let out = mcpsim(&["run", "--server", "naive", file, "--quiet"]);
    assert_eq!(code(&out), 0);
    assert!(text(&out.stdout).contains("no [expect] entry"));
    let out = mcpsim(&["run", "--gate", "--server", "naive", file, "--quiet"]);
    assert_eq!(code(&out), 1, "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("GATE FAILED: naive violated session-binding (not in the baseline)"));
}

#[test]
fn a_baseline_accepts_known_findings_and_a_stale_entry_fails_the_gate() {
    let out = mcpsim(&["run", "--gate", "--server", "naive", "scenarios/nat-rebind.toml", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failing: Vec<String> = json["runs"][0]["expectation"]["violated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert!(!failing.is_empty());
    assert_eq!(json["runs"][0]["expectation"]["gate"], true);
    let quoted: Vec<String> = failing.iter().map(|c| format!("{c:?}")).collect();
    let baseline = tmp("gate", "baseline.toml");
    std::fs::write(&baseline, format!("[accepted]\nnat-rebind = [{}]\n", quoted.join(", "))).unwrap();
    let b = baseline.to_str().unwrap();
    let out = mcpsim(&["run", "--gate", "--baseline", b, "--server", "naive", "scenarios/nat-rebind.toml"]);
    assert_eq!(code(&out), 0, "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("gate passed"));
    // guarded no longer fails any of them: every entry is stale.
    let out =
        mcpsim(&["run", "--gate", "--baseline", b, "--server", "guarded", "scenarios/nat-rebind.toml", "--quiet"]);
    assert_eq!(code(&out), 1);
    // (One line, after the regressions: stale_entries_are_one_line_after_the_regressions.)
    assert!(
        text(&out.stderr).contains(&format!(
            "stale baseline entries (they no longer fail: remove them, and the gate passes): scenarios/nat-rebind.toml: {}",
            failing.join(", ")
        )),
        "{}",
        text(&out.stderr)
    );
    // A broken baseline is named, with where.
    std::fs::write(&baseline, "[accepted]\nnat-rebind = [\"sesion-binding\"]\n").unwrap();
    let out = mcpsim(&["run", "--gate", "--baseline", b, "--server", "naive", "scenarios/nat-rebind.toml"]);
    assert_eq!(code(&out), 2);
    let err = text(&out.stderr);
    assert!(err.contains("baseline.toml") && err.contains("unknown check \"sesion-binding\""), "{err}");
    std::fs::write(&baseline, "[accepted\n").unwrap();
    let out = mcpsim(&["run", "--gate", "--baseline", b, "--server", "naive", "scenarios/nat-rebind.toml"]);
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("line 1"), "{}", text(&out.stderr));
    // --baseline needs --gate.
    let out = mcpsim(&["run", "--baseline", b, "--server", "naive", "scenarios/nat-rebind.toml"]);
    assert_eq!(code(&out), 2);
}

/// The command that serves `server` live: this build's own `mcpsim serve`.
fn serve(server: &str) -> String {
    format!("'{}' serve --server {server}", env!("CARGO_BIN_EXE_mcpsim"))
}

#[test]
fn a_users_ci_gate_end_to_end_fails_a_broken_server_and_passes_a_correct_one_with_junit() {
    let gate = |server: &str| {
        let cmd = serve(server);
        mcpsim(&[
            "run",
            "--gate",
            "--live",
            &cmd,
            "scenarios/nat-rebind.toml",
            "scenarios/stateless-http/tampered-state.toml",
            "--time-scale",
            "0.05",
            "--format",
            "junit",
        ])
    };
    let broken = gate("naive");
    let xml = text(&broken.stdout);
    assert_eq!(code(&broken), 1, "{xml}\n{}", text(&broken.stderr));
    assert!(
        xml.contains("<testsuites name=\"mcpsim\" tests=\"2\" failures=\"2\" errors=\"0\" skipped=\"0\">"),
        "{xml}"
    );
    assert!(xml.contains("type=\"gate\"") && xml.contains("GATE FAILED: naive violated "), "{xml}");
    let correct = gate("guarded");
    let xml = text(&correct.stdout);
    assert_eq!(code(&correct), 0, "{xml}\n{}", text(&correct.stderr));
    assert!(xml.contains("tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"0\""), "{xml}");
}

/// Issue "A gate that holds under CI load", item 5: a baseline is written
/// by a command, keyed by the files a user sees; a key naming no scenario of
/// the run is an error, not silently ignored.
#[test]
fn a_baseline_is_written_by_the_gate_and_keyed_by_file() {
    let file = tmp("write-baseline", "baseline.toml");
    let file_arg = file.to_str().unwrap();
    let args = ["run", "--gate", "--server", "naive", "scenarios/nat-rebind.toml", "scenarios/second-client-leak.toml"];
    let out = mcpsim(&[&args[..], &["--write-baseline", file_arg, "--quiet"]].concat());
    assert_eq!(code(&out), 1, "the run that writes it is judged as ever");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("\"scenarios/nat-rebind.toml\" = [\"session-binding\", \"liveness\"]"), "{written}");
    assert!(
        written.contains("\"scenarios/second-client-leak.toml\" = [\"correlation-consistency\", \"confidentiality\"]"),
        "{written}"
    );
    // Read back, it accepts exactly those: the gate passes.
    let out = mcpsim(&[&args[..], &["--baseline", file_arg, "--quiet"]].concat());
    assert_eq!(code(&out), 0, "{}", text(&out.stdout));
    // A key may be the scenario's name or its file, with or without .toml.
    for key in ["nat-rebind", "nat-rebind.toml", "scenarios/nat-rebind"] {
        std::fs::write(&file, format!("[accepted]\n{key:?} = [\"session-binding\", \"liveness\"]\n")).unwrap();
        let out = mcpsim(&["run", "--gate", "--server", "naive", "scenarios/nat-rebind.toml", "--baseline", file_arg]);
        assert_eq!(code(&out), 0, "{key}: {}", text(&out.stdout));
    }
    // A key that names nothing is an error that names it.
    std::fs::write(&file, "[accepted]\n\"nat-rebnd\" = [\"liveness\"]\n").unwrap();
    let out = mcpsim(&["run", "--gate", "--server", "naive", "scenarios/nat-rebind.toml", "--baseline", file_arg]);
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("the baseline names no scenario of this run: nat-rebnd"),
        "{}",
        text(&out.stderr)
    );
}

/// Issue "A gate that holds under CI load", item 5: a stale entry is one
/// line after the regressions, not a report of its own that crowds them out.
#[test]
fn stale_entries_are_one_line_after_the_regressions() {
    let file = tmp("stale-baseline", "baseline.toml");
    std::fs::write(
        &file,
        "[accepted]\n\"nat-rebind\" = [\"session-binding\", \"liveness\"]\n\"clean-resume\" = [\"liveness\"]\n",
    )
    .unwrap();
    let out = mcpsim(&[
        "run",
        "--gate",
        "--server",
        "naive",
        "scenarios/nat-rebind.toml",
        "scenarios/clean-resume.toml",
        "scenarios/second-client-leak.toml",
        "--baseline",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "a stale entry still fails the gate");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!stdout.contains("clean-resume · server naive"), "no report of its own: {stdout}");
    assert!(stdout.contains("second-client-leak · server naive"), "the regression's report: {stdout}");
    let failed = stderr.find("1 run(s) failed the gate: second-client-leak on naive").expect(&stderr);
    let stale = stderr.find("stale baseline entries (they no longer fail").expect(&stderr);
    assert!(failed < stale, "{stderr}");
    assert!(stderr.contains("scenarios/clean-resume.toml: liveness"), "{stderr}");
}
