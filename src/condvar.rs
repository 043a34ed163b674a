//! A condition variable with `std::sync::Condvar`'s API and contract, on one futex word.
//!
//! ## State
//!
//! | field      | meaning                                   | changed by |
//! |------------|-------------------------------------------|------------|
//! | `seq`      | futex word: how many notifies there have been (wrapping) | every notify adds 1 |
//! | `sleepers` | waiters about to sleep on `seq`, or asleep | a waiter adds 1 before its sleep and takes it back after |
//!
//! Nothing refers to the mutex: a Condvar may be used with any mutex, one after another, and a
//! `(Mutex, Condvar)` pair may move between waits, as with std.
//!
//! ## Protocol
//!
//! * **wait**: read `seq` while still holding the mutex, unlock, add to `sleepers`, sleep on
//!   `seq` while it holds the value read, take `sleepers` back, and relock. A notify that comes after
//!   the unlock (the only ones a waiter is owed: the notifier changed the condition under the
//!   mutex after this waiter released it) changes `seq` after it was read, so the sleep returns
//!   at once or is woken. Only equality is compared: a waiter would have to sleep through
//!   exactly 2^32 notifies to miss one, each of which wakes it.
//! * **notify**: add 1 to `seq`, then wake one (`notify_one`) or all (`notify_all`) sleepers,
//!   making the wake syscall only if `sleepers` is not 0. The notifier reads `sleepers` with a
//!   read-modify-write (adding 0), as the waiter writes it with one (adding 1), both
//!   acquire-release: the two are ordered in `sleepers`' modification order, and each reads the
//!   latest value. If the notifier's comes second, it sees the sleeper and wakes it. If the
//!   waiter's comes second, it synchronizes with the notifier's, so the notifier's earlier add
//!   to `seq` happens before the waiter's sleep compares `seq` (in the kernel), which then
//!   sees the new value and does not sleep. Either way the waiter is not lost.
//! * `notify_all` wakes every sleeper at once, so that they run as soon as CPUs can take them;
//!   they then meet on the mutex, whose spin and one-wake-per-unlock keep that orderly.
//!
//! A wait does not spin before it sleeps: a notify is often far off, and on a machine with
//! more runnable threads than CPUs a spinning waiter takes the CPU from the very thread that
//! would notify it (`docs/design.md`, "Spinning").

use core::fmt;
use std::sync::{LockResult, PoisonError};
use std::time::{Duration, Instant};

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Deadline, Error, Futex};
use crate::mutex::{MutexGuard, RawMutex};

/// A condition variable: `std::sync::Condvar`'s API, behaviour and size class (8 bytes).
///
/// Works with [`futexkit::Mutex`](crate::Mutex) guards, with any mutex in turn. As with std,
/// spurious wakeups can happen: wait in a loop or with [`wait_while`](Condvar::wait_while).
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use futexkit::{Condvar, Mutex};
///
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let pair2 = Arc::clone(&pair);
/// thread::spawn(move || {
///     let (lock, cvar) = &*pair2;
///     *lock.lock().unwrap() = true;
///     cvar.notify_one();
/// });
/// let (lock, cvar) = &*pair;
/// let started = cvar.wait_while(lock.lock().unwrap(), |started| !*started).unwrap();
/// assert!(*started);
/// ```
pub struct Condvar {
    seq: Futex,
    sleepers: AtomicU32,
}

/// Whether a timed wait on a [`Condvar`] returned because its time ran out (as std's).
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// True if the wait ended because the timeout elapsed.
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}

impl Condvar {
    /// A condition variable with no waiters.
    #[cfg(not(model))]
    #[must_use]
    pub const fn new() -> Condvar {
        Condvar {
            seq: Futex::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    /// A condition variable with no waiters (not `const` under a model checker).
    #[cfg(model)]
    #[must_use]
    pub fn new() -> Condvar {
        Condvar {
            seq: Futex::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    /// Unlocks the guard's mutex, blocks until notified (or spuriously woken), and locks it
    /// again. Returns the guard, as an error if the mutex was poisoned meanwhile.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding the guard if the mutex is poisoned when this thread relocks
    /// it.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        self.wait_raw(guard.raw(), None);
        guard.relocked()
    }

    /// Waits until `condition` returns false, re-checking it under the lock after every
    /// wakeup (so spurious wakeups are absorbed).
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// As [`wait`](Condvar::wait), giving up after about `timeout`. The result says whether
    /// the time ran out (a notify may still have arrived meanwhile: check the condition).
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait), with the timeout result beside the guard.
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let timed_out = self.wait_raw(guard.raw(), Some(Deadline::after(timeout)));
        match guard.relocked() {
            Ok(guard) => Ok((guard, WaitTimeoutResult(timed_out))),
            Err(poisoned) => Err(PoisonError::new((
                poisoned.into_inner(),
                WaitTimeoutResult(timed_out),
            ))),
        }
    }

    /// Waits until `condition` returns false or `timeout` has passed in all, recomputing the
    /// time left after every wakeup. The result's `timed_out()` is true if the condition still
    /// held when the time ran out.
    ///
    /// # Errors
    ///
    /// As [`wait_timeout`](Condvar::wait_timeout).
    pub fn wait_timeout_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        let start = Instant::now();
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            let Some(left) = timeout.checked_sub(start.elapsed()) else {
                return Ok((guard, WaitTimeoutResult(true)));
            };
            guard = self.wait_timeout(guard, left)?.0;
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
        if self.sleepers.fetch_add(0, Ordering::AcqRel) != 0 {
            let _ = self.seq.wake(n);
        }
    }

    /// Unlocks `raw` (held by this thread), waits for a notify, a spurious wakeup or
    /// `deadline`, and relocks. Returns whether the deadline passed without a notify.
    fn wait_raw(&self, raw: &RawMutex, deadline: Option<Deadline>) -> bool {
        // Read under the lock: any notify this wait is owed comes after it.
        let seq = self.seq.load(Ordering::Relaxed);
        // SAFETY: the guard this came from proves this thread holds the lock.
        unsafe { raw.unlock() };
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        // Woken, spuriously or not, or `seq` changed before the sleep: either way this wait is
        // over (spurious wakeups are allowed; callers re-check their condition).
        let result = self.seq.wait(seq, deadline);
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        raw.lock();
        result == Err(Error::TimedOut)
    }
}
