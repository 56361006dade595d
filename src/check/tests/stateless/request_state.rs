//! `state-binding`, `confidentiality` and `state-integrity` on hand-built stateless traces.

use super::*;

/// mallory presents alice's state for c1 at 5 s; `end` is what she gets.
fn stolen(end: CallEnd, credential: Option<&str>) -> Trace {
    Sb::new(60)
        .client("alice")
        .client("mallory")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .minted("c1", 1, "alice", "fp1", 60, false)
        .at(5_000)
        .send_as(
            "mallory",
            1,
            "c1",
            1,
            Attempt::Presented,
            state("fp1", StateHow::Stolen { from: "alice".into() }),
            credential,
        )
        .at(5_100)
        .end("mallory", 1, "c1", 1, end)
        .trace()
}

#[test]
fn state_binding_and_confidentiality_fire_when_a_stolen_state_is_honoured() {
    let t = stolen(complete("alice"), None);
    assert!(headlines(&t, CheckId::StateBinding)[0].contains("presented alice's requestState as principal mallory"));
    assert!(headlines(&t, CheckId::Confidentiality)[0].contains("(principal mallory) received alice's result"));
    let refused = stolen(CallEnd::Error { code: -32602, message: "invalid requestState".into() }, None);
    assert!(passed(&refused, CheckId::StateBinding));
    // A server that ignored the state and acted for mallory misbound nothing.
    let own = stolen(complete("mallory"), None);
    assert!(passed(&own, CheckId::StateBinding));
    // An error result is a refusal.
    let error_result = stolen(CallEnd::Complete { is_error: true, data_of: None }, None);
    assert!(passed(&error_result, CheckId::StateBinding));
    // With alice's credential too, mallory is alice to any server.
    let t = stolen(complete("alice"), Some("alice"));
    assert!(inherent_only(&t, CheckId::StateBinding) && inherent_only(&t, CheckId::Confidentiality));
}

fn presented(how: StateHow, at_ms: u64, end: CallEnd) -> Trace {
    Sb::new(200)
        .client("alice")
        .at(1_000)
        .send("alice", 1, "c1", 1, Attempt::First, None)
        .minted("c1", 1, "alice", "fp1", 60, false)
        .at(at_ms)
        .send("alice", 2, "c1", 2, Attempt::Presented, state("fp1", how))
        .at(at_ms + 100)
        .end("alice", 2, "c1", 2, end)
        .trace()
}

#[test]
fn state_integrity_fires_on_an_altered_or_expired_state_acted_on() {
    let t = presented(StateHow::Flipped, 5_000, complete("alice"));
    assert!(headlines(&t, CheckId::StateIntegrity)[0]
        .contains("altered (one character changed), and the server completed the call"));
    let refused = presented(StateHow::Flipped, 5_000, CallEnd::Error { code: -32602, message: "bad".into() });
    assert!(passed(&refused, CheckId::StateIntegrity));
    // Minted at 1 s for 60 s: sent at 90 s, it had expired.
    let t = presented(StateHow::AsReceived, 90_000, complete("alice"));
    assert!(headlines(&t, CheckId::StateIntegrity)[0].contains("that expired at 61.000 s"));
    // Refused: the call ended explicitly, and rightly.
    let refused = presented(StateHow::AsReceived, 90_000, CallEnd::Error { code: -32602, message: "expired".into() });
    assert!(passed(&refused, CheckId::StateIntegrity) && passed(&refused, CheckId::Liveness));
    let fresh = presented(StateHow::AsReceived, 30_000, complete("alice"));
    assert!(matches!(verdict(&fresh, CheckId::StateIntegrity), Status::NotApplicable { .. }));
}

#[test]
fn state_integrity_says_so_when_the_server_declared_no_lifetime() {
    // rmcp's codec reads the wall clock for its TTL, so the plug declares none:
    // a state presented long after is not judged expired, and the words say why.
    let mut t = presented(StateHow::AsReceived, 90_000, complete("alice"));
    for e in &mut t.events {
        if let What::StateMinted { lifetime_us, .. } = &mut e.what {
            *lifetime_us = None;
        }
    }
    let Status::NotApplicable { why } = verdict(&t, CheckId::StateIntegrity) else {
        panic!("judged without a lifetime")
    };
    assert!(why.contains("declared no lifetime"), "{why}");
    let with_lifetime = presented(StateHow::AsReceived, 30_000, complete("alice"));
    let Status::NotApplicable { why } = verdict(&with_lifetime, CheckId::StateIntegrity) else { panic!() };
    assert!(!why.contains("declared no lifetime"), "{why}");
}

#[test]
fn a_stateless_trace_is_judged_by_its_own_checks_only() {
    let ids: Vec<CheckId> =
        crate::check::judge(&presented(StateHow::Flipped, 5_000, complete("alice"))).iter().map(|v| v.check).collect();
    assert_eq!(
        ids,
        [
            CheckId::StateBinding,
            CheckId::StateIntegrity,
            CheckId::ExactlyOnce,
            CheckId::Cancellation,
            CheckId::Confidentiality,
            CheckId::Liveness,
            CheckId::Protocol
        ]
    );
}
