//! What the spin policy decided, counted: each thread counts for itself and adds its counts to
//! the process's every `FLUSH_EVERY` decisions and when it exits ([`decisions()`]).
//!
//! ## State
//!
//! | state | kept | meaning | changed by |
//! |-------|------|---------|------------|
//! | `TALLIES` | per thread | counts not yet added to `TOTALS` | every decision; emptied every `FLUSH_EVERY`, at the thread's exit, and by its call of `decisions` |
//! | `TOTALS` | per process | the counts added so far | a thread's flush |

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::futex::sys::MODEL_CHECKED;

/// What the spin policy decided, and how it turned out, summed over the process's threads:
/// see [`decisions`]. The policy never yields the CPU in place of a sleep, so there is no
/// count of yields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Lock waiters (Mutex, RwLock, and [`SpinWait`](super::SpinWait) users). Their spin
    /// stops early when the lock changes (it was released, or a waiter went to sleep on it),
    /// which is counted as won; one that spends its budget sleeps, and is counted as lost.
    /// When to skip the spin is the lock's own rule (not while threads sleep on it), so
    /// `skipped` stays 0.
    pub lock: Outcomes,
    /// Waits for a notify (Condvar, Barrier).
    pub notify: Outcomes,
    /// Hand-off waits ([`Spinner`](super::Spinner): `swap`, `Parker`, FlipCall and its server).
    pub hand_off: Outcomes,
}

/// How one kind of waiter's spins turned out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Spins that ended with what they waited for: a sleep and a wake saved.
    pub won: u64,
    /// Spins that spent their budget; the waiter then slept.
    pub lost: u64,
    /// Waits that did not spin because the policy said it would not pay.
    pub skipped: u64,
}

impl fmt::Display for Decisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Decisions {
            lock,
            notify,
            hand_off,
        } = self;
        write!(f, "lock: {lock}; notify: {notify}; hand-off: {hand_off}")
    }
}

impl fmt::Display for Outcomes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Outcomes { won, lost, skipped } = self;
        write!(f, "{won} spins won, {lost} lost, {skipped} skipped")
    }
}

/// The spin policy's decisions so far in this process: how often each kind of waiter spun,
/// how often the spin paid, and how often it did not spin at all. Each thread counts for
/// itself and adds its counts to the process's every `FLUSH_EVERY` decisions and when it
/// exits, so a thread still running may be missing up to that many (threads that have been
/// joined are all in).
///
/// ```
/// let before = futexkit::spin::decisions();
/// let mutex = futexkit::Mutex::new(0);
/// *mutex.lock().unwrap() += 1; // uncontended: the policy is not asked
/// assert_eq!(futexkit::spin::decisions().lock.lost, before.lock.lost);
/// println!("{}", futexkit::spin::decisions());
/// ```
pub fn decisions() -> Decisions {
    let _ = TALLIES.try_with(Tallies::flush);
    let outcomes = |kind: usize| {
        let total = |outcome: usize| TOTALS[3 * kind + outcome].load(Ordering::Relaxed);
        Outcomes {
            won: total(0),
            lost: total(1),
            skipped: total(2),
        }
    };
    let mut lock = outcomes(0);
    // A lock's spins are counted as started and spent (the spin cannot see whether its
    // caller took the lock).
    lock.won = lock.won.saturating_sub(lock.lost);
    Decisions {
        lock,
        notify: outcomes(1),
        hand_off: outcomes(2),
    }
}

/// One thing the policy counts: three slots per kind of waiter, in the order of
/// [`Decisions`]' fields, each won, lost, skipped (a lock's first two: started, spent).
#[derive(Clone, Copy)]
pub(super) enum Tally {
    LockStarted = 0,
    LockSpent = 1,
    NotifyWon = 3,
    NotifyLost = 4,
    NotifySkipped = 5,
    HandOffWon = 6,
    HandOffLost = 7,
    HandOffSkipped = 8,
}

const TALLY_KINDS: usize = 9;
/// A thread adds its counts to the process's after this many.
const FLUSH_EVERY: u32 = 1024;

static TOTALS: [AtomicU64; TALLY_KINDS] = [const { AtomicU64::new(0) }; TALLY_KINDS];

/// A thread's counts not yet added to `TOTALS`: counting costs no shared write.
struct Tallies {
    counts: [core::cell::Cell<u64>; TALLY_KINDS],
    unflushed: core::cell::Cell<u32>,
}

impl Tallies {
    fn flush(&self) {
        for (count, total) in self.counts.iter().zip(&TOTALS) {
            let n = count.replace(0);
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.unflushed.set(0);
    }
}

impl Drop for Tallies {
    fn drop(&mut self) {
        self.flush();
    }
}

std::thread_local! {
    static TALLIES: Tallies = const {
        Tallies {
            counts: [const { core::cell::Cell::new(0) }; TALLY_KINDS],
            unflushed: core::cell::Cell::new(0),
        }
    };
}

/// Counts one decision (not under a model checker, where spins are single looks).
#[inline]
pub(super) fn count(tally: Tally) {
    if MODEL_CHECKED {
        return;
    }
    // A thread being torn down no longer counts.
    let _ = TALLIES.try_with(|t| {
        let c = &t.counts[tally as usize];
        c.set(c.get() + 1);
        let n = t.unflushed.get() + 1;
        t.unflushed.set(n);
        if n >= FLUSH_EVERY {
            t.flush();
        }
    });
}
