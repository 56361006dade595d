//! Hunts: generated scenarios find every built-in bug within a bounded number
//! of seeds, stay quiet on `guarded`, are deterministic, shard cleanly, and
//! shrink findings into regression scenarios that reproduce.

use mcpsim::check::CheckId;
use mcpsim::hunt::{self, shrink, HuntOptions, HuntReport, Limit};
use mcpsim::scenario::{Dialect, Plan};
use mcpsim::server::policy::Mutation;
use std::path::{Path, PathBuf};

/// Observed: every buggy server's own check fires within the first 70 seeds
/// from base 0 (naive at seed 1; answered-replay, the slowest, at 65; in
/// streamable-http answered-replay at 45).
const BOUND: u64 = 128;

fn first_finding(server: &str, check: CheckId) -> Option<u64> {
    first_finding_in(server, check, Dialect::LegacySse)
}

fn first_finding_in(server: &str, check: CheckId, dialect: Dialect) -> Option<u64> {
    (0..BOUND)
        .find(|&seed| hunt::run_seed_in(server, seed, false, dialect).unwrap().violated.iter().any(|c| check == *c))
}

#[test]
fn every_buggy_server_is_found_by_its_own_check_in_streamable_http_too() {
    // (local-fence's bug needs replicas: tests/replicas.rs hunts it deployed.)
    for m in Mutation::ALL.into_iter().filter(|m| !m.needs_replicas()) {
        let by = m.caught_by();
        let found = first_finding_in(m.name(), by, Dialect::StreamableHttp);
        assert!(found.is_some(), "{} not caught by {by} within {BOUND} streamable-http seeds", m.name());
    }
}

#[test]
fn guarded_has_no_findings_in_streamable_http_and_rmcp_has_many() {
    let opts = HuntOptions { dialect: Dialect::StreamableHttp, ..options("guarded", 150, 2) };
    assert!(opts.repeat_command().contains("--dialect streamable-http"), "{}", opts.repeat_command());
    let report = hunt::hunt(&opts, |_| {}).unwrap();
    assert!(report.bugs.is_empty(), "{:#?}", report.bugs);
    assert_eq!(report.failing_seeds, 0);
    // rmcp is hunted in its only dialect by default; its repro needs no flag.
    let report = hunt::hunt(&options("rmcp", 20, 2), |_| {}).unwrap();
    assert!(report.failing_seeds >= 15, "{} failing seeds", report.failing_seeds);
    let b = &report.bugs[0];
    assert_eq!(b.repro, format!("mcpsim replay --server rmcp --seed {}", b.first_seed));
}

#[test]
fn every_buggy_server_is_found_by_its_own_check_within_the_bound() {
    assert!(first_finding("naive", CheckId::SessionBinding).is_some(), "naive");
    for m in Mutation::ALL.into_iter().filter(|m| !m.needs_replicas()) {
        let found = first_finding(m.name(), m.caught_by());
        assert!(found.is_some(), "{} not caught by {} within {BOUND} seeds", m.name(), m.caught_by());
    }
}

fn options(server: &str, seeds: u64, jobs: usize) -> HuntOptions {
    HuntOptions { jobs, shrink_budget: 0, ..HuntOptions::new(server, Limit::Seeds(seeds)) }
}

#[test]
fn guarded_has_no_findings() {
    let report = hunt::hunt(&options("guarded", 150, 2), |_| {}).unwrap();
    assert_eq!(report.seeds_run, 150);
    assert!(report.bugs.is_empty(), "{:#?}", report.bugs);
}

#[test]
fn a_hunt_is_deterministic_whatever_the_parallelism() {
    let one = hunt::hunt(&options("naive", 24, 1), |_| {}).unwrap();
    let two = hunt::hunt(&options("naive", 24, 2), |_| {}).unwrap();
    assert_eq!(one, two);
    assert!(!one.bugs.is_empty());
    for seed in 0..12 {
        let o = hunt::run_seed("no-fence", seed, true).unwrap();
        assert_eq!(o.nondeterminism, None, "seed {seed}");
    }
}

#[test]
fn shards_split_the_seed_space_disjointly() {
    let mut seen = std::collections::BTreeSet::new();
    for k in 1..=3 {
        let opts = HuntOptions { shard: (k, 3), base_seed: 100, ..options("naive", 10, 1) };
        for i in 0..10 {
            assert!(seen.insert(opts.seed_at(i)), "seed {} in two shards", opts.seed_at(i));
        }
    }
    assert_eq!(seen, (100..130).collect());
}

#[test]
fn merge_joins_shards_by_signature_and_refuses_mismatches() {
    let mut a = hunt::hunt(&HuntOptions { shard: (1, 2), ..options("naive", 12, 1) }, |_| {}).unwrap();
    let b = hunt::hunt(&HuntOptions { shard: (2, 2), ..options("naive", 12, 1) }, |_| {}).unwrap();
    let merged = hunt::merge(vec![a.clone(), b.clone()]).unwrap();
    assert_eq!(merged.shards, ["1/2", "2/2"]);
    assert_eq!(merged.seeds_run, 24);
    assert_eq!(merged.failing_seeds, a.failing_seeds + b.failing_seeds);
    for (situation, n) in &merged.reach {
        assert_eq!(*n, a.reach[situation] + b.reach[situation], "{situation}: reach counts add up");
    }
    // One row per signature; its count is the sum of the shards' counts,
    // and its first seed the lower of theirs.
    let mut signatures: Vec<&str> = a.bugs.iter().chain(&b.bugs).map(|x| x.signature.as_str()).collect();
    signatures.sort();
    signatures.dedup();
    assert_eq!(merged.bugs.len(), signatures.len());
    assert!(merged.bugs.len() < a.bugs.len() + b.bugs.len(), "the shards share bugs: {:#?}", merged.bugs);
    for m in &merged.bugs {
        let of = |r: &HuntReport| r.bugs.iter().find(|x| x.signature == m.signature).cloned();
        let (x, y) = (of(&a), of(&b));
        assert_eq!(m.seeds, x.as_ref().map_or(0, |x| x.seeds) + y.as_ref().map_or(0, |y| y.seeds), "{}", m.signature);
        let first = x.iter().chain(y.iter()).map(|x| x.first_seed).min().unwrap();
        assert_eq!(m.first_seed, first, "{}", m.signature);
    }
    // A hunt equals the merge of its shards, row for row.
    let whole = hunt::hunt(&options("naive", 24, 1), |_| {}).unwrap();
    assert_eq!(whole.bugs, merged.bugs);
    assert!(hunt::merge(vec![a.clone(), a.clone()]).is_err(), "a shard twice");
    a.server = "guarded".into();
    assert!(hunt::merge(vec![a, b]).is_err(), "different hunts");
    let json = serde_json::to_string(&merged).unwrap();
    assert_eq!(serde_json::from_str::<HuntReport>(&json).unwrap(), merged);
}

#[test]
fn merge_keeps_the_smallest_reproducer_of_a_signature() {
    let bug = |seed: u64, steps: usize, file: &str| hunt::Bug {
        id: "00000001".into(),
        signature: "session-binding | drop".into(),
        checks: vec!["session-binding".into()],
        seeds: 3,
        first_seed: seed,
        headline: format!("seen at {seed}"),
        repro: format!("mcpsim replay --server naive --seed {seed}"),
        shrunk_from: Some(seed),
        steps: Some(steps),
        file: Some(file.into()),
        nondeterminism: None,
        replayed: None,
    };
    let report = |shard: &str, b: hunt::Bug| HuntReport {
        server: "naive".into(),
        base_seed: 0,
        shards: vec![shard.into()],
        seeds_run: 10,
        failing_seeds: 3,
        bugs: vec![b],
        reach: Default::default(),
        faults: Default::default(),
        harness_failures: Vec::new(),
        stopped: None,
    };
    let merged =
        hunt::merge(vec![report("1/2", bug(4, 5, "big.toml")), report("2/2", bug(7, 2, "small.toml"))]).unwrap();
    assert_eq!(merged.bugs.len(), 1);
    let m = &merged.bugs[0];
    assert_eq!((m.seeds, m.first_seed, m.steps, m.file.as_deref()), (6, 4, Some(2), Some("small.toml")));
    assert_eq!(m.repro, "mcpsim replay --server naive --seed 4", "the first seed's repro");
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Shrinks a canonical failure, writes it as a regression, and checks that
/// the file reproduces the violation and that guarded passes it.
fn shrink_canonical(file: &str, check: &str) -> usize {
    let plan = Plan::load(format!("scenarios/{file}").as_ref()).unwrap();
    let shrunk = shrink::shrink(&plan, "naive", check, 150);
    assert!(shrink::still_fails(&shrunk.plan, "naive", check));
    let dir = tmp_dir(&format!("shrink-{check}"));
    let origin = format!("mcpsim run scenarios/{file} --server naive");
    let path = hunt::write_regression(&dir, "naive", plan.seed.0, check, &origin, &shrunk).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# Found with server naive at seed"), "{text}");
    assert!(text.contains(&origin));
    let reloaded = Plan::load(&path).unwrap();
    let run = mcpsim::run(&reloaded, "naive", None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    assert!(mcpsim::check::violated(&verdicts).iter().any(|c| *c == check));
    assert!(mcpsim::check::expectation(&reloaded, "naive", &verdicts, &run.trace).unwrap().met);
    let run = mcpsim::run(&reloaded, "guarded", None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    assert!(mcpsim::check::expectation(&reloaded, "guarded", &verdicts, &run.trace).unwrap().met);
    reloaded.steps.len()
}

#[test]
fn canonical_failures_shrink_to_at_most_six_steps() {
    let n = shrink_canonical("nat-rebind.toml", "session-binding");
    assert!(n <= 6, "nat-rebind shrank to {n} steps");
    let n = shrink_canonical("second-client-leak.toml", "confidentiality");
    assert!(n <= 6, "second-client-leak shrank to {n} steps");
}

#[test]
fn a_hunt_finding_comes_back_as_a_regression_file() {
    let dir = tmp_dir("hunt-out");
    let opts = HuntOptions { out: Some(dir.clone()), shrink_budget: 60, ..options("no-fence", 2, 1) };
    let report = hunt::hunt(&opts, |_| {}).unwrap();
    let b = report.bugs.iter().find(|b| b.file.is_some()).expect("a shrunk bug");
    assert_eq!(b.repro, format!("mcpsim replay --server no-fence --seed {}", b.first_seed));
    let plan = Plan::load(b.file.as_ref().unwrap().as_ref()).unwrap();
    assert_eq!(Some(plan.steps.len()), b.steps);
    let run = mcpsim::run(&plan, "no-fence", None).unwrap();
    let violated = mcpsim::check::violated(&mcpsim::check::judge(&run.trace));
    for c in &b.checks {
        assert!(violated.iter().any(|v| v == c), "{violated:?} vs {:?}", b.checks);
    }
    let text = std::fs::read_to_string(b.file.as_ref().unwrap()).unwrap();
    assert!(text.contains(&format!("# signature: {}", b.signature)), "{text}");
}

#[test]
fn each_violated_check_of_a_seed_is_shrunk_and_filed_under_the_bug_its_reproducer_shows() {
    // no-fence seed 1 violates session-binding and liveness. Each is shrunk
    // on its own; the liveness reproducer still shows the dead stream
    // (session-binding) in the same situation, so it is the same bug, and
    // the smaller reproducer (2 steps, session-binding alone) is kept.
    let dir = tmp_dir("hunt-per-check");
    let opts = HuntOptions { out: Some(dir.clone()), shrink_budget: 60, base_seed: 1, ..options("no-fence", 1, 1) };
    let seed = hunt::run_seed("no-fence", 1, false).unwrap();
    assert_eq!(seed.violated, ["session-binding", "liveness"]);
    let report = hunt::hunt(&opts, |_| {}).unwrap();
    assert_eq!(report.bugs.len(), 1, "{:#?}", report.bugs);
    let bug = &report.bugs[0];
    let by_liveness = shrink::shrink(&hunt::generate(1), "no-fence", "liveness", 60);
    let run = mcpsim::run(&by_liveness.plan, "no-fence", None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    let violated: Vec<String> = mcpsim::check::violated(&verdicts).iter().map(|c| c.to_string()).collect();
    assert!(violated.contains(&"liveness".to_string()) && violated.contains(&"session-binding".to_string()));
    assert_eq!(hunt::signature::signature(&verdicts), bug.signature);
    assert!(by_liveness.plan.steps.len() >= bug.steps.unwrap());
    // The kept file reproduces what the table says.
    let plan = Plan::load(bug.file.as_ref().unwrap().as_ref()).unwrap();
    assert_eq!(Some(plan.steps.len()), bug.steps);
    let run = mcpsim::run(&plan, "no-fence", None).unwrap();
    let violated = mcpsim::check::violated(&mcpsim::check::judge(&run.trace));
    assert_eq!(violated.iter().map(|c| c.to_string()).collect::<Vec<_>>(), bug.checks);
    let json = serde_json::to_string(&report).unwrap();
    assert_eq!(serde_json::from_str::<HuntReport>(&json).unwrap(), report);
}

/// The signature table of each one-bug mutant, hunted over the first 300
/// seeds of each dialect: every row it has, and why where it has more than
/// one. (Measured over 1,000 seeds with `mcpsim hunt --server M --dialect D
/// --seeds 1000 --seed 0`: the same rows, except where a note says.)
const MUTANT_TABLE: [(&str, Dialect, &[&str], &str); 14] = [
    (
        "no-fence",
        Dialect::LegacySse,
        &["session-binding | dead-writer", "inflight-disposition | reached-twice", "replay-integrity | left-out"],
        "two writers, three faces: where the prior uplink is dropped its late writes show (session-binding); \
         where it is still alive (a thief holding the credential, a client on two devices), a re-issued \
         request reaches the live one under both ids (inflight-disposition), or events minted while the \
         resumption was on its way go to the other writer and leave the new stream short (replay-integrity)",
    ),
    (
        "no-fence",
        Dialect::StreamableHttp,
        &[
            "session-binding | dead-writer",
            "inflight-disposition | left-in-flight",
            "inflight-disposition | reached-twice",
        ],
        "two writers: late writes into the dropped uplink (session-binding); a re-issue handed to the \
         unfenced prior writer, which never reaches the new stream, or reaches a live one under both ids \
         (inflight-disposition)",
    ),
    ("truncating-replay", Dialect::LegacySse, &["replay-integrity | left-out"], ""),
    (
        "truncating-replay",
        Dialect::StreamableHttp,
        &["liveness | result-lost", "replay-integrity | left-out"],
        "the events left out of a tool call's replay may hold its result: the call then never gets it",
    ),
    ("answered-replay", Dialect::LegacySse, &["correlation-consistency | stale-correlation"], ""),
    ("answered-replay", Dialect::StreamableHttp, &["correlation-consistency | stale-correlation"], ""),
    ("orphaning", Dialect::LegacySse, &["inflight-disposition | left-in-flight"], ""),
    (
        "orphaning",
        Dialect::StreamableHttp,
        &["inflight-disposition | left-in-flight", "liveness | stuck"],
        "a client that never saw an id of its standalone stream opens a fresh one instead of resuming; \
         the request left on the dead one then shows only as a timeout (a fresh GET is no resumption \
         for inflight-disposition to judge; guarded re-issues there all the same)",
    ),
    (
        "unbound",
        Dialect::LegacySse,
        &["confidentiality | foreign-principal", "rejection-protocol | token-lifetime"],
        "a thief the server cannot tell from the owner: it takes the owner's events (confidentiality), \
         or, refused for another reason, is refused as the owner, and its refusal ends the owner's \
         session (rejection-protocol)",
    ),
    (
        "unbound",
        Dialect::StreamableHttp,
        &[
            "confidentiality | foreign-delete",
            "confidentiality | foreign-principal",
            "rejection-protocol | token-lifetime",
        ],
        "as in legacy-sse; and a thief that is never refused ends the owner's session (a DELETE is not a \
         leak: its own bug). A thief that is never refused and takes the owner's standalone stream over, \
         carrying only priming events, is the same foreign principal's bug (the takeover ends the owner's \
         stream)",
    ),
    // One defect, one row: the event named in Last-Event-ID sent again is
    // the root cause, whatever request it carries (an answered one handed
    // again, a pending one reached twice: those used to be rows of their own).
    ("inclusive-replay", Dialect::LegacySse, &["stream-order | resent"], ""),
    ("inclusive-replay", Dialect::StreamableHttp, &["stream-order | resent"], ""),
    ("empty-ok", Dialect::LegacySse, &["rejection-protocol | silent-refusal"], ""),
    (
        "empty-ok",
        Dialect::StreamableHttp,
        &[
            "rejection-protocol | silent-refusal",
            "rejection-protocol | token-lifetime",
            "session-binding | dead-writer",
        ],
        "an empty 200 is a poll in streamable-http when the id is the session's: the client reads the \
         refusal as an acceptance, so the unfenced prior writer goes on (session-binding) and the token it \
         was told is dead keeps working (rejection-protocol); to an id the session never minted, the same \
         empty 200 is a refusal in disguise (rejection-protocol's silent refusal)",
    ),
];

#[test]
fn a_hunt_against_each_mutant_finds_its_bug_once() {
    let mut wrong = Vec::new();
    for (server, dialect, expected, why) in MUTANT_TABLE {
        let m = Mutation::ALL.into_iter().find(|m| m.name() == server).unwrap();
        let dir = tmp_dir(&format!("mutant-{server}-{}", dialect.name()));
        let opts = HuntOptions { out: Some(dir), shrink_budget: 150, dialect, ..options(server, 300, 2) };
        let report = hunt::hunt(&opts, |_| {}).unwrap();
        let mut rows: Vec<&str> = report.bugs.iter().map(|b| b.signature.as_str()).collect();
        rows.sort();
        let mut expected = expected.to_vec();
        expected.sort();
        println!("{server} {}: {} failing seeds: {rows:?}", dialect.name(), report.failing_seeds);
        // The check that exists to catch it fails in one of its reproducers.
        let own = m.caught_by();
        if !report.bugs.iter().any(|b| b.checks.iter().any(|c| own == **c)) || rows != expected {
            wrong.push(format!("{server} {}: {rows:?}, expected {expected:?} ({why})", dialect.name()));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_hunt_against_naive_yields_a_small_set_of_bugs() {
    let dir = tmp_dir("naive-bugs");
    let opts = HuntOptions { out: Some(dir.clone()), shrink_budget: 150, ..options("naive", 300, 2) };
    let report = hunt::hunt(&opts, |_| {}).unwrap();
    for b in &report.bugs {
        println!(
            "{} {:>4} seeds  first {:>4}  {:?} steps  {}  {:?}",
            b.id, b.seeds, b.first_seed, b.steps, b.signature, b.checks
        );
    }
    assert!(report.failing_seeds > 200, "{}", report.failing_seeds);
    assert!((4..=12).contains(&report.bugs.len()), "{} bugs", report.bugs.len());
    // One file per bug, each named by its signature's id.
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), report.bugs.len());
    for b in &report.bugs {
        assert!(b.file.as_ref().unwrap().ends_with(&format!("-{}.toml", b.id)), "{:?}", b.file);
    }
    // The counts are per seed and per bug: a seed counts once for each bug it hit.
    assert!(report.bugs.iter().map(|b| b.seeds).sum::<u64>() >= report.failing_seeds);
}

#[test]
fn hunting_again_into_the_same_directory_writes_no_duplicate() {
    let dir = tmp_dir("idempotent");
    let opts = HuntOptions { out: Some(dir.clone()), shrink_budget: 100, ..options("naive", 40, 2) };
    let first = hunt::hunt(&opts, |_| {}).unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<(String, String)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = listing(&dir);
    assert_eq!(before.len(), first.bugs.len());
    let again = hunt::hunt(&opts, |_| {}).unwrap();
    assert_eq!(listing(&dir), before, "the same files, byte for byte");
    assert_eq!(
        again.bugs.iter().map(|b| &b.file).collect::<Vec<_>>(),
        first.bugs.iter().map(|b| &b.file).collect::<Vec<_>>()
    );
    // A longer hunt into the same directory adds files only for new signatures.
    let longer = hunt::hunt(&HuntOptions { limit: Limit::Seeds(80), ..opts.clone() }, |_| {}).unwrap();
    let after = listing(&dir);
    assert_eq!(after.len(), longer.bugs.len(), "{after:#?}");
    for (name, _) in &before {
        assert!(after.iter().any(|(n, _)| n == name), "{name} is still there");
    }
}

#[test]
fn stopping_rules_end_the_hunt_at_the_seed_that_found_the_last_bug() {
    // (One seed may find two new bugs at once: both are kept.)
    let first = hunt::hunt(&HuntOptions { max_bugs: Some(1), ..options("no-fence", 300, 2) }, |_| {}).unwrap();
    assert!(!first.bugs.is_empty());
    let seed = first.bugs[0].first_seed;
    assert!(first.bugs.iter().all(|b| b.first_seed == seed), "{:#?}", first.bugs);
    assert_eq!(first.seeds_run, seed + 1, "the seeds judged are 0..={seed}, whatever ran beyond it");
    let three = hunt::hunt(&HuntOptions { max_bugs: Some(3), ..options("naive", 300, 2) }, |_| {}).unwrap();
    assert!(three.bugs.len() >= 3);
    assert!(three.seeds_run < 300);
    let last = three.bugs.iter().map(|b| b.first_seed).max().unwrap();
    assert_eq!(three.seeds_run, last + 1);
    // The same rule on one thread judges the same seeds.
    let one = hunt::hunt(&HuntOptions { max_bugs: Some(3), ..options("naive", 300, 1) }, |_| {}).unwrap();
    assert_eq!(one, three);
}

/// The situations a bundled scenario reaches, read from its trace on `server`.
fn reached_by(file: &str, server: &str) -> Vec<&'static str> {
    let plan = Plan::load(file.as_ref()).unwrap();
    let run = mcpsim::run(&plan, server, None).unwrap();
    hunt::reach::reached(&run.trace, &plan.server)
}

#[test]
fn reach_is_read_from_the_trace_and_names_the_scenarios_situation() {
    use hunt::reach::*;
    let cases: [(&str, &str); 11] = [
        ("scenarios/evicted-id.toml", RETENTION_OVERFLOW),
        ("scenarios/slow-fence.toml", FENCE_DELAY),
        ("scenarios/not-reissuable.toml", NOT_REISSUABLE),
        ("scenarios/late-answer-window.toml", STALE_OVER_SETTLED),
        ("scenarios/streamable-http/window-edge.toml", WINDOW_EDGE),
        // alice answers req-7 over POST after guarded re-issued it: a real
        // client answers what it received, whatever became of its stream.
        ("scenarios/inflight-at-resume.toml", ANSWER_AFTER_REISSUE),
        ("scenarios/window-edge.toml", WINDOW_EDGE),
        ("scenarios/late-answer-window.toml", ANSWER_AFTER_TIMEOUT),
        ("scenarios/streamable-http/call-stream-takeover.toml", CALL_STREAM_THEFT),
        ("scenarios/streamable-http/deleted-session.toml", OWNER_DELETE),
        ("scenarios/streamable-http/foreign-delete.toml", FOREIGN_DELETE),
    ];
    for (file, situation) in cases {
        let got = reached_by(file, "guarded");
        assert!(got.contains(&situation), "{file}: {got:?}");
    }
    // Scenarios with none of them reach none (one resume, a live request at most).
    for file in ["scenarios/clean-resume.toml", "scenarios/nat-rebind.toml"] {
        assert_eq!(reached_by(file, "guarded"), Vec::<&str>::new(), "{file}");
    }
}

#[test]
fn a_hunt_counts_how_often_it_reaches_each_situation() {
    use hunt::reach::*;
    let legacy = hunt::hunt(&options("guarded", 120, 2), |_| {}).unwrap();
    let streamable =
        hunt::hunt(&HuntOptions { dialect: Dialect::StreamableHttp, ..options("guarded", 120, 2) }, |_| {}).unwrap();
    println!("legacy-sse: {:#?}\nstreamable-http: {:#?}", legacy.reach, streamable.reach);
    for s in [WINDOW_EDGE, PENDING_RESUMES, ANSWER_AFTER_TIMEOUT] {
        assert!(legacy.reach[s] > 0, "legacy-sse never reached {s}: {:?}", legacy.reach);
    }
    for s in [PENDING_RESUMES, ANSWER_AFTER_REISSUE, CALL_STREAM_THEFT, OWNER_DELETE, FOREIGN_DELETE] {
        assert!(streamable.reach[s] > 0, "streamable-http never reached {s}: {:?}", streamable.reach);
    }
    // Tool calls and DELETE exist only in streamable-http.
    for s in [CALL_STREAM_THEFT, OWNER_DELETE, FOREIGN_DELETE] {
        assert_eq!(legacy.reach[s], 0, "{s}");
    }
    // The situations added by issue 26 (item 16), in both dialects.
    // (The stale resume over a late answer is rarer in legacy-sse, about
    // 0.5 % of seeds: 25,000 seeds reach it 127 times; the bundled
    // late-answer-window shows it there.)
    for s in [RETENTION_OVERFLOW, FENCE_DELAY, NOT_REISSUABLE] {
        assert!(legacy.reach[s] > 0, "legacy-sse never reached {s}: {:?}", legacy.reach);
    }
    for s in [RETENTION_OVERFLOW, FENCE_DELAY, NOT_REISSUABLE, STALE_OVER_SETTLED, SPANS_STREAMS] {
        assert!(streamable.reach[s] > 0, "streamable-http never reached {s}: {:?}", streamable.reach);
    }
    // A legacy-sse session has one stream.
    assert_eq!(legacy.reach[SPANS_STREAMS], 0);
}

/// A late answer to a retired id, its re-issue still unanswered, then a
/// stale resume over both (issue 26, item 16): the generator reaches it in
/// streamable-http (about 1.8 % of seeds: `mcpsim hunt --server guarded
/// --dialect streamable-http --seeds 500 --seed 0 --no-shrink`), and guarded
/// passes every seed that does.
#[test]
fn the_generator_reaches_a_stale_resume_over_a_retired_id_and_its_pending_reissue() {
    let mut reached = Vec::new();
    for seed in 0..300 {
        let plan = hunt::generate_in(seed, Dialect::StreamableHttp);
        let run = mcpsim::run(&plan, "guarded", None).unwrap();
        if hunt::reach::reached(&run.trace, &plan.server).contains(&hunt::reach::STALE_OVER_RETIRED) {
            // (A thief holding the owner's credential is reported, inherent: no finding.)
            let verdicts = mcpsim::check::judge(&run.trace);
            let findings = verdicts.iter().flat_map(|v| v.violations().iter()).filter(|v| !v.inherent).count();
            assert_eq!(findings, 0, "guarded fails seed {seed}");
            reached.push(seed);
        }
    }
    assert!(reached.len() >= 2, "reached on seeds {reached:?}");
}

#[test]
fn a_plan_that_names_a_client_only_through_seen_by_keeps_that_client() {
    // The shrinker once dropped a client that a `seen_by` id still named and
    // then wrote a regression file the loader rejects. One validator now
    // decides for the loader, the world and the shrinker.
    let text = "[scenario]\nname = \"s\"\ndialect = \"streamable-http\"\nduration = \"30s\"\n\
        [[client]]\nname = \"alice\"\n[[client]]\nname = \"mallory\"\n\
        [[step]]\nat = \"1s\"\ndo = \"connect\"\nclient = \"alice\"\n\
        [[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\n\
        [[step]]\nat = \"3s\"\ndo = \"steal-token\"\nfrom = \"alice\"\nto = \"mallory\"\n\
        [[step]]\nat = \"4s\"\ndo = \"resume\"\nclient = \"mallory\"\nlast_event_id = { seen_by = \"alice\", nth = 1 }\n";
    let mut plan = Plan::from_toml_str(text, "s.toml").unwrap();
    plan.steps.remove(0);
    plan.steps.remove(0);
    plan.steps.remove(0); // alice is now named only by mallory's seen_by
    assert!(plan.validate().is_ok());
    plan.clients.retain(|c| c.name != "alice");
    let problem = plan.validate().unwrap_err();
    assert_eq!(problem.step, Some(0));
    assert!(problem.message.contains("unknown client \"alice\""), "{problem:?}");
    assert!(mcpsim::run(&plan, "guarded", None).is_err(), "the world refuses it too");
}

#[test]
fn every_regression_the_shrinker_writes_loads_back() {
    for (server, dialect) in
        [("naive", Dialect::StreamableHttp), ("rmcp", Dialect::StreamableHttp), ("naive", Dialect::LegacySse)]
    {
        let dir = tmp_dir(&format!("shrunk-{server}-{dialect:?}"));
        let opts = HuntOptions { out: Some(dir.clone()), shrink_budget: 25, dialect, ..options(server, 6, 2) };
        hunt::hunt(&opts, |_| {}).unwrap();
        let mut files = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let plan = Plan::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(plan.validate().is_ok());
            files += 1;
        }
        assert!(files > 0, "{server} {dialect:?}: no regression written");
    }
}

/// A seed whose two runs differ counts once, though the bugs its other
/// failures start carry the same note (the summary once said "3 of 1 seeds").
#[test]
fn a_nondeterministic_seed_counts_once() {
    let bug = |checks: &[&str], seeds: u64, note: Option<&str>| mcpsim::hunt::Bug {
        id: "00000000".into(),
        signature: checks.join(","),
        checks: checks.iter().map(|c| c.to_string()).collect(),
        seeds,
        first_seed: 223,
        headline: String::new(),
        repro: String::new(),
        shrunk_from: None,
        steps: None,
        file: None,
        nondeterminism: note.map(str::to_string),
        replayed: None,
    };
    let differs = Some("traces differ at event 118");
    let report = HuntReport {
        server: "rmcp".into(),
        base_seed: 223,
        shards: vec!["1/1".into()],
        seeds_run: 40,
        failing_seeds: 40,
        bugs: vec![
            bug(&["nondeterminism"], 1, differs),
            bug(&["stream-order"], 30, differs),
            bug(&["liveness"], 12, differs),
            bug(&["replay-integrity"], 5, None),
        ],
        reach: Default::default(),
        faults: Default::default(),
        harness_failures: Vec::new(),
        stopped: None,
    };
    assert_eq!(report.nondeterministic_seeds(), 1);
}

/// Found by a guarded hunt: a reference engine numbers each session's events
/// from the same start, and a re-issue's event id goes unreported, so event
/// 1002 of alice's session (delivered to a thief holding her credential) was
/// once taken for bob's 1002, a leak between sessions. confidentiality's
/// cross-session rule now also needs the same bytes delivered on the other
/// session; guarded is clean on this seed and on 3,000 more of each dialect.
#[test]
fn ids_reused_across_sessions_are_not_a_leak_between_them() {
    let o = hunt::run_seed("guarded", 17, false).unwrap();
    assert!(o.violated.is_empty(), "{:?}: {:?}", o.violated, o.headline);
}

/// Hunts draw the MCP security best practices' session-hijack prompt
/// injection in streamable-http (`InjectTool`, from a stream of its own): a
/// thief holding an owner's session id calls `enable_tool` on it. naive and
/// unbound, which serve any holder of the id, let the change through to
/// the owner's stream on some of those seeds (`confidentiality`, a foreign
/// tool change that is not inherent); guarded, which checks the caller
/// against the session's owner, on none (a thief holding the owner's
/// credential too is inherent: no server can tell).
#[test]
fn hunts_draw_the_session_hijack_injection_and_confidentiality_tells_who_lets_it_through() {
    let plans: Vec<Plan> = (1..=700)
        .map(|seed| hunt::generate_in(seed, Dialect::StreamableHttp))
        .filter(|p| p.description.contains("InjectTool"))
        .collect();
    assert!(plans.len() >= 40, "{} seeds drew the injection", plans.len());
    let injected = |server: &str, inherent: bool| {
        plans
            .iter()
            .filter(|plan| {
                let run = mcpsim::run(plan, server, None).unwrap();
                mcpsim::check::judge(&run.trace).iter().flat_map(|v| v.violations()).any(|v| {
                    v.inherent == inherent && matches!(v.finding, mcpsim::check::Finding::ForeignToolChange { .. })
                })
            })
            .count()
    };
    assert!(injected("naive", false) >= 10, "naive");
    assert!(injected("unbound", false) >= 10, "unbound");
    assert_eq!(injected("guarded", false), 0, "guarded");
    assert!(injected("guarded", true) >= 5, "a thief with the credential is inherent");
    // No enable-tool in legacy-sse (no tool calls there).
    assert!(!(1..=300).any(|s| hunt::generate_in(s, Dialect::LegacySse).description.contains("InjectTool")));
}

/// Issue "Verdicts you can trust, part 4", item 8: a signature joins no two
/// defects, and the shrinker keeps its bucket's own.
#[test]
fn a_thiefs_delete_and_a_leak_are_two_bugs_and_shrinking_keeps_the_bucket() {
    use mcpsim::hunt::signature::signature;
    // The defect of each seed's first confidentiality line.
    let defect = |seed: u64| {
        let plan = hunt::generate_in(seed, mcpsim::scenario::Dialect::StreamableHttp);
        let v = mcpsim::check::judge(&mcpsim::run(&plan, "rmcp", None).unwrap().trace);
        let c = v.iter().find(|x| x.check == "confidentiality").unwrap();
        let first = c.violations().iter().find(|x| !x.inherent).expect("a confidentiality line");
        (mcpsim::hunt::signature::defect(&first.finding), first.headline())
    };
    // rmcp's bucket 39a98c62 once printed a leak while its regression file showed a thief's DELETE.
    let (leak, words) = defect(8100010);
    assert_eq!(leak, "foreign-principal", "{words}");
    assert!(words.contains("received"), "{words}");
    let (delete, words) = defect(8100018);
    assert_eq!(delete, "foreign-delete", "{words}");
    assert!(words.contains("with DELETE"), "{words}");
    // A shrink that keeps only the check trades seed 8100014's stuck request
    // for another liveness line (rmcp's seed 8100021 once traded its liveness
    // line for a session-binding bug).
    let plan = hunt::generate_in(8100014, mcpsim::scenario::Dialect::StreamableHttp);
    let run = mcpsim::run(&plan, "rmcp", None).unwrap();
    let v = mcpsim::check::judge(&run.trace);
    let liveness = v.iter().find(|x| x.check == "liveness").unwrap();
    let first = liveness.violations().iter().find(|x| !x.inherent).expect("a liveness line").finding.clone();
    let defect = mcpsim::hunt::signature::defect(&first);
    let shrunk = shrink::shrink_keeping(&plan, "rmcp", "liveness", defect, 150);
    assert!(shrunk.plan.steps.len() < plan.steps.len(), "it shrank");
    let after = mcpsim::check::judge(&mcpsim::run(&shrunk.plan, "rmcp", None).unwrap().trace);
    let kept = after.iter().find(|x| x.check == "liveness").unwrap();
    assert!(
        kept.violations().iter().any(|x| !x.inherent && mcpsim::hunt::signature::defect(&x.finding) == defect),
        "the shrunk plan lost its {defect} line: {}",
        signature(&after)
    );
}
