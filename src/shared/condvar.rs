//! [`SharedCondvar`]: a process-shared condition variable, over [`RawSharedCondvar`].

use core::fmt;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::{Acquired, RawSharedCondvar};
use crate::shared::{LockError, Plain, SharedMutexGuard};
use crate::sync::WaitTimeoutResult;

/// A process-shared condition variable, waited on with a [`SharedMutex`](crate::shared::SharedMutex)'s
/// guard (any shared mutex, one after another). A notifier killed at any instruction either
/// notified or did not, and a waiter killed while it waits costs the others nothing but a
/// system call per notify: no death strands a waiter. 8 bytes, `#[repr(C)]`.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().mutex("jobs", 0u32).condvar("more").build()?;
/// let (jobs, more) = (region.mutex::<u32>("jobs")?, region.condvar("more")?);
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         jobs.lock().unwrap().set(1);
///         more.notify_one();
///     });
///     let mut guard = jobs.lock().unwrap();
///     while guard.get() == 0 {
///         guard = more.wait(guard).unwrap();
///     }
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedCondvar {
    raw: RawSharedCondvar,
}

impl SharedCondvar {
    crate::futex::sys::const_fn! {
        /// A condition variable with no waiters, to be placed in shared memory by the caller.
        #[must_use]
        pub const fn new() -> SharedCondvar {
            SharedCondvar {
                raw: RawSharedCondvar::new(),
            }
        }
    }

    /// Uses the condition variable at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedCondvar::from_ptr`].
    pub unsafe fn from_ptr<'a>(ptr: *const SharedCondvar) -> &'a SharedCondvar {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Wakes one waiter, if any.
    pub fn notify_one(&self) {
        self.raw.notify_one();
    }

    /// Wakes all waiters.
    pub fn notify_all(&self) {
        self.raw.notify_all();
    }

    /// Releases the guard's mutex, waits for a notify (or a spurious wakeup: one at least every
    /// 100 ms, so check the condition in a loop), and locks it again. Waiting with a guard that
    /// came with [`LockError::OwnerDied`] and was not marked consistent releases the mutex as not
    /// recoverable, as every unlock does.
    ///
    /// # Errors
    ///
    /// What [`SharedMutex::lock`](crate::shared::SharedMutex::lock) returns when relocking.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait<'a, T: Plain>(
        &self,
        guard: SharedMutexGuard<'a, T>,
    ) -> Result<SharedMutexGuard<'a, T>, LockError<SharedMutexGuard<'a, T>>> {
        self.wait_deadline(guard, None)
            .map(|(guard, _)| guard)
            .map_err(|err| err.map_guard(|(guard, _)| guard))
    }

    /// As [`wait`](Self::wait), until `timeout` passes at the latest: the relock too, so that
    /// no other process can keep this call past its deadline (unlike std's `wait_timeout`,
    /// whose relock has no deadline).
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait); [`LockError::TimedOut`] if the mutex could not be retaken by
    /// the deadline: the guard is gone then, and the mutex not held.
    #[allow(clippy::type_complexity)]
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait_timeout<'a, T: Plain>(
        &self,
        guard: SharedMutexGuard<'a, T>,
        timeout: Duration,
    ) -> Result<
        (SharedMutexGuard<'a, T>, WaitTimeoutResult),
        LockError<(SharedMutexGuard<'a, T>, WaitTimeoutResult)>,
    > {
        self.wait_deadline(guard, Some(Deadline::after(timeout)))
    }

    /// As [`wait_timeout`](Self::wait_timeout), until `deadline` at the latest.
    ///
    /// # Errors
    ///
    /// As [`wait_timeout`](Self::wait_timeout).
    #[allow(clippy::type_complexity)]
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait_until<'a, T: Plain>(
        &self,
        guard: SharedMutexGuard<'a, T>,
        deadline: Instant,
    ) -> Result<
        (SharedMutexGuard<'a, T>, WaitTimeoutResult),
        LockError<(SharedMutexGuard<'a, T>, WaitTimeoutResult)>,
    > {
        self.wait_deadline(guard, Some(Deadline::at(deadline)))
    }

    #[allow(clippy::type_complexity)]
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn wait_deadline<'a, T: Plain>(
        &self,
        guard: SharedMutexGuard<'a, T>,
        deadline: Option<Deadline>,
    ) -> Result<
        (SharedMutexGuard<'a, T>, WaitTimeoutResult),
        LockError<(SharedMutexGuard<'a, T>, WaitTimeoutResult)>,
    > {
        let mutex = guard.mutex();
        // The wait releases and retakes the lock itself; the guard stands for the retaken one.
        core::mem::forget(guard);
        // SAFETY: this thread holds `mutex` (the guard said so); both live in memory that
        // stays mapped for 'a, beyond this call.
        let (acquired, timed_out) = unsafe { self.raw.wait(mutex.raw(), deadline) }?;
        let result = (mutex.guard_for(), WaitTimeoutResult(timed_out));
        match acquired {
            Acquired::Consistent => Ok(result),
            Acquired::OwnerDied => Err(LockError::OwnerDied(result)),
        }
    }
}

impl Default for SharedCondvar {
    fn default() -> SharedCondvar {
        SharedCondvar::new()
    }
}

impl fmt::Debug for SharedCondvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCondvar").finish_non_exhaustive()
    }
}
