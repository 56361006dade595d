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
    /// With no FILE, runs every bundled scenario (scenarios/*.toml) against
    /// every built-in server.
    Run {
        /// Scenario files (TOML). Directories are searched for *.toml.
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
        /// Print only one line per run.
        #[arg(long, short)]
        quiet: bool,
    },
    /// List the built-in servers.
    Servers,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { files, servers, seed, trace, quiet } => run(files, servers, seed.map(Seed), trace, quiet),
        Command::Servers => {
            for (name, about) in mcpsim::server::describe_servers() {
                println!("{name:<18} {about}");
            }
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
            let mut found: Vec<PathBuf> = std::fs::read_dir(&f)
                .map_err(|e| Error::io(format!("{}: cannot read directory: {e}", f.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(Error::usage(format!("{}: no *.toml scenario files here", f.display())));
            }
            out.extend(found);
        } else if !f.exists() {
            return Err(Error::usage(format!("{}: no such file", f.display())));
        } else {
            out.push(f);
        }
    }
    Ok(out)
}

fn run(
    files: Vec<PathBuf>,
    servers: Vec<String>,
    seed: Option<Seed>,
    trace: Option<PathBuf>,
    quiet: bool,
) -> Result<u8, Error> {
    let files = collect(if files.is_empty() { vec![bundled_dir()] } else { files })?;
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
    for plan in &plans {
        for server in &servers {
            let run = match mcpsim::world::run(plan, server, seed) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {} on {server}: {e}", plan.name);
                    code = code.max(e.exit_code() as u8);
                    continue;
                }
            };
            let verdicts = mcpsim::check::judge(&run.trace);
            let expectation = mcpsim::check::expectation(plan, server, &verdicts);
            if quiet {
                let violated = mcpsim::check::violated(&verdicts);
                let violated = if violated.is_empty() {
                    "no violation".to_string()
                } else {
                    format!("violated: {}", violated.join(", "))
                };
                let expect = match &expectation {
                    Some(e) if e.met => " · as expected".to_string(),
                    Some(e) => format!(" · {}", mcpsim::report::expectation_line(server, e)),
                    None => String::new(),
                };
                println!("{} · {} · seed {} · {violated}{expect}", run.scenario, run.server, run.seed);
                if expectation.as_ref().is_some_and(|e| !e.met) {
                    println!("  repro: {}", run.repro());
                }
            } else {
                println!("{}", mcpsim::report::text(&run, &verdicts, expectation.as_ref()));
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
        }
    }
    if !failed.is_empty() {
        eprintln!("{} run(s) did not meet their expectation: {}", failed.len(), failed.join(", "));
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
    std::fs::write(path, text).map_err(|e| Error::io(format!("{}: cannot write trace: {e}", path.display())))
}
