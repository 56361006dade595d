//! A run's record ([`Run`]: the trace and what it was a run of, with its
//! repro line) and the stable hash a hunt compares traces by.

use super::Trace;
use crate::seed::Seed;
use std::path::PathBuf;
use std::time::Duration;

/// The record of one run: its trace and what it was a run of.
#[derive(Clone, Debug)]
pub struct Run {
    /// The scenario's name.
    pub scenario: String,
    /// The server under test, by name.
    pub server: String,
    /// Whether the server was chosen by its `--server` name (its repro is a
    /// command line), not handed in as a plug.
    pub by_name: bool,
    /// The seed it ran with.
    pub seed: Seed,
    /// The scenario file it was loaded from (none for a plan built in code).
    pub source: Option<PathBuf>,
    /// The scenario's duration in simulated time.
    pub duration: Duration,
    /// How far the simulation ran: `duration`, or less when it ended
    /// early because nothing left in it could change the trace (a still
    /// world: `src/quiet.rs`). The checks judge at `duration` either way.
    pub simulated: Duration,
    /// Everything the run recorded.
    pub trace: Trace,
    /// Set when the run had to stop early (a host panicked); the trace holds
    /// everything up to that point.
    pub aborted: Option<String>,
    /// Set for a live run (`mcpsim run --live`): real sockets and the wall
    /// clock, so not reproducible byte for byte.
    pub live: Option<LiveInfo>,
}

/// How a live run was made, and what its checks could not know.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveInfo {
    /// The server command it started.
    pub command: String,
    /// The configuration flags it ran with (`--event-store`, `--auth`),
    /// each with a leading space; empty without any.
    pub flags: String,
    /// Real seconds per scenario second.
    pub time_scale: f64,
    /// What the server process did not tell (requests it never reported,
    /// say), so verdicts that need it are not guessed.
    pub notes: Vec<String>,
    /// Steps that ran later than [`LiveInfo::lateness_bound`] after their
    /// due time (the machine could not keep up): the run's timing is not
    /// what the scenario says, so its verdicts are not counted.
    pub late_steps: Vec<LateStep>,
    /// How late a step may run: two of the scenario's ticks, at least 250 ms
    /// of scenario time.
    pub lateness_bound: Duration,
    /// Steps that acted on nothing, and lateness explains why: the run had
    /// late steps, or what the step needed came after it (the server sent
    /// the request the owner's id would come from late). In words, as
    /// [`crate::trace::MissedStep::line`] gives them.
    pub late_misses: Vec<String>,
    /// Waits the verdicts rest on that the machine made: a timeout that ran
    /// out while mcpsim's loop stalled (a response head, a silent stream, a
    /// server request), or an answer the server process gave later than a
    /// step may run late where no server waits by design (then the order in
    /// which it took requests was the machine's). In words.
    pub late_waits: Vec<String>,
    /// The slowest scale a late run would be replayed at (`--max-time-scale`).
    pub max_time_scale: f64,
    /// The tries before this one, each late and replayed slower, first first.
    pub earlier: Vec<EarlierTry>,
}

/// A live step that ran late, in scenario time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LateStep {
    /// The step's index in the plan's `steps`.
    pub index: usize,
    /// Its kind (`do = "..."`).
    pub action: String,
    /// When it was due.
    pub due: Duration,
    /// When it ran.
    pub ran: Duration,
}

impl LiveInfo {
    /// Whether the run's timing was unreliable: a step ran later than the
    /// bound, a step missed because what it acts on came late, or a wait
    /// the verdicts rest on was the machine's ([`LiveInfo::late_waits`]).
    pub fn timing_unreliable(&self) -> bool {
        !self.late_steps.is_empty() || !self.late_misses.is_empty() || !self.late_waits.is_empty()
    }

    /// What made the timing unreliable, in a sentence without a verdict.
    pub fn late_reason(&self) -> Option<String> {
        let f = |d: Duration| crate::trace::SimTime::from_duration(d);
        if let Some(worst) = self.late_steps.iter().max_by_key(|s| s.ran.saturating_sub(s.due)) {
            return Some(format!(
                "{} step(s) ran later than {} after their due time; the latest, step {} ({}), was due at {} and ran at {}, {:.3} s late",
                self.late_steps.len(),
                crate::scenario::format_duration(self.lateness_bound),
                worst.index,
                worst.action,
                f(worst.due),
                f(worst.ran),
                worst.ran.saturating_sub(worst.due).as_secs_f64(),
            ));
        }
        if let Some(first) = self.late_misses.first() {
            return Some(format!(
                "{} step(s) acted on nothing because what they act on came late; the first: {first}",
                self.late_misses.len()
            ));
        }
        let first = self.late_waits.first()?;
        Some(format!(
            "the machine was too slow for {} wait(s) the verdicts rest on; the first: {first}",
            self.late_waits.len()
        ))
    }

    /// The scales tried before this one, and found late: "0.1 and 0.2".
    pub fn earlier_scales(&self) -> String {
        let scales: Vec<String> = self.earlier.iter().map(|e| e.time_scale.to_string()).collect();
        scales.join(" and ")
    }

    /// "" or " (also late at 0.1 and 0.2)".
    pub fn earlier_words(&self) -> String {
        if self.earlier.is_empty() {
            return String::new();
        }
        format!(" (also late at {})", self.earlier_scales())
    }

    /// The words for the run's header, when the timing is unreliable.
    pub fn timing_words(&self) -> Option<String> {
        let reason = self.late_reason()?;
        Some(format!(
            "TIMING UNRELIABLE: {reason}. The machine could not keep up at time scale {}{}: the verdicts are not counted (replay it slower with a larger --max-time-scale or --time-scale, or free the machine)",
            self.time_scale,
            self.earlier_words()
        ))
    }

    /// The words for a run replayed slower and judged: "replayed slower:
    /// late at time scale 0.1 (…), judged at 0.2". `None` when the first
    /// try was judged.
    pub fn replay_words(&self) -> Option<String> {
        let first = self.earlier.first()?;
        Some(format!(
            "replayed slower: late at time scale {} ({}), judged at {}",
            self.earlier_scales(),
            first.why,
            self.time_scale
        ))
    }
}

/// A live try that was late, and replayed slower.
#[derive(Clone, Debug, PartialEq)]
pub struct EarlierTry {
    /// Its time scale.
    pub time_scale: f64,
    /// Why its timing was unreliable ([`LiveInfo::late_reason`]).
    pub why: String,
}

impl Run {
    /// The command that replays this run (a plug-in server is not a
    /// `--server` name: the line says to run it through `run_with`).
    pub fn repro(&self) -> String {
        let file = self.source.as_ref().map_or_else(|| format!("<{}>", self.scenario), |p| p.display().to_string());
        if let Some(live) = &self.live {
            let scale =
                if live.time_scale == 1.0 { String::new() } else { format!(" --time-scale {}", live.time_scale) };
            return format!("mcpsim run --live {}{} {file}{scale}", shell_quote(&live.command), live.flags);
        }
        if self.by_name {
            format!("mcpsim run {file} --server {} --seed {}", self.server, self.seed)
        } else {
            format!("mcpsim::run_with(&Plan::load({file:?}), <your {} plug>, Seed({}))", self.server, self.seed)
        }
    }
}

/// `s` quoted for a POSIX shell, unless it needs no quoting.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// FNV-1a, 64 bits, as a writer: a stable hash (std's hashers may change
/// between releases).
pub struct Fnv1a(pub u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::io::Write for Fnv1a {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
