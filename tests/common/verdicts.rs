//! Reading verdicts in tests: one check's verdict, its headlines, and
//! assertions that it fired (with evidence) or stayed quiet.

use mcpsim::check::Verdict;

/// The verdict of check `id`.
pub fn verdict<'a>(verdicts: &'a [Verdict], id: &str) -> &'a Verdict {
    verdicts.iter().find(|v| v.check == id).unwrap()
}

/// The headlines of check `id`'s violations.
pub fn headlines(verdicts: &[Verdict], id: &str) -> Vec<String> {
    verdict(verdicts, id).violations().iter().map(|v| v.headline()).collect()
}

/// Check `id` fired with a headline that says every one of `says`, and
/// every violation has evidence.
pub fn fires(verdicts: &[Verdict], id: &str, says: &[&str]) {
    let h = headlines(verdicts, id);
    assert!(h.iter().any(|h| says.iter().all(|s| h.contains(s))), "{id}: none of {h:?} says {says:?}");
    assert!(verdict(verdicts, id).violations().iter().all(|v| !v.evidence.is_empty()));
}

/// Check `id` found nothing.
pub fn quiet(verdicts: &[Verdict], id: &str) {
    assert!(headlines(verdicts, id).is_empty(), "{id}: {:?}", headlines(verdicts, id));
}
