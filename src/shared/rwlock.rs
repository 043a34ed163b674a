//! [`SharedRwLock`]: a process-shared, robust reader-writer lock with a value, over
//! [`RawSharedRwLock`].

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::{Acquired, RawLockError, RawSharedRwLock, ReaderSlot};
use crate::shared::plain::{self, Plain};
use crate::shared::LockError;

/// A process-shared reader-writer lock guarding a [`Plain`] value, robust against deaths: a
/// reader's death frees its place, and a writer's death is reported to the next writer, which
/// repairs the value and marks it consistent (readers that come before are told too, with
/// their guard).
///
/// Up to [`READER_SLOTS`](crate::raw::READER_SLOTS) readers hold it at once without waiting
/// for a place; waiting writers keep new readers out. `#[repr(C)]`, 64-aligned: a
/// [`RawSharedRwLock`], then the value. As with [`SharedMutex`](crate::shared::SharedMutex),
/// the value is copied in and out, never lent.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().rwlock("config", [0u32; 4]).build()?;
/// let config = region.rwlock::<[u32; 4]>("config")?;
/// config.write().unwrap().update(|c| c[0] = 7);
/// assert_eq!(config.read().unwrap().get()[0], 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedRwLock<T: Plain> {
    raw: RawSharedRwLock,
    value: UnsafeCell<T>,
}

// SAFETY: as for `SharedMutex`: the value is only copied in and out atomically, and a `Plain`
// value means the same in every thread and process.
unsafe impl<T: Plain> Sync for SharedRwLock<T> {}

type ReadResult<'a, T> =
    Result<SharedRwLockReadGuard<'a, T>, LockError<SharedRwLockReadGuard<'a, T>>>;
type WriteResult<'a, T> =
    Result<SharedRwLockWriteGuard<'a, T>, LockError<SharedRwLockWriteGuard<'a, T>>>;

impl<T: Plain> SharedRwLock<T> {
    /// An unlocked lock holding `value`, to be placed in shared memory by the caller.
    ///
    /// # Safety
    ///
    /// As [`RawSharedRwLock::new`]: from the first lock until it is dropped, the lock stays at
    /// its address and its memory is not freed without dropping it (a leaked guard included).
    pub unsafe fn new(value: T) -> SharedRwLock<T> {
        SharedRwLock {
            // SAFETY: the caller's promise, passed on.
            raw: unsafe { RawSharedRwLock::new() },
            value: UnsafeCell::new(value),
        }
    }

    /// Uses the lock at `ptr`, in memory the caller mapped and initialized with a
    /// [`SharedRwLock::new`] value.
    ///
    /// # Safety
    ///
    /// As [`SharedMutex::from_ptr`](crate::shared::SharedMutex::from_ptr).
    pub unsafe fn from_ptr<'a>(ptr: *const SharedRwLock<T>) -> &'a SharedRwLock<T> {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Blocks until this thread holds a read lock.
    ///
    /// # Errors
    ///
    /// [`LockError::OwnerDied`] with the read guard: a writer died holding the lock and no
    /// writer has marked it consistent since, so the value may be half-updated (take the write
    /// lock to repair it). Otherwise [`LockError::NotRecoverable`],
    /// [`LockError::WouldDeadlock`] (this thread holds a read or the write lock),
    /// [`LockError::Unsupported`], [`LockError::Futex`].
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn read(&self) -> ReadResult<'_, T> {
        self.read_guard(self.raw.read())
    }

    /// Takes a read lock if no writer holds or waits for it now.
    ///
    /// # Errors
    ///
    /// [`LockError::WouldBlock`]; otherwise as [`read`](Self::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read(&self) -> ReadResult<'_, T> {
        self.read_guard(self.raw.try_read())
    }

    /// Blocks until this thread holds a read lock or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`LockError::TimedOut`]; otherwise as [`read`](Self::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_for(&self, timeout: Duration) -> ReadResult<'_, T> {
        self.read_guard(self.raw.try_read_until(Deadline::after(timeout)))
    }

    /// Blocks until this thread holds a read lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`LockError::TimedOut`]; otherwise as [`read`](Self::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_until(&self, deadline: Instant) -> ReadResult<'_, T> {
        self.read_guard(self.raw.try_read_until(Deadline::at(deadline)))
    }

    /// Blocks until this thread holds the write lock.
    ///
    /// # Errors
    ///
    /// [`LockError::OwnerDied`] (the lock is held: repair and mark consistent),
    /// [`LockError::NotRecoverable`], [`LockError::WouldDeadlock`] (this thread holds a read
    /// or the write lock), [`LockError::Unsupported`], [`LockError::Futex`].
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn write(&self) -> WriteResult<'_, T> {
        self.write_guard(self.raw.write())
    }

    /// Takes the write lock if nobody holds the lock now.
    ///
    /// # Errors
    ///
    /// [`LockError::WouldBlock`]; otherwise as [`write`](Self::write).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write(&self) -> WriteResult<'_, T> {
        self.write_guard(self.raw.try_write())
    }

    /// Blocks until this thread holds the write lock or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`LockError::TimedOut`]; otherwise as [`write`](Self::write).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_for(&self, timeout: Duration) -> WriteResult<'_, T> {
        self.write_guard(self.raw.try_write_until(Deadline::after(timeout)))
    }

    /// Blocks until this thread holds the write lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`LockError::TimedOut`]; otherwise as [`write`](Self::write).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_until(&self, deadline: Instant) -> WriteResult<'_, T> {
        self.write_guard(self.raw.try_write_until(Deadline::at(deadline)))
    }

    /// Whether the lock can never be taken again.
    pub fn is_not_recoverable(&self) -> bool {
        self.raw.is_not_recoverable()
    }

    /// The lock without the value.
    pub fn raw(&self) -> &RawSharedRwLock {
        &self.raw
    }

    fn read_guard(&self, taken: Result<(ReaderSlot, Acquired), RawLockError>) -> ReadResult<'_, T> {
        let (slot, acquired) = taken?;
        let guard = SharedRwLockReadGuard {
            lock: self,
            slot,
            _not_send: PhantomData,
        };
        match acquired {
            Acquired::Consistent => Ok(guard),
            Acquired::OwnerDied => Err(LockError::OwnerDied(guard)),
        }
    }

    fn write_guard(&self, taken: Result<Acquired, RawLockError>) -> WriteResult<'_, T> {
        let guard = SharedRwLockWriteGuard {
            lock: self,
            _not_send: PhantomData,
        };
        match taken {
            Ok(Acquired::Consistent) => Ok(guard),
            Ok(Acquired::OwnerDied) => Err(LockError::OwnerDied(guard)),
            Err(err) => {
                core::mem::forget(guard);
                Err(err.into())
            }
        }
    }

    fn load(&self) -> T {
        // SAFETY: the value lies in the lock, which outlives every guard; it is only accessed
        // atomically (the `SharedRwLock` contract), and `T: Plain`.
        unsafe { plain::load(self.value.get()) }
    }
}

impl<T: Plain> fmt::Debug for SharedRwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedRwLock")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

/// A read lock on a [`SharedRwLock`], held until dropped. Not `Send`.
#[must_use = "if unused the SharedRwLock will immediately unlock"]
pub struct SharedRwLockReadGuard<'a, T: Plain> {
    lock: &'a SharedRwLock<T>,
    slot: ReaderSlot,
    _not_send: PhantomData<*const ()>,
}

impl<T: Plain> SharedRwLockReadGuard<'_, T> {
    /// A copy of the value.
    pub fn get(&self) -> T {
        self.lock.load()
    }
}

impl<T: Plain> Drop for SharedRwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread holds this read lock; the lock outlives the guard.
        unsafe { self.lock.raw.read_unlock(self.slot) };
    }
}

impl<T: Plain + fmt::Debug> fmt::Debug for SharedRwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedRwLockReadGuard")
            .field("value", &self.get())
            .finish()
    }
}

/// The write lock on a [`SharedRwLock`], held until dropped. Not `Send`.
#[must_use = "if unused the SharedRwLock will immediately unlock"]
pub struct SharedRwLockWriteGuard<'a, T: Plain> {
    lock: &'a SharedRwLock<T>,
    _not_send: PhantomData<*const ()>,
}

impl<T: Plain> SharedRwLockWriteGuard<'_, T> {
    /// A copy of the value.
    pub fn get(&self) -> T {
        self.lock.load()
    }

    /// Replaces the value.
    pub fn set(&mut self, value: T) {
        // SAFETY: as in `SharedRwLock::load`.
        unsafe { plain::store(self.lock.value.get(), &value) }
    }

    /// Copies the value out, lets `f` change the copy, and copies it back.
    pub fn update<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut value = self.get();
        let result = f(&mut value);
        self.set(value);
        result
    }

    /// Marks the lock consistent after [`LockError::OwnerDied`] (see
    /// [`SharedMutexGuard::mark_consistent`](crate::shared::SharedMutexGuard::mark_consistent)).
    pub fn mark_consistent(&mut self) {
        // SAFETY: this thread holds the write lock; the lock outlives the guard.
        unsafe { self.lock.raw.mark_consistent() };
    }

    /// The address of the value (see [`SharedMutexGuard::as_ptr`](crate::shared::SharedMutexGuard::as_ptr)).
    pub fn as_ptr(&self) -> *mut T {
        self.lock.value.get()
    }
}

impl<T: Plain> Drop for SharedRwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread holds the write lock; the lock outlives the guard.
        unsafe { self.lock.raw.write_unlock() };
    }
}

impl<T: Plain + fmt::Debug> fmt::Debug for SharedRwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedRwLockWriteGuard")
            .field("value", &self.get())
            .finish()
    }
}
