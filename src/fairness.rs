//! The fairness policy: when the lock goes to a sleeping waiter instead of to whichever thread
//! takes it first.
//!
//! A released lock goes to whichever thread takes it first, usually a running one (often the
//! thread that just released it, relocking). That is what makes a contended lock fast, and it
//! can pass a sleeper over again and again: each time a sleeper is woken, a running thread has
//! taken the lock before it gets there, and it sleeps again at the back of the kernel's queue.
//! A hand-off gives the lock to a waiter instead; it must not leave the lock idle for long.
//!
//! ## The Mutex: the oldest woken waiter asks
//!
//! Before its first sleep in a lock call, a Mutex waiter takes a [`ticket`]: the next number of
//! a process-wide count, so that of two waiters the one with the [`older`] ticket began to
//! wait first. An untimed waiter woken from a sleep by a futex wake (a wait that found the
//! word changed does not count) that finds the lock taken asks for it: it writes `ASKED` and
//! its ticket into the word (`src/raw/mutex.rs`), or puts its ticket in place of a younger
//! asker's. The next unlock hands the lock over (`HANDED` and the same ticket) and wakes every
//! asker that sleeps, the one named among them: it claims the lock, unless an older woken
//! waiter gets there first and claims it instead (the one named then asks again). A younger woken waiter
//! that finds an older one asking, or the lock handed to an older one, sleeps again in the
//! kernel's queue like any sleeper; its age counts again once it is woken. The asker spins for
//! the hand-off before it sleeps again, so a hand-off usually costs no wake-up's latency.
//! Threads that have not been woken never ask, so running threads still take a free lock in
//! passing, which is what makes a contended lock fast; while a waiter asks, or a hand-off waits
//! for its claim, the lock is not free, so they cannot take it.
//!
//! **The bound.** Take the oldest untimed waiter W, with q sleepers ahead of it in the
//! kernel's queue and p woken waiters not yet served when it went to sleep.
//!
//! 1. W is woken after at most q wakes from the queue: the kernel wakes sleepers of one
//!    priority in arrival order, a contended release wakes one, and a fair unlock one untimed
//!    sleeper. Until then the lock goes by hand-off only to woken waiters, each once (one that
//!    locks again later has a younger ticket and sleeps behind W): the p, and those the q
//!    wakes woke. Otherwise it goes to a thread that takes it while it is free, which, with
//!    sleepers waiting, it is only from a wake from the queue until the woken thread's first
//!    successful look.
//! 2. Once woken, W's first successful look takes the lock or makes W the asker, whom nobody
//!    can replace (nobody is older): the next unlock hands the lock to W, and only W claims it.
//!    Until that look (W's wake-up latency, and looks that fail because the word changed
//!    under them), other threads may take the lock while it is free, and sleepers their
//!    releases wake may take it after them.
//!
//! So W holds the lock after at most p + q waiters woken before it, each once, plus whatever
//! other threads take in q + 1 wake-ups' latencies (W's own the last), plus the critical
//! section under way at W's first successful look. Every waiter that comes later is younger,
//! so any waiter gets the lock within that bound once for each waiter older than it. Not
//! covered: timed waiters (they never ask, as one may give up with the lock handed to it),
//! threads of real-time priority (the kernel wakes those first), a wake that ends a sleep by
//! chance (an unlock's wake by address can reach a sleeper on memory reused for another lock;
//! such a thread counts as one more woken waiter), and tickets 2^28 or more apart (they wrap:
//! the order of two such waiters is then wrong, and three can take one another's place as the
//! asker in turn until the holder's unlock). None of these can lose a wake-up. The rule
//! follows the Linux kernel mutex's hand-off (its first waiter, woken and failing to take the
//! lock, sets `MUTEX_FLAG_HANDOFF`, and the unlock gives the lock to that waiter), with the
//! kernel's own list replaced by the futex's queue and ticket order among the woken. It reads
//! no clock, so the model checkers run it as it ships.
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

use crate::futex::sys::next_ticket;
use crate::thread::thread_local;

/// The bits of a Mutex waiter's ticket: the Mutex keeps one in its word, beside its state.
pub(crate) const TICKET_BITS: u32 = 29;

/// A Mutex waiter's ticket: nonzero (a word naming ticket 0 names no waiter), and taken after
/// every ticket taken before it, modulo 2^[`TICKET_BITS`].
pub(crate) fn ticket() -> u32 {
    loop {
        let ticket = next_ticket() & ((1 << TICKET_BITS) - 1);
        if ticket != 0 {
            return ticket;
        }
    }
}

/// Whether ticket `a` was taken before ticket `b` (of two tickets taken less than
/// 2^([`TICKET_BITS`] - 1) apart).
pub(crate) fn older(a: u32, b: u32) -> bool {
    let ahead = b.wrapping_sub(a) & ((1 << TICKET_BITS) - 1);
    ahead != 0 && ahead < 1 << (TICKET_BITS - 1)
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
