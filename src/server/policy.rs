//! Resumption policies: what the reference engine does with a `Last-Event-ID`.
//!
//! A [`ResumptionPolicy`] sees a read-only [`ResumeView`] of the session at the
//! instant the new GET is processed and returns a [`Decision`]. The engine
//! carries the decision out (fencing, replay, re-issue, refusal), so a policy
//! is a pure function and a mutant is a one-line change to a correct policy.

use crate::vocab::CheckId;
use crate::wire::jsonrpc::RpcId;

/// The state of one server request, as the session knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RequestState {
    /// Issued and not settled yet.
    Pending,
    /// The client answered it (late answers to a retired id count too).
    Answered,
    /// The client answered with an error, or the engine failed it explicitly.
    Failed,
    /// No answer came within the request timeout.
    TimedOut,
    /// A retired id: the request was re-issued under a fresh id (its
    /// current id is another entry). Replaying the event that carried this
    /// id hands the client the same request a second time.
    Reissued,
}

/// A server request of the session.
#[derive(Clone, Debug)]
pub struct RequestView {
    /// Its current JSON-RPC id (a re-issue changes it).
    pub id: RpcId,
    /// The scenario's label for it.
    pub label: String,
    /// Its JSON-RPC method.
    pub method: String,
    /// The event id that carried it.
    pub event_id: u64,
    /// Where it stands.
    pub state: RequestState,
    /// False when it must not be re-issued under a fresh id (its effect is
    /// not idempotent): a resumption must then fail it or be refused.
    pub reissuable: bool,
    /// Whether it was issued on the stream being resumed (the requests an
    /// accepted resumption disposes of).
    pub on_stream: bool,
}

/// What the policy sees when a resumption arrives.
#[derive(Clone, Debug)]
pub struct ResumeView<'a> {
    /// The session's owner (the credential that opened it).
    pub owner: &'a str,
    /// The credential presented with the resumption.
    pub presented: &'a str,
    /// The `Last-Event-ID` presented; `None` when the header is absent or not a number.
    pub last_event_id: Option<u64>,
    /// `(oldest, newest)` retained event ids; `None` when nothing was ever emitted.
    pub retained: Option<(u64, u64)>,
    /// The first id the session will mint next (everything below it was emitted).
    pub next_event_id: u64,
    /// Uplinks still registered for the session.
    pub prior_uplinks: usize,
    /// Server requests of the session, in issue order.
    pub requests: &'a [RequestView],
    /// Which event ids carry which request (in the retained log).
    pub request_events: &'a [(u64, RpcId)],
}

/// What to do with unanswered server requests when a resumption is accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inflight {
    /// Re-issue each on the new uplink under a fresh id; tombstone the old id.
    Reissue,
    /// Fail each explicitly to the application.
    Fail,
    /// Leave them where they are (orphaned if their uplink is dead).
    Leave,
}

/// How a refusal reaches the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `200 text/event-stream` carrying one `event: error`, then the end.
    ErrorEvent,
    /// An HTTP error status with a JSON-RPC error body.
    Status(u16),
    /// `200` and an empty stream: not explicit (a mutant's behaviour).
    EmptyOk,
}

/// A policy's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Accept the resumption: the GET becomes the stream's writer, with a replay.
    Accept {
        /// Fence every prior uplink (bounded by `fence_grace`) before attaching.
        fence_prior: bool,
        /// The first event id to replay.
        replay_from: u64,
        /// Leave the stream's newest event out of the replay (a bug no
        /// built-in policy has: test mutants use it to prove a gap at the
        /// end of a replay is blamed on replay-integrity).
        skip_newest: bool,
        /// What to do with the unanswered requests issued on the resumed stream.
        inflight: Inflight,
    },
    /// Refuse the resumption.
    Reject {
        /// Why, in words (the engine's note and an explicit refusal's message carry it).
        reason: String,
        /// How the refusal reaches the client.
        how: Refusal,
        /// Kill the session token (the owner must re-initialize).
        invalidate: bool,
    },
}

/// Decides resumptions for the reference engine.
pub trait ResumptionPolicy {
    /// The server name users pass to `--server`.
    fn name(&self) -> &'static str;
    /// One line for `mcpsim list servers`.
    fn description(&self) -> &'static str;
    /// Whether POSTs and GETs must present the session owner's credential.
    fn binds_principal(&self) -> bool;
    /// Decides one resumption from what the session looks like now.
    fn decide(&self, view: &ResumeView<'_>) -> Decision;
    /// With replicas sharing a store: whether a replica that takes a
    /// session over fences the writer another replica holds (through the
    /// store, waiting for its confirmation within `fence_grace`), and
    /// whether a replica lets itself be fenced so.
    fn fences_across_replicas(&self) -> bool {
        true
    }
    /// How a resumption of a session this process does not know is
    /// refused: 404 (MCP 2025-11-25: the client then starts a new session).
    fn unknown_session(&self) -> Refusal {
        Refusal::Status(404)
    }
}

/// The seed's "naive behavior" column: `Last-Event-ID` is taken as proof.
pub struct Naive;

impl ResumptionPolicy for Naive {
    fn name(&self) -> &'static str {
        "naive"
    }
    fn description(&self) -> &'static str {
        "accepts any Last-Event-ID from any token holder, replays from the oldest retained event, races a second writer"
    }
    fn binds_principal(&self) -> bool {
        false
    }
    fn fences_across_replicas(&self) -> bool {
        false
    }
    fn decide(&self, v: &ResumeView<'_>) -> Decision {
        let asked = v.last_event_id.map_or(0, |n| n.saturating_add(1));
        let oldest = v.retained.map_or(v.next_event_id, |(o, _)| o);
        Decision::Accept {
            fence_prior: false,
            replay_from: asked.max(oldest),
            skip_newest: false,
            inflight: Inflight::Leave,
        }
    }
}

/// A deliberate bug: each mutant is `guarded` with exactly one condition broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Attaches the new uplink without fencing the prior one (session binding).
    NoFence,
    /// Replays from the oldest retained event when the id was evicted (replay integrity).
    TruncatingReplay,
    /// Replays windows holding requests the client already answered (correlation).
    AnsweredReplay,
    /// Leaves in-flight requests on the fenced writer (in-flight disposition).
    Orphaning,
    /// Has no principal binding (confidentiality).
    Unbound,
    /// Replays starting with the `Last-Event-ID` event itself (stream order).
    InclusiveReplay,
    /// Refuses by answering 200 with an empty stream (rejection protocol).
    EmptyOk,
    /// Fences only its own process's writers: across replicas, the prior
    /// writer is neither fenced nor waited for (session binding).
    LocalFence,
}

impl Mutation {
    /// Every mutation, in the order `mcpsim list servers` shows the mutants.
    pub const ALL: [Mutation; 8] = [
        Mutation::NoFence,
        Mutation::TruncatingReplay,
        Mutation::AnsweredReplay,
        Mutation::Orphaning,
        Mutation::Unbound,
        Mutation::InclusiveReplay,
        Mutation::EmptyOk,
        Mutation::LocalFence,
    ];

    /// The mutant's server name, for `--server`.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::NoFence => "no-fence",
            Mutation::TruncatingReplay => "truncating-replay",
            Mutation::AnsweredReplay => "answered-replay",
            Mutation::Orphaning => "orphaning",
            Mutation::Unbound => "unbound",
            Mutation::InclusiveReplay => "inclusive-replay",
            Mutation::EmptyOk => "empty-ok",
            Mutation::LocalFence => "local-fence",
        }
    }

    /// One line for `mcpsim list servers`.
    pub fn description(self) -> &'static str {
        match self {
            Mutation::NoFence => "guarded, but attaches the new uplink without fencing the prior one",
            Mutation::TruncatingReplay => "guarded, but replays from the oldest retained event when the id was evicted",
            Mutation::AnsweredReplay => "guarded, but replays windows holding requests the client already answered",
            Mutation::Orphaning => "guarded, but leaves in-flight requests on the fenced writer",
            Mutation::Unbound => "guarded, but does not bind sessions to principals",
            Mutation::InclusiveReplay => "guarded, but replays starting with the Last-Event-ID event itself",
            Mutation::EmptyOk => "guarded, but refuses by answering 200 with an empty stream",
            Mutation::LocalFence => {
                "guarded, but fences only its own writers: with replicas, the prior writer on another replica stays"
            }
        }
    }

    /// Whether the bug shows only across replicas that share a store (a
    /// deployment): on one server the mutant is guarded.
    pub fn needs_replicas(self) -> bool {
        self == Mutation::LocalFence
    }

    /// The check that exists to catch this bug.
    pub fn caught_by(self) -> CheckId {
        match self {
            Mutation::NoFence => CheckId::SessionBinding,
            Mutation::TruncatingReplay => CheckId::ReplayIntegrity,
            Mutation::AnsweredReplay => CheckId::CorrelationConsistency,
            Mutation::Orphaning => CheckId::InflightDisposition,
            Mutation::Unbound => CheckId::Confidentiality,
            Mutation::InclusiveReplay => CheckId::StreamOrder,
            Mutation::EmptyOk => CheckId::RejectionProtocol,
            Mutation::LocalFence => CheckId::SessionBinding,
        }
    }
}

/// Enforces the seed's four conditions and binds sessions to principals.
pub struct Guarded;

impl Guarded {
    /// The guarded decision.
    pub fn decision(v: &ResumeView<'_>) -> Decision {
        decide_guarded(v, None)
    }
}

/// The guarded decision, optionally with one mutation.
fn decide_guarded(v: &ResumeView<'_>, bug: Option<Mutation>) -> Decision {
    let how = if bug == Some(Mutation::EmptyOk) { Refusal::EmptyOk } else { Refusal::ErrorEvent };
    let reject = |reason: String| Decision::Reject { reason, how, invalidate: true };
    if v.presented != v.owner && bug != Some(Mutation::Unbound) {
        // A thief without the credential: refuse, but leave the owner's session alone.
        return Decision::Reject {
            reason: "credential does not match the session's owner".into(),
            how: if bug == Some(Mutation::EmptyOk) { Refusal::EmptyOk } else { Refusal::Status(403) },
            invalidate: false,
        };
    }
    let Some(n) = v.last_event_id else {
        return reject("resumption without a numeric Last-Event-ID".into());
    };
    let newest = v.next_event_id.saturating_sub(1);
    let oldest = v.retained.map_or(v.next_event_id, |(o, _)| o);
    if n > newest {
        return reject(format!("Last-Event-ID {n} is newer than the last emitted id {newest}"));
    }
    let mut replay_from = if bug == Some(Mutation::InclusiveReplay) { n } else { n + 1 };
    if n.saturating_add(1) < oldest {
        if bug != Some(Mutation::TruncatingReplay) {
            return reject(format!("Last-Event-ID {n} is older than the retained window (oldest {oldest})"));
        }
        replay_from = oldest;
    }
    if bug != Some(Mutation::AnsweredReplay) {
        if let Some(why) = answered_in_window(v, n) {
            return reject(why);
        }
    }
    // A pending request in the replay window is about to be re-issued under
    // a fresh id: replaying its event too hands the client the same request
    // twice, and leaving the event out leaves a gap. The seed's argument for
    // answered requests (condition 3) holds for it as well: neither is
    // correct, so refuse (the session's pending requests then fail
    // explicitly, condition 4 (b)). The same holds for the event of an id
    // already re-issued: its re-issue is later in the window (found by
    // fuzzing: guarded replayed both, and the client did the work twice). A
    // server that leaves requests in flight (the orphaning mutant) re-issues
    // nothing and has no such conflict.
    if bug != Some(Mutation::Orphaning) {
        if let Some(why) = delivered_twice_in_window(v, n) {
            return reject(why);
        }
    }
    // Condition 4: an in-flight request that cannot be re-issued under a
    // fresh id cannot be carried over to the new writer: refuse (the
    // session's pending requests then fail explicitly).
    if bug != Some(Mutation::Orphaning) {
        if let Some(r) = v.requests.iter().find(|r| r.on_stream && r.state == RequestState::Pending && !r.reissuable) {
            return reject(format!("in-flight request {} is not reissuable", r.label));
        }
    }
    Decision::Accept {
        fence_prior: bug != Some(Mutation::NoFence),
        replay_from,
        skip_newest: false,
        inflight: if bug == Some(Mutation::Orphaning) { Inflight::Leave } else { Inflight::Reissue },
    }
}

/// Condition 3: the event of a request already answered in the replay
/// window after `n` (why to refuse), if any.
fn answered_in_window(v: &ResumeView<'_>, n: u64) -> Option<String> {
    for (event_id, id) in v.request_events {
        if *event_id > n {
            if let Some(r) = v.requests.iter().find(|r| &r.id == id) {
                if r.state == RequestState::Answered {
                    return Some(format!("replay window holds {} (event {event_id}), already answered", r.label));
                }
            }
        }
    }
    None
}

/// The event of a request still pending, or of one under its retired id,
/// in the replay window after `n`: replaying it and re-issuing it would
/// deliver it twice (why to refuse), if any.
fn delivered_twice_in_window(v: &ResumeView<'_>, n: u64) -> Option<String> {
    for (event_id, id) in v.request_events {
        if *event_id > n {
            let Some(r) = v.requests.iter().find(|r| &r.id == id) else { continue };
            match r.state {
                RequestState::Pending => {
                    return Some(format!(
                        "replay window holds {} (event {event_id}), still pending: replaying it and re-issuing it would deliver it twice",
                        r.label
                    ))
                }
                RequestState::Reissued => {
                    return Some(format!(
                        "replay window holds {} (event {event_id}) under its retired id {id}: replaying it and its re-issue would deliver it twice",
                        r.label
                    ))
                }
                _ => {}
            }
        }
    }
    None
}

impl ResumptionPolicy for Guarded {
    fn name(&self) -> &'static str {
        "guarded"
    }
    fn description(&self) -> &'static str {
        "enforces the four conditions: fences the prior writer, rejects evicted or answered windows, re-issues in-flight requests, binds principals"
    }
    fn binds_principal(&self) -> bool {
        true
    }
    fn decide(&self, v: &ResumeView<'_>) -> Decision {
        decide_guarded(v, None)
    }
}

/// `guarded` with one deliberate bug.
pub struct Mutant(pub Mutation);

impl ResumptionPolicy for Mutant {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn description(&self) -> &'static str {
        self.0.description()
    }
    fn binds_principal(&self) -> bool {
        self.0 != Mutation::Unbound
    }
    fn decide(&self, v: &ResumeView<'_>) -> Decision {
        decide_guarded(v, Some(self.0))
    }
    fn fences_across_replicas(&self) -> bool {
        !matches!(self.0, Mutation::LocalFence | Mutation::NoFence)
    }
}

/// Every built-in policy, in the order `mcpsim list servers` shows them.
pub fn builtin_policies() -> Vec<Box<dyn ResumptionPolicy>> {
    let mut all: Vec<Box<dyn ResumptionPolicy>> = vec![Box::new(Naive), Box::new(Guarded)];
    all.extend(Mutation::ALL.into_iter().map(|m| Box::new(Mutant(m)) as Box<dyn ResumptionPolicy>));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(last: Option<u64>, requests: &'a [RequestView], events: &'a [(u64, RpcId)]) -> ResumeView<'a> {
        ResumeView {
            owner: "alice",
            presented: "alice",
            last_event_id: last,
            retained: Some((1000, 1008)),
            next_event_id: 1009,
            prior_uplinks: 1,
            requests,
            request_events: events,
        }
    }

    fn answered(state: RequestState) -> Vec<RequestView> {
        vec![RequestView {
            id: RpcId::Str("req-42".into()),
            label: "req-42".into(),
            method: "roots/list".into(),
            event_id: 1007,
            state,
            reissuable: true,
            on_stream: true,
        }]
    }

    #[test]
    fn guarded_refuses_when_an_inflight_request_cannot_be_reissued() {
        // req-42 (event 1007) was delivered; the client resumes from 1008 while it is pending.
        let mut requests = answered(RequestState::Pending);
        let events = [(1007, RpcId::Str("req-42".into()))];
        let d = Guarded::decision(&view(Some(1008), &requests, &events));
        assert!(matches!(d, Decision::Accept { inflight: Inflight::Reissue, .. }), "{d:?}");
        requests[0].reissuable = false;
        let d = Guarded::decision(&view(Some(1008), &requests, &events));
        assert!(
            matches!(&d, Decision::Reject { reason, invalidate: true, .. } if reason.contains("not reissuable")),
            "{d:?}"
        );
        // Settled, it no longer matters.
        requests[0].state = RequestState::Answered;
        let d = Guarded::decision(&view(Some(1008), &requests, &events));
        assert!(matches!(d, Decision::Accept { .. }), "{d:?}");
    }

    #[test]
    fn guarded_accepts_a_clean_resume_and_fences() {
        let d = Guarded::decision(&view(Some(1007), &[], &[]));
        assert_eq!(
            d,
            Decision::Accept { fence_prior: true, replay_from: 1008, skip_newest: false, inflight: Inflight::Reissue }
        );
    }

    #[test]
    fn guarded_rejects_each_broken_condition() {
        let ev = [(1007, RpcId::Str("req-42".into()))];
        let reqs = answered(RequestState::Answered);
        for (last, why) in
            [(Some(1010), "newer"), (Some(900), "older"), (None, "numeric"), (Some(1006), "already answered")]
        {
            match Guarded::decision(&view(last, &reqs, &ev)) {
                Decision::Reject { reason, invalidate: true, how: Refusal::ErrorEvent } => {
                    assert!(reason.contains(why), "{reason}")
                }
                d => panic!("{last:?}: {d:?}"),
            }
        }
        // The same window with the request still pending is refused too:
        // replayed and re-issued, the client would get it twice.
        let pending = answered(RequestState::Pending);
        match Guarded::decision(&view(Some(1006), &pending, &ev)) {
            Decision::Reject { reason, invalidate: true, .. } => assert!(reason.contains("still pending"), "{reason}"),
            d => panic!("{d:?}"),
        }
        // A pending request the client already saw (at or before the id) is re-issued.
        assert!(matches!(Guarded::decision(&view(Some(1007), &pending, &ev)), Decision::Accept { .. }));
        // So is a window holding a retired id's event, whatever became of
        // its re-issue: replayed beside it, the client would get it twice.
        let retired = answered(RequestState::Reissued);
        match Guarded::decision(&view(Some(1006), &retired, &ev)) {
            Decision::Reject { reason, invalidate: true, .. } => {
                assert!(reason.contains("retired id req-42"), "{reason}")
            }
            d => panic!("{d:?}"),
        }
        assert!(matches!(Guarded::decision(&view(Some(1007), &retired, &ev)), Decision::Accept { .. }));
        // The orphaning mutant re-issues nothing: it has no such conflict.
        assert!(matches!(
            Mutant(Mutation::Orphaning).decide(&view(Some(1006), &retired, &ev)),
            Decision::Accept { .. }
        ));
        // Resuming from the oldest retained id minus one is inside the window.
        assert!(matches!(Guarded::decision(&view(Some(999), &[], &[])), Decision::Accept { .. }));
    }

    #[test]
    fn guarded_refuses_a_thief_without_killing_the_session() {
        let mut v = view(Some(1000), &[], &[]);
        v.presented = "mallory";
        assert!(matches!(Guarded::decision(&v), Decision::Reject { how: Refusal::Status(403), invalidate: false, .. }));
    }

    #[test]
    fn each_mutant_differs_from_guarded_in_its_one_condition() {
        let ev = [(1007, RpcId::Str("req-42".into()))];
        let reqs = answered(RequestState::Answered);
        let d = |m, v: &ResumeView| decide_guarded(v, Some(m));
        assert!(matches!(
            d(Mutation::NoFence, &view(Some(1007), &[], &[])),
            Decision::Accept { fence_prior: false, .. }
        ));
        assert!(matches!(
            d(Mutation::TruncatingReplay, &view(Some(900), &[], &[])),
            Decision::Accept { replay_from: 1000, .. }
        ));
        assert!(matches!(d(Mutation::AnsweredReplay, &view(Some(1006), &reqs, &ev)), Decision::Accept { .. }));
        assert!(matches!(
            d(Mutation::Orphaning, &view(Some(1007), &[], &[])),
            Decision::Accept { inflight: Inflight::Leave, .. }
        ));
        let mut thief = view(Some(1000), &[], &[]);
        thief.presented = "mallory";
        assert!(matches!(d(Mutation::Unbound, &thief), Decision::Accept { .. }));
        assert!(matches!(
            d(Mutation::InclusiveReplay, &view(Some(1007), &[], &[])),
            Decision::Accept { replay_from: 1007, .. }
        ));
        assert!(matches!(
            d(Mutation::EmptyOk, &view(Some(900), &[], &[])),
            Decision::Reject { how: Refusal::EmptyOk, .. }
        ));
        // ...and agrees with guarded elsewhere.
        for m in Mutation::ALL {
            if m != Mutation::InclusiveReplay && m != Mutation::NoFence && m != Mutation::Orphaning {
                assert_eq!(d(m, &view(Some(1007), &[], &[])), Guarded::decision(&view(Some(1007), &[], &[])), "{m:?}");
            }
        }
    }

    #[test]
    fn naive_accepts_everything_and_truncates() {
        let mut v = view(Some(10), &[], &[]);
        v.presented = "mallory";
        assert_eq!(
            Naive.decide(&v),
            Decision::Accept { fence_prior: false, replay_from: 1000, skip_newest: false, inflight: Inflight::Leave }
        );
    }
}
