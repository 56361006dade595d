use super::*;
use crate::trace::What;

fn protocol_error(dropped_first: bool) -> Trace {
    let t = Tb::new(60).client("alice").uplink("alice", 1, "tok-1").at(4_000);
    let t = if dropped_first { t.drop_mapping("alice", 1, "sever") } else { t };
    t.at(5_000)
        .push(What::ProtocolError {
            client: "alice".into(),
            conn: crate::trace::ConnId(1),
            problem: "mid-event".into(),
            what: "the stream ended in the middle of an event".into(),
        })
        .trace()
}

#[test]
fn a_stream_cut_mid_event_on_a_live_network_is_the_servers_fault() {
    assert_eq!(
        headlines(&protocol_error(false), CheckId::Protocol),
        ["alice's conn 1: the stream ended in the middle of an event"]
    );
}

#[test]
fn a_stream_cut_after_the_nat_dropped_it_is_the_networks() {
    assert!(passed(&protocol_error(true), CheckId::Protocol));
}

#[test]
fn a_server_error_is_a_protocol_violation_and_a_client_error_is_not() {
    let answered = |status: u16| {
        Tb::new(60)
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(10_000)
            .resume("alice", 2, "tok-1", Some("1000"))
            .at(10_100)
            .status("alice", 2, status, None)
            .trace()
    };
    assert_eq!(
        headlines(&answered(500), CheckId::Protocol),
        ["alice's GET on conn 2 was answered HTTP 500: an unhandled server error, not an answer a client can act on"]
    );
    assert!(passed(&answered(404), CheckId::Protocol), "{:?}", verdict(&answered(404), CheckId::Protocol));
}
