//! `std::sync::Condvar`'s API over [`RawCondvar`](crate::raw::RawCondvar) (the protocol is
//! there): waits take and give back a [`MutexGuard`], as std's.

use core::fmt;
use std::sync::{LockResult, PoisonError};
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::RawCondvar;
use crate::sync::MutexGuard;

/// A condition variable: `std::sync::Condvar`'s API and behaviour, in 8 bytes (std's is 4).
///
/// Works with [`futexkit::sync::Mutex`](crate::sync::Mutex) guards, with any mutex in turn. As with std,
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
    raw: RawCondvar,
}

/// Whether a timed wait on a [`Condvar`] returned because its time ran out (as std's).
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult(pub(crate) bool);

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
    crate::futex::sys::const_fn! {
        /// A condition variable with no waiters.
        #[must_use]
        pub const fn new() -> Condvar {
            Condvar {
                raw: RawCondvar::new(),
            }
        }
    }

    /// Unlocks the guard's mutex, blocks until notified (or spuriously woken), and locks it
    /// again. Returns the guard, as an error if the mutex was poisoned meanwhile.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding the guard if the mutex is poisoned when this thread relocks
    /// it.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        self.wait_raw(&guard, None);
        guard.relocked()
    }

    /// Waits until `condition` returns false, re-checking it under the lock after every
    /// wakeup (so spurious wakeups are absorbed).
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait).
    #[cfg_attr(feature = "deadlock", track_caller)]
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
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let timed_out = self.wait_raw(&guard, Some(Deadline::after(timeout)));
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
    #[cfg_attr(feature = "deadlock", track_caller)]
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
        self.raw.notify_one();
    }

    /// Wakes all waiters.
    pub fn notify_all(&self) {
        self.raw.notify_all();
    }

    /// Waits on the raw condition variable with the guard's mutex; returns whether the deadline
    /// passed without a notify.
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn wait_raw<T: ?Sized>(&self, guard: &MutexGuard<'_, T>, deadline: Option<Deadline>) -> bool {
        // SAFETY: the guard proves this thread holds the mutex; the wait returns with it held
        // again, so the guard stays true.
        unsafe { self.raw.wait(guard.raw(), deadline) }
    }
}
