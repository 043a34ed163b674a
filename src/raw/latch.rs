//! The latch protocol (a count down to zero that waiters wait for), on one futex word.
//! `futexkit::sync::Latch` is this with `Duration` and `Instant` waits.
//!
//! ## State
//!
//! | field     | bits | meaning | set by | cleared by |
//! |-----------|------|---------|--------|------------|
//! | count     | 0-30 | count-downs still to come; 0: open for good | `new` | each count-down takes 1 |
//! | `WAITERS` | 31   | a waiter sleeps on the word, or is about to | a waiter, by CAS, before it sleeps | the count-down that reaches 0 (which then wakes all) |
//!
//! Invariant, **no lost wakeup**: a waiter sleeps only on a value with `WAITERS` set and a
//! count above 0, and the count-down that takes the count to 0 replaces that value (both are
//! read-modify-writes of the one word): if the waiter's CAS came first, the count-down sees
//! `WAITERS` and wakes every sleeper; if the count-down came first, the waiter's CAS fails and it
//! looks again. A count-down is a release and a waiter's look an acquire, so what every counting
//! thread did before its count-down happens before any wait that finds the latch open returns
//! (a timed wait that gives up first sees none of it).
//!
//! ## Transitions
//!
//! * **count_down**: CAS the count one lower (refused at 0); at 0, clear `WAITERS` in the same
//!   CAS and, if it was set, wake every sleeper, by address (a released waiter may free the
//!   latch by then).
//! * **wait**: return once the count is 0; else spin as a barrier's waiter does (only while the
//!   threads still to count down and this one can all run at once, and only while such spins
//!   have been paying: [`crate::spin`]); then set `WAITERS` (CAS) and sleep on the word, giving
//!   up at the deadline.

use core::fmt;

use crate::atomic::Ordering;
use crate::futex::{Deadline, Futex, Private, Scope, Shared};

const COUNT: u32 = (1 << 31) - 1;
const WAITERS: u32 = 1 << 31;

/// The most count-downs a latch can wait for.
pub const MAX_LATCH_COUNT: u32 = COUNT;

/// A count down to zero that threads wait for: one futex word. Its protocol and state table
/// are at the top of `src/raw/latch.rs`.
///
/// ```
/// use futexkit::raw::RawLatch;
///
/// let done = RawLatch::new(2);
/// std::thread::scope(|s| {
///     s.spawn(|| done.count_down());
///     s.spawn(|| done.count_down());
///     done.wait(None);
/// });
/// assert_eq!(done.count(), 0);
/// ```
pub struct RawLatch<S: Scope = Private> {
    word: Futex<S>,
}

/// A count-down on a latch that is open already (more count-downs than it was made for, or,
/// in shared memory, a count a peer overwrote).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LatchOpen;

impl fmt::Display for LatchOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("count_down on a latch that is already open")
    }
}

impl std::error::Error for LatchOpen {}

impl<S: Scope> fmt::Debug for RawLatch<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawLatch")
            .field("count", &self.count())
            .finish()
    }
}

impl RawLatch {
    crate::futex::sys::const_fn! {
        /// A latch that opens after `count` count-downs (at once, if `count` is 0).
        ///
        /// # Panics
        ///
        /// If `count` is above [`MAX_LATCH_COUNT`] (2^31 - 1).
        #[must_use]
        pub const fn new(count: u32) -> RawLatch {
            assert!(count <= COUNT, "a latch counts down from at most 2^31 - 1");
            RawLatch {
                word: Futex::new(count),
            }
        }
    }
}

impl RawLatch<Shared> {
    crate::futex::sys::const_fn! {
        /// A latch for memory shared between processes (its futex calls are not private), that
        /// opens after `count` count-downs. A peer process can write any count, 0 included, so
        /// count down with [`try_count_down`](RawLatch::try_count_down) there:
        /// [`count_down`](RawLatch::count_down) panics on an open latch.
        ///
        /// # Panics
        ///
        /// If `count` is above [`MAX_LATCH_COUNT`] (2^31 - 1).
        #[must_use]
        pub const fn shared(count: u32) -> RawLatch<Shared> {
            assert!(count <= COUNT, "a latch counts down from at most 2^31 - 1");
            RawLatch {
                word: Futex::shared(count),
            }
        }
    }
}

impl<S: Scope> RawLatch<S> {
    /// Counts down by one; the count-down that reaches 0 releases every waiter.
    ///
    /// # Panics
    ///
    /// If the count is 0 already (more count-downs than the latch was made for); see
    /// [`try_count_down`](RawLatch::try_count_down).
    pub fn count_down(&self) {
        if let Err(open) = self.try_count_down() {
            panic!("{open}");
        }
    }

    /// Counts down by one, as [`count_down`](RawLatch::count_down).
    ///
    /// # Errors
    ///
    /// [`LatchOpen`] if the count is 0 already; nothing changes then.
    pub fn try_count_down(&self) -> Result<(), LatchOpen> {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            if word & COUNT == 0 {
                return Err(LatchOpen);
            }
            let count = (word & COUNT) - 1;
            let next = if count == 0 {
                0
            } else {
                (word & WAITERS) | count
            };
            match self
                .word
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        if word & COUNT == 1 && word & WAITERS != 0 {
            let _ = Futex::wake_at(self.word.as_ptr(), i32::MAX as u32);
        }
        Ok(())
    }

    /// Blocks until the count is 0 or `deadline` passes; returns whether the count is 0.
    pub fn wait(&self, deadline: Option<Deadline>) -> bool {
        let open = |word: u32| word & COUNT == 0;
        let count = self.word.load(Ordering::Acquire) & COUNT;
        if count == 0
            || crate::spin::spin_for_arrivals(count as usize + 1, deadline, || {
                open(self.word.load(Ordering::Acquire))
            })
        {
            return true;
        }
        super::sleep_until(&self.word, WAITERS, deadline, open)
    }

    /// The count-downs still to come (0: open).
    pub fn count(&self) -> u32 {
        self.word.load(Ordering::Acquire) & COUNT
    }
}
