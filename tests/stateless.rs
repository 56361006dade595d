//! The stateless-http dialect (MCP 2026-07-28) end to end: every bundled
//! stateless scenario on every server that speaks it, its verdict matrix
//! (`snapshots/matrix/stateless.snap`) and reports
//! (`snapshots/report/stateless-http/`), the canonical scenarios' numbers,
//! and each one-bug mutant caught by its own check.

mod common;

use mcpsim::check::{self, CheckId, Status, Verdict};
use mcpsim::scenario::{Dialect, Plan};
use mcpsim::trace::stateless::ExecStep;
use mcpsim::trace::What;
use std::collections::BTreeMap;

fn servers() -> Vec<&'static str> {
    mcpsim::server::known_servers().into_iter().filter(|s| mcpsim::server::speaks(s, Dialect::StatelessHttp)).collect()
}

fn plans() -> Vec<Plan> {
    common::stateless_scenarios().iter().map(|p| Plan::load(p).unwrap()).collect()
}

/// A run's verdicts, its report and its expectation.
type Cell = (Vec<Verdict>, String, Option<check::Expectation>);

fn matrix() -> BTreeMap<(String, String), Cell> {
    let mut m = BTreeMap::new();
    for plan in plans() {
        for server in servers() {
            let run = mcpsim::run(&plan, server, None).unwrap();
            let verdicts = check::judge(&run.trace);
            let e = check::expectation(&plan, server, &verdicts, &run.trace);
            let report = mcpsim::report::text(&run, &verdicts, e.as_ref());
            m.insert((plan.name.clone(), server.to_string()), (verdicts, report, e));
        }
    }
    m
}

#[test]
fn the_stateless_matrix_meets_every_expectation_and_matches_its_snapshots() {
    let m = matrix();
    let servers = servers();
    assert_eq!(
        servers,
        [
            "naive",
            "guarded",
            "rmcp",
            "rmcp-unsealed",
            "unbound-state",
            "unsealed-state",
            "reusable-state",
            "uncancelled",
            "ephemeral-key",
            "local-once"
        ]
    );
    let plans = plans();
    assert!(plans.len() >= 13, "{} stateless scenarios", plans.len());
    let mut table = format!("{:<44}", "scenario \\ server");
    for s in &servers {
        table.push_str(&format!(" {s:<16}"));
    }
    table.push('\n');
    for plan in &plans {
        table.push_str(&format!("{:<44}", plan.name));
        for s in &servers {
            let (verdicts, _, e) = &m[&(plan.name.clone(), s.to_string())];
            // Every stateless scenario states its expectation for every server that speaks it, and meets it.
            let e = e.as_ref().unwrap_or_else(|| panic!("{} has no [expect] for {s}", plan.name));
            assert!(e.met, "{} on {s}: {}", plan.name, mcpsim::report::expectation_line(s, e));
            let short: Vec<String> = check::violated(verdicts)
                .iter()
                .map(|c| c.as_str().split('-').map(|w| w[..1].to_uppercase()).collect::<String>())
                .collect();
            let text = if short.is_empty() { "ok".to_string() } else { short.join(",") };
            table.push_str(&format!(" {text:<16}"));
        }
        table.push('\n');
    }
    table.push_str("\nSB state-binding, SI state-integrity, EO exactly-once, C cancellation (or confidentiality), L liveness, P protocol\n");
    common::snapshot("matrix", "stateless", &table, None);
    for ((scenario, server), (_, report, _)) in &m {
        common::snapshot("report/stateless-http", &format!("{scenario}__{server}"), report, None);
    }
}

#[test]
fn every_stateless_check_fires_somewhere_and_each_mutant_is_caught_by_its_own_check() {
    let m = matrix();
    let violated = |scenario: &str, server: &str| check::violated(&m[&(scenario.to_string(), server.to_string())].0);
    // Each mutant differs from guarded by one check, somewhere: the check its bug breaks.
    for (mutant, own) in [
        ("unbound-state", CheckId::StateBinding),
        ("unsealed-state", CheckId::StateIntegrity),
        ("reusable-state", CheckId::ExactlyOnce),
        ("uncancelled", CheckId::Cancellation),
        ("ephemeral-key", CheckId::Liveness),
        ("local-once", CheckId::ExactlyOnce),
    ] {
        let caught: Vec<String> = plans()
            .iter()
            .filter(|p| {
                let (g, x) = (violated(&p.name, "guarded"), violated(&p.name, mutant));
                x.contains(&own) && !g.contains(&own)
            })
            .map(|p| p.name.clone())
            .collect();
        assert!(!caught.is_empty(), "{mutant} is never caught by {own}");
    }
    for c in &check::stateless::CHECKS {
        let fired = m.values().any(|(v, _, _)| check::violated(v).contains(&c.id));
        let quiet = m
            .values()
            .any(|(v, _, _)| v.iter().any(|x| x.check == c.id && !matches!(x.status, Status::Violated { .. })));
        // No built-in stateless server garbles the wire: the hand-built
        // traces (src/check/tests/stateless.rs) prove that protocol fires.
        if c.id != CheckId::Protocol {
            assert!(fired && quiet, "{}: fired {fired}, quiet {quiet}", c.id);
        }
    }
}

/// When each execution of the run reached `step`, in seconds.
fn times(run: &mcpsim::Run, step: ExecStep) -> Vec<(u32, f64)> {
    run.trace
        .iter()
        .filter_map(|e| match &e.what {
            What::Execution { exec, step: s, .. } if *s == step => Some((*exec, e.t_us.secs_f64())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_canonical_nat_rebind_runs_the_tool_twice_on_naive_and_once_on_guarded() {
    let plan = Plan::load("scenarios/stateless-http/nat-rebind.toml".as_ref()).unwrap();
    let naive = mcpsim::run(&plan, "naive", None).unwrap();
    // The first execution ends at 121 s, 19 s after the NAT's reset reached the server at 102 s.
    assert_eq!(times(&naive, ExecStep::Effect), [(1, 121.06), (2, 169.66)]);
    assert_eq!(check::violated(&check::judge(&naive.trace)), [CheckId::ExactlyOnce, CheckId::Cancellation]);
    let guarded = mcpsim::run(&plan, "guarded", None).unwrap();
    assert_eq!(times(&guarded, ExecStep::Cancelled), [(1, 102.02)]);
    assert_eq!(times(&guarded, ExecStep::Effect), [(2, 169.66)]);
    // guarded's one violation is the inherent report of the half-open stretch.
    let verdicts = check::judge(&guarded.trace);
    assert!(verdicts.iter().flat_map(|v| v.violations()).all(|v| v.inherent));
}

#[test]
fn the_canonical_leak_completes_alices_transfer_for_mallory_on_naive_only() {
    let plan = Plan::load("scenarios/stateless-http/second-client-leak.toml".as_ref()).unwrap();
    let completed_for = |server: &str| -> Vec<(String, f64)> {
        let run = mcpsim::run(&plan, server, None).unwrap();
        run.trace
            .iter()
            .filter_map(|e| match &e.what {
                What::CallEnded { client, end: mcpsim::trace::stateless::CallEnd::Complete { .. }, .. } => {
                    Some((client.clone(), e.t_us.secs_f64()))
                }
                _ => None,
            })
            .collect()
    };
    // mallory presents at 5 s; alice confirms at 31 s.
    let naive = completed_for("naive");
    assert_eq!(naive.len(), 2, "{naive:?}");
    assert_eq!(naive[0].0, "mallory");
    assert!(naive[0].1 < 5.2, "{naive:?}");
    let guarded = completed_for("guarded");
    assert_eq!(guarded.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["alice"]);
}

#[test]
fn stateless_runs_are_deterministic() {
    for plan in plans() {
        for server in servers() {
            let a = mcpsim::run(&plan, server, None).unwrap().trace.to_jsonl();
            let b = mcpsim::run(&plan, server, None).unwrap().trace.to_jsonl();
            assert!(a == b, "{} on {server}: traces differ", plan.name);
        }
    }
}

#[test]
fn stateful_servers_refuse_a_stateless_scenario_and_stateless_steps_need_their_dialect() {
    let plan = Plan::load("scenarios/stateless-http/nat-rebind.toml".as_ref()).unwrap();
    let err = mcpsim::run(&plan, "no-fence", None).unwrap_err().to_string();
    assert!(err.contains("speaks only dialect \"legacy-sse\" and \"streamable-http\""), "{err}");
    let err = Plan::from_toml_str(
        "[scenario]\nname = \"x\"\nduration = \"10s\"\n[[client]]\nname = \"a\"\n[[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"a\"\ntool = \"t\"\nlabel = \"c\"\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("step `call` needs dialect = \"stateless-http\""), "{err}");
    let err = Plan::from_toml_str(
        "[scenario]\nname = \"x\"\ndialect = \"stateless-http\"\nduration = \"10s\"\n[[client]]\nname = \"a\"\n[[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"a\"\ntool = \"nope\"\nlabel = \"c\"\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("x.toml:11:8: unknown tool \"nope\" (declared in [[tool]]: none)"), "{err}");
    let err = Plan::from_toml_str(
        "[scenario]\nname = \"x\"\ndialect = \"stateless-http\"\nduration = \"10s\"\n[[client]]\nname = \"a\"\n[[step]]\nat = \"1s\"\ndo = \"resume\"\nclient = \"a\"\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("step `resume` needs dialect = \"legacy-sse\" or \"streamable-http\""), "{err}");
}

/// One signature per one-bug mutant in a stateless hunt of 300 seeds (shrunk),
/// and the check that exists to catch it among its reproducer's checks.
const STATELESS_MUTANTS: [(&str, &str, CheckId); 6] = [
    ("unbound-state", "state-binding | foreign-state", CheckId::StateBinding),
    ("unsealed-state", "state-integrity | tampered-state", CheckId::StateIntegrity),
    ("reusable-state", "exactly-once | redeemed-twice", CheckId::ExactlyOnce),
    ("uncancelled", "cancellation | ran-after-close", CheckId::Cancellation),
    ("ephemeral-key", "liveness | stuck", CheckId::Liveness),
    ("local-once", "exactly-once | redeemed-twice", CheckId::ExactlyOnce),
];

fn hunt_options(server: &str, seeds: u64) -> mcpsim::hunt::HuntOptions {
    mcpsim::hunt::HuntOptions {
        jobs: 2,
        shrink_budget: 0,
        dialect: Dialect::StatelessHttp,
        ..mcpsim::hunt::HuntOptions::new(server, mcpsim::hunt::Limit::Seeds(seeds))
    }
}

#[test]
fn a_stateless_hunt_catches_each_mutant_by_its_own_check_with_one_signature() {
    for (server, signature, own) in STATELESS_MUTANTS {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stateless-{server}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let opts = mcpsim::hunt::HuntOptions { out: Some(dir), shrink_budget: 150, ..hunt_options(server, 300) };
        let report = mcpsim::hunt::hunt(&opts, |_| {}).unwrap();
        let rows: Vec<&str> = report.bugs.iter().map(|b| b.signature.as_str()).collect();
        assert_eq!(rows, [signature], "{server}: {} failing seeds", report.failing_seeds);
        assert!(report.bugs[0].checks.iter().any(|c| own == **c), "{server}: {:?}", report.bugs[0].checks);
    }
}

#[test]
fn guarded_is_clean_on_stateless_seeds_and_they_are_deterministic() {
    let opts = mcpsim::hunt::HuntOptions { check_determinism: true, ..hunt_options("guarded", 300) };
    let report = mcpsim::hunt::hunt(&opts, |_| {}).unwrap();
    assert_eq!(report.seeds_run, 300);
    assert!(report.bugs.is_empty(), "{:#?}", report.bugs);
    assert_eq!(report.nondeterministic_seeds(), 0);
    // The hunt reached every situation it measures.
    for s in mcpsim::hunt::stateless::SITUATIONS {
        assert!(report.reach[s] > 0, "{s}: {:?}", report.reach);
    }
}

/// A stateless server that answers every request with one fixed raw HTTP response.
struct Raw(&'static [u8]);

impl mcpsim::server::ServerPlug for Raw {
    fn name(&self) -> &str {
        "raw"
    }
    fn serve(
        &self,
        listener: mcpsim::net::Listener,
        _app: mcpsim::server::AppHook,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let answer = self.0;
        Box::pin(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::task::spawn_local(async move {
                    // Read the request (head and a small body), then answer.
                    let mut buf = [0u8; 8192];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(answer).await;
                    let _ = s.shutdown().await;
                });
            }
        })
    }
}

#[test]
fn a_server_that_answers_neither_json_nor_sse_or_an_unknown_result_type_is_a_protocol_finding() {
    let plan = Plan::from_toml_str(
        "[scenario]\nname = \"bad\"\ndialect = \"stateless-http\"\nduration = \"60s\"\n[[client]]\nname = \"alice\"\n\
         [[tool]]\nname = \"t\"\n[[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"t\"\nlabel = \"c\"\n",
        "bad.toml",
    )
    .unwrap();
    let http = |ct: &str, body: &str| -> &'static [u8] {
        let text = format!("HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        Box::leak(text.into_bytes().into_boxed_slice())
    };
    let cases = [
        (http("text/plain", "hello"), "neither JSON nor SSE"),
        (
            http("application/json", r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"x"}}"#),
            "unknown resultType \"x\"",
        ),
        (http("application/json", r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), "a result without resultType"),
    ];
    for (answer, words) in cases {
        let run = mcpsim::run_with(&plan, std::rc::Rc::new(Raw(answer)), plan.seed).unwrap();
        let verdicts = check::judge(&run.trace);
        let protocol = verdicts.iter().find(|v| v.check == CheckId::Protocol).unwrap();
        let headlines: Vec<String> = protocol.violations().iter().map(|v| v.headline()).collect();
        assert!(headlines.iter().any(|h| h.contains(words)), "{words}: {headlines:?}");
        // The call ended with the unreadable answer: that is protocol's
        // finding, and the call it ended is no second bug (issue "Bugs that
        // escape", item 9).
        assert_eq!(check::violated(&verdicts), [CheckId::Protocol], "{words}");
    }
}

#[test]
fn a_malformed_request_state_is_refused_by_a_located_error_not_a_crash() {
    // tampered-state truncates alice's sealed state: guarded and naive both refuse it as unreadable.
    let plan = Plan::load("scenarios/stateless-http/tampered-state.toml".as_ref()).unwrap();
    for server in ["guarded", "naive"] {
        let run = mcpsim::run(&plan, server, None).unwrap();
        assert!(run.aborted.is_none());
        let refused = run.trace.iter().any(|e| {
            matches!(&e.what, What::StateChecked { verdict: mcpsim::trace::stateless::StateVerdict::Refused { why }, .. }
                if why.contains("parse") || why.contains("tag") || why.contains("hex"))
        });
        assert!(refused, "{server}");
    }
}

/// What the application of `server` decided about each presented state in `scenario`.
fn state_decisions(scenario: &str, server: &str) -> Vec<(String, Option<String>)> {
    let path = format!("{}/scenarios/stateless-http/{scenario}.toml", env!("CARGO_MANIFEST_DIR"));
    let plan = Plan::load(path.as_ref()).unwrap();
    let run = mcpsim::run(&plan, server, None).unwrap();
    run.trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::StateChecked { principal, verdict, .. } => Some((
                principal.clone(),
                match verdict {
                    mcpsim::trace::stateless::StateVerdict::Accepted => None,
                    mcpsim::trace::stateless::StateVerdict::Refused { why } => Some(why.clone()),
                },
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn rmcp_seals_with_its_codec_and_its_plain_path_honours_an_altered_state() {
    // rmcp: RequestStateCodec with the principal and request as associated data.
    let sealed = state_decisions("tampered-state", "rmcp");
    assert!(sealed[0].1.as_deref().is_some_and(|w| w.starts_with("rmcp's codec: ")), "{sealed:?}");
    assert!(sealed[1].1.as_deref().is_some_and(|w| w.starts_with("rmcp's codec: ")), "{sealed:?}");
    let moved = state_decisions("cross-request-state", "rmcp");
    assert_eq!(moved[0].1.as_deref(), Some("rmcp's codec: request state failed integrity verification"));
    let stolen = state_decisions("second-client-leak", "rmcp");
    assert_eq!(
        stolen[0],
        ("mallory".to_string(), Some("rmcp's codec: request state failed integrity verification".into()))
    );
    // The codec does not enforce single use: the registry is the application's.
    let once = state_decisions("once-redeemed-twice", "rmcp");
    assert_eq!(once[1].1.as_deref(), Some("this one-time state was already redeemed"));
    // rmcp-unsealed: from_request_state, JSON read back field by field. The flip lands
    // in the nonce, which nothing checks; the truncated JSON no longer parses.
    let plain = state_decisions("tampered-state", "rmcp-unsealed");
    assert_eq!(plain[0], ("alice".to_string(), None));
    assert!(plain[1].1.as_deref().is_some_and(|w| w.starts_with("not our state: ")), "{plain:?}");
}

#[test]
fn rmcp_cancels_on_a_close_before_and_after_its_first_message_and_sends_headers_with_that_message() {
    let run = |scenario: &str| {
        let path = format!("{}/scenarios/stateless-http/{scenario}.toml", env!("CARGO_MANIFEST_DIR"));
        mcpsim::run(&Plan::load(path.as_ref()).unwrap(), "rmcp", None).unwrap()
    };
    // A reset after the stream opened: CancelOnDisconnect fires the token.
    assert_eq!(times(&run("cancel-on-reset"), ExecStep::Cancelled), [(1, 20.02)]);
    // A crash at 8 s, before the first progress (due 8.16 s): the drop guard fires.
    assert_eq!(times(&run("client-crash-mid-call"), ExecStep::Cancelled), [(1, 8.02)]);
    let nat = run("nat-rebind");
    assert_eq!(times(&nat, ExecStep::Cancelled), [(1, 102.02)]);
    assert_eq!(times(&nat, ExecStep::Effect), [(2, 169.66)]);
    // The HTTP head goes out with the first progress notification (10 s after the start at 1.06 s).
    let first_head = nat.trace.iter().find_map(|e| match &e.what {
        What::HttpResponse { status: 200, .. } => Some(e.t_us.secs_f64()),
        _ => None,
    });
    assert_eq!(first_head, Some(11.1));
}

#[test]
fn rmcp_is_clean_on_stateless_hunt_seeds_and_its_plain_path_is_one_state_integrity_bug() {
    let opts = mcpsim::hunt::HuntOptions { check_determinism: true, ..hunt_options("rmcp", 200) };
    let report = mcpsim::hunt::hunt(&opts, |_| {}).unwrap();
    assert!(report.bugs.is_empty(), "{:#?}", report.bugs);
    assert_eq!(report.nondeterministic_seeds(), 0);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("stateless-rmcp-unsealed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let opts = mcpsim::hunt::HuntOptions { out: Some(dir), shrink_budget: 150, ..hunt_options("rmcp-unsealed", 200) };
    let report = mcpsim::hunt::hunt(&opts, |_| {}).unwrap();
    let rows: Vec<&str> = report.bugs.iter().map(|b| b.signature.as_str()).collect();
    assert_eq!(rows, ["state-integrity | tampered-state"], "{} failing seeds", report.failing_seeds);
}

/// A JSON response written into a dead mapping is a response lost, not a
/// heartbeat: the trace says what the bytes were, and so do the report and
/// the outcome.
#[test]
fn a_json_response_into_a_dead_mapping_is_named_not_called_heartbeats() {
    let plan = Plan::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/stateless-http/input-lost-half-open.toml"),
    )
    .unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let responses: Vec<&str> = run
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            mcpsim::trace::What::DroppedWrite { response, .. } => response.as_deref(),
            _ => None,
        })
        .collect();
    assert_eq!(responses, ["a JSON response (response to 1)"]);
    let report = mcpsim::report::text(&run, &check::judge(&run.trace), None);
    assert!(report.contains("into dropped mapping 1: a JSON response (response to 1)"), "{report}");
    assert!(!report.contains("heartbeat"), "{report}");
    assert!(report.contains("1 carried a whole response (not an event stream)"), "{report}");
}

/// listen-half-open lets its rebind miss, for a server that offers no
/// listen (FastMCP); every built-in server offers one, and the rebind lands
/// on each.
#[test]
fn the_listen_rebind_lands_on_every_built_in_server() {
    let plan = Plan::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/stateless-http/listen-half-open.toml"),
    )
    .unwrap();
    assert!(plan.steps.iter().any(|s| s.may_miss));
    for server in servers() {
        let run = mcpsim::run(&plan, server, None).unwrap();
        assert!(mcpsim::check::missed_steps(&plan, &run.trace).is_empty(), "{server}");
    }
}

/// Issue 49, item 5: on a server that authenticates no one, a principal is
/// a name a request asserts. guarded, run so (`[server] authenticate =
/// false`), binds the state to nobody and acts on mallory's presentation:
/// state-binding and confidentiality report it, as inherent, and say why.
/// The header records it, and the same run on an authenticating guarded
/// refuses mallory.
#[test]
fn on_a_server_that_authenticates_no_one_findings_between_principals_are_inherent() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/second-client-leak-unauthenticated.toml");
    let plan = Plan::load(&path).unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    assert!(matches!(&run.trace.events[0].what, mcpsim::trace::What::RunStarted { authenticates: false, .. }));
    assert!(run.trace.to_jsonl().lines().next().unwrap().contains("\"authenticates\":false"));
    let verdicts = check::judge(&run.trace);
    let e = check::expectation(&plan, "guarded", &verdicts, &run.trace).unwrap();
    let report = mcpsim::report::text(&run, &verdicts, Some(&e));
    assert!(e.met, "{report}");
    assert!(report.contains("the server authenticates no one"), "{report}");
    assert!(!report.contains("VIOLATED"), "{report}");
    // Authenticating, guarded refuses mallory: nothing to report.
    let mut authenticated = plan.clone();
    authenticated.server.authenticate = true;
    let run = mcpsim::run(&authenticated, "guarded", None).unwrap();
    assert!(check::violated(&check::judge(&run.trace)).is_empty());
    // Written back, the setting survives.
    assert!(plan.to_toml(&[]).contains("authenticate = false"));
}

/// Issue 49, item 1: a `call` by a client that crashed and did not connect
/// again does nothing; the trace says so and the run is not met.
#[test]
fn a_call_by_a_crashed_client_is_a_step_that_missed() {
    let text = r#"
[scenario]
name = "call-after-crash"
dialect = "stateless-http"
duration = "30s"
[[client]]
name = "alice"
[[tool]]
name = "echo"
[[step]]
at = "1s"
do = "crash-client"
client = "alice"
[[step]]
at = "2s"
do = "call"
client = "alice"
tool = "echo"
label = "e1"
[expect]
guarded = []
"#;
    let plan = Plan::from_toml_str(text, "call-after-crash.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let missed = check::missed_steps(&plan, &run.trace);
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert_eq!((missed[0].index, missed[0].action.as_str()), (1, "call"));
    assert!(missed[0].why.contains("alice has crashed"), "{missed:?}");
    let verdicts = check::judge(&run.trace);
    assert!(!check::expectation(&plan, "guarded", &verdicts, &run.trace).unwrap().met);
}
