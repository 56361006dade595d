//! The HTML timeline in a real browser: headless Chromium renders the
//! timelines of both canonical scenarios; the rendered DOM must hold one arrow
//! per message event of the trace, mark every violation, and a screenshot is
//! saved. `.ci/run` installs Debian's `chromium` when it is missing; without
//! a browser (outside CI) the render test is ignored, with its reason, and
//! the static check of the same HTML still runs.

mod common;
use common::harness::{run, Case};

fn main() {
    let missing = chromium().is_none().then(|| "chromium is not installed (apt-get install chromium)".to_string());
    run(vec![
        Case::new("canonical_timelines_hold_every_message_and_violation", || check_timelines(None)),
        Case::new("canonical_timelines_render_in_chromium", || check_timelines(chromium())).needs(&missing),
    ])
}

use mcpsim::scenario::Plan;
use mcpsim::trace::{Purpose, What};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    let candidates = [
        std::env::var("MCPSIM_CHROMIUM").ok(),
        Some("/usr/bin/chromium".into()),
        Some("/usr/bin/chromium-browser".into()),
    ];
    candidates.into_iter().flatten().map(PathBuf::from).find(|p| p.exists())
}

fn headless(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The message events the timeline must draw, by trace seq.
fn message_seqs(run: &mcpsim::Run, evidence: &BTreeSet<u64>) -> BTreeSet<u64> {
    let mut purposes = BTreeMap::new();
    let mut out = BTreeSet::new();
    for e in run.trace.iter() {
        match &e.what {
            What::Connect { client, conn, purpose, .. } => {
                purposes.insert((client.clone(), *conn), *purpose);
            }
            What::HttpRequest { client, conn, .. }
                if purposes.get(&(client.clone(), *conn)) == Some(&Purpose::Uplink) =>
            {
                out.insert(e.seq);
            }
            What::HttpResponse { client, conn, status, .. }
                if purposes.get(&(client.clone(), *conn)) == Some(&Purpose::Uplink) || *status >= 300 =>
            {
                out.insert(e.seq);
            }
            What::SseEvent { .. } | What::Answer { .. } => {
                out.insert(e.seq);
            }
            What::DroppedWrite { events, .. } if !events.is_empty() || evidence.contains(&e.seq) => {
                out.insert(e.seq);
            }
            _ => {}
        }
    }
    out
}

/// `data-seq` values of elements whose class list starts with `msg`, and of those also marked `violation`.
fn drawn(dom: &str) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let (mut all, mut vio) = (BTreeSet::new(), BTreeSet::new());
    for chunk in dom.split("<g class=\"msg ").skip(1) {
        let head = &chunk[..chunk.find('>').unwrap_or(chunk.len())];
        let classes = &head[..head.find('"').unwrap_or(0)];
        let seq: u64 = head
            .split("data-seq=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|s| s.parse().ok())
            .expect("data-seq");
        all.insert(seq);
        if classes.split(' ').any(|c| c == "violation") {
            vio.insert(seq);
        }
    }
    (all, vio)
}

/// The canonical timelines, checked in the DOM Chromium renders from them
/// (with a screenshot each), or, without a browser, in the HTML itself.
fn check_timelines(browser: Option<PathBuf>) {
    let area = if browser.is_some() { "timelines" } else { "timelines-static" };
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(area);
    std::fs::create_dir_all(&out_dir).unwrap();
    for (scenario, server) in [
        ("nat-rebind", "naive"),
        ("nat-rebind", "guarded"),
        ("second-client-leak", "naive"),
        ("second-client-leak", "guarded"),
    ] {
        let plan = Plan::load(format!("scenarios/{scenario}.toml").as_ref()).unwrap();
        let run = mcpsim::run(&plan, server, None).unwrap();
        let verdicts = mcpsim::check::judge(&run.trace);
        let html = mcpsim::report::timeline_html(&run, &verdicts);
        let file = out_dir.join(format!("{scenario}.{server}.html"));
        std::fs::write(&file, &html).unwrap();

        let dom = match &browser {
            Some(b) => {
                let profile = out_dir.join(format!("profile-{scenario}-{server}"));
                let out = headless(b, &profile).arg("--dump-dom").arg(&file).output().expect("chromium runs");
                assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
                let shot = out_dir.join(format!("{scenario}.{server}.png"));
                let status = headless(b, &profile)
                    .arg(format!("--screenshot={}", shot.display()))
                    // The window fits the chart: no empty area below it.
                    .arg(window_size(&html))
                    .arg(&file)
                    .output()
                    .expect("chromium runs");
                assert!(status.status.success());
                assert!(
                    std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false),
                    "screenshot saved: {}",
                    shot.display()
                );
                String::from_utf8(out.stdout).unwrap()
            }
            None => html.clone(),
        };
        let evidence: BTreeSet<u64> =
            verdicts.iter().flat_map(|v| v.violations().iter().flat_map(|x| x.evidence.clone())).collect();
        let expected = message_seqs(&run, &evidence);
        let (all, vio) = drawn(&dom);
        assert_eq!(all, expected, "{scenario} on {server}: one arrow per message event");
        // Every violation is listed, and each one's message evidence is highlighted.
        let listed = dom.matches("<li class=\"vio\"").count();
        let violations: usize = verdicts.iter().map(|v| v.violations().len()).sum();
        assert_eq!(listed, violations, "{scenario} on {server}");
        let marked: BTreeSet<u64> = evidence.intersection(&expected).copied().collect();
        assert_eq!(vio, marked, "{scenario} on {server}: violation arrows");
        if server == "naive" {
            assert!(!vio.is_empty(), "{scenario}: the naive run's violation is on the chart");
        }
    }
}

/// `--window-size=W,H` that fits the chart's SVG plus the heading, legend and
/// violation list above it.
fn window_size(html: &str) -> String {
    let svg = &html[html.find("<svg xmlns").expect("an svg")..];
    let attr = |name: &str| -> f64 {
        let at = svg.find(&format!(" {name}=\"")).expect("svg size") + name.len() + 3;
        svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
    };
    let lines = html.matches("<li").count() as f64;
    format!("--window-size={:.0},{:.0}", attr("width").max(900.0) + 40.0, attr("height") - 120.0 + lines * 8.0)
}
