use super::*;
use crate::trace::Outcome;
use crate::trace::What;
use crate::vocab::StepKind;

/// alice's uplink is live from 0.1 s; the server issues r1 at 5 s on it.
fn request_on_a_live_uplink() -> Tb {
    Tb::new(400)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(5_000)
        .issued("alice", "r1", "tok-1", "1001")
        .request_event("alice", 1, "1001", "r1")
}

#[test]
fn a_request_that_times_out_while_its_owner_could_answer_is_a_violation() {
    let t = request_on_a_live_uplink().at(305_000).outcome("r1", Outcome::TimedOut).trace();
    assert_eq!(
        headlines(&t, CheckId::Liveness),
        ["r1 (sampling/createMessage) issued at 5.000 s timed out at 305.000 s without an answer"]
    );
}

#[test]
fn an_answered_request_is_live() {
    let t = request_on_a_live_uplink()
        .at(6_000)
        .answer("alice", 2, "tok-1", "r1", 202)
        .outcome("r1", Outcome::Answered)
        .trace();
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
}

#[test]
fn a_timeout_while_the_owner_had_no_usable_uplink_is_the_right_outcome() {
    // The uplink went silent before r1 was issued; alice is back on a new
    // uplink only after r1's deadline.
    let t = Tb::new(400)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(4_000)
        .drop_mapping("alice", 1, "rebind")
        .at(5_000)
        .issued("alice", "r1", "tok-1", "1001")
        .dropped_request("alice", 1, "1001", "r1")
        .at(305_000)
        .outcome("r1", Outcome::TimedOut)
        .at(310_000)
        .resume("alice", 2, "tok-1", Some("1000"))
        .at(310_100)
        .stream("alice", 2)
        .trace();
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
}

#[test]
fn a_client_left_on_a_dead_uplink_at_the_end_has_not_converged() {
    let t =
        Tb::new(400).client("alice").uplink("alice", 1, "tok-1").at(4_000).drop_mapping("alice", 1, "rebind").trace();
    assert_eq!(
        headlines(&t, CheckId::Liveness),
        ["alice has no live uplink at the end (400.000 s): its latest uplink, conn 1, its NAT mapping was dropped (rebind)"]
    );
}

#[test]
fn notifications_a_live_uplink_never_delivered_are_lost() {
    let base = || {
        Tb::new(60).client("alice").uplink("alice", 1, "tok-1").at(5_000).notified("alice", "tok-1", &["1001", "1002"])
    };
    let t = base().at(5_040).notes("alice", 1, &["1001"]).trace();
    assert_eq!(
        headlines(&t, CheckId::Liveness),
        ["1 of 2 notifications emitted on alice's session at 5.000 s never reached it (event 1002), though its uplink (conn 1) was live from 0.000 s to 60.000 s"]
    );
    let t = base().at(5_040).notes("alice", 1, &["1001", "1002"]).trace();
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
}

#[test]
fn a_client_given_no_time_to_notice_a_late_fault_is_not_judged() {
    // The same dead uplink, after a rebind step 10 s before the end: alice
    // needs two heartbeat timeouts and a backoff to notice and reconnect.
    let t = Tb::new(400)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(390_000)
        .step(StepKind::Rebind, "NAT rebinds alice")
        .drop_mapping("alice", 1, "rebind")
        .trace();
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
}

#[test]
fn an_uplink_asked_for_a_round_trip_before_the_end_has_had_no_time_to_be_answered() {
    // Found by fuzzing: a client polling a stream asks again 20 ms before
    // the end; it is judged where its previous uplink left it.
    let asked_at = |ms: u64| {
        Tb::new(400)
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(ms)
            .resume("alice", 2, "tok-1", Some("1000"))
            .trace()
    };
    assert!(passed(&asked_at(399_980), CheckId::Liveness), "{:?}", verdict(&asked_at(399_980), CheckId::Liveness));
    assert_eq!(
        headlines(&asked_at(300_000), CheckId::Liveness),
        ["alice has no live uplink at the end (400.000 s): its latest uplink, conn 2, never answered with an event stream"]
    );
}

#[test]
fn notifications_emitted_as_the_client_itself_ends_the_session_are_not_lost() {
    // Found by hunting (guarded, streamable-http, seed 4102638): alice sent
    // DELETE 72 ms after the notify, before the events could arrive.
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(4_155)
        .notified("alice", "tok-1", &["1009", "1010"])
        .at(4_227)
        .delete("alice", 2, "tok-1", 200)
        .trace();
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
}

#[test]
fn an_id_received_in_a_later_session_does_not_count_for_an_earlier_one() {
    // Event ids are per session: 1002 on tok-2 is not tok-1's 1002.
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(5_000)
        .notified("alice", "tok-1", &["1001", "1002"])
        .at(5_040)
        .notes("alice", 1, &["1001"])
        .at(30_000)
        .uplink("alice", 2, "tok-2")
        .at(30_040)
        .notes("alice", 2, &["1002"])
        .trace();
    assert_eq!(
        headlines(&t, CheckId::Liveness),
        ["1 of 2 notifications emitted on alice's session at 5.000 s never reached it (event 1002), though its uplink (conn 1) was live from 0.000 s to 30.000 s"]
    );
}

/// Issue 49, item 6: with a store each, the owner's answer reached replica
/// 2, which never held the session, and was refused (404): the request's
/// timeout is lost to that inherent refusal, and inherent too. The same
/// answer refused by the replica that holds the session is not excused.
#[test]
fn a_timeout_after_an_answer_refused_by_a_replica_that_never_held_the_session_is_inherent() {
    let run = |answered_on: u32| {
        Tb::new(400)
            .deployment(2, "per-replica")
            .client("alice")
            .uplink_on("alice", 1, 1, "tok-1")
            .at(5_000)
            .issued("alice", "r1", "tok-1", "1001")
            .request_event("alice", 1, "1001", "r1")
            .at(6_000)
            .request("alice", 2, crate::trace::Purpose::Post, "POST", "/mcp/messages?sessionId=tok-1", None)
            .routed("alice", 2, answered_on)
            .status("alice", 2, 404, None)
            .push(What::Answer {
                client: "alice".into(),
                id: crate::wire::jsonrpc::RpcId::Str("r1".into()),
                method: "sampling/createMessage".into(),
                status: Some(404),
                session: Some("tok-1".into()),
                conn: Some(crate::vocab::ConnId(2)),
            })
            .at(305_000)
            .outcome("r1", Outcome::TimedOut)
            .trace()
    };
    let of = |t: &Trace| match verdict(t, CheckId::Liveness) {
        Status::Violated { violations } => violations,
        other => panic!("{other:?}"),
    };
    let violations = of(&run(2));
    assert!(violations.iter().all(|x| x.inherent), "{violations:?}");
    assert!(violations[0].headline().contains("replica 2, which never held the session"), "{violations:?}");
    let violations = of(&run(1));
    assert!(violations.iter().any(|x| !x.inherent), "{violations:?}");
}

/// Issue 49, item 4: alice's stream goes half-open at 8 s; she reconnects
/// every 5 s and the server refuses each reconnection with `status` while
/// the half-open stream stays registered; r1, issued at 20 s, is written
/// into the dead mapping and times out at 50 s.
fn locked_out(status: u16) -> Trace {
    locked_out_by(status, true)
}

/// The same, with each reconnection a plain GET answered `status` (the
/// SDKs' standalone stream: no `Last-Event-ID`, so no resumption refused)
/// when `resumptions` is false.
fn locked_out_by(status: u16, resumptions: bool) -> Trace {
    let mut t = Tb::new(150).client("alice").uplink("alice", 1, "tok-1").at(8_000).drop_mapping("alice", 1, "sever");
    for (k, at) in (10_000..=95_000).step_by(5_000).enumerate() {
        let conn = 2 + k as u32;
        t = t.at(at).resume("alice", conn, "tok-1", None).at(at + 50).status("alice", conn, status, None);
        if resumptions {
            t = t.refused("alice", conn, crate::trace::Refused::Status(status));
        }
        if at == 20_000 {
            t = t.issued("alice", "r1", "tok-1", "1001").dropped_request("alice", 1, "1001", "r1");
        }
        if at == 50_000 {
            t = t.outcome("r1", Outcome::TimedOut);
        }
    }
    t.trace()
}

#[test]
fn a_request_lost_while_the_server_locked_its_owner_out_is_not_excused() {
    let h = headlines(&locked_out(409), CheckId::Liveness);
    assert!(
        h.iter().any(|h| h.starts_with("r1 (sampling/createMessage) issued at 20.050 s timed out")
            && h.contains("refused every reconnection of hers, HTTP 409, from 25.050 s to 50.050 s")),
        "{h:?}"
    );
    let h = headlines(&locked_out_by(409, false), CheckId::Liveness);
    assert!(h.iter().any(|h| h.contains("a lock-out, not an excuse")), "{h:?}");
    // A 404 may be the session's own end: the request stays excused.
    let h = headlines(&locked_out(404), CheckId::Liveness);
    assert!(!h.iter().any(|h| h.starts_with("r1 ")), "{h:?}");
}

/// A shared store: alice's replica 1 is cut from it at 4.6 s, 0.2 s after
/// r1 was issued (before the write-through was taken), until 7.6 s. Had r1
/// gone out at the heal, alice (1 s think time, 3 s allowed for the round
/// trips) could have answered within its 8 s timeout; it reached her only at
/// 9.4 s, too late. It waited for the store: inherent (legacy-sse replica hunt,
/// seed 9501047). Just as late without a partition, it is not excused.
#[test]
fn a_request_held_for_the_store_until_too_late_is_inherent() {
    let run = |delivered_ms: u64, cut: bool| {
        let t = Tb::new(60)
            .bound(8)
            .deployment(2, "shared")
            .push(What::ClientJoined {
                client: "alice".into(),
                principal: "alice".into(),
                heartbeat_timeout_us: 37_500_000,
                think_time_us: 1_000_000,
                max_backoff_us: 10_000_000,
            })
            .uplink_on("alice", 1, 1, "tok-1")
            .at(4_400)
            .issued("alice", "r1", "tok-1", "1001");
        let deliver = |t: Tb| t.at(delivered_ms).request_event("alice", 1, "1001", "r1");
        let t = if delivered_ms < 4_600 { deliver(t) } else { t };
        let t = match cut {
            true => {
                t.at(4_600).push(What::StorePartitioned { replica: 1 }).at(7_600).push(What::StoreHealed { replica: 1 })
            }
            false => t,
        };
        let t = if delivered_ms >= 4_600 { deliver(t) } else { t };
        let t = t.at(12_400).outcome("r1", Outcome::TimedOut);
        let Status::Violated { violations } = verdict(&t.trace(), CheckId::Liveness) else { panic!("no finding") };
        violations
    };
    let late = run(9_400, true);
    assert!(late.iter().all(|v| v.inherent), "{late:?}");
    assert!(late[0].headline().contains("cut from the shared store before the request reached its owner"), "{late:?}");
    // Just as late with no partition: nothing held it for the store.
    let no_cut = run(9_400, false);
    assert!(no_cut.iter().any(|v| !v.inherent), "{no_cut:?}");
}

/// Issue "Verdicts you can trust, part 4", item 8: rmcp's tap reports the
/// ids it minted into a closed tool call's stream; they are that stream's,
/// never owed on the live standalone uplink.
#[test]
fn events_of_a_call_stream_are_not_owed_on_the_uplink() {
    let base = || Tb::new(60).client("alice").uplink("alice", 1, "tok-1").at(5_000);
    let t = base().notified_on_stream("alice", "tok-1", &["3/1"], "1").trace();
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
    // Reported as the standalone stream's, the same id is owed there.
    let t = base().notified("alice", "tok-1", &["3/1"]).trace();
    assert_eq!(headlines(&t, CheckId::Liveness).len(), 1, "{:?}", headlines(&t, CheckId::Liveness));
}

/// Issue "Verdicts you can trust, part 4", item 9: two replicas with
/// counters of their own mint the same id. Replica 1's event 1 reached
/// alice; replica 2's event 1, emitted while her resumed uplink was live on
/// it, never did. It is lost, not "received" under the other replica's id.
#[test]
fn the_same_id_minted_by_two_replicas_counts_once_for_each() {
    let run = |delivered_by_2: bool| {
        let t = Tb::new(60)
            .deployment(2, "shared")
            .client("alice")
            .uplink_on("alice", 1, 1, "tok-1")
            .at(5_000)
            .notified_by(1, "alice", "tok-1", &["1"])
            .at(5_040)
            .notes("alice", 1, &["1"])
            .at(10_000)
            .ended("alice", 1, "server closed the stream")
            .at(10_100)
            .resume("alice", 2, "tok-1", Some("1"))
            .routed("alice", 2, 2)
            .stream("alice", 2)
            .at(15_000)
            .notified_by(2, "alice", "tok-1", &["1"]);
        match delivered_by_2 {
            true => t.at(15_040).notes("alice", 2, &["1"]).trace(),
            false => t.trace(),
        }
    };
    let lost = headlines(&run(false), CheckId::Liveness);
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(
        lost[0].starts_with("1 notification(s) emitted on alice's session at 15.000 s never reached it (event 1), though its uplink (conn 2)"),
        "{lost:?}"
    );
    let t = run(true);
    assert!(passed(&t, CheckId::Liveness), "{:?}", verdict(&t, CheckId::Liveness));
}
