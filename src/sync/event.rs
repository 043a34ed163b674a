//! A manual-reset event over [`RawEvent`] (the protocol is there).

use core::fmt;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::RawEvent;

/// A manual-reset event (Windows' manual-reset event object, an eventfd used as a flag): `set`
/// releases every thread waiting and lets later waits through until `reset`. A set releases the
/// threads waiting at that moment even if a reset follows before they run. One futex word;
/// std has none.
///
/// ```
/// use futexkit::sync::Event;
///
/// let started = Event::new(false);
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         // ... start up ...
///         started.set();
///     });
///     started.wait();
/// });
/// assert!(started.is_set());
/// started.reset();
/// assert!(!started.wait_timeout(std::time::Duration::from_millis(1)));
/// ```
pub struct Event {
    raw: RawEvent,
}

impl Event {
    crate::futex::sys::const_fn! {
        /// An event, set or not as `set` says.
        #[must_use]
        pub const fn new(set: bool) -> Event {
            Event {
                raw: RawEvent::new(set),
            }
        }
    }

    /// Sets the event, releasing every waiter; a set event stays set until
    /// [`reset`](Event::reset). What this thread did before happens before the waits it ends
    /// return.
    pub fn set(&self) {
        self.raw.set();
    }

    /// Resets the event: later waits block until the next [`set`](Event::set).
    pub fn reset(&self) {
        self.raw.reset();
    }

    /// Blocks until the event is set (or was set since this wait began).
    pub fn wait(&self) {
        self.raw.wait(None);
    }

    /// As [`wait`](Event::wait), giving up after about `timeout`; returns whether it was set.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.raw.wait(Some(Deadline::after(timeout)))
    }

    /// As [`wait`](Event::wait), giving up at `deadline`; returns whether it was set.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.raw.wait(Some(Deadline::at(deadline)))
    }

    /// Whether the event is set now.
    pub fn is_set(&self) -> bool {
        self.raw.is_set()
    }
}

impl Default for Event {
    /// A reset event.
    fn default() -> Event {
        Event::new(false)
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("set", &self.is_set())
            .finish()
    }
}
