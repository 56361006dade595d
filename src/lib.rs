//! mcpsim: deterministic simulation and fault injection for MCP servers that
//! resume SSE streams with `Last-Event-ID`.
//!
//! A [`scenario::Plan`] (from TOML) runs on turmoil's virtual network:
//! clients, one NAT per client and a server under test. Faults (rebinds,
//! half-open sockets, resets, token theft) fire at their simulated times
//! (`crash-client` at the first tick boundary at or after its time).
//! Every observation lands in a [`trace::Trace`].
//!
//! ```no_run
//! use mcpsim::scenario::Plan;
//! let plan = Plan::load("scenarios/nat-rebind.toml".as_ref()).unwrap();
//! let run = mcpsim::run(&plan, "naive", None).unwrap();
//! let verdicts = mcpsim::check::judge(&run.trace);
//! println!("{}", mcpsim::report::text(&run, &verdicts, None));
//! ```
//!
//! # Layers
//!
//! Data flows one way: scenario → world → trace → check → report. Each
//! module imports only modules on lower rows (a test keeps this true:
//! `tests/layers.rs`):
//!
//! ```text
//! bin (the CLI)
//! hunt                      generated plans, parallel runs, shrinking
//! run / run_with (lib.rs)   a server by name, or your plug → a Run
//! report                    text, JSON, JUnit, HTML timeline; the words for findings
//! check    live             the properties, judged from the trace alone, as facts (Finding) |
//!                           live runs against a process, `mcpsim serve`, HAProxy and Redis
//! world                     turmoil hosts and the step loop; takes a plug
//! server   client           the engine, policies, rmcp, plugs | the MCP client
//! trace                     the record of a run (Run, events, Recorder)
//! scenario  store           TOML → Plan, with located errors | the replicas' shared store (RESP)
//! vocab inbox seed error wire   leaves: names, command queues, seeds, errors,
//! watchdog                      the pure protocol pieces (SSE, JSON-RPC, HTTP/1),
//!                               the wall-clock bound on a run
//! clock net                 scenario time (simulated, or a live run's scaled wall clock);
//!                           byte streams and listeners (simulated or real)
//! quiet                     the pending timers, so a simulation ends once nothing can change its trace
//! ```
//!
//! `server` holds the reference engine (the stateful dialects: `legacy-sse`
//! and MCP 2025-11-25 `streamable-http`), its policies, the stateless
//! reference server (MCP 2026-07-28 `stateless-http`), the public plug-in
//! boundary ([`server::ServerPlug`]) and `server::rmcp` and
//! `server::rmcp_stateless`, the official Rust SDK as a server under test.
//! The design of record is `docs/design.md`.
//!
//! # Public surface
//!
//! What a user needs is public; the machinery is private:
//! - load a plan: [`scenario::Plan`] (`load`, `from_toml_str`; errors are
//!   [`Error`]s located in the file);
//! - run it: [`run`] (a built-in server by name) or [`run_with`] (your
//!   [`server::ServerPlug`]), or live against a process: [`live`];
//! - judge it: [`check::judge`] on the run's [`trace::Trace`];
//! - report it: [`report`] (text, JSON, JUnit, the HTML timeline);
//! - hunt: [`hunt`] (generated plans, shrinking, distinct bugs);
//! - plug in: [`server`] (the engine's [`server::ResumptionPolicy`], or a
//!   whole HTTP service over [`net`]'s byte streams).
//!
//! [`wire`] (the SSE decoder, the HTTP/1 sniffer, JSON-RPC) is public for
//! the fuzz targets and for adapters that read what a server sent. The
//! simulated world, the MCP client, the scenario clock and the command
//! queues are private; [`server::Inbox`] is the one queue a plug sees.
//!
//! # Determinism contract
//! Same scenario + same seed + same build ⇒ byte-identical trace. No wall
//! clock, no OS randomness, no hash-ordered iteration on any path to the
//! trace; every random stream derives from [`seed::Seed`].

#![deny(missing_docs)]
#![deny(unnameable_types)]

pub mod check;
mod client;
mod clock;
pub mod error;
pub mod hunt;
mod inbox;
pub mod live;
pub mod net;
mod quiet;
pub mod report;
pub mod scenario;
pub mod seed;
pub mod server;
pub mod store;
pub mod trace;
mod vocab;
pub mod watchdog;
pub mod wire;
mod world;

pub use error::{Error, ErrorKind, Result};
pub use trace::Run;
pub use world::{run_with, without_early_end, NEEDS_TOKIO_UNSTABLE};

/// Runs a plan against the built-in server `server` (`naive`, `guarded`,
/// `rmcp`, ...; `mcpsim list servers`), with the plan's seed unless `seed`
/// is given. [`run_with`] runs it against a server plug of your own.
pub fn run(plan: &scenario::Plan, server: &str, seed: Option<seed::Seed>) -> Result<Run> {
    let seed = seed.unwrap_or(plan.seed);
    let plug = server::for_plan(server, plan, seed)?;
    let mut run = world::run_with(plan, plug, seed)?;
    run.by_name = true;
    Ok(run)
}
