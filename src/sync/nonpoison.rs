//! Locks that do not poison, shaped as std's nightly `std::sync::nonpoison` (rust-lang/rust
//! #134645), on stable: a panic while a lock is held leaves the data as it was and the lock free,
//! and every lock and wait returns its guard directly. The protocols are the same raw ones as
//! [`futexkit::sync`](crate::sync)'s ([`RawMutex`], [`RawRwLock`], [`RawCondvar`]); only the
//! poison flag is gone.
//!
//! As in std's nightly module, a [`Condvar`] waits with a `&mut` [`MutexGuard`] and the
//! try-locks fail with [`WouldBlock`].
//!
//! ```
//! use futexkit::sync::nonpoison::{Condvar, Mutex};
//! use std::sync::Arc;
//! use std::thread;
//!
//! let pair = Arc::new((Mutex::new(false), Condvar::new()));
//! let pair2 = Arc::clone(&pair);
//! thread::spawn(move || {
//!     let (lock, ready) = &*pair2;
//!     *lock.lock() = true;
//!     ready.notify_one();
//! });
//! let (lock, ready) = &*pair;
//! let mut started = lock.lock();
//! ready.wait_while(&mut started, |started| !*started);
//! assert!(*started);
//! ```

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use super::{lock_impls, WaitTimeoutResult};
use crate::futex::Deadline;
use crate::raw::{RawCondvar, RawMutex, RawRwLock};

/// A try-lock's failure: another thread holds the lock (std's `nonpoison::WouldBlock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WouldBlock;

impl fmt::Display for WouldBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("try_lock failed because the operation would block")
    }
}

impl std::error::Error for WouldBlock {}

/// A try-lock's answer: the guard, or [`WouldBlock`].
pub type TryLockResult<Guard> = Result<Guard, WouldBlock>;

/// A mutual-exclusion lock without poisoning: [`sync::Mutex`](crate::sync::Mutex)'s protocol
/// and size, std's nightly `nonpoison::Mutex` API.
///
/// ```
/// use futexkit::sync::nonpoison::Mutex;
///
/// let hits = Mutex::new(0);
/// *hits.lock() += 1;
/// assert_eq!(hits.replace(10), 1);
/// assert_eq!(hits.get_cloned(), 10);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to `T`, so moving `T` between threads
// (`T: Send`) is all that sharing the mutex requires, as for std's.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// A held lock on a [`Mutex`]; dereferences to the data, unlocks on drop. `!Send`, as std's:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let m = futexkit::sync::nonpoison::Mutex::new(0);
/// send(m.lock());
/// ```
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a Mutex<T>,
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
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the mutex and returns the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// A clone of the value, taken under the lock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn get_cloned(&self) -> T
    where
        T: Clone,
    {
        (*self.lock()).clone()
    }

    /// Sets the value under the lock; the old one is dropped after the lock is released.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn set(&self, value: T) {
        drop(self.replace(value));
    }

    /// Puts `value` in under the lock and returns the value it replaces.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn replace(&self, value: T) -> T {
        core::mem::replace(&mut *self.lock(), value)
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Blocks until this thread holds the lock. Locking a mutex this thread already holds
    /// deadlocks; with the `deadlock` feature it panics instead (the `deadlock` module).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.raw.lock();
        self.guard()
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] if another thread holds it.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        self.raw.try_lock().then(|| self.guard()).ok_or(WouldBlock)
    }

    /// Takes the lock, waiting at most about `timeout` (beyond std).
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] if another thread still held it when the time ran out.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(&self, timeout: Duration) -> TryLockResult<MutexGuard<'_, T>> {
        self.raw
            .try_lock_for(timeout)
            .then(|| self.guard())
            .ok_or(WouldBlock)
    }

    /// Takes the lock, waiting until `deadline` at most (beyond std).
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] if another thread still held it at the deadline.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(&self, deadline: Instant) -> TryLockResult<MutexGuard<'_, T>> {
        self.raw
            .try_lock_until(deadline)
            .then(|| self.guard())
            .ok_or(WouldBlock)
    }

    /// Mutable access without locking: the borrow proves no one else holds the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    #[inline]
    fn guard(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            lock: self,
            not_send: PhantomData,
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(guard) => d.field("data", &&*guard),
            Err(WouldBlock) => d.field("data", &"<locked>"),
        };
        d.finish_non_exhaustive()
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
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { self.lock.raw.unlock() };
    }
}

lock_impls!(Mutex; MutexGuard);

/// A reader-writer lock without poisoning: [`sync::RwLock`](crate::sync::RwLock)'s protocol
/// and size, std's nightly `nonpoison::RwLock` API.
///
/// ```
/// use futexkit::sync::nonpoison::RwLock;
///
/// let config = RwLock::new(String::from("v1"));
/// assert_eq!(*config.read(), "v1");
/// config.write().push_str(".1");
/// assert_eq!(config.get_cloned(), "v1.1");
/// ```
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    data: UnsafeCell<T>,
}

// SAFETY: as std's: writers move `T` between threads (`Send`), readers share it (`Sync`).
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// A held read lock on a [`RwLock`]; dereferences to the data, unlocks on drop.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a read guard only gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

/// A held write lock on a [`RwLock`]; dereferences to the data, unlocks on drop.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared write guard only gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    crate::futex::sys::const_fn! {
        /// A new unlocked lock holding `value`.
        pub const fn new(value: T) -> RwLock<T> {
            RwLock {
                raw: RawRwLock::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the lock and returns the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// A clone of the value, taken under a read lock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn get_cloned(&self) -> T
    where
        T: Clone,
    {
        (*self.read()).clone()
    }

    /// Sets the value under a write lock; the old one is dropped after the lock is released.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn set(&self, value: T) {
        drop(self.replace(value));
    }

    /// Puts `value` in under a write lock and returns the value it replaces.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn replace(&self, value: T) -> T {
        core::mem::replace(&mut *self.write(), value)
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Blocks until this thread holds a read lock (shared with other readers). New readers
    /// wait behind a waiting writer, so a thread that reads again while it reads can deadlock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.raw.read();
        self.read_guard()
    }

    /// Takes a read lock if no writer holds or awaits the lock now.
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] otherwise.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        self.raw
            .try_read()
            .then(|| self.read_guard())
            .ok_or(WouldBlock)
    }

    /// Takes a read lock, waiting at most about `timeout` (beyond std).
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] if the time ran out first.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_for(&self, timeout: Duration) -> TryLockResult<RwLockReadGuard<'_, T>> {
        self.raw
            .try_read_for(timeout)
            .then(|| self.read_guard())
            .ok_or(WouldBlock)
    }

    /// Blocks until this thread holds the write lock (exclusive).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.raw.write();
        self.write_guard()
    }

    /// Takes the write lock if the lock is free now.
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] otherwise.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        self.raw
            .try_write()
            .then(|| self.write_guard())
            .ok_or(WouldBlock)
    }

    /// Takes the write lock, waiting at most about `timeout` (beyond std).
    ///
    /// # Errors
    ///
    /// [`WouldBlock`] if the time ran out first.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_for(&self, timeout: Duration) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        self.raw
            .try_write_for(timeout)
            .then(|| self.write_guard())
            .ok_or(WouldBlock)
    }

    /// Mutable access without locking: the borrow proves no one else holds the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    #[inline]
    fn read_guard(&self) -> RwLockReadGuard<'_, T> {
        RwLockReadGuard {
            lock: self,
            not_send: PhantomData,
        }
    }

    #[inline]
    fn write_guard(&self) -> RwLockWriteGuard<'_, T> {
        RwLockWriteGuard {
            lock: self,
            not_send: PhantomData,
        }
    }
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Turns the write lock into a read lock with no writer in between.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn downgrade(guard: RwLockWriteGuard<'a, T>) -> RwLockReadGuard<'a, T> {
        let lock = guard.lock;
        core::mem::forget(guard);
        // SAFETY: the forgotten write guard proved this thread holds the write lock, and now
        // nothing will release it as a write lock.
        unsafe { lock.raw.downgrade() };
        lock.read_guard()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(guard) => d.field("data", &&*guard),
            Err(WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves this thread holds a read lock: no writer can run.
        unsafe { &*self.lock.data.get() }
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
        unsafe { self.lock.raw.read_unlock() };
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard exists only while this thread holds the write lock.
        unsafe { self.lock.raw.write_unlock() };
    }
}

lock_impls!(RwLock; RwLockReadGuard, RwLockWriteGuard);

/// A condition variable for [`nonpoison::Mutex`](Mutex): [`sync::Condvar`](crate::sync::Condvar)'s
/// protocol, std's nightly `nonpoison::Condvar` API, whose waits take the guard by `&mut` and
/// leave it locked again. Spurious wakeups can happen: wait in a loop or with
/// [`wait_while`](Condvar::wait_while).
pub struct Condvar {
    raw: RawCondvar,
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
    /// again before it returns.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait<T: ?Sized>(&self, guard: &mut MutexGuard<'_, T>) {
        self.wait_raw(guard, None);
    }

    /// Waits until `condition` returns false, re-checking it under the lock after every wakeup.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait_while<T: ?Sized, F>(&self, guard: &mut MutexGuard<'_, T>, mut condition: F)
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut **guard) {
            self.wait(guard);
        }
    }

    /// As [`wait`](Condvar::wait), giving up after about `timeout`; says whether the time ran
    /// out (a notify may still have arrived meanwhile: check the condition).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait_timeout<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
    ) -> WaitTimeoutResult {
        WaitTimeoutResult(self.wait_raw(guard, Some(Deadline::after(timeout))))
    }

    /// Waits until `condition` returns false or `timeout` has passed in all; `timed_out()` is
    /// true if the condition still held when the time ran out.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn wait_timeout_while<T: ?Sized, F>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
        mut condition: F,
    ) -> WaitTimeoutResult
    where
        F: FnMut(&mut T) -> bool,
    {
        let start = Instant::now();
        loop {
            if !condition(&mut **guard) {
                return WaitTimeoutResult(false);
            }
            let Some(left) = timeout.checked_sub(start.elapsed()) else {
                return WaitTimeoutResult(true);
            };
            self.wait_timeout(guard, left);
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

    /// Waits on the raw condition variable with the guard's mutex; returns whether the
    /// deadline passed without a notify.
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn wait_raw<T: ?Sized>(&self, guard: &MutexGuard<'_, T>, deadline: Option<Deadline>) -> bool {
        // SAFETY: the guard proves this thread holds the mutex; the wait returns with it held
        // again, so the guard stays true.
        unsafe { self.raw.wait(&guard.lock.raw, deadline) }
    }
}
