//! With the `lock_api_05` feature: lock_api 0.5's raw traits for futexkit's raw locks and
//! condition variable, so that `lock_api_05::Mutex<futexkit::raw::RawMutex, T>`, its RwLock
//! and its `Condvar<futexkit::raw::RawCondvar>` work as parking_lot 0.13's types do.
//!
//! The locks keep no state per acquisition: every guard state is lock_api's `GuardNoSend`
//! (a lock is released by the thread that took it, as with std's guards).

use std::time::{Duration, Instant};

use lock_api_05 as lock_api;
use lock_api_05::GuardNoSend;

use super::{RawCondvar, RawMutex, RawRwLock};
use crate::futex::Deadline;

// SAFETY: `lock` and the `try_lock*` that return a guard give this thread exclusive ownership
// until `unlock` (Acquire on taking, Release on releasing). None of them unwinds. Dropping or
// forgetting a `GuardNoSend` does nothing, and a lock may be moved or dropped while held: it
// is one word and owns nothing.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex::new();
    type Guard = GuardNoSend;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock(&self) -> GuardNoSend {
        RawMutex::lock(self);
        GuardNoSend::new()
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock(&self) -> Option<GuardNoSend> {
        RawMutex::try_lock(self).then(GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of an acquisition the caller holds.
        unsafe { RawMutex::unlock(self) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        RawMutex::is_locked(self)
    }
}

// SAFETY: `unlock_fair` releases the caller's lock as `unlock` does (handing it to a sleeper is
// a release to that thread, with the same ordering); lock_api's default `bump` relocks.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawMutexFair for RawMutex {
    #[inline]
    unsafe fn unlock_fair(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of an acquisition the caller holds.
        unsafe { RawMutex::unlock_fair(self) }
    }
}

// SAFETY: as for `RawMutex`; the timed variants give ownership only when they return a guard.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_for(&self, timeout: Duration) -> Option<GuardNoSend> {
        RawMutex::try_lock_for(self, timeout).then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_until(&self, deadline: Instant) -> Option<GuardNoSend> {
        RawMutex::try_lock_until(self, deadline).then(GuardNoSend::new)
    }
}

// SAFETY: `RawCondvar::wait` reads the notify sequence while the caller still holds the
// mutex, then unlocks: a notify made after the unlock changes the sequence it sleeps on, so
// unlocking and starting to wait are atomic with respect to notifies (`src/raw/condvar.rs`).
// It relocks before it returns and never unwinds; the guard state is stateless and stays
// valid. Any `RawMutex` works, one after another or at once. Wakeups may be spurious, so the
// notify methods report `false` and `0`, as the trait requires.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawCondvar for RawCondvar {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawCondvar = RawCondvar::new();
    type RawMutex = RawMutex;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn wait(&self, mutex: &RawMutex, _guard: &mut GuardNoSend) {
        // SAFETY: lock_api's caller holds `mutex`.
        unsafe { RawCondvar::wait(self, mutex, None) };
    }

    #[inline]
    fn notify_one(&self) -> bool {
        RawCondvar::notify_one(self);
        false
    }

    #[inline]
    fn notify_all(&self) -> usize {
        RawCondvar::notify_all(self);
        0
    }
}

// SAFETY: as for `RawCondvar`; a timed wait reports a timeout only once its deadline passed.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawCondvarTimed for RawCondvar {
    #[inline]
    fn checked_duration_to_instant(timeout: &Duration) -> Option<Instant> {
        Instant::now().checked_add(*timeout)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn wait_until(
        &self,
        mutex: &RawMutex,
        _guard: &mut GuardNoSend,
        deadline: &Instant,
    ) -> bool {
        // SAFETY: lock_api's caller holds `mutex`.
        unsafe { RawCondvar::wait(self, mutex, Some(Deadline::at(*deadline))) }
    }
}

// SAFETY: `lock_shared`/`try_lock_shared*` give shared ownership and `lock_exclusive`/
// `try_lock_exclusive*` exclusive ownership until the matching unlock (Acquire on taking,
// Release on releasing); only `lock_shared` can panic (a reader count overflow), before it
// takes anything; the guard states are stateless.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLock for RawRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawRwLock = RawRwLock::new();
    type SharedGuard = GuardNoSend;
    type ExclusiveGuard = GuardNoSend;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock_shared(&self) -> GuardNoSend {
        self.read();
        GuardNoSend::new()
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_shared(&self) -> Option<GuardNoSend> {
        self.try_read().then(GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of a read lock the caller holds.
        unsafe { self.read_unlock() }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock_exclusive(&self) -> GuardNoSend {
        self.write();
        GuardNoSend::new()
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_exclusive(&self) -> Option<GuardNoSend> {
        self.try_write().then(GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of the write lock the caller holds.
        unsafe { self.write_unlock() }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        RawRwLock::is_locked(self)
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        RawRwLock::is_locked_exclusive(self)
    }
}

// SAFETY: `downgrade` turns the caller's write lock into a read lock with no writer in between.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockDowngrade for RawRwLock {
    #[inline]
    unsafe fn downgrade(&self, _guard: GuardNoSend) -> GuardNoSend {
        // SAFETY: lock_api passes the guard state of the write lock the caller holds.
        unsafe { RawRwLock::downgrade(self) };
        GuardNoSend::new()
    }
}

// SAFETY: as for `RawRwLock`; the timed variants give ownership only when they return a guard.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockTimed for RawRwLock {
    type Duration = Duration;
    type Instant = Instant;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_shared_for(&self, timeout: Duration) -> Option<GuardNoSend> {
        self.try_read_for(timeout).then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_shared_until(&self, deadline: Instant) -> Option<GuardNoSend> {
        self.try_read_until(deadline).then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<GuardNoSend> {
        self.try_write_for(timeout).then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_exclusive_until(&self, deadline: Instant) -> Option<GuardNoSend> {
        self.try_write_until(deadline).then(GuardNoSend::new)
    }
}

// SAFETY: `lock_upgradable`/`try_lock_upgradable*` give shared ownership that excludes writers
// and other upgradable readers until `unlock_upgradable` (Acquire, Release); `upgrade` and a
// successful `try_upgrade*` turn it into exclusive ownership once the other readers have left,
// acquiring from their releases, with no writer in between; a failed one leaves the upgradable
// read held and returns its (stateless) guard state.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockUpgrade for RawRwLock {
    type UpgradableGuard = GuardNoSend;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock_upgradable(&self) -> GuardNoSend {
        self.upgradable_read();
        GuardNoSend::new()
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_upgradable(&self) -> Option<GuardNoSend> {
        self.try_upgradable_read().then(GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock_upgradable(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of the upgradable read the caller holds.
        unsafe { self.upgradable_unlock() }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn upgrade(&self, _guard: GuardNoSend) -> GuardNoSend {
        /// lock_api 0.5 has given the upgradable guard up before this call, so an upgrade that
        /// unwinds must release the upgradable read itself (the contract of
        /// `lock_api::RawRwLock`). The one panic of an upgrade, the deadlock checks' report of
        /// a thread that holds a plain read too, comes before it changes the word.
        struct ReleaseOnUnwind<'a>(&'a RawRwLock);
        impl Drop for ReleaseOnUnwind<'_> {
            fn drop(&mut self) {
                // SAFETY: dropped only by an unwind out of the upgrade, which left the
                // caller's upgradable read as it was.
                unsafe { self.0.upgradable_unlock() }
            }
        }
        let release_on_unwind = ReleaseOnUnwind(self);
        // SAFETY: as above.
        unsafe { RawRwLock::upgrade(self) };
        core::mem::forget(release_on_unwind);
        GuardNoSend::new()
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn try_upgrade(&self, guard: GuardNoSend) -> Result<GuardNoSend, GuardNoSend> {
        // SAFETY: as above.
        if unsafe { RawRwLock::try_upgrade(self) } {
            Ok(GuardNoSend::new())
        } else {
            Err(guard)
        }
    }
}

// SAFETY: both downgrades change the caller's mode atomically, with no writer in between.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockUpgradeDowngrade for RawRwLock {
    #[inline]
    unsafe fn downgrade_upgradable(&self, _guard: GuardNoSend) -> GuardNoSend {
        // SAFETY: lock_api passes the guard state of the upgradable read the caller holds.
        unsafe { RawRwLock::downgrade_upgradable(self) };
        GuardNoSend::new()
    }

    #[inline]
    unsafe fn downgrade_to_upgradable(&self, _guard: GuardNoSend) -> GuardNoSend {
        // SAFETY: lock_api passes the guard state of the write lock the caller holds.
        unsafe { RawRwLock::downgrade_to_upgradable(self) };
        GuardNoSend::new()
    }
}

// SAFETY: as for `lock_api::RawRwLockUpgrade`; the timed variants give ownership (or the
// upgrade) only when they return `Some`/`Ok`.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockUpgradeTimed for RawRwLock {
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_upgradable_for(&self, timeout: Duration) -> Option<GuardNoSend> {
        self.try_upgradable_read_for(timeout).then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_upgradable_until(&self, deadline: Instant) -> Option<GuardNoSend> {
        self.try_upgradable_read_until(deadline)
            .then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn try_upgrade_for(
        &self,
        guard: GuardNoSend,
        timeout: Duration,
    ) -> Result<GuardNoSend, GuardNoSend> {
        // SAFETY: lock_api passes the guard state of the upgradable read the caller holds.
        if unsafe { RawRwLock::try_upgrade_for(self, timeout) } {
            Ok(GuardNoSend::new())
        } else {
            Err(guard)
        }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn try_upgrade_until(
        &self,
        guard: GuardNoSend,
        deadline: Instant,
    ) -> Result<GuardNoSend, GuardNoSend> {
        // SAFETY: as above.
        if unsafe { RawRwLock::try_upgrade_until(self, deadline) } {
            Ok(GuardNoSend::new())
        } else {
            Err(guard)
        }
    }
}

// SAFETY: the fair unlocks release the caller's lock as the plain ones do (a read phase that
// hands the lock to sleeping readers is a release to them, with the same ordering); lock_api's
// default `bump_*` relock.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockFair for RawRwLock {
    #[inline]
    unsafe fn unlock_shared_fair(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of a read lock the caller holds. The last
        // reader out already keeps the lock from new readers for the writer it wakes.
        unsafe { self.read_unlock() }
    }

    #[inline]
    unsafe fn unlock_exclusive_fair(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of the write lock the caller holds.
        unsafe { self.write_unlock_fair() }
    }
}

// SAFETY: as for `lock_api::RawRwLockFair`.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
unsafe impl lock_api::RawRwLockUpgradeFair for RawRwLock {
    #[inline]
    unsafe fn unlock_upgradable_fair(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of the upgradable read the caller holds.
        unsafe { self.upgradable_unlock() }
    }
}
