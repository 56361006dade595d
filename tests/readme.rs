//! The README's example outputs are real: each `text` block that starts with
//! a command is compared with what that command prints today (every line of
//! the block must appear in the output; `...` elides), and the authoring
//! guide's error is the loader's.

use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The ```text blocks, in order.
fn text_blocks(md: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for line in md.lines() {
        match (&mut cur, line.trim_start()) {
            (None, "```text") => cur = Some(Vec::new()),
            (Some(_), "```") => out.push(cur.take().unwrap()),
            (Some(b), _) => b.push(line.to_string()),
            _ => {}
        }
    }
    out
}

mod common;

/// The binary's stdout, then its stderr.
fn mcpsim(args: &[&str]) -> String {
    let out = common::mcpsim(args);
    common::text(&out.stdout) + &common::text(&out.stderr)
}

#[test]
fn example_run_outputs_match_real_runs() {
    let blocks = text_blocks(&readme());
    let mut output: Option<String> = None;
    let mut checked = 0;
    for block in blocks {
        let first = block.first().map(String::as_str).unwrap_or("");
        if let Some(cmd) = first.strip_prefix("$ cargo run -- run ") {
            output = Some(mcpsim(&["run"].into_iter().chain(cmd.split_whitespace()).collect::<Vec<_>>()));
        } else if first.starts_with('$') {
            // Other commands (hunts) are tested in tests/cli.rs.
            output = None;
            continue;
        } else if !first.starts_with("checks:") {
            output = None;
            continue;
        }
        let Some(out) = &output else { continue };
        let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
        for l in block.iter().filter(|l| !l.starts_with('$') && l.trim() != "...") {
            assert!(lines.contains(&l.trim_end()), "README line not in the real output:\n{l}\n--- output ---\n{out}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "the README's run examples were found ({checked} lines)");
}

#[test]
fn the_authoring_guides_error_is_the_loaders() {
    let md = readme();
    // The guide's scenario, with the typo the guide shows.
    let start = md
        .find("```toml\n#:schema ./mcpsim.schema.json\n[scenario]\nname = \"my-resume\"")
        .expect("the guide's scenario");
    let body = &md[start + "```toml\n".len()..];
    let toml = &body[..body.find("```").unwrap()];
    assert_eq!(toml.matches("do = \"rebind\"").count(), 1, "the guide's scenario has one rebind step");
    let typo = toml.replace("do = \"rebind\"", "do = \"rebnd\"");
    let err = mcpsim::scenario::Plan::from_toml_str(&typo, "my-resume.toml").unwrap_err().to_string();
    let first = err.lines().next().unwrap();
    assert!(md.contains(&format!("error: {first}")), "README should show: error: {first}");
}

/// The README's "Use it from your own `cargo test`" snippet, on a bundled
/// scenario (the snippet's file is the reader's own).
#[test]
fn the_own_cargo_test_snippet_works() {
    let md = readme();
    assert!(md.contains("let run = mcpsim::run(&plan, \"guarded\", None).unwrap();"));
    assert!(md.contains("let e = check::expectation(&plan, \"guarded\", &verdicts).unwrap();"));
    use mcpsim::{check, scenario::Plan};
    let plan = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/window-edge.toml")).unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let verdicts = check::judge(&run.trace);
    let e = check::expectation(&plan, "guarded", &verdicts).unwrap();
    assert!(e.met, "{}", mcpsim::report::text(&run, &verdicts, Some(&e)));
}
