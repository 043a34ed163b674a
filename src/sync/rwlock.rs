//! `std::sync::RwLock`'s API over [`RawRwLock`] (the protocol is there): the data, poisoning
//! and the guards.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{LockResult, PoisonError, TryLockResult};
use std::time::{Duration, Instant};

use super::poison;
use crate::raw::RawRwLock;

/// A reader-writer lock: `std::sync::RwLock`'s API and behaviour, smaller than std's
/// (8 bytes for `RwLock<()>`), plus timed variants ([`try_read_for`](RwLock::try_read_for),
/// [`try_write_until`](RwLock::try_write_until), ...) and a
/// [`downgrade`](RwLockWriteGuard::downgrade) that works on the oldest supported toolchain.
///
/// Neither side starves: a waiting writer keeps new readers out (as std's), and readers that
/// wait while writers come one after another get the lock between two writers.
///
/// Poisoning works as in std: a write guard dropped while its thread panics marks the lock
/// poisoned (a read guard does not), and later locks return the guard inside a
/// [`PoisonError`](std::sync::PoisonError).
///
/// ```
/// use futexkit::sync::RwLock;
///
/// let lock = RwLock::new(5);
/// {
///     let r1 = lock.read().unwrap();
///     let r2 = lock.read().unwrap();
///     assert_eq!(*r1 + *r2, 10);
/// }
/// {
///     let mut w = lock.write().unwrap();
///     *w += 1;
/// }
/// assert_eq!(*lock.read().unwrap(), 6);
/// ```
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: as std: moving the lock moves `T`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as std: readers share `&T` across threads (`T: Sync`), a writer gets `&mut T` from
// any thread (`T: Send`).
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

impl<T: ?Sized> UnwindSafe for RwLock<T> {}
impl<T: ?Sized> RefUnwindSafe for RwLock<T> {}

/// A read lock on a [`RwLock`]; dereferences to the data, unlocks on drop. `!Send`, as std's.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let lock = futexkit::sync::RwLock::new(0);
/// send(lock.read().unwrap());
/// ```
///
/// `#[must_use]`, as std's: a guard dropped where it is made unlocks at once, and the compiler
/// says so (here the lint is denied):
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let lock = futexkit::sync::RwLock::new(0);
/// lock.read().unwrap();
/// ```
///
/// Covariant in `T`, as std's: a guard of `&'static str` is a guard of `&'a str`. So it holds
/// the data as a pointer, not the `&RwLock<T>` (invariant in `T`) the write guard holds; the
/// pointer also makes it `!Send`, and `UnwindSafe` exactly when `T: RefUnwindSafe`, as std's.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    /// The lock's data; valid for reads for `'a`, while this guard holds the read lock.
    data: NonNull<T>,
    raw: &'a RawRwLock,
}

// SAFETY: a shared read guard gives `&T`, fine to share when `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

/// The write lock on a [`RwLock`]; dereferences to the data, unlocks on drop. `!Send`, as
/// std's.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let lock = futexkit::sync::RwLock::new(0);
/// send(lock.write().unwrap());
/// ```
///
/// `#[must_use]`, as std's: a guard dropped where it is made unlocks at once, and the compiler
/// says so (here the lint is denied):
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let lock = futexkit::sync::RwLock::new(0);
/// lock.write().unwrap();
/// ```
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    poison: poison::Guard,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared write guard gives `&T`, fine to share when `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    crate::futex::sys::const_fn! {
        /// A new unlocked lock holding `value`.
        pub const fn new(value: T) -> RwLock<T> {
            RwLock {
                raw: RawRwLock::new(),
                poison: poison::Flag::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the lock and returns the data.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the data if the lock is poisoned.
    pub fn into_inner(self) -> LockResult<T> {
        self.poison.result(self.data.into_inner())
    }

    /// A clone of the value, taken under a read lock (std's nightly `lock_value_accessors`, on
    /// stable here).
    ///
    /// ```
    /// let lock = futexkit::sync::RwLock::new(7);
    /// assert_eq!(lock.get_cloned().unwrap(), 7);
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] (holding nothing) if the lock is poisoned.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn get_cloned(&self) -> Result<T, PoisonError<()>>
    where
        T: Clone,
    {
        match self.read() {
            Ok(guard) => Ok((*guard).clone()),
            Err(_) => Err(PoisonError::new(())),
        }
    }

    /// Sets the value under a write lock; the old one is dropped after the lock is released.
    ///
    /// ```
    /// let lock = futexkit::sync::RwLock::new(7);
    /// lock.set(11).unwrap();
    /// assert_eq!(lock.get_cloned().unwrap(), 11);
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding `value`, not stored, if the lock is poisoned.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn set(&self, value: T) -> Result<(), PoisonError<T>> {
        self.replace(value).map(drop)
    }

    /// Puts `value` in under a write lock and returns the value it replaces.
    ///
    /// ```
    /// let lock = futexkit::sync::RwLock::new(7);
    /// assert_eq!(lock.replace(11).unwrap(), 7);
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding `value`, not stored, if the lock is poisoned.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn replace(&self, value: T) -> LockResult<T> {
        match self.write() {
            Ok(mut guard) => Ok(core::mem::replace(&mut *guard, value)),
            Err(_) => Err(PoisonError::new(value)),
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Blocks until this thread holds a read lock (shared with other readers).
    ///
    /// A thread that already holds a read lock must not take another while a writer may be
    /// waiting: the writer keeps new readers out, so this can deadlock (as std's may).
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if a writer panicked while
    /// holding the lock.
    ///
    /// # Panics
    ///
    /// If the lock already has the most readers it can count (2^25 - 2).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        self.raw.read();
        self.read_guard()
    }

    /// Takes a read lock if one can be had now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`](std::sync::TryLockError::WouldBlock) if a writer holds the lock or waits for it;
    /// [`TryLockError::Poisoned`](std::sync::TryLockError::Poisoned) as for [`read`](RwLock::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        poison::try_result(self.raw.try_read(), || self.read_guard())
    }

    /// Blocks until this thread holds a read lock or `timeout` has passed.
    ///
    /// # Errors
    ///
    /// As [`try_read`](RwLock::try_read), with `WouldBlock` meaning the time ran out.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_for(&self, timeout: Duration) -> TryLockResult<RwLockReadGuard<'_, T>> {
        poison::try_result(self.raw.try_read_for(timeout), || self.read_guard())
    }

    /// Blocks until this thread holds a read lock or `deadline` has passed.
    ///
    /// # Errors
    ///
    /// As [`try_read_for`](RwLock::try_read_for).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_until(&self, deadline: Instant) -> TryLockResult<RwLockReadGuard<'_, T>> {
        poison::try_result(self.raw.try_read_until(deadline), || self.read_guard())
    }

    /// Blocks until this thread holds the write lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if a writer panicked while
    /// holding the lock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        self.raw.write();
        self.write_guard()
    }

    /// Takes the write lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`](std::sync::TryLockError::WouldBlock) if any thread holds the lock; [`TryLockError::Poisoned`](std::sync::TryLockError::Poisoned) as
    /// for [`write`](RwLock::write).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        poison::try_result(self.raw.try_write(), || self.write_guard())
    }

    /// Blocks until this thread holds the write lock or `timeout` has passed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use std::sync::TryLockError;
    /// use futexkit::sync::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// let reader = lock.read().unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         let r = lock.try_write_for(Duration::from_millis(10));
    ///         assert!(matches!(r, Err(TryLockError::WouldBlock)));
    ///     });
    /// });
    /// drop(reader);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_write`](RwLock::try_write), with `WouldBlock` meaning the time ran out.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_for(&self, timeout: Duration) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        poison::try_result(self.raw.try_write_for(timeout), || self.write_guard())
    }

    /// Blocks until this thread holds the write lock or `deadline` has passed.
    ///
    /// # Errors
    ///
    /// As [`try_write_for`](RwLock::try_write_for).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_until(&self, deadline: Instant) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        poison::try_result(self.raw.try_write_until(deadline), || self.write_guard())
    }

    /// Whether a writer panicked while holding the lock.
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
    /// A [`PoisonError`](std::sync::PoisonError) holding the reference if the lock is poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.result(self.data.get_mut())
    }

    #[inline]
    fn read_guard(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        self.poison.result(RwLockReadGuard::new(self))
    }

    #[inline]
    fn write_guard(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        self.poison.result(RwLockWriteGuard {
            lock: self,
            poison: self.poison.guard(),
            not_send: PhantomData,
        })
    }
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Turns the write lock into a read lock without letting a writer in between, as std's
    /// `RwLockWriteGuard::downgrade`. Readers waiting are woken to share it. Poison: a panic
    /// before the downgrade poisons as any write guard's; the read guard cannot poison.
    ///
    /// ```
    /// use futexkit::sync::{RwLock, RwLockWriteGuard};
    ///
    /// let lock = RwLock::new(1);
    /// let mut w = lock.write().unwrap();
    /// *w = 2;
    /// let r = RwLockWriteGuard::downgrade(w);
    /// assert_eq!(*r, 2);
    /// assert!(lock.try_write().is_err());
    /// assert_eq!(*lock.try_read().unwrap(), 2);
    /// ```
    pub fn downgrade(guard: RwLockWriteGuard<'a, T>) -> RwLockReadGuard<'a, T> {
        let lock = guard.lock;
        lock.poison.done(guard.poison);
        core::mem::forget(guard);
        // SAFETY: the guard (now forgotten, so its drop does not unlock) proved this thread
        // holds the write lock; the new read guard owns the read lock it becomes.
        unsafe { lock.raw.downgrade() };
        RwLockReadGuard::new(lock)
    }
}

impl<'a, T: ?Sized> RwLockReadGuard<'a, T> {
    /// The guard of a read lock this thread holds on `lock`.
    #[inline]
    fn new(lock: &'a RwLock<T>) -> RwLockReadGuard<'a, T> {
        RwLockReadGuard {
            // SAFETY: `UnsafeCell::get` of a live lock points into it: never null.
            data: unsafe { NonNull::new_unchecked(lock.data.get()) },
            raw: &lock.raw,
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As std's RwLock prints it (an unquoted placeholder, unlike its Mutex).
        let locked = format_args!("<locked>");
        super::debug_lock(f, "RwLock", self.try_read(), self.is_poisoned(), &locked)
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: `data` points into the lock (`new`), and the guard proves this thread holds a
        // read lock: no writer has `&mut T`.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves this thread holds the write lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves this thread holds the write lock, and `&mut self` that this
        // is the only access through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard exists only while this thread holds a read lock.
        unsafe { self.raw.read_unlock() };
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(self.poison);
        // SAFETY: the guard exists only while this thread holds the write lock.
        unsafe { self.lock.raw.write_unlock() };
    }
}

super::lock_impls!(RwLock; RwLockReadGuard, RwLockWriteGuard);
