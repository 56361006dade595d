use super::*;
use crate::trace::{Outcome, What};
use crate::wire::jsonrpc::RpcId;

/// r1 goes into alice's dead uplink at 5 s; she resumes on conn 2 at 20 s.
fn in_flight_at_resume() -> Tb {
    Tb::new(400)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(4_000)
        .drop_mapping("alice", 1, "rebind")
        .at(5_000)
        .issued("alice", "r1", "tok-1", "1001")
        .dropped_request("alice", 1, "1001", "r1")
        .at(20_000)
        .resume("alice", 2, "tok-1", Some("1000"))
        .at(20_100)
        .stream("alice", 2)
}

/// The application reports r1 re-issued as `r1-b`.
fn reissued(t: Tb) -> Tb {
    t.push(What::RequestOutcome {
        label: "r1".into(),
        id: RpcId::Str("r1".into()),
        outcome: Outcome::Reissued,
        new_id: Some(RpcId::Str("r1-b".into())),
        detail: String::new(),
    })
}

/// The application re-issues r1 as `r1-b` (event 1002) on the new uplink.
fn reissue(t: Tb) -> Tb {
    reissued(t).at(20_140).request_event("alice", 2, "1002", "r1-b")
}

#[test]
fn a_request_left_on_the_dead_writer_is_a_violation() {
    let t = in_flight_at_resume().at(305_000).outcome("r1", Outcome::TimedOut).trace();
    assert_eq!(
        headlines(&t, CheckId::InflightDisposition),
        ["r1 (sampling/createMessage) was in flight when alice's resumption was accepted on conn 2 at 20.100 s; never re-issued or failed, timed out at 305.000 s"]
    );
}

#[test]
fn a_request_reissued_at_the_resumption_is_disposed_of() {
    let t = reissue(in_flight_at_resume()).trace();
    assert!(passed(&t, CheckId::InflightDisposition), "{:?}", verdict(&t, CheckId::InflightDisposition));
    // Failed explicitly is the other right answer.
    let t = in_flight_at_resume().at(20_200).outcome("r1", Outcome::Failed).trace();
    assert!(passed(&t, CheckId::InflightDisposition), "{:?}", verdict(&t, CheckId::InflightDisposition));
}

#[test]
fn an_answer_to_a_tombstoned_id_must_not_be_applied() {
    // alice answers the old id late; the application applies it.
    let t = reissue(in_flight_at_resume())
        .at(21_000)
        .answer("alice", 3, "tok-1", "r1", 202)
        .outcome("r1", Outcome::Answered)
        .trace();
    let h = headlines(&t, CheckId::InflightDisposition);
    assert!(
        h.contains(
            &"the application applied an answer to r1 (r1) at 21.000 s, an id tombstoned at 20.100 s".to_string()
        ),
        "{h:?}"
    );
}

#[test]
fn a_reissue_that_never_reaches_the_live_uplink_is_a_violation() {
    // The application re-issues r1 as r1-b, but it goes to no live uplink:
    // alice's conn 2 is live to the end (400 s, past any timeout's reach).
    let t = reissued(in_flight_at_resume()).trace();
    assert_eq!(
        headlines(&t, CheckId::InflightDisposition),
        ["r1 (sampling/createMessage) was re-issued as r1-b at 20.100 s, but r1-b never reached alice, whose stream was usable from 20.100 s: the re-issue went to no live uplink"]
    );
    // Delivered on the accepted uplink, it is the right disposition (above).
}

#[test]
fn a_reissue_must_be_the_same_request() {
    // The re-issue carries other params (here: emptied) under its fresh id.
    let changed = reissued(in_flight_at_resume())
        .at(20_140)
        .request_event_with("alice", 2, "1002", "r1-b", "digest-of-empty-params")
        .trace();
    assert_eq!(
        headlines(&changed, CheckId::InflightDisposition),
        ["r1 was re-issued as r1-b (sampling/createMessage) at 20.140 s, but the re-issue's params differ from those of r1 (sampling/createMessage): a re-issue is the same request under a fresh id"]
    );
    // The same params under the fresh id pass (see also a_request_reissued_at_the_resumption_is_disposed_of).
    let same = reissue(in_flight_at_resume()).trace();
    assert!(passed(&same, CheckId::InflightDisposition), "{:?}", verdict(&same, CheckId::InflightDisposition));
}

#[test]
fn a_thiefs_answer_applied_after_the_owners_is_a_second_settlement() {
    // alice answers r1; mallory, holding her stolen token, answers r1 again.
    let base = || {
        Tb::new(60)
            .client("alice")
            .client("mallory")
            .uplink("alice", 1, "tok-1")
            .at(1_000)
            .issued("alice", "r1", "tok-1", "1001")
            .request_event("alice", 1, "1001", "r1")
            .at(2_000)
            .answer("alice", 2, "tok-1", "r1", 202)
            .outcome("r1", Outcome::Answered)
            .steal("alice", "mallory", false)
            .at(3_000)
            .answer("mallory", 1, "tok-1", "r1", 202)
    };
    // The server acknowledged mallory's answer but did not apply it: settled once.
    let ignored = base().trace();
    assert!(passed(&ignored, CheckId::InflightDisposition), "{:?}", verdict(&ignored, CheckId::InflightDisposition));
    // The application applied it: settled twice, and the words name the thief.
    let applied = base().at(3_050).outcome("r1", Outcome::Answered).trace();
    assert_eq!(
        headlines(&applied, CheckId::InflightDisposition),
        ["the application applied two answers to r1 (sampling/createMessage): at 2.000 s (id r1) and again at 3.050 s (id r1, an answer mallory sent); a server request is settled once"]
    );
}
