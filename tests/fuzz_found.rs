//! What the fuzzers found (`fuzz/`), each kept as a regression test in the
//! normal suite, not only in a corpus.

use mcpsim::scenario::Plan;

fn violated(toml: &str, server: &str) -> Vec<String> {
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, server, None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    verdicts.iter().filter(|v| v.violations().iter().any(|x| !x.inherent)).map(|v| v.check.to_string()).collect()
}

/// `plan_run` found: a server request issued "on bob's session" after bob
/// stole alice's token goes on alice's session; alice answering it is the
/// owner answering, not a leak. `confidentiality` took the step's client
/// for the session's owner and flagged guarded.
#[test]
fn a_request_issued_on_a_stolen_session_answered_by_its_owner_is_no_leak() {
    let toml = include_str!("fuzz_found/a_request_issued_on_a_stolen_session_answered_by_its_owner_is_no_leak.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    // That the judgement still fires where a thief's answer is applied is
    // proven in tests/trust.rs (call-1 and req-1 answered by mallory).
}

/// `plan_run` found (its plan as it found it): a client that starts a new
/// session (`connect` at 13.46 s) while a tool call of its old session waits
/// for its answer leaves that call; the server timing the request out is
/// right. `liveness` still counted the
/// call's stream as usable and flagged guarded.
#[test]
fn a_call_left_behind_by_a_new_session_is_not_the_servers_liveness_fault() {
    let toml = include_str!("fuzz_found/a_call_left_behind_by_a_new_session_is_not_the_servers_liveness_fault.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (its plan as it found it): alice takes over mallory's
/// session token at 8.8 s while a request of her own session waits for her
/// answer; her answer then goes to the stolen session (403) and the request
/// times out. She left her session; `liveness` still counted her old uplink
/// as usable and flagged guarded.
#[test]
fn a_client_that_takes_over_another_session_leaves_its_own() {
    let toml = include_str!("fuzz_found/a_client_that_takes_over_another_session_leaves_its_own.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (its plan as it found it): mallory steals bob's token
/// without his credential; guarded refuses her with 403 every time she
/// retries, as it must. `liveness` said she had no live uplink at the end, as
/// if a thief were owed one.
#[test]
fn a_refused_thief_is_owed_no_live_uplink() {
    let toml = include_str!("fuzz_found/a_refused_thief_is_owed_no_live_uplink.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (CI's fuzz smoke, 43 executions): alice, restarted after
/// a crash, takes mallory's token and credential while her own new session
/// is being opened. Her client then answers r2, issued on her own session,
/// with mallory's credential, and guarded rightly refuses it (403): the
/// request times out. No server could do better, so liveness must not blame
/// it (the violation is inherent, not a finding).
#[test]
fn a_client_answering_with_a_stolen_credential_is_not_the_servers_liveness_fault() {
    let toml =
        include_str!("fuzz_found/a_client_answering_with_a_stolen_credential_is_not_the_servers_liveness_fault.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    // Still reported, as inherent, with the reason in its words.
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    let liveness = verdicts.iter().find(|v| v.check == "liveness").unwrap();
    let x = &liveness.violations()[0];
    assert!(x.inherent && x.headline().contains("the owner took another principal's credential"), "{}", x.headline());
}

/// `plan_run` found (its plan as it found it): alice takes bob's token and
/// credential at 3.02 s; guarded refuses her resumption and she opens a new
/// session, presenting bob's credential, so that session is bound to
/// principal bob. Bob later takes its token (no credential needed) and is
/// refused: he speaks as the session's principal, so killing the session is
/// the seed's rule. `rejection-protocol` took him for a foreign thief and
/// blamed guarded for killing alice's session.
#[test]
fn a_refused_client_speaking_as_the_sessions_principal_is_no_thief() {
    let toml = include_str!("fuzz_found/a_refused_client_speaking_as_the_sessions_principal_is_no_thief.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    assert_eq!(violated(toml, "unbound"), Vec::<String>::new());
    // The same plan with alice keeping her own credential: her new session is
    // hers, bob is a foreign thief, and a server that lets his refusal kill
    // her session is still caught (unbound), while guarded is not blamed.
    let own = toml.replace("to = \"alice\"\ncredential = true", "to = \"alice\"\ncredential = false");
    assert_ne!(own, toml);
    assert_eq!(violated(&own, "guarded"), Vec::<String>::new());
    assert_eq!(violated(&own, "unbound"), vec!["rejection-protocol".to_string()]);
    // And bob resuming from an id the session has: guarded serves him (the
    // session is bound to his principal). confidentiality still reports the
    // leak, as inherent, with the reason in its words.
    let served = toml.replace("last_event_id = 1013", "last_event_id = 1000");
    assert_ne!(served, toml);
    assert_eq!(violated(&served, "guarded"), Vec::<String>::new());
    let plan = Plan::from_toml_str(&served, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    let leaks = verdicts.iter().find(|v| v.check == "confidentiality").unwrap().violations();
    assert!(!leaks.is_empty());
    for x in leaks {
        assert!(
            x.inherent && x.headline().contains("alice opened the session with principal bob's credential"),
            "{}",
            x.headline()
        );
    }
}

/// `plan_run` found (its plan as it found it): guarded ends alice's
/// streamable-http stream after each event, as MCP 2025-11-25 allows, and
/// she polls again; her last GET went out 20 ms before the end. `liveness`
/// judged that unanswered GET ("never answered with an event stream").
#[test]
fn a_poll_sent_just_before_the_end_is_not_a_dead_uplink() {
    let toml = include_str!("fuzz_found/a_poll_sent_just_before_the_end_is_not_a_dead_uplink.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (its plan as it found it): alice's `resume` step presents
/// 1007, an id of r3's tool-call stream, so her GET (conn 12) resumes that
/// call's stream, and her standalone stream is gone. Notifications emitted
/// then are the standalone stream's: none is owed on conn 12. `liveness`
/// counted conn 12 as her uplink and called them lost.
#[test]
fn notifications_are_not_owed_on_a_get_that_resumed_a_tool_calls_stream() {
    let toml = include_str!("fuzz_found/notifications_are_not_owed_on_a_get_that_resumed_a_tool_calls_stream.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found a race in guarded itself (its plan as it found it):
/// alice (holding bob's credential) and bob both lose their standalone
/// stream and open a new one at the same instant. Both GETs fenced the dead
/// stream and both attached: two writers, and the second GET's re-issues of
/// r1 and r2 reached alice, who had just received them (`inflight-disposition`:
/// "r1 reached alice twice on conn 4"). A new standalone stream now fences
/// again until it is the sole writer.
#[test]
fn two_standalone_gets_at_one_instant_leave_one_writer() {
    let toml = include_str!("fuzz_found/two_standalone_gets_at_one_instant_leave_one_writer.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    // Each re-issue reached one client only.
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let mut got = std::collections::BTreeMap::<String, Vec<String>>::new();
    for e in &run.trace.events {
        if let mcpsim::trace::What::SseEvent { client, rpc: Some(r), .. } = &e.what {
            if let Some(id) = &r.id {
                got.entry(id.to_string()).or_default().push(client.clone());
            }
        }
    }
    assert_eq!(got.get("r1.r1"), Some(&vec!["alice".to_string()]), "{got:?}");
    assert_eq!(got.get("r1.r2"), Some(&vec!["bob".to_string()]), "{got:?}");
}

/// `plan_run` found (its plan as it found it): mallory takes bob's token and
/// credential, crashes (and is never restarted), and alice then takes them
/// from her: a crashed client still holds what it took, so alice speaks as
/// bob, and guarded killing bob's session when it refuses her is the seed's
/// rule. `rejection-protocol` took the crash for a reset of mallory's
/// credential (only a restart resets it) and blamed guarded.
#[test]
fn a_credential_taken_from_a_crashed_thief_is_still_the_owners() {
    let toml = include_str!("fuzz_found/a_credential_taken_from_a_crashed_thief_is_still_the_owners.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// The violations `server` gets on `toml`, as `(check, inherent, headline)`.
fn findings(toml: &str, server: &str) -> Vec<(String, bool, String)> {
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, server, None).unwrap();
    let verdicts = mcpsim::check::judge(&run.trace);
    let mut out = Vec::new();
    for v in &verdicts {
        for x in v.violations() {
            out.push((v.check.to_string(), x.inherent, x.headline()));
        }
    }
    out
}

/// Found by review, not by a fuzzer: the checks took every `credential =
/// true` theft for effective, but the world hands a credential over only
/// when the victim holds a session. Here alice steals from bob before bob
/// has a session: nothing is taken, alice opens her session with her own
/// credential, and bob (who
/// later takes her token without her credential) is a foreign thief. A
/// server that serves him her events leaks them, and no theft excuses it:
/// `confidentiality` called the leak inherent ("alice opened the session
/// with principal bob's credential"), which was false. The checks now read
/// the credential each request presented, as the client records it.
#[test]
fn a_credential_theft_that_took_nothing_excuses_no_leak() {
    let toml = include_str!("fuzz_found/a_credential_theft_that_took_nothing_excuses_no_leak.toml");
    let leaks: Vec<_> = findings(toml, "unbound").into_iter().filter(|f| f.0 == "confidentiality").collect();
    assert!(!leaks.is_empty(), "unbound served bob alice's session: a leak");
    for (_, inherent, headline) in &leaks {
        assert!(!inherent, "no theft took alice's or bob's credential: {headline}");
        assert!(headline.starts_with("bob (principal bob) "), "{headline}");
        assert!(!headline.contains("no server can tell them apart"), "{headline}");
    }
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// A session opened with another's credential is bound to that principal,
/// not to everyone: alice takes bob's token and credential and opens a new
/// session as bob; carol takes its token without a credential. Serving
/// carol is a leak no theft excuses: she presents her own credential, not
/// the one the session is bound to.
#[test]
fn a_third_principal_on_a_session_opened_with_a_taken_credential_is_foreign() {
    let toml = include_str!("fuzz_found/a_third_principal_on_a_session_opened_with_a_taken_credential_is_foreign.toml");
    let leaks: Vec<_> = findings(toml, "unbound").into_iter().filter(|f| f.0 == "confidentiality").collect();
    assert!(leaks.iter().any(|f| f.2.starts_with("carol (principal carol) received")), "{leaks:?}");
    for (_, inherent, headline) in leaks.iter().filter(|f| f.2.starts_with("carol")) {
        assert!(!inherent, "{headline}");
    }
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// Found by review: a session's owner that presents a credential it took
/// since is not its session's holder to a server that binds sessions. Here
/// alice resumes her session at the very instant she takes bob's credential:
/// her GET presents her token with bob's credential, guarded refuses it
/// (403) and keeps the session alive, which is right. `rejection-protocol`
/// took the refusal for the owner's and blamed guarded because the token
/// still worked afterwards (for carol, who holds alice's credential).
#[test]
fn an_owner_presenting_a_taken_credential_is_refused_as_a_thief() {
    let toml = include_str!("fuzz_found/an_owner_presenting_a_taken_credential_is_refused_as_a_thief.toml");
    // The race happened: alice presented her own session with bob's credential.
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let tok_a = run.trace.events.iter().find_map(|e| match &e.what {
        mcpsim::trace::What::SessionToken { client, token, .. } if client == "alice" => Some(token.clone()),
        _ => None,
    });
    let raced = run.trace.events.iter().any(|e| {
        matches!(&e.what, mcpsim::trace::What::HttpRequest { client, path, credential: Some(c), .. }
            if client == "alice" && c == "bob" && tok_a.as_deref().is_some_and(|t| path.contains(t)))
    });
    assert!(raced, "the plan no longer makes alice present her session with bob's credential");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// Found by review: alice takes bob's credential while her initialize POST
/// is on its way (500 ms each way), so her session is bound to her own
/// principal but every GET she sends on it presents bob's credential. guarded
/// answers each 403 and keeps the session, as a server that binds sessions
/// must; `liveness` blamed it because alice, the session's owner, never got
/// a live uplink.
#[test]
fn an_owner_whose_credential_changed_mid_open_is_owed_no_uplink() {
    let toml = include_str!("fuzz_found/an_owner_whose_credential_changed_mid_open_is_owed_no_uplink.toml");
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    let refused = run
        .trace
        .events
        .iter()
        .filter(
            |e| matches!(&e.what, mcpsim::trace::What::HttpResponse { client, status: 403, .. } if client == "alice"),
        )
        .count();
    assert!(refused >= 3, "the plan no longer makes guarded refuse alice's own session ({refused} refusals)");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (its plan as it found it): alice's `resume` step names
/// event 1007 at the instant her tool call r6 opens its POST stream, and
/// guarded mints 1007 there, so her GET resumes r6's call stream and guarded
/// fences that stream's first writer. Her standalone stream (on a NAT mapping
/// a rebind dropped) keeps its writer, rightly. `session-binding` took the GET
/// for a resumption of the standalone stream (the POST and the GET opened at
/// one instant, and the id was looked up among connections opened strictly
/// before) and called the standalone writer's heartbeat a second writer.
#[test]
fn a_get_resuming_a_call_stream_opened_at_the_same_instant_carries_that_stream() {
    let toml =
        include_str!("fuzz_found/a_get_resuming_a_call_stream_opened_at_the_same_instant_carries_that_stream.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (its plan as it found it): bob resumes his own session,
/// and takes alice's token (without her credential) before the resumed
/// stream carries r1's re-issue. Our client answered it on the session it
/// held then, alice's: guarded refused the answer (403: bob is not alice),
/// and `liveness` blamed guarded for r1's timeout. A client answers on the
/// session whose stream carried the request.
#[test]
fn a_request_is_answered_on_the_session_whose_stream_carried_it() {
    let toml = include_str!("fuzz_found/a_request_is_answered_on_the_session_whose_stream_carried_it.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    let plan = Plan::from_toml_str(toml, "fuzz-found.toml").unwrap();
    let run = mcpsim::run(&plan, "guarded", None).unwrap();
    use mcpsim::trace::What;
    let issued_on = run.trace.events.iter().find_map(|e| match &e.what {
        What::RequestIssued { label, session, .. } if label == "r1" => session.clone(),
        _ => None,
    });
    let answers: Vec<_> = run
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::Answer { client, session, .. } if client == "bob" => Some(session.clone()),
            _ => None,
        })
        .collect();
    assert!(issued_on.is_some() && !answers.is_empty(), "{issued_on:?} {answers:?}");
    assert!(answers.iter().all(|s| *s == issued_on), "{issued_on:?} {answers:?}");
}

/// `plan_run` found (its plan as it found it): guarded refuses alice's
/// resumption at 28.02 s with an error event and she re-initializes, but a
/// rebind at 28.08 s drops her initialize POST, and she waits a heartbeat
/// timeout before trying again, past the end. `rejection-protocol` blamed
/// guarded: "alice never obtained a new session".
#[test]
fn a_renewal_lost_on_the_network_is_not_the_servers() {
    let toml = include_str!("fuzz_found/a_renewal_lost_on_the_network_is_not_the_servers.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
}

/// `plan_run` found (its plan as it found it): r1 was lost in bob's dead
/// mapping and re-issued as r1.r1 (10.88 s); bob, having received neither,
/// resumed from 1000 at 24.4 s, and guarded replayed both events 1001 (r1,
/// its id retired) and 1002 (r1.r1): the client did the work twice, and
/// `inflight-disposition` rightly said so. Guarded now refuses that window,
/// as it refuses one holding a pending request.
#[test]
fn a_request_already_reissued_is_not_replayed_beside_its_reissue() {
    let toml = include_str!("fuzz_found/a_request_already_reissued_is_not_replayed_beside_its_reissue.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    // That the check fires where a request reaches the client twice is
    // proven in tests/trust.rs (a_request_replayed_and_reissued_reaches_the_client_twice).
}

/// `plan_run` found (its plan as it found it): alice's GET on conn 6 was
/// accepted at 9.52 s, the instant a rebind dropped its mapping, and guarded
/// wrote its priming event 1006 there at 9.54 s, the instant alice sent the
/// next GET (conn 7, from 1000). `session-binding` took 1006 for an event
/// minted after conn 7's writer was attached, because conn 7's replay
/// (1002-1003) left it out; but a replay leaves out every priming event, and
/// the server had not even received conn 7's GET yet.
#[test]
fn a_priming_event_written_before_the_new_get_arrived_is_no_second_writer() {
    let toml = include_str!("fuzz_found/a_priming_event_written_before_the_new_get_arrived_is_no_second_writer.toml");
    assert_eq!(violated(toml, "guarded"), Vec::<String>::new());
    // That the check fires on a writer that races the new one: the no-fence
    // mutant's snapshots (slow-fence, nat-rebind) and tests/check_each.rs.
}

/// `jsonrpc` found: a message whose params hold an integer beyond u64 (69
/// digits) must summarize the same after its JSON is written and parsed again.
#[test]
fn a_message_with_a_huge_integer_round_trips() {
    use mcpsim::wire::jsonrpc::Message;
    let text = include_str!("fuzz_found/jsonrpc-huge-integer.json");
    let m = Message::parse(text).unwrap();
    let json = m.to_json();
    let again = Message::parse(&json).unwrap_or_else(|e| panic!("{e:?}: {json}"));
    assert_eq!(again.summary(), m.summary(), "{json}");
}
