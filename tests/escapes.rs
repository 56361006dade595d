//! Bugs that escaped (issue "Bugs that escape"): each test runs a one-bug
//! server of its own (a mutant of `guarded` built here), shows the check
//! that exists for its bug catch it, and shows `guarded` clean on the same
//! plan. Each failed before the change that makes its check see the bug.

use mcpsim::check;
use mcpsim::scenario::{Dialect, Plan};
use mcpsim::server::policy::{Decision, ResumeView};
use mcpsim::server::stateless::{Flaw, StatelessPolicy, StatelessServer, POLICIES};
use std::rc::Rc;

mod common;

use common::mutant::{refuse, run_with_policy, Tweaked};
use common::verdicts::{fires, headlines, quiet};

const STATEFUL: [Dialect; 2] = [Dialect::LegacySse, Dialect::StreamableHttp];

/// A scenario of the given dialect: `[scenario]` named `name`, then `body`.
fn plan(name: &str, dialect: Dialect, body: &str) -> Plan {
    let text = format!(
        "[scenario]\nname = \"{name}\"\ndialect = \"{}\"\nseed = 7\nduration = \"60s\"\n{body}",
        dialect.name()
    );
    Plan::from_toml_str(&text, format!("{name}.toml")).unwrap()
}

/// The verdicts of a run whose every step acted on something: a clean run
/// whose fault hit nothing would prove nothing, and neither would a caught
/// mutant whose situation was never set up.
fn landed(trace: &mcpsim::trace::Trace) -> Vec<check::Verdict> {
    let missed: Vec<String> = trace
        .iter()
        .filter_map(|e| match &e.what {
            mcpsim::trace::What::StepMissed { index, why, .. } => Some(format!("step {index}: {why}")),
            _ => None,
        })
        .collect();
    assert!(missed.is_empty(), "steps that acted on nothing: {missed:?}");
    check::judge(trace)
}

fn judge(plan: &Plan, server: &str) -> Vec<check::Verdict> {
    landed(&mcpsim::run(plan, server, None).unwrap().trace)
}

fn judge_with(plan: &Plan, policy: Tweaked) -> Vec<check::Verdict> {
    landed(&run_with_policy(plan, policy))
}

/// Only the accepted resumptions `guarded` makes are changed.
fn accepted(d: &Decision) -> bool {
    matches!(d, Decision::Accept { .. })
}

/// Refuses every resumption whose window is not empty.
fn refuses_a_non_empty_window(v: &ResumeView<'_>, d: Decision) -> Decision {
    let newest = v.next_event_id.saturating_sub(1);
    match v.last_event_id {
        Some(n) if accepted(&d) && n < newest => refuse("the replay window is not empty"),
        _ => d,
    }
}

/// Off by one at the window's edge: refuses a resumption from the oldest id kept.
fn refuses_at_the_edge(v: &ResumeView<'_>, d: Decision) -> Decision {
    match (v.last_event_id, v.retained) {
        (Some(n), Some((oldest, _))) if accepted(&d) && n <= oldest => refuse("Last-Event-ID is not inside the window"),
        _ => d,
    }
}

/// Refuses at once while a prior writer is attached, instead of fencing it.
fn refuses_rather_than_fence(v: &ResumeView<'_>, d: Decision) -> Decision {
    match accepted(&d) && v.prior_uplinks > 0 {
        true => refuse("a prior writer is still attached"),
        false => d,
    }
}

/// Issue "Bugs that escape", item 1: alice resumes from two notifications
/// back, on a live stream (no fault): the window holds two notifications
/// the server keeps, so the resumption is valid.
#[test]
fn a_refused_non_empty_window_is_caught() {
    let body = "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\n\
        [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
        [[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 4\n\
        [[step]]\nat = \"5s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { last_seen_plus = -2 }\n";
    for dialect in STATEFUL {
        let p = plan("non-empty-window", dialect, body);
        let v = judge_with(&p, Tweaked("refuses-non-empty", refuses_a_non_empty_window));
        fires(&v, "rejection-protocol", &["the window held only 2 notification(s)", "which the server keeps"]);
        let g = judge(&p, "guarded");
        assert!(check::violated(&g).is_empty(), "{dialect:?}: {:?}", check::violated(&g));
    }
}

/// Issue "Bugs that escape", item 1: the window's edge. Retention 4 after
/// 8 notifications keeps 1005-1008; a resumption from 1005, the oldest id
/// kept, owes 1006-1008 and is valid.
#[test]
fn a_refusal_at_the_windows_edge_is_caught() {
    let body = "[server]\nfirst_event_id = 1000\nretention = 4\n[[client]]\nname = \"alice\"\n\
        [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
        [[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 8\n\
        [[step]]\nat = \"5s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { last_seen_plus = -3 }\n";
    for dialect in STATEFUL {
        let p = plan("window-edge-kept", dialect, body);
        let v = judge_with(&p, Tweaked("refuses-at-the-edge", refuses_at_the_edge));
        fires(&v, "rejection-protocol", &["the window held only 3 notification(s)", "(retention 4)"]);
        let g = judge(&p, "guarded");
        assert!(check::violated(&g).is_empty(), "{dialect:?}: {:?}", check::violated(&g));
        // One further back the window is evicted: refusing is right.
        let evicted = plan("window-evicted", dialect, &body.replace("-3 }", "-5 }"));
        let v = judge_with(&evicted, Tweaked("refuses-at-the-edge", refuses_at_the_edge));
        quiet(&v, "rejection-protocol");
    }
}

/// Issue "Bugs that escape", item 1: an earlier connection still half-open.
/// alice's uplink is severed (the server's socket stays open), two
/// notifications go into it, and she resumes from the last id she saw. A
/// server that refuses at once never tried to fence the prior writer; one
/// whose fence cannot be confirmed refuses only after its fence grace
/// (`slow-fence`), and that refusal is right.
#[test]
fn a_refusal_that_never_waited_for_the_fence_is_caught() {
    let body = "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\n\
        [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
        [[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 3\n\
        [[step]]\nat = \"10s\"\ndo = \"sever\"\nclient = \"alice\"\n\
        [[step]]\nat = \"12s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 2\n\
        [[step]]\nat = \"15s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = \"last-seen\"\n";
    for dialect in STATEFUL {
        let p = plan("half-open-prior", dialect, body);
        let v = judge_with(&p, Tweaked("refuses-rather-than-fence", refuses_rather_than_fence));
        fires(&v, "rejection-protocol", &["still half-open", "it never waited for the fence"]);
        let g = judge(&p, "guarded");
        assert!(check::violated(&g).is_empty(), "{dialect:?}: {:?}", check::violated(&g));
        // The fence that cannot be confirmed (slower than the grace): guarded refuses, rightly.
        let slow = plan(
            "half-open-slow-fence",
            dialect,
            &body.replace(
                "first_event_id = 1000\n",
                "first_event_id = 1000\nfence_grace = \"5s\"\nfence_delay = \"8s\"\n",
            ),
        );
        let g = judge(&slow, "guarded");
        assert!(
            headlines(&g, "rejection-protocol").is_empty(),
            "{dialect:?}: {:?}",
            headlines(&g, "rejection-protocol")
        );
    }
}

/// Issue "Bugs that escape", item 4: mallory takes alice's token and
/// resumes from the newest id alice saw, so nothing of alice's reaches her;
/// yet a server that accepts her ends alice's live stream. That takeover
/// is a finding of its own, and inherent where mallory also held alice's
/// credential (no server could tell them apart).
#[test]
fn a_takeover_that_ends_the_owners_stream_is_named() {
    // (The newest message alice saw: legacy-sse's uplink carried the
    // `initialize` result first.)
    let body = |credential: bool, nth: usize| {
        format!(
            "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\n[[client]]\nname = \"mallory\"\n\
            [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
            [[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 3\n\
            [[step]]\nat = \"10s\"\ndo = \"steal-token\"\nfrom = \"alice\"\nto = \"mallory\"\ncredential = {credential}\n\
            [[step]]\nat = \"12s\"\ndo = \"resume\"\nclient = \"mallory\"\nlast_event_id = {{ seen_by = \"alice\", nth = {nth} }}\n"
        )
    };
    for (dialect, nth) in [(Dialect::LegacySse, 4), (Dialect::StreamableHttp, 3)] {
        let p = plan("takeover", dialect, &body(false, nth));
        let v = judge(&p, "unbound");
        fires(
            &v,
            "confidentiality",
            &["mallory (principal mallory) took over alice's session stream", "ended alice's live stream"],
        );
        let taken = common::verdicts::verdict(&v, "confidentiality").violations();
        assert!(taken.iter().all(|x| !x.inherent), "{dialect:?}: {taken:?}");
        quiet(&judge(&p, "guarded"), "confidentiality");
        // With alice's credential, guarded cannot tell mallory from alice: inherent.
        let p = plan("takeover-credential", dialect, &body(true, nth));
        let v = judge(&p, "guarded");
        fires(&v, "confidentiality", &["took over alice's session stream"]);
        let taken = common::verdicts::verdict(&v, "confidentiality").violations();
        assert!(taken.iter().all(|x| x.inherent), "{dialect:?}: {taken:?}");
    }
}

/// `guarded`'s stateless server with one deliberate bug.
fn stateless_flawed(plan: &Plan, flaw: Flaw) -> Vec<check::Verdict> {
    let guarded = *POLICIES.iter().find(|p| p.name == "guarded").unwrap();
    let policy = StatelessPolicy { name: "flawed", flaw: Some(flaw), ..guarded };
    let plug = Rc::new(StatelessServer::new(policy, plan.server.clone(), plan.tools.clone(), plan.seed));
    landed(&mcpsim::run_with(plan, plug, plan.seed).unwrap().trace)
}

/// Issue "Bugs that escape", item 5: a server that reports the execution
/// cancelled when the close reaches it, then commits the effect 0.1 s later.
/// Within a second of the close, the clock forgave it; its own order does
/// not. Two calls of a non-idempotent tool, the first closed: its effect
/// after its own cancellation also makes the duplicate preventable.
#[test]
fn an_effect_after_the_servers_own_cancellation_is_caught_however_soon() {
    let body = "[[client]]\nname = \"alice\"\n\
        [[tool]]\nname = \"export\"\nruns = \"10s\"\nprogress_every = \"2s\"\n\
        [[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"export\"\nlabel = \"export-1\"\n\
        [[step]]\nat = \"5s\"\ndo = \"reset\"\nclient = \"alice\"\n";
    let p = plan("commits-after-cancel", Dialect::StatelessHttp, body);
    let v = stateless_flawed(&p, Flaw::CommitsAfterCancel);
    fires(&v, "cancellation", &["after the server itself reported it cancelled", "did its side effect"]);
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
    // The re-issue ran it again: the duplicate was preventable, and says so.
    if let Some(h) = headlines(&v, "exactly-once").first() {
        assert!(!h.contains("no close reached the server"), "{h}");
    }
}

/// Issue "Bugs that escape", item 6: every retry answers the input and the
/// server accepts its state, then asks again. Judged after three rounds,
/// long before the 300 s request bound (the scenario lasts 60 s).
#[test]
fn a_server_that_asks_again_forever_is_caught_at_once() {
    let body = "[[client]]\nname = \"alice\"\n\
        [[tool]]\nname = \"sign\"\ninput = \"elicitation/create\"\n\
        [[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"sign\"\nlabel = \"sign-1\"\n";
    let p = plan("asks-forever", Dialect::StatelessHttp, body);
    let v = stateless_flawed(&p, Flaw::AsksForever);
    fires(&v, "liveness", &["alice's call sign-1 answered every input", "3 rounds in a row"]);
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
}

/// Refuses a resumption from an id it never minted with an empty 200.
fn refuses_future_ids_silently(v: &ResumeView<'_>, d: Decision) -> Decision {
    match (v.last_event_id, d) {
        (Some(n), Decision::Reject { reason, invalidate, .. }) if n >= v.next_event_id => {
            Decision::Reject { reason, how: mcpsim::server::policy::Refusal::EmptyOk, invalidate }
        }
        (_, d) => d,
    }
}

/// Issue "Bugs that escape", item 3: in streamable-http an empty stream may
/// be SSE polling, so a 200 that ends with no event was read as an accepted
/// resumption, and from an id never minted `replay-integrity` blamed the
/// replay. It is a refusal in disguise: `rejection-protocol` names it. The
/// same empty 200 from a valid id stays polling (`an_empty_stream_in_streamable_http_is_polling_not_a_refusal`
/// in tests/trust.rs).
#[test]
fn an_empty_200_to_an_id_never_minted_is_a_refusal_in_disguise() {
    let body = "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\n\
        [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
        [[step]]\nat = \"2s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 2\n\
        [[step]]\nat = \"5s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = 5000\n";
    let p = plan("future-id-silent", Dialect::StreamableHttp, body);
    let v = judge_with(&p, Tweaked("refuses-future-ids-silently", refuses_future_ids_silently));
    fires(&v, "rejection-protocol", &["from 5000, an id the session never minted", "a refusal in disguise"]);
    quiet(&v, "replay-integrity");
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
}

/// Issue "Bugs that escape", item 7: a server that marks a one-time state
/// used only after the execution's side effect. A second redemption while
/// the first still runs passes its registry: two effects of one voucher.
/// With the one-time tool instant (`runs = 0`, every generated plan so
/// far) no second redemption could meet a running first, so it escaped;
/// with a duration, `exactly-once` catches it.
#[test]
fn a_one_time_state_marked_used_only_after_its_effect_is_caught_when_it_runs_a_while() {
    let body = |runs: &str| {
        format!(
            "[[client]]\nname = \"alice\"\n\
            [[tool]]\nname = \"redeem\"\ninput = \"elicitation/create\"\nonce = true\nruns = \"{runs}\"\n\
            [[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"redeem\"\nlabel = \"voucher\"\n\
            [[step]]\nat = \"4s\"\ndo = \"replay-request-state\"\nclient = \"alice\"\nlabel = \"voucher\"\n"
        )
    };
    let running = plan("once-while-running", Dialect::StatelessHttp, &body("8s"));
    let v = stateless_flawed(&running, Flaw::MarksUsedLate);
    fires(&v, "exactly-once", &["voucher"]);
    let g = judge(&running, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
    // Instant, the same bug is out of reach: the state is marked before the replay.
    let instant = plan("once-instant", Dialect::StatelessHttp, &body("0s"));
    quiet(&stateless_flawed(&instant, Flaw::MarksUsedLate), "exactly-once");
}

/// A tool that asks for two inputs in one round (an elicitation and a
/// sampling), called by alice; `decline`: she declines the elicitation.
fn two_inputs(name: &str, decline: bool) -> Plan {
    let body = format!(
        "[[client]]\nname = \"alice\"\n\
        [[tool]]\nname = \"deploy\"\ninput = [\"elicitation/create\", \"sampling/createMessage\"]\n\
        [[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"deploy\"\nlabel = \"deploy-1\"\ndecline = {decline}\n"
    );
    plan(name, Dialect::StatelessHttp, &body)
}

/// Issue "Bugs that escape", item 8: a server that reads each of two
/// answers under the other's key. Before, the client's answers were not
/// recorded, nor what the tool read: nothing could see it.
#[test]
fn a_server_that_swaps_two_answers_is_caught() {
    let p = two_inputs("swapped-answers", false);
    let v = stateless_flawed(&p, Flaw::SwapsAnswers);
    fires(&v, "state-integrity", &["acted, under input \"confirm\"", "the answer the request sent under \"summary\""]);
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
    // guarded asked both, and acted on each answer under its own key.
    let trace = mcpsim::run(&p, "guarded", None).unwrap().trace;
    let json = serde_json::to_string(&trace.iter().map(|e| &e.what).collect::<Vec<_>>()).unwrap();
    assert!(json.contains(r#""requests":[{"key":"confirm","method":"elicitation/create"},{"key":"summary","method":"sampling/createMessage"}]"#), "{json}");
    assert!(json.contains(r#""inputs":[{"key":"confirm""#), "{json}");
}

/// Issue "Bugs that escape", item 8: a server that runs the tool when the
/// client declined the confirmation, as if it had been accepted. Before,
/// the client could not decline.
#[test]
fn a_server_that_runs_past_a_declined_input_is_caught() {
    let p = two_inputs("declined", true);
    let v = stateless_flawed(&p, Flaw::IgnoresDecline);
    fires(&v, "state-integrity", &["declined the input \"confirm\"", "ran as if the input had been accepted"]);
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
    // guarded ran nothing, and the call ended (with an error result): no liveness finding either.
    let trace = mcpsim::run(&p, "guarded", None).unwrap().trace;
    assert!(!trace.iter().any(|e| matches!(e.what, mcpsim::trace::What::Execution { .. })));
}

/// Issue "Bugs that escape", item 8: a server whose first round answers
/// `input_required` with a `requestState` and no `inputRequests`, then runs
/// the tool on the retry, which answered nothing.
#[test]
fn a_server_that_runs_a_tool_whose_input_was_never_asked_is_caught() {
    let body = "[[client]]\nname = \"alice\"\n\
        [[tool]]\nname = \"sign\"\ninput = \"elicitation/create\"\n\
        [[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"sign\"\nlabel = \"sign-1\"\n";
    let p = plan("state-without-inputs", Dialect::StatelessHttp, body);
    let v = stateless_flawed(&p, Flaw::StateWithoutInputs);
    fires(&v, "state-integrity", &["the tool asks for elicitation/create first", "answered none of it"]);
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
}

/// Issue "Bugs that escape", item 2: a resume from the last id the client
/// saw before a request was issued (`{ seen_before = "r1" }`), where the
/// generator used to resume from the session's first id. The window holds
/// the request (answered by then) and none of the earlier traffic; the
/// scenario file writes it back as it reads it.
#[test]
fn a_resume_from_just_before_a_request_names_the_id_before_it() {
    for dialect in STATEFUL {
        let body = "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\n\
            [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
            [[step]]\nat = \"1s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 3\n\
            [[step]]\nat = \"3s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r1\"\n\
            [[step]]\nat = \"4s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 2\n\
            [[step]]\nat = \"8s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = { seen_before = \"r1\" }\n";
        let p = plan("before-r1", dialect, body);
        let run = mcpsim::run(&p, "guarded", None).unwrap();
        let issued = run
            .trace
            .iter()
            .find_map(|e| match &e.what {
                mcpsim::trace::What::RequestIssued { label, event_id, .. } if label == "r1" => event_id.clone(),
                _ => None,
            })
            .unwrap();
        let resumed: Vec<String> = run
            .trace
            .iter()
            .filter_map(|e| match &e.what {
                mcpsim::trace::What::HttpRequest { last_event_id: Some(l), .. } => Some(l.clone()),
                _ => None,
            })
            .collect();
        let before = (issued.parse::<u64>().unwrap() - 1).to_string();
        assert_eq!(resumed, [before], "{}: r1 was event {issued}", dialect.name());
        let g = landed(&run.trace);
        assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
        let written = p.to_toml(&[]);
        assert!(written.contains("last_event_id = { seen_before = \"r1\" }"), "{written}");
        assert_eq!(Plan::from_toml_str(&written, "again.toml").unwrap().steps, p.steps);
    }
}

/// Issue "Bugs that escape", item 9: a server that answers `input_required`
/// with neither `inputRequests` nor `requestState` breaks the protocol
/// once. The call it leaves unfinished used to be a second bug (liveness,
/// stuck) beside the first (protocol); the unreadable answer is the one.
#[test]
fn an_input_required_with_neither_field_is_one_bug() {
    let body = "[[client]]\nname = \"alice\"\n\
        [[tool]]\nname = \"sign\"\ninput = \"elicitation/create\"\n\
        [[step]]\nat = \"1s\"\ndo = \"call\"\nclient = \"alice\"\ntool = \"sign\"\nlabel = \"sign-1\"\n";
    let p = plan("bare-input-required", Dialect::StatelessHttp, body);
    let v = stateless_flawed(&p, Flaw::BareInputRequired);
    fires(&v, "protocol", &["neither inputRequests nor requestState"]);
    let violated: Vec<String> = check::violated(&v).iter().map(|c| c.to_string()).collect();
    assert_eq!(violated, ["protocol"]);
    let g = judge(&p, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
}

/// Issue "Bugs that escape", item 9: an inclusive replay is one defect. A
/// thief that resumes from an id of the owner's was handed that very event
/// again, which the thief never received: stream-order named it only for a
/// client that held the event, so this seed's bug was filed as
/// correlation-consistency's (the event carried a request the owner had
/// answered). Resuming from an id means "after it", whoever names it.
#[test]
fn an_inclusive_replay_to_a_client_that_names_anothers_id_is_the_same_bug() {
    let body = "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\nthink_time = \"500ms\"\n\
        [[client]]\nname = \"thief\"\n\
        [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
        [[step]]\nat = \"1s\"\ndo = \"call-tool\"\nclient = \"alice\"\nmethod = \"elicitation/create\"\nlabel = \"r1\"\n\
        [[step]]\nat = \"1s\"\ndo = \"steal-token\"\nfrom = \"alice\"\nto = \"thief\"\ncredential = true\n\
        [[step]]\nat = \"4s\"\ndo = \"resume\"\nclient = \"thief\"\nlast_event_id = { seen_by = \"alice\", nth = 1, stream = \"call\" }\n";
    let p = plan("inclusive-to-a-thief", Dialect::StreamableHttp, body);
    let v = judge(&p, "inclusive-replay");
    fires(&v, "stream-order", &["thief resumed from", "again"]);
    let sig = mcpsim::hunt::signature::signature(&v);
    assert_eq!(sig, "stream-order | resent", "{:?}", headlines(&v, "correlation-consistency"));
    // guarded: only the inherent leak of a thief that holds the owner's credential.
    let g = judge(&p, "guarded");
    let plain: Vec<String> =
        g.iter().flat_map(|v| v.violations()).filter(|x| !x.inherent).map(|x| x.check.to_string()).collect();
    assert!(plain.is_empty(), "{plain:?}");
}

/// Forgets that a retired id was answered late once its re-issue timed
/// out: "that request is settled", so a window over the retired id is
/// accepted and its event replayed.
fn forgets_late_answers_once_timed_out(v: &ResumeView<'_>, d: Decision) -> Decision {
    use mcpsim::server::policy::{RequestState, RequestView};
    overruled_refusal(v, d, |n| {
        // "That request timed out: it is settled", whatever its retired id's own state says.
        let timed_out = |label: &str| v.requests.iter().any(|o| o.label == label && o.state == RequestState::TimedOut);
        let retired_settled = |r: &&RequestView| {
            matches!(r.state, RequestState::Reissued | RequestState::Answered) && timed_out(&r.label)
        };
        let settled =
            |r: &&RequestView| retired_settled(r) || matches!(r.state, RequestState::TimedOut | RequestState::Failed);
        let window: Vec<&RequestView> = requests_from(v, n + 1).collect();
        window.iter().any(retired_settled) && window.iter().all(settled)
    })
}

/// The requests carried by the retained events from id `from` on, in order.
fn requests_from<'a>(
    v: &'a ResumeView<'_>,
    from: u64,
) -> impl Iterator<Item = &'a mcpsim::server::policy::RequestView> + 'a {
    v.request_events
        .iter()
        .filter(move |(e, _)| *e >= from)
        .filter_map(|(_, id)| v.requests.iter().find(|r| &r.id == id))
}

/// guarded's refusal of its owner's resumption from an id it minted,
/// turned into an acceptance (replay from the next id) where `accept(n)`
/// says so: the one-bug servers of item 2.
fn overruled_refusal(v: &ResumeView<'_>, d: Decision, accept: impl Fn(u64) -> bool) -> Decision {
    use mcpsim::server::policy::Inflight;
    match v.last_event_id {
        Some(n) if !accepted(&d) && v.presented == v.owner && n < v.next_event_id && accept(n) => {
            Decision::Accept { fence_prior: true, replay_from: n + 1, skip_newest: false, inflight: Inflight::Reissue }
        }
        _ => d,
    }
}

/// Issue "Bugs that escape", item 2: a stale resume over a retired id its
/// owner answered late. Before the re-issue times out, the window holds a
/// pending re-issue and the one-bug server refuses as guarded does: the
/// only situation the generator drew (`StaleOverRetired`) let it escape.
/// After the re-issue timed out (`StaleAfterReissueTimeout`, now drawn),
/// it replays the retired id's event: the owner is handed the request she
/// already answered. guarded refuses both.
#[test]
fn a_window_over_a_late_answered_retired_id_is_judged_after_its_reissue_timed_out() {
    // r1 at 2 s (timeout 8 s: at 10 s), delivered before the rebind; the
    // resume at 4.5 s re-issues it (delivered at about 4.6 s); alice answers
    // each `think` after she got it; the stale resume comes between her
    // late answer to the retired id and her answer to the re-issue.
    let body = |think: &str, stale_at: &str| {
        format!(
            "[server]\nfirst_event_id = 1000\nrequest_timeout = \"8s\"\n\
            [[client]]\nname = \"alice\"\nthink_time = \"{think}\"\n\
            [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
            [[step]]\nat = \"1s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 2\n\
            [[step]]\nat = \"2s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r1\"\n\
            [[step]]\nat = \"2400ms\"\ndo = \"rebind\"\nclient = \"alice\"\n\
            [[step]]\nat = \"4500ms\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = \"last-seen\"\n\
            [[step]]\nat = \"{stale_at}\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = {{ seen_before = \"r1\" }}\n"
        )
    };
    let mutant = || Tweaked("forgets-late-answers", forgets_late_answers_once_timed_out);
    // Thinking 9 s: the request times out (10 s) unanswered; she answers the
    // retired id at about 11.1 s and the re-issue at about 13.6 s.
    let after = plan("retired-after-timeout", Dialect::StreamableHttp, &body("9s", "12500ms"));
    let v = judge_with(&after, mutant());
    fires(&v, "correlation-consistency", &["was handed r1", "again"]);
    let g = judge(&after, "guarded");
    assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
    let reached = mcpsim::hunt::reach::reached(&mcpsim::run(&after, "guarded", None).unwrap().trace, &after.server);
    assert!(reached.contains(&mcpsim::hunt::reach::RETIRED_AFTER_TIMEOUT), "{reached:?}");
    // Thinking 5 s (the situation hunts drew before): she answers the
    // retired id at about 7.1 s, the re-issue is still pending at the
    // stale resume, and the mutant refuses as guarded does.
    let before = plan("retired-before-timeout", Dialect::StreamableHttp, &body("5s", "8500ms"));
    quiet(&judge_with(&before, mutant()), "correlation-consistency");
    let reached = mcpsim::hunt::reach::reached(&mcpsim::run(&before, "guarded", None).unwrap().trace, &before.server);
    assert!(reached.contains(&mcpsim::hunt::reach::STALE_OVER_RETIRED), "{reached:?}");
}

/// Off by one: looks for answered requests in the replay window from its
/// second event on, so an answered request that opens the window is replayed.
fn skips_the_windows_first_event(v: &ResumeView<'_>, d: Decision) -> Decision {
    use mcpsim::server::policy::RequestState;
    overruled_refusal(v, d, |n| {
        let opens_answered = v.request_events.iter().any(|(e, _)| *e == n + 1)
            && requests_from(v, n + 1).next().is_some_and(|r| r.state == RequestState::Answered);
        opens_answered
            && requests_from(v, n + 2).all(|r| matches!(r.state, RequestState::TimedOut | RequestState::Failed))
    })
}

/// Issue "Bugs that escape", item 2: a resume from the last id seen before
/// a request. The generator used to resume stale from the session's first
/// id: the window then opens with earlier traffic, and a server that looks
/// for answered requests from the window's second event on refuses as
/// guarded does. From just before the request, the answered request opens
/// the window, and it is replayed: correlation-consistency catches it.
#[test]
fn an_answered_request_that_opens_the_window_is_judged_from_just_before_it() {
    let body = |from: &str| {
        format!(
            "[server]\nfirst_event_id = 1000\n[[client]]\nname = \"alice\"\n\
            [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n\
            [[step]]\nat = \"1s\"\ndo = \"notify\"\nclient = \"alice\"\ncount = 3\n\
            [[step]]\nat = \"3s\"\ndo = \"server-request\"\nclient = \"alice\"\nmethod = \"roots/list\"\nlabel = \"r1\"\n\
            [[step]]\nat = \"8s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = {from}\n"
        )
    };
    let mutant = || Tweaked("skips-the-windows-first-event", skips_the_windows_first_event);
    for dialect in STATEFUL {
        let narrow = plan("before-r1", dialect, &body("{ seen_before = \"r1\" }"));
        fires(&judge_with(&narrow, mutant()), "correlation-consistency", &["was handed r1", "again"]);
        let g = judge(&narrow, "guarded");
        assert!(check::violated(&g).is_empty(), "{:?}", check::violated(&g));
        // From the session's first id, the old generator's stale resume: it escapes.
        let wide = plan("from-the-first-id", dialect, &body("{ seen_by = \"alice\", nth = 1 }"));
        quiet(&judge_with(&wide, mutant()), "correlation-consistency");
    }
}
