//! [`SharedEvent`]: a process-shared manual-reset event, over [`RawEvent`] (the protocol is
//! there) on a futex word that is not process-private.

use core::fmt;
use std::time::{Duration, Instant};

use crate::futex::{Deadline, Shared};
use crate::raw::RawEvent;

/// A manual-reset event that threads of several processes set, reset and wait for (one futex
/// word, `#[repr(C)]`): as [`sync::Event`](crate::sync::Event), a set releases every thread
/// waiting then. A peer that scribbles the word can set or reset it, never hang a timed wait
/// past its deadline.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().event("config_ready", false).build()?;
/// let ready = region.event("config_ready")?;
/// std::thread::scope(|s| {
///     s.spawn(|| ready.set());
///     ready.wait();
/// });
/// assert!(ready.is_set());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedEvent {
    raw: RawEvent<Shared>,
}

impl SharedEvent {
    /// An event, set or not as `set` says, to be placed in shared memory by the caller (a
    /// [`Region`](crate::shared::Region) does this for you).
    pub fn new(set: bool) -> SharedEvent {
        SharedEvent {
            raw: RawEvent::shared(set),
        }
    }

    /// Uses the event at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`SharedLatch::from_ptr`](crate::shared::SharedLatch::from_ptr), for a
    /// `SharedEvent`.
    pub unsafe fn from_ptr<'a>(ptr: *const SharedEvent) -> &'a SharedEvent {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Sets the event, releasing every waiter; it stays set until [`reset`](Self::reset).
    pub fn set(&self) {
        self.raw.set();
    }

    /// Resets the event: later waits block until the next [`set`](Self::set).
    pub fn reset(&self) {
        self.raw.reset();
    }

    /// Blocks until the event is set (or was set since this wait began).
    pub fn wait(&self) {
        self.raw.wait(None);
    }

    /// As [`wait`](Self::wait), giving up after about `timeout`; returns whether it was set.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.raw.wait(Some(Deadline::after(timeout)))
    }

    /// As [`wait`](Self::wait), giving up at `deadline`; returns whether it was set.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.raw.wait(Some(Deadline::at(deadline)))
    }

    /// Whether the event is set now.
    pub fn is_set(&self) -> bool {
        self.raw.is_set()
    }
}

impl fmt::Debug for SharedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedEvent")
            .field("set", &self.is_set())
            .finish()
    }
}
