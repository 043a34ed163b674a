//! The fairness policy: when the lock goes to a sleeping waiter instead of to whichever thread
//! takes it first.
//!
//! A released lock goes to whichever thread takes it first, usually a running one (often the
//! thread that just released it, relocking). That is what makes a contended lock fast, and it
//! can pass a sleeper over again and again: each time a sleeper is woken, a running thread has
//! taken the lock before it gets there, and it sleeps again at the back of the kernel's queue.
//! A hand-off gives the lock to a waiter instead, so it is rationed.
//!
//! ## The Mutex: a bound on the wait ([`PassedOver`])
//!
//! An untimed Mutex waiter that has waited [`PASSED_OVER_AFTER`] since its first sleep, and is
//! woken without getting the lock, asks for it: the next unlock hands the lock to it
//! (`src/raw/mutex.rs`, `STARVING`). It asks while it runs and spins before it sleeps again,
//! so a hand-off to it usually costs no wake-up: the lock is idle only until the asking thread
//! sees it handed over. So the rule costs one system call per asking waiter per bound, and
//! no waiter goes without the lock for much longer than the bound plus one critical section
//! of each thread asking before it. The bound is Go's `sync.Mutex` starvation threshold: far
//! above a wake-up's latency (microseconds), so waiters that the kernel's queue serves in
//! time never ask, and short enough that no server request waits on one lock for long.
//!
//! Under a model checker there is no clock to read: a waiter asks after its first wake that
//! did not get it the lock, so that models explore the hand-off on every schedule that passes
//! a sleeper over.
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
use std::time::Duration;

use crate::futex::sys::MODEL_CHECKED;
use crate::futex::Deadline;
use crate::thread::thread_local;

/// How long an untimed Mutex waiter may go without the lock, from its first sleep, before it
/// asks the next unlock to hand the lock to it.
pub(crate) const PASSED_OVER_AFTER: Duration = Duration::from_millis(1);

/// An untimed Mutex waiter's record of how long it has waited: nothing until it first sleeps.
pub(crate) struct PassedOver {
    /// When the waiter is past the bound; set at its first sleep.
    asks_at: Option<Deadline>,
}

impl PassedOver {
    /// A waiter that has not slept yet.
    #[inline]
    pub(crate) fn new() -> PassedOver {
        PassedOver { asks_at: None }
    }

    /// Called before each sleep: the first starts the clock.
    #[inline]
    pub(crate) fn sleeping(&mut self) {
        if self.asks_at.is_none() && !MODEL_CHECKED {
            self.asks_at = Some(Deadline::after(PASSED_OVER_AFTER));
        }
    }

    /// Called after a wake: whether the waiter is now past the bound, so that it asks for the
    /// lock (under a model checker, after every wake).
    #[inline]
    pub(crate) fn past_bound(&self) -> bool {
        MODEL_CHECKED || self.asks_at.as_ref().is_some_and(Deadline::has_passed)
    }
}

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
