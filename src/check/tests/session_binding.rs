use super::*;

/// alice's uplink (conn 1, mapping 1) goes silent in a rebind at 12 s; the
/// server wrote 1002 into it at 15 s, before anyone could know; alice
/// resumes from 1001 at 20 s on conn 2 and is replayed 1002.
fn rebind_then_resume() -> Tb {
    Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(12_000)
        .drop_mapping("alice", 1, "rebind")
        .at(15_000)
        .notified("alice", "tok-1", &["1002"])
        .dropped_notes("alice", 1, &["1002"])
        .at(20_000)
        .resume("alice", 2, "tok-1", Some("1001"))
        .at(20_100)
        .stream("alice", 2)
        .notes("alice", 2, &["1002"])
}

#[test]
fn a_write_into_the_dead_uplink_after_the_resumption_is_a_second_writer() {
    let t = rebind_then_resume()
        .at(25_000)
        .notified("alice", "tok-1", &["1003"])
        .notes("alice", 2, &["1003"])
        .dropped_notes("alice", 1, &["1003"])
        .trace();
    let h = headlines(&t, CheckId::SessionBinding);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].starts_with("100 bytes written to alice's dropped uplink (mapping 1) from 25.000 s"), "{}", h[0]);
    assert!(h[0].contains("after conn 2 was accepted: a second writer"), "{}", h[0]);
}

#[test]
fn a_write_into_the_dead_uplink_before_the_resumption_is_no_race() {
    // The same run without the late write: 1002 went into the dead mapping
    // before the resumption existed, and the replay carried it.
    let t = rebind_then_resume().at(25_000).notified("alice", "tok-1", &["1003"]).notes("alice", 2, &["1003"]).trace();
    assert!(passed(&t, CheckId::SessionBinding), "{:?}", verdict(&t, CheckId::SessionBinding));
}

#[test]
fn an_event_newer_than_the_replay_written_while_the_resumption_was_answered_is_a_late_fence() {
    // 1003 reaches the dead mapping after alice's request went out and before
    // the 200 reached her: newer than anything her replay (1002) carried, so
    // minted after the new writer was attached.
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(12_000)
        .drop_mapping("alice", 1, "rebind")
        .at(15_000)
        .dropped_notes("alice", 1, &["1002"])
        .at(20_000)
        .resume("alice", 2, "tok-1", Some("1001"))
        .at(20_050)
        .dropped_notes("alice", 1, &["1003"])
        .at(20_100)
        .stream("alice", 2)
        .notes("alice", 2, &["1002"])
        .trace();
    let h = headlines(&t, CheckId::SessionBinding);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("events newer than conn 2's replay, before its acceptance reached the client"), "{}", h[0]);
}

#[test]
fn with_no_dropped_uplink_there_is_nothing_to_judge() {
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(10_000)
        .ended("alice", 1, "closed by the server")
        .resume("alice", 2, "tok-1", None)
        .at(10_100)
        .stream("alice", 2)
        .trace();
    assert!(matches!(verdict(&t, CheckId::SessionBinding), Status::NotApplicable { .. }));
}
