//! Live mode against `mcpsim serve`, the control group: on our own engines a
//! live run must give the verdicts the simulation gives, every time; and
//! every way a server process can fail ends the run with a clear message,
//! exit code 4 and no process left behind.
//!
//! The live runs of a test play side by side (`common::live`).

mod common;
use common::harness::{run_with_threads, Case};
use common::live::{live_runs, plan, SCALE};
use common::{mcpsim, text};
use mcpsim::live::LiveOptions;
use mcpsim::scenario::Plan;
use std::time::{Duration, Instant};

/// The command that serves `server`: this build's own `mcpsim serve`.
fn serve(server: &str) -> String {
    format!("'{}' serve --server {server}", env!("CARGO_BIN_EXE_mcpsim"))
}

/// The tests wait on real time (live runs at time scale 0.1), not on the CPU:
/// they run six at a time unless `--test-threads` says otherwise, as the
/// live runs inside them do (`common::live`).
fn main() {
    run_with_threads(
        vec![
            Case::new(
                "live_verdicts_equal_simulated_ones_five_times_in_a_row",
                live_verdicts_equal_simulated_ones_five_times_in_a_row,
            ),
            Case::new("each_mutant_is_caught_live_by_its_own_check", each_mutant_is_caught_live_by_its_own_check),
            Case::new("stateless_live_verdicts_equal_simulated_ones", stateless_live_verdicts_equal_simulated_ones),
            Case::new(
                "a_live_report_says_it_is_live_and_how_to_run_it_again",
                a_live_report_says_it_is_live_and_how_to_run_it_again,
            ),
            Case::new(
                "a_step_that_runs_late_makes_the_run_timing_unreliable_with_exit_code_5",
                a_step_that_runs_late_makes_the_run_timing_unreliable_with_exit_code_5,
            ),
            Case::new(
                "a_late_run_is_replayed_slower_and_judged_at_the_scale_that_kept_time",
                a_late_run_is_replayed_slower_and_judged_at_the_scale_that_kept_time,
            ),
            Case::new(
                "what_a_server_does_not_report_is_said_not_guessed",
                what_a_server_does_not_report_is_said_not_guessed,
            ),
            Case::new("the_readmes_live_commands_run_as_written", the_readmes_live_commands_run_as_written),
            Case::new("the_ci_workflow_files_run_as_written", the_ci_workflow_files_run_as_written),
            Case::new(
                "a_command_that_cannot_start_is_named_with_its_own_words",
                a_command_that_cannot_start_is_named_with_its_own_words,
            ),
            Case::new(
                "a_process_that_never_says_ready_is_given_up_on_in_time",
                a_process_that_never_says_ready_is_given_up_on_in_time,
            ),
            Case::new(
                "a_live_hunt_that_loses_its_server_goes_on_and_prints_its_table",
                a_live_hunt_that_loses_its_server_goes_on_and_prints_its_table,
            ),
            Case::new(
                "a_process_that_ignores_the_control_protocol_is_named",
                a_process_that_ignores_the_control_protocol_is_named,
            ),
            Case::new(
                "a_protocol_break_mid_run_ends_the_run_and_keeps_the_trace",
                a_protocol_break_mid_run_ends_the_run_and_keeps_the_trace,
            ),
            Case::new(
                "a_server_that_dies_mid_run_ends_it_with_its_last_words_and_the_partial_trace",
                a_server_that_dies_mid_run_ends_it_with_its_last_words_and_the_partial_trace,
            ),
            Case::new(
                "a_port_in_use_is_refused_before_anything_starts",
                a_port_in_use_is_refused_before_anything_starts,
            ),
            Case::new(
                "live_runs_need_files_and_forbid_server_and_seed",
                live_runs_need_files_and_forbid_server_and_seed,
            ),
            #[cfg(target_os = "linux")]
            Case::new(
                "no_process_is_left_behind_at_the_end_on_error_or_on_ctrl_c",
                no_process_is_left_behind_at_the_end_on_error_or_on_ctrl_c,
            ),
            Case::new("rmcp_served_live_gives_its_simulated_verdicts", rmcp_served_live_gives_its_simulated_verdicts),
            Case::new(
                "a_client_crash_and_restart_play_live_as_in_simulation",
                a_client_crash_and_restart_play_live_as_in_simulation,
            ),
            Case::new(
                "a_process_that_speaks_another_dialect_is_refused_and_a_directory_skips_what_it_cannot_play",
                a_process_that_speaks_another_dialect_is_refused_and_a_directory_skips_what_it_cannot_play,
            ),
            Case::new(
                "a_run_cut_short_is_judged_only_up_to_the_cut_and_never_counts_as_expected",
                a_run_cut_short_is_judged_only_up_to_the_cut_and_never_counts_as_expected,
            ),
            Case::new(
                "a_live_hunt_finds_what_the_simulated_hunt_finds_on_naive_and_nothing_on_guarded",
                a_live_hunt_finds_what_the_simulated_hunt_finds_on_naive_and_nothing_on_guarded,
            ),
            Case::new("a_live_hunt_shrinks_live_within_its_budget", a_live_hunt_shrinks_live_within_its_budget),
            Case::new(
                "the_minimal_example_adapter_meets_its_expectations_on_both_canonical_scenarios",
                the_minimal_example_adapter_meets_its_expectations_on_both_canonical_scenarios,
            ),
        ],
        6,
    )
}

fn simulated(file: &str, server: &str) -> Vec<String> {
    let run = mcpsim::run(&plan(file), server, None).unwrap();
    mcpsim::check::violated(&mcpsim::check::judge(&run.trace)).iter().map(|c| c.to_string()).collect()
}

/// One live run's violated checks, and its report (shown when it differs).
type Verdicts = (Vec<String>, String);

/// Runs `(file, server)` live `times` times each against `mcpsim serve`, side
/// by side; the violated checks of every run, in order.
fn live(jobs: &[(&str, &str)], times: usize) -> Vec<((String, String), Vec<Verdicts>)> {
    let commands: Vec<(String, String)> = jobs.iter().map(|(f, s)| (f.to_string(), serve(s))).collect();
    jobs.iter()
        .zip(live_runs(&commands, times))
        .map(|((f, s), runs)| {
            let runs = runs
                .into_iter()
                .map(|r| {
                    assert_eq!(r.server, *s);
                    (r.violated, r.report)
                })
                .collect();
            ((f.to_string(), s.to_string()), runs)
        })
        .collect()
}

fn live_verdicts_equal_simulated_ones_five_times_in_a_row() {
    let scenarios = [
        "nat-rebind.toml",
        "second-client-leak.toml",
        "streamable-http/nat-rebind.toml",
        "streamable-http/second-client-leak.toml",
    ];
    let jobs: Vec<(&str, &str)> = scenarios.iter().flat_map(|f| ["naive", "guarded"].map(move |s| (*f, s))).collect();
    for ((file, server), runs) in live(&jobs, 5) {
        let sim = simulated(&file, &server);
        if server == "guarded" {
            assert!(sim.is_empty(), "{file}: guarded is clean in simulation: {sim:?}");
        } else {
            assert!(!sim.is_empty(), "{file}: naive is caught in simulation");
        }
        for (i, (violated, report)) in runs.iter().enumerate() {
            assert_eq!(
                violated,
                &sim,
                "{file} on {server}, live run {}: live and simulated verdicts differ:\n{report}",
                i + 1
            );
        }
    }
}

fn each_mutant_is_caught_live_by_its_own_check() {
    let cases = [
        ("no-fence", "prior-uplink-live.toml", "session-binding"),
        ("truncating-replay", "evicted-id.toml", "replay-integrity"),
        ("truncating-replay", "streamable-http/evicted-unsent.toml", "replay-integrity"),
        ("answered-replay", "answered-window.toml", "correlation-consistency"),
        ("orphaning", "inflight-too-late.toml", "inflight-disposition"),
        ("unbound", "theft-without-credential.toml", "confidentiality"),
        ("inclusive-replay", "clean-resume.toml", "stream-order"),
        ("empty-ok", "evicted-id.toml", "rejection-protocol"),
    ];
    let jobs: Vec<(&str, &str)> = cases.iter().map(|(s, f, _)| (*f, *s)).collect();
    let results = live(&jobs, 1);
    for (server, file, check) in cases {
        let (_, runs) = results.iter().find(|((f, s), _)| f == file && s == server).unwrap();
        let sim = simulated(file, server);
        let (violated, report) = &runs[0];
        assert!(violated.iter().any(|c| c == check), "{server} on {file} live: {check} not violated:\n{report}");
        assert_eq!(violated, &sim, "{server} on {file}: live and simulated verdicts differ:\n{report}");
    }
}

fn stateless_live_verdicts_equal_simulated_ones() {
    // Every stateless scenario on naive and guarded, and each stateless
    // mutant (and rmcp both ways) on a scenario that catches it.
    let all: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/stateless-http"))
        .unwrap()
        .map(|e| format!("stateless-http/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|f| f.ends_with(".toml"))
        // Deployments play live in tests/live_deploy.rs, on their own.
        .filter(|f| plan(f).deployment.is_single())
        // One server's own store outlives its restarts in simulation; live,
        // a lone `mcpsim serve` keeps it in its memory (a deployment with a
        // shared store has Redis), so a live restart forgets what a
        // simulated one keeps.
        .filter(|f| f != "stateless-http/once-after-restart.toml")
        .collect();
    assert!(all.len() >= 13);
    let mut jobs: Vec<(&str, &str)> =
        all.iter().flat_map(|f| ["naive", "guarded"].map(move |s| (f.as_str(), s))).collect();
    jobs.extend([
        ("stateless-http/second-client-leak.toml", "unbound-state"),
        ("stateless-http/tampered-state.toml", "unsealed-state"),
        ("stateless-http/once-redeemed-twice.toml", "reusable-state"),
        ("stateless-http/cancel-on-reset.toml", "uncancelled"),
        ("stateless-http/restart-between-rounds.toml", "ephemeral-key"),
        ("stateless-http/nat-rebind.toml", "rmcp"),
        ("stateless-http/tampered-state.toml", "rmcp-unsealed"),
    ]);
    let mut caught = 0;
    for ((file, server), runs) in live(&jobs, 1) {
        let sim = simulated(&file, &server);
        caught += usize::from(!sim.is_empty());
        let (violated, report) = &runs[0];
        assert_eq!(violated, &sim, "{file} on {server}: live and simulated verdicts differ:\n{report}");
    }
    assert!(caught >= 20, "the live runs include findings, not only clean runs: {caught}");
}

/// `mcpsim run --live COMMAND FILE ...`, with the exit code and both outputs.
/// One `mcpsim run --live` at scale 0.05; a run late on a loaded machine is
/// replayed slower, up to 0.4, as the live harness does.
fn run_live(command: &str, file: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["run", "--live", command, file, "--time-scale", "0.05", "--max-time-scale", "0.4"];
    args.extend_from_slice(extra);
    let out = mcpsim(&args);
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn a_live_report_says_it_is_live_and_how_to_run_it_again() {
    let timeline = common::tmp("live", "garbage-id.html");
    let (code, out, err) = run_live(
        &serve("guarded"),
        "scenarios/garbage-id.toml",
        &["--format", "json", "--timeline", timeline.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let run = &json["runs"][0];
    assert_eq!(run["server"], "guarded");
    assert_eq!(run["live"]["reproducible"], false);
    // 0.05, or the scale a replay was judged at on a loaded machine: the repro names it.
    let scale = run["live"]["time_scale"].as_f64().unwrap();
    assert!(scale == 0.05 || !run["live"]["replayed"].as_array().unwrap().is_empty(), "{run}");
    assert!(run["repro"].as_str().unwrap().starts_with("mcpsim run --live '"), "{run}");
    assert!(
        run["repro"].as_str().unwrap().ends_with(&format!("scenarios/garbage-id.toml --time-scale {scale}")),
        "{run}"
    );
    assert_eq!(run["expectation"]["met"], true, "{run}");
    assert!(std::fs::read_to_string(&timeline).unwrap().contains("garbage-id"));
}

fn a_step_that_runs_late_makes_the_run_timing_unreliable_with_exit_code_5() {
    // Issue 26, item 15: the step loop stalls 0.5 s (real time) before the
    // resume step (index 3), as a loaded machine would: 10 s of scenario
    // time at time scale 0.05, far past the bound (2 ticks, at least 250 ms).
    let late = |extra: &[&str]| {
        let mut args =
            vec!["run", "--live", &*Box::leak(serve("guarded").into_boxed_str()), "scenarios/garbage-id.toml"];
        args.extend_from_slice(&["--time-scale", "0.05"]);
        args.extend_from_slice(extra);
        let out = stalled_before_step_3(500, &args);
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    };
    // Replayed once, at 0.1 (the ceiling), and late there too: 0.5 s is
    // 5 s of scenario time at 0.1.
    let (code, out, err) = late(&["--format", "json", "--max-time-scale", "0.1"]);
    assert_eq!(code, 5, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let live = &json["runs"][0]["live"];
    assert_eq!(live["timing_unreliable"], true, "{live}");
    assert_eq!(live["time_scale"], 0.1, "{live}");
    assert_eq!(live["max_time_scale"], 0.1, "{live}");
    assert_eq!(live["replayed"][0]["time_scale"], 0.05, "{live}");
    assert!(live["replayed"][0]["why"].as_str().unwrap().contains("step 3 (resume)"), "{live}");
    // The stalled step is among the late ones (on a loaded machine an
    // earlier step can run a little late too: it is listed, in step order).
    let steps = live["late_steps"].as_array().unwrap();
    let stalled = steps.iter().find(|s| s["step"] == 3).unwrap_or_else(|| panic!("{live}"));
    assert_eq!(stalled["do"], "resume", "{live}");
    let lateness = stalled["ran_us"].as_u64().unwrap() - stalled["due_us"].as_u64().unwrap();
    assert!(lateness >= 5_000_000 / 2, "{live}");
    assert_eq!(json["summary"]["timing_unreliable"], 1, "{json}");
    assert_eq!(json["summary"]["met"], 0, "a run cut loose from its timing never counts as met: {json}");
    let (code, out, _) = late(&[]);
    assert_eq!(code, 5, "{out}");
    assert!(
        out.contains(
            "step(s) ran later than 250ms after their due time; the latest, step 3 (resume), was due at 5.000 s"
        ),
        "{out}"
    );
    assert!(
        out.starts_with("garbage-id · server guarded · LIVE")
            && out.lines().nth(1).unwrap().starts_with("TIMING UNRELIABLE: "),
        "{out}"
    );
    assert!(out.contains("expectation not judged: timing unreliable"), "{out}");
    assert!(out.contains("1 run(s): 0 as expected, 0 not met, 0 without expectation, 1 timing unreliable"), "{out}");
    // Issue "A gate that holds under CI load", item 3: a real violation
    // outranks a late run (a CI that retries 5 must not retry a regression
    // into a pass), and a late run never reads "gate passed". naive fails
    // the gate on inflight-too-late (three steps: none is delayed), and
    // garbage-id's step 3 runs late.
    let (naive, files) = (serve("naive"), ["scenarios/garbage-id.toml", "scenarios/inflight-too-late.toml"]);
    let flags = ["--time-scale", "0.05", "--gate", "--jobs", "1", "--max-time-scale", "0.05"];
    let out = stalled_before_step_3(500, &[&["run", "--live", &naive][..], &files, &flags].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    let late = stdout.lines().find(|l| l.starts_with("garbage-id · naive")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(late.ends_with("timing unreliable: not counted · late at time scale 0.05"), "{late}");
}

/// Issue "A gate that holds under CI load", item 1: a late run is played
/// again at twice its scale, and judged at the first scale that kept time.
/// The step loop stalls 40 ms (real) before step 3: 0.8 s of scenario time
/// at 0.05 and 0.4 s at 0.1 (late: the bound is 250 ms), 0.2 s at 0.2
/// (on time, unless the machine adds 10 ms).
/// Runs mcpsim with `args`, its live step loop stalled `ms` (real time)
/// before step 3, as a loaded machine would (MCPSIM_INJECT_STEP_DELAY).
fn stalled_before_step_3(ms: u32, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(args)
        .env("MCPSIM_INJECT_STEP_DELAY", format!("3:{ms}"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs")
}

fn a_late_run_is_replayed_slower_and_judged_at_the_scale_that_kept_time() {
    let guarded = serve("guarded");
    let play = ["run", "--live", &guarded, "scenarios/garbage-id.toml", "--time-scale", "0.05"];
    let out =
        stalled_before_step_3(40, &[&play[..], &["--gate", "--max-time-scale", "0.8", "--format", "json"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let live = &json["runs"][0]["live"];
    assert_eq!(live["timing_unreliable"], false, "{live}");
    let tries = live["replayed"].as_array().unwrap();
    assert!(tries.len() >= 2, "late at 0.05 and at 0.1: {live}");
    assert_eq!(tries[0]["time_scale"], 0.05, "{live}");
    assert_eq!(tries[1]["time_scale"], 0.1, "{live}");
    let judged = live["time_scale"].as_f64().unwrap();
    assert!((0.2..=0.8).contains(&judged), "{live}");
    assert_eq!(json["runs"][0]["expectation"]["met"], true, "{json}");
    assert!(json["runs"][0]["repro"].as_str().unwrap().ends_with(&format!("--time-scale {judged}")), "{json}");
    // The text report says why it was replayed, and which scale judged it.
    let out = stalled_before_step_3(35, &[&play[..], &["--max-time-scale", "0.4"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("replayed slower: late at time scale 0.05 and 0.1"), "{stdout}");
    assert!(stdout.contains("step 3 (resume)") && stdout.contains("), judged at 0."), "{stdout}");
}

fn what_a_server_does_not_report_is_said_not_guessed() {
    // Says ready and then nothing: no MCP port, no reports.
    let ready = r#"{"type":"ready","protocol":"mcpsim-control/1","server":"mute"}"#;
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/$MCPSIM_CONTROL_PORT; echo '{ready}' >&3; sleep 30");
    let mut opts = LiveOptions::new(format!("bash -c \"{}\"", cmd.replace('"', "\\\"")));
    opts.time_scale = 0.05;
    let run = mcpsim::live::run(&plan("garbage-id.toml"), &opts).unwrap();
    assert_eq!(run.aborted, None);
    let text = mcpsim::report::text(&run, &mcpsim::check::judge(&run.trace), None);
    assert!(text.starts_with("garbage-id · server mute · LIVE ·"), "{text}");
    assert!(text.contains("live: the server never reported issuing req-1"), "{text}");
    assert!(text.contains("live: the server never reported the event ids of its notifications"), "{text}");
    // stateless-http: executions and states.
    let run = mcpsim::live::run(&plan("stateless-http/client-crash-mid-call.toml"), &opts).unwrap();
    let text = mcpsim::report::text(&run, &mcpsim::check::judge(&run.trace), None);
    assert!(text.contains("live: the server never reported a tool execution"), "{text}");
    assert!(text.contains("live: the server never reported minting a requestState"), "{text}");
}

fn a_command_that_cannot_start_is_named_with_its_own_words() {
    let (code, _, err) = run_live("no-such-server-binary-xyz --port 1", "scenarios/garbage-id.toml", &[]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("the server process exited with status 127 before it was ready"), "{err}");
    assert!(err.contains("no-such-server-binary-xyz") && err.contains("not found"), "its stderr is quoted: {err}");
}

fn a_process_that_never_says_ready_is_given_up_on_in_time() {
    let started = Instant::now();
    let (code, _, err) = run_live("echo starting; sleep 30", "scenarios/garbage-id.toml", &["--ready-timeout", "1"]);
    assert_eq!(code, 4, "{err}");
    // Issue "A gate that holds under CI load", item 2: a start that misses
    // the ready timeout (two servers starting at once on a loaded machine)
    // is tried once more, with twice the time, and said so.
    assert!(
        err.contains("note: the server process did not say `ready` within 1s; starting it once more, with 2s"),
        "{err}"
    );
    assert!(err.contains("did not say `ready` on the control port within 2s"), "{err}");
    assert!(err.contains("| starting"), "its output is quoted: {err}");
    assert!(started.elapsed() < Duration::from_secs(20), "it waited for the process to end");
}

/// Issue "A gate that holds under CI load", item 2: a live hunt whose
/// server does not start files a harness failure per seed and goes on;
/// three in a row stop it, and it still prints its table and says why.
fn a_live_hunt_that_loses_its_server_goes_on_and_prints_its_table() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(["hunt", "--live", "echo starting; sleep 30", "--seeds", "6", "--seed", "0", "--jobs", "1"])
        .args(["--no-shrink", "--ready-timeout", "0.3"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("harness failure: seed 0: the live run did not play: the server process did not say `ready`"),
        "{stdout}"
    );
    assert!(stdout.contains("hunted 3 seeds: 0 failing, 0 distinct bug(s)"), "{stdout}");
    assert!(stdout.contains("3 harness failure(s)"), "{stdout}");
    assert!(stdout.contains("the hunt stopped early: the live server broke on 3 plans in a row"), "{stdout}");
}

fn a_process_that_ignores_the_control_protocol_is_named() {
    // Connects, then says something that is not mcpsim-control/1.
    let cmd = r#"exec 3<>/dev/tcp/127.0.0.1/$MCPSIM_CONTROL_PORT; echo hello-there >&3; sleep 30"#;
    let (code, _, err) = run_live(&format!("bash -c '{cmd}'"), "scenarios/garbage-id.toml", &[]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("first control line is not mcpsim-control/1") && err.contains("hello-there"), "{err}");
}

fn a_protocol_break_mid_run_ends_the_run_and_keeps_the_trace() {
    let trace = common::tmp("live", "broken.jsonl");
    let _ = std::fs::remove_file(&trace);
    let ready = r#"{"type":"ready","protocol":"mcpsim-control/1","server":"liar"}"#;
    let cmd = format!(
        "exec 3<>/dev/tcp/127.0.0.1/$MCPSIM_CONTROL_PORT; echo '{ready}' >&3; sleep 1; echo nonsense >&3; sleep 30"
    );
    let (code, _, err) = run_live(
        &format!("bash -c \"{}\"", cmd.replace('"', "\\\"")),
        "scenarios/garbage-id.toml",
        &["--trace", trace.to_str().unwrap()],
    );
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("stopped early") && err.contains("broke mcpsim-control/1") && err.contains("nonsense"),
        "{err}"
    );
    let kept = std::fs::read_to_string(&trace).unwrap();
    assert!(kept.contains("\"run-started\"") && kept.contains("\"server-stopped\""), "{kept}");
}

fn a_server_that_dies_mid_run_ends_it_with_its_last_words_and_the_partial_trace() {
    let trace = common::tmp("live", "died.jsonl");
    let _ = std::fs::remove_file(&trace);
    let cmd = format!("{} & pid=$!; sleep 1.5; echo 'about to die' >&2; kill -9 $pid; exit 3", serve("guarded"));
    let (code, _, err) = run_live(&cmd, "scenarios/nat-rebind.toml", &["--trace", trace.to_str().unwrap()]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("the server process exited with status 3"), "{err}");
    assert!(err.contains("| about to die"), "{err}");
    let kept = std::fs::read_to_string(&trace).unwrap();
    assert!(kept.contains("alice connects"), "the trace up to the death is kept: {kept}");
}

fn a_port_in_use_is_refused_before_anything_starts() {
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (code, _, err) = run_live(&serve("guarded"), "scenarios/garbage-id.toml", &["--live-port", &port]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains(&format!("port {port} on 127.0.0.1 is not free for the server")), "{err}");
}

fn live_runs_need_files_and_forbid_server_and_seed() {
    let out = mcpsim(&["run", "--live", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("a live run takes real time: name the scenario files"));
    let out = mcpsim(&["run", "--live", "x", "--server", "naive", "scenarios/nat-rebind.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = mcpsim(&["run", "--time-scale", "0.1", "scenarios/nat-rebind.toml"]);
    assert_eq!(out.status.code(), Some(2), "--time-scale without --live: {}", text(&out.stderr));
    let out = mcpsim(&["run", "--live", "x", "--time-scale", "0", "scenarios/nat-rebind.toml"]);
    assert!(text(&out.stderr).contains("--time-scale must be a positive number"));
}

/// Processes whose command line holds `marker`, from /proc.
#[cfg(target_os = "linux")]
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker) && !c.contains("mcpsim run"))
        .collect()
}

#[cfg(target_os = "linux")]
fn no_process_is_left_behind_at_the_end_on_error_or_on_ctrl_c() {
    // A server that starts a helper of its own: the whole group must go.
    let with_helper = |marker: &str| format!("sleep {marker} & {}", serve("guarded"));
    // At the end of a run.
    let (code, _, err) = run_live(&with_helper("4242.1"), "scenarios/garbage-id.toml", &[]);
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(processes_with("sleep 4242.1"), Vec::<String>::new());
    // After an error (never ready).
    let (code, _, _) =
        run_live("sleep 4242.2 & sleep 4242.3", "scenarios/garbage-id.toml", &["--ready-timeout", "0.5"]);
    assert_eq!(code, 4);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(processes_with("sleep 4242.2"), Vec::<String>::new());
    assert_eq!(processes_with("sleep 4242.3"), Vec::<String>::new());
    // On Ctrl-C, mid-run.
    let out = interrupted_after(
        &["run", "--live", &with_helper("4242.4"), "scenarios/nat-rebind.toml", "--time-scale", "0.1"],
        Duration::from_secs(2),
        || assert!(!processes_with("sleep 4242.4").is_empty(), "the helper runs while the run does"),
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("interrupted (Ctrl-C)"), "{}", text(&out.stderr));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(processes_with("sleep 4242.4"), Vec::<String>::new());
    // Issue "A gate that holds under CI load", item 4: one Ctrl-C stops a
    // whole gate. Two runs in flight (--jobs 2) are cut and judged up to the
    // cut; the three scenarios after them are not played; it exits 4 at once.
    let started = Instant::now();
    let out = interrupted_after(
        &[
            "run",
            "--live",
            &with_helper("4242.5"),
            "--time-scale",
            "0.1",
            "--gate",
            "--jobs",
            "2",
            "scenarios/nat-rebind.toml",
            "scenarios/garbage-id.toml",
            "scenarios/future-id.toml",
            "scenarios/inflight-too-late.toml",
            "scenarios/nat-rebind.toml",
        ],
        Duration::from_secs(2),
        || (),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(12), "it stopped at once: {:?}", started.elapsed());
    assert!(stdout.contains("3 run(s) not played: interrupted (Ctrl-C)"), "{stdout}\n{stderr}");
    assert!(stdout.contains("2 run(s): 0 passed the gate, 2 failed it"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("gate passed"), "{stdout}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(processes_with("sleep 4242.5"), Vec::<String>::new());
}

/// Runs mcpsim with `args`, sends it a SIGINT (Ctrl-C) after `after` (once
/// `meanwhile` has looked at the run in flight), and waits for it to end.
fn interrupted_after(args: &[&str], after: Duration, meanwhile: impl FnOnce()) -> std::process::Output {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    meanwhile();
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    child.wait_with_output().unwrap()
}

fn rmcp_served_live_gives_its_simulated_verdicts() {
    // The official Rust SDK behind `mcpsim serve`: its bugs show live as in simulation.
    let file = "streamable-http/nat-rebind.toml";
    let results = live(&[(file, "rmcp")], 1);
    let (violated, report) = &results[0].1[0];
    let sim = simulated(file, "rmcp");
    assert!(!sim.is_empty());
    assert_eq!(violated, &sim, "rmcp on {file}: live and simulated verdicts differ:\n{report}");
}

fn a_client_crash_and_restart_play_live_as_in_simulation() {
    let plan = Plan::from_toml_str(
        r#"
[scenario]
name = "crash-live"
duration = "40s"
[server]
first_event_id = 1000
[[client]]
name = "alice"
[[step]]
at = "0s"
do = "connect"
client = "alice"
[[step]]
at = "2s"
do = "notify"
client = "alice"
count = 2
[[step]]
at = "5s"
do = "crash-client"
client = "alice"
[[step]]
at = "8s"
do = "connect"
client = "alice"
[[step]]
at = "12s"
do = "server-request"
client = "alice"
method = "roots/list"
label = "req-1"
"#,
        "crash-live.toml",
    )
    .unwrap();
    let sim = mcpsim::run(&plan, "guarded", None).unwrap();
    let mut opts = LiveOptions::new(serve("guarded"));
    opts.time_scale = SCALE;
    let live = mcpsim::live::run(&plan, &opts).unwrap();
    let crashed = |run: &mcpsim::Run| {
        run.trace.events.iter().filter(|e| matches!(e.what, mcpsim::trace::What::ClientCrashed { .. })).count()
    };
    assert_eq!((crashed(&sim), crashed(&live)), (1, 1));
    // The restarted client holds a new session and answers the request on it.
    let answered = |run: &mcpsim::Run| {
        run.trace.events.iter().any(|e| {
            matches!(&e.what, mcpsim::trace::What::RequestOutcome { label, outcome: mcpsim::trace::Outcome::Answered, .. } if label == "req-1")
        })
    };
    let verdicts = |run: &mcpsim::Run| {
        mcpsim::check::violated(&mcpsim::check::judge(&run.trace)).iter().map(|c| c.to_string()).collect::<Vec<_>>()
    };
    assert!(
        answered(&sim) && answered(&live),
        "{}",
        mcpsim::report::text(&live, &mcpsim::check::judge(&live.trace), None)
    );
    assert_eq!(verdicts(&live), verdicts(&sim));
}

fn a_process_that_speaks_another_dialect_is_refused_and_a_directory_skips_what_it_cannot_play() {
    // `ready` declares the one dialect given with --dialect.
    let streamable_only = format!("{} --dialect streamable-http", serve("guarded"));
    let (code, _, err) = run_live(&streamable_only, "scenarios/garbage-id.toml", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "the server process \"guarded\" speaks only dialect \"streamable-http\"; scenario \"garbage-id\" is \"legacy-sse\""
        ),
        "{err}"
    );
    // A directory of both dialects: the legacy one is skipped and the tally says so.
    let dir = common::tmp("live-dialects", "x").parent().unwrap().to_path_buf();
    for f in ["garbage-id.toml", "streamable-http/garbage-id.toml"] {
        let to = dir.join(f.replace('/', "-"));
        std::fs::copy(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(f), to).unwrap();
    }
    let (code, out, err) = run_live(&streamable_only, dir.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.lines().any(|l| l.starts_with("garbage-id-streamable · guarded · seed")), "{out}");
    assert!(
        out.lines().last().unwrap().ends_with("; 1 scenario(s) skipped: the live server does not speak their dialect"),
        "{out}"
    );
    // Every scenario skipped: the command was wrong (exit 2).
    let (code, out, _) = run_live(&streamable_only, "scenarios/stateless-http/tampered-state.toml", &["--quiet"]);
    assert_eq!(code, 2, "{out}");
    // A `ready` without dialects is taken to speak every one, with a warning.
    let ready = r#"{"type":"ready","protocol":"mcpsim-control/1","server":"mute"}"#;
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/$MCPSIM_CONTROL_PORT; echo '{ready}' >&3; sleep 30");
    let (_, _, err) = run_live(&format!("bash -c \"{}\"", cmd.replace('"', "\\\"")), "scenarios/garbage-id.toml", &[]);
    assert!(err.contains("warning: the server process \"mute\" names no dialects in its `ready` message"), "{err}");
}

fn a_run_cut_short_is_judged_only_up_to_the_cut_and_never_counts_as_expected() {
    // naive on nat-rebind (400 s), interrupted at about 40 s of scenario time.
    let out = interrupted_after(
        &["run", "--live", &serve("naive"), "scenarios/nat-rebind.toml", "--time-scale", "0.1"],
        Duration::from_secs(4),
        || (),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let cut: f64 = stdout
        .split("the run was cut short here: interrupted (Ctrl-C) at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the report says where it stopped:\n{stdout}"));
    assert!(cut > 20.0 && cut < 200.0, "{cut}");
    // No verdict cites a time after the cut.
    for at in stdout.split("VIOLATED at ").skip(1) {
        let t: f64 = at.split(' ').next().unwrap().parse().unwrap();
        assert!(t <= cut + 0.001, "a verdict at {t} s, after the cut at {cut} s:\n{stdout}");
    }
    assert!(stdout.contains("NOT JUDGED IN FULL: the run was cut short (interrupted (Ctrl-C) at "), "{stdout}");
    assert!(!stdout.contains("expectation met"), "{stdout}");
    assert!(stdout.lines().last().unwrap().contains(" 0 as expected, 1 not met"), "{stdout}");
}

fn a_live_hunt_finds_what_the_simulated_hunt_finds_on_naive_and_nothing_on_guarded() {
    use mcpsim::hunt::{HuntOptions, Limit};
    let hunt = |server: &str, live: bool| {
        let mut opts = HuntOptions {
            jobs: 10,
            out: None,
            dialect: mcpsim::scenario::Dialect::StreamableHttp,
            ..HuntOptions::new(server, Limit::Seeds(40))
        };
        if live {
            let mut l = LiveOptions::new(serve(server));
            l.time_scale = 0.1;
            l.ready_timeout = Duration::from_secs(60);
            opts.live = Some(l);
        }
        let mut report = mcpsim::hunt::hunt(&opts, |_| {}).unwrap();
        mcpsim::hunt::confirm_live(&opts, &mut report).unwrap();
        report
    };
    let sim = hunt("naive", false);
    let live = hunt("naive", true);
    // Unshrunk hunts file a bug by its check and the defect of the check's first
    // violation: live timing (loopback, no drawn latency) changes a headline's words,
    // not its defect. The issue asks live to find 80 % of the simulated hunt's.
    let kinds = |r: &mcpsim::hunt::HuntReport| -> std::collections::BTreeSet<String> {
        r.bugs.iter().map(|b| b.signature.clone()).collect()
    };
    let (s, l) = (kinds(&sim), kinds(&live));
    assert!(s.len() >= 5, "{s:?}");
    assert!(s.iter().all(|k| k.starts_with("unshrunk | ")), "{s:?}");
    let shared = s.intersection(&l).count();
    assert!(shared * 5 >= s.len() * 4, "live found {shared} of the simulated hunt's {}: {l:?} vs {s:?}", s.len());
    // Each live bug was replayed live, and says how often it came back.
    assert!(live.bugs.iter().all(|b| b.replayed.is_some_and(|(_, of)| of == mcpsim::hunt::LIVE_REPLAYS)));
    assert!(live.bugs[0].repro.starts_with("mcpsim hunt --live "), "{}", live.bugs[0].repro);
    let guarded = hunt("guarded", true);
    assert!(guarded.bugs.is_empty(), "{:#?}", guarded.bugs);
    assert_eq!(guarded.seeds_run, 40);
}

/// A live hunt shrinks live: each candidate is a real run of the process,
/// within `--shrink-runs`. The reproducer is written with `[expect]` under
/// the name the process gave itself, and its live replays play the
/// reproducer, not the original seed.
fn a_live_hunt_shrinks_live_within_its_budget() {
    use mcpsim::hunt::{HuntOptions, Limit};
    let dir = std::env::temp_dir().join(format!("mcpsim-live-shrink-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut l = LiveOptions::new(serve("naive"));
    l.time_scale = 0.1;
    l.ready_timeout = Duration::from_secs(60);
    let opts = HuntOptions {
        jobs: 1,
        base_seed: 3,
        out: Some(dir.clone()),
        shrink_budget: 4,
        dialect: mcpsim::scenario::Dialect::StreamableHttp,
        live: Some(l),
        ..HuntOptions::new("live", Limit::Seeds(1))
    };
    let mut report = mcpsim::hunt::hunt(&opts, |_| {}).unwrap();
    mcpsim::hunt::confirm_live(&opts, &mut report).unwrap();
    let original = mcpsim::hunt::generate_in(3, mcpsim::scenario::Dialect::StreamableHttp);
    assert!(!report.bugs.is_empty());
    for bug in &report.bugs {
        let file = bug.file.as_ref().unwrap_or_else(|| panic!("not shrunk: {bug:#?}"));
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("Shrunk in 4 runs"), "{text}");
        assert!(text.contains(&format!("# signature: {}", bug.signature)), "{text}");
        let plan = mcpsim::scenario::Plan::load(std::path::Path::new(file)).unwrap();
        assert!(plan.expect.contains_key("naive") && plan.expect.contains_key("guarded"), "{:?}", plan.expect);
        assert!(plan.duration < original.duration || plan.steps.len() < original.steps.len());
        assert!(bug.replayed.is_some_and(|(_, of)| of == mcpsim::hunt::LIVE_REPLAYS));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The minimal adapter of `examples/` (Python's standard library only,
/// written from docs/live-protocol.md alone) meets `[expect]` on both
/// canonical streamable-http scenarios, and its runs are judged in full:
/// every request it reported issued has an outcome.
fn the_minimal_example_adapter_meets_its_expectations_on_both_canonical_scenarios() {
    let command = "python3 examples/minimal_adapter.py".to_string();
    let files = ["streamable-http/nat-rebind.toml", "streamable-http/second-client-leak.toml"];
    let jobs: Vec<(String, String)> = files.iter().map(|f| (f.to_string(), command.clone())).collect();
    for (file, runs) in files.iter().zip(live_runs(&jobs, 1)) {
        let expected = plan(file).expect.get("minimal-adapter").cloned().expect("an [expect] entry");
        let r = &runs[0];
        assert_eq!(r.server, "minimal-adapter");
        assert_eq!(r.violated, expected, "{file}:\n{}", r.report);
        assert!(r.trace.contains("\"kind\":\"request-outcome\""), "{file}: no outcome reported");
        assert!(!r.report.contains("the server never reported"), "{file}:\n{}", r.report);
    }
}

/// The README's live commands, run as written with `sh` in a directory that
/// has the bundled scenarios: the user's server (`node my-server.js`) is
/// `mcpsim serve --server naive`, whose known findings on
/// nat-rebind-streamable are what the README's baseline accepts. The plain
/// run meets naive's `[expect]`; the gate, eight scenarios at a time, fails
/// on naive's other findings, passes the accepted one, and writes a JUnit
/// testcase for every streamable-http scenario.
fn the_readmes_live_commands_run_as_written() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    // A fenced block, by how it starts, continuation lines joined.
    let block = |start: &str| -> String {
        let at = readme.find(&format!("```{start}")).unwrap_or_else(|| panic!("README: ```{start}"));
        let body = &readme[at..];
        let body = &body[body.find('\n').unwrap() + 1..];
        body[..body.find("```").unwrap()].replace("\\\n", " ")
    };
    let dir = common::tmp("live", "readme-commands");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(root.join("scenarios"), dir.join("scenarios")).unwrap();
    std::fs::write(dir.join("mcpsim-baseline.toml"), block("toml\n# mcpsim-baseline.toml")).unwrap();
    let sh = |command: &str| {
        let command = command
            .trim()
            .replacen("mcpsim ", &format!("'{}' ", env!("CARGO_BIN_EXE_mcpsim")), 1)
            .replace("node my-server.js", &format!("{} serve --server naive", env!("CARGO_BIN_EXE_mcpsim")));
        // Exit code 5 is the machine saying it could not keep up (a step ran
        // late, so those runs were not judged): under this binary's other live
        // tests that happens, and the honest answer is to play again.
        let mut tries = 0;
        loop {
            let out = std::process::Command::new("sh").arg("-c").arg(&command).current_dir(&dir).output().unwrap();
            tries += 1;
            if out.status.code() != Some(5) || tries == 3 {
                return (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr));
            }
            eprintln!("timing unreliable (exit 5), playing again: {command}");
        }
    };
    let plain = block("sh\nmcpsim run --live 'node my-server.js'");
    let gate = block("sh\nmcpsim run --gate --baseline mcpsim-baseline.toml");
    // No --jobs: a live run's default follows the machine (2 at 0.1 on 2 cores).
    assert!(!gate.contains("--jobs") && gate.contains("> mcpsim.xml"), "{gate}");
    // Both at once: each waits on real time.
    let ((code, out, err), ((gate_code, gate_out, gate_err), took)) = std::thread::scope(|s| {
        let g = s.spawn(|| {
            let started = Instant::now();
            (sh(&gate), started.elapsed())
        });
        (sh(&plain), g.join().unwrap())
    });
    assert_eq!(code, 0, "{plain}\n{out}\n{err}");
    assert!(out.contains("expectation met: naive violates "), "{out}");
    assert_eq!(gate_code, 1, "{gate}\n{gate_out}\n{gate_err}");
    eprintln!("the README's gate on scenarios/streamable-http/ took {took:.0?}");
    let xml = std::fs::read_to_string(dir.join("mcpsim.xml")).unwrap();
    let scenarios = std::fs::read_dir(root.join("scenarios/streamable-http")).unwrap().count();
    assert!(xml.contains(&format!("tests=\"{scenarios}\"")), "{xml}");
    assert!(!xml.contains("stale baseline"), "the baseline's entry is naive's: {xml}");
    let accepted =
        xml.split("<testcase ").find(|c| c.starts_with("classname=\"nat-rebind-streamable\"")).expect("its testcase");
    assert!(!accepted.contains("<failure"), "accepted by the baseline: {accepted}");
    assert!(xml.contains("GATE FAILED: naive violated "), "{xml}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue "A gate that holds under CI load", item 7: the workflow files the
/// README links to run as written. Each one's gate step plays in a checkout
/// laid out as the workflow lays it out (this repository at `.mcpsim`),
/// with `mcpsim serve` for the user's server: the TypeScript one against
/// guarded (it passes), the Python one against naive (it fails, exit 1).
/// Each writes its JUnit report, timelines and traces where it uploads them.
fn the_ci_workflow_files_run_as_written() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for (file, server_cmd, served, code) in [
        ("docs/ci/mcpsim-gate-typescript.yml", "'node server.mjs'", "guarded", 0),
        ("docs/ci/mcpsim-gate-python.yml", "'python server.py'", "naive", 1),
    ] {
        assert!(readme.contains(&format!("({file})")), "the README links {file}");
        let yaml = std::fs::read_to_string(root.join(file)).unwrap();
        // The gate step's script: the lines under its `run: |`, continuation lines joined.
        let at = yaml.find("- name: gate").unwrap_or_else(|| panic!("{file}: a step named gate"));
        let run = &yaml[at..];
        let run = &run[run.find("run: |").unwrap_or_else(|| panic!("{file}: its run: |")) + 6..];
        let script: Vec<&str> =
            run.lines().skip(1).take_while(|l| l.starts_with("          ")).map(str::trim).collect();
        let script = script.join("\n").replace("\\\n", " ");
        assert!(script.contains(server_cmd) && script.contains("--time-scale 0.1"), "{file}: {script}");
        let script = script
            .replace("mcpsim run ", &format!("'{}' run ", env!("CARGO_BIN_EXE_mcpsim")))
            .replace(server_cmd, &format!("'{} serve --server {served}'", env!("CARGO_BIN_EXE_mcpsim")));
        let dir = common::tmp("live", &format!("workflow-{served}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(root, dir.join(".mcpsim")).unwrap();
        let out = std::process::Command::new("sh").args(["-e", "-c", &script]).current_dir(&dir).output().unwrap();
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(code), "{file}\n{script}\n{stdout}\n{stderr}");
        let xml = std::fs::read_to_string(dir.join("mcpsim-out/mcpsim.xml")).unwrap();
        let scenarios = std::fs::read_dir(root.join("scenarios/streamable-http")).unwrap().count();
        assert!(xml.contains(&format!("tests=\"{scenarios}\"")), "{file}: {xml}");
        assert_eq!(xml.contains("GATE FAILED"), code == 1, "{file}: {xml}");
        for kept in ["mcpsim-out/timelines", "mcpsim-out/traces"] {
            let n = std::fs::read_dir(dir.join(kept)).map(|d| d.count()).unwrap_or(0);
            assert!(n >= scenarios, "{file}: {kept} holds {n} files");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
