//! Every fenced block of the README, and of the docs that took over its
//! reference (`docs/*.md`), is tested: [`TESTED`] says, for each, the file
//! it is in, which test runs it and what it is compared with, and a block it
//! does not know fails `every_readme_block_is_tested`. The tests find their
//! blocks in whichever of those files holds them, so a block that moves
//! from the README to `docs/` (or back) takes its test with it. Output
//! blocks that start with a command are compared with what that command
//! prints today, in order (`...` elides); command blocks are run as written
//! (a user's own server, `node my-server.js`, played by a built-in one);
//! scenario and configuration blocks are loaded and run. Only the benchmark
//! commands, whose figures are this machine's of the day, are checked
//! statically (the CI workflows are files under `docs/ci/`, tested in
//! tests/cli.rs and tests/live.rs).

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A markdown file of the repository, by its path from the root.
fn md(file: &str) -> String {
    std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn readme() -> String {
    md("README.md")
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
    assert!(cur.is_none(), "a markdown file ends inside a fenced block");
    out
}

/// The ```text blocks, in order.
fn text_blocks(md: &str) -> Vec<Vec<String>> {
    blocks(md).into_iter().filter(|b| b.lang == "text").map(|b| b.body).collect()
}

/// The files whose blocks [`TESTED`] covers: the README, then every file
/// an entry names, each once.
fn tested_files() -> Vec<&'static str> {
    let mut files = vec!["README.md"];
    for (file, ..) in TESTED {
        if !files.contains(file) {
            files.push(file);
        }
    }
    files
}

/// The blocks of `lang` whose text starts with `key`, in every tested file:
/// (the file, the block's lines).
fn blocks_in_files(lang: &str, key: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    for file in tested_files() {
        for b in blocks(&md(file)) {
            if b.lang == lang && joined(&b.body).starts_with(key) {
                out.push((file, b.body));
            }
        }
    }
    out
}

/// The blocks of `lang` whose text starts with `key`, wherever they are.
fn blocks_of(lang: &str, key: &str) -> Vec<Vec<String>> {
    blocks_in_files(lang, key).into_iter().map(|(_, b)| b).collect()
}

/// The one block of `lang` whose text starts with `key`.
fn block_of(lang: &str, key: &str) -> Vec<String> {
    let mut found = blocks_of(lang, key);
    assert_eq!(found.len(), 1, "the README and docs have one {lang} block starting {key:?}");
    found.pop().unwrap()
}

/// The file that holds the one block of `lang` starting with `key`.
fn file_of(lang: &str, key: &str) -> &'static str {
    let found = blocks_in_files(lang, key);
    assert_eq!(found.len(), 1, "the README and docs have one {lang} block starting {key:?}");
    found[0].0
}

/// How each block is tested: the file it is in, its language, how its text
/// starts, and the test that runs it (or, for the one checked statically,
/// why). Every block of the README, and of each docs file named here,
/// matches exactly one entry of its file; the test named finds its block by
/// the same key, so it sees every change to it.
const TESTED: &[(&str, &str, &str, &str)] = &[
    ("README.md", "sh", "cargo run -- run\n", ".ci/run runs it as written (the_two_commands_are_what_ci_runs); tests/cli.rs run_without_paths_... holds its output"),
    ("README.md", "sh", "cargo test\n", ".ci/run runs it as written (the_two_commands_are_what_ci_runs)"),
    ("README.md", "sh", "mcpsim run --live 'node my-server.js'", "tests/live.rs the_readmes_live_commands_run_as_written"),
    ("README.md", "sh", "mcpsim run --gate --baseline mcpsim-baseline.toml", "tests/live.rs the_readmes_live_commands_run_as_written"),
    ("README.md", "toml", "# mcpsim-baseline.toml", "tests/live.rs the_readmes_live_commands_run_as_written (the baseline it reads)"),
    ("README.md", "toml", "# Cargo.toml", ".ci/scratch-crate.sh builds a crate of these three blocks and runs its test"),
    ("README.md", "toml", "# .cargo/config.toml", ".ci/scratch-crate.sh"),
    ("README.md", "rust", "// tests/resume.rs", ".ci/scratch-crate.sh; the_own_cargo_test_snippet_works"),
    ("README.md", "text", "mcpsim run [FILE|DIR]", "the_usage_synopsis_lists_exactly_the_flags_of_each_help"),
    ("docs/usage.md", "text", "$ cargo run -- run ", "example_run_outputs_match_real_runs"),
    ("docs/scenarios.md", "toml", "[scenario]", "the_format_example_is_the_bundled_nat_rebind"),
    ("docs/scenarios.md", "toml", "[expect]\nnaive = ", "the_expect_inherent_example_is_the_bundled_files"),
    ("docs/scenarios.md", "sh", "mcpsim schema > mcpsim.schema.json", "the_schema_command_validates_the_guides_scenario"),
    ("docs/scenarios.md", "toml", "#:schema ./mcpsim.schema.json", "the_schema_command_validates_the_guides_scenario; the_authoring_guides_error_is_the_loaders; the_guides_scenario_meets_its_expectations"),
    ("docs/scenarios.md", "text", "error: my-resume.toml", "the_authoring_guides_error_is_the_loaders"),
    ("docs/scenarios.md", "sh", "cargo run -- run --format junit", "the_junit_command_gives_a_testcase_per_run"),
    ("docs/hunts.md", "text", "$ mcpsim hunt ", "the_readme_hunts_print_what_the_readme_shows"),
    ("docs/stateless-http.md", "text", "scenario \\ server", "the_stateless_matrix_is_the_snapshot (which tests/stateless.rs asserts)"),
    ("docs/stateless-http.md", "text", "$ mcpsim hunt ", "the_readme_hunts_print_what_the_readme_shows"),
    ("docs/stateless-http.md", "json", "{\"jsonrpc\": \"2.0\", \"id\": 1,", "the_mrtr_example_is_one_round_trip (quoted from the specification)"),
    ("docs/stateless-http.md", "json", "{\"jsonrpc\": \"2.0\", \"id\": 2,", "the_mrtr_example_is_one_round_trip (quoted from the specification)"),
    ("docs/findings.md", "sh", "mcpsim run --live 'node adapters/typescript/server.mjs'", "tests/live_sdk.rs the_readmes_adapter_commands_give_their_cells"),
    ("docs/determinism-and-speed.md", "sh", "cargo bench", "STATIC (its figures are this machine's of the day, about ±10 %): the_bench_commands_name_real_benchmarks"),
];

/// Docs with fenced blocks that no test runs, and why. Any other markdown
/// file under `docs/` with a fenced block must have its blocks in [`TESTED`].
const NOT_TESTED: &[(&str, &str)] = &[
    ("docs/live-protocol.md", "the protocol's messages, one per block, as a reference; tests/live.rs and the adapters speak them"),
    ("docs/replicas.md", "the design's sketch of the [deployment] table, written before it was built; the deployments the tests run are scenarios/replicas/ and the stateless-http ones"),
];

/// A block's text with a newline after each line, to match keys that end a line.
fn joined(body: &[String]) -> String {
    body.iter().map(|l| format!("{l}\n")).collect()
}

/// Every markdown file under `docs/`, by its path from the root.
fn docs_files() -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{rel}/{}", entry.file_name().to_string_lossy());
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &name, out);
            } else if name.ends_with(".md") {
                out.push(name);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("docs"), "docs", &mut out);
    out.sort();
    out
}

#[test]
fn every_readme_block_is_tested() {
    let files = tested_files();
    let mut all = 0;
    for file in &files {
        let bs = blocks(&md(file));
        all += bs.len();
        for b in &bs {
            let text = joined(&b.body);
            let how: Vec<&str> = TESTED
                .iter()
                .filter(|(f, lang, key, _)| f == file && *lang == b.lang && text.starts_with(key))
                .map(|t| t.3)
                .collect();
            assert_eq!(
                how.len(),
                1,
                "{file}:{}: a ```{} block starting {:?} must match exactly one entry of TESTED (tests/readme.rs) for {file}, not {how:?}",
                b.line,
                b.lang,
                b.body.first()
            );
        }
    }
    assert!(all >= 20, "{all} blocks");
    // And no entry has lost its block.
    for (file, lang, key, how) in TESTED {
        assert!(
            blocks(&md(file)).iter().any(|b| b.lang == *lang && joined(&b.body).starts_with(key)),
            "TESTED names a ```{lang} block of {file} starting {key:?} ({how}) that {file} no longer has"
        );
    }
    // No docs file has blocks that nothing tests, unless it says why.
    for file in docs_files() {
        let covered = files.contains(&file.as_str()) || NOT_TESTED.iter().any(|(f, _)| *f == file);
        assert!(
            covered || blocks(&md(&file)).is_empty(),
            "{file} has fenced blocks: name them in TESTED (tests/readme.rs), or say in NOT_TESTED why no test runs them"
        );
    }
    for (file, why) in NOT_TESTED {
        assert!(!files.contains(file), "{file} is in NOT_TESTED ({why}) and has TESTED entries");
        assert!(!blocks(&md(file)).is_empty(), "{file} is in NOT_TESTED ({why}) but has no fenced block");
    }
}

mod common;

/// The binary's stdout, then its stderr.
fn mcpsim(args: &[&str]) -> String {
    let out = common::mcpsim(args);
    common::text(&out.stdout) + &common::text(&out.stderr)
}

/// Holds a block to the real output, in order: the block's lines,
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
                "lines of the block not in the real output, consecutive and after the lines before them:\n{}\n--- output ---\n{out}",
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
    let blocks = text_blocks(&md(file_of("text", "$ cargo run -- run ")));
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
    assert!(checked >= 20, "the run examples were found ({checked} lines)");
}

/// The hunts the docs show (docs/hunts.md, docs/stateless-http.md) are run
/// as written, and each block held to the output in order: their figures
/// cannot go stale. (Their header lines go to
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
        assert_eq!(file_of("sh", &format!("{command}\n")), "README.md", "the two commands stay in the README");
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

/// The stateless matrix docs/stateless-http.md shows is the committed
/// snapshot, which tests/stateless.rs holds to real runs.
#[test]
fn the_stateless_matrix_is_the_snapshot() {
    let snap =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/matrix/stateless.snap")).unwrap();
    let body: Vec<&str> = snap.splitn(3, "---\n").nth(2).unwrap().lines().map(str::trim_end).collect();
    let block = block_of("text", "scenario \\ server");
    let block: Vec<&str> = block.iter().map(|l| l.trim_end()).collect();
    assert_eq!(block, body, "the docs' stateless matrix vs snapshots/matrix/stateless.snap");
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
    assert_eq!(top, commands, "the synopsis' commands vs `mcpsim --help`");
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
        assert_eq!(in_usage, &documented, "the README's synopsis vs `mcpsim {command} --help`");
    }
}

#[test]
fn the_authoring_guides_error_is_the_loaders() {
    // The guide's scenario, with the typo the guide shows.
    let toml = joined(&block_of("toml", "#:schema ./mcpsim.schema.json\n[scenario]\nname = \"my-resume\""));
    assert_eq!(toml.matches("do = \"rebind\"").count(), 1, "the guide's scenario has one rebind step");
    let typo = toml.replace("do = \"rebind\"", "do = \"rebnd\"");
    let err = mcpsim::scenario::Plan::from_toml_str(&typo, "my-resume.toml").unwrap_err().to_string();
    let first = err.lines().next().unwrap();
    let shown = joined(&block_of("text", "error: my-resume.toml"));
    assert!(shown.contains(&format!("error: {first}")), "the guide should show: error: {first}\nit shows: {shown}");
}

/// The README's "Use it from your own `cargo test`" snippet, on a bundled
/// scenario (the snippet's file is the reader's own).
#[test]
fn the_own_cargo_test_snippet_works() {
    let snippet = joined(&block_of("rust", "// tests/resume.rs"));
    assert!(snippet.contains("let run = mcpsim::run(&plan, \"guarded\", None).unwrap();"), "{snippet}");
    assert!(
        snippet.contains("let e = check::expectation(&plan, \"guarded\", &verdicts, &run.trace).unwrap();"),
        "{snippet}"
    );
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
    let mut shown = Plan::from_toml_str(&block, file_of("toml", "[scenario]")).unwrap();
    let mut bundled = Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/nat-rebind.toml")).unwrap();
    shown.source = None;
    bundled.source = None;
    // The docs show two servers' expectations; the file has every server's.
    for (server, want) in &shown.expect {
        assert_eq!(bundled.expect.get(server), Some(want), "[expect] {server}");
    }
    shown.expect = bundled.expect.clone();
    assert_eq!(shown, bundled, "the format example vs scenarios/nat-rebind.toml");
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
/// the benchmarks it names exist and take the arguments the docs give.
#[test]
fn the_bench_commands_name_real_benchmarks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let md = md(file_of("sh", "cargo bench"));
    for line in block_of("sh", "cargo bench") {
        let name = line.split_whitespace().nth(3).unwrap();
        assert!(manifest.contains(&format!("[[bench]]\nname = \"{name}\"")), "no bench {name}");
        assert!(root.join("benches").join(format!("{name}.rs")).exists());
    }
    // The arguments the performance section quotes.
    let hunt = std::fs::read_to_string(root.join("benches/hunt.rs")).unwrap();
    let quoted = md.split("`cargo bench --bench hunt -- ").nth(1).expect("the docs quote the hunt benchmark");
    let mut words = quoted.split('`').next().unwrap().split_whitespace();
    assert!(words.next().and_then(|n| n.parse::<u64>().ok()).is_some(), "a seed count: {quoted:.40}");
    assert_eq!(words.next(), Some("no-memory"));
    assert!(hunt.contains("a == \"no-memory\""));
}

/// The `[expect]`/`[expect_inherent]` example is what the bundled
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

/// The rmcp findings' hunt figure (docs/findings.md) is the hunt's own:
/// "fails N of 400 seeds".
#[test]
fn the_readmes_rmcp_hunt_figure_is_what_the_hunt_prints() {
    let md = md("docs/findings.md");
    let at = md.find("--no-shrink`) fails ").expect("the rmcp findings' hunt figure");
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
    assert!(stdout.contains(&format!("hunted 400 seeds: {n} failing")), "docs/findings.md: {n}; the hunt: {stdout}");
}

/// Issue #51 item 6: the README is a front door, at most 300 lines, whose
/// first screen has install, the two commands and the CI recipe, and whose
/// sections come in the issue's order; the rest is in `docs/`.
#[test]
fn the_readme_is_a_front_door() {
    let md = readme();
    let lines: Vec<&str> = md.lines().collect();
    assert!(lines.len() <= 300, "the README has {} lines: at most 300 (the rest goes to docs/)", lines.len());
    const SCREEN: usize = 60;
    let screen: String = lines.iter().take(SCREEN).map(|l| format!("{l}\n")).collect();
    for (what, text) in [
        ("the install section", "\n## Install\n"),
        ("the install command", "`cargo install\n--path .`"),
        ("the first command", "\n```sh\ncargo run -- run\n```\n"),
        ("the second command", "\n```sh\ncargo test\n```\n"),
        ("the CI recipe", "\n## Gate your own server in CI\n"),
        ("a link to a CI workflow file", "](docs/ci/mcpsim-gate-typescript.yml)"),
    ] {
        assert!(screen.contains(text), "the README's first {SCREEN} lines lack {what} ({text:?})");
    }
    // The sections the issue asks for, in its order (others may come between).
    let headings: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("## ")).collect();
    let order = [
        "Install",
        "The two commands",
        "Gate your own server in CI",
        "Use it from your own `cargo test`",
        "Hunts",
        "The commands",
        "What it found",
    ];
    let mut from = 0;
    for want in order {
        let at = headings[from..].iter().position(|h| *h == want);
        let at = at.unwrap_or_else(|| {
            panic!("the README's sections {headings:?} lack {want:?} after {:?}", &headings[..from])
        });
        from += at + 1;
    }
    // A link per SDK in the findings table, each to its section of docs/findings.md.
    let table = &md[md.find("\n## What it found\n").unwrap()..];
    for (sdk, anchor) in [
        ("rmcp 3.11.0", "#what-mcpsim-finds-in-rmcp-3110"),
        ("TypeScript SDK 1.32.2", "#the-typescript-sdk-1322"),
        ("TypeScript SDK v2", "#the-typescript-sdk-v2-modelcontextprotocolserver-240"),
        ("Python SDK 2.3.0", "#the-python-sdk-230"),
        ("FastMCP 4.2.3", "#fastmcp-423"),
        ("HAProxy + Redis", "#behind-haproxy-with-redis"),
    ] {
        let row =
            table.lines().find(|l| l.starts_with(&format!("| {sdk}"))).unwrap_or_else(|| panic!("a row for {sdk}"));
        assert!(row.contains(&format!("](docs/findings.md{anchor})")), "{sdk}'s row links its section: {row}");
    }
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, and
/// nothing but letters, digits, `-` and `_`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (fenced blocks aside), with
/// GitHub's `-1`, `-2` for repeats.
fn anchors(md: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let Some(text) = line.trim_start_matches('#').strip_prefix(' ') else { continue };
        let base = anchor(text);
        let repeats = out
            .iter()
            .filter(|a| **a == base || a.strip_prefix(&format!("{base}-")).is_some_and(|n| n.parse::<u32>().is_ok()))
            .count();
        out.push(if repeats == 0 { base } else { format!("{base}-{repeats}") });
    }
    out
}

/// The relative links of a markdown file (outside fenced blocks and code
/// spans): (line, target).
fn links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans out: every other piece between backticks.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let target = &rest[at + 2..];
            let Some(end) = target.find(')') else { break };
            let t = &target[..end];
            if !t.contains("://") && !t.starts_with("mailto:") {
                out.push((i + 1, t.to_string()));
            }
            rest = &target[end..];
        }
    }
    out
}

/// Every relative link of the README and of the docs names a file that
/// exists, and every `#anchor` a heading of its file: text that moved from
/// the README took its links along, and the links into it followed.
#[test]
fn the_links_of_the_readme_and_the_docs_resolve() {
    let mut files = vec!["README.md".to_string()];
    files.extend(docs_files());
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = md(file);
        let dir = Path::new(file).parent().unwrap();
        for (line, target) in links(&text) {
            let (path, frag) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() { Path::new(file).to_path_buf() } else { dir.join(path) };
            checked += 1;
            if !root().join(&resolved).exists() {
                broken.push(format!("{file}:{line}: {target}: no file {}", resolved.display()));
                continue;
            }
            if let Some(frag) = frag {
                let target_md = std::fs::read_to_string(root().join(&resolved)).unwrap_or_default();
                if !anchors(&target_md).iter().any(|a| a == frag) {
                    broken.push(format!("{file}:{line}: {target}: no heading with anchor #{frag}"));
                }
            }
        }
    }
    assert!(checked >= 50, "{checked} links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(anchor("What mcpsim finds in rmcp 3.11.0"), "what-mcpsim-finds-in-rmcp-3110");
    assert_eq!(
        anchor("The TypeScript SDK v2 (`@modelcontextprotocol/server` 2.4.0)"),
        "the-typescript-sdk-v2-modelcontextprotocolserver-240"
    );
    assert_eq!(anchor("Use it from your own `cargo test`"), "use-it-from-your-own-cargo-test");
    assert_eq!(anchors("# A\n## A\n```\n# not a heading\n```\n## A\n"), ["a", "a-1", "a-2"]);
}

/// The MRTR example docs/stateless-http.md quotes from the specification is
/// one round trip: the retry goes out under a new id, answers every input
/// the first answer asked for, and echoes its `requestState` as it was.
#[test]
fn the_mrtr_example_is_one_round_trip() {
    let json = |key: &str| -> serde_json::Value {
        serde_json::from_str(&joined(&block_of("json", key))).unwrap_or_else(|e| panic!("{key}: {e}"))
    };
    let answer = json("{\"jsonrpc\": \"2.0\", \"id\": 1,");
    let retry = json("{\"jsonrpc\": \"2.0\", \"id\": 2,");
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required");
    assert_ne!(answer["id"], retry["id"], "a retry goes out under a new id");
    assert_eq!(retry["method"], "tools/call");
    let params = &retry["params"];
    assert_eq!(params["requestState"], result["requestState"], "the state echoed as it was");
    let asked: Vec<&String> = result["inputRequests"].as_object().unwrap().keys().collect();
    let answered: Vec<&String> = params["inputResponses"].as_object().unwrap().keys().collect();
    assert_eq!(asked, answered);
    assert_eq!(params["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
}
