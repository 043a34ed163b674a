//! An auto-reset event: a semaphore of at most one permit ([`RawSemaphore`], the protocol is
//! there), released up to 1 by each set.

use core::fmt;
use std::time::{Duration, Instant};

use crate::raw::RawSemaphore;

/// An auto-reset event (Windows' auto-reset event object): a [`set`](AutoResetEvent::set)
/// lets exactly one wait through, now or later, and the event resets as that wait returns.
/// Sets do not add up: a set of a set event changes nothing, as a binary semaphore's post.
/// One futex word (a permit count of 0 or 1 and a waiters bit); std has none.
///
/// ```
/// use futexkit::sync::AutoResetEvent;
/// use std::time::Duration;
///
/// let work_ready = AutoResetEvent::new(false);
/// std::thread::scope(|s| {
///     s.spawn(|| work_ready.set());
///     work_ready.wait(); // consumes the set
/// });
/// assert!(!work_ready.is_set());
/// work_ready.set();
/// work_ready.set(); // no effect: already set
/// assert!(work_ready.wait_timeout(Duration::from_millis(1)));
/// assert!(!work_ready.wait_timeout(Duration::from_millis(1)));
/// ```
pub struct AutoResetEvent {
    raw: RawSemaphore,
}

impl AutoResetEvent {
    crate::futex::sys::const_fn! {
        /// An event, set or not as `set` says.
        #[must_use]
        pub const fn new(set: bool) -> AutoResetEvent {
            AutoResetEvent {
                raw: RawSemaphore::new(set as u32),
            }
        }
    }

    /// Sets the event: one waiting thread returns (and resets it), or, if none waits, the next
    /// wait returns at once. What this thread did before happens before that wait returns.
    pub fn set(&self) {
        self.raw.release_up_to(1, 1);
    }

    /// Resets the event without waiting; returns whether it was set.
    pub fn reset(&self) -> bool {
        self.raw.try_acquire()
    }

    /// Blocks until the event is set, and resets it.
    pub fn wait(&self) {
        self.raw.acquire();
    }

    /// As [`wait`](AutoResetEvent::wait), giving up after about `timeout`; returns whether it
    /// consumed a set.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.raw.try_acquire_for(timeout)
    }

    /// As [`wait`](AutoResetEvent::wait), giving up at `deadline`; returns whether it
    /// consumed a set.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.raw.try_acquire_until(deadline)
    }

    /// Whether the event is set now.
    pub fn is_set(&self) -> bool {
        self.raw.available() != 0
    }
}

impl Default for AutoResetEvent {
    /// A reset event.
    fn default() -> AutoResetEvent {
        AutoResetEvent::new(false)
    }
}

impl fmt::Debug for AutoResetEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AutoResetEvent")
            .field("set", &self.is_set())
            .finish()
    }
}
