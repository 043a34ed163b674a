//! The protocols: each primitive's state on a futex word, with its lock / unlock / wait / wake
//! transitions, and nothing of poison, guards or data (std keeps these in `sys/sync/`).
//! [`futexkit::sync`](crate::sync) builds std's types over them; they are public for code that
//! brings its own guards (lock_api, with the `lock_api` feature).
//!
//! Each file starts with its primitive's state table. Policy lives apart: how long a waiter
//! spins in [`crate::spin`], when a lock is handed over in `src/fairness.rs`.
//!
//! | file         | type           | word                                                    |
//! |--------------|----------------|---------------------------------------------------------|
//! | `mutex.rs`   | [`RawMutex`]   | one of five states: free, held, held with sleepers, asked for by a woken waiter, handed over |
//! | `rwlock.rs`  | [`RawRwLock`]  | reader count (all ones: a writer) and seven waiting, phase and hand-off bits |
//! | `condvar.rs` | [`RawCondvar`] | a notify sequence, beside a count of sleepers            |
//! | `barrier.rs` | [`RawBarrier`] | arrivals, a sleepers bit and a generation count          |
//! | `semaphore.rs` | [`RawSemaphore`] | free permits and a waiters bit                          |
//! | `latch.rs`   | [`RawLatch`]   | a count down to zero and a waiters bit                   |
//! | `event.rs`   | [`RawEvent`]   | a set bit, a waiters bit and a generation                |
//! | `pi_mutex.rs` | [`RawPiMutex`] | the kernel's priority-inheritance word: owner id and a waiters bit |
//! | `shared/`    | [`RawSharedMutex`], [`RawSharedCondvar`], [`RawSharedRwLock`], [`RawSharedBarrier`], [`RawSharedSemaphore`] | process-shared and robust: robust words the kernel marks when their owner dies (`shared/mod.rs`) |

mod barrier;
mod condvar;
mod event;
mod latch;
// lock_api's `INIT` constants need `const` constructors, which a model checker's atomics do
// not have: under one, lock_api's traits are not implemented.
#[cfg(all(feature = "lock_api", not(any(futexkit_loom, futexkit_shuttle))))]
mod lock_api;
#[cfg(all(feature = "lock_api_05", not(any(futexkit_loom, futexkit_shuttle))))]
mod lock_api_05;
mod mutex;
mod pi_mutex;
mod rwlock;
mod semaphore;
mod shared;

pub use barrier::RawBarrier;
pub use condvar::RawCondvar;
pub use event::RawEvent;
pub use latch::{LatchOpen, RawLatch, MAX_LATCH_COUNT};
pub use mutex::RawMutex;
pub use pi_mutex::{PiUnsupported, RawPiMutex};
pub use rwlock::RawRwLock;
pub use semaphore::{RawSemaphore, MAX_PERMITS};
pub use shared::{
    Acquired, BarrierError, Party, Permit, RawLockError, RawSharedBarrier, RawSharedCondvar,
    RawSharedMutex, RawSharedRwLock, RawSharedSemaphore, ReaderSlot, SemaphoreError,
    BARRIER_MAX_PARTIES, READER_SLOTS, SEMAPHORE_MAX_PERMITS,
};

/// Sleeps on `word` until `done(value)` holds for a value read from it (returns true) or
/// `deadline` passes (returns false): the waiting half of the one-word primitives whose waker
/// wakes every sleeper (barrier, latch, event). Before each sleep it sets `waiters` in the word
/// by CAS and sleeps on the value with that bit, so a waker that changes the word by a
/// read-modify-write either sees the bit (and wakes) or makes the CAS or the sleep's compare
/// fail. A look comes before the deadline check, so a wake is never dropped. The loads are
/// acquire: what the waker did before its release happens before this returns true.
pub(crate) fn sleep_until<S: crate::futex::Scope>(
    word: &crate::futex::Futex<S>,
    waiters: u32,
    deadline: Option<crate::futex::Deadline>,
    done: impl Fn(u32) -> bool,
) -> bool {
    use crate::atomic::Ordering;
    loop {
        let value = word.load(Ordering::Acquire);
        if done(value) {
            return true;
        }
        if deadline.is_some_and(|d| d.has_passed()) {
            return false;
        }
        if value & waiters == 0
            && word
                .compare_exchange(value, value | waiters, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            continue;
        }
        // Woken, timed out, spuriously, or the word changed: look again.
        let _ = word.wait(value | waiters, deadline);
    }
}
