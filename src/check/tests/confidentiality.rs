use super::*;

/// alice's session tok-1 carries 1001; mallory takes the token at 5 s and
/// resumes from 1000 on her conn 1.
fn mallory_resumes(credential: bool) -> Tb {
    Tb::new(60)
        .client("alice")
        .client("mallory")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(5_000)
        .steal("alice", "mallory", credential)
        .resume("mallory", 1, "tok-1", Some("1000"))
        .at(5_100)
}

#[test]
fn another_principal_served_the_owners_events_is_a_leak() {
    let t = mallory_resumes(false).stream("mallory", 1).notes("mallory", 1, &["1001"]).trace();
    let Status::Violated { violations } = verdict(&t, CheckId::Confidentiality) else { panic!() };
    assert_eq!(violations.len(), 1);
    assert!(!violations[0].inherent);
    assert_eq!(
        violations[0].headline(),
        "mallory (principal mallory) received 1 message(s) of alice's session on conn 1: event 1001"
    );
}

#[test]
fn another_principal_refused_is_no_leak() {
    let t = mallory_resumes(false).status("mallory", 1, 403, None).trace();
    assert!(passed(&t, CheckId::Confidentiality), "{:?}", verdict(&t, CheckId::Confidentiality));
}

#[test]
fn a_thief_holding_the_owners_credential_is_reported_as_inherent() {
    let t = mallory_resumes(true).stream("mallory", 1).notes("mallory", 1, &["1001"]).trace();
    let Status::Violated { violations } = verdict(&t, CheckId::Confidentiality) else { panic!() };
    assert!(violations[0].inherent);
    assert!(violations[0].headline().ends_with("(it held the owner's credential: no server can tell them apart)"));
}

#[test]
fn a_session_opened_with_anothers_credential_is_bound_to_that_principal() {
    // Found by fuzzing: alice takes bob's credential (and token) before she
    // opens tok-2, so tok-2 is bound to principal bob; bob presenting it
    // cannot be told from its holder.
    let t = Tb::new(60)
        .client("alice")
        .client("bob")
        .uplink("bob", 1, "tok-b")
        .at(1_000)
        .steal("bob", "alice", true)
        .uplink("alice", 1, "tok-2")
        .at(1_200)
        .notes("alice", 1, &["1001"])
        .at(5_000)
        .steal("alice", "bob", false)
        .resume("bob", 2, "tok-2", Some("1000"))
        .at(5_100)
        .stream("bob", 2)
        .notes("bob", 2, &["1001"])
        .trace();
    let Status::Violated { violations } = verdict(&t, CheckId::Confidentiality) else { panic!() };
    assert!(violations[0].inherent);
    assert!(
        violations[0]
            .headline()
            .contains("(alice opened the session with principal bob's credential, which bob presents"),
        "{}",
        violations[0].headline()
    );
}

/// Issue 49, item 5: on a server that authenticates no one, the session id
/// is the only credential: a thief holding it is the owner to the server,
/// whatever name it asserts. The leak is inherent, and says why.
#[test]
fn a_thief_on_a_server_that_authenticates_no_one_is_reported_as_inherent() {
    let t = mallory_resumes(false).unauthenticated().stream("mallory", 1).notes("mallory", 1, &["1001"]).trace();
    let Status::Violated { violations } = verdict(&t, CheckId::Confidentiality) else { panic!() };
    assert!(violations[0].inherent);
    assert!(violations[0].headline().contains("the server authenticates no one"), "{}", violations[0].headline());
}
