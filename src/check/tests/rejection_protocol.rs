use super::*;
use crate::trace::{ConnId, Purpose, Refused, What};

#[test]
fn a_refusal_by_an_empty_stream_is_silent() {
    let t = resume_from_an_unminted_id()
        .stream("alice", 2)
        .refused("alice", 2, Refused::EmptyStream)
        .ended("alice", 2, "empty stream")
        .uplink("alice", 3, "tok-2")
        .trace();
    assert_eq!(
        headlines(&t, CheckId::RejectionProtocol),
        ["alice's resumption on conn 2 was answered 200 with an empty stream: a silent refusal"]
    );
}

#[test]
fn an_explicit_refusal_followed_by_a_new_session_is_the_protocol() {
    let t = resume_from_an_unminted_id()
        .status("alice", 2, 404, None)
        .refused("alice", 2, Refused::Status(404))
        .uplink("alice", 3, "tok-2")
        .trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
}

#[test]
fn a_refused_owner_that_never_opens_a_new_session_is_a_violation() {
    // Refused explicitly at 10.1 s, but the run ends at 60 s with no new session.
    let t =
        resume_from_an_unminted_id().status("alice", 2, 404, None).refused("alice", 2, Refused::Status(404)).trace();
    assert_eq!(
        headlines(&t, CheckId::RejectionProtocol),
        ["alice never obtained a new session after its resumption was refused at 10.100 s"]
    );
}

#[test]
fn the_owners_token_still_served_after_its_refusal_is_a_violation() {
    let t = resume_from_an_unminted_id()
        .status("alice", 2, 404, None)
        .refused("alice", 2, Refused::Status(404))
        .at(11_000)
        .resume("alice", 3, "tok-1", None)
        .at(11_100)
        .stream("alice", 3)
        .notes("alice", 3, &["1002"])
        .trace();
    let h = headlines(&t, CheckId::RejectionProtocol);
    assert!(
        h.iter().any(|h| h.starts_with(
            "alice's token still worked after the refusal at 10.100 s: alice's conn 3 was served at 11.100 s"
        )),
        "{h:?}"
    );
}

/// mallory takes alice's token (not her credential) and is refused at 5.1 s;
/// alice reconnects at 8 s with her token.
fn thief_refused() -> Tb {
    Tb::new(60)
        .client("alice")
        .client("mallory")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(5_000)
        .steal("alice", "mallory", false)
        .resume("mallory", 1, "tok-1", Some("1001"))
        .at(5_100)
        .status("mallory", 1, 403, None)
        .refused("mallory", 1, Refused::Status(403))
        .at(7_000)
        .ended("alice", 1, "stream error")
        .at(8_000)
        .resume("alice", 2, "tok-1", Some("1001"))
        .at(8_100)
}

#[test]
fn a_thiefs_refusal_that_kills_the_owners_session_is_a_violation() {
    let t = thief_refused()
        .status("alice", 2, 404, None)
        .refused("alice", 2, Refused::Status(404))
        .uplink("alice", 3, "tok-2")
        .trace();
    assert_eq!(
        headlines(&t, CheckId::RejectionProtocol),
        ["mallory's refused resumption at 5.100 s killed alice's session: alice's conn 2 found it gone (HTTP 404) at 8.100 s"]
    );
}

#[test]
fn a_thief_turned_away_leaves_the_owners_session_alive() {
    let t = thief_refused().stream("alice", 2).trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
}

#[test]
fn a_refused_owner_whose_renewal_the_network_ate_is_not_blamed_on_the_server() {
    // Refused at 10.1 s; its new-session request went out on a mapping a
    // rebind dropped, and the client had not tried again by the end.
    let lost = || {
        resume_from_an_unminted_id()
            .status("alice", 2, 404, None)
            .refused("alice", 2, Refused::Status(404))
            .at(10_200)
            .request("alice", 3, Purpose::Uplink, "GET", "/mcp/sse", None)
            .at(10_300)
            .drop_mapping("alice", 3, "rebind")
    };
    assert!(headlines(&lost().trace(), CheckId::RejectionProtocol).is_empty());
    // A later attempt on a clean mapping, in time, that the server never
    // answered with a session: the server's.
    let t = lost().at(30_000).request("alice", 4, Purpose::Uplink, "GET", "/mcp/sse", None).trace();
    assert_eq!(
        headlines(&t, CheckId::RejectionProtocol),
        ["alice never obtained a new session after its resumption was refused at 10.100 s"]
    );
}

#[test]
fn a_server_error_answered_to_a_resumption_is_a_crash_not_a_refusal() {
    // The Python SDK without an event store answers such a GET with 500.
    let refused_with = |status: u16| {
        resume_from_an_unminted_id()
            .status("alice", 2, status, None)
            .refused("alice", 2, Refused::Status(status))
            .uplink("alice", 3, "tok-2")
            .trace()
    };
    assert_eq!(
        headlines(&refused_with(500), CheckId::RejectionProtocol),
        ["alice's resumption on conn 2 was answered HTTP 500: the server failed, it did not refuse (an explicit refusal is a 4xx or an error event)"]
    );
    assert!(passed(&refused_with(404), CheckId::RejectionProtocol));
}

/// alice received 1000..1002 on her uplink; it breaks at 8 s (a reset: no
/// writer is left half-open) and she resumes from 1002, the newest id her
/// session minted, at 10 s on conn 2.
fn resume_from_the_newest() -> Tb {
    Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1000", "1001", "1002"])
        .at(8_000)
        .ended("alice", 1, "stream error: connection reset")
        .at(10_000)
        .resume("alice", 2, "tok-1", Some("1002"))
        .at(10_100)
}

#[test]
fn a_resumption_from_the_newest_id_refused_is_a_valid_resumption_refused() {
    // Issue 26, item 6: nothing lies in the window, yet the server refuses.
    let t = resume_from_the_newest()
        .stream("alice", 2)
        .refused("alice", 2, Refused::ErrorEvent)
        .at(10_500)
        .uplink("alice", 3, "tok-2")
        .trace();
    assert_eq!(
        headlines(&t, CheckId::RejectionProtocol),
        ["alice's resumption on conn 2 from 1002 was refused (error event) at 10.100 s, yet 1002 was the newest id its session had minted, alice had received it, and the session was alive and its own: nothing lay in the window to refuse, and the refusal costs alice its session"]
    );
}

#[test]
fn a_refusal_with_anything_newer_in_the_window_is_not_judged_valid() {
    // The application reported minting 1003 before the refusal: the window
    // holds an event the trace cannot see into, so the refusal may be right.
    let t = resume_from_the_newest()
        .notified("alice", "tok-1", &["1003"])
        .stream("alice", 2)
        .refused("alice", 2, Refused::ErrorEvent)
        .at(10_500)
        .uplink("alice", 3, "tok-2")
        .trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
    // A 404 may be the server's own expiry of the session: not judged either.
    let t = resume_from_the_newest()
        .status("alice", 2, 404, None)
        .refused("alice", 2, Refused::Status(404))
        .at(10_500)
        .uplink("alice", 3, "tok-2")
        .trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
    // Nor one while the prior stream is still half-open: the server may
    // not be able to confirm its fence, and must then refuse.
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1000"])
        .at(8_000)
        .drop_mapping("alice", 1, "rebind")
        .then(refused_from_1000_at_10s)
        .trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
    // Nor is a thief's, presenting alice's session without her credential.
    let t = Tb::new(60)
        .client("alice")
        .client("mallory")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1000"])
        .steal("alice", "mallory", false)
        .at(10_000)
        .resume("mallory", 1, "tok-1", Some("1000"))
        .at(10_100)
        .status("mallory", 1, 403, None)
        .refused("mallory", 1, Refused::Status(403))
        .trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
}

/// Issue "Bugs that escape", item 1: a window that holds notifications
/// alone is valid where the server says it keeps them (retention 4, fence
/// grace 5 s). The same refusal is not judged where the server does not
/// say, where the window outgrows the retention, where a POST answered
/// after the newest id may have minted one unseen, or where the window
/// holds an id no notification accounts for.
#[test]
fn a_refused_window_of_kept_notifications_is_judged_where_the_server_declares_its_retention() {
    let run = |bounds: Option<u64>, notified: &[&str], late_post: bool| {
        let t = Tb::new(60);
        let t = match bounds {
            Some(r) => t.resume_bounds(r, 5_000),
            None => t,
        };
        let t = t
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(200)
            .notified("alice", "tok-1", notified)
            .at(240)
            .notes("alice", 1, notified)
            .at(8_000)
            .ended("alice", 1, "stream error: connection reset");
        let t = match late_post {
            true => t.request("alice", 9, crate::trace::Purpose::Post, "POST", "/mcp/message?sessionId=tok-1", None),
            false => t,
        };
        t.then(refused_from_1000_at_10s).trace()
    };
    let t = run(Some(4), &["1000", "1001", "1002"], false);
    assert_eq!(
        headlines(&t, CheckId::RejectionProtocol),
        ["alice's resumption on conn 2 from 1000 was refused (error event) at 10.100 s, yet alice had received 1000, the window held only 2 notification(s) up to 1002, which the server keeps (retention 4), and the session was alive and its own: the window was valid, and the refusal costs alice its session"]
    );
    // At the edge: two ids after 1000, retention 2.
    assert_eq!(headlines(&run(Some(2), &["1000", "1001", "1002"], false), CheckId::RejectionProtocol).len(), 1);
    for (why, t) in [
        ("no retention declared", run(None, &["1000", "1001", "1002"], false)),
        ("past the retention", run(Some(1), &["1000", "1001", "1002"], false)),
        ("a POST still open after 1002 was minted", run(Some(2), &["1000", "1001", "1002"], true)),
    ] {
        assert!(passed(&t, CheckId::RejectionProtocol), "{why}: {:?}", verdict(&t, CheckId::RejectionProtocol));
    }
    // 1001 delivered, but never reported as a notification: it may be a request.
    let t = Tb::new(60)
        .resume_bounds(64, 5_000)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notified("alice", "tok-1", &["1000", "1002"])
        .notes("alice", 1, &["1000", "1001", "1002"])
        .then(refused_from_1000_at_10s)
        .trace();
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
}

/// Issue "Bugs that escape", item 1: a prior stream still half-open is a
/// reason to refuse once the fence was waited for; a refusal sooner than the
/// declared fence grace never waited.
#[test]
fn a_refusal_sooner_than_the_fence_grace_is_judged_though_the_prior_stream_is_half_open() {
    let run = |refused_after_ms: u64| {
        Tb::new(60)
            .resume_bounds(64, 5_000)
            .client("alice")
            .uplink("alice", 1, "tok-1")
            .at(200)
            .notified("alice", "tok-1", &["1000"])
            .notes("alice", 1, &["1000"])
            .at(8_000)
            .drop_mapping("alice", 1, "rebind")
            .at(10_000)
            .resume("alice", 2, "tok-1", Some("1000"))
            .at(10_000 + refused_after_ms)
            .stream("alice", 2)
            .refused("alice", 2, Refused::ErrorEvent)
            .at(15_500)
            .uplink("alice", 3, "tok-2")
            .trace()
    };
    let fast = headlines(&run(100), CheckId::RejectionProtocol);
    assert_eq!(fast.len(), 1, "{fast:?}");
    assert!(
        fast[0].contains("the refusal came 0.100 s after the request, sooner than the server's fence grace of 5.000 s"),
        "{fast:?}"
    );
    let t = run(5_100);
    assert!(passed(&t, CheckId::RejectionProtocol), "{:?}", verdict(&t, CheckId::RejectionProtocol));
}

/// Issue 49, item 6: with a store each, a crash of alice's replica moves her
/// to a survivor, which never held her session. Any explicit refusal of its
/// own (409, an error event) is valid there; on the replica that created
/// the session, the same refusal is judged as before.
#[test]
fn a_refusal_by_a_replica_that_never_held_the_session_is_valid() {
    let deployed = |resumed_on: u32, how: Refused| {
        let t = Tb::new(60)
            .deployment(2, "per-replica")
            .client("alice")
            .request("alice", 1, Purpose::Uplink, "GET", "/mcp/sse", None)
            .routed("alice", 1, 1)
            .stream("alice", 1)
            .push(What::SessionToken { client: "alice".into(), conn: ConnId(1), token: "tok-1".into() })
            .at(200)
            .notes("alice", 1, &["1000", "1001", "1002"])
            .at(8_000)
            .ended("alice", 1, "stream error: connection reset")
            .at(10_000)
            .resume("alice", 2, "tok-1", Some("1002"))
            .routed("alice", 2, resumed_on)
            .at(10_100);
        let t = match how {
            Refused::Status(s) => t.status("alice", 2, s, None),
            _ => t.stream("alice", 2),
        };
        t.refused("alice", 2, how).at(10_500).uplink("alice", 3, "tok-2").trace()
    };
    for how in [Refused::Status(409), Refused::ErrorEvent] {
        let t = deployed(2, how);
        assert!(passed(&t, CheckId::RejectionProtocol), "{how:?}: {:?}", verdict(&t, CheckId::RejectionProtocol));
        // The replica that created it refusing the same resumption is judged.
        let t = deployed(1, how);
        assert!(
            headlines(&t, CheckId::RejectionProtocol).iter().any(|h| h.contains("from 1002 was refused")),
            "{how:?}: {:?}",
            verdict(&t, CheckId::RejectionProtocol)
        );
    }
}

/// alice resumes session tok-1 from 1000 on conn 2 at 10 s, is refused with
/// an error event, and re-initializes (tok-2, conn 3).
fn refused_from_1000_at_10s(t: Tb) -> Tb {
    t.at(10_000)
        .resume("alice", 2, "tok-1", Some("1000"))
        .at(10_100)
        .stream("alice", 2)
        .refused("alice", 2, Refused::ErrorEvent)
        .at(10_500)
        .uplink("alice", 3, "tok-2")
}
