use super::*;
use crate::trace::What;
use crate::wire::jsonrpc::RpcId;

/// alice answers r1 (event 1001) on her first uplink; the answer is
/// acknowledged (202) at 6 s; her uplink ends and she resumes from 1000.
fn answered_then_resumed() -> Tb {
    Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(5_000)
        .issued("alice", "r1", "tok-1", "1001")
        .request_event("alice", 1, "1001", "r1")
        .at(6_000)
        .answer("alice", 2, "tok-1", "r1", 202)
        .at(10_000)
        .ended("alice", 1, "stream error")
        .resume("alice", 3, "tok-1", Some("1000"))
        .at(10_100)
        .stream("alice", 3)
}

#[test]
fn a_replay_that_hands_back_an_answered_request_is_a_violation() {
    let t = answered_then_resumed().request_event("alice", 3, "1001", "r1").trace();
    assert_eq!(
        headlines(&t, CheckId::CorrelationConsistency),
        ["alice was handed r1 (sampling/createMessage, event 1001) again on conn 3 at 10.100 s; its answer was acknowledged at 6.000 s"]
    );
}

#[test]
fn a_replay_without_the_answered_request_is_consistent() {
    let t = answered_then_resumed().notes("alice", 3, &["1002"]).trace();
    assert!(passed(&t, CheckId::CorrelationConsistency), "{:?}", verdict(&t, CheckId::CorrelationConsistency));
}

#[test]
fn two_pending_requests_under_one_id_cannot_be_told_apart() {
    // The application issues r2 under r1's JSON-RPC id, at 6 s; `answered`:
    // whether alice had answered r1 before that.
    let two = |answered: bool| {
        let t = Tb::new(60)
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(5_000)
            .issued("alice", "r1", "tok-1", "1001")
            .request_event("alice", 1, "1001", "r1")
            .at(5_500);
        let t = if answered { t.answer("alice", 2, "tok-1", "r1", 202) } else { t };
        t.at(6_000)
            .push(What::RequestIssued {
                client: "alice".into(),
                label: "r2".into(),
                method: "sampling/createMessage".into(),
                id: RpcId::Str("r1".into()),
                event_id: Some("1002".into()),
                session: Some("tok-1".into()),
                reissuable: true,
            })
            .request_event("alice", 1, "1002", "r1")
            .trace()
    };
    let h = headlines(&two(false), CheckId::CorrelationConsistency);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].starts_with("alice's conn 1 delivered r2 (sampling/createMessage) under JSON-RPC id"), "{}", h[0]);
    assert!(
        h[0].contains("while r1 (sampling/createMessage) under the same id (at 5.000 s) was still pending"),
        "{}",
        h[0]
    );
    // Once r1 was answered its id is free again.
    assert!(
        passed(&two(true), CheckId::CorrelationConsistency),
        "{:?}",
        verdict(&two(true), CheckId::CorrelationConsistency)
    );
}
