//! The counting semaphore protocol, on one futex word. `futexkit::sync::Semaphore` is this with
//! RAII permits, `futexkit::sync::AutoResetEvent` this with at most one permit.
//!
//! ## State
//!
//! | field     | bits | meaning | set by | cleared by |
//! |-----------|------|---------|--------|------------|
//! | count     | 0-30 | permits free now | a release, adding its permits | an acquire, taking one (a CAS from a count above 0) |
//! | `WAITERS` | 31   | threads may sleep on the word: the next release must wake | a waiter, by CAS, before it sleeps; a woken thread, in the CAS that takes its permit; a woken timed waiter that gives up while no permit is free | every release that adds permits (which then wakes as many as it added) |
//!
//! Invariant, **no lost wakeup** (the Mutex's, `src/raw/mutex.rs`, with permits for the lock):
//! a thread sleeps only on the value "count 0, `WAITERS`", so a release, which changes the word
//! by one read-modify-write, either sees the bit or makes the sleep's compare fail. A release
//! clears the bit and wakes as many as it added, so while sleepers remain without the bit,
//! some woken thread is *in flight*, and every woken thread carries the bit on:
//!
//! 1. when it takes a permit it sets `WAITERS` in the same CAS (other sleepers may remain), and
//!    if permits are still free it wakes one more (a release that found the bit clear while
//!    it was in flight added them without waking anyone);
//! 2. when it finds no permit it sets `WAITERS` again before it sleeps;
//! 3. when it gives up at its deadline it wakes one more if permits are free, else sets
//!    `WAITERS`, so a wake it took is never lost.
//!
//! A thread whose sleeps all ended otherwise (the word changed first, the time ran out) was
//! never woken and owes nothing: a release's wake goes to a thread asleep then, if any. A woken
//! thread looks at the count before it minds its deadline. No order among waiters is promised:
//! a thread arriving may take a permit before a woken one, which then sleeps again. A waiter
//! does not spin: a permit's holder may keep it for long, and the thread that would release it
//! may need this CPU (an auto-reset event's hand-off).
//!
//! ## Transitions
//!
//! * **acquire**: CAS the count from `c > 0` to `c - 1`, keeping the bit. Else, until it has a
//!   permit: take one if the count is above 0 (with `WAITERS` once woken, then rule 1),
//!   else set `WAITERS` and sleep on "count 0, `WAITERS`" (giving up at its deadline, rule 3).
//! * **release(n)**: one CAS from `w` to count + `n` without `WAITERS` (refusing to pass
//!   [`MAX_PERMITS`]); if `w` had `WAITERS`, wake `n` threads. **release_up_to(n, max)** adds
//!   only as many of the `n` as keep the count at most `max`; when that is none it writes the
//!   word back unchanged and wakes nobody, a release still, so that the acquire taking the
//!   permit that made it add nothing sees what its thread did before (an auto-reset event is
//!   a semaphore released up to 1).

use core::fmt;
use std::time::{Duration, Instant};

use crate::atomic::Ordering;
use crate::futex::{Deadline, Futex};

const COUNT: u32 = (1 << 31) - 1;
const WAITERS: u32 = 1 << 31;

/// The most free permits a [`RawSemaphore`] holds (2^31 - 1).
pub const MAX_PERMITS: u32 = COUNT;

/// A counting semaphore: one futex word of free permits and a waiters bit. Its protocol and
/// state table are at the top of `src/raw/semaphore.rs`.
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
    word: Futex,
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
        ///
        /// # Panics
        ///
        /// If `permits` is above [`MAX_PERMITS`].
        #[must_use]
        pub const fn new(permits: u32) -> RawSemaphore {
            assert!(permits <= MAX_PERMITS, "a semaphore holds at most 2^31 - 1 permits");
            RawSemaphore {
                word: Futex::new(permits),
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
        let mut word = self.word.load(Ordering::Relaxed);
        while word & COUNT > 0 {
            match self.word.compare_exchange_weak(
                word,
                word - 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => word = now,
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
    /// If the free permits would pass [`MAX_PERMITS`] (the count is left as it was).
    pub fn release(&self, n: u32) {
        if n == 0 {
            return;
        }
        let added = self
            .word
            .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                let count = (word & COUNT).checked_add(n).filter(|&c| c <= COUNT)?;
                Some(count)
            });
        match added {
            Ok(before) => self.wake_for(before, n),
            Err(_) => panic!("a semaphore holds at most 2^31 - 1 free permits"),
        }
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
        let max = max.min(COUNT);
        let mut added = 0;
        // A release that adds nothing still writes the word (unchanged), with release
        // ordering: the acquire that takes a permit after it sees what this thread wrote
        // before, as it would had this release added the permit.
        let update = |word| {
            added = n.min(max.saturating_sub(word & COUNT));
            Some(if added > 0 {
                (word & COUNT) + added
            } else {
                word
            })
        };
        // The update always writes, so the Err of `fetch_update` cannot come.
        let before = self
            .word
            .fetch_update(Ordering::Release, Ordering::Relaxed, update)
            .unwrap_or_else(|word| word);
        if added > 0 {
            self.wake_for(before, added);
        }
        added
    }

    /// The permits free now (another thread may take or add some at any moment).
    pub fn available(&self) -> u32 {
        self.word.load(Ordering::Relaxed) & COUNT
    }

    /// After a release replaced `before` (clearing `WAITERS`) adding `added` permits: wake as
    /// many sleepers if the bit was set. By address, as every wake after a release: a woken
    /// thread may free the semaphore before the call returns (`docs/kernel.md`, "Wake after
    /// unlock").
    fn wake_for(&self, before: u32, added: u32) {
        if before & WAITERS != 0 {
            let _ = Futex::wake_at(self.word.as_ptr(), added);
        }
    }

    /// The slow path of an acquire: sleep until a permit is free, carrying the waiters bit on
    /// after each sleep (rules 1-3 of the state table).
    #[cold]
    fn acquire_contended(&self, deadline: Option<Deadline>) -> bool {
        let mut woken = false;
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            if word & COUNT > 0 {
                let carried = if woken { WAITERS } else { 0 };
                match self.word.compare_exchange_weak(
                    word,
                    (word - 1) | carried,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        if woken && (word - 1) & COUNT > 0 {
                            let _ = self.word.wake(1);
                        }
                        return true;
                    }
                    Err(now) => {
                        word = now;
                        continue;
                    }
                }
            }
            if deadline.is_some_and(|d| d.has_passed()) {
                if woken {
                    self.pass_on();
                }
                return false;
            }
            if word & WAITERS == 0 {
                if let Err(now) = self.word.compare_exchange_weak(
                    word,
                    word | WAITERS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    word = now;
                    continue;
                }
            }
            // Only a wake (`Ok`) may have come from a release that cleared the bit, which this
            // thread must then carry on; a sleep that ended otherwise owes nothing. Woken,
            // timed out or not, look again first.
            woken |= self.word.wait(WAITERS, deadline).is_ok();
            word = self.word.load(Ordering::Relaxed);
        }
    }

    /// A woken waiter that gives up: the wake it may have taken goes to another sleeper
    /// if permits are free, else the next release is made to wake (rule 3).
    fn pass_on(&self) {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            if word & COUNT > 0 {
                let _ = self.word.wake(1);
                return;
            }
            if word & WAITERS != 0 {
                return;
            }
            match self.word.compare_exchange_weak(
                word,
                word | WAITERS,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }
}
