//! The `mcpsim` command line: a thin layer over the library.
//!
//! Exit codes ([`exit`]): 0 every run completed, 1 a check failed or an
//! expectation was not met (reserved for the checks), 2 usage, 3 invalid
//! scenario, 4 I/O or internal error.

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
    /// verdicts are not counted. Outranks every code but 4.
    pub const TIMING: u8 = 5;

    /// The code of several outcomes together: 4 outranks 5, which outranks
    /// the rest (3, 2, 1, 0 in that order).
    pub fn worst(a: u8, b: u8) -> u8 {
        let rank = |c: u8| match c {
            IO => 6,
            TIMING => 5,
            c => c.min(4),
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
            jobs,
            live,
        } => {
            let gate = match (gate, baseline) {
                (false, _) => Ok(None),
                (true, None) => Ok(Some(mcpsim::check::gate::Baseline::empty())),
                (true, Some(path)) => mcpsim::check::gate::Baseline::load(&path).map(Some),
            };
            match (live.options(), gate) {
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(live), Ok(gate)) => {
                    let target = live.map_or(Target::Servers(servers, watchdog), Target::Live);
                    let verbosity = match (quiet, verbose) {
                        (true, _) => Verbosity::Quiet,
                        (_, true) => Verbosity::Verbose,
                        _ => Verbosity::Normal,
                    };
                    let output = Output { trace, timeline, verbosity, format, gate };
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
    use super::exit::*;

    #[test]
    fn four_outranks_five_which_outranks_the_rest() {
        assert_eq!(worst(OK, TIMING), TIMING);
        assert_eq!(worst(TIMING, FINDING), TIMING);
        assert_eq!(worst(FINDING, TIMING), TIMING);
        assert_eq!(worst(TIMING, IO), IO);
        assert_eq!(worst(IO, TIMING), IO);
        assert_eq!(worst(TIMING, 3), TIMING);
        assert_eq!(worst(FINDING, 2), 2);
        assert_eq!(worst(OK, FINDING), FINDING);
    }
}
