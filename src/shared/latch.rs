//! [`SharedLatch`]: a process-shared count down to zero, over [`RawLatch`] (the protocol is
//! there) on a futex word that is not process-private.

use core::fmt;
use std::time::{Duration, Instant};

use crate::futex::{Deadline, Shared};
use crate::raw::{LatchOpen, RawLatch};

/// A count down to zero that threads of several processes wait for (one futex word,
/// `#[repr(C)]`). Nothing here knows who will count down: a process that dies before its
/// count-down leaves the latch closed, so wait with a deadline where that can happen. A peer
/// that scribbles the word can open or close it, never hang a timed wait past its deadline.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().latch("loaded", 2).build()?;
/// let loaded = region.latch("loaded")?;
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| loaded.count_down().unwrap());
///     }
///     loaded.wait();
/// });
/// assert!(loaded.count_down().is_err(), "open already");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedLatch {
    raw: RawLatch<Shared>,
}

impl SharedLatch {
    /// A latch that opens after `count` count-downs, to be placed in shared memory by the
    /// caller (a [`Region`](crate::shared::Region) does this for you).
    ///
    /// # Panics
    ///
    /// If `count` is above [`MAX_LATCH_COUNT`](crate::raw::MAX_LATCH_COUNT).
    pub fn new(count: u32) -> SharedLatch {
        SharedLatch {
            raw: RawLatch::shared(count),
        }
    }

    /// Uses the latch at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// `ptr` must be 4-aligned and point to a `SharedLatch` in memory that stays mapped,
    /// readable and writable for `'a` and until every call on it has returned, and that every
    /// process accesses only through a `SharedLatch` or atomically. Another process may write
    /// any value into it (calls then fail, return early or wait until their deadline).
    pub unsafe fn from_ptr<'a>(ptr: *const SharedLatch) -> &'a SharedLatch {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Counts down by one; the count-down that reaches 0 releases every waiter.
    ///
    /// # Errors
    ///
    /// [`LatchOpen`] if the latch is open already (nothing changes then).
    pub fn count_down(&self) -> Result<(), LatchOpen> {
        self.raw.try_count_down()
    }

    /// Blocks until the count is 0.
    pub fn wait(&self) {
        self.raw.wait(None);
    }

    /// As [`wait`](Self::wait), giving up after about `timeout`; returns whether it opened.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.raw.wait(Some(Deadline::after(timeout)))
    }

    /// As [`wait`](Self::wait), giving up at `deadline`; returns whether it opened.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.raw.wait(Some(Deadline::at(deadline)))
    }

    /// The count-downs still to come (0: open).
    pub fn count(&self) -> u32 {
        self.raw.count()
    }
}

impl fmt::Debug for SharedLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLatch")
            .field("count", &self.count())
            .finish()
    }
}
