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

/// Holds a README block to the real output, in order: the block's lines,
/// split at `...`, are runs of consecutive output lines, each after the
/// one before. Returns how many lines were compared.
fn in_order(block: &[String], out: &str) -> usize {
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    let wanted: Vec<&str> = block.iter().filter(|l| !l.starts_with('$')).map(|l| l.trim_end()).collect();
    let mut from = 0;
    for run in wanted.split(|l| l.trim() == "...").filter(|r| !r.is_empty()) {
        let at = (from..=lines.len().saturating_sub(run.len())).find(|&i| lines[i..i + run.len()] == *run);
        let Some(at) = at else {
            panic!(
                "README lines not in the real output, consecutive and after the lines before them:\n{}\n--- output ---\n{out}",
                run.join("\n")
            )
        };
        from = at + run.len();
    }
    wanted.iter().filter(|l| l.trim() != "...").count()
}

#[test]
fn readme_blocks_are_held_in_order() {
    let out = "a\nb\nc\nd\n";
    assert_eq!(in_order(&["a".into(), "...".into(), "c".into(), "d".into()], out), 3);
    for wrong in [vec!["b", "a"], vec!["a", "c"], vec!["d", "...", "a"]] {
        let block: Vec<String> = wrong.iter().map(|l| l.to_string()).collect();
        assert!(std::panic::catch_unwind(|| in_order(&block, out)).is_err(), "{wrong:?} is not the output's order");
    }
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
        checked += in_order(&block, out);
    }
    assert!(checked >= 20, "the README's run examples were found ({checked} lines)");
}

/// The README's hunt example is run as written, and its block held to the
/// output in order: its figures cannot go stale. (Its header lines go to
/// stderr, the rest to stdout.)
#[test]
fn the_readme_hunt_example_is_what_the_hunt_prints() {
    let blocks = text_blocks(&readme());
    let block = blocks
        .iter()
        .find(|b| b.first().is_some_and(|l| l.starts_with("$ mcpsim hunt ")))
        .expect("the README's hunt example");
    let args: Vec<&str> = block[0].trim_start_matches("$ mcpsim ").split_whitespace().collect();
    let out_dir = common::tmp("readme", "hunt-example");
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"));
    cmd.args(&args).current_dir(out_dir.parent().unwrap());
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = cmd.current_dir(&out_dir).output().unwrap();
    let stderr = common::text(&out.stderr);
    let header: String = stderr
        .lines()
        .filter(|l| l.starts_with("hunt: ") || l.starts_with("repeat: "))
        .map(|l| format!("{l}\n"))
        .collect();
    let n = in_order(block, &(header + &common::text(&out.stdout)));
    assert!(n >= 10, "{n} lines compared");
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
