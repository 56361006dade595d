use super::*;

fn delivered(ids: &[&str]) -> Trace {
    Tb::new(60).client("alice").uplink("alice", 1, "tok-1").at(1_000).notes("alice", 1, ids).trace()
}

#[test]
fn ids_that_go_backwards_on_one_stream_are_out_of_order() {
    assert_eq!(
        headlines(&delivered(&["1001", "1003", "1002"]), CheckId::StreamOrder),
        ["alice's conn 1 delivered event 1002 after event 1003 at 1.000 s"]
    );
    assert!(passed(&delivered(&["1001", "1002", "1003"]), CheckId::StreamOrder));
}

#[test]
fn the_same_event_twice_is_a_repeat() {
    let h = headlines(&delivered(&["1001", "1001"]), CheckId::StreamOrder);
    assert_eq!(h, ["alice's conn 1 delivered event 1001 twice (again at 1.000 s)"]);
}

#[test]
fn a_resumed_stream_that_resends_the_id_resumed_from_breaks_the_promise() {
    let resumed = |ids: &[&str]| {
        Tb::new(60)
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(1_000)
            .notes("alice", 1, &["1001", "1002"])
            .at(5_000)
            .ended("alice", 1, "stream error")
            .resume("alice", 2, "tok-1", Some("1002"))
            .at(5_100)
            .stream("alice", 2)
            .notes("alice", 2, ids)
            .trace()
    };
    let h = headlines(&resumed(&["1002", "1003"]), CheckId::StreamOrder);
    assert_eq!(h, ["alice resumed from 1002 on conn 2 and was sent event 1002 again at 5.100 s"]);
    assert!(passed(&resumed(&["1003"]), CheckId::StreamOrder));
}

/// alice received opaque ids `a1 b2 c3` on her uplink (minted in that
/// order, as the application reports), lost it at 5 s, and resumed from
/// `c3`; conn 2 delivers `ids`.
fn resumed_opaque(ids: &[&str]) -> Trace {
    Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(1_000)
        .notified("alice", "tok-1", &["a1", "b2", "c3"])
        .notes("alice", 1, &["a1", "b2", "c3"])
        .at(3_000)
        .notified("alice", "tok-1", &["d4", "e5"])
        .at(5_000)
        .ended("alice", 1, "stream error")
        .resume("alice", 2, "tok-1", Some("c3"))
        .at(5_100)
        .stream("alice", 2)
        .notes("alice", 2, ids)
        .trace()
}

#[test]
fn an_opaque_id_the_client_already_received_sent_again_is_a_duplicate() {
    // Issue 26, item 5: identity needs no numbers.
    let h = headlines(&resumed_opaque(&["b2", "d4", "e5"]), CheckId::StreamOrder);
    assert_eq!(h, ["alice resumed from c3 on conn 2 and was sent event b2 again at 5.100 s"]);
    assert!(passed(&resumed_opaque(&["d4", "e5"]), CheckId::StreamOrder));
}

#[test]
fn opaque_ids_sent_against_the_order_the_application_minted_them_are_out_of_order() {
    let h = headlines(&resumed_opaque(&["e5", "d4"]), CheckId::StreamOrder);
    assert_eq!(h, ["alice's conn 2 delivered event d4 after event e5 at 5.100 s"]);
}
