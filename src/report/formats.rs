//! Machine-readable reports: JSON (a stable, documented schema) and JUnit XML.
//!
//! # JSON schema `mcpsim.run-report/1`
//!
//! ```text
//! {
//!   "schema": "mcpsim.run-report/1",
//!   "runs": [{
//!     "scenario": str, "file": str|null, "server": str, "seed": u64,
//!     "repro": str, "outcome": str, "aborted": str|null,
//!     "missed_steps": [{"step": u64, "do": str, "t": u64 (µs), "why": str}]
//!                                       (only when a step acted on nothing),
//!     "live": {"command": str, "time_scale": f64, "reproducible": false,
//!              "notes": [str], "timing_unreliable": bool,
//!              "lateness_bound_us": u64,
//!              "late_steps": [{"step": u64, "do": str, "due_us": u64, "ran_us": u64}],
//!              "late_waits": [str], "max_time_scale": f64,
//!              "replayed": [{"time_scale": f64, "why": str}]}
//!                                       (live runs only; a timing-unreliable
//!                                        run's expectation is not counted;
//!                                        `replayed`: earlier tries that were
//!                                        late, played again slower),
//!     "verdicts": [{
//!       "check": str,
//!       "status": "passed" | "violated" | "not-applicable",
//!       "why": str            (not-applicable only),
//!       "violations": [{      (violated only)
//!         "check": str, "headline": str, "t": u64 (µs),
//!         "evidence": [u64] (trace seq numbers), "inherent": true (only when set)
//!       }]
//!     }],
//!     "expectation": {"expected": [str], "violated": [str], "met": bool,
//!                     "expected_inherent": [str], "inherent": [str]
//!                                 (only when not empty: of the checks, those
//!                                  [expect_inherent] names, and those violated
//!                                  only inherently),
//!                     "missed": [str]  (only when not empty: steps that acted on
//!                                       nothing without may_miss; met is then false),
//!                     "gate": true, "stale": [str]   (run --gate only: expected is what the
//!                                                     baseline accepts, violated the checks
//!                                                     with a violation that is not inherent,
//!                                                     stale the accepted checks that no
//!                                                     longer fail),
//!                     "cut": str  (a run cut short: why; met is then false)} | null
//!   }],
//!   "summary": {"runs": u64, "met": u64, "unmet": u64, "without_expectation": u64,
//!               "timing_unreliable": u64}
//! }
//! ```
//! Fields are only ever added, never renamed or removed, within `/1`.

use crate::check::{Expectation, Verdict};
use crate::trace::Run;
use serde::Serialize;

/// One judged run, as the reports carry it.
pub struct Judged<'a> {
    /// The run: its trace, and what it was a run of.
    pub run: &'a Run,
    /// Every check's verdict on it.
    pub verdicts: &'a [Verdict],
    /// Whether the scenario's `[expect]` for this server was met, if it has one.
    pub expectation: Option<&'a Expectation>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema: &'static str,
    runs: Vec<JsonRun<'a>>,
    summary: Summary,
}

#[derive(Serialize)]
struct JsonRun<'a> {
    scenario: &'a str,
    file: Option<String>,
    server: &'a str,
    seed: u64,
    repro: String,
    outcome: String,
    aborted: Option<&'a str>,
    /// Only for live runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<JsonLive<'a>>,
    /// Steps that acted on nothing (absent when none did).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    missed_steps: Vec<JsonMissed>,
    verdicts: &'a [Verdict],
    expectation: Option<&'a Expectation>,
}

/// A step that acted on nothing.
#[derive(Serialize)]
struct JsonMissed {
    step: usize,
    #[serde(rename = "do")]
    action: String,
    t: u64,
    why: String,
}

/// How a live run was made.
#[derive(Serialize)]
struct JsonLive<'a> {
    command: &'a str,
    time_scale: f64,
    reproducible: bool,
    notes: &'a [String],
    timing_unreliable: bool,
    lateness_bound_us: u64,
    late_steps: Vec<JsonLateStep<'a>>,
    late_waits: &'a [String],
    max_time_scale: f64,
    replayed: Vec<JsonEarlier<'a>>,
}

/// A live try that was late, and replayed slower.
#[derive(Serialize)]
struct JsonEarlier<'a> {
    time_scale: f64,
    why: &'a str,
}

/// A live step that ran late.
#[derive(Serialize)]
struct JsonLateStep<'a> {
    step: usize,
    #[serde(rename = "do")]
    action: &'a str,
    due_us: u64,
    ran_us: u64,
}

/// Whether a run's timing was unreliable (a live step ran late): its
/// expectation is then not counted either way.
fn unreliable(j: &Judged) -> bool {
    j.run.live.as_ref().is_some_and(|l| l.timing_unreliable())
}

#[derive(Serialize)]
struct Summary {
    runs: usize,
    met: usize,
    unmet: usize,
    without_expectation: usize,
    timing_unreliable: usize,
}

fn summary(runs: &[Judged]) -> Summary {
    let judged = || runs.iter().filter(|j| !unreliable(j));
    Summary {
        runs: runs.len(),
        met: judged().filter(|j| j.expectation.is_some_and(|e| e.met)).count(),
        unmet: judged().filter(|j| j.expectation.is_some_and(|e| !e.met)).count(),
        without_expectation: judged().filter(|j| j.expectation.is_none()).count(),
        timing_unreliable: runs.iter().filter(|j| unreliable(j)).count(),
    }
}

/// The JSON report of several runs.
pub fn json(runs: &[Judged]) -> String {
    let report = JsonReport {
        schema: "mcpsim.run-report/1",
        runs: runs
            .iter()
            .map(|j| JsonRun {
                scenario: &j.run.scenario,
                file: j.run.source.as_ref().map(|p| p.display().to_string()),
                server: &j.run.server,
                seed: j.run.seed.0,
                repro: j.run.repro(),
                outcome: super::outcome(j.run),
                aborted: j.run.aborted.as_deref(),
                missed_steps: crate::trace::step_misses(&j.run.trace)
                    .into_iter()
                    .map(|m| JsonMissed { step: m.index, action: m.action, t: m.t.0, why: m.why })
                    .collect(),
                live: j.run.live.as_ref().map(|l| JsonLive {
                    command: &l.command,
                    time_scale: l.time_scale,
                    reproducible: false,
                    notes: &l.notes,
                    timing_unreliable: l.timing_unreliable(),
                    lateness_bound_us: l.lateness_bound.as_micros() as u64,
                    late_steps: l
                        .late_steps
                        .iter()
                        .map(|s| JsonLateStep {
                            step: s.index,
                            action: &s.action,
                            due_us: s.due.as_micros() as u64,
                            ran_us: s.ran.as_micros() as u64,
                        })
                        .collect(),
                    late_waits: &l.late_waits,
                    max_time_scale: l.max_time_scale,
                    replayed: l.earlier.iter().map(|e| JsonEarlier { time_scale: e.time_scale, why: &e.why }).collect(),
                }),
                verdicts: j.verdicts,
                expectation: j.expectation,
            })
            .collect(),
        summary: summary(runs),
    };
    serde_json::to_string_pretty(&report).expect("reports serialize")
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' && c != '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one testsuite per scenario, one testcase per (scenario, server).
/// An unmet expectation is a `<failure>` whose body is the verdicts with their
/// evidence; a run without an expectation for its server is `<skipped>`.
pub fn junit(runs: &[Judged]) -> String {
    junit_with_errors(runs, &[])
}

/// A run that errored before it could be judged (its server did not say
/// `ready`, say): `(scenario, server, what went wrong)`.
pub type Errored = (String, String, String);

/// [`junit`], with the runs that errored before they were judged: each is
/// a test case with an `<error>`, so that the XML has one per run.
pub fn junit_with_errors(runs: &[Judged], errored: &[Errored]) -> String {
    let mut suites: Vec<(&str, Vec<&Judged>)> = Vec::new();
    for j in runs {
        match suites.iter_mut().find(|(name, _)| *name == j.run.scenario) {
            Some((_, v)) => v.push(j),
            None => suites.push((&j.run.scenario, vec![j])),
        }
    }
    for (scenario, _, _) in errored {
        if !suites.iter().any(|(name, _)| name == scenario) {
            suites.push((scenario, Vec::new()));
        }
    }
    let s = summary(runs);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"mcpsim\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
        s.runs + errored.len(),
        s.unmet,
        s.timing_unreliable + errored.len(),
        s.without_expectation
    ));
    for (name, cases) in suites {
        let failed: Vec<&Errored> = errored.iter().filter(|e| e.0 == name).collect();
        let failures = cases.iter().filter(|j| !unreliable(j) && j.expectation.is_some_and(|e| !e.met)).count();
        let errors = cases.iter().filter(|j| unreliable(j)).count() + failed.len();
        let skipped = cases.iter().filter(|j| !unreliable(j) && j.expectation.is_none()).count();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n",
            xml_escape(name),
            cases.len() + failed.len()
        ));
        for (_, server, what) in failed {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">\n      <error message=\"{}\" type=\"error\"/>\n    </testcase>\n",
                xml_escape(name),
                xml_escape(server),
                xml_escape(what)
            ));
        }
        for j in cases {
            junit_case(&mut out, name, j);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// One run's JUnit test case: its seed, and a `<failure>` when its
/// expectation was not met (an `<error>` when its timing was unreliable,
/// `<skipped>` with no expectation).
fn junit_case(out: &mut String, name: &str, j: &Judged) {
    // No `time` attribute (it is optional): CI systems read it as wall
    // time, and no wall clock may reach a report (docs/design.md §3: the same
    // runs give byte-identical reports). The simulated time is a property.
    out.push_str(&format!(
        "    <testcase classname=\"{}\" name=\"{}\">\n",
        xml_escape(name),
        xml_escape(&j.run.server)
    ));
    out.push_str(&format!(
        "      <properties><property name=\"simulated_seconds\" value=\"{:.3}\"/><property name=\"seed\" value=\"{}\"/></properties>\n",
        j.run.duration.as_secs_f64(),
        j.run.seed
    ));
    let timing = j.run.live.as_ref().and_then(|l| l.timing_words());
    match j.expectation {
        _ if timing.is_some() => out.push_str(&format!(
            "      <error message=\"{}\" type=\"timing\"/>\n",
            xml_escape(timing.as_deref().unwrap_or_default())
        )),
        None => out.push_str("      <skipped message=\"no [expect] entry for this server\"/>\n"),
        Some(e) if !e.met => {
            out.push_str(&format!(
                "      <failure message=\"{}\" type=\"{}\">{}\n{}</failure>\n",
                xml_escape(&super::expectation_line(&j.run.server, e)),
                if e.gate { "gate" } else { "expectation" },
                xml_escape(&super::verdicts_text(j.run, j.verdicts)),
                xml_escape(&format!("repro: {}", j.run.repro()))
            ));
        }
        Some(_) => {}
    }
    out.push_str(&format!(
        "      <system-out>{}</system-out>\n",
        xml_escape(&format!("seed {} · repro: {}", j.run.seed, j.run.repro()))
    ));
    out.push_str("    </testcase>\n");
}

/// ANSI colour for the text report: verdict words stand out on a terminal.
pub fn colorize(text: &str) -> String {
    text.replace(" VIOLATED ", " \x1b[1;31mVIOLATED\x1b[0m ")
        .replace(" passed\n", " \x1b[32mpassed\x1b[0m\n")
        .replace("EXPECTATION NOT MET", "\x1b[1;31mEXPECTATION NOT MET\x1b[0m")
        .replace("GATE FAILED", "\x1b[1;31mGATE FAILED\x1b[0m")
        .replace("NOT JUDGED IN FULL", "\x1b[1;31mNOT JUDGED IN FULL\x1b[0m")
        .replace("gate passed", "\x1b[32mgate passed\x1b[0m")
        .replace("expectation met", "\x1b[32mexpectation met\x1b[0m")
}
