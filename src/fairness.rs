//! The fairness policy: when the unlock of a contended lock hands the lock to a sleeping
//! waiter instead of releasing it.
//!
//! A released lock goes to whichever thread takes it first, usually a running one (often the
//! thread that just released it, relocking). That is what makes a contended lock fast, and it
//! can pass a sleeper over again and again: each time a sleeper is woken, a running thread has
//! taken the lock before it gets there, and it sleeps again at the back of the kernel's queue.
//! A hand-off gives the lock to the woken sleeper instead; it costs the lock a wake-up's latency
//! during which nobody holds it usefully, so it is rationed: every [`HAND_OFF_PERIOD`]th
//! contended unlock a thread makes is a hand-off, its first included. As the kernel wakes
//! sleepers in arrival order, a sleeper reaches the front of the queue after at most as many
//! wakes as there were sleepers ahead of it, and is then handed the lock within
//! `HAND_OFF_PERIOD` contended unlocks of each thread that unlocks it.
//!
//! The count is per thread, so deciding costs no shared write; across the threads unlocking one
//! lock, one contended unlock in `HAND_OFF_PERIOD` hands off. It is a count, not a time, so that
//! the decision reads no clock on the unlock path and is the same under a model checker, which
//! therefore explores both kinds of unlock (each thread's first contended unlock hands off).

// The model checkers' `thread_local!` takes no `const` initializer.
#![allow(clippy::missing_const_for_thread_local)]

use core::cell::Cell;

use crate::thread::thread_local;

/// One contended unlock in this many, per thread, hands the lock off.
pub(crate) const HAND_OFF_PERIOD: u32 = 16;

thread_local! {
    /// Contended unlocks this thread has made, modulo [`HAND_OFF_PERIOD`].
    static CONTENDED_UNLOCKS: Cell<u32> = Cell::new(0);
}

/// Whether this contended unlock should hand the lock to a sleeping waiter; counts the unlock.
pub(crate) fn hand_off_now() -> bool {
    CONTENDED_UNLOCKS.with(|count| {
        let n = count.get();
        count.set((n + 1) % HAND_OFF_PERIOD);
        n == 0
    })
}
