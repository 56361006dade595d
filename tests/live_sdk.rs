//! The SDK adapters under test, live, in every configuration they serve
//! (docs/live-protocol.md: `--event-store`, `--auth`).
//!
//! - CI: every adapter and configuration plays the canonical scenarios of
//!   each dialect it speaks once, and each run must meet the scenario's
//!   `[expect]` for the name the adapter gives itself. The findings
//!   tables (docs/findings.md) must be `[expect]`, cell for cell.
//! - The full matrix, one command (about an hour on 2 cores):
//!   `MCPSIM_UPDATE_MATRIX=1 cargo test --test live_sdk -- --ignored full_live_matrix`
//!   plays every scenario of every adapter and configuration five times;
//!   every run must meet `[expect]`, the five verdict sets must agree, and
//!   the matrix is written (or, without the variable, compared).
//!
//! `.ci/run` installs every adapter (`npm ci`; the Python venvs from pinned
//! requirements). Elsewhere, a missing toolchain or install makes the tests
//! that play adapters `ignored` in the summary, with the reason printed
//! (tests/common/harness.rs); with `CI=true` they fail instead.

mod common;
use common::harness::{run, Case};
use common::live::{deployment_scenarios, live_runs_scaled, live_runs_with, plan, routed_in_order, LiveVerdict, SCALE};
use mcpsim::live::{AdapterConfig, Auth, EventStore};
use std::path::Path;
use std::process::Command;

/// A live adapter: its base name in `[expect]`, the command that starts it,
/// the dialects it speaks, and how to tell it is installed.
struct Adapter {
    name: &'static str,
    command: &'static str,
    dialects: &'static [&'static str],
    /// A program and arguments that succeed when the adapter can run, and the install command.
    probe: (&'static str, &'static [&'static str], &'static str),
}

const TYPESCRIPT: Adapter = Adapter {
    name: "typescript-sdk",
    command: "node adapters/typescript/server.mjs",
    dialects: &["streamable-http"],
    probe: (
        "node",
        &["-e", "require('./adapters/typescript/node_modules/@modelcontextprotocol/sdk/package.json')"],
        "npm ci --prefix adapters/typescript",
    ),
};
const PYTHON: Adapter = Adapter {
    name: "python-sdk",
    command: "adapters/python/.venv/bin/python adapters/python/server.py",
    dialects: &["streamable-http"],
    probe: (
        "adapters/python/.venv/bin/python",
        &["-c", "import mcp, uvicorn, os; assert os.path.exists('adapters/python/.venv/sdk_example/event_store.py')"],
        "adapters/python/install.sh",
    ),
};
const TYPESCRIPT_V2: Adapter = Adapter {
    name: "typescript-v2",
    command: "node adapters/typescript-v2/server.mjs",
    dialects: &["streamable-http", "stateless-http"],
    probe: (
        "node",
        &["-e", "require('./adapters/typescript-v2/node_modules/@modelcontextprotocol/server/package.json')"],
        "npm ci --prefix adapters/typescript-v2",
    ),
};
const FASTMCP: Adapter = Adapter {
    name: "fastmcp",
    command: "adapters/fastmcp/.venv/bin/python adapters/fastmcp/server.py",
    dialects: &["streamable-http", "stateless-http"],
    probe: ("adapters/fastmcp/.venv/bin/python", &["-c", "import fastmcp"], "adapters/fastmcp/install.sh"),
};
const ADAPTERS: [Adapter; 4] = [TYPESCRIPT, PYTHON, TYPESCRIPT_V2, FASTMCP];

/// The configurations, by the suffix each adds to the adapter's name.
const CONFIGS: [(&str, AdapterConfig); 4] = [
    ("", AdapterConfig { event_store: None, auth: None }),
    ("-no-store", AdapterConfig { event_store: Some(EventStore::None), auth: None }),
    ("-auth", AdapterConfig { event_store: None, auth: Some(Auth::Bearer) }),
    ("-no-store-auth", AdapterConfig { event_store: Some(EventStore::None), auth: Some(Auth::Bearer) }),
];

/// The canonical scenarios of each dialect.
const CANONICAL: [&str; 4] = [
    "streamable-http/nat-rebind.toml",
    "streamable-http/second-client-leak.toml",
    "stateless-http/nat-rebind.toml",
    "stateless-http/second-client-leak.toml",
];

/// Where the full matrix is kept: a plain file, not an insta snapshot, so
/// that CI (which does not play it) can still read it.
const MATRIX: &str = "snapshots/matrix/live-full-matrix.txt";

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

/// Why the adapters cannot run here, if some cannot (then the tests that
/// play them are ignored, with this reason; with `CI=true` they fail).
fn missing() -> Option<String> {
    let why: Vec<String> = ADAPTERS
        .iter()
        .filter_map(|a| fails(a.probe.0, a.probe.1).map(|w| format!("{}: {w} (install: {})", a.name, a.probe.2)))
        .collect();
    (!why.is_empty()).then(|| format!("the SDK adapters cannot run: {}", why.join("; ")))
}

fn main() {
    let missing = missing();
    let deploy_missing = missing.clone().or_else(common::live::deployment_parts_missing);
    run(vec![
        Case::new(
            "the_sdk_adapters_behind_haproxy_with_redis_meet_expect_on_every_replica_scenario",
            the_sdk_adapters_behind_haproxy_with_redis_meet_expect_on_every_replica_scenario,
        )
        .needs(&deploy_missing),
        Case::new(
            "every_adapter_and_configuration_meets_expect_on_the_canonical_scenarios",
            every_adapter_and_configuration_meets_expect_on_the_canonical_scenarios,
        )
        .needs(&missing),
        Case::new(
            "a_store_shared_by_every_session_leaks_to_another_user_and_confidentiality_sees_it",
            a_store_shared_by_every_session_leaks_to_another_user_and_confidentiality_sees_it,
        )
        .needs(&missing),
        Case::new("the_readme_findings_tables_are_the_expectations", the_readme_findings_tables_are_the_expectations),
        Case::new("the_readmes_adapter_commands_give_their_cells", the_readmes_adapter_commands_give_their_cells)
            .needs(&missing),
        Case::new("full_live_matrix", full_live_matrix)
            .needs(&missing)
            .ignored("about an hour: MCPSIM_UPDATE_MATRIX=1 cargo test --test live_sdk -- --ignored full_live_matrix"),
        Case::new("the_committed_full_matrix_is_the_expectations", the_committed_full_matrix_is_the_expectations),
        Case::new("an_adapter_without_its_control_connection_exits", an_adapter_without_its_control_connection_exits)
            .needs(&missing),
    ])
}

/// The scenario files of `dialect`'s directory, sorted, relative to `scenarios/`.
fn scenarios_of(dialect: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join("scenarios").join(dialect))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".toml"))
        .map(|f| format!("{dialect}/{f}"))
        // A live run plays one server process: deployments of replicas are simulated only.
        .filter(|f| plan(f).deployment.is_single())
        .collect();
    files.sort();
    files
}

/// One cell of the matrix: a scenario, an adapter in a configuration.
#[derive(Clone)]
struct Cell {
    file: String,
    name: String,
    command: &'static str,
    config: AdapterConfig,
}

/// Every (scenario, adapter, configuration) whose scenario is among `files`
/// and of a dialect the adapter speaks.
fn cells(files: &[String]) -> Vec<Cell> {
    let mut out = Vec::new();
    for file in files {
        for a in &ADAPTERS {
            if !a.dialects.iter().any(|d| file.starts_with(&format!("{d}/"))) {
                continue;
            }
            for (suffix, config) in CONFIGS {
                out.push(Cell { file: file.clone(), name: format!("{}{suffix}", a.name), command: a.command, config });
            }
        }
    }
    out
}

/// Plays every cell `times` times; returns each cell's runs and the problems:
/// a run whose adapter named itself otherwise, or whose verdicts are not
/// the cell's `[expect]`.
fn play(cells: &[Cell], times: usize) -> (Vec<Vec<LiveVerdict>>, Vec<String>) {
    // A replica restart holds new connections until the process is back
    // (a simulated restart takes no time), but not the client's own
    // timeouts: at the usual scale a FastMCP start of 5 s on a loaded CI
    // machine was 50 s of scenario time, past alice's 30 s wait for her
    // retry's answer (she re-issued it, and it ran twice). Those cells run
    // at the real time scale, where any start within 30 s is in time.
    let restarts = |c: &Cell| plan(&c.file).steps.iter().any(|s| s.action.name() == "restart-replica");
    let slow: Vec<Cell> = cells.iter().filter(|c| restarts(c)).cloned().collect();
    let quick: Vec<Cell> = cells.iter().filter(|c| !restarts(c)).cloned().collect();
    let jobs = |cells: &[Cell]| -> Vec<_> {
        cells.iter().map(|c| (c.file.clone(), c.command.to_string(), c.config)).collect()
    };
    let mut quick_runs = if quick.is_empty() { Vec::new() } else { live_runs_with(&jobs(&quick), times) }.into_iter();
    let mut slow_runs =
        if slow.is_empty() { Vec::new() } else { live_runs_scaled(&jobs(&slow), times, 1.0) }.into_iter();
    let results: Vec<Vec<LiveVerdict>> = cells
        .iter()
        .map(|c| if restarts(c) { slow_runs.next() } else { quick_runs.next() }.expect("a run per cell"))
        .collect();
    let mut problems = Vec::new();
    for (c, runs) in cells.iter().zip(&results) {
        let Some(expected) = plan(&c.file).expect.get(&c.name).cloned() else {
            problems.push(format!("{}: no [expect] entry for {}", c.file, c.name));
            continue;
        };
        for (i, r) in runs.iter().enumerate() {
            if r.server != c.name {
                problems.push(format!("{} on {}: the adapter named itself {:?}", c.file, c.name, r.server));
            }
            let mut got = r.violated.clone();
            got.sort();
            let mut want = expected.clone();
            want.sort();
            if got != want {
                problems.push(format!(
                    "{} on {}, run {}: expected {want:?}, violated {got:?}\n{}",
                    c.file,
                    c.name,
                    i + 1,
                    r.report
                ));
            }
        }
    }
    (results, problems)
}

/// What the findings (docs/findings.md) say of runs beyond their verdicts: (scenario,
/// server, words of the report, or of the trace for `trace:`).
const CLAIMS: &[(&str, &str, &str)] = &[
    ("clean-resume", "typescript-sdk", "notification(s) emitted on alice's session at"),
    ("clean-resume", "typescript-sdk", "never reached it"),
    ("nat-rebind", "typescript-sdk", "never delivered to alice; timed out at"),
    ("nat-rebind", "typescript-sdk", "skipped 1 event(s) the stream had carried after it"),
    ("evicted-id", "typescript-sdk", "trace:\"status\":409"),
    // The owner answers its request over POST though the thief ended its stream.
    ("call-stream-takeover", "typescript-sdk", "call-1 answered"),
    ("nat-rebind", "python-sdk", "written to alice's dropped uplink (mapping 3)"),
    ("nat-rebind", "python-sdk", "delivered to alice elsewhere; answered at"),
    ("answered-window", "python-sdk", "alice was handed req-42 (sampling/createMessage, event"),
    ("theft-without-credential", "python-sdk", "mallory (principal mallory) received 5 message(s) of alice's session"),
    ("foreign-delete", "typescript-sdk", "only the session's owner may end it"),
    ("foreign-delete", "python-sdk", "only the session's owner may end it"),
    ("future-id", "typescript-sdk", "no event of the session ever carried that id"),
    ("future-id", "python-sdk", "an id the session never minted, was answered 200 and its stream ended with no event"),
    // Not re-issued, but the client's answer over POST completes it.
    ("call-stream-reset", "typescript-sdk", "call-1 answered"),
    ("call-stream-reset", "python-sdk", "call-1 answered"),
    ("standalone-sever", "typescript-sdk", "refused every reconnection of hers, HTTP 409"),
    ("standalone-sever", "typescript-sdk", "a lock-out, not an excuse"),
    ("standalone-sever", "typescript-sdk", "ended: HTTP 409"),
    ("standalone-sever", "typescript-sdk", "req-1 timed out"),
    ("standalone-sever", "python-sdk", "refused every reconnection of hers, HTTP 409"),
    ("standalone-sever", "python-sdk", "a lock-out, not an excuse"),
    ("standalone-sever", "python-sdk", "ended: HTTP 409"),
    ("standalone-sever", "python-sdk", "req-1 timed out"),
];

/// The claims about the cells played whose every run does not bear them out.
fn claims_unmet(cells: &[Cell], results: &[Vec<LiveVerdict>]) -> Vec<String> {
    let mut problems = Vec::new();
    for (scenario, server, words) in CLAIMS {
        let file = format!("streamable-http/{scenario}.toml");
        let Some(k) = cells.iter().position(|c| c.file == file && c.name == *server) else { continue };
        for (i, r) in results[k].iter().enumerate() {
            let (text, words) = match words.strip_prefix("trace:") {
                Some(w) => (&r.trace, w),
                None => (&r.report, *words),
            };
            if !text.contains(words) {
                problems.push(format!(
                    "{file} on {server}, run {}: docs/findings.md says {words:?}; the run does not",
                    i + 1
                ));
            }
        }
    }
    problems
}

/// The matrix as text: one line per scenario and adapter configuration.
fn matrix_lines(cells: &[Cell], results: &[Vec<LiveVerdict>]) -> String {
    let mut out = String::new();
    for (c, runs) in cells.iter().zip(results) {
        let mut v = runs[0].violated.clone();
        v.sort();
        let v = if v.is_empty() { "-".to_string() } else { v.join(",") };
        out.push_str(&format!("{:<46} {:<30} {v}\n", c.file, c.name));
    }
    out
}

/// The committed full matrix's lines (its `#` header left out).
fn committed_matrix() -> Option<String> {
    let text = std::fs::read_to_string(root().join(MATRIX)).ok()?;
    Some(text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect())
}

fn every_adapter_and_configuration_meets_expect_on_the_canonical_scenarios() {
    let files: Vec<String> = CANONICAL.iter().map(|f| f.to_string()).collect();
    let cells = cells(&files);
    let (results, mut problems) = play(&cells, 1);
    problems.extend(claims_unmet(&cells, &results));
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// The SDK adapters deployed as replicas behind HAProxy (docs/replicas.md):
/// every bundled scenario with a `[deployment]`, in each dialect the
/// adapter speaks, meets the `[expect]` of the name the adapter gives
/// itself: `<adapter>` with a store per replica, `<adapter>-redis` with a
/// shared store, where the adapter keeps its events (and, stateless, its
/// single-use registry) in the run's Redis. The deployment
/// findings (docs/findings.md) are these entries (the_readme_findings_tables_are_the_expectations).
fn the_sdk_adapters_behind_haproxy_with_redis_meet_expect_on_every_replica_scenario() {
    let mut cells = Vec::new();
    for file in &deployment_scenarios() {
        let p = plan(file);
        let shared = p.deployment.store.name() == "shared";
        for a in [&PYTHON, &TYPESCRIPT_V2, &FASTMCP] {
            if a.dialects.contains(&p.dialect.name()) {
                let name = format!("{}{}", a.name, if shared { "-redis" } else { "" });
                cells.push(Cell { file: file.clone(), name, command: a.command, config: AdapterConfig::default() });
            }
        }
    }
    assert!(cells.len() >= 25, "{} cells", cells.len());
    let (results, mut problems) = play(&cells, 1);
    // Where the balancer takes the replicas in turn, HAProxy sends each
    // connection where the simulated balancer sends guarded's: the run
    // tests what the scenario describes (a retry reaches the replica that
    // restarted, once it is back).
    for (c, runs) in cells.iter().zip(&results) {
        let p = plan(&c.file);
        if p.deployment.routing.name() != "round-robin" {
            continue;
        }
        let simulated = routed_in_order(&mcpsim::run(&p, "guarded", None).unwrap().trace.to_jsonl());
        for r in runs {
            let live = routed_in_order(&r.trace);
            if live != simulated {
                problems.push(format!(
                    "{} on {}: HAProxy sent the connections to replicas {live:?}, the simulation to {simulated:?}\n{}",
                    c.file, c.name, r.report
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// `confidentiality` sees a leak without a theft: an event store that serves
/// every session and files each session's standalone stream under one stream
/// id (the TypeScript SDK v2's examples, the Python SDK's example) replays
/// alice's notifications to bob when he resumes his own session. It fires
/// on typescript-v2 and stays quiet on FastMCP, whose store is scoped to
/// each session (and on every built-in server: tests/checks.rs).
fn a_store_shared_by_every_session_leaks_to_another_user_and_confidentiality_sees_it() {
    let file = "streamable-http/two-sessions.toml".to_string();
    let jobs = [
        (file.clone(), TYPESCRIPT_V2.command.to_string(), AdapterConfig::default()),
        (file.clone(), FASTMCP.command.to_string(), AdapterConfig::default()),
    ];
    // Bob's stream must open before his notifications at 3 s: at the
    // default 0.1 a loaded machine's client opened it after them (bob then
    // resumed with no id, and nothing was replayed to leak).
    let runs = live_runs_scaled(&jobs, 1, 0.5);
    let (v2, fastmcp) = (&runs[0][0], &runs[1][0]);
    assert_eq!(v2.violated, ["confidentiality"], "{}", v2.report);
    assert!(v2.report.contains("bob (principal bob) received 2 message(s) of alice's session"), "{}", v2.report);
    assert!(fastmcp.violated.is_empty(), "{}", fastmcp.report);
}

/// The findings tables (docs/findings.md, which the README's table links)
/// are the scenarios' `[expect]`, cell for cell, and list every scenario
/// where some configuration of the adapter violates a check: what the docs
/// tell a user is what CI holds the adapters to.
fn the_readme_findings_tables_are_the_expectations() {
    let findings = std::fs::read_to_string(root().join("docs/findings.md")).unwrap();
    let mut lines = findings.lines().peekable();
    let mut tables = 0;
    while let Some(line) = lines.next() {
        let Some(header) = line.strip_prefix("| scenario | `") else { continue };
        let names: Vec<&str> = header.trim_end_matches(" |").split(" | ").map(|n| n.trim_matches('`')).collect();
        lines.next(); // |---|
        let mut listed = Vec::new();
        let mut dialect = String::new();
        while let Some(row) = lines.next_if(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            let file = format!("{}.toml", cells[0]);
            dialect = cells[0].split('/').next().unwrap().to_string();
            let expect = plan(&file).expect;
            for (name, cell) in names.iter().zip(&cells[1..]) {
                let want =
                    expect.get(*name).unwrap_or_else(|| panic!("docs/findings.md: {file} has no [expect] for {name}"));
                let mut got: Vec<String> =
                    if *cell == "-" { Vec::new() } else { cell.split(", ").map(String::from).collect() };
                let mut want = want.clone();
                got.sort();
                want.sort();
                assert_eq!(got, want, "docs/findings.md's table: {file} on {name}");
            }
            listed.push(file);
        }
        // A table of deployments lists every deployment scenario of its
        // directory that has an `[expect]` for each of its names and where
        // one of them violates.
        let deployed = listed.iter().all(|f| !plan(f).deployment.is_single());
        let candidates = if deployed {
            deployment_scenarios().into_iter().filter(|f| f.starts_with(&format!("{dialect}/"))).collect()
        } else {
            scenarios_of(&dialect)
        };
        for file in candidates {
            let expect = plan(&file).expect;
            if deployed && !names.iter().all(|n| expect.contains_key(*n)) {
                continue;
            }
            let violates = names.iter().any(|n| expect.get(*n).is_some_and(|v| !v.is_empty()));
            assert!(!violates || listed.contains(&file), "docs/findings.md's table for {names:?} leaves out {file}");
        }
        tables += 1;
    }
    assert!(tables >= 4, "docs/findings.md has {tables} findings tables");
}

fn full_live_matrix() {
    const RUNS: usize = 5;
    let all: Vec<String> = ["streamable-http", "stateless-http"].iter().flat_map(|d| scenarios_of(d)).collect();
    // MCPSIM_MATRIX_ONLY=a,b re-records only those scenarios' rows (a
    // scenario added or changed); the others stay as committed.
    let only: Option<Vec<String>> =
        std::env::var("MCPSIM_MATRIX_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let stem = |f: &str| f.rsplit('/').next().unwrap_or(f).trim_end_matches(".toml").to_string();
    let files: Vec<String> =
        all.iter().filter(|f| only.as_ref().is_none_or(|o| o.contains(&stem(f)))).cloned().collect();
    assert!(!files.is_empty(), "MCPSIM_MATRIX_ONLY names no scenario");
    let cells = cells(&files);
    let (results, mut problems) = play(&cells, RUNS);
    problems.extend(claims_unmet(&cells, &results));
    // Five runs, one verdict set.
    for (c, runs) in cells.iter().zip(&results) {
        let sets: std::collections::BTreeSet<Vec<String>> = runs
            .iter()
            .map(|r| {
                let mut v = r.violated.clone();
                v.sort();
                v
            })
            .collect();
        if sets.len() > 1 {
            problems.push(format!("{} on {}: unstable over {RUNS} runs: {sets:?}", c.file, c.name));
        }
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
    let fresh = matrix_lines(&cells, &results);
    let date = Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let (header, lines) = match &only {
        None => {
            let machine = std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|c| {
                    c.lines()
                        .find(|l| l.starts_with("model name"))
                        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
                })
                .unwrap_or_else(|| "unknown CPU".into());
            let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
            let header = format!(
                "# The full live matrix: every scenario of every adapter and configuration, {RUNS} runs each, one verdict set\n\
                 # per cell (stable over the {RUNS}). Recorded {date} on {machine}, {cores} cores, time scale {SCALE}, with\n\
                 # MCPSIM_UPDATE_MATRIX=1 cargo test --test live_sdk -- --ignored full_live_matrix\n"
            );
            (header, fresh)
        }
        Some(o) => {
            // The committed rows, with the re-recorded scenarios' rows
            // replaced, in the order of the full matrix.
            let text = std::fs::read_to_string(root().join(MATRIX)).expect("a committed matrix to update");
            let mut header: String = text.lines().filter(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
            header.push_str(&format!(
                "# {} re-recorded {date} ({RUNS} runs each) with MCPSIM_MATRIX_ONLY={}\n",
                o.join(", "),
                o.join(",")
            ));
            let row = |l: &str| {
                let mut w = l.split_whitespace();
                (w.next().unwrap_or("").to_string(), w.next().unwrap_or("").to_string())
            };
            let mut rows: std::collections::BTreeMap<(String, String), String> = std::collections::BTreeMap::new();
            for l in committed_matrix().unwrap_or_default().lines().chain(fresh.lines()) {
                rows.insert(row(l), format!("{l}\n"));
            }
            let order = self::cells(&all);
            let lines = order.iter().filter_map(|c| rows.remove(&(c.file.clone(), c.name.clone()))).collect();
            (header, lines)
        }
    };
    if std::env::var("MCPSIM_UPDATE_MATRIX").is_ok_and(|v| v == "1") {
        std::fs::write(root().join(MATRIX), format!("{header}{lines}")).unwrap();
    } else {
        assert_eq!(
            committed_matrix().as_deref(),
            Some(lines.as_str()),
            "{MATRIX} differs: MCPSIM_UPDATE_MATRIX=1 writes it"
        );
    }
}

/// The committed full matrix is the `[expect]` entries: every cell of every
/// scenario, adapter and configuration, with the verdicts it expects. A
/// changed expectation without a re-recorded matrix fails here (without
/// any adapter installed: this test only reads files).
fn the_committed_full_matrix_is_the_expectations() {
    let all: Vec<String> = ["streamable-http", "stateless-http"].iter().flat_map(|d| scenarios_of(d)).collect();
    let Some(committed) = committed_matrix() else { panic!("{MATRIX} is missing: MCPSIM_UPDATE_MATRIX=1 writes it") };
    let mut want = String::new();
    for c in cells(&all) {
        let mut v = plan(&c.file).expect.get(&c.name).cloned().unwrap_or_else(|| vec!["<no [expect] entry>".into()]);
        v.sort();
        let v = if v.is_empty() { "-".to_string() } else { v.join(",") };
        want.push_str(&format!("{:<46} {:<30} {v}\n", c.file, c.name));
    }
    let diff: Vec<String> = committed
        .lines()
        .zip(want.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  matrix: {a}\n  expect: {b}"))
        .collect();
    assert!(
        diff.is_empty() && committed.lines().count() == want.lines().count(),
        "{MATRIX} and [expect] differ ({} vs {} rows; re-record with MCPSIM_MATRIX_ONLY=<scenario>):\n{}",
        committed.lines().count(),
        want.lines().count(),
        diff.join("\n")
    );
}

/// An adapter whose control port cannot be reached (mcpsim is gone: a test
/// process that exited while it started, say) exits instead of serving
/// forever. Three Python servers once outlived a failed test by an hour.
fn an_adapter_without_its_control_connection_exits() {
    // A port nothing listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for sdk in ADAPTERS {
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

/// The findings' "Reproduce any cell with" commands (docs/findings.md), run
/// as written (with `sh`, from the repository's root): each meets
/// `[expect]` for the name its adapter and configuration give it, so it
/// exits 0 and says so.
fn the_readmes_adapter_commands_give_their_cells() {
    let findings = std::fs::read_to_string(root().join("docs/findings.md")).unwrap();
    let at = findings
        .find("```sh\nmcpsim run --live 'node adapters/typescript/server.mjs'")
        .expect("docs/findings.md's block");
    let body = &findings[at + "```sh\n".len()..];
    let commands: Vec<&str> = body[..body.find("```").unwrap()].lines().collect();
    assert!(commands.len() >= 2, "{commands:?}");
    let handles: Vec<_> = commands
        .iter()
        .map(|c| {
            let command = c.replacen("mcpsim ", &format!("'{}' ", env!("CARGO_BIN_EXE_mcpsim")), 1);
            let (c, root) = (c.to_string(), root());
            std::thread::spawn(move || {
                let out = Command::new("sh").arg("-c").arg(&command).current_dir(root).output().unwrap();
                (c, out)
            })
        })
        .collect();
    for h in handles {
        let (c, out) = h.join().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{c}\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("expectation met"), "{c}\n{stdout}");
    }
}
