//! [`SharedMutex`]: a process-shared, robust mutex with a value, over [`RawSharedMutex`].

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::{Acquired, RawSharedMutex};
use crate::shared::plain::{self, Plain};
use crate::shared::LockError;

/// A process-shared mutex guarding a [`Plain`] value, robust against a holder's death: the next
/// thread to lock it, in any process, gets [`LockError::OwnerDied`] with the guard, repairs the
/// value and calls [`mark_consistent`](SharedMutexGuard::mark_consistent).
///
/// It lives in a [`Region`](crate::shared::Region) (or, with [`from_ptr`](Self::from_ptr),
/// in memory the caller mapped). `#[repr(C)]`: a [`RawSharedMutex`] (40 bytes), then the value.
/// The value is copied in and out of the shared memory ([`get`](SharedMutexGuard::get),
/// [`set`](SharedMutexGuard::set), [`update`](SharedMutexGuard::update)), never lent out as a
/// reference: another process may write it at any moment, whatever the lock says, and a copy
/// made with atomic accesses is sound whatever it writes.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().mutex("hits", 0u64).build()?;
/// let hits = region.mutex::<u64>("hits")?;
/// hits.lock().unwrap().update(|n| *n += 1);
/// assert_eq!(hits.lock().unwrap().get(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedMutex<T: Plain> {
    raw: RawSharedMutex,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only copied in and out with atomic accesses, by the thread holding the
// lock (or, unsoundly for nobody, by a peer process that ignores it); `T: Plain` holds no
// pointers, so it means the same in every thread and process.
unsafe impl<T: Plain> Sync for SharedMutex<T> {}

impl<T: Plain> SharedMutex<T> {
    crate::futex::sys::const_fn! {
        /// An unlocked mutex holding `value`, to be placed in shared memory by the caller (a
        /// [`Region`](crate::shared::Region) does this itself).
        ///
        /// # Safety
        ///
        /// As [`RawSharedMutex::new`]: from the first lock until it is dropped, the mutex
        /// stays at its address and its memory is not freed without dropping it (a leaked
        /// guard included).
        pub const unsafe fn new(value: T) -> SharedMutex<T> {
            SharedMutex {
                // SAFETY: the caller's promise, passed on.
                raw: unsafe { RawSharedMutex::new() },
                value: UnsafeCell::new(value),
            }
        }
    }

    /// Uses the mutex at `ptr`, in memory the caller mapped and initialized with a
    /// [`SharedMutex::new`] value.
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::from_ptr`], for `size_of::<SharedMutex<T>>()` bytes aligned for it:
    /// every process maps it as a `SharedMutex<T>` of the same `T` and touches it only through
    /// one, or atomically.
    pub unsafe fn from_ptr<'a>(ptr: *const SharedMutex<T>) -> &'a SharedMutex<T> {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Blocks until this thread holds the lock.
    ///
    /// # Errors
    ///
    /// [`LockError::OwnerDied`] (the lock is held: repair and mark consistent),
    /// [`LockError::NotRecoverable`], [`LockError::WouldDeadlock`],
    /// [`LockError::Unsupported`], [`LockError::Futex`].
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn lock(&self) -> Result<SharedMutexGuard<'_, T>, LockError<SharedMutexGuard<'_, T>>> {
        self.guard(self.raw.lock())
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`LockError::WouldBlock`] if another thread holds it; otherwise as [`lock`](Self::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock(&self) -> Result<SharedMutexGuard<'_, T>, LockError<SharedMutexGuard<'_, T>>> {
        self.guard(self.raw.try_lock())
    }

    /// Blocks until this thread holds the lock or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`LockError::TimedOut`]; otherwise as [`lock`](Self::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(
        &self,
        timeout: Duration,
    ) -> Result<SharedMutexGuard<'_, T>, LockError<SharedMutexGuard<'_, T>>> {
        self.guard(self.raw.try_lock_until(Deadline::after(timeout)))
    }

    /// Blocks until this thread holds the lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`LockError::TimedOut`]; otherwise as [`lock`](Self::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(
        &self,
        deadline: Instant,
    ) -> Result<SharedMutexGuard<'_, T>, LockError<SharedMutexGuard<'_, T>>> {
        self.guard(self.raw.try_lock_until(Deadline::at(deadline)))
    }

    /// Whether some thread holds the lock now (a snapshot).
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// Whether the lock can never be taken again.
    pub fn is_not_recoverable(&self) -> bool {
        self.raw.is_not_recoverable()
    }

    /// The lock without the value.
    pub fn raw(&self) -> &RawSharedMutex {
        &self.raw
    }

    pub(crate) fn guard_for(&self) -> SharedMutexGuard<'_, T> {
        SharedMutexGuard {
            mutex: self,
            _not_send: PhantomData,
        }
    }

    fn guard(
        &self,
        taken: Result<Acquired, crate::raw::RawLockError>,
    ) -> Result<SharedMutexGuard<'_, T>, LockError<SharedMutexGuard<'_, T>>> {
        match taken? {
            Acquired::Consistent => Ok(self.guard_for()),
            Acquired::OwnerDied => Err(LockError::OwnerDied(self.guard_for())),
        }
    }
}

impl<T: Plain + fmt::Debug> fmt::Debug for SharedMutex<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SharedMutex");
        match self.try_lock() {
            Ok(guard) => d.field("value", &guard.get()),
            Err(LockError::OwnerDied(guard)) => {
                d.field("value", &guard.get()).field("owner_died", &true);
                // Not marked consistent: a look must not make it unrecoverable.
                guard.release_keeping_death();
                &mut d
            }
            Err(LockError::NotRecoverable) => d.field("not_recoverable", &true),
            Err(LockError::WouldBlock | LockError::WouldDeadlock | LockError::TimedOut) => {
                d.field("value", &format_args!("<locked>"))
            }
            // This thread cannot look (no robust list, a refused futex call): say why.
            Err(err) => d.field("value", &format_args!("<{err}>")),
        };
        d.finish_non_exhaustive()
    }
}

/// Holds a [`SharedMutex`] until dropped; the value is copied in and out (`get`, `set`,
/// `update`). Not `Send`: the thread that took the lock releases it (the kernel tracks it in
/// that thread's robust list).
#[must_use = "if unused the SharedMutex will immediately unlock"]
pub struct SharedMutexGuard<'a, T: Plain> {
    mutex: &'a SharedMutex<T>,
    _not_send: PhantomData<*const ()>,
}

impl<'a, T: Plain> SharedMutexGuard<'a, T> {
    /// A copy of the value.
    pub fn get(&self) -> T {
        // SAFETY: the value lies in the mutex, which outlives the guard; it is only accessed
        // atomically (the `SharedMutex` contract), and `T: Plain`.
        unsafe { plain::load(self.mutex.value.get()) }
    }

    /// Replaces the value.
    pub fn set(&mut self, value: T) {
        // SAFETY: as in `get`.
        unsafe { plain::store(self.mutex.value.get(), &value) }
    }

    /// Copies the value out, lets `f` change the copy, and copies it back; returns what `f`
    /// returns.
    pub fn update<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut value = self.get();
        let result = f(&mut value);
        self.set(value);
        result
    }

    /// Marks the lock consistent after [`LockError::OwnerDied`]: the value is repaired, and
    /// dropping the guard releases the lock as usual. Without it, dropping the guard makes the
    /// lock not recoverable.
    pub fn mark_consistent(&mut self) {
        // SAFETY: this thread holds the lock; the mutex outlives the guard.
        unsafe { self.mutex.raw.mark_consistent() };
    }

    /// The address of the value, for code that accesses it in place.
    ///
    /// Reading or writing through it is `unsafe`: only with atomic accesses (or plain ones
    /// where no other process can write the memory meanwhile), and only while the guard lives.
    pub fn as_ptr(&self) -> *mut T {
        self.mutex.value.get()
    }

    /// The mutex this guard holds.
    pub fn mutex(&self) -> &'a SharedMutex<T> {
        self.mutex
    }

    /// Releases the lock with a death it records left as it was, for a look (`Debug`) that
    /// took the lock and changed nothing.
    fn release_keeping_death(self) {
        let raw = &self.mutex.raw;
        core::mem::forget(self);
        // SAFETY: this thread holds the lock (the guard said so, and is forgotten, so it does
        // not unlock again); the mutex stays mapped for the guard's lifetime, which this call is
        // within.
        unsafe { raw.unlock_untouched() };
    }
}

impl<T: Plain> Drop for SharedMutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread holds the lock; the mutex lives in memory that stays mapped for
        // the guard's lifetime, which this call is within.
        unsafe { self.mutex.raw.unlock() };
    }
}

impl<T: Plain + fmt::Debug> fmt::Debug for SharedMutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedMutexGuard")
            .field("value", &self.get())
            .finish()
    }
}
