//! The command line's shape: subcommands, flags and their help text (clap).

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "mcpsim",
    version,
    about = "Deterministic simulation and fault injection for MCP servers that resume SSE streams with Last-Event-ID"
)]
#[command(
    after_help = "Exit codes: 0 ok, 1 check failed / expectation not met, 2 usage, 3 invalid scenario, 4 I/O or internal error, 5 live timing unreliable (the machine could not keep up, even replayed slower). Several together: the first of 3 and 2, 1, 4, 5, 0 (a real violation outranks what a CI may retry)"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
        /// Print only the runs that missed their expectation (a line each) and the tally.
        ///
        /// Without --quiet or --verbose, a single run prints its whole report; several runs
        /// print a line each, then the whole report of every run that missed its expectation
        /// (or has none and violated a check), then the tally.
        #[arg(long, short, conflicts_with = "verbose")]
        quiet: bool,
        /// Print every run's whole report (text format).
        #[arg(long, short)]
        verbose: bool,
        /// Output: the text report (coloured on a terminal unless NO_COLOR is set),
        /// JSON (schema mcpsim.run-report/1) or JUnit XML.
        #[arg(long, value_enum, default_value = "text")]
        format: RunFormat,
        /// Stop a simulated run that takes longer than this much wall-clock time
        /// (e.g. 60s, 5m): a server that hangs its host is reported, not waited for.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "60s")]
        watchdog: std::time::Duration,
        /// A CI gate: a run fails (exit 1, a JUnit failure) on any violation that is not
        /// inherent, whatever [expect] says or leaves out, unless --baseline accepts it.
        #[arg(long)]
        gate: bool,
        /// With --gate: a TOML file of accepted findings by scenario and check
        /// (`[accepted] nat-rebind = ["liveness"]`). An entry that no longer fails is stale
        /// and fails the gate.
        #[arg(long, value_name = "FILE", requires = "gate")]
        baseline: Option<PathBuf>,
        /// With --gate: write a baseline to FILE that accepts what each judged run violated
        /// (keyed by scenario file; none from runs that errored or ran late, no inherent finding).
        /// Read it, then pass it to --baseline.
        #[arg(long, value_name = "FILE", requires = "gate")]
        write_baseline: Option<PathBuf>,
        /// Play this many runs at once; each is still printed in order. Live runs spend their
        /// time waiting, so a directory plays much faster with several (each run its own
        /// process and ports), but each needs the CPU on time [default: the number of cores;
        /// with --live, max(1, cores × time scale × 10), at most 16: 2 at 0.1 on a 2-vCPU runner].
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        #[command(flatten)]
        live: LiveArgs,
    },
    /// Serve a built-in server on real TCP (127.0.0.1).
    ///
    /// The control group of live runs (`mcpsim run --live 'mcpsim serve --server guarded' FILE`),
    /// and a server with known behaviour, or known bugs, to test an MCP client against.
    /// Started by a live run, it takes its port and settings from the MCPSIM_* environment and
    /// speaks mcpsim-control/1 (docs/live-protocol.md).
    Serve {
        /// The server (see `mcpsim list servers`).
        #[arg(long, value_name = "NAME")]
        server: String,
        /// The port to serve on (default: $MCPSIM_PORT, else 8080).
        #[arg(long)]
        port: Option<u16>,
        /// The dialect (default: $MCPSIM_DIALECT, else streamable-http).
        #[arg(long, value_enum)]
        dialect: Option<DialectArg>,
        /// Keep durable state (the single-use registry) in this Redis, redis://HOST:PORT
        /// (default: $MCPSIM_STORE, else the process's memory).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
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
    /// Validate scenario files (TOML) without running them; not the checks that judge runs.
    #[command(visible_alias = "validate")]
    Check {
        /// Scenario files (TOML), or directories searched for *.toml recursively.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Hunt for bugs: run generated scenarios seed after seed, shrink each distinct bug once.
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
        /// The replicas the hunt deployed (its --replicas).
        #[arg(long, value_name = "N", default_value_t = 1)]
        replicas: u32,
        /// Write the seed's generated plan to FILE as a scenario, unshrunk
        /// (`mcpsim run FILE` then runs it; add an [expect] to keep it).
        #[arg(long, value_name = "FILE")]
        scenario: Option<PathBuf>,
    },
}

/// `mcpsim run --live`: a real server process instead of built-in servers.
#[derive(clap::Args)]
pub(crate) struct LiveArgs {
    /// Run against a real server process: COMMAND (run with `sh -c`) must serve MCP on
    /// 127.0.0.1:$MCPSIM_PORT and speak mcpsim-control/1 (docs/live-protocol.md); e.g.
    /// --live 'mcpsim serve --server guarded'. Needs scenario FILEs; real time, not reproducible byte for byte.
    #[arg(long, value_name = "COMMAND", conflicts_with_all = ["servers", "seed"], help_heading = "Live runs")]
    pub(crate) live: Option<String>,
    /// Real seconds per scenario second: 0.1 plays a 400 s scenario in 40 s. Every time in the
    /// plan and every time setting handed to the server is multiplied by it [default: 1].
    #[arg(long, value_name = "F", requires = "live", help_heading = "Live runs")]
    pub(crate) time_scale: Option<f64>,
    /// A run whose timing was unreliable (a step ran late, or a wait the verdicts rest on was the
    /// machine's) is played again at twice its time scale, up to F; only a run still late at F is
    /// "timing unreliable" (exit 5). The report names the scale that judged it
    /// [default: 1 with --gate, else no replay].
    #[arg(long, value_name = "F", requires = "live", help_heading = "Live runs")]
    pub(crate) max_time_scale: Option<f64>,
    /// How long the server process may take to say `ready`, in real seconds; a start that misses
    /// it is tried once more with twice the time [default: 10].
    #[arg(long, value_name = "SECS", requires = "live", help_heading = "Live runs")]
    pub(crate) ready_timeout: Option<f64>,
    /// The port the server process must serve on [default: a free one].
    #[arg(long, value_name = "PORT", requires = "live", help_heading = "Live runs")]
    pub(crate) live_port: Option<u16>,
    /// Echo the server process's output to stderr, prefixed with [server].
    #[arg(long, requires = "live", help_heading = "Live runs")]
    pub(crate) server_output: bool,
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
}

/// The adapter configuration a live run or hunt asks for, passed on as
/// MCPSIM_EVENT_STORE and MCPSIM_AUTH (docs/live-protocol.md).
#[derive(clap::Args)]
pub(crate) struct ConfigArgs {
    /// Ask the server for an event store (resumability), or for none (most SDKs' default)
    /// [default: the adapter's own; the bundled adapters use memory].
    #[arg(long, value_enum, requires = "live", help_heading = "Server configuration (live)")]
    pub(crate) event_store: Option<EventStoreArg>,
    /// Ask the server for a bearer-token verifier (the token is the principal's name; sessions
    /// bound to it), or for none [default: the adapter's own; the bundled adapters use off].
    #[arg(long, value_enum, requires = "live", help_heading = "Server configuration (live)")]
    pub(crate) auth: Option<AuthArg>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EventStoreArg {
    Memory,
    None,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AuthArg {
    Off,
    Bearer,
}

impl ConfigArgs {
    pub(crate) fn config(&self) -> mcpsim::live::AdapterConfig {
        use mcpsim::live::{Auth, EventStore};
        mcpsim::live::AdapterConfig {
            event_store: self.event_store.map(|e| match e {
                EventStoreArg::Memory => EventStore::Memory,
                EventStoreArg::None => EventStore::None,
            }),
            auth: self.auth.map(|a| match a {
                AuthArg::Off => Auth::Off,
                AuthArg::Bearer => Auth::Bearer,
            }),
        }
    }
}

impl LiveArgs {
    /// The live options asked for, if any.
    /// `gate`: `--gate` was given (late runs are then replayed up to scale 1 by default).
    pub(crate) fn options(&self, gate: bool) -> Result<Option<mcpsim::live::LiveOptions>, mcpsim::Error> {
        let Some(command) = &self.live else { return Ok(None) };
        let mut opts = mcpsim::live::LiveOptions::new(command.clone());
        if let Some(f) = self.time_scale {
            if !(f > 0.0 && f.is_finite()) {
                return Err(mcpsim::Error::usage(format!("--time-scale must be a positive number, not {f}")));
            }
            opts.time_scale = f;
        }
        match self.max_time_scale {
            Some(f) if !(f > 0.0 && f.is_finite()) => {
                return Err(mcpsim::Error::usage(format!("--max-time-scale must be a positive number, not {f}")));
            }
            Some(f) => opts.max_time_scale = f,
            None if gate => opts.max_time_scale = 1.0,
            None => {}
        }
        if let Some(s) = self.ready_timeout {
            opts.ready_timeout = std::time::Duration::try_from_secs_f64(s)
                .map_err(|_| mcpsim::Error::usage(format!("--ready-timeout must be a number of seconds, not {s}")))?;
        }
        opts.port = self.live_port;
        opts.echo = self.server_output;
        opts.config = self.config.config();
        Ok(Some(opts))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RunFormat {
    Text,
    Json,
    Junit,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ListWhat {
    Servers,
    Checks,
    Scenarios,
}

#[derive(Subcommand)]
pub(crate) enum HuntCommand {
    /// Merge the `--format json` results of several shards into one.
    ///
    /// The merged JSON goes to stdout and the merged bug table to stderr. Exit codes: 0 no
    /// bug in any shard, 1 bugs, 2 usage or a file that is no hunt report, 4 a file that cannot be read.
    Merge {
        /// The shards' reports (`mcpsim hunt --format json` output), one file each.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(clap::Args)]
pub(crate) struct HuntArgs {
    /// The server to hunt (required; see `mcpsim list servers`).
    #[arg(long, value_name = "NAME")]
    pub(crate) server: Option<String>,
    /// How many seeds to run (default 1000 unless --time is given).
    #[arg(long, conflicts_with = "time")]
    pub(crate) seeds: Option<u64>,
    /// Run for this long instead (e.g. 60s, 5m).
    #[arg(long, value_parser = parse_duration_arg)]
    pub(crate) time: Option<std::time::Duration>,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Run the K-th of N disjoint slices of the seed space (for CI matrices).
    /// --seeds counts the seeds of this shard: `--seeds 200 --shard 1/4` runs
    /// 200 seeds here, 800 over the four shards.
    #[arg(long, value_name = "K/N", value_parser = parse_shard, default_value = "1/1")]
    pub(crate) shard: (u64, u64),
    /// The first seed (default: drawn from the clock and printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Where shrunk regression scenarios are written: one file per distinct
    /// bug. Hunting again into the same directory writes no duplicate. The
    /// default is outside `scenarios/` on purpose: read a finding, then
    /// promote it by moving it into `scenarios/regressions/`, which `mcpsim
    /// run` runs.
    #[arg(long, value_name = "DIR", default_value = "mcpsim-findings")]
    pub(crate) out: PathBuf,
    /// Report findings without shrinking them (failures are then grouped by
    /// check and the defect of their first violation, read from the unshrunk run).
    #[arg(long)]
    pub(crate) no_shrink: bool,
    /// The shrinking budget: at most N candidate runs per new finding
    /// [default: 300; with --live 20, each a real run of the process].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "no_shrink")]
    pub(crate) shrink_runs: Option<u64>,
    /// Stop once this many distinct bugs are found.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_findings: Option<u64>,
    /// Stop at the first distinct bug (the same as --max-findings 1).
    #[arg(long, conflicts_with = "max_findings")]
    pub(crate) stop_on_first: bool,
    /// Run each seed twice and compare the traces.
    #[arg(long)]
    pub(crate) check_determinism: bool,
    /// Stop a seed that takes longer than this much wall-clock time (e.g. 60s):
    /// it is printed with its repro, counted as a harness failure, and the hunt goes on.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "60s")]
    pub(crate) watchdog: std::time::Duration,
    /// Output: human text, or the JSON report (merge it with `mcpsim hunt merge`).
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: Format,
    /// The dialect of the generated scenarios (default: the server's; legacy-sse
    /// for the reference engine, streamable-http for rmcp and for --live).
    #[arg(long, value_enum)]
    pub(crate) dialect: Option<DialectArg>,
    /// Deploy every generated plan on N replicas (2 to 8) behind a balancer, with one shared
    /// store and partitions between a replica and the store among the faults (docs/replicas.md).
    /// The dialect is then stateless-http unless --dialect names a stateful one, whose plans
    /// route by session or by source address. Default: one server.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) replicas: u32,
    /// Hunt a real server process: each generated plan is played live against COMMAND (as
    /// `run --live` does; docs/live-protocol.md), one process per plan. Each new finding is
    /// shrunk live (every candidate a real run; --shrink-runs, default 20) unless --no-shrink;
    /// each bug's reproducer (or first seed) is replayed live 3 more times and the bug is
    /// reported reproducible (3/3) or flaky. --server then only names it in the report.
    #[arg(long, value_name = "COMMAND", conflicts_with = "check_determinism", help_heading = "Live hunts")]
    pub(crate) live: Option<String>,
    /// Live hunts: real seconds per scenario second [default: 0.1; a generated plan's 30 s then take 3 s].
    #[arg(long, value_name = "F", requires = "live", help_heading = "Live hunts")]
    pub(crate) time_scale: Option<f64>,
    /// Live hunts: how long the server process may take to say `ready`, in real seconds [default: 10].
    #[arg(long, value_name = "SECS", requires = "live", help_heading = "Live hunts")]
    pub(crate) ready_timeout: Option<f64>,
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
}

/// `--dialect`: a dialect by its name, each with a line of help.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DialectArg(mcpsim::scenario::Dialect);

impl clap::ValueEnum for DialectArg {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::OnceLock<Vec<DialectArg>> = std::sync::OnceLock::new();
        ALL.get_or_init(|| mcpsim::scenario::Dialect::ALL.map(DialectArg).to_vec())
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use mcpsim::scenario::Dialect;
        // The command line's one choice of dialect (docs/design.md §7).
        let help = match self.0 {
            Dialect::LegacySse => "HTTP+SSE (MCP 2024-11-05): GET /mcp/sse, answers POSTed to the endpoint it names",
            Dialect::StreamableHttp => "Streamable HTTP (MCP 2025-11-25): one endpoint, Mcp-Session-Id, resume by GET",
            Dialect::StatelessHttp => "MCP 2026-07-28: no session; a server's questions are multi round-trip requests",
        };
        Some(clap::builder::PossibleValue::new(self.0.name()).help(help))
    }
}

impl DialectArg {
    pub(crate) fn resolve(arg: Option<DialectArg>, server: &str) -> mcpsim::scenario::Dialect {
        match arg {
            None => mcpsim::hunt::default_dialect(server),
            Some(DialectArg(d)) => d,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

pub(crate) fn parse_duration_arg(s: &str) -> Result<std::time::Duration, String> {
    mcpsim::scenario::parse_duration(s)
}

pub(crate) fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, n) = s.split_once('/').ok_or_else(|| format!("{s:?}: expected K/N, like 2/4"))?;
    let k: u64 = k.parse().map_err(|_| format!("{s:?}: K is not a number"))?;
    let n: u64 = n.parse().map_err(|_| format!("{s:?}: N is not a number"))?;
    if k == 0 || n == 0 || k > n {
        return Err(format!("{s:?}: expected 1 <= K <= N"));
    }
    Ok((k, n))
}
