//! The condition variable protocol: a sequence word and a sleeper count, waited on with any
//! [`RawMutex`]. `futexkit::sync::Condvar` is this with std's guard-based API.
//!
//! ## State
//!
//! | field      | meaning                                   | changed by |
//! |------------|-------------------------------------------|------------|
//! | `seq`      | futex word: how many notifies there have been (wrapping) | every notify adds 1 |
//! | `sleepers` | waiters about to sleep on `seq`, or asleep, that no wake has woken yet | a waiter adds 1 before its sleep; a notify takes back 1 for each sleeper its wake woke; a waiter whose sleep ended unwoken (`seq` had changed, or the deadline passed) takes back its own |
//!
//! Nothing refers to the mutex: a Condvar may be used with any mutex, one after another, and a
//! `(Mutex, Condvar)` pair may move between waits, as with std.
//!
//! ## Protocol
//!
//! * **wait**: read `seq` while still holding the mutex, unlock, add to `sleepers`, sleep on
//!   `seq` while it holds the value read, take its count back unless a wake ended the sleep,
//!   and relock. A notify that comes after the unlock (the only ones a waiter is owed: the
//!   notifier changed the condition under the mutex after this waiter released it) changes
//!   `seq` after it was read, so the sleep returns at once or is woken. Only equality is
//!   compared: a waiter would have to miss one by seeing exactly 2^32 notifies between its read
//!   of `seq` and the kernel's compare of it (its spin included).
//! * **notify**: add 1 to `seq`, then wake one (`notify_one`) or all (`notify_all`) sleepers,
//!   making the wake syscall only if `sleepers` is not 0. The notifier reads `sleepers` with a
//!   read-modify-write (adding 0), as the waiter writes it with one (adding 1), both
//!   acquire-release: the two are ordered in `sleepers`' modification order, and each reads the
//!   latest value. If the notifier's comes second, it sees the waiter counted and wakes: the
//!   waiter is asleep then and woken, or not yet in the kernel, whose compare of `seq` then
//!   sees the notifier's add and does not sleep. If the
//!   waiter's comes second, it synchronizes with the notifier's, so the notifier's earlier add
//!   to `seq` happens before the waiter's sleep compares `seq` (in the kernel), which then
//!   sees the new value and does not sleep. Either way the waiter is not lost.
//! * **Each count is taken back at most once**: by the notify whose wake woke its waiter (the
//!   kernel returns how many it woke, and a woken waiter's sleep returns success), or else by
//!   the waiter, whose sleep returned an error (`seq` had changed, or its deadline passed). So
//!   `sleepers` never counts fewer than the waiters still owed a wake, and a woken waiter stops
//!   counting as soon as the wake returns, not a wake-up's latency later when it runs: the
//!   notifies in between find nobody left to wake and make no syscall. A sleep that some other
//!   wake of the same address ended (a lock's wake by address after its release, reaching a
//!   Condvar that reuses the freed memory) leaves its count behind for good: every later notify
//!   then makes a syscall that may find nobody, which costs time, never a wakeup.
//! * `notify_all` wakes every sleeper at once, so that they run as soon as CPUs can take them;
//!   they then meet on the mutex, whose spin and one wake per contended unlock keep that
//!   orderly.
//!
//! * **spin**: between the unlock and the add to `sleepers`, a wait may spin on `seq`, as the
//!   spin policy decides (`crate::spin::spin_for_notify`). A change seen there ends the wait as
//!   a wake would; the spinner is not counted in `sleepers`, so the notify made no syscall.
//!   The spin only reads `seq`: the protocol above is the same with or without it. A notify
//!   tells the policy how many sleepers it woke (none: its waiters, if any, are running; some:
//!   a hand-off), which only changes how the notifier's own next wait spins.

use core::fmt;

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Deadline, Error, Futex};
use crate::raw::RawMutex;

/// A condition variable without a guard API: waits release and retake a [`RawMutex`] the caller
/// holds. Its protocol and state table are at the top of `src/raw/condvar.rs`.
///
/// ```
/// use futexkit::raw::{RawCondvar, RawMutex};
///
/// let (mutex, condvar) = (RawMutex::new(), RawCondvar::new());
/// mutex.lock();
/// // Nobody notifies: the wait ends at its deadline, with the mutex held again.
/// let deadline = futexkit::futex::Deadline::after(std::time::Duration::from_millis(1));
/// // SAFETY: this thread holds `mutex`.
/// let timed_out = unsafe { condvar.wait(&mutex, Some(deadline)) };
/// assert!(timed_out);
/// assert!(mutex.is_locked());
/// // SAFETY: held again after the wait.
/// unsafe { mutex.unlock() };
/// ```
pub struct RawCondvar {
    seq: Futex,
    sleepers: AtomicU32,
}

impl Default for RawCondvar {
    fn default() -> RawCondvar {
        RawCondvar::new()
    }
}

impl fmt::Debug for RawCondvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawCondvar").finish_non_exhaustive()
    }
}

impl RawCondvar {
    crate::futex::sys::const_fn! {
        /// A condition variable with no waiters.
        #[must_use]
        pub const fn new() -> RawCondvar {
            RawCondvar {
                seq: Futex::new(0),
                sleepers: AtomicU32::new(0),
            }
        }
    }

    /// Wakes one waiter, if any. A notify with nobody waiting is not remembered.
    pub fn notify_one(&self) {
        self.notify(1);
    }

    /// Wakes all waiters.
    pub fn notify_all(&self) {
        self.notify(i32::MAX as u32);
    }

    fn notify(&self, n: u32) {
        self.seq.fetch_add(1, Ordering::Relaxed);
        // A read-modify-write, not a load: it orders this notify against the waiters' adds
        // (module documentation, "notify").
        if self.sleepers.fetch_add(0, Ordering::AcqRel) == 0 {
            crate::spin::notified(0);
        } else if let Ok(woken) = self.seq.wake(n) {
            // The woken stop counting now: they do not take their counts back themselves.
            self.sleepers.fetch_sub(woken as u32, Ordering::Relaxed);
            crate::spin::notified(woken);
        }
    }

    /// Unlocks `mutex`, waits for a notify, a spurious wakeup or `deadline`, and locks `mutex`
    /// again. Returns whether the deadline passed without a notify.
    ///
    /// # Safety
    ///
    /// The calling thread must hold `mutex`; it holds it again when this returns.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub unsafe fn wait(&self, mutex: &RawMutex, deadline: Option<Deadline>) -> bool {
        // Read under the lock: any notify this wait is owed comes after it.
        let seq = self.seq.load(Ordering::Relaxed);
        // SAFETY: the caller holds the lock.
        unsafe { mutex.unlock() };
        // A notify seen while spinning ends the wait as a wake would; the spinner is not among
        // `sleepers`, so that notify made no syscall.
        if crate::spin::spin_for_notify(deadline, || self.seq.load(Ordering::Relaxed) != seq) {
            mutex.lock();
            return false;
        }
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        // Woken, spuriously or not, or `seq` changed before the sleep: either way this wait is
        // over (spurious wakeups are allowed; callers re-check their condition).
        let result = self.seq.wait(seq, deadline);
        if result.is_err() {
            // Not woken (`seq` changed first, or the deadline passed): no notify counted it.
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
        }
        mutex.lock();
        result == Err(Error::TimedOut)
    }
}
