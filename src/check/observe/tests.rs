//! The index the checks read, unit-tested on hand-built traces: no world
//! runs here, so each test shows exactly which events lead to which fact.

use super::{Observed, StreamKey};
use crate::trace::{ConnId, Event, Purpose, Refused, SimTime, Trace, What};
use crate::wire::jsonrpc::{RpcId, RpcKind, RpcSummary};

/// A trace from `(milliseconds, event)` pairs, in order.
fn trace(events: Vec<(u64, What)>) -> Trace {
    Trace {
        events: events
            .into_iter()
            .enumerate()
            .map(|(i, (ms, what))| Event { seq: i as u64, t_us: SimTime(ms * 1000), what })
            .collect(),
    }
}

fn connect(conn: u32, purpose: Purpose) -> What {
    What::Connect { client: "alice".into(), conn: ConnId(conn), port: 40000 + conn as u16, purpose }
}

fn request(conn: u32, method: &str, path: &str, last: Option<&str>, session: Option<&str>) -> What {
    What::HttpRequest {
        client: "alice".into(),
        conn: ConnId(conn),
        method: method.into(),
        path: path.into(),
        last_event_id: last.map(String::from),
        session: session.map(String::from),
        credential: None,
        rpc: None,
    }
}

fn stream_ok(conn: u32) -> What {
    What::HttpResponse {
        client: "alice".into(),
        conn: ConnId(conn),
        status: 200,
        content_type: Some("text/event-stream".into()),
    }
}

fn event(conn: u32, id: &str, request: Option<i64>) -> What {
    What::SseEvent {
        client: "alice".into(),
        conn: ConnId(conn),
        id: Some(id.into()),
        event: "message".into(),
        rpc: request.map(|n| RpcSummary {
            kind: RpcKind::Request,
            method: Some("roots/list".into()),
            id: Some(RpcId::Num(n)),
            params: None,
        }),
        data: String::new(),
    }
}

#[test]
fn a_legacy_resume_presents_the_token_in_its_url_and_carries_the_sessions_get_stream() {
    let t = trace(vec![
        (0, connect(1, Purpose::Uplink)),
        (0, request(1, "GET", "/mcp/sse", None, None)),
        (100, stream_ok(1)),
        (100, What::SessionToken { client: "alice".into(), conn: ConnId(1), token: "tok-1".into() }),
        (200, event(1, "1001", None)),
        (5000, connect(2, Purpose::Uplink)),
        (5000, request(2, "GET", "/mcp/sse?sessionId=tok-1", Some("1001"), None)),
        (5200, stream_ok(2)),
    ]);
    let o = Observed::new(&t);
    let first = &o.conns[&("alice".to_string(), ConnId(1))];
    assert_eq!(first.learned_token.as_deref(), Some("tok-1"));
    assert_eq!(first.stream, StreamKey::Get("tok-1".into()));
    assert_eq!(first.accepted_resumption(), None, "a fresh uplink resumes nothing");
    let resume = &o.conns[&("alice".to_string(), ConnId(2))];
    assert_eq!(resume.presented_token.as_deref(), Some("tok-1"));
    assert!(!resume.session_header);
    assert_eq!(resume.stream, StreamKey::Get("tok-1".into()));
    assert_eq!(resume.accepted_resumption(), Some((SimTime(5_200_000), 7)));
    assert_eq!(o.token_owner.get("tok-1").map(String::as_str), Some("alice"));
}

#[test]
fn a_get_with_an_id_seen_on_a_tool_calls_stream_carries_that_stream() {
    let t = trace(vec![
        (0, connect(3, Purpose::Call)),
        (0, request(3, "POST", "/mcp", None, Some("s-1"))),
        (100, stream_ok(3)),
        (100, event(3, "7", Some(0))),
        (2000, connect(4, Purpose::Call)),
        (2000, request(4, "GET", "/mcp", Some("7"), Some("s-1"))),
        (2100, stream_ok(4)),
    ]);
    let o = Observed::new(&t);
    let call = StreamKey::Call { client: "alice".into(), conn: ConnId(3) };
    assert_eq!(o.conns[&("alice".to_string(), ConnId(3))].stream, call);
    let resume = &o.conns[&("alice".to_string(), ConnId(4))];
    assert!(resume.session_header);
    assert_eq!(resume.stream, call, "the id names the stream it was seen on");
    assert!(resume.stream.is_call() && !resume.stream.is_get());
    assert_eq!(o.stream_ids(&call, SimTime(3_000_000)), [(SimTime(100_000), "7".to_string(), true)]);
}

#[test]
fn a_refused_resumption_is_not_accepted_and_keeps_the_kind_of_refusal() {
    let t = trace(vec![
        (0, connect(2, Purpose::Uplink)),
        (0, request(2, "GET", "/mcp/sse?sessionId=tok-1", Some("1001"), None)),
        (100, stream_ok(2)),
        (100, What::Rejected { client: "alice".into(), conn: ConnId(2), how: Refused::EmptyStream }),
    ]);
    let o = Observed::new(&t);
    let c = &o.conns[&("alice".to_string(), ConnId(2))];
    assert_eq!(c.accepted_resumption(), None);
    assert_eq!(c.rejected.as_ref().map(|r| r.2), Some(Refused::EmptyStream));
    // A POST carries no stream.
    let t = trace(vec![
        (0, connect(5, Purpose::Post)),
        (0, request(5, "POST", "/mcp/messages?sessionId=tok-1", None, None)),
    ]);
    let o = Observed::new(&t);
    assert!(o.conns[&("alice".to_string(), ConnId(5))].stream.is_none());
}

/// Who presented what: the facts the checks use to tell a thief from a
/// session's holder come from the credential each request carried.
mod credentials {
    use super::super::Observed;
    use crate::check::testkit::Tb;
    use crate::trace::{ConnId, SimTime, Trace, What};

    fn conn<'o>(o: &'o Observed<'_>, client: &str, n: u32) -> &'o super::super::Conn {
        &o.conns[&(client.to_string(), ConnId(n))]
    }

    /// Alice holds bob's credential (she took it), opens session tok-a as
    /// bob; carol takes the token without a credential, bob with his own.
    fn opened_with_a_taken_credential() -> Trace {
        Tb::new(30)
            .client("alice")
            .client("bob")
            .client("carol")
            .uplink("bob", 1, "tok-b")
            .at(1000)
            .steal("bob", "alice", true)
            .uplink("alice", 1, "tok-a")
            .at(3000)
            .steal("alice", "carol", false)
            .resume("carol", 1, "tok-a", Some("1000"))
            .resume("bob", 2, "tok-a", Some("1000"))
            .trace()
    }

    #[test]
    fn a_session_is_bound_to_the_credential_its_opening_request_presented() {
        let t = opened_with_a_taken_credential();
        let o = Observed::new(&t);
        assert_eq!(o.presents(conn(&o, "alice", 1)), "bob");
        assert_eq!(o.session_principal("tok-a"), Some("bob"));
        assert_eq!(o.session_principal("tok-b"), Some("bob"));
        assert_eq!(o.session_principal("tok-unknown"), None);
        // carol presents her own: foreign; bob presents the session's: not.
        assert!(o.foreign_on(conn(&o, "carol", 1), "tok-a"));
        assert!(!o.foreign_on(conn(&o, "bob", 2), "tok-a"));
        // The owner is never foreign on its own session.
        assert!(!o.foreign_on(conn(&o, "alice", 1), "tok-a"));
        assert!(o.rival_holder("alice", "tok-a", SimTime(30_000_000)));
        assert!(!o.rival_holder("alice", "tok-a", SimTime(2_000_000)), "bob presented it only at 3 s");
        assert_eq!(
            o.why_indistinguishable("tok-a", "alice"),
            crate::check::finding::Indistinguishable::OpenedWith { principal: "bob".into() }
        );
    }

    /// A theft that took nothing (its victim held no session, its thief had
    /// crashed) leaves no credential on the thief's requests, whatever the
    /// step said: the session alice opens next is hers.
    #[test]
    fn a_theft_that_took_nothing_changes_no_binding() {
        let t = Tb::new(30)
            .client("alice")
            .client("bob")
            .push(What::TokenStolen { from: "bob".into(), to: "alice".into(), credential: true })
            .at(100)
            .uplink("alice", 1, "tok-a")
            .at(3000)
            .steal("alice", "bob", false)
            .resume("bob", 1, "tok-a", Some("1000"))
            .trace();
        let o = Observed::new(&t);
        assert_eq!(o.session_principal("tok-a"), Some("alice"));
        assert!(o.foreign_on(conn(&o, "bob", 1), "tok-a"));
        assert!(!o.rival_holder("alice", "tok-a", SimTime(30_000_000)));
        assert_eq!(o.speaks_as("alice", SimTime(200_000)), "alice");
        assert_eq!(o.speaks_as("bob", SimTime(0)), "bob", "before any request: its own");
    }

    /// The principal a client speaks as is the one on its latest request:
    /// a client that took a credential and later presents its own again
    /// (restarted: Client::new resets it) speaks as itself.
    #[test]
    fn a_client_speaks_as_the_credential_of_its_latest_request() {
        let t = Tb::new(30)
            .client("alice")
            .client("bob")
            .uplink("bob", 1, "tok-b")
            .at(1000)
            .steal("bob", "alice", true)
            .uplink("alice", 1, "tok-a1")
            .at(5000)
            .crash_and_restart("alice")
            .uplink("alice", 2, "tok-a2")
            .trace();
        let o = Observed::new(&t);
        assert_eq!(o.speaks_as("alice", SimTime(2_000_000)), "bob");
        assert_eq!(o.speaks_as("alice", SimTime(6_000_000)), "alice");
        assert_eq!(o.session_principal("tok-a1"), Some("bob"));
        assert_eq!(o.session_principal("tok-a2"), Some("alice"));
    }

    /// A session's owner that presents a credential it took since is told
    /// apart from its session's holder like anyone else (a server that
    /// binds sessions refuses it): alice opens tok-a as herself, takes bob's
    /// credential, and resumes tok-a with it.
    #[test]
    fn an_owner_presenting_another_credential_is_foreign_on_its_own_session() {
        let t = Tb::new(30)
            .client("alice")
            .client("bob")
            .uplink("bob", 1, "tok-b")
            .uplink("alice", 1, "tok-a")
            .at(2000)
            .steal("bob", "alice", true)
            .resume("alice", 2, "tok-a", Some("1000"))
            .trace();
        let o = Observed::new(&t);
        assert_eq!(o.session_principal("tok-a"), Some("alice"));
        assert!(!o.foreign_on(conn(&o, "alice", 1), "tok-a"));
        assert!(o.foreign_on(conn(&o, "alice", 2), "tok-a"));
        assert!(o.presented_foreign_credential("alice", "tok-a", SimTime(30_000_000)));
        assert!(!o.presented_foreign_credential("alice", "tok-a", SimTime(1_000_000)), "not before 2 s");
        assert!(!o.rival_holder("alice", "tok-a", SimTime(30_000_000)), "no one else presented tok-a");
    }
}
