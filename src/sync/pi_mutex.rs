//! A priority-inheritance mutex with `std::sync::Mutex`'s API over [`RawPiMutex`] (the
//! protocol is there): the data, poisoning and the guard.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{LockResult, TryLockResult};
use std::time::{Duration, Instant};

use super::poison;
use crate::raw::{PiUnsupported, RawPiMutex};

/// A mutual-exclusion lock whose holder inherits the priority of the threads it blocks, as a
/// `PTHREAD_PRIO_INHERIT` pthread mutex: a real-time thread waiting for it lends its priority
/// to the holder, so a thread of middle priority cannot keep the holder, and with it the
/// waiter, off the CPU (priority inversion). The kernel does the lending (`FUTEX_LOCK_PI`); a
/// lock and an unlock nobody waits for are one CAS each, as in [`Mutex`](crate::sync::Mutex).
///
/// It has std's API and poisoning, with two differences. [`new`](PiMutex::new) is fallible
/// and not `const`: it refuses ([`PiUnsupported`]) where the kernel lacks PI futexes, as
/// `pthread_mutex_init` does, so a program finds out at start rather than at the first
/// contended lock (put a static one in a [`LazyLock`](std::sync::LazyLock)). And locking it
/// again from the thread that holds it panics (the kernel reports the deadlock) where std's may
/// hang. Waiters are let in by priority, then in arrival order, and never spin.
///
/// ```
/// use futexkit::sync::PiMutex;
///
/// let samples = PiMutex::new(Vec::new()).expect("the kernel has PI futexes");
/// std::thread::scope(|s| {
///     for id in 0..4 {
///         let samples = &samples;
///         s.spawn(move || samples.lock().unwrap().push(id));
///     }
/// });
/// assert_eq!(samples.lock().unwrap().len(), 4);
/// ```
pub struct PiMutex<T: ?Sized> {
    raw: RawPiMutex,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: as std's Mutex: the lock gives one thread at a time access to `T`.
unsafe impl<T: ?Sized + Send> Send for PiMutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for PiMutex<T> {}

impl<T: ?Sized> UnwindSafe for PiMutex<T> {}
impl<T: ?Sized> RefUnwindSafe for PiMutex<T> {}

/// A held lock on a [`PiMutex`]; dereferences to the data, unlocks on drop. `!Send`: the
/// kernel knows the holder by its thread id, so only that thread may unlock.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let m = futexkit::sync::PiMutex::new(0).unwrap();
/// send(m.lock().unwrap());
/// ```
#[must_use = "if unused the PiMutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct PiMutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a PiMutex<T>,
    poison: poison::Guard,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, which is fine to share when `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for PiMutexGuard<'_, T> {}

impl<T> PiMutex<T> {
    /// A new unlocked mutex holding `value`, if the kernel has PI futexes (probed once per
    /// process).
    ///
    /// # Errors
    ///
    /// [`PiUnsupported`] where the kernel lacks them (or `FUTEXKIT_DISABLE` names `pi`).
    pub fn new(value: T) -> Result<PiMutex<T>, PiUnsupported> {
        Ok(PiMutex {
            raw: RawPiMutex::new()?,
            poison: poison::Flag::new(),
            data: UnsafeCell::new(value),
        })
    }

    /// Consumes the mutex and returns the data.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the data if the mutex is poisoned.
    pub fn into_inner(self) -> LockResult<T> {
        self.poison.result(self.data.into_inner())
    }
}

impl<T: ?Sized> PiMutex<T> {
    /// Blocks until this thread holds the lock, lending the holder this thread's priority
    /// while it waits.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if another thread panicked
    /// while holding the lock.
    ///
    /// # Panics
    ///
    /// If this thread holds the lock already, or the thread that held it exited without
    /// unlocking (its guard forgotten) while nobody waited; what else such an exit leaves is
    /// in [`RawPiMutex::lock`](crate::raw::RawPiMutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn lock(&self) -> LockResult<PiMutexGuard<'_, T>> {
        self.raw.lock();
        self.guard()
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`](std::sync::TryLockError::WouldBlock) if a thread holds
    /// it (this one included); [`TryLockError::Poisoned`](std::sync::TryLockError::Poisoned)
    /// as for [`lock`](PiMutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock(&self) -> TryLockResult<PiMutexGuard<'_, T>> {
        poison::try_result(self.raw.try_lock(), || self.guard())
    }

    /// Blocks until this thread holds the lock or `timeout` has passed.
    ///
    /// Before Linux 5.14 (no `FUTEX_LOCK_PI2`) the kernel measures a PI lock's timeout on the
    /// realtime clock, as glibc's `pthread_mutex_timedlock` does there: the deadline is converted
    /// once, so a wall clock set back during the wait lengthens it by as much, and one set
    /// forward shortens it.
    ///
    /// # Errors
    ///
    /// As [`try_lock`](PiMutex::try_lock), with `WouldBlock` meaning the time ran out.
    ///
    /// # Panics
    ///
    /// As [`lock`](PiMutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(&self, timeout: Duration) -> TryLockResult<PiMutexGuard<'_, T>> {
        poison::try_result(self.raw.try_lock_for(timeout), || self.guard())
    }

    /// Blocks until this thread holds the lock or `deadline` has passed (before Linux 5.14, as
    /// measured on the realtime clock: see [`try_lock_for`](PiMutex::try_lock_for)).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](PiMutex::try_lock_for).
    ///
    /// # Panics
    ///
    /// As [`lock`](PiMutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(&self, deadline: Instant) -> TryLockResult<PiMutexGuard<'_, T>> {
        poison::try_result(self.raw.try_lock_until(deadline), || self.guard())
    }

    /// Whether a thread panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poisoned flag.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// Mutable access without locking: the borrow proves no one else holds the lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the reference if the mutex is
    /// poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.result(self.data.get_mut())
    }

    /// Wraps a freshly taken lock in a guard, reporting poison.
    fn guard(&self) -> LockResult<PiMutexGuard<'_, T>> {
        self.poison.result(PiMutexGuard {
            lock: self,
            poison: self.poison.guard(),
            not_send: PhantomData,
        })
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for PiMutex<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::debug_lock(
            f,
            "PiMutex",
            self.try_lock(),
            self.is_poisoned(),
            &"<locked>",
        )
    }
}

impl<T: ?Sized> Deref for PiMutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard proves this thread holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for PiMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves this thread holds the lock, and `&mut self` that this is the
        // only access through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for PiMutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(self.poison);
        // SAFETY: the guard exists only while this thread holds the lock (it is `!Send`).
        unsafe { self.lock.raw.unlock() };
    }
}

super::lock_impls!(guards: PiMutexGuard);
