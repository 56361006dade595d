use super::*;

/// alice held 1001 when her uplink went silent; the server then wrote 1002
/// and 1003 into the dead mapping; she resumes from 1001 on conn 2.
fn resume_after_two_lost() -> Tb {
    Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(12_000)
        .drop_mapping("alice", 1, "rebind")
        .at(15_000)
        .notified("alice", "tok-1", &["1002", "1003"])
        .dropped_notes("alice", 1, &["1002", "1003"])
        .at(20_000)
        .resume("alice", 2, "tok-1", Some("1001"))
        .at(20_100)
        .stream("alice", 2)
}

#[test]
fn a_replay_that_starts_past_an_event_the_client_never_got_is_a_gap() {
    let t = resume_after_two_lost().notes("alice", 2, &["1003"]).trace();
    let h = headlines(&t, CheckId::ReplayIntegrity);
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(
        h[0],
        "alice's resumption from 1001 on conn 2 replayed from 1003 instead of 1002: event 1002 silently lost"
    );
}

#[test]
fn a_replay_from_the_next_id_is_whole() {
    let t = resume_after_two_lost().notes("alice", 2, &["1002", "1003"]).trace();
    assert!(passed(&t, CheckId::ReplayIntegrity), "{:?}", verdict(&t, CheckId::ReplayIntegrity));
}

#[test]
fn accepting_a_resumption_from_an_id_never_minted_is_a_violation() {
    let t = resume_from_an_unminted_id().stream("alice", 2).trace();
    let h = headlines(&t, CheckId::ReplayIntegrity);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].starts_with("alice's resumption from 1009 was accepted on conn 2"), "{}", h[0]);
    assert!(h[0].contains("never showed an id above 1001"), "{}", h[0]);
}

/// A server that may mint ids it does not report (rmcp's tap: up to a
/// channel's worth per stream) may have minted 1002–1009 unseen: "never
/// shown" proves nothing within that many. An id it later mints as new, at
/// or below the one resumed from, still does.
#[test]
fn an_id_never_shown_is_no_proof_within_what_the_server_may_leave_unreported() {
    let t = resume_from_an_unminted_id().unreported_per_stream(4).stream("alice", 2).trace();
    assert!(headlines(&t, CheckId::ReplayIntegrity).is_empty(), "{:?}", headlines(&t, CheckId::ReplayIntegrity));
    let t = resume_from_an_unminted_id().unreported_per_stream(3).stream("alice", 2).trace();
    assert_eq!(headlines(&t, CheckId::ReplayIntegrity).len(), 1, "two streams × 3 < 8 unseen ids");
    let t = resume_from_an_unminted_id()
        .unreported_per_stream(4)
        .stream("alice", 2)
        .at(12_000)
        .notified("alice", "tok-1", &["1005"])
        .trace();
    let h = headlines(&t, CheckId::ReplayIntegrity);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("it minted 1005 as new"), "{}", h[0]);
}

#[test]
fn refusing_a_resumption_from_an_id_never_minted_leaves_nothing_to_judge() {
    let t = resume_from_an_unminted_id().status("alice", 2, 404, None).trace();
    assert!(matches!(verdict(&t, CheckId::ReplayIntegrity), Status::NotApplicable { .. }));
}

#[test]
fn a_resumption_from_the_next_id_proven_unminted_by_its_own_priming_event_is_a_violation() {
    // alice held 1001, the newest id; she resumes from `from`, which the
    // server accepts and primes with 1002.
    let resumed_from = |from: &str| {
        Tb::new(60)
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(200)
            .notes("alice", 1, &["1001"])
            .at(10_000)
            .ended("alice", 1, "closed by the server")
            .resume("alice", 2, "tok-1", Some(from))
            .at(10_100)
            .stream("alice", 2)
            .event("alice", 2, Some("1002"), None, "")
            .trace()
    };
    assert_eq!(
        headlines(&resumed_from("1002"), CheckId::ReplayIntegrity),
        ["alice's resumption from 1002 was accepted on conn 2 at 10.100 s, but the session's newest id then was 1001: it minted 1002 as new at 10.100 s (as the priming event of that very stream)"]
    );
    // From the newest id, the same priming event is the stream's next id.
    let t = resumed_from("1001");
    assert!(passed(&t, CheckId::ReplayIntegrity), "{:?}", verdict(&t, CheckId::ReplayIntegrity));
}
