//! `mcpsim hunt`, `hunt merge` and `replay`: seeded bug hunts and their repros.

use crate::cli::{DialectArg, Format, HuntArgs};
use crate::cmd::run::write_trace;
use crate::exit;
use mcpsim::hunt::{HuntOptions, Limit, Progress};
use mcpsim::Error;
use std::path::PathBuf;

pub(crate) fn hunt(a: HuntArgs) -> Result<u8, Error> {
    let opts = options(&a)?;
    let text = a.format == Format::Text;
    eprintln!(
        "hunt: server {}, base seed {}, shard {}/{}, {} job(s)\nrepeat: {}",
        opts.server,
        opts.base_seed,
        a.shard.0,
        a.shard.1,
        opts.jobs,
        opts.repeat_command()
    );
    // Wall clock only for the seeds/s line on stderr.
    let started = std::time::Instant::now();
    let mut report = run_with_progress(&opts, text)?;
    if opts.live.is_some() && !report.bugs.is_empty() && report.stopped.is_none() {
        eprintln!("replaying each bug's first seed live {} times...", mcpsim::hunt::LIVE_REPLAYS);
        mcpsim::hunt::confirm_live(&opts, &mut report)?;
    }
    // Throughput is wall-clock: it goes to stderr with the progress, never into the results.
    let wall = started.elapsed().as_secs_f64();
    if opts.live.is_some() {
        // Live plans play in real time: a rate per minute reads better.
        let per_min = report.seeds_run as f64 * 60.0 / wall.max(1e-9);
        eprintln!("{} plans played live in {wall:.1} s ({per_min:.0} plans/min, replays included)", report.seeds_run);
    } else {
        eprintln!(
            "{} seeds in {wall:.1} s ({:.0} seeds/s)",
            report.seeds_run,
            report.seeds_run as f64 / wall.max(1e-9)
        );
    }
    let summary = summary(&report, &opts);
    if text {
        out!("{summary}");
    } else {
        eprintln!("{summary}");
        out!("{}", serde_json::to_string_pretty(&report).expect("report serializes"));
    }
    // A bug found outranks seeds that could not be judged (exit order: 1, 4, 0).
    Ok(if !report.bugs.is_empty() {
        exit::FINDING
    } else if !report.harness_failures.is_empty() || report.stopped.is_some() {
        exit::IO
    } else {
        exit::OK
    })
}

/// The hunt the flags describe.
fn options(a: &HuntArgs) -> Result<HuntOptions, Error> {
    let live = live_options(a)?;
    let server = match (&a.server, &live) {
        (Some(s), _) => s.clone(),
        (None, Some(_)) => "live".to_string(),
        (None, None) => {
            return Err(Error::usage("mcpsim hunt needs --server NAME (see `mcpsim list servers`) or --live COMMAND"))
        }
    };
    if live.is_none() && !mcpsim::server::is_known_server(&server) {
        return Err(Error::usage(format!(
            "unknown server {server:?} (known: {})",
            mcpsim::server::known_servers().join(", ")
        )));
    }
    // The base seed is the one input not derived from anything: when the user
    // gives none, draw it from the clock once and print it, so the hunt can be repeated.
    let base_seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 % 1_000_000_000)
    });
    let limit = match (a.seeds, a.time) {
        (_, Some(t)) => Limit::Time(t),
        (Some(n), None) => Limit::Seeds(n),
        (None, None) => Limit::Seeds(1000),
    };
    Ok(HuntOptions {
        server: server.clone(),
        base_seed,
        limit,
        jobs: a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        shard: a.shard,
        out: (!a.no_shrink).then(|| a.out.clone()),
        check_determinism: a.check_determinism,
        // Live, every candidate is a real run of a few seconds: a small budget.
        shrink_budget: a.shrink_runs.map_or(if live.is_some() { 20 } else { 300 }, |n| n as usize),
        max_bugs: if a.stop_on_first { Some(1) } else { a.max_findings.map(|n| n as usize) },
        dialect: match (a.dialect, &live, a.replicas) {
            (None, Some(_), 1) => mcpsim::scenario::Dialect::StreamableHttp,
            // Replicas hunt stateless-http unless --dialect names a stateful one.
            (None, _, n) if n > 1 => mcpsim::scenario::Dialect::StatelessHttp,
            (d, _, _) => DialectArg::resolve(d, &server),
        },
        replicas: a.replicas,
        watchdog: a.watchdog,
        plug: None,
        live,
    })
}

/// `--live` and its settings: a generated plan (30 s) at scale 0.1 takes 3 s.
fn live_options(a: &HuntArgs) -> Result<Option<mcpsim::live::LiveOptions>, Error> {
    let Some(command) = &a.live else { return Ok(None) };
    let mut opts = mcpsim::live::LiveOptions::new(command.clone());
    opts.config = a.config.config();
    opts.time_scale = a.time_scale.unwrap_or(0.1);
    if !(opts.time_scale > 0.0 && opts.time_scale.is_finite()) {
        return Err(Error::usage(format!("--time-scale must be a positive number, not {}", opts.time_scale)));
    }
    if let Some(s) = a.ready_timeout {
        opts.ready_timeout = std::time::Duration::try_from_secs_f64(s)
            .map_err(|_| Error::usage(format!("--ready-timeout must be a number of seconds, not {s}")))?;
    }
    Ok(Some(opts))
}

/// Runs the hunt behind a progress bar (stderr), printing each new bug and
/// harness failure as it comes (stdout for text, stderr beside JSON).
fn run_with_progress(opts: &HuntOptions, text: bool) -> Result<mcpsim::hunt::HuntReport, Error> {
    // A bar with an ETA for a seed count; a spinner for a time budget.
    let (bar, template) = match opts.limit {
        Limit::Seeds(n) => (indicatif::ProgressBar::new(n), "{bar:30} {pos}/{len} seeds  {per_sec}  eta {eta}  {msg}"),
        Limit::Time(_) => (indicatif::ProgressBar::new_spinner(), "{spinner} {pos} seeds  {per_sec}  {elapsed}  {msg}"),
    };
    bar.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
    let say = |lines: String| bar.suspend(|| if text { out!("{lines}") } else { eprintln!("{lines}") });
    let report = mcpsim::hunt::hunt(opts, |p| match p {
        Progress::SeedDone { failing, bugs } => {
            bar.inc(1);
            bar.set_message(format!("failing: {failing}, distinct bugs: {bugs}"));
        }
        Progress::NewBug(b) => say(new_bug_lines(b)),
        Progress::HarnessFailure(h) => {
            say(format!("harness failure: seed {}: {}\n  repro: {}", h.seed, h.why, h.repro))
        }
    });
    bar.finish_and_clear();
    report
}

/// The closing summary: the table of bugs, harness failures, how to hunt
/// the same seeds again, reach, determinism, and where the files are.
fn summary(report: &mcpsim::hunt::HuntReport, opts: &HuntOptions) -> String {
    let mut summary = bug_table(report);
    if !report.harness_failures.is_empty() {
        summary.push_str(&format!(
            "\n{} harness failure(s) (the watchdog stopped them, or a live server did not play; no verdict): seeds {}",
            report.harness_failures.len(),
            report.harness_failures.iter().map(|h| h.seed.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(why) = &report.stopped {
        summary.push_str(&format!(
            "\nthe hunt stopped early: {why}; the table covers the {} seed(s) judged",
            report.seeds_run
        ));
    }
    let stopped_early = report.stopped.is_some()
        || opts.max_bugs.is_some_and(|m| report.bugs.len() >= m)
            && matches!(opts.limit, Limit::Seeds(n) if report.seeds_run < n);
    if stopped_early || matches!(opts.limit, Limit::Time(_)) {
        // How many seeds a time budget (or a stopping rule) covers depends on
        // the machine or the server; the seeds it covered do not (they are
        // contiguous from the base seed).
        let exact = HuntOptions { limit: Limit::Seeds(report.seeds_run), max_bugs: None, ..opts.clone() };
        summary.push_str(&format!("\nthe same seeds again: {}", exact.repeat_command()));
    }
    if report.seeds_run > 0 {
        summary.push_str("\nreach (seeds that got into each hard situation, read from their traces):");
        let rows = mcpsim::hunt::situations(opts.dialect);
        // The label column fits the longest label (48 at least), so that the counts align.
        let width = rows.iter().map(|s| s.len()).max().unwrap_or(0).max(48);
        for &s in rows {
            let n = report.reach.get(s).copied().unwrap_or(0);
            summary.push_str(&format!("\n  {s:<width$} {n:>7} ({:.1} %)", 100.0 * n as f64 / report.seeds_run as f64));
        }
        // A generated fault may hit nothing (a rebind before any connection
        // opened): the faults that landed are the ones that tested anything.
        if !report.faults.is_empty() {
            summary.push_str("\nfaults that landed (acted on a connection, client, state or replica) / drawn:");
            for (kind, [applied, landed]) in &report.faults {
                let pct = if *applied == 0 { 0.0 } else { 100.0 * *landed as f64 / *applied as f64 };
                summary.push_str(&format!("\n  {kind:<width$} {landed:>7} / {applied} ({pct:.1} %)"));
            }
        }
    }
    if opts.check_determinism {
        let differed = report.nondeterministic_seeds();
        summary.push_str(&if differed == 0 {
            format!("\ndeterminism: all {} seeds were run twice and gave byte-identical traces", report.seeds_run)
        } else {
            format!("\ndeterminism: {differed} of {} seeds run twice gave different traces", report.seeds_run)
        });
    }
    if report.bugs.iter().any(|b| b.file.is_some()) {
        if let Some(dir) = &opts.out {
            summary.push_str(&format!(
                "\nregression files (one per distinct bug) in {}: read one, then keep it by moving it into scenarios/regressions/ (mcpsim run runs it from there)",
                dir.display()
            ));
        }
    }
    summary
}

/// How a new distinct bug is announced while the hunt runs.
fn new_bug_lines(b: &mcpsim::hunt::Bug) -> String {
    let mut lines = format!("new bug {} at seed {}: {}\n  repro: {}", b.id, b.first_seed, b.headline, b.repro);
    if let (Some(path), Some(steps)) = (&b.file, b.steps) {
        let shape = b.signature.split(" | ").nth(1).unwrap_or("");
        lines.push_str(&format!(
            "\n  violates {} in {steps} step(s) ({shape})\n  regression: {path}: mcpsim run {path}",
            b.checks.join(", ")
        ));
    }
    if let Some(nd) = &b.nondeterminism {
        lines.push_str(&format!("\n  nondeterminism: {nd}"));
    }
    lines
}

/// The summary: one row per distinct bug, most often hit first.
fn bug_table(report: &mcpsim::hunt::HuntReport) -> String {
    let mut t = format!(
        "hunted {} seeds: {} failing, {} distinct bug(s)",
        report.seeds_run,
        report.failing_seeds,
        report.bugs.len()
    );
    if report.bugs.is_empty() {
        return t;
    }
    t.push_str(&format!(
        "\n  {:<8}  {:>6}  {:>10}  {:>5}  {:<40}  regression",
        "bug", "seeds", "first seed", "steps", "checks"
    ));
    for b in &report.bugs {
        let steps = b.steps.map_or("-".to_string(), |s| s.to_string());
        let replayed = b.replayed.map(|(again, of)| {
            let how = if again == of { "reproducible" } else { "flaky" };
            format!("(live: {how}, {again}/{of} replays)")
        });
        let file = match (b.file.as_deref(), replayed) {
            (Some(f), Some(r)) => format!("{f} {r}"),
            (None, Some(r)) => r,
            (f, None) => f.unwrap_or("(not shrunk)").to_string(),
        };
        t.push_str(&format!(
            "\n  {:<8}  {:>6}  {:>10}  {:>5}  {:<40}  {file}",
            b.id,
            b.seeds,
            b.first_seed,
            steps,
            b.checks.join(", ")
        ));
    }
    // A shrunk bug's signature ("check | defect") is what went wrong first
    // in its reproducer; an unshrunk one's ("unshrunk | check | defect") is
    // its check's first violation in its first seed. The table has the check.
    if report.bugs.iter().any(|b| b.file.is_some()) {
        t.push_str("\nwhat went wrong first in each bug's reproducer:");
    } else {
        t.push_str("\nthe defect each bug's check showed first (not shrunk):");
    }
    for b in &report.bugs {
        let defect = b.signature.rsplit(" | ").next().unwrap_or(&b.signature);
        t.push_str(&format!("\n  {:<8}  {defect}", b.id));
    }
    t
}

pub(crate) fn merge(files: Vec<PathBuf>) -> Result<u8, Error> {
    let mut reports = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| Error::io(format!("{}: cannot read: {e}", f.display())))?;
        let r: mcpsim::hunt::HuntReport = serde_json::from_str(&text)
            .map_err(|e| Error::usage(format!("{}: not a `mcpsim hunt --format json` report: {e}", f.display())))?;
        reports.push(r);
    }
    let merged = mcpsim::hunt::merge(reports)?;
    // The table for the reader on stderr; the merged report, to merge again, on stdout.
    eprintln!("{}", bug_table(&merged));
    out!("{}", serde_json::to_string_pretty(&merged).expect("report serializes"));
    Ok(if merged.bugs.is_empty() { exit::OK } else { exit::FINDING })
}

pub(crate) fn replay(
    server: String,
    seed: u64,
    (dialect, replicas): (mcpsim::scenario::Dialect, u32),
    trace: Option<PathBuf>,
    timeline: Option<PathBuf>,
    scenario: Option<PathBuf>,
) -> Result<u8, Error> {
    if !mcpsim::server::is_known_server(&server) {
        return Err(Error::usage(format!(
            "unknown server {server:?} (known: {})",
            mcpsim::server::known_servers().join(", ")
        )));
    }
    let plan = mcpsim::hunt::generate_for(seed, dialect, replicas)?;
    let run = mcpsim::run(&plan, &server, None)?;
    let verdicts = mcpsim::check::judge(&run.trace);
    let mut text = mcpsim::report::text(&run, &verdicts, None);
    // A generated plan has no file: its repro is the replay itself.
    let mut flag = mcpsim::hunt::dialect_flag(&server, dialect);
    if replicas > 1 {
        flag.push_str(&format!(" --replicas {replicas}"));
    }
    text = text.replace(&run.repro(), &format!("mcpsim replay --server {server}{flag} --seed {seed}"));
    if let Some(t) = &timeline {
        write_trace(t, &mcpsim::report::timeline_html(&run, &verdicts))?;
        text.push_str(&format!("timeline: {}\n", t.display()));
    }
    out!("{text}");
    if let Some(t) = trace {
        write_trace(&t, &run.trace.to_jsonl())?;
    }
    if let Some(f) = scenario {
        let flag = mcpsim::hunt::dialect_flag(&server, dialect);
        let header = [format!("The plan of hunt seed {seed}: mcpsim replay --server {server}{flag} --seed {seed}")];
        write_trace(&f, &plan.to_toml(&header))?;
    }
    let finding = verdicts.iter().any(|v| v.violations().iter().any(|x| !x.inherent)) || run.aborted.is_some();
    Ok(if finding { exit::FINDING } else { exit::OK })
}
