//! `mcpsim run`: scenarios × servers, judged against their expectations.

use crate::cli::RunFormat;
use crate::exit;
use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::Error;
use std::path::{Path, PathBuf};

/// Where the bundled scenarios are: `./scenarios`, else the source tree's.
pub(crate) fn bundled_dir() -> PathBuf {
    let local = PathBuf::from("scenarios");
    if local.is_dir() {
        local
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }
}

pub(crate) fn collect(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, Error> {
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
pub(crate) fn find_toml(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), Error> {
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

/// What the scenarios run against.
pub(crate) enum Target {
    /// Built-in servers by name (none: all of them), each run under the
    /// watchdog's wall-clock bound.
    Servers(Vec<String>, std::time::Duration),
    /// A real server process (`--live`).
    Live(mcpsim::live::LiveOptions),
}

/// How much `mcpsim run` prints of each run (text format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verbosity {
    /// The runs that missed their expectation, a line each, and the tally.
    Quiet,
    /// A line per run, then the reports of the runs that missed (a single
    /// run: its report), then the tally.
    Normal,
    /// Every run's report.
    Verbose,
}

/// What a run writes and prints, and how it judges.
pub(crate) struct Output {
    /// Where the JSONL traces go.
    pub trace: Option<PathBuf>,
    /// Where the HTML timelines go.
    pub timeline: Option<PathBuf>,
    /// How much of each run to print (text format).
    pub verbosity: Verbosity,
    /// Text, JSON or JUnit.
    pub format: RunFormat,
    /// `--gate`: judge by the gate and this baseline instead of `[expect]`.
    pub gate: Option<mcpsim::check::gate::Baseline>,
    /// `--write-baseline`: where to write a baseline accepting what the judged runs violated.
    pub write_baseline: Option<PathBuf>,
}

pub(crate) fn run(
    files: Vec<PathBuf>,
    target: Target,
    seed: Option<Seed>,
    jobs: Option<usize>,
    output: Output,
) -> Result<u8, Error> {
    let Output { trace, timeline, verbosity, format, gate, write_baseline } = output;
    use std::io::IsTerminal;
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let bundled = files.is_empty();
    let mut watchdog = mcpsim::watchdog::DEFAULT;
    let (servers, live) = match target {
        Target::Servers(s, w) => {
            watchdog = w;
            (s, None)
        }
        Target::Live(_) if bundled => {
            return Err(Error::usage(
                "a live run takes real time: name the scenario files to play, e.g. \
                 `mcpsim run --live 'mcpsim serve --server guarded' scenarios/nat-rebind.toml --time-scale 0.1`",
            ))
        }
        // One pass per plan; the server's name comes from the process.
        Target::Live(opts) => (vec![String::new()], Some(opts)),
    };
    let jobs = match (jobs, &live) {
        (Some(0), _) => return Err(Error::usage("--jobs must be at least 1")),
        (Some(n), Some(opts)) if n > 1 && opts.port.is_some() => {
            return Err(Error::usage(
                "--live-port serves one run at a time: drop --jobs or --live-port (each run then gets a free port)",
            ))
        }
        (Some(n), _) => n,
        // A live run mostly waits, but its server and clients need the CPU
        // on time: cores × scale × 10 at once (2 at 0.1 on 2 cores), 1 to 16.
        (None, Some(opts)) => live_jobs(opts.time_scale),
        (None, None) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // Files named on the command line, not found by searching a directory:
    // a server named for one of another dialect is a mistake to explain.
    let named: std::collections::BTreeSet<PathBuf> = files.iter().filter(|f| !f.is_dir()).cloned().collect();
    let files = collect(if bundled { vec![bundled_dir()] } else { files })?;
    let explicit = !servers.is_empty();
    let servers = if servers.is_empty() {
        mcpsim::server::known_servers().iter().map(|s| s.to_string()).collect()
    } else {
        servers
    };
    for s in servers.iter().filter(|_| live.is_none()) {
        if !mcpsim::server::is_known_server(s) {
            return Err(Error::usage(format!(
                "unknown server {s:?} (known: {})",
                mcpsim::server::known_servers().join(", ")
            )));
        }
    }
    let plans = load_all(&files)?;
    // A baseline key that names no scenario of the run accepts nothing: a typo.
    if let Some(baseline) = &gate {
        let all: Vec<&Plan> = plans.iter().collect();
        let unknown = baseline.unknown_keys(&all);
        if !unknown.is_empty() {
            return Err(Error::usage(format!(
                "the baseline names no scenario of this run: {} (a key is a scenario name or its file)",
                unknown.join(", ")
            )));
        }
    }
    let mut runs = Runs {
        total: plans.len() * servers.len(),
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
        write_baseline: write_baseline.map(|f| (f, std::collections::BTreeMap::new())),
        counts: (0, 0, 0, 0),
        inherent_runs: 0,
        skipped: std::collections::BTreeMap::new(),
        gate,
        live_skipped: 0,
        not_played: 0,
        missed_reports: Vec::new(),
    };
    // The runs to play, in order; a skipped one is counted where it falls.
    let mut work: Vec<(&Plan, &String)> = Vec::new();
    for plan in &plans {
        for server in &servers {
            // A server that speaks only streamable-http skips legacy-sse scenarios,
            // unless both were asked for by name (then the run explains the
            // mismatch): a file found by searching a directory is skipped, with a note.
            let file_named = plan.source.as_ref().is_some_and(|s| named.contains(s));
            if (!explicit || bundled || !file_named)
                && live.is_none()
                && mcpsim::server::is_known_server(server)
                && !mcpsim::server::speaks(server, plan.dialect)
            {
                let e = runs.skipped.entry(server.clone()).or_default();
                e.0 += 1;
                e.1.insert(plan.dialect.name());
                continue;
            }
            work.push((plan, server));
        }
    }
    // After a Ctrl-C (or SIGTERM) no live run starts: the runs in flight are
    // cut and judged up to the cut, the rest are not played.
    let play = |(plan, server): (&Plan, &String)| match &live {
        Some(_) if mcpsim::live::interrupted().is_some() => None,
        Some(opts) => Some(mcpsim::live::run(plan, opts)),
        None => Some(run_guarded(plan, server, seed, watchdog)),
    };
    // `--jobs` plays several at once; each run is judged and printed in
    // order all the same, as it would be one at a time.
    in_order(&work, jobs, play, |(plan, server), result| match result {
        None => runs.not_played += 1,
        Some(Ok(run)) => runs.judge(plan, run),
        // The live process does not speak this scenario's dialect: skipped, and said so.
        Some(Err(e)) if e.kind == mcpsim::ErrorKind::Dialect => {
            eprintln!("skipped: {e}");
            runs.live_skipped += 1;
        }
        Some(Err(e)) => {
            let on = if live.is_some() { "the live server".to_string() } else { server.clone() };
            eprintln!("error: {} on {on}: {e}", plan.name);
            runs.errored.push((plan.name.clone(), on, e.to_string()));
            runs.code = exit::worst(runs.code, e.exit_code() as u8);
        }
    });
    Ok(runs.finish())
}

/// How many live runs play at once without `--jobs`: max(1, cores × scale ×
/// 10), at most 16. A late run replayed slower counts against it.
fn live_jobs(time_scale: f64) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    ((cores * time_scale * 10.0).floor() as usize).clamp(1, 16)
}

/// Plays `play` on each item, `jobs` at a time, and hands each result to
/// `take` in the items' order, as soon as it and those before it are in.
fn in_order<T: Copy + Sync, R: Send>(
    items: &[T],
    jobs: usize,
    play: impl Fn(T) -> R + Sync,
    mut take: impl FnMut(T, R),
) {
    if jobs <= 1 {
        for &item in items {
            take(item, play(item));
        }
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(items.len()) {
            let (tx, next, play) = (tx.clone(), &next, &play);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&item) = items.get(i) else { break };
                if tx.send((i, play(item))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting = std::collections::BTreeMap::new();
        let mut due = 0;
        for (i, result) in rx {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&due) {
                take(items[due], result);
                due += 1;
            }
        }
    });
}

/// Loads every file, or reports every invalid one: nothing runs unless all load.
fn load_all(files: &[PathBuf]) -> Result<Vec<Plan>, Error> {
    let mut plans = Vec::new();
    let mut invalid = Vec::new();
    for f in files {
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
    Ok(plans)
}

/// One simulated run under the watchdog; a stopped run names its repro.
fn run_guarded(
    plan: &Plan,
    server: &str,
    seed: Option<Seed>,
    watchdog: std::time::Duration,
) -> Result<mcpsim::Run, Error> {
    let (p, s) = (plan.clone(), server.to_string());
    mcpsim::watchdog::guard(watchdog, move || mcpsim::run(&p, &s, seed)).unwrap_or_else(|stopped| {
        Err(mcpsim::Error::io(format!(
            "{stopped}; repro: mcpsim run {} --server {server}{}",
            plan.source.as_deref().map_or(plan.name.clone(), |p| p.display().to_string()),
            seed.map_or(String::new(), |s| format!(" --seed {}", s.0))
        )))
    })
}

/// The runs of one `mcpsim run`: how each is printed and written, and the
/// tally and exit code they add up to.
struct Runs {
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
    write_baseline: Option<(PathBuf, std::collections::BTreeMap<String, Vec<mcpsim::check::CheckId>>)>,
    /// "scenario on server" for each live run whose timing was unreliable.
    unreliable: Vec<String>,
    /// Runs with a finding no server could prevent (counted apart: never a failure by itself).
    inherent_runs: usize,
    /// (as expected, not met, without expectation, timing unreliable)
    counts: (usize, usize, usize, usize),
    /// Runs skipped because the server does not speak the scenario's dialect, per server.
    skipped: std::collections::BTreeMap<String, (usize, std::collections::BTreeSet<&'static str>)>,
    /// `--gate`: the baseline every run is judged against instead of `[expect]`.
    gate: Option<mcpsim::check::gate::Baseline>,
    /// Live: scenarios skipped because the process does not speak their dialect.
    live_skipped: usize,
    /// Live: runs not started because a Ctrl-C (or SIGTERM) came first.
    not_played: usize,
}

impl Runs {
    /// Judges one run, prints it (text) or keeps it (JSON, JUnit), writes
    /// its trace and timeline, and counts it.
    fn judge(&mut self, plan: &Plan, run: mcpsim::Run) {
        let server = run.server.clone();
        let verdicts = mcpsim::check::judge(&run.trace);
        let expectation = match &self.gate {
            Some(baseline) => Some(
                mcpsim::check::gate::gate_plan(plan, &verdicts, baseline)
                    .with_misses(mcpsim::check::missed_steps(plan, &run.trace)),
            ),
            None => mcpsim::check::expectation(plan, &server, &verdicts, &run.trace),
        };
        // A live run whose steps ran late did not play the scenario: its
        // verdicts are not counted, either way.
        let unreliable = run.live.as_ref().is_some_and(|l| l.timing_unreliable());
        // A run cut short played only part of the scenario: never "as expected".
        let expectation = expectation.map(|e| match &run.aborted {
            Some(why) => mcpsim::check::Expectation {
                met: false,
                cut: Some(why.lines().next().unwrap_or_default().to_string()),
                ..e
            },
            None => e,
        });
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
        if let Some((_, entries)) = self.write_baseline.as_mut().filter(|_| !unreliable && run.aborted.is_none()) {
            let checks = entries.entry(file_key(plan)).or_default();
            for c in mcpsim::check::gate::failing(&verdicts) {
                if !checks.contains(&c) {
                    checks.push(c);
                }
            }
        }
        if unreliable {
            self.unreliable.push(format!("{} on {server}", run.scenario));
            self.code = exit::worst(self.code, exit::TIMING);
        } else if let Some(e) = expectation.as_ref().filter(|_| stale_only) {
            self.stale.push(format!("{}: {}", file_key(plan), e.stale.join(", ")));
            self.code = exit::worst(self.code, exit::FINDING);
        } else if expectation.as_ref().is_some_and(|e| !e.met) {
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
        if let Some(t) = &self.trace {
            let path =
                if self.total == 1 { t.clone() } else { t.join(format!("{}.{}.jsonl", run.scenario, run.server)) };
            if let Err(e) = write_trace(&path, &run.trace.to_jsonl()) {
                self.io_errors.push(e);
            }
        }
        if self.format != RunFormat::Text {
            // The console says why each run failed, whatever goes to stdout.
            if !unreliable && expectation.as_ref().is_some_and(|e| !e.met) {
                eprintln!("{} on {server} (seed {}): {}", run.scenario, run.seed, failing_headlines(&verdicts));
            }
            self.judged.push((run, verdicts, expectation));
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
    fn finish(mut self) -> u8 {
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
        // Servers skipped alike are named together.
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
            tally.push_str(&format!(
                "; {n} {skipped} scenario(s) skipped for {}, which {speak} only {its}",
                servers.join(", ")
            ));
        }
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
}

pub(crate) fn write_trace(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("{}: cannot create directory: {e}", dir.display())))?;
        }
    }
    std::fs::write(path, text).map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))
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
