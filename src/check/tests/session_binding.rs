use super::*;
use crate::trace::What;
use crate::vocab::ConnId;

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

/// alice's uplink goes silent at 12 s; she resumes from 1001 at 20 s on
/// conn 2, which is accepted at 20.1 s and delivers nothing; 1002 reaches
/// the dead mapping at 20.05 s, minted as the application reports at `minted_ms`.
fn empty_replay_with_a_write_behind(minted_ms: u64) -> Tb {
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(12_000)
        .drop_mapping("alice", 1, "rebind")
        .at(minted_ms.min(20_000));
    let t = if minted_ms < 20_000 { t.notified("alice", "tok-1", &["1002"]) } else { t };
    let t = t.at(20_000).resume("alice", 2, "tok-1", Some("1001")).at(minted_ms.max(20_000));
    let t = if minted_ms >= 20_000 { t.notified("alice", "tok-1", &["1002"]) } else { t };
    t.at(20_050).dropped_notes("alice", 1, &["1002"]).at(20_100).stream("alice", 2)
}

#[test]
fn an_event_minted_while_the_resumption_was_on_its_way_and_lost_is_a_second_writer_or_a_gap() {
    // Issue 26, item 8: the new connection carried nothing, 1002 went into
    // the dead mapping and nowhere else. One of the two conditions broke,
    // and the trace cannot tell which: the words say so.
    let t = empty_replay_with_a_write_behind(20_010).trace();
    assert_eq!(
        headlines(&t, CheckId::SessionBinding),
        ["100 bytes written to alice's dropped uplink (mapping 1) from 20.050 s, events newer than conn 2's replay, before its acceptance reached the client and never delivered: a second writer, or a replay that left them out (they were minted while the resumption was on its way; the trace cannot tell which), among them notifications/message (event 1002)"]
    );
}

#[test]
fn an_event_minted_before_the_resumption_went_out_is_the_replays_gap() {
    // The same write, but the application reported minting 1002 at 15 s,
    // before alice asked: the replay owed it (replay-integrity), and the
    // old writer wrote it before any new one existed.
    let t = empty_replay_with_a_write_behind(15_000).trace();
    assert!(passed(&t, CheckId::SessionBinding), "{:?}", verdict(&t, CheckId::SessionBinding));
    let h = headlines(&t, CheckId::ReplayIntegrity);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("1002"), "{}", h[0]);
}

#[test]
fn an_event_minted_with_one_the_replay_carried_is_the_replays_gap() {
    // Issue 26, item 4: 1002 and 1003 were reported minted together after
    // alice asked; the replay carried 1002, so 1003 was minted before the
    // attach as well, and the replay left it out: a gap, not a second writer.
    let t = Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(12_000)
        .drop_mapping("alice", 1, "rebind")
        .at(20_000)
        .resume("alice", 2, "tok-1", Some("1001"))
        .at(20_010)
        .notified("alice", "tok-1", &["1002", "1003"])
        .at(20_050)
        .dropped_notes("alice", 1, &["1002", "1003"])
        .at(20_100)
        .stream("alice", 2)
        .notes("alice", 2, &["1002"])
        .trace();
    assert!(passed(&t, CheckId::SessionBinding), "{:?}", verdict(&t, CheckId::SessionBinding));
    let h = headlines(&t, CheckId::ReplayIntegrity);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(h[0].contains("1003"), "{}", h[0]);
}

/// streamable-http: alice's standalone stream (conn 1) goes silent at 8 s;
/// at 10 s she opens a fresh one (conn 2, no Last-Event-ID), accepted at
/// 10.1 s; at 12 s the server writes 1003 into the dead mapping.
fn fresh_get_beside_a_half_open_one() -> Tb {
    Tb::new(60)
        .client("alice")
        .standalone_get("alice", 1, "tok-1", None)
        .stream("alice", 1)
        .push(What::SessionToken { client: "alice".into(), conn: ConnId(1), token: "tok-1".into() })
        .at(200)
        .notes("alice", 1, &["1001", "1002"])
        .at(8_000)
        .drop_mapping("alice", 1, "rebind")
        .at(10_000)
        .standalone_get("alice", 2, "tok-1", None)
        .at(10_100)
        .stream("alice", 2)
        .at(12_000)
        .notified("alice", "tok-1", &["1003"])
        .dropped_notes("alice", 1, &["1003"])
}

#[test]
fn a_message_lost_to_a_half_open_stream_beside_a_fresh_one_is_a_second_writer() {
    // Issue 26, item 10.
    let t = fresh_get_beside_a_half_open_one().trace();
    assert_eq!(
        headlines(&t, CheckId::SessionBinding),
        ["notifications/message (event 1003) written to alice's dropped standalone stream (mapping 1) at 12.000 s, 1.9 s after conn 2 opened a fresh one, and delivered nowhere else: lost to a second writer (several streams may be open, but each message goes on one, and this one went on the dead one)"]
    );
    // Also sent on the fresh stream: the client has it, nothing is lost.
    let t = fresh_get_beside_a_half_open_one().notes("alice", 2, &["1003"]).trace();
    assert!(passed(&t, CheckId::SessionBinding), "{:?}", verdict(&t, CheckId::SessionBinding));
}

/// Issue 49, item 7: the last chunk of the fenced stream's response (the
/// TypeScript v2 SDK's 5-byte chunked terminator when it closes it) is the
/// fence itself, not a second writer; heartbeats after the acceptance are.
#[test]
fn the_end_of_the_fenced_streams_response_is_not_a_second_writer() {
    let late = |closing: bool| {
        rebind_then_resume()
            .at(20_200)
            .push(What::DroppedWrite {
                client: "alice".into(),
                mapping: crate::vocab::MappingId(1),
                bytes: 5,
                events: Vec::new(),
                response: None,
                closing,
            })
            .trace()
    };
    let t = late(true);
    assert!(passed(&t, CheckId::SessionBinding), "{:?}", verdict(&t, CheckId::SessionBinding));
    let h = headlines(&late(false), CheckId::SessionBinding);
    assert!(h.len() == 1 && h[0].contains("a second writer"), "{h:?}");
}
