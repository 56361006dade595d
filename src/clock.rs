//! Time as actors see it, in scenario units.
//!
//! In a simulation every host runs on turmoil's virtual clock (tokio's
//! paused clock inside the host), and scenario time *is* that clock: every
//! function here passes durations through unchanged.
//!
//! A live run (`mcpsim run --live`) plays the scenario on the wall clock,
//! optionally faster or slower: with time scale `F`, a scenario second lasts
//! `F` real seconds. The live runner calls [`go_live`] on its thread, and
//! from then on [`sleep`], [`timeout`] and [`Stamp`] stretch scenario
//! durations into real ones and [`now`] reads the wall clock back in scenario
//! time, so clients, NATs and the step loop keep thinking in the plan's
//! units and the trace reads like a simulated one.
//!
//! Invariant: with no live clock set, nothing here reads the wall clock or
//! rounds a duration (the determinism contract).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// The wall clock of a live run: when it started and its time scale.
#[derive(Clone, Copy, Debug)]
struct Live {
    start: Instant,
    scale: f64,
}

thread_local! {
    static LIVE: Cell<Option<Live>> = const { Cell::new(None) };
}

fn live() -> Option<Live> {
    LIVE.with(Cell::get)
}

/// Makes this thread's clock the wall clock from now on, with `scale` real
/// seconds per scenario second, until the returned guard is dropped.
pub fn go_live(scale: f64) -> LiveClock {
    assert!(scale > 0.0 && scale.is_finite(), "time scale must be positive");
    LIVE.with(|l| l.set(Some(Live { start: Instant::now(), scale })));
    LiveClock { _private: () }
}

/// Like [`go_live`], with scenario time 0 at `start` (a live deployment's
/// replicas share the run's origin, so that a time one of them writes into
/// a state means the same to the others).
pub fn go_live_since(start: Instant, scale: f64) -> LiveClock {
    assert!(scale > 0.0 && scale.is_finite(), "time scale must be positive");
    LIVE.with(|l| l.set(Some(Live { start, scale })));
    LiveClock { _private: () }
}

/// Keeps a thread's live clock set; dropping it returns the thread to
/// simulated time.
pub struct LiveClock {
    _private: (),
}

impl Drop for LiveClock {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(None));
    }
}

/// Scenario time since the run started: the executing host's simulated
/// clock, or the scaled wall clock in a live run. `None` outside both (the
/// step loop of a simulation, between hosts).
pub fn now() -> Option<Duration> {
    match live() {
        None => turmoil::sim_elapsed(),
        Some(l) => Some(l.start.elapsed().div_f64(l.scale)),
    }
}

/// How long a scenario duration lasts on the runtime's clock.
pub fn to_real(d: Duration) -> Duration {
    match live() {
        None => d,
        Some(l) => d.mul_f64(l.scale),
    }
}

/// A real duration in scenario units.
fn to_scenario(d: Duration) -> Duration {
    match live() {
        None => d,
        Some(l) => d.div_f64(l.scale),
    }
}

/// When a wait of `d` from now ends, in scenario time (`None` outside a host).
fn ends_at(d: Duration) -> Option<Duration> {
    now().map(|n| n + d)
}

/// Sleeps for a scenario duration.
pub async fn sleep(d: Duration) {
    let _pending = crate::quiet::register(ends_at(d), crate::quiet::Kind::Plain);
    tokio::time::sleep(to_real(d)).await
}

/// Bounds `fut` by a scenario duration.
pub async fn timeout<F: Future>(d: Duration, fut: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    let _pending = crate::quiet::register(ends_at(d), crate::quiet::Kind::Plain);
    tokio::time::timeout(to_real(d), fut).await
}

/// [`sleep`], registered with what it does when it ends (see
/// [`crate::quiet`]: a keep-alive does not keep a simulation running).
pub(crate) fn sleep_as(d: Duration, kind: crate::quiet::Kind) -> impl Future<Output = ()> {
    let pending = crate::quiet::register(ends_at(d), kind);
    let sleep = tokio::time::sleep(to_real(d));
    async move {
        let _pending = pending;
        sleep.await
    }
}

/// [`timeout`], registered with what it does when it fires (a client's
/// silence watchdog is [`crate::quiet::Kind::Watchdog`]).
pub(crate) fn timeout_as<F: Future>(
    d: Duration,
    kind: crate::quiet::Kind,
    fut: F,
) -> impl Future<Output = Result<F::Output, tokio::time::error::Elapsed>> {
    let pending = crate::quiet::register(ends_at(d), kind);
    let timeout = tokio::time::timeout(to_real(d), fut);
    async move {
        let _pending = pending;
        timeout.await
    }
}

/// hyper's timer (its servers' header-read timeout), on the runtime's clock
/// as hyper-util's `TokioTimer`, with each wait registered as plain in
/// [`crate::quiet`]: an idle connection that hyper will close keeps a
/// simulation running.
#[derive(Clone, Copy, Debug, Default)]
pub struct HyperTimer;

/// One of [`HyperTimer`]'s waits.
struct HyperSleep {
    inner: Pin<Box<tokio::time::Sleep>>,
    _pending: Option<crate::quiet::Guard>,
}

impl Future for HyperSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.inner.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep {
            inner: Box::pin(tokio::time::sleep(duration)),
            _pending: crate::quiet::register(ends_at(duration), crate::quiet::Kind::Plain),
        })
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let deadline = tokio::time::Instant::from_std(deadline);
        let after = deadline.saturating_duration_since(tokio::time::Instant::now());
        Box::pin(HyperSleep {
            inner: Box::pin(tokio::time::sleep_until(deadline)),
            _pending: crate::quiet::register(ends_at(after), crate::quiet::Kind::Plain),
        })
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// A point in time on the runtime's clock, measured in scenario units.
#[derive(Clone, Copy, Debug)]
pub struct Stamp(tokio::time::Instant);

impl Stamp {
    /// Now.
    pub fn now() -> Self {
        Stamp(tokio::time::Instant::now())
    }

    /// Scenario time since this stamp.
    pub fn elapsed(&self) -> Duration {
        to_scenario(self.0.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_live_clock_durations_pass_unchanged() {
        let d = Duration::new(12, 345_678_901);
        assert_eq!(to_real(d), d);
        assert_eq!(to_scenario(d), d);
        assert_eq!(now(), None);
    }

    #[test]
    fn a_live_clock_scales_both_ways_and_resets() {
        {
            let _live = go_live(0.1);
            assert_eq!(to_real(Duration::from_secs(10)), Duration::from_secs(1));
            assert_eq!(to_scenario(Duration::from_secs(1)), Duration::from_secs(10));
            assert!(now().is_some());
        }
        assert_eq!(to_real(Duration::from_secs(10)), Duration::from_secs(10));
    }
}
