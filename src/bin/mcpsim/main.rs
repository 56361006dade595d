//! The `mcpsim` command line: a thin layer over the library.
//!
//! Exit codes ([`exit`]): 0 every run completed, 1 a check failed or an
//! expectation was not met (reserved for the checks), 2 usage, 3 invalid
//! scenario, 4 I/O or internal error, or a run cut short, 5 a live run whose
//! timing was unreliable (its verdicts not counted). Several together give
//! the first of 3 and 2 (nothing could run), 1 (a real violation, whatever
//! else happened), 4, 5, 0: a CI that retries 4 or 5 never retries a
//! regression into a pass.

use clap::Parser;
use cli::{Cli, Command, DialectArg, HuntCommand};
use mcpsim::seed::Seed;
use std::process::ExitCode;

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

mod cli;
mod cmd;

/// A hunt builds and drops a whole simulated world per seed: mimalloc keeps
/// freed pages for the next one (`cargo bench --bench hunt` measures it).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cmd::hunt::{hunt, merge, replay};
use cmd::info::{check_files, explain, list};
use cmd::run::{run, Output, Target, Verbosity};
use cmd::serve::serve;

/// The exit codes, by name.
pub(crate) mod exit {
    /// Every run completed as expected; a hunt found nothing.
    pub const OK: u8 = 0;
    /// A check failed, an expectation was not met, or a hunt found something.
    pub const FINDING: u8 = 1;
    /// An I/O error, a run that stopped early, or a hunt seed the watchdog stopped.
    pub const IO: u8 = 4;
    /// A live run whose steps ran late (the machine could not keep up): its
    /// verdicts are not counted. Outranks only 0.
    pub const TIMING: u8 = 5;

    /// The code of several outcomes together, in this order: 3 and 2
    /// (nothing could run), then 1 (a real violation, whatever else
    /// happened: a CI that retries "infrastructure" codes must never retry
    /// a regression into a pass), then 4, then 5, then 0.
    pub fn worst(a: u8, b: u8) -> u8 {
        let rank = |c: u8| match c {
            OK => 0,
            TIMING => 1,
            IO => 2,
            FINDING => 3,
            2 => 4,
            3 => 5,
            c => c.min(6),
        };
        if rank(b) > rank(a) {
            b
        } else {
            a
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            files,
            servers,
            seed,
            trace,
            timeline,
            quiet,
            verbose,
            format,
            watchdog,
            gate,
            baseline,
            write_baseline,
            jobs,
            live,
        } => {
            let gate = match (gate, baseline) {
                (false, _) => Ok(None),
                (true, None) => Ok(Some(mcpsim::check::gate::Baseline::empty())),
                (true, Some(path)) => mcpsim::check::gate::Baseline::load(&path).map(Some),
            };
            match (live.options(matches!(gate, Ok(Some(_)))), gate) {
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(live), Ok(gate)) => {
                    let target = live.map_or(Target::Servers(servers, watchdog), Target::Live);
                    let verbosity = match (quiet, verbose) {
                        (true, _) => Verbosity::Quiet,
                        (_, true) => Verbosity::Verbose,
                        _ => Verbosity::Normal,
                    };
                    let output = Output { trace, timeline, verbosity, format, gate, write_baseline };
                    run(files, target, seed.map(Seed), jobs, output)
                }
            }
        }
        Command::Serve { server, port, dialect, store } => serve(server, port, dialect, store),
        Command::Hunt { merge: Some(HuntCommand::Merge { files }), .. } => merge(files),
        Command::Hunt { merge: None, args } => hunt(args),
        Command::Replay { server, seed, trace, timeline, dialect, replicas, scenario } => {
            // As `hunt` draws: replicas without --dialect are stateless-http's.
            let dialect = match (dialect, replicas) {
                (None, n) if n > 1 => mcpsim::scenario::Dialect::StatelessHttp,
                (d, _) => DialectArg::resolve(d, &server),
            };
            replay(server, seed, (dialect, replicas), trace, timeline, scenario)
        }
        Command::List { what } => list(what),
        Command::Explain { check } => explain(&check),
        Command::Check { paths } => check_files(paths),
        Command::Schema => {
            out!("{}", mcpsim::scenario::json_schema());
            Ok(exit::OK)
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

#[cfg(test)]
mod tests {
    use super::exit::{worst, FINDING, IO, OK, TIMING};

    /// The order a CI acts on: 3 and 2, then 1, then 4, then 5, then 0.
    #[test]
    fn a_real_violation_outranks_what_a_ci_may_retry() {
        let order = [3, 2, FINDING, IO, TIMING, OK];
        for (i, a) in order.iter().enumerate() {
            for b in &order[i..] {
                assert_eq!(worst(*a, *b), *a, "{a} with {b}");
                assert_eq!(worst(*b, *a), *a, "{b} with {a}");
            }
        }
    }
}
