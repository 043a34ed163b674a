//! The counting semaphore protocol: a futex word of free permits and a count of sleepers.
//! `futexkit::sync::Semaphore` is this with RAII permits.
//!
//! ## State
//!
//! | field | meaning | set by | cleared by |
//! |-------|---------|--------|------------|
//! | `permits` (the futex word) | permits free now | a release adds its permits (one read-modify-write) | an acquire takes one (a CAS from a value above 0) |
//! | `sleepers` | threads counted as about to sleep on `permits`, or asleep | a waiter adds itself before its last look at `permits` | the same waiter, once it took a permit or gave up |
//!
//! Invariant, **no lost wakeup**: a thread sleeps only on `permits == 0`, and only after
//! counting itself in `sleepers`; a release adds to `permits` and then reads `sleepers`. Both
//! sides touch `sleepers` with an acquire-release read-modify-write (the release adds 0, as the
//! Condvar's notify does), so the two are ordered in `sleepers`' modification order and each
//! reads the latest value. If the release's comes second, it sees the waiter counted and wakes
//! as many threads as it added permits. If the waiter's comes second, it synchronizes with the
//! release's, so the release's add to `permits` happens before the waiter's look at `permits`
//! (and the kernel's compare in its `FUTEX_WAIT`), which sees the permits. A woken thread looks at `permits` before it minds its
//! deadline, so a wake is never spent on a thread that then leaves a permit behind for a
//! sleeper nobody wakes. A woken thread that finds the permits taken by one that never slept
//! sleeps again: that thread's own release will wake again. No order among waiters is
//! promised.
//!
//! ## Transitions
//!
//! * **acquire**: CAS `permits` from `p > 0` to `p - 1`. Else spin while `permits` is 0 (the
//!   lock waiter's rule, [`SpinWait`]), then count itself in `sleepers` and, until it has a
//!   permit: take one if `permits > 0`, else sleep on `permits == 0` (giving up if its deadline
//!   has passed); then take itself out of `sleepers`.
//! * **release(n)**: add `n` to `permits` (refusing to pass `u32::MAX`); if `sleepers` is not 0,
//!   wake `n` threads. **release_up_to(n, max)** adds as many of the `n` as keep `permits` at
//!   most `max` (one read-modify-write, or none when it adds nothing) and wakes that many: an
//!   auto-reset event is a semaphore released up to 1.

use core::fmt;
use std::time::{Duration, Instant};

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Deadline, Futex};
use crate::spin::SpinWait;

/// A counting semaphore: a futex word of free permits and a count of sleepers. Its protocol
/// and state table are at the top of `src/raw/semaphore.rs`.
///
/// ```
/// use futexkit::raw::RawSemaphore;
///
/// let slots = RawSemaphore::new(1);
/// slots.acquire();
/// assert!(!slots.try_acquire(), "the one permit is taken");
/// slots.release(1);
/// assert!(slots.try_acquire());
/// ```
pub struct RawSemaphore {
    permits: Futex,
    sleepers: AtomicU32,
}

impl fmt::Debug for RawSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawSemaphore")
            .field("permits", &self.available())
            .finish_non_exhaustive()
    }
}

impl RawSemaphore {
    crate::futex::sys::const_fn! {
        /// A semaphore with `permits` free permits.
        #[must_use]
        pub const fn new(permits: u32) -> RawSemaphore {
            RawSemaphore {
                permits: Futex::new(permits),
                sleepers: AtomicU32::new(0),
            }
        }
    }

    /// Blocks until this thread has taken a permit.
    pub fn acquire(&self) {
        if !self.try_acquire() {
            self.acquire_contended(None);
        }
    }

    /// Takes a permit if one is free now; returns whether it did.
    pub fn try_acquire(&self) -> bool {
        let mut permits = self.permits.load(Ordering::Relaxed);
        while permits > 0 {
            match self.permits.compare_exchange_weak(
                permits,
                permits - 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => permits = now,
            }
        }
        false
    }

    /// Blocks until this thread has taken a permit or `deadline` passes; returns whether it
    /// took one.
    pub fn try_acquire_until(&self, deadline: Instant) -> bool {
        self.try_acquire() || self.acquire_contended(Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread has taken a permit or `timeout` passes; returns whether it
    /// took one.
    pub fn try_acquire_for(&self, timeout: Duration) -> bool {
        self.try_acquire() || self.acquire_contended(Some(Deadline::after(timeout)))
    }

    /// Adds `n` permits, waking up to `n` sleeping acquirers.
    ///
    /// # Panics
    ///
    /// If the free permits would pass `u32::MAX` (the count is left as it was).
    pub fn release(&self, n: u32) {
        if n == 0 {
            return;
        }
        if self
            .permits
            .fetch_update(Ordering::Release, Ordering::Relaxed, |p| p.checked_add(n))
            .is_err()
        {
            panic!("a semaphore holds at most u32::MAX free permits");
        }
        self.wake_for(n);
    }

    /// Adds as many of `n` permits as keep the free permits at most `max`, waking as many
    /// sleeping acquirers as it added; returns how many it added.
    ///
    /// ```
    /// use futexkit::raw::RawSemaphore;
    ///
    /// let signal = RawSemaphore::new(0);
    /// assert_eq!(signal.release_up_to(1, 1), 1);
    /// assert_eq!(signal.release_up_to(1, 1), 0, "already at its maximum");
    /// assert_eq!(signal.available(), 1);
    /// ```
    pub fn release_up_to(&self, n: u32, max: u32) -> u32 {
        let mut added = 0;
        let _ = self
            .permits
            .fetch_update(Ordering::Release, Ordering::Relaxed, |p| {
                added = n.min(max.saturating_sub(p));
                (added > 0).then(|| p + added)
            });
        self.wake_for(added);
        added
    }

    /// After `added` permits went into `permits`: wake as many sleepers, if any is counted.
    fn wake_for(&self, added: u32) {
        if added > 0 && self.sleepers.fetch_add(0, Ordering::AcqRel) != 0 {
            let _ = self.permits.wake(added);
        }
    }

    /// The permits free now (another thread may take or add some at any moment).
    pub fn available(&self) -> u32 {
        self.permits.load(Ordering::Relaxed)
    }

    /// The slow path of an acquire: spin, then sleep counted in `sleepers`.
    #[cold]
    fn acquire_contended(&self, deadline: Option<Deadline>) -> bool {
        let mut spin = SpinWait::new();
        while self.permits.load(Ordering::Relaxed) == 0 && spin.spin() {}
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        let taken = loop {
            let permits = self.permits.load(Ordering::Relaxed);
            if permits > 0 {
                if self
                    .permits
                    .compare_exchange_weak(
                        permits,
                        permits - 1,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    break true;
                }
                continue;
            }
            if deadline.is_some_and(|d| d.has_passed()) {
                break false;
            }
            // Woken, timed out, spuriously, or the word changed: look again first.
            let _ = self.permits.wait(0, deadline);
        };
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        taken
    }
}
