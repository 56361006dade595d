//! The wall-clock watchdog: a run that takes longer than a bound of real
//! time is stopped, whatever its server does.
//!
//! Two guards, because a misbehaving server can hang a run in two ways:
//! - it keeps the simulation busy (a host that never lets the tick end, or
//!   a run far slower than any scenario should be): the step loop reads the
//!   wall clock between turmoil steps and stops the run with
//!   [`crate::trace::Run::aborted`] set, keeping the trace so far;
//! - it blocks inside one poll (an endless loop, a blocking call): no step
//!   returns, so [`guard`] runs the work on its own thread and stops waiting
//!   for it after the bound and a grace period. That thread cannot be killed;
//!   it is left behind, blocked, and ends with the process.
//!
//! The bound is wall-clock time, so it is the one input of a run that is not
//! a function of the plan and seed: a run cut by it says so, and a hunt
//! counts it as a harness failure, never as a finding.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The default bound on one run (or hunt seed): generous, since the longest
/// bundled scenario simulates in well under a second.
pub const DEFAULT: Duration = Duration::from_secs(60);

/// How a run the step loop stopped says so: [`crate::trace::Run::aborted`]
/// starts with these words (a hunt tells a harness failure from a finding by
/// them, not by reading the clock again).
pub const STOPPED: &str = "the watchdog stopped the run";

/// How long [`guard`] waits beyond the bound for the step loop's own guard
/// to stop the run and the verdicts to be judged.
const GRACE: Duration = Duration::from_secs(5);

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The step loop's deadline on this thread, if a guard set one.
pub(crate) fn deadline() -> Option<Instant> {
    DEADLINE.with(Cell::get)
}

/// Why guarded work gave no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// It outlived the bound and its grace period (a host blocked inside its code).
    Overrun {
        /// The bound it outlived.
        bound: Duration,
    },
    /// It panicked (a harness bug: runs catch their hosts' panics).
    Panicked(String),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Overrun { bound } => write!(
                f,
                "the watchdog gave up after {} s of wall-clock time: a host blocked inside its code (raise --watchdog if the run is only slow)",
                (*bound + GRACE).as_secs()
            ),
            Stopped::Panicked(why) => write!(f, "the run panicked: {why}"),
        }
    }
}

/// Runs `work` on its own thread with the watchdog at `bound`: the step loop
/// stops any run in it once `bound` has passed, and if `work` has not
/// returned `GRACE` later, it is abandoned.
pub fn guard<T: Send + 'static>(bound: Duration, work: impl FnOnce() -> T + Send + 'static) -> Result<T, Stopped> {
    Runner::new().run(bound, work)
}

/// A job for a [`Runner`]'s thread.
type Job<T> = Box<dyn FnOnce() -> T + Send>;

/// A thread that runs guarded work, one job after another: what [`guard`]
/// does, without a new thread per job (a hunt runs thousands of seeds per
/// worker; a fresh thread each time cost about 5 % of its throughput). A job
/// that overruns or panics takes the thread with it, and the next job gets a
/// new one.
pub struct Runner<T> {
    worker: Option<Worker<T>>,
}

struct Worker<T> {
    jobs: std::sync::mpsc::Sender<(Instant, Job<T>)>,
    results: std::sync::mpsc::Receiver<Result<T, String>>,
}

impl<T: Send + 'static> Default for Runner<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + 'static> Runner<T> {
    /// A runner; its thread starts with the first job.
    pub fn new() -> Self {
        Runner { worker: None }
    }

    fn start() -> std::io::Result<Worker<T>> {
        let (jobs, job_rx) = std::sync::mpsc::channel::<(Instant, Job<T>)>();
        let (result_tx, results) = std::sync::mpsc::channel();
        std::thread::Builder::new().name("mcpsim-run".into()).spawn(move || {
            for (deadline, work) in job_rx {
                DEADLINE.with(|d| d.set(Some(deadline)));
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                });
                let panicked = result.is_err();
                if result_tx.send(result).is_err() || panicked {
                    // A panic may leave thread-local state behind: the next job gets a new thread.
                    break;
                }
            }
        })?;
        Ok(Worker { jobs, results })
    }

    /// Runs `work` on the runner's thread with the watchdog at `bound` (see [`guard`]).
    pub fn run(&mut self, bound: Duration, work: impl FnOnce() -> T + Send + 'static) -> Result<T, Stopped> {
        let worker = match self.worker.take() {
            Some(w) => w,
            None => Self::start().map_err(|e| Stopped::Panicked(format!("cannot start a thread: {e}")))?,
        };
        if worker.jobs.send((Instant::now() + bound, Box::new(work))).is_err() {
            return Err(Stopped::Panicked("the run's thread ended".into()));
        }
        match worker.results.recv_timeout(bound + GRACE) {
            Ok(Ok(t)) => {
                self.worker = Some(worker);
                Ok(t)
            }
            Ok(Err(why)) => Err(Stopped::Panicked(why)),
            // The thread is blocked inside the job: it is left behind.
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Stopped::Overrun { bound }),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(Stopped::Panicked("the run's thread ended".into()))
            }
        }
    }
}
