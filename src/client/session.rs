//! What sets the two stateful dialects apart on the client's side, behind
//! one small interface: how a session opens, where a stream and a POST go,
//! what a refused or ended uplink means. legacy-sse ([`super::legacy`]) and
//! streamable-http ([`super::streamable`]) each implement it once; the
//! client's stream and connection code ask it and never name a dialect.
//! (stateless-http has no sessions: it is a client of its own,
//! [`super::stateless`].)

use super::Mode;
use crate::wire::sse::Event;

/// What an uplink GET answered with something other than a 200 event stream means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UplinkRefusal {
    /// The session is gone: open a new one.
    SessionGone,
    /// The server offers no stream of this kind: stop asking.
    NoStream,
    /// Anything else: a refused resumption, or a failure to retry.
    Other,
}

/// A stateful dialect, as the client speaks it.
pub(super) trait SessionWire {
    /// Whether a fresh uplink first opens its session by POST (`initialize`).
    fn opens_by_post(&self) -> bool;

    /// Whether an uplink GET of `mode` is a resumption (so that a refusal
    /// of it is one to record).
    fn is_resumption(&self, mode: &Mode) -> bool;

    /// Whether an uplink that failed (no connection, no answer, an error
    /// status) is retried as a fresh one.
    fn retries_fresh(&self, resuming: bool) -> bool;

    /// Where an uplink GET of `mode` goes: its path, the session header it
    /// carries, and its `Last-Event-ID`.
    fn uplink_target(&self, mode: &Mode) -> (String, Option<String>, Option<String>);

    /// Where a POST in session `token` goes, and the session header it carries.
    fn post_target(&self, token: Option<&str>) -> (String, Option<String>);

    /// Whether a POST accepts an SSE answer (`Accept: application/json, text/event-stream`).
    fn post_accepts_sse(&self) -> bool;

    /// What an uplink answered with `status` (not a 200 event stream) means.
    fn uplink_refusal(&self, status: u16) -> UplinkRefusal;

    /// Whether a resumption answered by a stream that ends with nothing in
    /// it was refused (legacy-sse); otherwise a server may close any stream
    /// and the client polls again (streamable-http's SSE polling).
    fn empty_resumption_is_refusal(&self) -> bool;

    /// Whether the server names the session in an `endpoint` event.
    fn has_endpoint_event(&self) -> bool;

    /// The session token an uplink event names, if it is an `endpoint` event.
    fn endpoint_token<'a>(&self, ev: &'a Event) -> Option<&'a str> {
        (self.has_endpoint_event() && ev.event == "endpoint")
            .then(|| crate::wire::legacy::session_token(&ev.data))
            .flatten()
    }
}
