//! Poisoning as std's locks do it, shared by [`Mutex`](crate::sync::Mutex) and
//! [`RwLock`](crate::sync::RwLock): a lock is poisoned when a thread that held it for writing
//! began to panic while holding it, and every later lock reports that until it is cleared.
//!
//! The flag is read and written `Relaxed`: it is only ever set by a holder before it unlocks and
//! read by a thread after it has locked, so the lock's own release and acquire order it.

use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

/// Whether a holder panicked.
#[derive(Debug)]
pub(crate) struct Flag(AtomicBool);

/// Taken with the lock: whether this thread was already panicking then. Only a panic that
/// starts while the lock is held poisons it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guard {
    panicking: bool,
}

impl Flag {
    #[inline]
    pub(crate) const fn new() -> Flag {
        Flag(AtomicBool::new(false))
    }

    #[inline]
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn clear(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    /// For a lock just taken.
    #[inline]
    pub(crate) fn guard(&self) -> Guard {
        Guard {
            panicking: std::thread::panicking(),
        }
    }

    /// For a lock about to be released (or downgraded): poisons if this thread began to panic
    /// since `guard` was taken.
    #[inline]
    pub(crate) fn done(&self, guard: Guard) {
        if !guard.panicking && std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// `value` (a guard, the data, a reference to it) as std reports it: inside a
    /// [`PoisonError`] if the flag is set.
    #[inline]
    pub(crate) fn result<T>(&self, value: T) -> LockResult<T> {
        if self.get() {
            Err(PoisonError::new(value))
        } else {
            Ok(value)
        }
    }
}

/// A try-lock's answer: [`TryLockError::WouldBlock`] unless the lock was `taken`, else what
/// `locked` reports (the guard, or the guard inside a poison error).
#[inline]
pub(crate) fn try_result<G>(
    taken: bool,
    locked: impl FnOnce() -> LockResult<G>,
) -> TryLockResult<G> {
    if taken {
        Ok(locked()?)
    } else {
        Err(TryLockError::WouldBlock)
    }
}
