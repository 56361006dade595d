//! Every fenced block of the README is tested: [`TESTED`] says, for each,
//! which test runs it and what it is compared with, and a block it does not
//! know fails `every_readme_block_is_tested`. Output blocks that start with
//! a command are compared with what that command prints today, in order
//! (`...` elides); command blocks are run as written (a user's own server,
//! `node my-server.js`, played by a built-in one); scenario and
//! configuration blocks are loaded and run. Only the CI workflow, which
//! needs GitHub, and the benchmark commands, whose figures are this
//! machine's of the day, are checked statically.

use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// A fenced block: the line its fence opens on, its language, its lines
/// (without the fence's own indentation).
struct Block {
    line: usize,
    lang: String,
    body: Vec<String>,
}

/// Every fenced block, in order.
fn blocks(md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<(Block, usize)> = None;
    for (i, line) in md.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut cur {
            None => {
                if let Some(lang) = trimmed.strip_prefix("```") {
                    let indent = line.len() - trimmed.len();
                    cur = Some((Block { line: i + 1, lang: lang.to_string(), body: Vec::new() }, indent));
                }
            }
            Some(_) if trimmed == "```" => out.push(cur.take().unwrap().0),
            Some((b, indent)) => b.body.push(line.get(*indent..).unwrap_or("").to_string()),
        }
    }
    assert!(cur.is_none(), "the README ends inside a fenced block");
    out
}

/// The ```text blocks, in order.
fn text_blocks(md: &str) -> Vec<Vec<String>> {
    blocks(md).into_iter().filter(|b| b.lang == "text").map(|b| b.body).collect()
}

/// The blocks of `lang` whose first line starts with `key`.
fn blocks_of(lang: &str, key: &str) -> Vec<Vec<String>> {
    blocks(&readme())
        .into_iter()
        .filter(|b| b.lang == lang && joined(&b.body).starts_with(key))
        .map(|b| b.body)
        .collect()
}

/// The one block of `lang` whose first line starts with `key`.
fn block_of(lang: &str, key: &str) -> Vec<String> {
    let mut found = blocks_of(lang, key);
    assert_eq!(found.len(), 1, "the README has one {lang} block starting {key:?}");
    found.pop().unwrap()
}

/// How each README block is tested: its language, how its first line
/// starts, and the test that runs it (or, for the two checked statically,
/// why). Every block matches exactly one entry; the test named finds its
/// block by the same key, so it sees every change to it.
const TESTED: &[(&str, &str, &str)] = &[
    ("sh", "cargo run -- run\n", ".ci/run runs it as written (the_two_commands_are_what_ci_runs); tests/cli.rs run_without_paths_... holds its output"),
    ("sh", "cargo test\n", ".ci/run runs it as written (the_two_commands_are_what_ci_runs)"),
    ("text", "$ cargo run -- run ", "example_run_outputs_match_real_runs"),
    ("text", "scenario \\ server", "the_stateless_matrix_is_the_snapshot (which tests/stateless.rs asserts)"),
    ("text", "$ mcpsim hunt ", "the_readme_hunts_print_what_the_readme_shows"),
    ("text", "mcpsim run [FILE|DIR]", "the_usage_synopsis_lists_exactly_the_flags_of_each_help"),
    ("toml", "[scenario]", "the_format_example_is_the_bundled_nat_rebind"),
    ("sh", "mcpsim run --live 'node my-server.js'", "tests/live.rs the_readmes_live_commands_run_as_written"),
    ("sh", "mcpsim run --gate --baseline mcpsim-baseline.toml", "tests/live.rs the_readmes_live_commands_run_as_written"),
    ("toml", "# mcpsim-baseline.toml", "tests/live.rs the_readmes_live_commands_run_as_written (the baseline it reads)"),
    ("sh", "mcpsim schema > mcpsim.schema.json", "the_schema_command_validates_the_guides_scenario"),
    ("toml", "#:schema ./mcpsim.schema.json", "the_schema_command_validates_the_guides_scenario; the_authoring_guides_error_is_the_loaders; the_guides_scenario_meets_its_expectations"),
    ("text", "error: my-resume.toml", "the_authoring_guides_error_is_the_loaders"),
    ("sh", "cargo run -- run --format junit", "the_junit_command_gives_a_testcase_per_run"),
    ("yaml", "# .github/workflows/hunt.yml", "STATIC (it needs GitHub): tests/cli.rs the_readme_ci_workflow_uploads_and_merges_even_after_a_finding, which also runs its hunt and merge commands"),
    ("toml", "# Cargo.toml", ".ci/scratch-crate.sh builds a crate of these three blocks and runs its test"),
    ("toml", "# .cargo/config.toml", ".ci/scratch-crate.sh"),
    ("rust", "// tests/resume.rs", ".ci/scratch-crate.sh; the_own_cargo_test_snippet_works"),
    ("sh", "mcpsim run --live 'node adapters/typescript/server.mjs'", "tests/live_sdk.rs the_readmes_adapter_commands_give_their_cells"),
    ("toml", "[expect]\nnaive = ", "the_expect_inherent_example_is_the_bundled_files"),
    ("sh", "cargo bench", "STATIC (its figures are this machine's of the day, about ±10 %): the_bench_commands_name_real_benchmarks"),
];

/// A block's text with a newline after each line, to match keys that end a line.
fn joined(body: &[String]) -> String {
    body.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn every_readme_block_is_tested() {
    let md = readme();
    let all = blocks(&md);
    assert!(all.len() >= 20, "{} blocks", all.len());
    for b in &all {
        let text = joined(&b.body);
        let how: Vec<&str> =
            TESTED.iter().filter(|(lang, key, _)| *lang == b.lang && text.starts_with(key)).map(|t| t.2).collect();
        assert_eq!(
            how.len(),
            1,
            "README.md:{}: a ```{} block starting {:?} must match exactly one entry of TESTED (tests/readme.rs), not {how:?}",
            b.line,
            b.lang,
            b.body.first()
        );
    }
    // And no entry has lost its block.
    for (lang, key, how) in TESTED {
        assert!(
            all.iter().any(|b| b.lang == *lang && joined(&b.body).starts_with(key)),
            "TESTED names a ```{lang} block starting {key:?} ({how}) that the README no longer has"
        );
    }
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

/// The README's hunts are run as written, and each block held to the
/// output in order: their figures cannot go stale. (Their header lines go to
/// stderr, the rest to stdout.)
#[test]
fn the_readme_hunts_print_what_the_readme_shows() {
    let hunts = blocks_of("text", "$ mcpsim hunt ");
    assert!(hunts.len() >= 3, "{} hunt examples", hunts.len());
    for (i, block) in hunts.iter().enumerate() {
        let args: Vec<&str> = block[0].trim_start_matches("$ mcpsim ").split_whitespace().collect();
        let out_dir = common::tmp("readme", &format!("hunt-example-{i}"));
        let _ = std::fs::remove_dir_all(&out_dir);
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"))
            .args(&args)
            .current_dir(&out_dir)
            .output()
            .unwrap();
        let stderr = common::text(&out.stderr);
        let header: String = stderr
            .lines()
            .filter(|l| l.starts_with("hunt: ") || l.starts_with("repeat: "))
            .map(|l| format!("{l}\n"))
            .collect();
        let n = in_order(block, &(header + &common::text(&out.stdout)));
        assert!(n >= 5, "{}: {n} lines compared", block[0]);
    }
}

/// The README's two commands are what CI runs, as written (`--locked`
/// added: CI builds from the committed Cargo.lock).
#[test]
fn the_two_commands_are_what_ci_runs() {
    let ci = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    for command in ["cargo run -- run", "cargo test"] {
        assert_eq!(block_of("sh", &format!("{command}\n"))[..], [command.to_string()], "README: {command}");
        let locked = command.replacen(" -- ", " --locked -- ", 1);
        let locked = if locked == command { format!("{command} --locked") } else { locked };
        let runs = ci.lines().any(|l| {
            let l = l.trim();
            l.find(&locked).is_some_and(|at| {
                let rest = &l[at + locked.len()..];
                !l.starts_with('#') && (rest.is_empty() || rest.starts_with(" 2>") || rest.starts_with(" |"))
            })
        });
        assert!(runs, ".ci/run must run `{locked}`, with no other arguments:\n{ci}");
    }
}

/// The stateless matrix the README shows is the committed snapshot, which
/// tests/stateless.rs holds to real runs.
#[test]
fn the_stateless_matrix_is_the_snapshot() {
    let snap =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/matrix/stateless.snap")).unwrap();
    let body: Vec<&str> = snap.splitn(3, "---\n").nth(2).unwrap().lines().map(str::trim_end).collect();
    let block = block_of("text", "scenario \\ server");
    let block: Vec<&str> = block.iter().map(|l| l.trim_end()).collect();
    assert_eq!(block, body, "README's stateless matrix vs snapshots/matrix/stateless.snap");
}

/// The Usage block lists, for each command, exactly the flags its `--help`
/// documents, and every command the binary has.
#[test]
fn the_usage_synopsis_lists_exactly_the_flags_of_each_help() {
    use std::collections::{BTreeMap, BTreeSet};
    let flags = |text: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if word.len() > 2 && word.starts_with("--") && word.as_bytes()[2].is_ascii_lowercase() {
                out.insert(word.to_string());
            }
        }
        out
    };
    let usage = block_of("text", "mcpsim run [FILE|DIR]");
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in &usage {
        let line = line.split("  #").next().unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], "mcpsim", "{line}");
        let command = if words[1] == "hunt" && words.get(2) == Some(&"merge") { "hunt merge" } else { words[1] };
        listed.entry(command.to_string()).or_default().extend(flags(line));
    }
    let help = mcpsim(&["--help"]);
    let commands: BTreeSet<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect();
    let top: BTreeSet<String> = listed.keys().filter(|c| !c.contains(' ')).cloned().collect();
    assert_eq!(top, commands, "the Usage block's commands vs `mcpsim --help`");
    for (command, in_usage) in &listed {
        let args: Vec<&str> = command.split(' ').chain(["--help"]).collect();
        let help = mcpsim(&args);
        // The options section: a line per flag, the flag first.
        let documented: BTreeSet<String> = help
            .lines()
            .filter(|l| l.trim_start().starts_with('-'))
            .flat_map(|l| flags(l.trim_start().split("  ").next().unwrap()))
            .filter(|f| f != "--help" && f != "--version")
            .collect();
        assert_eq!(in_usage, &documented, "README's Usage vs `mcpsim {command} --help`");
    }
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
    assert!(md.contains("let e = check::expectation(&plan, \"guarded\", &verdicts, &run.trace).unwrap();"));
    use mcpsim::{check, scenario::Plan};
    let plan = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/window-edge.toml")).unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let verdicts = check::judge(&run.trace);
    let e = check::expectation(&plan, "guarded", &verdicts, &run.trace).unwrap();
    assert!(e.met, "{}", mcpsim::report::text(&run, &verdicts, Some(&e)));
}

/// The format section's scenario is the bundled `scenarios/nat-rebind.toml`,
/// comments aside: the same plan, and so the same runs.
#[test]
fn the_format_example_is_the_bundled_nat_rebind() {
    use mcpsim::scenario::Plan;
    let block = joined(&block_of("toml", "[scenario]"));
    let mut shown = Plan::from_toml_str(&block, "README.md").unwrap();
    let mut bundled = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/nat-rebind.toml")).unwrap();
    shown.source = None;
    bundled.source = None;
    // The README shows two servers' expectations; the file has every server's.
    for (server, want) in &shown.expect {
        assert_eq!(bundled.expect.get(server), Some(want), "[expect] {server}");
    }
    shown.expect = bundled.expect.clone();
    assert_eq!(shown, bundled, "README's format example vs scenarios/nat-rebind.toml");
}

/// `mcpsim schema > mcpsim.schema.json` writes a schema that the guide's
/// scenario (with its `#:schema` line) validates against, and that refuses
/// the guide's typo.
#[test]
fn the_schema_command_validates_the_guides_scenario() {
    assert_eq!(block_of("sh", "mcpsim schema")[..], ["mcpsim schema > mcpsim.schema.json".to_string()]);
    assert_eq!(block_of("toml", "#:schema ./mcpsim.schema.json\n[")[0], "#:schema ./mcpsim.schema.json");
    let directive = blocks_of("toml", "#:schema").into_iter().find(|b| b.len() == 1).expect("the directive alone");
    assert_eq!(directive, ["#:schema ./mcpsim.schema.json".to_string()]);
    let out = common::mcpsim(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let guide = joined(&block_of("toml", "#:schema ./mcpsim.schema.json\n["));
    let as_json = |t: &str| -> serde_json::Value { toml::from_str(t).unwrap() };
    let errors: Vec<String> = validator.iter_errors(&as_json(&guide)).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!validator.is_valid(&as_json(&guide.replace("do = \"rebind\"", "do = \"rebnd\""))));
}

/// The guide's scenario, as written, meets the expectations it states.
#[test]
fn the_guides_scenario_meets_its_expectations() {
    let guide = joined(&block_of("toml", "#:schema ./mcpsim.schema.json\n["));
    let plan = mcpsim::scenario::Plan::from_toml_str(&guide, "my-resume.toml").unwrap();
    assert!(plan.expect.len() >= 2);
    for server in plan.expect.keys() {
        let run = mcpsim::run(&plan, server, None).unwrap();
        let verdicts = mcpsim::check::judge(&run.trace);
        let e = mcpsim::check::expectation(&plan, server, &verdicts, &run.trace).unwrap();
        assert!(e.met, "{}", mcpsim::report::text(&run, &verdicts, Some(&e)));
    }
}

/// `cargo run -- run --format junit > mcpsim.xml`: one testcase per run of
/// the bundled scenarios, none failing.
#[test]
fn the_junit_command_gives_a_testcase_per_run() {
    let block = block_of("sh", "cargo run -- run --format junit");
    assert!(block[0].starts_with("cargo run -- run --format junit > mcpsim.xml"), "{block:?}");
    let out = common::mcpsim(&["run", "--format", "junit"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
    let xml = common::text(&out.stdout);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites = doc.root_element();
    let cases = doc.descendants().filter(|n| n.has_tag_name("testcase")).count();
    assert!(cases >= 400, "{cases} testcases");
    assert_eq!(suites.attribute("tests"), Some(cases.to_string().as_str()));
    assert_eq!(suites.attribute("failures"), Some("0"), "{xml}");
}

/// `cargo bench` measures this machine: its figures are not compared, but
/// the benchmarks it names exist and take the arguments the README gives.
#[test]
fn the_bench_commands_name_real_benchmarks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let md = readme();
    for line in block_of("sh", "cargo bench") {
        let name = line.split_whitespace().nth(3).unwrap();
        assert!(manifest.contains(&format!("[[bench]]\nname = \"{name}\"")), "no bench {name}");
        assert!(root.join("benches").join(format!("{name}.rs")).exists());
    }
    // The arguments the performance section quotes.
    let hunt = std::fs::read_to_string(root.join("benches/hunt.rs")).unwrap();
    let quoted = md.split("`cargo bench --bench hunt -- ").nth(1).expect("the README quotes the hunt benchmark");
    let mut words = quoted.split('`').next().unwrap().split_whitespace();
    assert!(words.next().and_then(|n| n.parse::<u64>().ok()).is_some(), "a seed count: {quoted:.40}");
    assert_eq!(words.next(), Some("no-memory"));
    assert!(hunt.contains("a == \"no-memory\""));
}

/// The README's `[expect]`/`[expect_inherent]` example is what the bundled
/// file it quotes says, and that file's runs meet it.
#[test]
fn the_expect_inherent_example_is_the_bundled_files() {
    let block = joined(&block_of("toml", "[expect]\nnaive = "));
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/second-client-leak-credential.toml");
    let plan = mcpsim::scenario::Plan::load(&file).unwrap();
    let table: toml::Table = block.parse().unwrap();
    for (key, of_plan) in [("expect", &plan.expect), ("expect_inherent", &plan.expect_inherent)] {
        for (server, checks) in table[key].as_table().unwrap() {
            let mut want: Vec<&str> = checks.as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
            want.sort();
            assert_eq!(of_plan[server.as_str()], want, "[{key}] {server}");
        }
    }
    for server in ["naive", "guarded"] {
        let run = mcpsim::run(&plan, server, None).unwrap();
        let verdicts = mcpsim::check::judge(&run.trace);
        let e = mcpsim::check::expectation(&plan, server, &verdicts, &run.trace).unwrap();
        assert!(e.met, "{}", mcpsim::report::text(&run, &verdicts, Some(&e)));
    }
}

/// The README's rmcp hunt figure is the hunt's own: "fails N of 400 seeds".
#[test]
fn the_readmes_rmcp_hunt_figure_is_what_the_hunt_prints() {
    let md = readme();
    let at = md.find("--no-shrink`) fails ").expect("the README's rmcp hunt figure");
    let rest = &md[at + "--no-shrink`) fails ".len()..];
    let n: u64 = rest[..rest.find(' ').unwrap()].parse().unwrap();
    assert!(rest.starts_with(&format!("{n} of 400 seeds")), "{}", &rest[..40]);
    let dir = common::tmp("readme", "rmcp-figure");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(["hunt", "--server", "rmcp", "--seeds", "400", "--seed", "0", "--no-shrink"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains(&format!("hunted 400 seeds: {n} failing")), "README: {n}; the hunt: {stdout}");
}
