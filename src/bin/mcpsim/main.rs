//! The `mcpsim` command line: a thin layer over the library.
//!
//! Exit codes: 0 every run completed, 1 a check failed or an expectation was
//! not met (reserved for the checks), 2 usage, 3 invalid scenario, 4 I/O or
//! internal error.

use clap::{Parser, Subcommand};
use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mcpsim",
    version,
    about = "Deterministic simulation and fault injection for MCP servers that resume SSE streams with Last-Event-ID"
)]
#[command(
    after_help = "Exit codes: 0 ok, 1 check failed / expectation not met, 2 usage, 3 invalid scenario, 4 I/O or internal error"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenarios against servers and print what happened.
    ///
    /// With no FILE, runs every bundled scenario (scenarios/, regressions/ included) against
    /// every built-in server.
    Run {
        /// Scenario files (TOML). Directories are searched for *.toml, recursively.
        files: Vec<PathBuf>,
        /// Server to run against; repeat for several. Default: every built-in server.
        #[arg(long = "server", value_name = "NAME")]
        servers: Vec<String>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Write the JSONL trace: to FILE for one run, or into the directory
        /// FILE as <scenario>.<server>.jsonl for several.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Write an HTML timeline: to FILE for one run, or into the directory
        /// FILE as <scenario>.<server>.html for several.
        #[arg(long, value_name = "FILE")]
        timeline: Option<PathBuf>,
        /// Print only one line per run (text format).
        #[arg(long, short)]
        quiet: bool,
        /// Output: the text report (coloured on a terminal unless NO_COLOR is set),
        /// JSON (schema mcpsim.run-report/1) or JUnit XML.
        #[arg(long, value_enum, default_value = "text")]
        format: RunFormat,
    },
    /// List the built-in servers, the checks, or the bundled scenarios.
    List {
        #[arg(value_enum)]
        what: ListWhat,
    },
    /// Explain a check: what it means, its evidence, the condition it encodes, how to pass.
    Explain {
        /// A check id (see `mcpsim list checks`).
        check: String,
    },
    /// Print the JSON Schema of scenario files (for taplo / Even Better TOML).
    Schema,
    /// Validate scenario files (TOML) without running them; not the checks that judge runs (alias: validate).
    #[command(visible_alias = "validate")]
    Check {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Hunt for bugs: run generated scenarios seed after seed, shrink each finding.
    ///
    /// Findings and the final summary go to stdout; the progress bar and the
    /// header to stderr.
    #[command(
        args_conflicts_with_subcommands = true,
        override_usage = "mcpsim hunt --server <NAME> [OPTIONS]\n       mcpsim hunt merge <FILES>..."
    )]
    Hunt {
        #[command(subcommand)]
        merge: Option<HuntCommand>,
        #[command(flatten)]
        args: HuntArgs,
    },
    /// Re-run one generated seed of a hunt and print its report.
    Replay {
        /// The server the hunt ran against (see `mcpsim list servers`).
        #[arg(long, value_name = "NAME")]
        server: String,
        /// The seed of the finding, as the hunt printed it (its repro line).
        #[arg(long)]
        seed: u64,
        /// Write the JSONL trace to FILE.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Write an HTML timeline of the run to FILE.
        #[arg(long, value_name = "FILE")]
        timeline: Option<PathBuf>,
        /// The dialect the hunt used (default: the server's).
        #[arg(long, value_enum)]
        dialect: Option<DialectArg>,
        /// Write the seed's generated plan to FILE as a scenario, unshrunk
        /// (`mcpsim run FILE` then runs it; add an [expect] to keep it).
        #[arg(long, value_name = "FILE")]
        scenario: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RunFormat {
    Text,
    Json,
    Junit,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ListWhat {
    Servers,
    Checks,
    Scenarios,
}

#[derive(Subcommand)]
enum HuntCommand {
    /// Merge the `--format json` results of several shards into one.
    Merge {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(clap::Args)]
struct HuntArgs {
    /// The server to hunt (required; see `mcpsim list servers`).
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// How many seeds to run (default 1000 unless --time is given).
    #[arg(long, conflicts_with = "time")]
    seeds: Option<u64>,
    /// Run for this long instead (e.g. 60s, 5m).
    #[arg(long, value_parser = parse_duration_arg)]
    time: Option<std::time::Duration>,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run the K-th of N disjoint slices of the seed space (for CI matrices).
    /// --seeds counts the seeds of this shard: `--seeds 200 --shard 1/4` runs
    /// 200 seeds here, 800 over the four shards.
    #[arg(long, value_name = "K/N", value_parser = parse_shard, default_value = "1/1")]
    shard: (u64, u64),
    /// The first seed (default: drawn from the clock and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Where shrunk regression scenarios are written. The default is outside
    /// `scenarios/` on purpose: read a finding, then promote it by moving it
    /// into `scenarios/regressions/`, which `mcpsim run` runs.
    #[arg(long, value_name = "DIR", default_value = "mcpsim-findings")]
    out: PathBuf,
    /// Report findings without shrinking them.
    #[arg(long)]
    no_shrink: bool,
    /// Run each seed twice and compare the traces.
    #[arg(long)]
    check_determinism: bool,
    /// Output: human text, or the JSON report (merge it with `mcpsim hunt merge`).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The dialect of the generated scenarios (default: the server's; legacy-sse
    /// for the reference engine, streamable-http for rmcp).
    #[arg(long, value_enum)]
    dialect: Option<DialectArg>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DialectArg {
    LegacySse,
    StreamableHttp,
}

impl DialectArg {
    fn resolve(arg: Option<DialectArg>, server: &str) -> mcpsim::scenario::Dialect {
        match arg {
            None => mcpsim::hunt::default_dialect(server),
            Some(DialectArg::LegacySse) => mcpsim::scenario::Dialect::LegacySse,
            Some(DialectArg::StreamableHttp) => mcpsim::scenario::Dialect::StreamableHttp,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

fn parse_duration_arg(s: &str) -> Result<std::time::Duration, String> {
    mcpsim::scenario::parse_duration(s)
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, n) = s.split_once('/').ok_or_else(|| format!("{s:?}: expected K/N, like 2/4"))?;
    let k: u64 = k.parse().map_err(|_| format!("{s:?}: K is not a number"))?;
    let n: u64 = n.parse().map_err(|_| format!("{s:?}: N is not a number"))?;
    if k == 0 || n == 0 || k > n {
        return Err(format!("{s:?}: expected 1 <= K <= N"));
    }
    Ok((k, n))
}

/// `println!` that ends quietly when stdout is closed (`mcpsim ... | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        if let Err(e) = writeln!(std::io::stdout(), $($t)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { files, servers, seed, trace, timeline, quiet, format } => {
            run(files, servers, seed.map(Seed), trace, timeline, quiet, format)
        }
        Command::Hunt { merge: Some(HuntCommand::Merge { files }), .. } => merge(files),
        Command::Hunt { merge: None, args } => hunt(args),
        Command::Replay { server, seed, trace, timeline, dialect, scenario } => {
            let dialect = DialectArg::resolve(dialect, &server);
            replay(server, seed, dialect, trace, timeline, scenario)
        }
        Command::List { what } => list(what),
        Command::Explain { check } => explain(&check),
        Command::Check { paths } => check_files(paths),
        Command::Schema => {
            out!("{}", mcpsim::scenario::json_schema());
            Ok(0)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// Where the bundled scenarios are: `./scenarios`, else the source tree's.
fn bundled_dir() -> PathBuf {
    let local = PathBuf::from("scenarios");
    if local.is_dir() {
        local
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }
}

fn collect(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for f in files {
        if f.is_dir() {
            let mut found = Vec::new();
            find_toml(&f, &mut found)?;
            if found.is_empty() {
                return Err(Error::usage(format!("{}: no *.toml scenario files here", f.display())));
            }
            found.sort();
            out.extend(found);
        } else if !f.exists() {
            return Err(Error::usage(format!("{}: no such file", f.display())));
        } else {
            out.push(f);
        }
    }
    Ok(out)
}

/// Scenario files under `dir`, its subdirectories (`regressions/`) included.
fn find_toml(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("{}: cannot read directory: {e}", dir.display())))?;
    for entry in entries.filter_map(|e| e.ok()) {
        let p = entry.path();
        if p.is_dir() {
            find_toml(&p, found)?;
        } else if p.extension().is_some_and(|x| x == "toml") {
            found.push(p);
        }
    }
    Ok(())
}

fn run(
    files: Vec<PathBuf>,
    servers: Vec<String>,
    seed: Option<Seed>,
    trace: Option<PathBuf>,
    timeline: Option<PathBuf>,
    quiet: bool,
    format: RunFormat,
) -> Result<u8, Error> {
    use std::io::IsTerminal;
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let bundled = files.is_empty();
    let files = collect(if bundled { vec![bundled_dir()] } else { files })?;
    let explicit = !servers.is_empty();
    let servers = if servers.is_empty() {
        mcpsim::server::known_servers().iter().map(|s| s.to_string()).collect()
    } else {
        servers
    };
    for s in &servers {
        if !mcpsim::server::is_known_server(s) {
            return Err(Error::usage(format!(
                "unknown server {s:?} (known: {})",
                mcpsim::server::known_servers().join(", ")
            )));
        }
    }
    // Validate everything before running anything.
    let mut plans = Vec::new();
    let mut invalid = Vec::new();
    for f in &files {
        match Plan::load(f) {
            Ok(p) => plans.push(p),
            Err(e) => invalid.push(e),
        }
    }
    if let Some(first) = invalid.first() {
        for e in &invalid {
            eprintln!("error: {e}");
        }
        let kind = first.kind;
        let n = invalid.len();
        return Err(Error::new(kind, format!("{n} scenario file(s) invalid; nothing was run")));
    }

    let total = plans.len() * servers.len();
    let mut code = 0u8;
    let mut io_errors = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut judged = Vec::new();
    // (as expected, not met, without expectation)
    let mut counts = (0usize, 0usize, 0usize);
    // Runs skipped because the server does not speak the scenario's dialect, per server.
    let mut skipped: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for plan in &plans {
        for server in &servers {
            // A server that speaks only streamable-http skips legacy-sse scenarios,
            // unless both were asked for by name (then the run explains the mismatch).
            if (!explicit || bundled)
                && mcpsim::server::streamable_only(server)
                && plan.dialect != mcpsim::scenario::Dialect::StreamableHttp
            {
                *skipped.entry(server.as_str()).or_default() += 1;
                continue;
            }
            // Wall clock only for JUnit's `time` (CI reads it as wall time); never in a trace.
            let started = std::time::Instant::now();
            let run = match mcpsim::run(plan, server, seed) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {} on {server}: {e}", plan.name);
                    code = code.max(e.exit_code() as u8);
                    continue;
                }
            };
            let verdicts = mcpsim::check::judge(&run.trace);
            let expectation = mcpsim::check::expectation(plan, server, &verdicts);
            match &expectation {
                Some(e) if e.met => counts.0 += 1,
                Some(_) => counts.1 += 1,
                None => counts.2 += 1,
            }
            let mut timeline_note = String::new();
            if let Some(t) = &timeline {
                let path = if total == 1 { t.clone() } else { t.join(format!("{}.{}.html", run.scenario, run.server)) };
                match write_trace(&path, &mcpsim::report::timeline_html(&run, &verdicts)) {
                    Ok(()) => timeline_note = format!("timeline: {}", path.display()),
                    Err(e) => io_errors.push(e),
                }
            }
            if format != RunFormat::Text {
                // Printed together at the end.
            } else if quiet {
                let violated = mcpsim::check::violated(&verdicts);
                let violated = if violated.is_empty() {
                    "no violation".to_string()
                } else {
                    format!("violated: {}", violated.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", "))
                };
                let expect = match &expectation {
                    Some(e) if e.met => " · as expected".to_string(),
                    Some(e) => format!(" · {}", mcpsim::report::expectation_line(server, e)),
                    None => " · no [expect] entry".to_string(),
                };
                out!("{} · {} · seed {} · {violated}{expect}", run.scenario, run.server, run.seed);
                if expectation.as_ref().is_some_and(|e| !e.met) {
                    out!("  repro: {}", run.repro());
                }
            } else {
                let mut text = mcpsim::report::text(&run, &verdicts, expectation.as_ref());
                if expectation.is_none() {
                    text.push_str(&format!("no [expect] entry for {server}: nothing to compare the verdicts with\n"));
                }
                if !timeline_note.is_empty() {
                    text.push_str(&timeline_note);
                    text.push('\n');
                }
                out!("{}", if color { mcpsim::report::colorize(&text) } else { text });
            }
            if expectation.as_ref().is_some_and(|e| !e.met) {
                failed.push(format!("{} on {server}", run.scenario));
                code = code.max(1);
            }
            if let Some(why) = &run.aborted {
                eprintln!("error: {} on {server} stopped early (seed {}): {why}", run.scenario, run.seed);
                code = code.max(4);
            }
            if let Some(t) = &trace {
                let path =
                    if total == 1 { t.clone() } else { t.join(format!("{}.{}.jsonl", run.scenario, run.server)) };
                if let Err(e) = write_trace(&path, &run.trace.to_jsonl()) {
                    io_errors.push(e);
                }
            }
            if format != RunFormat::Text {
                judged.push((run, verdicts, expectation, started.elapsed()));
            }
        }
    }
    if format != RunFormat::Text {
        let views: Vec<mcpsim::report::Judged> = judged
            .iter()
            .map(|(run, verdicts, expectation, wall)| mcpsim::report::Judged {
                run,
                verdicts,
                expectation: expectation.as_ref(),
                wall: Some(*wall),
            })
            .collect();
        let text = if format == RunFormat::Json { mcpsim::report::json(&views) } else { mcpsim::report::junit(&views) };
        out!("{text}");
    }
    if !failed.is_empty() {
        eprintln!("{} run(s) did not meet their expectation: {}", failed.len(), failed.join(", "));
    }
    let mut tally = format!(
        "{} run(s): {} as expected, {} not met, {} without expectation",
        counts.0 + counts.1 + counts.2,
        counts.0,
        counts.1,
        counts.2
    );
    for (server, n) in &skipped {
        tally
            .push_str(&format!("; {n} legacy-sse scenario(s) skipped for {server}, which speaks only streamable-http"));
    }
    if format == RunFormat::Text {
        out!("{tally}");
    } else {
        eprintln!("{tally}");
    }
    for e in &io_errors {
        eprintln!("error: {e}");
    }
    if !io_errors.is_empty() {
        code = code.max(4);
    }
    Ok(code)
}

fn write_trace(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("{}: cannot create directory: {e}", dir.display())))?;
        }
    }
    std::fs::write(path, text).map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))
}

fn hunt(a: HuntArgs) -> Result<u8, Error> {
    use mcpsim::hunt::{HuntOptions, Limit, Progress};
    let server = a.server.ok_or_else(|| Error::usage("mcpsim hunt needs --server NAME (see `mcpsim list servers`)"))?;
    if !mcpsim::server::is_known_server(&server) {
        return Err(Error::usage(format!(
            "unknown server {server:?} (known: {})",
            mcpsim::server::known_servers().join(", ")
        )));
    }
    // The base seed is the one input not derived from anything: when the user
    // gives none, draw it from the clock once and print it, so the hunt can be repeated.
    let base_seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 % 1_000_000_000)
    });
    let limit = match (a.seeds, a.time) {
        (_, Some(t)) => Limit::Time(t),
        (Some(n), None) => Limit::Seeds(n),
        (None, None) => Limit::Seeds(1000),
    };
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = HuntOptions {
        server: server.clone(),
        base_seed,
        limit,
        jobs,
        shard: a.shard,
        out: (!a.no_shrink).then_some(a.out),
        check_determinism: a.check_determinism,
        shrink_budget: 300,
        dialect: DialectArg::resolve(a.dialect, &server),
    };
    let text = a.format == Format::Text;
    eprintln!(
        "hunt: server {server}, base seed {base_seed}, shard {}/{}, {jobs} job(s)\nrepeat: {}",
        a.shard.0,
        a.shard.1,
        opts.repeat_command()
    );
    // A bar with an ETA for a seed count; a spinner for a time budget.
    let (bar, template) = match limit {
        Limit::Seeds(n) => (indicatif::ProgressBar::new(n), "{bar:30} {pos}/{len} seeds  {per_sec}  eta {eta}  {msg}"),
        Limit::Time(_) => (indicatif::ProgressBar::new_spinner(), "{spinner} {pos} seeds  {per_sec}  {elapsed}  {msg}"),
    };
    bar.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
    // Wall clock only for the seeds/s line on stderr.
    let started = std::time::Instant::now();
    let report = mcpsim::hunt::hunt(&opts, |p| match p {
        Progress::SeedDone { findings } => {
            bar.inc(1);
            bar.set_message(format!("findings: {findings}"));
        }
        Progress::Finding(f) => {
            let mut lines = format!(
                "finding: seed {} violates {}: {}\n  repro: {}",
                f.seed,
                f.violated.join(", "),
                f.headline,
                f.repro
            );
            if let (Some(path), Some(steps)) = (&f.regression, f.shrunk_steps) {
                lines.push_str(&format!("\n  regression: {path} ({steps} steps): mcpsim run {path}"));
            }
            for r in &f.more_regressions {
                lines.push_str(&format!(
                    "\n  regression for {}: {} ({} steps): mcpsim run {}",
                    r.check, r.file, r.steps, r.file
                ));
            }
            if let Some(nd) = &f.nondeterminism {
                lines.push_str(&format!("\n  nondeterminism: {nd}"));
            }
            // Results on stdout (stderr when stdout carries the JSON report).
            bar.suspend(|| if text { out!("{lines}") } else { eprintln!("{lines}") });
        }
    });
    bar.finish_and_clear();
    let report = report?;
    let wall = started.elapsed().as_secs_f64();
    let mut summary = format!(
        "hunted {} seeds in {wall:.1} s ({:.0} seeds/s): {} finding(s)",
        report.seeds_run,
        report.seeds_run as f64 / wall.max(1e-9),
        report.findings.len()
    );
    if report.seeds_run > 0 {
        summary.push_str("\nreach (seeds that got into each hard situation, read from their traces):");
        for s in mcpsim::hunt::reach::SITUATIONS {
            let n = report.reach.get(s).copied().unwrap_or(0);
            summary.push_str(&format!("\n  {s:<48} {n:>7} ({:.1} %)", 100.0 * n as f64 / report.seeds_run as f64));
        }
    }
    if a.check_determinism {
        let differed = report.findings.iter().filter(|f| f.nondeterminism.is_some()).count();
        summary.push_str(&if differed == 0 {
            format!("\ndeterminism: all {} seeds were run twice and gave byte-identical traces", report.seeds_run)
        } else {
            format!("\ndeterminism: {differed} of {} seeds run twice gave different traces", report.seeds_run)
        });
    }
    let written: usize =
        report.findings.iter().map(|f| usize::from(f.regression.is_some()) + f.more_regressions.len()).sum();
    if written > 0 {
        if let Some(dir) = &opts.out {
            summary.push_str(&format!(
                "\n{written} regression file(s) in {}: read one, then keep it by moving it into scenarios/regressions/ (mcpsim run runs it from there)",
                dir.display()
            ));
        }
    }
    if text {
        out!("{summary}");
    } else {
        eprintln!("{summary}");
    }
    if !text {
        out!("{}", serde_json::to_string_pretty(&report).expect("report serializes"));
    }
    Ok(if report.findings.is_empty() { 0 } else { 1 })
}

fn merge(files: Vec<PathBuf>) -> Result<u8, Error> {
    let mut reports = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| Error::io(format!("{}: cannot read: {e}", f.display())))?;
        let r: mcpsim::hunt::HuntReport = serde_json::from_str(&text)
            .map_err(|e| Error::usage(format!("{}: not a `mcpsim hunt --format json` report: {e}", f.display())))?;
        reports.push(r);
    }
    let merged = mcpsim::hunt::merge(reports)?;
    out!("{}", serde_json::to_string_pretty(&merged).expect("report serializes"));
    Ok(if merged.findings.is_empty() { 0 } else { 1 })
}

fn replay(
    server: String,
    seed: u64,
    dialect: mcpsim::scenario::Dialect,
    trace: Option<PathBuf>,
    timeline: Option<PathBuf>,
    scenario: Option<PathBuf>,
) -> Result<u8, Error> {
    if !mcpsim::server::is_known_server(&server) {
        return Err(Error::usage(format!(
            "unknown server {server:?} (known: {})",
            mcpsim::server::known_servers().join(", ")
        )));
    }
    let plan = mcpsim::hunt::generate_in(seed, dialect);
    let run = mcpsim::run(&plan, &server, None)?;
    let verdicts = mcpsim::check::judge(&run.trace);
    let mut text = mcpsim::report::text(&run, &verdicts, None);
    // A generated plan has no file: its repro is the replay itself.
    let flag = mcpsim::hunt::dialect_flag(&server, dialect);
    text = text.replace(&run.repro(), &format!("mcpsim replay --server {server}{flag} --seed {seed}"));
    if let Some(t) = &timeline {
        write_trace(t, &mcpsim::report::timeline_html(&run, &verdicts))?;
        text.push_str(&format!("timeline: {}\n", t.display()));
    }
    out!("{text}");
    if let Some(t) = trace {
        write_trace(&t, &run.trace.to_jsonl())?;
    }
    if let Some(f) = scenario {
        let flag = mcpsim::hunt::dialect_flag(&server, dialect);
        let header = [format!("The plan of hunt seed {seed}: mcpsim replay --server {server}{flag} --seed {seed}")];
        write_trace(&f, &plan.to_toml(&header))?;
    }
    let finding = verdicts.iter().any(|v| v.violations().iter().any(|x| !x.inherent)) || run.aborted.is_some();
    Ok(if finding { 1 } else { 0 })
}

fn list(what: ListWhat) -> Result<u8, Error> {
    match what {
        ListWhat::Servers => {
            for (name, about) in mcpsim::server::describe_servers() {
                out!("{name:<18} {about}");
            }
        }
        ListWhat::Checks => {
            for c in mcpsim::check::CHECKS {
                out!("{:<24} {}", c.id, c.about);
            }
        }
        ListWhat::Scenarios => {
            let loaded: Vec<_> = collect(vec![bundled_dir()])?.into_iter().map(|p| (Plan::load(&p), p)).collect();
            let width = loaded.iter().filter_map(|(p, _)| p.as_ref().ok()).map(|p| p.name.len()).max().unwrap_or(0);
            for (plan, path) in loaded {
                match plan {
                    Ok(p) => {
                        let dialect = match p.dialect {
                            mcpsim::scenario::Dialect::LegacySse => "legacy-sse",
                            mcpsim::scenario::Dialect::StreamableHttp => "streamable-http",
                        };
                        out!("{:<width$}  {dialect:<15}  {}", p.name, p.description)
                    }
                    Err(e) => out!("{:<width$}  INVALID: {e}", path.display()),
                }
            }
        }
    }
    Ok(0)
}

fn explain(id: &str) -> Result<u8, Error> {
    let Some(c) = mcpsim::check::CHECKS.iter().find(|c| c.id == id) else {
        let ids = mcpsim::check::CheckId::NAMES;
        let hint = mcpsim::error::did_you_mean(id, ids.iter().copied())
            .map_or(String::new(), |s| format!(", did you mean {s:?}?"));
        return Err(Error::usage(format!("unknown check {id:?}{hint} (known: {})", ids.join(", "))));
    };
    let e = &c.explain;
    out!("{}: {}\n\nWhat it means\n  {}\n\nEvidence it uses\n  {}\n\nCondition of the analysis\n  {}\n\nTo pass, a server must\n  {}", c.id, c.about, e.meaning, e.evidence, e.condition, e.to_pass);
    Ok(0)
}

fn check_files(paths: Vec<PathBuf>) -> Result<u8, Error> {
    let files = collect(paths)?;
    let mut invalid = 0;
    for f in &files {
        match Plan::load(f) {
            Ok(p) => out!("ok: {} ({}, {} client(s), {} step(s))", f.display(), p.name, p.clients.len(), p.steps.len()),
            Err(e) => {
                eprintln!("error: {e}");
                invalid += 1;
            }
        }
    }
    if invalid > 0 {
        return Err(Error::new(
            mcpsim::ErrorKind::Scenario,
            format!("{invalid} of {} scenario file(s) invalid", files.len()),
        ));
    }
    Ok(0)
}
