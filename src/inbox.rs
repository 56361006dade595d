//! A command inbox between the step loop and an actor inside a host.
//!
//! The step loop runs outside every host's runtime, so it cannot spawn or
//! await there; it pushes commands, and the actor's own task pops them on its
//! next tick. Single-threaded, like the simulation.
//!
//! A command may carry a due time: the actor waits until then on its own
//! clock, so a step fires at its exact simulated time even though the step
//! loop only runs between ticks.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;

/// Queued commands with their optional due times, and the wake-up.
type Queue<T> = Rc<(RefCell<VecDeque<(Option<Duration>, T)>>, Notify)>;

/// A queue of commands for one actor; clones share the queue.
pub struct Inbox<T> {
    inner: Queue<T>,
}

impl<T> Clone for Inbox<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Self { inner: Rc::new((RefCell::new(VecDeque::new()), Notify::new())) }
    }
}

impl<T> Inbox<T> {
    /// An empty inbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a command to act on now.
    pub fn push(&self, cmd: T) {
        self.inner.0.borrow_mut().push_back((None, cmd));
        self.inner.1.notify_one();
    }

    /// Queues a command to act on at simulated time `due`.
    pub fn push_at(&self, due: Duration, cmd: T) {
        self.inner.0.borrow_mut().push_back((Some(due), cmd));
        self.inner.1.notify_one();
    }

    /// Waits for the next command, and for its due time.
    pub async fn recv(&self) -> T {
        loop {
            let next = self.inner.0.borrow_mut().pop_front();
            if let Some((due, cmd)) = next {
                if let (Some(due), Some(now)) = (due, crate::clock::now()) {
                    if due > now {
                        crate::clock::sleep(due - now).await;
                    }
                }
                return cmd;
            }
            self.inner.1.notified().await;
        }
    }

    /// Drops queued commands (a crashed actor forgets them).
    pub fn clear(&self) {
        self.inner.0.borrow_mut().clear();
    }
}
