//! The client's `legacy-sse` side: the uplink is `GET /mcp/sse`, whose
//! `endpoint` event names the session; messages go to that endpoint; a
//! resumption is a GET of `/mcp/sse?sessionId=…` with `Last-Event-ID`.

use super::session::{SessionWire, UplinkRefusal};
use super::Mode;
use crate::wire::legacy;

/// legacy-sse, as the client speaks it.
pub(super) struct Legacy;

impl SessionWire for Legacy {
    fn opens_by_post(&self) -> bool {
        false
    }

    fn is_resumption(&self, mode: &Mode) -> bool {
        matches!(mode, Mode::Resume { .. })
    }

    fn retries_fresh(&self, resuming: bool) -> bool {
        !resuming
    }

    fn uplink_target(&self, mode: &Mode) -> (String, Option<String>, Option<String>) {
        match mode {
            Mode::Fresh => (legacy::SSE_PATH.to_string(), None, None),
            Mode::Resume { token, last_event_id } => (legacy::sse_path(token), None, last_event_id.clone()),
        }
    }

    fn post_target(&self, token: Option<&str>) -> (String, Option<String>) {
        match token {
            Some(token) => (legacy::messages_path(token), None),
            // (Never sent: a legacy-sse client posts only in a session.)
            None => (legacy::MESSAGES_PATH.to_string(), None),
        }
    }

    fn post_accepts_sse(&self) -> bool {
        false
    }

    fn uplink_refusal(&self, _status: u16) -> UplinkRefusal {
        UplinkRefusal::Other
    }

    fn empty_resumption_is_refusal(&self) -> bool {
        true
    }

    fn has_endpoint_event(&self) -> bool {
        true
    }
}
