//! The `mcpsim` binary: output, exit codes, and clear errors for bad input.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{mcpsim, text};

fn tmp(name: &str) -> PathBuf {
    common::tmp("cli", name)
}

#[test]
fn run_without_paths_runs_every_bundled_scenario_on_every_server_and_meets_every_expectation() {
    let out = mcpsim(&["run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "nat-rebind · naive · seed 7 · violated: session-binding, liveness · as expected",
        "nat-rebind · guarded · seed 7 · no violation · as expected",
        "second-client-leak · naive · seed 7 · violated: correlation-consistency, confidentiality · as expected",
        "second-client-leak · guarded · seed 7 · no violation · as expected",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    let runs = stdout.lines().filter(|l| l.contains(" · seed ")).count();
    assert!(runs >= 10 * mcpsim::server::known_servers().len());
    // Every scenario, regressions included, states an expectation for every
    // built-in server that speaks its dialect: every run is judged.
    assert_eq!(stdout.matches(" · as expected").count(), runs, "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.ends_with(&format!("{runs} as expected, 0 not met, 0 without expectation"))
            || last.contains(&format!("{runs} as expected, 0 not met, 0 without expectation;")),
        "{last}"
    );
    // Nothing missed: no report follows the lines.
    assert!(!stdout.contains("checks:"), "{stdout}");
    assert!(!stdout.contains("NOT MET"));
}

#[test]
fn a_wrong_expectation_exits_1_and_names_the_mismatch() {
    let original = std::fs::read_to_string("scenarios/nat-rebind.toml").unwrap();
    let wrong = original.replace("guarded = []", "guarded = [\"liveness\"]");
    assert_ne!(wrong, original);
    let path = tmp("wrong-expect.toml");
    std::fs::write(&path, wrong).unwrap();
    let out = mcpsim(&["run", path.to_str().unwrap(), "--server", "guarded"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("EXPECTATION NOT MET: guarded was expected to violate liveness, but violated nothing"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("1 run(s) did not meet their expectation: nat-rebind on guarded"));
    // The same file on naive still meets its (unchanged) expectation.
    let out = mcpsim(&["run", path.to_str().unwrap(), "--server", "naive"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_run_prints_seed_server_summary_outcome_and_repro() {
    let out = mcpsim(&["run", "scenarios/nat-rebind.toml", "--server", "naive"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("nat-rebind · server naive · seed 7"), "{stdout}");
    assert!(
        stdout.contains("server wrote 217 bytes into dropped mapping 1: 1009 req-43 sampling/createMessage"),
        "{stdout}"
    );
    assert!(stdout.contains("outcome: req-42 answered, req-43 timed out"), "{stdout}");
    assert!(stdout.contains("repro: mcpsim run scenarios/nat-rebind.toml --server naive --seed 7"), "{stdout}");
}

#[test]
fn trace_flag_writes_jsonl_and_seed_flag_overrides() {
    let path = tmp("trace.jsonl");
    let out = mcpsim(&[
        "run",
        "scenarios/second-client-leak.toml",
        "--server",
        "guarded",
        "--seed",
        "99",
        "--trace",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("seed 99"));
    let jsonl = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> =
        jsonl.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
    assert!(lines.len() > 20);
    assert!(lines.iter().all(|l| l["t_us"].is_u64() && l["kind"].is_string()));
}

#[test]
fn a_broken_file_names_file_line_and_column_and_exits_3_without_running_anything() {
    let bad = tmp("bad.toml");
    std::fs::write(&bad, "[scenario]\nname = \"x\"\nduration = \"10 s\"\n[[client]]\nname = \"alice\"\n[[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"bob\"\n").unwrap();
    let out = mcpsim(&["run", "scenarios/nat-rebind.toml", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("{}:9:10: unknown client \"bob\"", bad.display())), "{stderr}");
    assert!(stderr.contains("nothing was run"), "{stderr}");
    assert!(text(&out.stdout).is_empty(), "the valid file did not run either");

    std::fs::write(&bad, "[scenario\nname = 1").unwrap();
    let out = mcpsim(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains(&format!("{}:1:10:", bad.display())), "{}", text(&out.stderr));
}

#[test]
fn unknown_server_or_missing_file_is_a_usage_error() {
    let out = mcpsim(&["run", "--server", "nginx"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown server \"nginx\" (known: naive, guarded, no-fence,"),
        "{}",
        text(&out.stderr)
    );
    let out = mcpsim(&["run", "no/such/file.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no/such/file.toml: no such file"));
    let out = mcpsim(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hunt_prints_base_seed_repeat_command_and_a_repro_per_finding() {
    let out_dir = tmp("hunt-regressions");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = mcpsim(&[
        "hunt",
        "--server",
        "no-fence",
        "--seeds",
        "4",
        "--seed",
        "0",
        "--jobs",
        "2",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "findings exit 1");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("hunt: server no-fence, base seed 0, shard 1/1, 2 job(s)"), "{stderr}");
    assert!(
        stderr.contains("repeat: mcpsim hunt --server no-fence --seed 0 --seeds 4 --jobs 2 --shard 1/1"),
        "{stderr}"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("new bug ae9975b9 at seed 1: session-binding: "), "{stdout}");
    assert!(stdout.contains("  violates session-binding in 2 step(s) (dead-writer)"), "{stdout}");
    assert!(stdout.contains("reach (seeds that got into each hard situation"), "{stdout}");
    assert!(stdout.contains("two resumes while a request is pending"), "{stdout}");
    assert!(stdout.contains("repro: mcpsim replay --server no-fence --seed 1"), "{stdout}");
    assert!(out_dir.join("no-fence-session-binding-ae9975b9.toml").exists(), "{stderr}");
    // The summary: one row per distinct bug.
    assert!(stdout.contains("hunted 4 seeds: "), "{stdout}");
    let row = stdout.lines().find(|l| l.trim_start().starts_with("ae9975b9 ")).expect("a row for the bug");
    assert!(row.contains("no-fence-session-binding-ae9975b9.toml"), "{row}");
    // --stop-on-first ends at the seed that found it, and says how to hunt exactly those seeds again.
    let out =
        mcpsim(&["hunt", "--server", "no-fence", "--seeds", "50", "--seed", "0", "--stop-on-first", "--no-shrink"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("hunted 2 seeds: 1 failing"), "{stdout}");
    assert!(stdout.contains("the same seeds again: mcpsim hunt --server no-fence --seed 0 --seeds 2"), "{stdout}");
    let out = mcpsim(&["hunt", "--server", "no-fence", "--max-findings", "0"]);
    assert_eq!(out.status.code(), Some(2), "--max-findings 0 is refused");

    let out = mcpsim(&["replay", "--server", "no-fence", "--seed", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("session-binding          VIOLATED"), "{stdout}");
    assert!(stdout.contains("repro: mcpsim replay --server no-fence --seed 1"), "{stdout}");

    // The seed's plan, written as a scenario, loads and gives the same verdict when run.
    let plan = tmp("seed-1-plan.toml");
    let out = mcpsim(&["replay", "--server", "no-fence", "--seed", "1", "--scenario", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let toml = std::fs::read_to_string(&plan).unwrap();
    assert!(toml.contains("mcpsim replay --server no-fence --seed 1"), "{toml}");
    let out = mcpsim(&["run", plan.to_str().unwrap(), "--server", "no-fence", "--seed", "1"]);
    assert!(text(&out.stdout).contains("session-binding          VIOLATED"), "{}", text(&out.stdout));

    let out = mcpsim(&["hunt", "--server", "guarded", "--seeds", "8", "--seed", "0", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["seeds_run"], 8);
    assert!(report["reach"]["resume at the window's edge"].is_u64(), "{report}");

    let out = mcpsim(&["hunt", "--server", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn list_explain_and_check() {
    let out = mcpsim(&["list", "checks"]);
    assert_eq!(out.status.code(), Some(0));
    // The stateful checks, a blank line and a heading, then stateless-http's.
    assert_eq!(
        text(&out.stdout).lines().count(),
        mcpsim::check::CHECKS.len() + 2 + mcpsim::check::stateless::CHECKS.len()
    );
    let out = mcpsim(&["list", "servers"]);
    assert!(text(&out.stdout).contains("no-fence           guarded, but attaches the new uplink without fencing"));
    let out = mcpsim(&["list", "scenarios"]);
    let listed = text(&out.stdout);
    assert!(listed.lines().any(|l| l.starts_with("nat-rebind ") && l.contains(" legacy-sse ")), "{listed}");
    assert!(listed.lines().any(|l| l.starts_with("nat-rebind-streamable ") && l.contains(" streamable-http ")));
    for c in mcpsim::check::CHECKS {
        let out = mcpsim(&["explain", c.id.as_str()]);
        let t = text(&out.stdout);
        for part in ["What it means", "Evidence it uses", "Condition of the analysis", "To pass, a server must"] {
            assert!(t.contains(part), "{}: {t}", c.id);
        }
    }
    let out = mcpsim(&["explain", "liveliness"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("did you mean \"liveness\"?"));

    let out = mcpsim(&["check", "scenarios"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let bad = tmp("check-bad.toml");
    std::fs::write(&bad, "[scenario]\nname = \"x\"\nduration = \"1s\"\n[netwrk]\n").unwrap();
    let out = mcpsim(&["check", "scenarios/nat-rebind.toml", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stdout).contains("ok: scenarios/nat-rebind.toml"));
    assert!(text(&out.stderr).contains("did you mean `network`?"));
}

#[test]
fn timeline_flag_writes_html_and_the_report_points_to_it() {
    let path = tmp("nat-rebind.html");
    let out = mcpsim(&["run", "scenarios/nat-rebind.toml", "--server", "naive", "--timeline", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains(&format!("timeline: {}", path.display())));
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    // No network: the only URL is the SVG namespace.
    assert_eq!(html.matches("://").count(), html.matches("http://www.w3.org/2000/svg").count());
    assert!(!html.contains("<script src") && !html.contains("<link "), "self-contained");
    let path = tmp("replay.html");
    let out = mcpsim(&["replay", "--server", "no-fence", "--seed", "1", "--timeline", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(std::fs::read_to_string(&path).unwrap().contains("class=\"msg"));
}

#[test]
fn run_with_a_streamable_only_server_and_no_file_runs_the_scenarios_it_speaks() {
    let out = mcpsim(&["run", "--server", "rmcp"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap();
    assert!(
        last.contains(" not met, ") && last.contains("skipped for rmcp, which speaks only streamable-http"),
        "{last}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("nat-rebind-streamable · rmcp · ")), "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("nat-rebind · rmcp · ")), "{stdout}");
    // Named explicitly, a legacy file is still explained, not skipped.
    let out = mcpsim(&["run", "scenarios/nat-rebind.toml", "--server", "rmcp"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("speaks only dialect \"streamable-http\""), "{}", text(&out.stderr));
    // Found by searching a directory, files of another dialect are skipped with a note.
    let out = mcpsim(&["run", "scenarios/regressions", "--server", "rmcp"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let last = stdout.lines().last().unwrap();
    assert!(last.contains("; 2 legacy-sse scenario(s) skipped for rmcp, which speaks only "), "{last}");
    assert!(!stdout.contains("no-fence-1-session-binding · rmcp"), "{stdout}");
}

#[test]
fn run_ends_with_a_tally_and_says_when_a_server_has_no_expectation() {
    // A scenario of one's own, without [expect].
    let own = tmp("no-expect.toml");
    let text_of = std::fs::read_to_string("scenarios/regressions/no-fence-1-session-binding.toml").unwrap();
    std::fs::write(&own, text_of.split("[expect]").next().unwrap()).unwrap();
    let out = mcpsim(&["run", "scenarios/nat-rebind.toml", own.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap();
    let lines = stdout.split("\nreports of the ").next().unwrap();
    assert!(
        last.starts_with(&format!("{} run(s): ", lines.lines().filter(|l| l.contains(" · seed ")).count())),
        "{last}"
    );
    assert!(last.contains(" as expected, 0 not met, ") && last.contains(" without expectation (without expectation: the scenario has no [expect] entry for that server, so its verdicts count neither way)"), "{last}");
    // rmcp speaks streamable-http and stateless-http: the two legacy files are skipped for it, and said so.
    assert!(
        last.ends_with(
            "; 2 legacy-sse scenario(s) skipped for rmcp, which speaks only streamable-http and stateless-http"
        ),
        "{last}"
    );
    assert!(last.contains("rmcp-unsealed, unbound-state, uncancelled, unsealed-state, which speak only stateless-http"));
    assert!(
        stdout.contains("no-fence-1-session-binding · naive · seed 1 · violated: session-binding · no [expect] entry"),
        "{stdout}"
    );
    // A run without expectation that violated a check is one to look at: its report follows the lines.
    let reports = stdout.split("reports of the ").nth(1).unwrap_or_else(|| panic!("reports section in {stdout}"));
    assert!(reports.contains("no [expect] entry for naive: nothing to compare the verdicts with"), "{stdout}");
}

/// The three verbosities of `mcpsim run`, on a run that meets its
/// expectation and one that does not (naive is named for guarded's [expect]).
#[test]
fn run_prints_a_line_per_run_and_the_reports_of_the_runs_that_missed() {
    let missed = tmp("missed.toml");
    let mut text_of = std::fs::read_to_string("scenarios/nat-rebind.toml").unwrap();
    text_of = text_of.replace("\nnaive = [", "\nnaive = [] # wrong on purpose\nold-naive = [");
    let text_of: String = text_of.lines().filter(|l| !l.starts_with("old-naive")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&missed, &text_of).unwrap();
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "run",
            "scenarios/clean-resume.toml",
            missed.to_str().unwrap(),
            "--server",
            "naive",
            "--server",
            "guarded",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |extra: &[&'static str]| {
        let a = args(extra);
        let out = mcpsim(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // Default: a line per run, in order, then the missed run's whole report, then the tally.
    let normal = run(&[]);
    let lines: Vec<&str> = normal.lines().collect();
    assert!(lines[0].starts_with("clean-resume · naive · seed "), "{normal}");
    assert!(lines[1].starts_with("clean-resume · guarded · seed "), "{normal}");
    assert!(
        lines[2].starts_with("nat-rebind · naive · seed 7 · violated: session-binding, liveness · EXPECTATION NOT MET"),
        "{normal}"
    );
    assert!(lines[3].starts_with("  repro: mcpsim run "), "{normal}");
    assert!(lines[4].starts_with("nat-rebind · guarded · seed 7 · no violation · as expected"), "{normal}");
    assert_eq!(lines[5], "");
    assert_eq!(lines[6], "reports of the 1 run(s) to look at:");
    assert!(lines[8].starts_with("nat-rebind · server naive · seed 7"), "{normal}");
    assert_eq!(normal.matches("checks:").count(), 1, "{normal}");
    assert!(lines.last().unwrap().starts_with("4 run(s): 3 as expected, 1 not met, 0 without expectation"), "{normal}");
    // --quiet: only the missed run's line, and the tally.
    let quiet = run(&["--quiet"]);
    let lines: Vec<&str> = quiet.lines().collect();
    assert_eq!(lines.len(), 3, "{quiet}");
    assert!(lines[0].starts_with("nat-rebind · naive · seed 7 · violated: "), "{quiet}");
    assert!(lines[1].starts_with("  repro: "), "{quiet}");
    assert!(lines[2].starts_with("4 run(s): 3 as expected, 1 not met"), "{quiet}");
    // --verbose: every run's whole report, and no line per run.
    let verbose = run(&["--verbose"]);
    assert_eq!(verbose.matches("checks:").count(), 4, "{verbose}");
    assert!(!verbose.contains("reports of the "), "{verbose}");
    // One run alone prints its report by default.
    let one = mcpsim(&["run", "scenarios/clean-resume.toml", "--server", "guarded"]);
    assert!(text(&one.stdout).contains("checks:"), "{}", text(&one.stdout));
}

#[test]
fn hunt_results_go_to_stdout_into_a_findings_dir_outside_scenarios() {
    let cwd = tmp("hunt-cwd");
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(["hunt", "--server", "no-fence", "--seeds", "8", "--seed", "0", "--jobs", "1", "--check-determinism"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "findings exit 1");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.contains("new bug "), "{stdout}");
    assert!(stdout.contains("hunted 8 seeds: "), "{stdout}");
    assert!(stdout.contains(" distinct bug(s)\n  bug        seeds  first seed  steps  checks"), "{stdout}");
    assert!(stderr.contains(" seeds/s)"), "throughput is wall-clock, on stderr: {stderr}");
    // The results (stdout) hold no wall clock: a second hunt prints the same bytes.
    let again = Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(["hunt", "--server", "no-fence", "--seeds", "8", "--seed", "0", "--jobs", "2", "--check-determinism"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert_eq!(text(&again.stdout), stdout, "same seeds, same results, whatever the timing");
    assert!(stdout.contains("determinism: all 8 seeds were run twice and gave byte-identical traces"), "{stdout}");
    assert!(stdout.contains(
        "regression files (one per distinct bug) in mcpsim-findings: read one, then keep it by moving it into scenarios/regressions/"
    ));
    assert!(stderr.contains("repeat: mcpsim hunt --server no-fence"), "{stderr}");
    assert!(!stderr.contains("new bug "), "findings are results: stdout only");
    assert!(cwd.join("mcpsim-findings").read_dir().unwrap().count() > 0);
    assert!(!cwd.join("scenarios").exists(), "a hunt does not write into scenarios/ by default");
    // Each reproducer states an expectation for every built-in server of
    // its dialect, met: promoted, it is judged on every server `run` plays it on.
    for f in cwd.join("mcpsim-findings").read_dir().unwrap() {
        let path = f.unwrap().path();
        let plan = mcpsim::scenario::Plan::load(&path).unwrap();
        for s in mcpsim::server::known_servers().into_iter().filter(|s| mcpsim::server::speaks(s, plan.dialect)) {
            assert!(plan.expect.contains_key(s), "{}: no [expect] for {s}", path.display());
        }
        let out = mcpsim(&["run", path.to_str().unwrap(), "--quiet"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    }
}

#[test]
fn a_hunt_on_a_time_budget_says_how_to_hunt_exactly_the_same_seeds_again() {
    let out = mcpsim(&["hunt", "--server", "guarded", "--time", "1s", "--seed", "5", "--jobs", "1", "--no-shrink"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let n: u64 =
        stdout.lines().find_map(|l| l.strip_prefix("hunted ")?.split(' ').next()?.parse().ok()).expect("a hunted line");
    assert!(n > 0, "{stdout}");
    let again = format!("the same seeds again: mcpsim hunt --server guarded --seed 5 --seeds {n} --jobs 1 --shard 1/1");
    assert!(stdout.contains(&again), "{stdout}");
}

/// The determinism contract and the one wall-clock read of a hunt: a time
/// budget decides how many seeds run, never which or what they give. A
/// `--time` hunt's report (bugs, reach, faults, seeds) equals a `--seeds N`
/// hunt's, N being the seeds the budget covered, whatever the jobs.
#[test]
fn a_time_budget_decides_how_many_seeds_run_and_nothing_else() {
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["hunt", "--server", "naive", "--seed", "40", "--no-shrink", "--format", "json"];
        all.extend_from_slice(args);
        let out = mcpsim(&all);
        assert_eq!(out.status.code(), Some(1), "naive fails: {}", text(&out.stderr));
        serde_json::from_str(&text(&out.stdout)).unwrap()
    };
    let timed = json(&["--time", "1s", "--jobs", "2"]);
    let n = timed["seeds_run"].as_u64().unwrap();
    assert!(n > 0, "{timed}");
    let counted = json(&["--seeds", &n.to_string(), "--jobs", "1"]);
    assert_eq!(timed, counted, "the same {n} seeds, by a budget and by a count");
}

#[test]
fn help_describes_every_replay_flag_and_shows_that_hunt_needs_a_server() {
    let replay = text(&mcpsim(&["replay", "--help"]).stdout);
    assert!(replay.contains("The server the hunt ran against"), "{replay}");
    assert!(replay.contains("The seed of the finding"), "{replay}");
    let hunt = text(&mcpsim(&["hunt", "--help"]).stdout);
    assert!(hunt.contains("Usage: mcpsim hunt --server <NAME> [OPTIONS]"), "{hunt}");
    assert!(hunt.contains("--seeds counts the seeds of this shard"), "{hunt}");
}

#[test]
fn the_readme_ci_workflow_uploads_and_merges_even_after_a_finding() {
    // The hunt workflow the README and docs/hunts.md link to.
    let root_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    for doc in ["README.md", "docs/hunts.md"] {
        let text = std::fs::read_to_string(root_dir.join(doc)).unwrap();
        assert!(text.contains("ci/mcpsim-hunt.yml)"), "{doc} links the hunt workflow");
    }
    let yaml = std::fs::read_to_string(root_dir.join("docs/ci/mcpsim-hunt.yml")).unwrap();
    let yaml = yaml.as_str();
    assert!(yaml.contains("\njobs:\n"), "{yaml}");
    let merge = yaml.find("  merge:").unwrap();
    let (hunt_job, merge_job) = (&yaml[..merge], &yaml[merge..]);
    // hunt exits 1 on a finding: the uploads and the merge must still run.
    for (job, what) in [(hunt_job, "hunt"), (merge_job, "merge")] {
        let upload = job.find("actions/upload-artifact").unwrap_or_else(|| panic!("{what} uploads: {yaml}"));
        assert!(job[upload..].lines().nth(1).unwrap().trim() == "if: always()", "{what}: {yaml}");
        // The reproducers go with the reports.
        assert!(job[upload..].contains("mcpsim-findings/"), "{what} uploads its reproducers: {yaml}");
        // Each job reuses the release build.
        assert!(job.contains("uses: Swatinem/rust-cache@v2"), "{what} caches the build: {yaml}");
    }
    assert!(merge_job.lines().take(4).any(|l| l.trim() == "if: always()"), "{yaml}");
    assert!(merge_job.contains("actions/download-artifact") && merge_job.contains("merge-multiple: true"), "{yaml}");
    // Its commands run as written (fewer seeds, and naive, so that there are
    // reproducers), and the merged table's files are all where the merge
    // job has them: one directory per shard, none overwritten.
    let hunt_line = yaml.lines().find(|l| l.contains("-- hunt --server")).unwrap();
    assert!(
        hunt_line.contains("--out mcpsim-findings/shard-${{ matrix.shard }}"),
        "one directory per shard: {hunt_line}"
    );
    let root = tmp("ci-workflow");
    let _ = std::fs::remove_dir_all(&root);
    let findings = root.join("mcpsim-findings");
    let command = hunt_line
        .split("-- ")
        .nth(1)
        .unwrap()
        .split(" > ")
        .next()
        .unwrap()
        .replace("20000", "3")
        .replace("--server guarded", "--server naive")
        .replace("mcpsim-findings/", &format!("{}/", findings.display()));
    let mut files = Vec::new();
    for k in 1..=4 {
        let line = command.replace("${{ matrix.shard }}", &k.to_string());
        let args: Vec<&str> = line.split_whitespace().collect();
        let out = mcpsim(&args);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out.stderr));
        let f = root.join(format!("hunt-{k}.json"));
        std::fs::write(&f, &out.stdout).unwrap();
        files.push(f.display().to_string());
    }
    let mut merge_args = vec!["hunt", "merge"];
    merge_args.extend(files.iter().map(String::as_str));
    let merged = mcpsim(&merge_args);
    let report: serde_json::Value = serde_json::from_slice(&merged.stdout).expect("merged JSON");
    assert_eq!(report["seeds_run"], 12, "4 shards x 3 seeds");
    assert!(text(&merged.stderr).starts_with("hunted 12 seeds: "), "the table, on stderr: {}", text(&merged.stderr));
    let bugs = report["bugs"].as_array().expect("bugs");
    assert!(!bugs.is_empty(), "naive has bugs in 12 seeds: {report}");
    for b in bugs {
        let file = b["file"].as_str().unwrap_or_else(|| panic!("every bug has its reproducer: {b}"));
        assert!(Path::new(file).starts_with(&findings), "{file} is under the uploaded directory");
        assert!(Path::new(file).exists(), "{file} is in the merge job's artifacts");
    }
}

/// `run --jobs N` plays several runs at once and prints exactly what one at
/// a time prints, in the same order; nonsense is refused.
#[test]
fn run_jobs_change_the_speed_not_the_output() {
    let args = |jobs: &'static str| {
        vec!["run", "scenarios/nat-rebind.toml", "scenarios/streamable-http", "--server", "naive", "--jobs", jobs]
    };
    let one = mcpsim(&args("1"));
    let four = mcpsim(&args("4"));
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    let one = text(&one.stdout);
    assert!(one.lines().filter(|l| l.contains(" · seed ")).count() > 20, "{one}");
    assert_eq!(text(&four.stdout), one);
    let out = mcpsim(&["run", "scenarios/nat-rebind.toml", "--jobs", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--jobs must be at least 1"), "{}", text(&out.stderr));
    let out = mcpsim(&["run", "--live", "x", "--live-port", "9", "--jobs", "2", "scenarios/nat-rebind.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--live-port serves one run at a time"), "{}", text(&out.stderr));
}
