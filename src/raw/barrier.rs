//! The barrier protocol, on one futex word instead of std's Mutex and Condvar.
//! `futexkit::sync::Barrier` is this with std's API.
//!
//! ## State
//!
//! | field      | bits | meaning | changed by |
//! |------------|------|---------|------------|
//! | arrived    | 0-29 | threads that have called `wait` in this generation | each arrival adds 1; the last one sets it back to 0 |
//! | `SLEEPERS` | 30   | some arrival of this generation sleeps on the word, or is about to | set by an arrival before it sleeps; cleared by the leader |
//! | generation | 31   | flips when a generation completes | the last arrival (the leader) |
//!
//! Beside the word, `parties`: how many threads make a generation.
//!
//! ## Protocol
//!
//! * **wait**: add 1 (one atomic add; its result says who arrived last). The last of `parties`
//!   arrivals is the leader: it swaps in the next generation with no arrivals and no
//!   `SLEEPERS`, and if `SLEEPERS` was set wakes every sleeper, by address (a released thread
//!   may free the barrier by then). Every other arrival waits until the generation bit differs
//!   from the one it arrived in: it sets `SLEEPERS` (a CAS that fails once the generation has
//!   flipped) and sleeps on the word. The leader's swap and the sleeper's CAS are ordered on
//!   the word: either the CAS comes first and the leader sees the bit and wakes, or it fails.
//! * One bit of generation is enough: a generation cannot complete without every thread of the
//!   one before it having left `wait`'s arrival, so a sleeper never sees its own generation
//!   come round again. A barrier of 0 or 1 parties releases every caller at once, each as
//!   leader, as std's does.
//! * A waiter may spin before it sets `SLEEPERS`; how long, and whether at all, is the spin
//!   policy's decision (`crate::spin::spin_for_arrivals`). A spin only looks at the word. The
//!   leader tells the policy how many sleepers its release woke (`crate::spin::notified`), as a
//!   Condvar's notify does: a policy input only.

use core::fmt;

use crate::atomic::Ordering;
use crate::futex::Futex;

const ARRIVED: u32 = (1 << 30) - 1;
const SLEEPERS: u32 = 1 << 30;
const GENERATION: u32 = 1 << 31;

/// A barrier for `parties` threads: one futex word and the party count. Its protocol and state
/// table are at the top of `src/raw/barrier.rs`.
///
/// ```
/// use futexkit::raw::RawBarrier;
///
/// let barrier = RawBarrier::new(2);
/// let leaders = std::thread::scope(|s| {
///     let other = s.spawn(|| barrier.wait());
///     usize::from(barrier.wait()) + usize::from(other.join().unwrap())
/// });
/// assert_eq!(leaders, 1);
/// ```
pub struct RawBarrier {
    state: Futex,
    parties: usize,
}

impl fmt::Debug for RawBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawBarrier")
            .field("parties", &self.parties)
            .finish_non_exhaustive()
    }
}

impl RawBarrier {
    crate::futex::sys::const_fn! {
        /// A barrier that releases its waiters each time `parties` of them have called
        /// [`wait`](RawBarrier::wait). With 0 or 1 parties, `wait` returns at once.
        ///
        /// More than 2^30 - 1 parties cannot be waited for (no system runs that many threads):
        /// such a barrier never releases, as it could not in std either.
        #[must_use]
        pub const fn new(parties: usize) -> RawBarrier {
            RawBarrier {
                state: Futex::new(0),
                parties,
            }
        }
    }

    /// Blocks until `parties` threads have called `wait` in this round, then returns in all of
    /// them: true in exactly one, the leader (the last to arrive).
    pub fn wait(&self) -> bool {
        if self.parties <= 1 {
            return true;
        }
        let before = self.state.fetch_add(1, Ordering::AcqRel);
        let generation = before & GENERATION;
        let arrived = (before & ARRIVED) as usize + 1;
        if arrived == self.parties {
            // The leader: every other arrival of this generation is in `wait`, and can only set
            // SLEEPERS until this swap releases them.
            let before = self.state.swap(generation ^ GENERATION, Ordering::AcqRel);
            if before & SLEEPERS == 0 {
                crate::spin::notified(0);
            } else if let Ok(woken) = Futex::wake_at(self.state.as_ptr(), i32::MAX as u32) {
                crate::spin::notified(woken);
            }
            return true;
        }
        let released = || self.state.load(Ordering::Acquire) & GENERATION != generation;
        crate::spin::spin_for_arrivals(self.parties, released);
        super::sleep_until(&self.state, SLEEPERS, None, |state| {
            state & GENERATION != generation
        });
        false
    }
}
