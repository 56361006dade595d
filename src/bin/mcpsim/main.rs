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
use cmd::run::{run, Target};
use cmd::serve::serve;

/// The exit codes, by name.
pub(crate) mod exit {
    /// Every run completed as expected; a hunt found nothing.
    pub const OK: u8 = 0;
    /// A check failed, an expectation was not met, or a hunt found something.
    pub const FINDING: u8 = 1;
    /// An I/O error, a run that stopped early, or a hunt seed the watchdog stopped.
    pub const IO: u8 = 4;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { files, servers, seed, trace, timeline, quiet, format, watchdog, live } => match live.options() {
            Err(e) => Err(e),
            Ok(live) => {
                let target = live.map_or(Target::Servers(servers, watchdog), Target::Live);
                run(files, target, seed.map(Seed), trace, timeline, quiet, format)
            }
        },
        Command::Serve { server, port, dialect } => serve(server, port, dialect),
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
