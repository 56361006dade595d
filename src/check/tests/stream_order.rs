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
