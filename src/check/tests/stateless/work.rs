//! `cancellation` and `exactly-once` on hand-built stateless traces.

use super::*;

/// alice's request 1 runs a 45 s tool; her NAT resets its stream at 20 s.
fn reset_mid_execution() -> Sb {
    Sb::new(120)
        .client("alice")
        .tool("t", false, false)
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .at(1_040)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(20_000)
        .reset("alice", 1)
}

#[test]
fn cancellation_fires_on_work_done_after_the_close_reached_the_server_and_not_on_a_prompt_stop() {
    let t = reset_mid_execution().at(46_000).exec(1, "c1", 1, "alice", None, ExecStep::Effect).trace();
    let h = headlines(&t, CheckId::Cancellation);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("did its side effect at 46.000 s, 26.0 s after its stream was reset at 20.000 s"), "{h:?}");
    let t = reset_mid_execution().at(20_020).exec(1, "c1", 1, "alice", None, ExecStep::Cancelled).trace();
    assert!(passed(&t, CheckId::Cancellation));
    // Within the grace a close takes to reach the work: no verdict against it.
    let t = reset_mid_execution().at(20_500).exec(1, "c1", 1, "alice", None, ExecStep::Effect).trace();
    assert!(passed(&t, CheckId::Cancellation));
}

#[test]
fn a_close_after_the_answer_or_before_the_start_is_judged_as_it_should_be() {
    // The client had its result at 10 s; its close at 20 s cancels nothing,
    // even when the application reports the completion late.
    let answered = Sb::new(120)
        .client("alice")
        .tool("t", false, false)
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(10_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Effect)
        .end("alice", 1, "c1", 1, complete("alice"))
        .at(20_000)
        .push(What::MappingClosed { client: "alice".into(), mapping: MappingId(1), by: "client".into() })
        .at(25_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Completed)
        .trace();
    assert!(!matches!(verdict(&answered, CheckId::Cancellation), Status::Violated { .. }));
    // A request whose stream was reset at 20 s, dequeued and started at 40 s.
    let late_start = Sb::new(120)
        .client("alice")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .at(20_000)
        .reset("alice", 1)
        .at(40_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .trace();
    assert!(headlines(&late_start, CheckId::Cancellation)[0]
        .contains("started at 40.000 s, 20.0 s after its stream was reset"));
}

#[test]
fn a_half_open_stream_is_reported_as_inherent() {
    let t = Sb::new(120)
        .client("alice")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(12_000)
        .dropped("alice", 1)
        .at(46_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Effect)
        .trace();
    assert!(inherent_only(&t, CheckId::Cancellation));
    assert!(headlines(&t, CheckId::Cancellation)[0].contains("ran to its side effect at 46.000 s (inherent"));
}

/// alice's call c1 took effect twice: request 1 (E1) and its re-issue 2 (E2).
fn two_effects(reset_first: bool, idempotent: bool) -> Trace {
    let mut b = Sb::new(200)
        .client("alice")
        .tool("t", false, idempotent)
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .exec(1, "c1", 1, "alice", None, ExecStep::Started)
        .at(12_000)
        .dropped("alice", 1)
        .at(50_000)
        .send("alice", 2, "c1", 2, Attempt::Reissue, None)
        .exec(2, "c1", 2, "alice", None, ExecStep::Started);
    if reset_first {
        b = b.at(102_000).reset("alice", 1);
    }
    b.at(121_000)
        .exec(1, "c1", 1, "alice", None, ExecStep::Effect)
        .at(170_000)
        .exec(2, "c1", 2, "alice", None, ExecStep::Effect)
        .trace()
}

#[test]
fn exactly_once_blames_a_duplicate_only_when_the_server_was_shown_the_cancellation() {
    let t = two_effects(true, false);
    let h = headlines(&t, CheckId::ExactlyOnce);
    assert!(
        h[0].contains("took effect 2 times (E1 at 121.000 s, E2 at 170.000 s); E1's request had been cancelled"),
        "{h:?}"
    );
    assert!(!inherent_only(&t, CheckId::ExactlyOnce));
    // No close ever reached the server: nothing told the two requests apart.
    assert!(inherent_only(&two_effects(false, false), CheckId::ExactlyOnce));
    // An idempotent tool may run twice.
    assert!(matches!(verdict(&two_effects(true, true), CheckId::ExactlyOnce), Status::NotApplicable { .. }));
}

/// A one-time state redeemed (one side effect), then presented again and
/// checked `second`, with nothing run yet for that second presentation.
fn presented_again(second: StateVerdict) -> Sb {
    Sb::new(60)
        .client("alice")
        .tool("t", true, false)
        .at(1_000)
        .send("alice", 1, "v", 1, Attempt::First, None)
        .minted("v", 1, "alice", "fp1", 60, true)
        .at(2_000)
        .send("alice", 2, "v", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
        .checked("v", 2, "alice", "fp1", StateVerdict::Accepted)
        .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Started)
        .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Effect)
        .at(10_000)
        .send("alice", 3, "v", 3, Attempt::Presented, state("fp1", StateHow::Replayed))
        .checked("v", 3, "alice", "fp1", second)
}

fn once_state(second: StateVerdict) -> Trace {
    let accepted = second == StateVerdict::Accepted;
    let b = presented_again(second);
    if accepted {
        b.exec(2, "v", 3, "alice", Some("alice"), ExecStep::Started)
            .exec(2, "v", 3, "alice", Some("alice"), ExecStep::Effect)
            .trace()
    } else {
        b.trace()
    }
}

#[test]
fn a_one_time_state_checked_twice_but_spent_once_is_not_redeemed_twice() {
    // Accepted at check, but no side effect followed the second acceptance.
    let t = presented_again(StateVerdict::Accepted).trace();
    assert!(passed(&t, CheckId::ExactlyOnce));
}

#[test]
fn exactly_once_fires_when_a_one_time_state_is_redeemed_twice() {
    let h = headlines(&once_state(StateVerdict::Accepted), CheckId::ExactlyOnce);
    assert!(h[0].contains("one-time requestState fp1 was redeemed twice"), "{h:?}");
    let refused = once_state(StateVerdict::Refused { why: "already redeemed".into() });
    assert!(passed(&refused, CheckId::ExactlyOnce));
}

/// Issue 49, item 9: alice's retry with her one-time state is re-issued (its
/// response was lost) and the server redeems the state again: two side
/// effects of one call. That is the one-time state redeemed twice, which a
/// server can tell apart from a new call; no extra inherent "nothing tells
/// a re-issue from a new call" finding rides along. Two effects from two
/// different states (a re-issued first round) keep it.
#[test]
fn a_one_time_state_redeemed_by_a_reissued_retry_is_not_called_unpreventable() {
    let run = |second_fp: &str| {
        Sb::new(60)
            .client("alice")
            .tool("t", true, false)
            .at(1_000)
            .send("alice", 1, "v", 1, Attempt::First, None)
            .minted("v", 1, "alice", "fp1", 60, true)
            .minted("v", 1, "alice", "fp2", 60, true)
            .at(2_000)
            .send("alice", 2, "v", 2, Attempt::Retry, state("fp1", StateHow::AsReceived))
            .checked("v", 2, "alice", "fp1", StateVerdict::Accepted)
            .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Started)
            .exec(1, "v", 2, "alice", Some("alice"), ExecStep::Effect)
            .at(30_000)
            .send("alice", 3, "v", 3, Attempt::Retry, state(second_fp, StateHow::AsReceived))
            .checked("v", 3, "alice", second_fp, StateVerdict::Accepted)
            .exec(2, "v", 3, "alice", Some("alice"), ExecStep::Started)
            .exec(2, "v", 3, "alice", Some("alice"), ExecStep::Effect)
            .trace()
    };
    let h = headlines(&run("fp1"), CheckId::ExactlyOnce);
    assert!(h.len() == 1 && h[0].contains("one-time requestState fp1 was redeemed twice"), "{h:?}");
    let h = headlines(&run("fp2"), CheckId::ExactlyOnce);
    assert!(h.iter().any(|h| h.contains("nothing in MCP 2026-07-28 tells a re-issue from a new call")), "{h:?}");
}
