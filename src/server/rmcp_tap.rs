//! The ids rmcp mints into a stream that no one reads.
//!
//! rmcp numbers each stream's events in its session worker
//! (`CachedTx::next_event_id`), caches the last 16 for replay, and sends each
//! to the stream's channel. When the client's stream is gone (the server saw
//! the close), the send fails and the event lives only in the cache; when 16
//! newer ones follow, it is evicted before any socket carried it. The
//! application cannot see those ids, and no socket shows them, so a replay
//! that starts after them would look whole.
//!
//! rmcp says which: a failed send logs `trying to send message in a closed
//! session` (TRACE, field `event_id`) inside the session worker's span
//! `streamable_http_session` (field `id`, the session id). This subscriber,
//! installed as the thread's default for the length of a run, listens to that
//! event and nothing else (every other callsite is `Interest::never`), and
//! hands `(session, event id)` to the plug, which reports the ids as minted
//! on that session ([`crate::server::plug::AppReporter::notified_on`]).
//!
//! It is tied to the pinned rmcp (3.11.0): `scenarios/streamable-http/retention-overflow.toml`
//! fails its expectation on rmcp if the log line ever changes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// The module of rmcp whose session worker mints stream ids.
const TARGET: &str = "rmcp::transport::streamable_http_server::session::local";
/// The span its session worker runs in.
const SESSION_SPAN: &str = "streamable_http_session";
/// The words of the log line for an event sent to a closed stream.
const CLOSED_SEND: &str = "trying to send message in a closed session";

/// An event id rmcp minted into a closed stream, and its session.
pub(super) type Mint = (String, String);

/// Listens for rmcp's closed-stream sends; see the module docs.
pub(super) struct ClosedSends {
    next: AtomicU64,
    /// Session ids of the worker spans, by span id (kept for the run: a
    /// span may be cloned, and a run has a handful of sessions).
    sessions: Mutex<Vec<(u64, String)>>,
    /// The spans entered, innermost last (one thread: a run's).
    entered: Mutex<Vec<u64>>,
    sink: Box<dyn Fn(Mint) + Send + Sync>,
}

impl ClosedSends {
    pub(super) fn new(sink: impl Fn(Mint) + Send + Sync + 'static) -> Self {
        Self { next: AtomicU64::new(1), sessions: Mutex::default(), entered: Mutex::default(), sink: Box::new(sink) }
    }

    fn wanted(meta: &Metadata<'_>) -> bool {
        meta.target() == TARGET
            && ((meta.is_span() && meta.name() == SESSION_SPAN)
                || (meta.is_event() && meta.fields().field("event_id").is_some()))
    }
}

/// Reads one string field (a `Debug` rendering for anything but `&str`).
struct Fields {
    want: &'static str,
    got: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == self.want {
            self.got = Some(value.to_string());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == self.want {
            self.got = Some(format!("{value:?}"));
        }
    }
}

fn field(want: &'static str, visit: impl FnOnce(&mut Fields)) -> Option<String> {
    let mut f = Fields { want, got: None };
    visit(&mut f);
    f.got
}

/// `Some("12")` (the `Debug` of rmcp's `Option<String>`) as `12`.
fn event_id(debug: &str) -> Option<String> {
    let inner = debug.strip_prefix("Some(")?.strip_suffix(')')?;
    let id: String = serde_json::from_str(inner).ok()?;
    Some(id)
}

impl Subscriber for ClosedSends {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wanted(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        Self::wanted(meta)
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some(session) = field("id", |f| span.record(f)) {
            self.sessions.lock().expect("tap lock").push((id, session));
        }
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if field("message", |f| event.record(f)).as_deref() != Some(CLOSED_SEND) {
            return;
        }
        let Some(id) = field("event_id", |f| event.record(f)).as_deref().and_then(event_id) else { return };
        let Some(span) = self.entered.lock().expect("tap lock").last().copied() else { return };
        let session = self.sessions.lock().expect("tap lock").iter().find(|(s, _)| *s == span).map(|(_, x)| x.clone());
        if let Some(session) = session {
            (self.sink)((session, id));
        }
    }
    fn enter(&self, span: &Id) {
        self.entered.lock().expect("tap lock").push(span.into_u64());
    }
    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().expect("tap lock");
        if let Some(p) = entered.iter().rposition(|s| *s == span.into_u64()) {
            entered.remove(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::event_id;

    #[test]
    fn reads_the_debug_of_an_optional_id() {
        assert_eq!(event_id(r#"Some("12")"#).as_deref(), Some("12"));
        assert_eq!(event_id(r#"Some("3/1")"#).as_deref(), Some("3/1"));
        assert_eq!(event_id("None"), None);
    }
}
