//! The fairness policy: when the lock goes to a sleeping waiter instead of to whichever thread
//! takes it first.
//!
//! A released lock goes to whichever thread takes it first, usually a running one (often the
//! thread that just released it, relocking). That is what makes a contended lock fast, and it
//! can pass a sleeper over again and again: each time a sleeper is woken, a running thread has
//! taken the lock before it gets there, and it sleeps again at the back of the kernel's queue.
//! A hand-off gives the lock to a waiter instead; it must not leave the lock idle for long.
//!
//! ## The Mutex: a woken waiter asks
//!
//! An untimed Mutex waiter back from a futex wait (woken, or finding the word changed) that
//! finds the lock taken asks for it (`src/raw/mutex.rs`, `ASKED`): the next unlock hands the
//! lock over, to the asker or another thread back from a wait, never to one that has not waited
//! yet. The asker asks while it runs and spins for the hand-off before it sleeps again, so a
//! hand-off usually costs no wake-up's latency: the lock is idle only until the asker sees it.
//! It sleeps again only when the holder keeps the lock past the spin (longer than a few
//! microseconds), and then the hand-off waits for its wake-up. Threads that have not waited
//! never ask, so running threads still take a free lock in passing, which is what makes a
//! contended lock fast. While anyone asks, the lock goes only to threads back from a wait, and
//! every contended release wakes the longest sleeper, which then asks. It is not a queue, and
//! no bound on how often a waiter can be passed over is proven: a thread whose first wait found
//! the word changed counts as back from a wait. The rule follows the Linux kernel mutex's
//! hand-off (its first waiter, woken and failing to take the lock, sets `MUTEX_FLAG_HANDOFF`,
//! and the unlock gives the lock to that waiter). It reads no clock, so the model checkers run
//! it as it ships.
//!
//! ## The RwLock's write unlock: a count ([`hand_off_now`])
//!
//! Every [`HAND_OFF_PERIOD`]th contended write unlock a thread makes is a hand-off, its first
//! included (`src/raw/rwlock.rs`: it opens a read phase if readers sleep, else hands the lock
//! to a sleeping writer). As the kernel wakes sleepers in arrival order, a sleeper reaches the
//! front of the queue after at most as many wakes as there were sleepers ahead of it, and is
//! then handed the lock within `HAND_OFF_PERIOD` contended write unlocks of each thread. The
//! count is per thread, so deciding costs no shared write and reads no clock, and it is the
//! same under a model checker, which therefore explores both kinds of unlock.

// The model checkers' `thread_local!` takes no `const` initializer.
#![allow(clippy::missing_const_for_thread_local)]

use core::cell::Cell;

use crate::thread::thread_local;

/// One contended write unlock of a RwLock in this many, per thread, hands the lock off.
pub(crate) const HAND_OFF_PERIOD: u32 = 16;

thread_local! {
    /// Contended write unlocks this thread has made, modulo [`HAND_OFF_PERIOD`].
    static CONTENDED_UNLOCKS: Cell<u32> = Cell::new(0);
}

/// Whether this contended RwLock write unlock should hand the lock off; counts the unlock.
pub(crate) fn hand_off_now() -> bool {
    CONTENDED_UNLOCKS.with(|count| {
        let n = count.get();
        count.set((n + 1) % HAND_OFF_PERIOD);
        n == 0
    })
}
