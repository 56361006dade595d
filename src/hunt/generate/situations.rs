//! The harder situations the stateful generator reaches ([`ReachKind`]),
//! each drawn from a stream of its own after the main draws.

use super::{ms, new_thief, Draft, Draws, FAULTS_END, REQUEST_TIMEOUT};
use crate::scenario::{Action, LastEventId, SeenOn};
use rand::seq::IndexedRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// Situations the generator reaches since issue 11: the window's edges,
/// resumptions while a request is pending, late answers to re-issued
/// requests, tool-call-stream theft and DELETE. They draw from their own
/// ChaCha stream (`hunt.reach`), so a seed that enables none of them keeps
/// the plan it always had, and one that does keeps every earlier step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReachKind {
    /// A burst, a silent drop, then a resume at the window's edge: the
    /// oldest retained id minus one or two, or the next id to be minted.
    WindowEdge,
    /// Two resumptions while a server request is still unanswered.
    PendingResumes,
    /// A request delivered, the uplink rebound, a resume while the owner
    /// still thinks: its answer arrives after the server re-issued it.
    LateAnswer,
    /// streamable-http: a thief resumes with an id from the owner's tool-call stream.
    CallStreamTheft,
    /// streamable-http: a DELETE from the owner or from a thief.
    EndSession,
    /// A burst that overflows the retention window while the owner's stream
    /// is half-open, then a resume from its last seen id (evicted by then).
    RetentionOverflow,
    /// A delayed fence (`fence_delay`), a silent drop, then a resume.
    FenceDelay,
    /// A request marked not reissuable, pending when its owner resumes.
    NotReissuable,
    /// A request answered late (after its timeout or its re-issue), then a
    /// stale resume from an id before it: the window covers a request the
    /// server has settled.
    StaleAfterLateAnswer,
    /// streamable-http: a burst on the standalone stream, a silent drop, then
    /// a resume at the edge of the window as the server numbers it. The
    /// reference engine (and any server numbering a session's events in one
    /// sequence) keeps `retention` events of the whole session, so the edge
    /// is the session's newest id minus the retention; resuming from the
    /// standalone stream's last seen id plus an offset reaches it when the
    /// burst is all the session minted since. When a tool call minted ids in
    /// between, the resume names an id another stream carried: a window that
    /// spans another stream's events, the other situation this draws.
    StreamableWindowEdge,
    /// streamable-http: a request delivered, the uplink rebound, a resume
    /// that has it re-issued; the owner, still thinking, answers the first
    /// (retired) id late, and before anyone answers the re-issue it resumes
    /// from the first id it saw: a window over a retired id answered late
    /// and a re-issue still unanswered.
    StaleOverRetired,
    /// streamable-http: the MCP security best practices' session-hijack
    /// prompt injection. A thief holding an owner's session id (half the
    /// time her credential too) calls `enable_tool` on her session, so that
    /// her stream is told her tool list changed; or, now and then, the
    /// owner enables a tool herself (a change she asked for).
    InjectTool,
    /// streamable-http: as [`ReachKind::StaleOverRetired`], but the owner
    /// thinks longer than the request timeout, so that the request times
    /// out unanswered; the stale resume, from the last id seen before the
    /// request, comes after the owner's late answer to the retired id and
    /// before its answer to the re-issue (issue "Bugs that escape", item 2).
    StaleAfterReissueTimeout,
    /// A request its owner answers at once, then a resume from the last id
    /// the owner saw before the request was issued: a window that holds the
    /// answered request and nothing of the session's earlier traffic
    /// (issue "Bugs that escape", item 2).
    ResumeBeforeRequest,
}

impl ReachKind {
    /// Every situation, in the order a seed draws them.
    pub const ALL: [ReachKind; 5] = [
        ReachKind::WindowEdge,
        ReachKind::PendingResumes,
        ReachKind::LateAnswer,
        ReachKind::CallStreamTheft,
        ReachKind::EndSession,
    ];

    /// The situations added after the first five (issue 26), drawn from a
    /// stream of their own (`hunt.reach2`) so that the first five keep
    /// their draws.
    pub const LATER: [ReachKind; 4] = [
        ReachKind::RetentionOverflow,
        ReachKind::FenceDelay,
        ReachKind::NotReissuable,
        ReachKind::StaleAfterLateAnswer,
    ];

    /// Whether a plan in `dialect` can hold it. DELETE and tool calls exist
    /// only in streamable-http. The window's edges are drawn in legacy-sse
    /// only: in streamable-http a session's streams share one id space, so
    /// "last seen on the uplink + 1" may name another stream's event, and
    /// resuming that stream is no edge of the uplink's window (the bundled
    /// `streamable-http/window-edge.toml` covers the edge there).
    pub(super) fn fits(self, draws: Draws) -> bool {
        match self {
            ReachKind::CallStreamTheft | ReachKind::EndSession | ReachKind::InjectTool => draws.tool_calls,
            ReachKind::WindowEdge => !draws.seen_ids,
            ReachKind::PendingResumes | ReachKind::LateAnswer => true,
            ReachKind::RetentionOverflow
            | ReachKind::FenceDelay
            | ReachKind::NotReissuable
            | ReachKind::StaleAfterLateAnswer => true,
            ReachKind::StreamableWindowEdge => draws.seen_ids,
            // The legacy client drops a request whose uplink ended: the late answer this arranges would not come.
            ReachKind::StaleOverRetired | ReachKind::StaleAfterReissueTimeout => !draws.late_answer_after_timeout,
            ReachKind::ResumeBeforeRequest => true,
        }
    }
}

impl Draft {
    /// Each of `kinds` that fits the dialect, one in ten, drawn from
    /// `stream` (all the coin flips first, then the situations); returns
    /// those drawn.
    pub(super) fn reach_from(&mut self, mut stream: ChaCha8Rng, kinds: &[ReachKind]) -> Vec<ReachKind> {
        let drawn: Vec<ReachKind> =
            kinds.iter().copied().filter(|kind| kind.fits(self.draws) && stream.random_bool(0.1)).collect();
        for &kind in &drawn {
            self.reach(kind, &mut stream);
        }
        drawn
    }

    /// One harder situation of `kind`, drawn from the `reach` stream: its
    /// owner and time, then what the situation itself draws.
    pub(super) fn reach(&mut self, kind: ReachKind, reach: &mut ChaCha8Rng) {
        let o = self.owners.choose(reach).expect("owners").clone();
        let at = ms(reach.random_range(1_000..FAULTS_END.as_millis() as u64 - 2_000));
        match kind {
            ReachKind::WindowEdge | ReachKind::StreamableWindowEdge => self.window_edge(reach, o, at),
            ReachKind::PendingResumes => self.pending_resumes(reach, o, at),
            ReachKind::LateAnswer if self.draws.late_answer_after_timeout => self.answer_after_timeout(reach, o, at),
            ReachKind::LateAnswer => self.late_answer(reach, o, at),
            ReachKind::CallStreamTheft | ReachKind::EndSession => self.theft_or_end(kind, reach, o, at),
            ReachKind::InjectTool => self.inject_tool(reach, o, at),
            ReachKind::RetentionOverflow => self.retention_overflow(reach, o, at),
            ReachKind::FenceDelay => self.fence_delay(reach, o, at),
            ReachKind::NotReissuable => self.not_reissuable(reach, o, at),
            ReachKind::StaleAfterLateAnswer => self.stale_after_late_answer(reach, o, at),
            ReachKind::StaleOverRetired => self.stale_over_retired(reach, o, at),
            ReachKind::StaleAfterReissueTimeout => self.stale_after_reissue_timeout(reach, o, at),
            ReachKind::ResumeBeforeRequest => self.resume_before_request(reach, o, at),
        }
    }

    /// Makes owner `o` think at least `think`; returns how long it thinks.
    fn think_at_least(&mut self, o: &str, think: Duration) -> Duration {
        match self.clients.iter_mut().find(|c| c.name == o) {
            Some(c) => {
                c.think_time = c.think_time.max(think);
                c.think_time
            }
            None => think,
        }
    }

    /// [`ReachKind::WindowEdge`] and [`ReachKind::StreamableWindowEdge`]: a
    /// burst past a small retention, a silent drop, a resume at the edge.
    fn window_edge(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        if self.retention == 64 {
            self.retention = reach.random_range(2..=6);
        }
        let r = self.retention as i64;
        let count = self.retention as u64 + reach.random_range(2..=6);
        self.push(at, Action::Notify { client: o.clone(), count });
        self.push(at + ms(1_500), Action::Sever { client: o.clone() });
        let offset = *[-r, -r - 1, 1].choose(reach).expect("non-empty");
        let last_event_id = LastEventId::LastSeenPlus(offset);
        self.push(at + ms(2_000), Action::Resume { client: o, last_event_id, expect: None });
    }

    /// [`ReachKind::PendingResumes`]: two resumes while a request is unanswered.
    fn pending_resumes(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        self.slow(&o);
        let request = reach_request(&mut self.label, &o, "sampling/createMessage");
        self.push(at, request);
        for d in [400, reach.random_range(600..1_500)] {
            self.push(at + ms(d), resume_last_seen(o.clone()));
        }
    }

    /// [`ReachKind::LateAnswer`] where a late answer comes after the
    /// request's timeout. The legacy client drops a request whose uplink
    /// ended (it waits for the re-issue), so its late answers are answers
    /// given after the server timed the request out.
    fn answer_after_timeout(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let think = ms(reach.random_range(500..3_000)) + Duration::from_secs(8);
        self.think_at_least(&o, think);
        let request = reach_request(&mut self.label, &o, "roots/list");
        self.push(at, request);
    }

    /// [`ReachKind::LateAnswer`]: a request delivered, the uplink rebound,
    /// a resume while the owner still thinks.
    fn late_answer(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        self.slow(&o);
        let request = reach_request(&mut self.label, &o, "roots/list");
        self.push(at, request);
        self.push(at + ms(400), Action::Rebind { client: o.clone() });
        let d = reach.random_range(600..1_500);
        self.push(at + ms(d), resume_last_seen(o));
    }

    /// [`ReachKind::InjectTool`]: a thief enables a tool on the owner's
    /// session, or (one time in four) the owner does.
    fn inject_tool(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let tool = format!("tool-{}", reach.random_range(1..=3u32));
        if reach.random_bool(0.25) {
            self.push(at, Action::EnableTool { client: o, tool });
            return;
        }
        let thief = new_thief(&mut self.thieves, &mut self.clients, reach.random_bool(0.5));
        let credential = reach.random_bool(0.5);
        self.push(at, Action::StealToken { from: o, to: thief.clone(), credential });
        let later = at + ms(reach.random_range(200..1_500));
        self.push(later, Action::EnableTool { client: thief, tool });
    }

    /// [`ReachKind::RetentionOverflow`]: a burst past the window while the
    /// owner's stream is half-open, then a resume from its last seen id.
    fn retention_overflow(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        if self.retention == 64 {
            self.retention = reach.random_range(2..=6);
        }
        self.push(at, Action::Sever { client: o.clone() });
        let count = self.retention as u64 + reach.random_range(4..=10);
        self.push(at + ms(300), Action::Notify { client: o.clone(), count });
        self.push(at + ms(1_200), resume_last_seen(o));
    }

    /// [`ReachKind::FenceDelay`]: a delayed fence, a silent drop, a resume.
    fn fence_delay(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        self.fence_delay = ms(reach.random_range(200..3_000));
        self.slow(&o);
        let request = reach_request(&mut self.label, &o, "elicitation/create");
        self.push(at, request);
        self.push(at + ms(300), Action::Sever { client: o.clone() });
        self.push(at + ms(reach.random_range(500..1_500)), resume_last_seen(o));
    }

    /// [`ReachKind::NotReissuable`]: a request that must not be re-issued,
    /// pending when its owner resumes.
    fn not_reissuable(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        self.slow(&o);
        self.label += 1;
        let (client, label) = (o.clone(), format!("r{}", self.label));
        let method = "elicitation/create".to_string();
        self.push(at, Action::ServerRequest { client, method, label, reissuable: false });
        self.push(at + ms(400), Action::Sever { client: o.clone() });
        self.push(at + ms(reach.random_range(600..1_500)), resume_last_seen(o));
    }

    /// [`ReachKind::StaleAfterLateAnswer`]: the owner answers after the
    /// request's timeout (8 s), then resumes from the first id it saw,
    /// before the request.
    fn stale_after_late_answer(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let think = ms(reach.random_range(500..2_000)) + Duration::from_secs(8);
        self.think_at_least(&o, think);
        let request = reach_request(&mut self.label, &o, "roots/list");
        self.push(at, request);
        let stale = self.seen(o.clone(), 0);
        self.push(at + think + ms(1_000), Action::Resume { client: o, last_event_id: stale, expect: None });
    }

    /// [`ReachKind::StaleOverRetired`]. The resume (after `d`) re-issues the
    /// request; the owner answers the first id `think` after it received
    /// it, and the re-issue no sooner than `d + think` (plus the
    /// resumption's round trip). An answer is acknowledged up to a second
    /// after it is sent (a new connection, 200 ms ticks), so the stale
    /// resume at `think + d - 100 ms`, with `d` at least 1.6 s, comes after
    /// the first answer is acknowledged and before the re-issue's is sent.
    fn stale_over_retired(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let d = reach.random_range(1_600..2_600);
        let think = ms(d + reach.random_range(1_000..2_500));
        let stale = self.seen(o.clone(), 0);
        self.retired_then_stale(o, at, (d, think), stale);
    }

    /// [`ReachKind::StaleAfterReissueTimeout`]: as
    /// [`ReachKind::StaleOverRetired`], but the owner thinks longer than the
    /// request timeout (REQUEST_TIMEOUT, counted from the first issue): the
    /// request times out unanswered, the owner answers the retired id late,
    /// and the stale resume, at `think + d - 100 ms`, comes after that
    /// answer and before the owner's answer to the re-issue.
    fn stale_after_reissue_timeout(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let d = reach.random_range(1_600..2_600);
        let think = REQUEST_TIMEOUT + ms(reach.random_range(500..2_000));
        // The request drawn next.
        let stale = LastEventId::SeenBefore(format!("r{}", self.label + 1));
        self.retired_then_stale(o, at, (d, think), stale);
    }

    /// The steps of the two situations above: the owner thinks at least
    /// `think`; a request, the uplink rebound, a resume after `d` that
    /// re-issues it, and a resume from `stale` at `think + d - 100 ms`.
    fn retired_then_stale(&mut self, o: String, at: Duration, (d, think): (u64, Duration), stale: LastEventId) {
        let think = self.think_at_least(&o, think);
        let request = reach_request(&mut self.label, &o, "roots/list");
        self.push(at, request);
        self.push(at + ms(400), Action::Rebind { client: o.clone() });
        self.push(at + ms(d), resume_last_seen(o.clone()));
        self.push(at + think + ms(d - 100), Action::Resume { client: o, last_event_id: stale, expect: None });
    }

    /// [`ReachKind::ResumeBeforeRequest`]: a request answered at once, then
    /// a resume from the last id seen before it was issued.
    fn resume_before_request(&mut self, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let label = format!("r{}", self.label + 1);
        let request = reach_request(&mut self.label, &o, "sampling/createMessage");
        self.push(at, request);
        let think = self.clients.iter().find(|c| c.name == o).map_or(ms(1_000), |c| c.think_time);
        let stale = LastEventId::SeenBefore(label);
        let later = at + think + ms(reach.random_range(1_000..2_500));
        self.push(later, Action::Resume { client: o, last_event_id: stale, expect: None });
    }

    /// A thief takes a live tool call's stream, or a session is ended by
    /// its owner (who then starts a new one) or by a thief.
    fn theft_or_end(&mut self, kind: ReachKind, reach: &mut ChaCha8Rng, o: String, at: Duration) {
        let owner_ends = kind == ReachKind::EndSession && reach.random_bool(0.5);
        if owner_ends {
            self.push(at, Action::EndSession { client: o.clone() });
            self.push(at + ms(1_000), Action::Connect { client: o });
            return;
        }
        let auto_answer = reach.random_bool(0.5);
        let thief = new_thief(&mut self.thieves, &mut self.clients, auto_answer);
        let credential = reach.random_bool(0.5);
        if kind == ReachKind::CallStreamTheft {
            self.label += 1;
            let method = "elicitation/create".to_string();
            self.push(at, Action::CallTool { client: o.clone(), method, label: format!("r{}", self.label) });
            self.push(at + ms(600), Action::StealToken { from: o.clone(), to: thief.clone(), credential });
            let from = LastEventId::Seen { client: o, nth: 1, stream: SeenOn::Call };
            let d = reach.random_range(800..2_000);
            self.push(at + ms(d), Action::Resume { client: thief, last_event_id: from, expect: None });
        } else {
            self.push(at, Action::StealToken { from: o, to: thief.clone(), credential });
            let later = at + ms(reach.random_range(200..1_500));
            self.push(later, Action::EndSession { client: thief });
        }
    }
}

/// The next reach request's step: a reissuable server request labelled `r<n>`.
fn reach_request(label: &mut u32, client: &str, method: &str) -> Action {
    *label += 1;
    Action::ServerRequest { client: client.into(), method: method.into(), label: format!("r{label}"), reissuable: true }
}

/// A resume from the last id the client saw.
fn resume_last_seen(client: String) -> Action {
    Action::Resume { client, last_event_id: LastEventId::LastSeen, expect: None }
}
