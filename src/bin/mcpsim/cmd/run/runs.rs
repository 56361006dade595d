//! The runs of one `mcpsim run`, judged in order: what each prints and
//! writes, and the tally and exit code they add up to.

use super::{write_trace, Output, Verbosity};
use crate::cli::RunFormat;
use crate::exit;
use mcpsim::scenario::Plan;
use mcpsim::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The runs of one `mcpsim run`: how each is printed and written, and the
/// tally and exit code they add up to.
pub(super) struct Runs {
    /// How many runs were asked for (one: `--trace`/`--timeline` name a file, not a directory).
    total: usize,
    trace: Option<PathBuf>,
    timeline: Option<PathBuf>,
    verbosity: Verbosity,
    format: RunFormat,
    color: bool,
    /// Normal verbosity: the reports of the runs that missed, printed before the tally.
    missed_reports: Vec<String>,
    code: u8,
    io_errors: Vec<Error>,
    /// "scenario on server" for each run that did not meet its expectation.
    failed: Vec<String>,
    /// For JSON and JUnit, printed together at the end.
    judged: Vec<(mcpsim::Run, Vec<mcpsim::check::Verdict>, Option<mcpsim::check::Expectation>)>,
    /// Runs that errored before they were judged: a JUnit test case each.
    errored: Vec<mcpsim::report::Errored>,
    /// Baseline entries that no longer fail, as `file: checks` (runs with no regression).
    stale: Vec<String>,
    /// `--write-baseline`: the file, and what each judged run violated, by scenario file.
    write_baseline: Option<(PathBuf, BTreeMap<String, Vec<mcpsim::check::CheckId>>)>,
    /// "scenario on server" for each live run whose timing was unreliable.
    unreliable: Vec<String>,
    /// Runs with a finding no server could prevent (counted apart: never a failure by itself).
    inherent_runs: usize,
    /// (as expected, not met, without expectation, timing unreliable)
    counts: (usize, usize, usize, usize),
    /// Runs skipped because the server does not speak the scenario's dialect, per server.
    skipped: BTreeMap<String, (usize, BTreeSet<&'static str>)>,
    /// `--gate`: the baseline every run is judged against instead of `[expect]`.
    gate: Option<mcpsim::check::gate::Baseline>,
    /// Live: scenarios skipped because the process does not speak their dialect.
    live_skipped: usize,
    /// Live: runs not started because a Ctrl-C (or SIGTERM) came first.
    not_played: usize,
}

impl Runs {
    /// No run judged yet, of `total` asked for, printed and written as `output` says.
    pub(super) fn new(output: Output, total: usize) -> Runs {
        let Output { trace, timeline, verbosity, format, gate, write_baseline } = output;
        use std::io::IsTerminal;
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Runs {
            total,
            trace,
            timeline,
            verbosity,
            format,
            color,
            code: exit::OK,
            io_errors: Vec::new(),
            failed: Vec::new(),
            unreliable: Vec::new(),
            judged: Vec::new(),
            errored: Vec::new(),
            stale: Vec::new(),
            write_baseline: write_baseline.map(|f| (f, BTreeMap::new())),
            counts: (0, 0, 0, 0),
            inherent_runs: 0,
            skipped: BTreeMap::new(),
            gate,
            live_skipped: 0,
            not_played: 0,
            missed_reports: Vec::new(),
        }
    }

    /// The runs to play, in order: each plan on each server, but for those
    /// skipped (counted where they fall). A server that speaks only
    /// streamable-http skips legacy-sse scenarios, unless both were asked
    /// for by name (then the run explains the mismatch): a file found by
    /// searching a directory is skipped, with a note. `asked`: whether
    /// servers were named, whether the scenarios are the bundled ones, and
    /// whether the run is live.
    pub(super) fn work<'p>(
        &mut self,
        plans: &'p [Plan],
        servers: &'p [String],
        named: &BTreeSet<PathBuf>,
        (explicit, bundled, live): (bool, bool, bool),
    ) -> Vec<(&'p Plan, &'p String)> {
        let mut work = Vec::new();
        for plan in plans {
            for server in servers {
                let file_named = plan.source.as_ref().is_some_and(|s| named.contains(s));
                if (!explicit || bundled || !file_named)
                    && !live
                    && mcpsim::server::is_known_server(server)
                    && !mcpsim::server::speaks(server, plan.dialect)
                {
                    let e = self.skipped.entry(server.clone()).or_default();
                    e.0 += 1;
                    e.1.insert(plan.dialect.name());
                    continue;
                }
                work.push((plan, server));
            }
        }
        work
    }

    /// Takes the result of one run, in order: judged, not played (a Ctrl-C
    /// came first), skipped (the live process does not speak its dialect),
    /// or an error, said and counted.
    pub(super) fn take(
        &mut self,
        (plan, server): (&Plan, &String),
        result: Option<Result<mcpsim::Run, Error>>,
        live: bool,
    ) {
        match result {
            None => self.not_played += 1,
            Some(Ok(run)) => self.judge(plan, run),
            // The live process does not speak this scenario's dialect: skipped, and said so.
            Some(Err(e)) if e.kind == mcpsim::ErrorKind::Dialect => {
                eprintln!("skipped: {e}");
                self.live_skipped += 1;
            }
            Some(Err(e)) => {
                let on = if live { "the live server".to_string() } else { server.clone() };
                eprintln!("error: {} on {on}: {e}", plan.name);
                self.errored.push((plan.name.clone(), on, e.to_string()));
                self.code = exit::worst(self.code, e.exit_code() as u8);
            }
        }
    }

    /// Judges one run, prints it (text) or keeps it (JSON, JUnit), writes
    /// its trace and timeline, and counts it.
    fn judge(&mut self, plan: &Plan, run: mcpsim::Run) {
        let server = run.server.clone();
        let verdicts = mcpsim::check::judge(&run.trace);
        let expectation = self.expectation(plan, &run, &verdicts);
        // A live run whose steps ran late did not play the scenario: its
        // verdicts are not counted, either way.
        let unreliable = run.live.as_ref().is_some_and(|l| l.timing_unreliable());
        if verdicts.iter().any(|v| v.violations().iter().any(|x| x.inherent)) {
            self.inherent_runs += 1;
        }
        match &expectation {
            _ if unreliable => self.counts.3 += 1,
            Some(e) if e.met => self.counts.0 += 1,
            Some(_) => self.counts.1 += 1,
            None => self.counts.2 += 1,
        }
        let timeline_note = self.write_timeline(&run, &verdicts);
        // A gate failed only by stale baseline entries: no regression. It is
        // said in one line after the regressions, not with a report of its own.
        let stale_only = expectation.as_ref().is_some_and(|e| {
            e.gate
                && !e.met
                && e.cut.is_none()
                && e.missed.is_empty()
                && !e.stale.is_empty()
                && e.violated.iter().all(|c| e.expected.contains(c))
        });
        if self.format == RunFormat::Text {
            // A run to look at: it missed its expectation, has none and
            // violated a check, ran late, or was cut short.
            let missed = unreliable
                || run.aborted.is_some()
                || match &expectation {
                    Some(_) if stale_only => false,
                    Some(e) => !e.met,
                    None => !mcpsim::check::violated(&verdicts).is_empty(),
                };
            self.print(&run, &verdicts, expectation.as_ref(), &timeline_note, missed, unreliable);
        }
        // What a judged run violated goes into the baseline being written.
        if !unreliable && run.aborted.is_none() {
            self.add_to_baseline(plan, &verdicts);
        }
        self.count_outcome(plan, &run, expectation.as_ref(), (unreliable, stale_only));
        self.write_run_trace(&run);
        if self.format != RunFormat::Text {
            // The console says why each run failed, whatever goes to stdout.
            if !unreliable && expectation.as_ref().is_some_and(|e| !e.met) {
                eprintln!("{} on {server} (seed {}): {}", run.scenario, run.seed, failing_headlines(&verdicts));
            }
            self.judged.push((run, verdicts, expectation));
        }
    }

    /// What `run` of `plan` was to do (by the gate, or by `[expect]`), and
    /// whether it did; a run cut short is never "as expected".
    fn expectation(
        &self,
        plan: &Plan,
        run: &mcpsim::Run,
        verdicts: &[mcpsim::check::Verdict],
    ) -> Option<mcpsim::check::Expectation> {
        let expectation = match &self.gate {
            Some(baseline) => Some(
                mcpsim::check::gate::gate_plan(plan, verdicts, baseline)
                    .with_misses(mcpsim::check::missed_steps(plan, &run.trace)),
            ),
            None => mcpsim::check::expectation(plan, &run.server, verdicts, &run.trace),
        };
        // A run cut short played only part of the scenario: never "as expected".
        expectation.map(|e| match &run.aborted {
            Some(why) => mcpsim::check::Expectation {
                met: false,
                cut: Some(why.lines().next().unwrap_or_default().to_string()),
                ..e
            },
            None => e,
        })
    }

    /// `--write-baseline`: adds the checks a judged run of `plan` violated.
    fn add_to_baseline(&mut self, plan: &Plan, verdicts: &[mcpsim::check::Verdict]) {
        let Some((_, entries)) = self.write_baseline.as_mut() else { return };
        let checks = entries.entry(file_key(plan)).or_default();
        for c in mcpsim::check::gate::failing(verdicts) {
            if !checks.contains(&c) {
                checks.push(c);
            }
        }
    }

    /// Lists the run where the end says so (late, stale entries only, not
    /// met), says a run stopped early, and raises the exit code to match.
    fn count_outcome(
        &mut self,
        plan: &Plan,
        run: &mcpsim::Run,
        expectation: Option<&mcpsim::check::Expectation>,
        (unreliable, stale_only): (bool, bool),
    ) {
        let server = &run.server;
        if unreliable {
            self.unreliable.push(format!("{} on {server}", run.scenario));
            self.code = exit::worst(self.code, exit::TIMING);
        } else if let Some(e) = expectation.filter(|_| stale_only) {
            self.stale.push(format!("{}: {}", file_key(plan), e.stale.join(", ")));
            self.code = exit::worst(self.code, exit::FINDING);
        } else if expectation.is_some_and(|e| !e.met) {
            self.failed.push(format!("{} on {server}", run.scenario));
            // A run cut short is not met because it was cut: its code is 4
            // (below), not a real violation's 1.
            if run.aborted.is_none() {
                self.code = exit::worst(self.code, exit::FINDING);
            }
        }
        if let Some(why) = &run.aborted {
            eprintln!("error: {} on {server} stopped early (seed {}): {why}", run.scenario, run.seed);
            self.code = exit::worst(self.code, exit::IO);
        }
    }

    /// Writes the run's JSONL trace if asked (`--trace`).
    fn write_run_trace(&mut self, run: &mcpsim::Run) {
        if let Some(t) = &self.trace {
            let path =
                if self.total == 1 { t.clone() } else { t.join(format!("{}.{}.jsonl", run.scenario, run.server)) };
            if let Err(e) = write_trace(&path, &run.trace.to_jsonl()) {
                self.io_errors.push(e);
            }
        }
    }

    /// Writes the run's timeline if asked; returns the line that says where.
    fn write_timeline(&mut self, run: &mcpsim::Run, verdicts: &[mcpsim::check::Verdict]) -> String {
        let Some(t) = &self.timeline else { return String::new() };
        let path = if self.total == 1 { t.clone() } else { t.join(format!("{}.{}.html", run.scenario, run.server)) };
        match write_trace(&path, &mcpsim::report::timeline_html(run, verdicts)) {
            Ok(()) => format!("timeline: {}", path.display()),
            Err(e) => {
                self.io_errors.push(e);
                String::new()
            }
        }
    }

    /// Prints one run as text, as [`Verbosity`] says: its line, its whole
    /// report, or nothing (yet: a missed run's report waits for the end).
    fn print(
        &mut self,
        run: &mcpsim::Run,
        verdicts: &[mcpsim::check::Verdict],
        expectation: Option<&mcpsim::check::Expectation>,
        timeline_note: &str,
        missed: bool,
        unreliable: bool,
    ) {
        let server = &run.server;
        let line = || {
            let inherent = mcpsim::check::inherent_only(verdicts);
            let plain: Vec<&str> = mcpsim::check::violated(verdicts)
                .into_iter()
                .filter(|c| !inherent.contains(c))
                .map(|c| c.as_str())
                .collect();
            let inherent: Vec<&str> = inherent.iter().map(|c| c.as_str()).collect();
            let violated = match (plain.is_empty(), inherent.is_empty()) {
                (true, true) => "no violation".to_string(),
                (false, true) => format!("violated: {}", plain.join(", ")),
                (true, false) => format!("no violation; inherent only: {}", inherent.join(", ")),
                (false, false) => format!("violated: {}; inherent only: {}", plain.join(", "), inherent.join(", ")),
            };
            let expect = match expectation {
                // Its verdicts are not counted: it passed nothing.
                _ if unreliable => " · timing unreliable: not counted".to_string(),
                Some(e) if e.met && e.gate => " · gate passed".to_string(),
                Some(e) if e.met => " · as expected".to_string(),
                Some(e) => format!(" · {}", mcpsim::report::expectation_line(server, e)),
                None => " · no [expect] entry".to_string(),
            };
            // A late run replayed slower says which scale judged it.
            let scale = match &run.live {
                Some(l) if !l.earlier.is_empty() && !unreliable => {
                    format!(" · judged at time scale {} (late at {})", l.time_scale, l.earlier_scales())
                }
                Some(l) if unreliable => format!(" · late at time scale {}{}", l.time_scale, l.earlier_words()),
                _ => String::new(),
            };
            let mut line = format!("{} · {} · seed {} · {violated}{expect}{scale}", run.scenario, run.server, run.seed);
            if expectation.is_some_and(|e| !e.met) {
                line.push_str(&format!("\n  repro: {}", run.repro()));
            }
            line
        };
        let report = || {
            let mut text = mcpsim::report::text(run, verdicts, expectation);
            if expectation.is_none() {
                text.push_str(&format!("no [expect] entry for {server}: nothing to compare the verdicts with\n"));
            }
            if !timeline_note.is_empty() {
                text.push_str(timeline_note);
                text.push('\n');
            }
            if self.color {
                mcpsim::report::colorize(&text)
            } else {
                text
            }
        };
        match self.verbosity {
            Verbosity::Quiet if missed => out!("{}", line()),
            Verbosity::Quiet => {}
            Verbosity::Verbose => out!("{}", report()),
            Verbosity::Normal if self.total == 1 => out!("{}", report()),
            Verbosity::Normal => {
                out!("{}", line());
                if missed {
                    let report = report();
                    self.missed_reports.push(report);
                }
            }
        }
    }

    /// Prints what is printed at the end (JSON or JUnit, the runs that did
    /// not meet their expectation, the tally, I/O errors); returns the exit code.
    pub(super) fn finish(mut self) -> u8 {
        if self.format != RunFormat::Text {
            let views: Vec<mcpsim::report::Judged> = self
                .judged
                .iter()
                .map(|(run, verdicts, expectation)| mcpsim::report::Judged {
                    run,
                    verdicts,
                    expectation: expectation.as_ref(),
                })
                .collect();
            let text = if self.format == RunFormat::Json {
                mcpsim::report::json(&views)
            } else {
                mcpsim::report::junit_with_errors(&views, &self.errored)
            };
            out!("{text}");
        }
        self.print_to_look_at();
        let tally = self.tally();
        if self.format == RunFormat::Text {
            out!("{tally}");
        } else {
            eprintln!("{tally}");
        }
        if let Some((file, entries)) = &self.write_baseline {
            match std::fs::write(file, mcpsim::check::gate::Baseline::text(entries)) {
                Ok(()) => eprintln!(
                    "baseline written: {} ({} scenario(s) with accepted findings)",
                    file.display(),
                    entries.values().filter(|c| !c.is_empty()).count()
                ),
                Err(e) => self.io_errors.push(Error::io(format!("{}: cannot write the baseline: {e}", file.display()))),
            }
        }
        for e in &self.io_errors {
            eprintln!("error: {e}");
        }
        if !self.io_errors.is_empty() {
            self.code = exit::worst(self.code, exit::IO);
        }
        self.code
    }

    /// The reports of the runs to look at, then the lists of runs that
    /// failed, passed but for stale baseline entries, or ran late.
    fn print_to_look_at(&self) {
        if !self.missed_reports.is_empty() {
            out!("\nreports of the {} run(s) to look at:\n", self.missed_reports.len());
            for r in &self.missed_reports {
                out!("{r}");
            }
        }
        if !self.failed.is_empty() {
            let what = if self.gate.is_some() { "failed the gate" } else { "did not meet their expectation" };
            eprintln!("{} run(s) {what}: {}", self.failed.len(), self.failed.join(", "));
        }
        if !self.stale.is_empty() {
            eprintln!(
                "stale baseline entries (they no longer fail: remove them, and the gate passes): {}",
                self.stale.join("; ")
            );
        }
        if !self.unreliable.is_empty() {
            eprintln!(
                "{} live run(s) had unreliable timing (the machine could not keep up; their verdicts are not counted): {}",
                self.unreliable.len(),
                self.unreliable.join(", ")
            );
        }
    }

    /// The tally line: the runs by outcome, then what was skipped or not
    /// played (which raises the exit code when nothing ran as asked).
    fn tally(&mut self) -> String {
        let (met, not_met, without, unreliable) = self.counts;
        let mut tally = if self.gate.is_some() {
            format!("{} run(s): {met} passed the gate, {not_met} failed it", met + not_met + without + unreliable)
        } else {
            format!(
                "{} run(s): {met} as expected, {not_met} not met, {without} without expectation",
                met + not_met + without + unreliable
            )
        };
        if unreliable > 0 {
            tally.push_str(&format!(", {unreliable} timing unreliable"));
        }
        if self.inherent_runs > 0 {
            tally.push_str(&format!(
                "; {} run(s) had inherent findings (INHERENT: no server could have prevented them)",
                self.inherent_runs
            ));
        }
        if without > 0 && self.gate.is_none() {
            tally.push_str(" (without expectation: the scenario has no [expect] entry for that server, so its verdicts count neither way)");
        }
        tally.push_str(&self.skipped_words());
        if self.not_played > 0 {
            tally.push_str(&format!(
                "; {} run(s) not played: {} (the runs in flight were cut, and judged up to the cut)",
                self.not_played,
                mcpsim::live::interrupted().unwrap_or("interrupted")
            ));
            self.code = exit::worst(self.code, exit::IO);
        }
        if self.live_skipped > 0 {
            tally.push_str(&format!(
                "; {} scenario(s) skipped: the live server does not speak their dialect",
                self.live_skipped
            ));
        }
        // Nothing ran at all: the command was wrong, not the server.
        if self.live_skipped > 0 && self.live_skipped == self.total {
            self.code = exit::worst(self.code, 2);
        }
        tally
    }

    /// The tally's words for the runs skipped because their server does
    /// not speak the scenario's dialect: servers skipped alike are named together.
    fn skipped_words(&self) -> String {
        let mut words = String::new();
        // (count, dialects skipped, dialects spoken) → servers.
        type Key = (usize, String, String);
        let mut groups: Vec<(Key, Vec<&str>)> = Vec::new();
        for (server, (n, dialects)) in &self.skipped {
            let its: Vec<&str> = mcpsim::server::dialects(server).iter().map(|d| d.name()).collect();
            let skipped: Vec<&str> = dialects.iter().copied().collect();
            let key = (*n, skipped.join(" or "), its.join(" and "));
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push(server),
                None => groups.push((key, vec![server])),
            }
        }
        for ((n, skipped, its), servers) in groups {
            let speak = if servers.len() == 1 { "speaks" } else { "speak" };
            words.push_str(&format!(
                "; {n} {skipped} scenario(s) skipped for {}, which {speak} only {its}",
                servers.join(", ")
            ));
        }
        words
    }
}

/// Each violated check's first finding the server could have prevented, in
/// one line (`check: headline; ...`), or "no violation" (an expectation of
/// violations that did not come).
fn failing_headlines(verdicts: &[mcpsim::check::Verdict]) -> String {
    let lines: Vec<String> = verdicts
        .iter()
        .filter_map(|v| {
            let first = v.violations().iter().find(|x| !x.inherent)?;
            Some(format!("{}: {}", v.check, first.headline()))
        })
        .collect();
    if lines.is_empty() {
        "no violation".to_string()
    } else {
        lines.join("; ")
    }
}

/// A baseline's key for `plan`: its file as the user named it, else its name.
fn file_key(plan: &Plan) -> String {
    plan.source.as_ref().map_or(plan.name.clone(), |p| p.display().to_string())
}
