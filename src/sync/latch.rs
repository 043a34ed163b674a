//! A count-down latch over [`RawLatch`] (the protocol is there).

use core::fmt;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::RawLatch;

/// A count down to zero that threads wait for (C++'s `std::latch`, Java's `CountDownLatch`):
/// made with a count, counted down once by each of that many events, open for good once it
/// reaches zero. One futex word; std has none.
///
/// ```
/// use futexkit::sync::Latch;
///
/// let loaded = Latch::new(3);
/// let parts = std::sync::Mutex::new(Vec::new());
/// std::thread::scope(|s| {
///     for part in 0..3 {
///         let (loaded, parts) = (&loaded, &parts);
///         s.spawn(move || {
///             parts.lock().unwrap().push(part);
///             loaded.count_down();
///         });
///     }
///     loaded.wait(); // every part is in by now
///     assert_eq!(parts.lock().unwrap().len(), 3);
/// });
/// ```
pub struct Latch {
    raw: RawLatch,
}

impl Latch {
    crate::futex::sys::const_fn! {
        /// A latch that opens after `count` count-downs (at once, if `count` is 0).
        ///
        /// # Panics
        ///
        /// If `count` is above 2^31 - 1.
        #[must_use]
        pub const fn new(count: u32) -> Latch {
            Latch {
                raw: RawLatch::new(count),
            }
        }
    }

    /// Counts down by one; the count-down that reaches zero releases every waiter. What this
    /// thread did before it happens before any wait that finds the latch open returns.
    ///
    /// # Panics
    ///
    /// If the latch is open already (more count-downs than it was made for).
    pub fn count_down(&self) {
        self.raw.count_down();
    }

    /// Counts down by one and waits for the latch to open (C++'s `arrive_and_wait`).
    ///
    /// # Panics
    ///
    /// As [`count_down`](Latch::count_down).
    pub fn count_down_and_wait(&self) {
        self.raw.count_down();
        self.wait();
    }

    /// Blocks until the latch is open.
    pub fn wait(&self) {
        self.raw.wait(None);
    }

    /// Blocks until the latch is open or about `timeout` has passed; returns whether it is
    /// open.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.raw.wait(Some(Deadline::after(timeout)))
    }

    /// Blocks until the latch is open or `deadline` has passed; returns whether it is open.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.raw.wait(Some(Deadline::at(deadline)))
    }

    /// Whether the latch is open now (C++'s `try_wait`).
    pub fn is_open(&self) -> bool {
        self.raw.count() == 0
    }

    /// The count-downs still to come.
    pub fn count(&self) -> u32 {
        self.raw.count()
    }
}

impl fmt::Debug for Latch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Latch")
            .field("count", &self.count())
            .finish()
    }
}
