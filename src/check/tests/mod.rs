//! Each check on hand-built traces (`super::testkit`): for every check, a
//! trace that makes it fire and the smallest change that keeps it quiet, so
//! a reader sees which events decide a verdict. The bundled scenarios
//! (`tests/checks.rs`) show the same on real runs.

use super::testkit::Tb;
use super::{judge, CheckId, Status, Verdict};
use crate::trace::Trace;

mod confidentiality;
mod correlation_consistency;
mod inflight_disposition;
mod liveness;
mod protocol;
mod rejection_protocol;
mod replay_integrity;
mod session_binding;
mod stateless;
mod stream_order;

/// The verdict of check `id` on `trace`.
fn verdict(trace: &Trace, id: CheckId) -> Status {
    judge(trace).into_iter().find(|v: &Verdict| v.check == id).expect("every check judges").status
}

/// The headlines of `id`'s violations (empty: it passed or did not apply).
fn headlines(trace: &Trace, id: CheckId) -> Vec<String> {
    match verdict(trace, id) {
        Status::Violated { violations } => violations.into_iter().map(|v| v.headline()).collect(),
        _ => Vec::new(),
    }
}

/// Whether `id` passed (judged, nothing wrong).
fn passed(trace: &Trace, id: CheckId) -> bool {
    matches!(verdict(trace, id), Status::Passed)
}

/// alice held 1001 (the newest id) when her uplink ended at 10 s; she
/// resumes from 1009, an id her session never minted, on conn 2; the
/// answer comes at 10.1 s.
fn resume_from_an_unminted_id() -> Tb {
    Tb::new(60)
        .client("alice")
        .uplink("alice", 1, "tok-1")
        .at(200)
        .notes("alice", 1, &["1001"])
        .at(10_000)
        .ended("alice", 1, "closed by the server")
        .resume("alice", 2, "tok-1", Some("1009"))
        .at(10_100)
}
