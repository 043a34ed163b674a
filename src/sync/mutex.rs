//! `std::sync::Mutex`'s API over [`RawMutex`] (the protocol is there): the data, poisoning and
//! the guard.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{LockResult, PoisonError, TryLockResult};
use std::time::{Duration, Instant};

use super::poison;
use crate::raw::RawMutex;

/// A mutual-exclusion lock: `std::sync::Mutex`'s API, behaviour and size (8 bytes for
/// `Mutex<()>`), plus [`try_lock_for`](Mutex::try_lock_for) and
/// [`try_lock_until`](Mutex::try_lock_until).
///
/// Poisoning works as in std: a guard dropped while its thread panics marks the mutex
/// poisoned, and later locks return the guard inside a [`PoisonError`](std::sync::PoisonError).
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use futexkit::Mutex;
///
/// let counter = Arc::new(Mutex::new(0));
/// let handles: Vec<_> = (0..4)
///     .map(|_| {
///         let counter = Arc::clone(&counter);
///         thread::spawn(move || {
///             for _ in 0..1000 {
///                 *counter.lock().unwrap() += 1;
///             }
///         })
///     })
///     .collect();
/// for h in handles {
///     h.join().unwrap();
/// }
/// assert_eq!(*counter.lock().unwrap(), 4000);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: as std: the lock gives one thread at a time access to `T`, so moving `T` between
// threads (`T: Send`) is all that sharing the mutex requires.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T: ?Sized> UnwindSafe for Mutex<T> {}
impl<T: ?Sized> RefUnwindSafe for Mutex<T> {}

/// A held lock on a [`Mutex`]; dereferences to the data, unlocks on drop.
///
/// Like std's guard it is `!Send` (unlocking belongs to the locking thread) and `Sync` when
/// `T: Sync`:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let m = futexkit::Mutex::new(0);
/// send(m.lock().unwrap());
/// ```
///
/// `#[must_use]`, as std's: a guard dropped where it is made unlocks at once, and the compiler
/// says so (here the lint is denied):
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let lock = futexkit::sync::Mutex::new(0);
/// lock.lock().unwrap();
/// ```
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a Mutex<T>,
    poison: poison::Guard,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, which is fine to share when `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    crate::futex::sys::const_fn! {
        /// A new unlocked mutex holding `value`.
        pub const fn new(value: T) -> Mutex<T> {
            Mutex {
                raw: RawMutex::new(),
                poison: poison::Flag::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the mutex and returns the data.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the data if the mutex is poisoned.
    pub fn into_inner(self) -> LockResult<T> {
        self.poison.result(self.data.into_inner())
    }

    /// A clone of the value, taken under the lock (std's nightly `lock_value_accessors`, on
    /// stable here).
    ///
    /// ```
    /// let mutex = futexkit::sync::Mutex::new(7);
    /// assert_eq!(mutex.get_cloned().unwrap(), 7);
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] (holding nothing) if the mutex is poisoned.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn get_cloned(&self) -> Result<T, PoisonError<()>>
    where
        T: Clone,
    {
        match self.lock() {
            Ok(guard) => Ok((*guard).clone()),
            Err(_) => Err(PoisonError::new(())),
        }
    }

    /// Sets the value under the lock; the old one is dropped after the lock is released.
    ///
    /// ```
    /// let mutex = futexkit::sync::Mutex::new(7);
    /// mutex.set(11).unwrap();
    /// assert_eq!(mutex.get_cloned().unwrap(), 11);
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding `value`, not stored, if the mutex is poisoned.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn set(&self, value: T) -> Result<(), PoisonError<T>> {
        self.replace(value).map(drop)
    }

    /// Puts `value` in under the lock and returns the value it replaces.
    ///
    /// ```
    /// let mutex = futexkit::sync::Mutex::new(7);
    /// assert_eq!(mutex.replace(11).unwrap(), 7);
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding `value`, not stored, if the mutex is poisoned.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn replace(&self, value: T) -> LockResult<T> {
        match self.lock() {
            Ok(mut guard) => Ok(core::mem::replace(&mut *guard, value)),
            Err(_) => Err(PoisonError::new(value)),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Blocks until this thread holds the lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if another thread panicked
    /// while holding the lock.
    ///
    /// # Panics
    ///
    /// Locking a mutex this thread already holds deadlocks (as std may); with the `deadlock`
    /// feature it panics instead (the `deadlock` module).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.raw.lock();
        self.guard()
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`](std::sync::TryLockError::WouldBlock) if another thread holds it; [`TryLockError::Poisoned`](std::sync::TryLockError::Poisoned) as
    /// for [`lock`](Mutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        poison::try_result(self.raw.try_lock(), || self.guard())
    }

    /// Blocks until this thread holds the lock or `timeout` has passed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use std::sync::TryLockError;
    /// use futexkit::Mutex;
    ///
    /// let m = Mutex::new(1);
    /// let held = m.lock().unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         let r = m.try_lock_for(Duration::from_millis(10));
    ///         assert!(matches!(r, Err(TryLockError::WouldBlock)));
    ///     });
    /// });
    /// drop(held);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Mutex::try_lock), with `WouldBlock` meaning the time ran out.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(&self, timeout: Duration) -> TryLockResult<MutexGuard<'_, T>> {
        poison::try_result(self.raw.try_lock_for(timeout), || self.guard())
    }

    /// Blocks until this thread holds the lock or `deadline` has passed.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Mutex::try_lock_for).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(&self, deadline: Instant) -> TryLockResult<MutexGuard<'_, T>> {
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
    /// A [`PoisonError`](std::sync::PoisonError) holding the reference if the mutex is poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.result(self.data.get_mut())
    }

    /// Wraps a freshly taken lock in a guard, reporting poison.
    #[inline]
    fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        self.poison.result(MutexGuard {
            lock: self,
            poison: self.poison.guard(),
            not_send: PhantomData,
        })
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The raw lock this guard holds, for the Condvar.
    pub(crate) fn raw(&self) -> &'a RawMutex {
        &self.lock.raw
    }

    /// This guard as a fresh lock reports it (inside a
    /// [`PoisonError`](std::sync::PoisonError) if the mutex is poisoned), for the Condvar's relock.
    pub(crate) fn relocked(self) -> LockResult<MutexGuard<'a, T>> {
        let lock = self.lock;
        lock.poison.result(self)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As std's Mutex prints it (a quoted placeholder, unlike its RwLock).
        super::debug_lock(f, "Mutex", self.try_lock(), self.is_poisoned(), &"<locked>")
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves this thread holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves this thread holds the lock, and `&mut self` that this is the
        // only access through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(self.poison);
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { self.lock.raw.unlock() };
    }
}

super::lock_impls!(Mutex; MutexGuard);
