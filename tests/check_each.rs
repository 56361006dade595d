//! Every check fires on a server with the bug it exists to catch, and stays
//! quiet on `guarded` in the same scenario.

use mcpsim::check::{self, Status, Verdict};
use mcpsim::scenario::Plan;

fn verdict(scenario: &str, server: &str, check_id: &str) -> Verdict {
    let plan = Plan::load(format!("scenarios/{scenario}.toml").as_ref()).unwrap();
    let run = mcpsim::run(&plan, server, None).unwrap();
    check::judge(&run.trace).into_iter().find(|v| v.check == check_id).expect("every check judges every run")
}

/// Asserts the check fires on `buggy` with a headline containing `says`, and not on guarded.
fn fires_and_quiet(check_id: &str, scenario: &str, buggy: &str, says: &str) {
    let bad = verdict(scenario, buggy, check_id);
    let v = bad.violations();
    assert!(!v.is_empty(), "{check_id} did not fire on {buggy} in {scenario}: {:?}", bad.status);
    assert!(v.iter().any(|x| x.headline().contains(says)), "{check_id} on {buggy}: {:?}", v);
    assert!(v.iter().all(|x| !x.evidence.is_empty()), "every violation carries evidence");
    let good = verdict(scenario, "guarded", check_id);
    assert!(
        !matches!(good.status, Status::Violated { .. }),
        "{check_id} fired on guarded in {scenario}: {:?}",
        good.status
    );
}

#[test]
fn session_binding() {
    fires_and_quiet(
        "session-binding",
        "nat-rebind",
        "naive",
        "req-43 (sampling/createMessage, event 1009) written to alice's dropped uplink (mapping 1) at 25.020 s, 4.9 s after conn 5 was accepted; never delivered to alice; timed out at 325.000 s",
    );
    fires_and_quiet("session-binding", "prior-uplink-live", "no-fence", "req-1 (sampling/createMessage");
}

#[test]
fn replay_integrity() {
    fires_and_quiet("replay-integrity", "evicted-id", "truncating-replay", "events 1001–1006 silently lost");
    fires_and_quiet("replay-integrity", "future-id", "naive", "resumption from 5000 was accepted");
    // Gaps that never reached a socket: seen through the ids the application reports minting.
    fires_and_quiet(
        "replay-integrity",
        "streamable-http/evicted-unsent",
        "truncating-replay",
        "skipped 6 event(s) minted after it that reached no socket (the application reported minting them): 1001",
    );
}

#[test]
fn correlation_consistency() {
    fires_and_quiet("correlation-consistency", "answered-window", "answered-replay", "alice was handed req-42");
}

#[test]
fn inflight_disposition() {
    // A request left in flight that the client could not answer in time
    // (a real client answers what it received, whatever became of its
    // stream: only a request that reached it too late shows the bug).
    fires_and_quiet(
        "inflight-disposition",
        "inflight-too-late",
        "orphaning",
        "req-9 (roots/list) was in flight when alice's resumption was accepted",
    );
    fires_and_quiet("inflight-disposition", "inflight-at-resume", "inclusive-replay", "req-7 reached alice twice");
}

#[test]
fn confidentiality() {
    fires_and_quiet("confidentiality", "theft-without-credential", "unbound", "mallory (principal mallory) received");
    fires_and_quiet(
        "confidentiality",
        "second-client-leak",
        "naive",
        "events 1001–1007, including req-42 sampling/createMessage",
    );
    // The session-hijack prompt injection: on one server, and through the
    // shared queue of two replicas (the thief's call lands on the replica
    // that does not hold the session; the holder tells the owner's stream).
    let told = "alice's stream was told its tool list changed (event 1003 on conn 3";
    fires_and_quiet("confidentiality", "streamable-http/session-hijack-injection", "unbound", told);
    fires_and_quiet("confidentiality", "replicas/shared-queue-injection", "naive", told);
}

#[test]
fn liveness() {
    fires_and_quiet("liveness", "nat-rebind", "naive", "req-43 (sampling/createMessage) issued at 25.000 s timed out");
}

#[test]
fn rejection_protocol() {
    fires_and_quiet("rejection-protocol", "evicted-id", "empty-ok", "answered 200 with an empty stream");
}

#[test]
fn stream_order() {
    fires_and_quiet("stream-order", "clean-resume", "inclusive-replay", "was sent event 1003 again");
}

#[test]
fn not_applicable_is_not_passed() {
    // Nothing was refused in nat-rebind: rejection-protocol has nothing to judge.
    let v = verdict("nat-rebind", "guarded", "rejection-protocol");
    assert!(matches!(v.status, Status::NotApplicable { .. }), "{:?}", v.status);
    // A clean run still judges stream order and passes it.
    let v = verdict("clean-resume", "guarded", "stream-order");
    assert_eq!(v.status, Status::Passed);
}

#[test]
fn checks_ignore_server_notes() {
    // Removing every explanation event changes no verdict: they never decide.
    let plan = Plan::load("scenarios/nat-rebind.toml".as_ref()).unwrap();
    let mut run = mcpsim::run(&plan, "naive", None).unwrap();
    let before = check::judge(&run.trace);
    run.trace.events.retain(|e| !e.what.is_explanation());
    let after = check::judge(&run.trace);
    let ids = |vs: &[Verdict]| check::violated(vs);
    assert_eq!(ids(&before), ids(&after));
}

#[test]
fn correlation_consistency_counts_an_answer_that_came_after_the_timeout() {
    // Found by the hunt generator's late-answer reach (streamable seed 7629): guarded
    // forgot answers that arrived after the request timed out and replayed them.
    fires_and_quiet("correlation-consistency", "late-answer-window", "answered-replay", "was handed");
    fires_and_quiet("correlation-consistency", "late-answer-window", "naive", "was handed");
}
