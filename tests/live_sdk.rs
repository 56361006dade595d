//! The TypeScript and Python SDKs under test, live: their adapters
//! (`adapters/typescript`, `adapters/python`) play every bundled
//! streamable-http scenario five times, and every run must meet the
//! scenario's `[expect]` for `typescript-sdk` and `python-sdk`. The verdict
//! sets (stable over the five runs, or the test fails) are snapshotted as the
//! SDKs' columns of the verdict matrix.
//!
//! `.ci/run` installs both (`npm ci`; `adapters/python/install.sh`, a venv from
//! the pinned requirements). Elsewhere, a missing toolchain or install skips this test
//! with the reason printed; with `CI=true` it fails instead.

mod common;
use common::live::{live_runs, plan};
use std::path::Path;
use std::process::Command;

const RUNS: usize = 5;

/// A live SDK server: its name in `[expect]` and the command that starts it.
struct Sdk {
    name: &'static str,
    command: &'static str,
}

const TYPESCRIPT: Sdk = Sdk { name: "typescript-sdk", command: "node adapters/typescript/server.mjs" };
const PYTHON: Sdk = Sdk { name: "python-sdk", command: "adapters/python/.venv/bin/python adapters/python/server.py" };

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Why `program args` cannot run, if it cannot.
fn fails(program: &str, args: &[&str]) -> Option<String> {
    match Command::new(program).args(args).current_dir(root()).output() {
        Err(e) => Some(format!("`{program}` cannot run: {e}")),
        Ok(o) if !o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            let line =
                err.lines().find(|l| l.contains("Error")).or(err.lines().next()).unwrap_or("").trim().to_string();
            Some(format!("`{program} {}` failed: {line}", args.join(" ")))
        }
        Ok(_) => None,
    }
}

/// Why the SDK adapters cannot run here, if they cannot.
fn missing() -> Option<String> {
    fails("node", &["-e", "require('./adapters/typescript/node_modules/@modelcontextprotocol/sdk/package.json')"])
        .map(|w| format!("{w} (install: npm ci --prefix adapters/typescript)"))
        .or_else(|| {
            fails("adapters/python/.venv/bin/python", &["-c", "import mcp, uvicorn, os; assert os.path.exists('adapters/python/.venv/sdk_example/event_store.py')"]).map(|w| {
format!("{w} (install: adapters/python/install.sh)")
            })
        })
}

/// Whether the adapters can run here. When they cannot, the test is skipped
/// with the reason printed, or fails with `CI=true`.
fn installed() -> bool {
    let Some(why) = missing() else { return true };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and the SDK adapters cannot run: {why}");
    }
    eprintln!("SKIPPED: the SDK adapters cannot run here: {why}");
    false
}

fn streamable_scenarios() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join("scenarios/streamable-http"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".toml"))
        .map(|f| format!("streamable-http/{f}"))
        .collect();
    files.sort();
    files
}

#[test]
fn both_sdks_meet_every_streamable_http_expectation_five_times() {
    if !installed() {
        return;
    }
    let files = streamable_scenarios();
    let sdks = [TYPESCRIPT, PYTHON];
    let jobs: Vec<(String, String)> =
        files.iter().flat_map(|f| sdks.iter().map(move |s| (f.clone(), s.command.to_string()))).collect();
    let results = live_runs(&jobs, RUNS);
    let mut matrix = format!("{:<46} {:<40} {}\n", "scenario", TYPESCRIPT.name, PYTHON.name);
    let mut problems = Vec::new();
    for (file, per_sdk) in files.iter().zip(results.chunks(sdks.len())) {
        let plan = plan(file);
        let mut cells = Vec::new();
        for (sdk, runs) in sdks.iter().zip(per_sdk) {
            let Some(expected) = plan.expect.get(sdk.name) else {
                problems.push(format!("{file}: no [expect] entry for {}", sdk.name));
                continue;
            };
            for (i, r) in runs.iter().enumerate() {
                assert_eq!(r.server, sdk.name, "{file}: the adapter names itself");
                let mut got = r.violated.clone();
                got.sort();
                if &got != expected {
                    problems.push(format!(
                        "{file} on {}, run {}: expected {expected:?}, violated {got:?}\n{}",
                        sdk.name,
                        i + 1,
                        r.report
                    ));
                }
            }
            let cell = if runs[0].violated.is_empty() { "-".to_string() } else { runs[0].violated.join(",") };
            cells.push(cell);
        }
        if cells.len() == sdks.len() {
            matrix.push_str(&format!("{:<46} {:<40} {}\n", file, cells[0], cells[1]));
        }
    }
    // What the README's findings section says of the runs beyond their
    // verdicts, in every run: (scenario, server, words of the report, or of
    // the trace for `trace:`).
    let claims: &[(&str, &str, &str)] = &[
        ("clean-resume", TYPESCRIPT.name, "notification(s) emitted on alice's session at"),
        ("clean-resume", TYPESCRIPT.name, "never reached it"),
        ("nat-rebind", TYPESCRIPT.name, "never delivered to alice; timed out at"),
        ("nat-rebind", TYPESCRIPT.name, "skipped 1 event(s) the stream had carried after it"),
        ("evicted-id", TYPESCRIPT.name, "trace:\"status\":409"),
        // The owner answers its request over POST though the thief ended its stream.
        ("call-stream-takeover", TYPESCRIPT.name, "call-1 answered"),
        ("nat-rebind", PYTHON.name, "written to alice's dropped uplink (mapping 3)"),
        ("nat-rebind", PYTHON.name, "delivered to alice elsewhere; answered at"),
        ("answered-window", PYTHON.name, "alice was handed req-42 (sampling/createMessage, event"),
        (
            "theft-without-credential",
            PYTHON.name,
            "mallory (principal mallory) received 5 message(s) of alice's session",
        ),
        ("foreign-delete", TYPESCRIPT.name, "only the session's owner may end it"),
        ("foreign-delete", PYTHON.name, "only the session's owner may end it"),
        ("future-id", TYPESCRIPT.name, "no event of the session ever carried that id"),
        ("future-id", PYTHON.name, "no event of the session ever carried that id"),
        // Not re-issued, but the client's answer over POST completes it.
        ("call-stream-reset", TYPESCRIPT.name, "call-1 answered"),
        ("call-stream-reset", PYTHON.name, "call-1 answered"),
        ("standalone-sever", TYPESCRIPT.name, "alice has no live uplink at the end (90.000 s)"),
        ("standalone-sever", TYPESCRIPT.name, "ended: HTTP 409"),
        ("standalone-sever", TYPESCRIPT.name, "req-1 timed out"),
        ("standalone-sever", PYTHON.name, "alice has no live uplink at the end (90.000 s)"),
        ("standalone-sever", PYTHON.name, "ended: HTTP 409"),
        ("standalone-sever", PYTHON.name, "req-1 timed out"),
    ];
    for (scenario, sdk, words) in claims {
        let file = format!("streamable-http/{scenario}.toml");
        let k = files.iter().position(|f| *f == file).unwrap_or_else(|| panic!("no scenario {file}"));
        let s = sdks.iter().position(|x| x.name == *sdk).unwrap();
        for (i, r) in results[k * sdks.len() + s].iter().enumerate() {
            let (text, words) = match words.strip_prefix("trace:") {
                Some(w) => (&r.trace, w),
                None => (&r.report, *words),
            };
            if !text.contains(words) {
                problems.push(format!("{file} on {sdk}, run {}: the README says {words:?}; the run does not", i + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
    common::snapshot("matrix", "live_sdk_matrix", &matrix, None);
}

/// An adapter whose control port cannot be reached (mcpsim is gone: a test
/// process that exited while it started, say) exits instead of serving
/// forever. Three Python servers once outlived a failed test by an hour.
#[test]
fn an_adapter_without_its_control_connection_exits() {
    if !installed() {
        return;
    }
    // A port nothing listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for sdk in [TYPESCRIPT, PYTHON] {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new("sh")
            .args(["-c", &format!("exec {}", sdk.command)])
            .current_dir(root())
            .env("MCPSIM_PORT", port.to_string())
            .env("MCPSIM_CONTROL_PORT", closed.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let status =
            status.unwrap_or_else(|| panic!("{} still served 60 s after its control port refused it", sdk.name));
        assert!(!status.success(), "{} exited with {status}: expected a failure status", sdk.name);
    }
}
