//! Verdicts a person can trust: each test here pins down a false positive,
//! a wrong word or a blind spot that a check once had (issue "Verdicts you
//! can trust"), on a real server where one shows it.

use mcpsim::check::{self, Status, Verdict};
use mcpsim::scenario::{Dialect, Plan};
use mcpsim::server::policy::{Decision, Guarded, ResumeView, ResumptionPolicy};
use mcpsim::server::Engine;
use std::path::Path;
use std::rc::Rc;

mod common;

use common::mutant::{judge_with, Tweaked};
use common::verdicts::{fires, headlines, quiet, verdict};

fn load(rel: &str) -> Plan {
    Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn judge(plan: &Plan, server: &str) -> Vec<Verdict> {
    check::judge(&mcpsim::run(plan, server, None).unwrap().trace)
}

#[test]
fn correlation_consistency_never_compares_ids_across_sessions() {
    // rmcp numbers its server requests from 0 in every session: bob answers
    // request 0 of his first session, re-initializes, and is handed request 0
    // of the new one. That is a new request, not a re-sent one.
    let plan = load("tests/data/rmcp-session-id-reuse.toml");
    let v = judge(&plan, "rmcp");
    assert!(
        !matches!(verdict(&v, "correlation-consistency").status, Status::Violated { .. }),
        "{:?}",
        headlines(&v, "correlation-consistency")
    );
    // The audit's false positives, hunt seeds of `--seed 0`. (Seed 136 left
    // this list when the client began to poll: alice now stays in her
    // session, and rmcp's replay from 1 re-sends r1, which she answered in
    // that same session: a true correlation-consistency violation.)
    for seed in [14, 146, 230] {
        let plan = mcpsim::hunt::generate_in(seed, Dialect::StreamableHttp);
        let v = judge(&plan, "rmcp");
        assert!(
            headlines(&v, "correlation-consistency").is_empty(),
            "seed {seed}: {:?}",
            headlines(&v, "correlation-consistency")
        );
    }
}

#[test]
fn correlation_consistency_is_judged_per_session_whoever_holds_it() {
    // The seed's step 6 with the credential stolen: mallory is handed req-42,
    // which alice answered on that session. guarded refuses the resumption.
    for rel in
        ["scenarios/second-client-leak-credential.toml", "scenarios/streamable-http/second-client-leak-credential.toml"]
    {
        let plan = load(rel);
        let h = headlines(&judge(&plan, "naive"), "correlation-consistency");
        assert!(
            h.iter().any(|h| h.starts_with("mallory was handed req-42")
                && h.contains("a request alice already answered on this session")),
            "{rel}: {h:?}"
        );
        assert!(headlines(&judge(&plan, "guarded"), "correlation-consistency").is_empty());
    }
}

#[test]
fn session_binding_names_the_request_of_the_resuming_clients_session() {
    // Seed 303 of `--seed 0` on rmcp once named alice's r1 for bob's r4:
    // ids were looked up in any session.
    let plan = mcpsim::hunt::generate_in(303, Dialect::StreamableHttp);
    let run = mcpsim::run(&plan, "rmcp", None).unwrap();
    let v = check::judge(&run.trace);
    // Each request's owner: the client whose session the application issued it on.
    let owners: std::collections::BTreeMap<&str, &str> = run
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            mcpsim::trace::What::RequestIssued { client, label, .. } => Some((label.as_str(), client.as_str())),
            _ => None,
        })
        .collect();
    for x in verdict(&v, "session-binding").violations() {
        let headline = x.headline();
        let client = headline.split(['\'', ' ']).find(|w| plan.client(w).is_some());
        for (label, owner) in &owners {
            if x.headline().starts_with(&format!("{label} (")) {
                assert!(
                    x.headline().contains(&format!("written to {owner}'s")),
                    "{} names {label}, a request of {owner} ({client:?})",
                    x.headline(),
                );
            }
        }
    }
}

#[test]
fn a_new_message_under_a_used_id_is_called_a_duplicate_id_not_a_resend() {
    // rmcp's standalone stream opens with a priming event `0` and then sends
    // its first message as `0` too.
    let plan = load("scenarios/streamable-http/answered-window.toml");
    let h = headlines(&judge(&plan, "rmcp"), "stream-order");
    assert!(h.iter().any(|h| h.contains("delivered two events under id 0: a priming event (no message)")), "{h:?}");
    assert!(!h.iter().any(|h| h.contains("sent event 0 again")), "{h:?}");
}

#[test]
fn a_resumption_from_below_every_id_is_not_called_a_loss_of_ids_that_never_existed() {
    // naive accepts a resumption from 0 on a session whose ids start at 1000
    // and replays what alice already had.
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/clean-resume.toml"))
        .unwrap()
        .replace(
            "[[step]]\nat = \"15s\"",
            "[[step]]\nat = \"12s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = 0\n\n[[step]]\nat = \"15s\"",
        );
    let plan = Plan::from_toml_str(&text, "clean-resume-from-0.toml").unwrap();
    let h = headlines(&judge(&plan, "naive"), "replay-integrity");
    assert!(
        h.iter().any(|h| h.contains("resumption from 0") && h.contains("the session's lowest id is 1000")),
        "{h:?}"
    );
    assert!(h.iter().any(|h| h.contains("it re-sent events 1000–")), "{h:?}");
    assert!(!h.iter().any(|h| h.contains("silently lost")), "{h:?}");
    assert!(headlines(&judge(&plan, "guarded"), "replay-integrity").is_empty());
}

#[test]
fn the_token_rule_of_rejection_protocol_says_where_it_comes_from() {
    let plan = load("scenarios/evicted-id.toml");
    let v = judge(&plan, "guarded");
    assert!(!matches!(verdict(&v, "rejection-protocol").status, Status::Violated { .. }));
    let explain = &check::CHECKS.iter().find(|c| c.id == "rejection-protocol").unwrap().explain;
    assert!(explain.condition.contains("invalidate the session token"), "{}", explain.condition);
    assert!(explain.condition.starts_with("The seed analysis"));
}

#[test]
fn a_refused_thief_must_not_kill_the_owners_session() {
    // A guard that invalidates the session when it refuses a foreign principal.
    fn kills(_: &ResumeView<'_>, d: Decision) -> Decision {
        match d {
            Decision::Reject { reason, how, .. } => Decision::Reject { reason, how, invalidate: true },
            d => d,
        }
    }
    let plan = load("scenarios/theft-without-credential.toml");
    let bad = judge_with(&plan, Tweaked("kills-on-thief", kills));
    let h = headlines(&bad, "rejection-protocol");
    assert!(h.iter().any(|h| h.contains("refused resumption") && h.contains("killed alice's session")), "{h:?}");
    assert!(headlines(&judge(&plan, "guarded"), "rejection-protocol").is_empty());
}

#[test]
fn a_session_ended_by_delete_is_not_blamed_on_a_later_refusal() {
    // thief1 holds alice's credential: its DELETE ends her session as hers
    // would, while her uplink is silently severed. mallory, with the token
    // only, is refused afterwards (404), and alice then finds her session
    // gone: the DELETE ended it, not the refusal. (Seed 698 of a
    // streamable-http hunt of guarded blamed the refusal.)
    let text = include_str!("trust/a_session_ended_by_delete_is_not_blamed_on_a_later_refusal.toml");
    let plan = Plan::from_toml_str(text, "delete-then-refusal.toml").unwrap();
    let v = judge(&plan, "guarded");
    quiet(&v, "rejection-protocol");
    // The refusal did happen, and alice did find her session gone.
    let trace = mcpsim::run(&plan, "guarded", None).unwrap().trace.to_jsonl();
    assert!(trace.contains(r#""client":"mallory","conn":1,"how":"HTTP 404""#), "{trace}");
    assert!(trace.contains(r#""client":"alice","conn":"#) && trace.contains(r#""status":404"#));
}

#[test]
fn an_id_first_seen_in_a_replay_is_no_proof_it_was_minted_later() {
    let plan = load("tests/data/guarded-349-unseen-mint.toml");
    let trace = mcpsim::run(&plan, "guarded", None).unwrap().trace;
    let text = mcpsim::report::text(&mcpsim::run(&plan, "guarded", None).unwrap(), &check::judge(&trace), None);
    assert!(text.contains("alice's resumption from 1003 answered 200"), "{text}");
    quiet(&check::judge(&trace), "replay-integrity");
    // A real future id is still caught, with the application's report as proof.
    fires(
        &judge(&load("scenarios/future-id.toml"), "naive"),
        "replay-integrity",
        &["resumption from 5000 was accepted", "as new"],
    );
}

#[test]
fn only_the_owner_may_end_a_session() {
    let plan = load("scenarios/streamable-http/foreign-delete.toml");
    for server in ["naive", "unbound", "rmcp"] {
        fires(
            &judge(&plan, server),
            "confidentiality",
            &["mallory (principal mallory) ended alice's session with DELETE"],
        );
    }
    quiet(&judge(&plan, "guarded"), "confidentiality");
}

#[test]
fn an_answer_from_another_principal_must_not_be_applied() {
    // rmcp hands a thief the owner's tool-call request and applies her answer.
    let takeover = load("scenarios/streamable-http/call-stream-takeover.toml");
    fires(
        &judge(&takeover, "rmcp"),
        "confidentiality",
        &["applied an answer to call-1", "only mallory (principal mallory)"],
    );
    quiet(&judge(&takeover, "guarded"), "confidentiality");
    // unbound re-issues alice's pending request on mallory's uplink, and applies mallory's answer.
    let text = include_str!("trust/an_answer_from_another_principal_must_not_be_applied.toml");
    let plan = Plan::from_toml_str(text, "foreign-answer.toml").unwrap();
    fires(
        &judge(&plan, "unbound"),
        "confidentiality",
        &["applied an answer to req-1", "only mallory (principal mallory)"],
    );
    quiet(&judge(&plan, "guarded"), "confidentiality");
}

#[test]
fn a_request_replayed_and_reissued_reaches_the_client_twice() {
    // The request is written into a severed uplink, so its event lies in the
    // replay window; guarded refuses such a resumption (replaying and
    // re-issuing would deliver it twice), a guard that accepts it does not.
    fn accepts_pending(v: &ResumeView<'_>, d: Decision) -> Decision {
        match d {
            Decision::Reject { reason, .. } if reason.contains("still pending") => Decision::Accept {
                fence_prior: true,
                replay_from: v.last_event_id.unwrap() + 1,
                skip_newest: false,
                inflight: mcpsim::server::policy::Inflight::Reissue,
            },
            d => d,
        }
    }
    let text = include_str!("trust/a_request_replayed_and_reissued_reaches_the_client_twice.toml");
    let plan = Plan::from_toml_str(text, "inflight-behind-sever.toml").unwrap();
    fires(
        &judge_with(&plan, Tweaked("accepts-pending-window", accepts_pending)),
        "inflight-disposition",
        &[
            "req-7 reached alice twice on conn",
            "as req-7 (event 1001)",
            "as req-7.r1",
            "the client does the work twice",
        ],
    );
    let good = judge(&plan, "guarded");
    quiet(&good, "inflight-disposition");
    quiet(&good, "liveness");
    // The bundled mutant that replays from the Last-Event-ID event itself does it too.
    let plan = load("scenarios/inflight-at-resume.toml");
    fires(&judge(&plan, "inclusive-replay"), "inflight-disposition", &["req-7 reached alice twice"]);
    quiet(&judge(&plan, "guarded"), "inflight-disposition");
}

#[test]
fn a_fresh_stream_must_not_re_send_what_the_client_already_has() {
    // `last_event_id = "none"`: a plain GET on the session alice holds.
    let plan = load("scenarios/plain-get.toml");
    fires(
        &judge(&plan, "naive"),
        "stream-order",
        &["alice opened a fresh stream on its session", "already received on conn 1"],
    );
    quiet(&judge(&plan, "guarded"), "stream-order");
    // rmcp replays its standalone stream's cache to a second plain GET.
    let plan = load("scenarios/streamable-http/plain-get.toml");
    fires(
        &judge(&plan, "rmcp"),
        "stream-order",
        &["opened a fresh stream on its session", "already received on conn 3"],
    );
    quiet(&judge(&plan, "guarded"), "stream-order");
}

#[test]
fn a_malformed_last_event_id_lies_in_no_window() {
    // `last_event_id = { raw = "not-an-id" }`, sent as it is.
    for rel in ["scenarios/garbage-id.toml", "scenarios/streamable-http/garbage-id.toml"] {
        let plan = load(rel);
        fires(
            &judge(&plan, "naive"),
            "replay-integrity",
            &["resumption from \"not-an-id\" was accepted", "lies in no window"],
        );
        quiet(&judge(&plan, "guarded"), "replay-integrity");
    }
}

#[test]
fn the_new_resume_forms_round_trip() {
    for rel in ["scenarios/plain-get.toml", "scenarios/garbage-id.toml"] {
        let plan = load(rel);
        let again = Plan::from_toml_str(&plan.to_toml(&[]), "again.toml").unwrap();
        assert_eq!(again.steps, plan.steps, "{rel}");
    }
}

#[test]
fn a_valid_resumption_must_be_accepted_when_the_scenario_says_so() {
    // A guard off by one: it refuses the oldest retained id minus one.
    fn off_by_one(v: &ResumeView<'_>, d: Decision) -> Decision {
        match (v.last_event_id, v.retained) {
            (Some(n), Some((oldest, _))) if n + 1 == oldest => Decision::Reject {
                reason: format!("Last-Event-ID {n} is older than the retained window"),
                how: mcpsim::server::policy::Refusal::ErrorEvent,
                invalidate: true,
            },
            _ => d,
        }
    }
    let plan = load("scenarios/window-edge.toml");
    let bad = judge_with(&plan, Tweaked("off-by-one", off_by_one));
    fires(
        &bad,
        "rejection-protocol",
        &["alice's resumption on conn", "was refused (error event), but the scenario expects it accepted"],
    );
    // Nothing else sees it: the refusal is explicit and alice re-initializes.
    assert_eq!(check::violated(&bad), ["rejection-protocol"]);
    quiet(&judge(&plan, "guarded"), "rejection-protocol");
    // Without the expectation, the trace alone proves the window valid
    // (issue "Bugs that escape", item 1: it holds notifications alone, which
    // the server says it keeps). It once passed everything.
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/window-edge.toml"))
        .unwrap()
        .replace("expect = \"accepted\"\n", "");
    let blind = Plan::from_toml_str(&text, "window-edge-without-expect.toml").unwrap();
    let v = judge_with(&blind, Tweaked("off-by-one", off_by_one));
    fires(&v, "rejection-protocol", &["the window held only 4 notification(s)", "(retention 4)"]);
    assert_eq!(check::violated(&v), ["rejection-protocol"]);
}

#[test]
fn the_guarded_fence_is_recorded_once_in_words_and_shown() {
    use mcpsim::trace::What;
    let plan = load("scenarios/prior-uplink-live.toml");
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let notes: Vec<&str> = run
        .trace
        .iter()
        .filter_map(|e| match &e.what {
            What::ServerNote { note, .. } => Some(note.as_str()),
            _ => None,
        })
        .collect();
    assert!(notes.iter().all(|n| !n.contains("Accept {") && !n.contains("Reject {")), "{notes:?}");
    let decisions: Vec<_> = notes.iter().filter(|n| n.starts_with("resumption by alice")).collect();
    assert_eq!(decisions.len(), 1, "{notes:?}");
    assert!(decisions[0].contains("accepted: prior writer fenced first"), "{decisions:?}");
    let v = check::judge(&run.trace);
    let text = mcpsim::report::text(&run, &v, None);
    let fence =
        text.find("server (S1): uplink U1 fenced before the new writer is attached").expect("report shows the fence");
    let accepted = text.find("alice's resumption from 1003 answered 200 on conn 4").unwrap();
    assert!(fence < accepted, "the fence comes before the new uplink is accepted:\n{text}");
    let html = mcpsim::report::timeline_html(&run, &v);
    assert!(html.contains("class=\"fence\""), "the timeline draws it");
}

#[test]
fn a_request_marked_not_reissuable_must_not_be_reissued() {
    // The analysis's condition 4, row "not reissuable -> reject". A guard
    // that ignores the mark accepts and re-issues req-7 under a fresh id.
    let ignores_the_mark = |v: &ResumeView<'_>, d: Decision| match d {
        Decision::Reject { reason, .. } if reason.contains("not reissuable") => {
            let mut all: Vec<_> = v.requests.to_vec();
            all.iter_mut().for_each(|r| r.reissuable = true);
            Guarded::decision(&ResumeView { requests: &all, ..v.clone() })
        }
        d => d,
    };
    for rel in ["scenarios/not-reissuable.toml", "scenarios/streamable-http/not-reissuable.toml"] {
        let plan = load(rel);
        let bad = judge_with(&plan, Tweaked("ignores-reissuable", ignores_the_mark));
        let h = headlines(&bad, "inflight-disposition");
        assert!(
            h.iter().any(|x| x.starts_with(
                "req-7 (elicitation/create) was marked not reissuable, yet the server re-issued it as req-7.r1"
            )),
            "{rel}: {h:?}"
        );
        let good = judge(&plan, "guarded");
        assert!(check::violated(&good).is_empty(), "{rel}: guarded {:?}", check::violated(&good));
        // guarded refused the resumption and failed req-7 explicitly.
        let trace = mcpsim::run(&plan, "guarded", None).unwrap().trace.to_jsonl();
        assert!(trace.contains("in-flight request req-7 is not reissuable"), "{rel}");
        assert!(trace.contains(r#""label":"req-7","id":"req-7","outcome":"failed""#), "{rel}");
    }
}

#[test]
fn a_fence_that_cannot_be_confirmed_within_grace_refuses_the_resumption() {
    // fence_delay 8 s > fence_grace 5 s: the prior writer is blocked. guarded
    // waits out the grace, then refuses; no-fence races two writers.
    for rel in ["scenarios/slow-fence.toml", "scenarios/streamable-http/slow-fence.toml"] {
        let plan = load(rel);
        let trace = mcpsim::run(&plan, "guarded", None).unwrap().trace.to_jsonl();
        assert!(trace.contains("prior uplink could not be fenced within 5s"), "{rel}");
        assert!(check::violated(&judge(&plan, "guarded")).is_empty(), "{rel}");
        let bad = judge(&plan, "no-fence");
        assert!(check::violated(&bad).contains(&check::CheckId::SessionBinding), "{rel}");
        // A fence quicker than the grace is waited for, and the resumption accepted.
        let mut quick = plan.clone();
        quick.server.fence_delay = mcpsim::scenario::Dur(std::time::Duration::from_secs(1));
        let trace = mcpsim::run(&quick, "guarded", None).unwrap().trace.to_jsonl();
        assert!(trace.contains("accepted: prior writer fenced first"), "{rel}");
        assert!(check::violated(&judge(&quick, "guarded")).is_empty(), "{rel}");
    }
}

#[test]
fn notifications_lost_on_a_live_resumed_uplink_are_a_liveness_failure() {
    // The TypeScript SDK with its example event store accepts a resumption
    // of the standalone stream and registers the new stream under the wrong
    // stream id: what it emits afterwards is stored, never written. The
    // trace of such a server is guarded's with every event written on the
    // resumed uplink after the resumption left out.
    let plan = load("scenarios/streamable-http/clean-resume.toml");
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    quiet(&check::judge(&run.trace), "liveness");
    let resumed = run
        .trace
        .events
        .iter()
        .find_map(|e| match &e.what {
            mcpsim::trace::What::HttpRequest { client, conn, last_event_id: Some(_), .. } if client == "alice" => {
                Some(*conn)
            }
            _ => None,
        })
        .unwrap();
    let mut trace = run.trace.clone();
    trace.events.retain(|e| {
        !matches!(&e.what, mcpsim::trace::What::SseEvent { client, conn, .. } if client == "alice" && *conn == resumed && e.t_us.0 >= 15_000_000)
    });
    for (i, e) in trace.events.iter_mut().enumerate() {
        e.seq = i as u64;
    }
    fires(
        &check::judge(&trace),
        "liveness",
        &["2 notification(s) emitted on alice's session at 15.000 s never reached it", "live from"],
    );
}

#[test]
fn no_replay_is_owed_to_a_thief() {
    // rmcp answers a thief's resumption (the session id, not the
    // credential) 200 and sends it nothing: that was called a replay gap.
    // A thief is owed nothing; with the owner's credential no server can
    // tell it from the owner, and the gap counts again.
    let mut plan = load("scenarios/streamable-http/theft-without-credential.toml");
    quiet(&judge(&plan, "rmcp"), "replay-integrity");
    quiet(&judge(&plan, "guarded"), "replay-integrity");
    for s in plan.steps.iter_mut() {
        if let mcpsim::scenario::Action::StealToken { credential, .. } = &mut s.action {
            *credential = true;
        }
    }
    fires(&judge(&plan, "rmcp"), "replay-integrity", &["mallory's resumption from 0 on conn 1 skipped 5 event(s)"]);
}

#[test]
fn a_numbered_session_is_numbered_even_before_it_shows_a_number() {
    // Found by a hunt right after the string-id rule came in: guarded
    // accepted a resumption from 1000 (minted, not yet seen) before the
    // session had shown any numbered id, and the rule for sessions whose
    // ids are strings called it an id no event carried.
    for seed in [23, 65] {
        let o = mcpsim::hunt::run_seed("guarded", seed, false).unwrap();
        assert!(o.violated.is_empty(), "seed {seed}: {:?}", o.headline);
    }
}

#[test]
fn a_new_session_may_number_its_requests_from_the_start_again() {
    // The client once took the new session's request 0 for the old
    // session's, already answered, and let it time out (the Python SDK's
    // req-43 in nat-rebind, live; rmcp in the simulation).
    let plan = load("tests/data/new-session-reuses-request-ids.toml");
    let run = mcpsim::run(&plan, "rmcp", None).unwrap();
    let answered: Vec<&str> = run
        .trace
        .iter()
        .filter_map(|e| match &e.what {
            mcpsim::trace::What::RequestOutcome { label, outcome: mcpsim::trace::Outcome::Answered, .. } => {
                Some(label.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["req-1", "req-2"]);
    quiet(&check::judge(&run.trace), "liveness");
}

#[test]
fn an_empty_stream_in_streamable_http_is_polling_not_a_refusal() {
    // MCP 2025-11-25 (SEP-1699) lets a server end any stream, also right
    // after an empty replay; the client polls again. The Python SDK does
    // exactly that while a half-open stream of the session is still
    // registered, and was called a silent refuser for it.
    let plan = load("scenarios/streamable-http/answered-window.toml");
    let run = mcpsim::run(&plan, "empty-ok", None).unwrap();
    let v = check::judge(&run.trace);
    quiet(&v, "rejection-protocol");
    let polled = run
        .trace
        .iter()
        .any(|e| matches!(&e.what, mcpsim::trace::What::Reinitialize { why, .. } if why.contains("HTTP 404")));
    assert!(polled, "the client polled again and learned of the refusal from a 404");
    // But a 200 ended with nothing, to an id the session never minted, is no
    // poll: a refusal in disguise (issue "Bugs that escape", item 3).
    let v = judge(&load("scenarios/streamable-http/future-id.toml"), "rmcp");
    fires(&v, "rejection-protocol", &["from 5000, an id the session never minted", "a refusal in disguise"]);
    quiet(&v, "replay-integrity");
    // In legacy-sse the seed analysis's refusal model stands.
    fires(&judge(&load("scenarios/future-id.toml"), "empty-ok"), "rejection-protocol", &["a silent refusal"]);
}

/// The checks tell a thief from a session's holder by the credential each
/// request presented, as the client recorded it: only a theft that took
/// effect shows, and a restart gives a client its own credential back.
#[test]
fn requests_record_the_credential_they_present() {
    use mcpsim::trace::What;
    let text = include_str!("trust/requests_record_the_credential_they_present.toml");
    let plan = Plan::from_toml_str(text, "credential-record.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    // (time in seconds, credential) of each of alice's requests.
    let alice: Vec<(u64, Option<String>)> = run
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::HttpRequest { client, credential, .. } if client == "alice" => {
                Some((e.t_us.0 / 1_000_000, credential.clone()))
            }
            _ => None,
        })
        .collect();
    // The theft at 0 s took nothing (bob held no session yet).
    assert!(alice.iter().any(|(t, _)| *t < 2), "{alice:?}");
    assert!(alice.iter().filter(|(t, _)| *t < 2).all(|(_, c)| c.is_none()), "{alice:?}");
    // The one at 2 s took bob's credential: her resumption presents it.
    assert!(alice.iter().any(|(t, c)| (2..5).contains(t) && c.as_deref() == Some("bob")), "{alice:?}");
    // Restarted at 6 s, she presents her own again.
    assert!(alice.iter().filter(|(t, _)| *t >= 6).all(|(_, c)| c.is_none()), "{alice:?}");
    assert!(alice.iter().any(|(t, _)| *t >= 6), "{alice:?}");
}

/// Found in review: alice's first legacy-sse uplink carried r1 of her own
/// session; she then took bob's token (without his credential) and answered.
/// The client sent the answer to bob's session (403), r1 timed out, and
/// liveness blamed guarded. A fresh uplink now learns its session from its
/// `endpoint` event, so the answer goes to the session that asked.
#[test]
fn an_answer_after_taking_a_token_goes_to_the_session_that_asked() {
    let plan = load("tests/trust/an_answer_after_taking_a_token_goes_to_the_session_that_asked.toml");
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let answered = run.trace.to_jsonl().lines().any(|l| l.contains("\"outcome\":\"answered\""));
    assert!(answered, "r1 was not answered on alice's session");
    quiet(&check::judge(&run.trace), "liveness");
}

/// Issue 26, item 1: a real client answers every request it received, over
/// POST, whatever became of the stream that carried it (both SDKs' servers
/// accept such an answer, 202). Our client used to abandon it, and liveness
/// blamed a server that leaves the request in flight: call-stream-reset on
/// naive read "inflight-disposition, liveness" although the call completes
/// against any real client.
#[test]
fn a_request_whose_stream_ended_is_still_answered() {
    let plan = load("scenarios/streamable-http/call-stream-reset.toml");
    for server in ["naive", "orphaning", "guarded"] {
        let run = mcpsim::run(&plan, server, None).unwrap();
        use mcpsim::trace::{Outcome, What};
        let answered = run.trace.events.iter().any(
            |e| matches!(&e.what, What::RequestOutcome { label, outcome: Outcome::Answered, .. } if label == "req-1"),
        );
        assert!(answered, "{server}: req-1 was not answered");
        for v in check::judge(&run.trace) {
            assert!(!matches!(v.status, Status::Violated { .. }), "{server}: {} violated: {:?}", v.check, v.status);
        }
    }
}

/// Issue 26, item 11: in streamable-http, naive accepts a resumption from
/// the next id to be minted and then uses that id for the resumed stream's
/// priming event. No check fired: the id lay within the allowance for ids
/// minted unseen. The priming event proves it was minted after the accept.
#[test]
fn a_resumption_from_the_next_id_to_be_minted_is_outside_the_window() {
    let plan = Plan::from_toml_str(
        r#"
[scenario]
name = "next-id"
dialect = "streamable-http"
seed = 5
duration = "30s"

[[client]]
name = "alice"

[[step]]
at = "0s"
do = "connect"
client = "alice"

[[step]]
at = "2s"
do = "notify"
client = "alice"
count = 2

[[step]]
at = "5s"
do = "sever"
client = "alice"

[[step]]
at = "6s"
do = "resume"
client = "alice"
last_event_id = { last_seen_plus = 1 }
"#,
        "next-id.toml",
    )
    .unwrap();
    fires(
        &judge(&plan, "naive"),
        "replay-integrity",
        &["alice's resumption from 4 was accepted on conn 4 at 6.100 s, but the session's newest id then was 3: it minted 4 as new at 6.100 s (as the priming event of that very stream)"],
    );
    quiet(&judge(&plan, "guarded"), "replay-integrity");
}

/// A guarded server whose replays leave out the stream's newest event.
fn skips_newest(_: &ResumeView<'_>, d: Decision) -> Decision {
    match d {
        Decision::Accept { fence_prior, replay_from, inflight, .. } => {
            Decision::Accept { fence_prior, replay_from, skip_newest: true, inflight }
        }
        d => d,
    }
}

#[test]
fn a_replay_that_leaves_out_the_newest_event_is_blamed_on_replay_integrity() {
    // This server fences its prior writer, as guarded does: a session-binding
    // "second writer" is a wrong blame (issue 26, item 4). Hunt seeds of both
    // dialects: none may call it a second writer outright, and most of the
    // short replays must be caught by replay-integrity.
    let mut blamed = Vec::new();
    let mut caught = 0;
    // The first 300 seeds, and those of the first 3,000 that named a second
    // writer before the rule (16 in all; 2 remain that the trace cannot settle).
    let known: [(Dialect, &[u64]); 2] = [
        (Dialect::LegacySse, &[434, 883, 1524, 1548, 2366]),
        (Dialect::StreamableHttp, &[664, 1127, 1232, 1362, 1553, 1826, 1885, 2147, 2310, 2766, 2943]),
    ];
    for (dialect, extra) in known {
        for seed in (0..300).chain(extra.iter().copied()) {
            let plan = mcpsim::hunt::generate_in(seed, dialect);
            let v = judge_with(&plan, Tweaked("skips-newest", skips_newest));
            let violated = |id: &str| matches!(verdict(&v, id).status, Status::Violated { .. });
            // The rule in both checks' `explain`: where the trace cannot tell
            // a skipped event from a raced one, session-binding says so.
            let plain =
                headlines(&v, "session-binding").into_iter().filter(|h| !h.contains("the trace cannot tell which"));
            if plain.count() > 0 {
                blamed.push(format!("{dialect:?} seed {seed}: {:?}", headlines(&v, "session-binding")));
            }
            caught += usize::from(violated("replay-integrity"));
        }
    }
    assert!(blamed.is_empty(), "{blamed:#?}");
    assert!(caught > 10, "the short replay was caught on {caught} seeds only");
}

/// Issue "Verdicts you can trust, part 4", item 3: a tool call whose result
/// never came read "call-1 answered" (the server request the tool issued),
/// and every check passed.
#[test]
fn a_tool_call_whose_result_never_came_is_a_liveness_finding() {
    let sever = load("scenarios/streamable-http/call-stream-sever.toml");
    // rmcp ends the resumed POST stream of the severed call without the result.
    let rmcp = mcpsim::run(&sever, "rmcp", None).unwrap();
    let v = check::judge(&rmcp.trace);
    fires(&v, "liveness", &["alice's tools/call for call-1", "never got its result"]);
    let text = mcpsim::report::text(&rmcp, &v, None);
    assert!(text.contains("alice's tools/call for call-1 lost at"), "the outcome says so: {text}");
    // A one-bug guarded: its replay leaves out the newest event, the tool
    // result the server wrote into the dead stream.
    fn skips_newest(_: &ResumeView<'_>, d: Decision) -> Decision {
        match d {
            Decision::Accept { fence_prior, replay_from, inflight, .. } => {
                Decision::Accept { fence_prior, replay_from, skip_newest: true, inflight }
            }
            d => d,
        }
    }
    fires(&judge_with(&sever, Tweaked("skips-newest", skips_newest)), "liveness", &["never got its result"]);
    // guarded delivers it on the resumed stream, severed or reset.
    for rel in ["scenarios/streamable-http/call-stream-sever.toml", "scenarios/streamable-http/call-stream-reset.toml"]
    {
        let plan = load(rel);
        let run = mcpsim::run(&plan, "guarded", None).unwrap();
        let v = check::judge(&run.trace);
        quiet(&v, "liveness");
        assert!(!mcpsim::report::text(&run, &v, None).contains("lost at"), "{rel}");
    }
}

/// A `guarded` that refuses a resumption of a session it does not know
/// with `how` instead of 404: the one-bug server of item 6.
struct RefusesUnknown(&'static str, mcpsim::server::policy::Refusal);

impl ResumptionPolicy for RefusesUnknown {
    fn name(&self) -> &'static str {
        self.0
    }
    fn description(&self) -> &'static str {
        "guarded, but refuses an unknown session's resumption its own way (a test mutant)"
    }
    fn binds_principal(&self) -> bool {
        true
    }
    fn decide(&self, v: &ResumeView<'_>) -> Decision {
        Guarded::decision(v)
    }
    fn unknown_session(&self) -> mcpsim::server::policy::Refusal {
        self.1
    }
}

/// Item 6: a replica that never held the session (a store each; the
/// balancer moved alice there when hers crashed) may refuse her resumption
/// any explicit way. A 409 or an error event there was flagged as refusing
/// a valid resumption.
#[test]
fn a_replica_that_never_held_the_session_may_refuse_it_any_explicit_way() {
    use mcpsim::server::policy::Refusal;
    let plan = load("tests/data/crash-source-affinity.toml");
    for (name, how, shows) in [
        ("refuses-unknown-409", Refusal::Status(409), "HTTP 409"),
        ("refuses-unknown-event", Refusal::ErrorEvent, "error event"),
    ] {
        let plug = Rc::new(
            Engine::new(plan.server.clone(), plan.dialect, Rc::new(RefusesUnknown(name, how)), plan.seed)
                .expect("a stateful plan"),
        );
        let run = mcpsim::run_with(&plan, plug, plan.seed).unwrap();
        // The refusal happened, as this server makes it ...
        let refused = run.trace.iter().any(|e| {
            matches!(&e.what, mcpsim::trace::What::Rejected { client, how, .. } if client == "alice" && how.to_string().contains(shows))
        });
        assert!(refused, "{name}: alice's resumption was not refused with {shows}");
        // ... and it is no finding: the replica never held her session.
        let v = check::judge(&run.trace);
        quiet(&v, "rejection-protocol");
        assert!(check::violated(&v).iter().all(|c| *c == "liveness"), "{name}: {:?}", check::violated(&v));
    }
}

/// Hunt seed 9911099 (streamable-http): a rebind ate the answer to the
/// GET that resumed a tool call's stream, and the client gave up the call
/// while guarded still held its result. The client now tries a resumption
/// the network lost again; only a refusal ends the call.
#[test]
fn a_call_whose_resumption_the_network_lost_is_resumed_again() {
    let plan = mcpsim::hunt::generate_in(9911099, Dialect::StreamableHttp);
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let v = check::judge(&run.trace);
    quiet(&v, "liveness");
    let resumed_r7 = run
        .trace
        .iter()
        .filter(|e| {
            matches!(&e.what, mcpsim::trace::What::HttpRequest { client, last_event_id: Some(l), .. } if client == "alice" && l == "1001")
        })
        .count();
    assert!(resumed_r7 >= 2, "the lost resumption was tried again: {resumed_r7}");
}

/// Item 6, the other half: an empty 200 from a replica that never held the
/// session is a silent refusal (legacy-sse) and nothing more: the "valid
/// resumption refused" headline no longer rides along as a second finding.
#[test]
fn an_empty_refusal_where_the_session_never_was_is_only_silent() {
    let mut plan = load("tests/data/crash-source-affinity.toml");
    plan.dialect = Dialect::LegacySse;
    let policy = RefusesUnknown("refuses-unknown-empty", mcpsim::server::policy::Refusal::EmptyOk);
    let plug =
        Rc::new(Engine::new(plan.server.clone(), plan.dialect, Rc::new(policy), plan.seed).expect("a stateful plan"));
    let run = mcpsim::run_with(&plan, plug, plan.seed).unwrap();
    let v = check::judge(&run.trace);
    let h = headlines(&v, "rejection-protocol");
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("answered 200 with an empty stream: a silent refusal"), "{h:?}");
}
