//! The barrier protocol, on one futex word instead of std's Mutex and Condvar.
//! `futexkit::sync::Barrier` is this with std's API.
//!
//! ## State
//!
//! | field      | bits  | meaning | changed by |
//! |------------|-------|---------|------------|
//! | arrived    | 0-21  | threads that have called `wait` in this generation | each arrival adds 1; the last one sets it back to 0 |
//! | `SLEEPERS` | 22    | some arrival of this generation sleeps on the word, or is about to | set by an arrival before it sleeps; cleared by the leader |
//! | generation | 23-31 | counts completed generations, modulo 2^9 | the last arrival (the leader) adds 1 |
//!
//! Beside the word, `parties`: how many threads make a generation.
//!
//! ## Protocol
//!
//! * **wait**: one CAS that either counts the arrival or, for the last of `parties`, closes
//!   the generation: that arrival (the leader) writes the next generation with no arrivals and
//!   no `SLEEPERS` in the same step, so a thread arriving after it is counted in the next
//!   generation, never in the closed one (with more threads than `parties` that happens). If
//!   `SLEEPERS` was set the leader wakes every sleeper, by address (a released thread may free
//!   the barrier by then). Every other arrival waits until the generation differs from the one
//!   it arrived in: it sets `SLEEPERS` (a CAS that fails once the generation has moved on) and
//!   sleeps on the word. The leader's CAS and the sleeper's CAS are ordered on the word: either
//!   the sleeper's comes first and the leader sees the bit and wakes, or it fails.
//! * Nine bits of generation: a waiter that is not running while its generation completes
//!   looks again when it runs, and is stranded only if exactly a multiple of 512 generations
//!   completed meanwhile, every one without it. With no more threads than `parties` a
//!   generation cannot complete without every thread of the one before it, so it never
//!   happens; with more, 512 whole generations would have to pass while one thread waits to
//!   be scheduled. A barrier of 0 or 1 parties releases every caller at once, each as leader,
//!   as std's does.
//! * A waiter may spin before it sets `SLEEPERS`; how long, and whether at all, is the spin
//!   policy's decision (`crate::spin::spin_for_arrivals`). A spin only looks at the word. The
//!   leader tells the policy how many sleepers its release woke (`crate::spin::notified`), as a
//!   Condvar's notify does: a policy input only.

use core::fmt;

use crate::atomic::Ordering;
use crate::futex::Futex;

const ARRIVED: u32 = (1 << 22) - 1;
const SLEEPERS: u32 = 1 << 22;
/// The lowest bit of the generation field; adding it moves to the next generation, wrapping.
const ONE_GENERATION: u32 = 1 << 23;
const GENERATION: u32 = !(ARRIVED | SLEEPERS);

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
        /// More than 2^22 - 1 parties cannot be waited for (Linux runs fewer threads: its
        /// `pid_max` is at most 2^22): such a barrier never releases, as it could not in std
        /// either.
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
        let mut state = self.state.load(Ordering::Relaxed);
        let generation = loop {
            let generation = state & GENERATION;
            let last = (state & ARRIVED) as usize + 1 == self.parties;
            let next = if last {
                generation.wrapping_add(ONE_GENERATION)
            } else {
                state + 1
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if last => {
                    // The leader: every other arrival of this generation is in `wait`, and
                    // could only set SLEEPERS until this CAS released them.
                    if state & SLEEPERS == 0 {
                        crate::spin::notified(0);
                    } else if let Ok(woken) = Futex::wake_at(self.state.as_ptr(), i32::MAX as u32) {
                        crate::spin::notified(woken);
                    }
                    return true;
                }
                Ok(_) => break generation,
                Err(now) => state = now,
            }
        };
        let released = || self.state.load(Ordering::Acquire) & GENERATION != generation;
        crate::spin::spin_for_arrivals(self.parties, None, released);
        super::sleep_until(&self.state, SLEEPERS, None, |state| {
            state & GENERATION != generation
        });
        false
    }
}
