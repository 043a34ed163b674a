//! With the `lock_api` feature: lock_api's raw lock traits for futexkit's raw locks, so that
//! `lock_api::Mutex<futexkit::raw::RawMutex, T>` (and the RwLock) work as parking_lot's do.

use std::time::{Duration, Instant};

use super::{RawMutex, RawRwLock};

// SAFETY: `lock` and the `try_lock*` that return true give this thread exclusive ownership until
// `unlock` (Acquire on taking, Release on releasing), which is lock_api's contract.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex::new();
    type GuardMarker = lock_api::GuardNoSend;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock(&self) {
        RawMutex::lock(self);
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock(&self) -> bool {
        RawMutex::try_lock(self)
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: lock_api calls this only for a lock the caller holds.
        unsafe { RawMutex::unlock(self) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        RawMutex::is_locked(self)
    }
}

// SAFETY: `unlock_fair` releases the caller's lock as `unlock` does (handing it to a sleeper is
// a release to that thread, with the same ordering); lock_api's default `bump` relocks.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawMutexFair for RawMutex {
    #[inline]
    unsafe fn unlock_fair(&self) {
        // SAFETY: lock_api calls this only for a lock the caller holds.
        unsafe { RawMutex::unlock_fair(self) }
    }
}

// SAFETY: as for `lock_api::RawMutex`; the timed variants give ownership only when they return
// true.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_for(&self, timeout: Duration) -> bool {
        RawMutex::try_lock_for(self, timeout)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_until(&self, deadline: Instant) -> bool {
        RawMutex::try_lock_until(self, deadline)
    }
}

// SAFETY: `read`/`try_read` give shared ownership and `write`/`try_write` exclusive ownership
// until the matching unlock (Acquire on taking, Release on releasing), which is lock_api's
// contract.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLock for RawRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawRwLock = RawRwLock::new();
    type GuardMarker = lock_api::GuardNoSend;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock_shared(&self) {
        self.read();
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_shared(&self) -> bool {
        self.try_read()
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        // SAFETY: lock_api calls this only for a read lock the caller holds.
        unsafe { self.read_unlock() }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock_exclusive(&self) {
        self.write();
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.try_write()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        // SAFETY: lock_api calls this only for the write lock the caller holds.
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
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockDowngrade for RawRwLock {
    #[inline]
    unsafe fn downgrade(&self) {
        // SAFETY: lock_api calls this only for the write lock the caller holds.
        unsafe { RawRwLock::downgrade(self) }
    }
}

// SAFETY: as for `lock_api::RawRwLock`; the timed variants give ownership only when they
// return true.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockTimed for RawRwLock {
    type Duration = Duration;
    type Instant = Instant;

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_shared_for(&self, timeout: Duration) -> bool {
        self.try_read_for(timeout)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_shared_until(&self, deadline: Instant) -> bool {
        self.try_read_until(deadline)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_exclusive_for(&self, timeout: Duration) -> bool {
        self.try_write_for(timeout)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_exclusive_until(&self, deadline: Instant) -> bool {
        self.try_write_until(deadline)
    }
}

// SAFETY: `lock_upgradable`/`try_lock_upgradable` give shared ownership that excludes writers
// and other upgradable readers until `unlock_upgradable` (Acquire, Release); `upgrade` and a
// successful `try_upgrade` turn it into exclusive ownership once the other readers have left,
// acquiring from their releases, with no writer in between.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockUpgrade for RawRwLock {
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn lock_upgradable(&self) {
        self.upgradable_read();
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_upgradable(&self) -> bool {
        self.try_upgradable_read()
    }

    #[inline]
    unsafe fn unlock_upgradable(&self) {
        // SAFETY: lock_api calls this only for the upgradable read the caller holds.
        unsafe { self.upgradable_unlock() }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn upgrade(&self) {
        // SAFETY: as above.
        unsafe { RawRwLock::upgrade(self) }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn try_upgrade(&self) -> bool {
        // SAFETY: as above.
        unsafe { RawRwLock::try_upgrade(self) }
    }
}

// SAFETY: both downgrades change the caller's mode atomically, with no writer in between.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockUpgradeDowngrade for RawRwLock {
    #[inline]
    unsafe fn downgrade_upgradable(&self) {
        // SAFETY: lock_api calls this only for the upgradable read the caller holds.
        unsafe { RawRwLock::downgrade_upgradable(self) }
    }

    #[inline]
    unsafe fn downgrade_to_upgradable(&self) {
        // SAFETY: lock_api calls this only for the write lock the caller holds.
        unsafe { RawRwLock::downgrade_to_upgradable(self) }
    }
}

// SAFETY: as for `lock_api::RawRwLockUpgrade`; the timed variants give ownership (or the
// upgrade) only when they return true, and a failed upgrade leaves the upgradable read held.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockUpgradeTimed for RawRwLock {
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_upgradable_for(&self, timeout: Duration) -> bool {
        self.try_upgradable_read_for(timeout)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn try_lock_upgradable_until(&self, deadline: Instant) -> bool {
        self.try_upgradable_read_until(deadline)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn try_upgrade_for(&self, timeout: Duration) -> bool {
        // SAFETY: lock_api calls this only for the upgradable read the caller holds.
        unsafe { RawRwLock::try_upgrade_for(self, timeout) }
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    unsafe fn try_upgrade_until(&self, deadline: Instant) -> bool {
        // SAFETY: as above.
        unsafe { RawRwLock::try_upgrade_until(self, deadline) }
    }
}

// SAFETY: the fair unlocks release the caller's lock as the plain ones do (a read phase that
// hands the lock to sleeping readers is a release to them, with the same ordering); lock_api's
// default `bump_*` relock.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockFair for RawRwLock {
    #[inline]
    unsafe fn unlock_shared_fair(&self) {
        // SAFETY: lock_api calls this only for a read lock the caller holds. The last reader
        // out already keeps the lock from new readers for the writer it wakes.
        unsafe { self.read_unlock() }
    }

    #[inline]
    unsafe fn unlock_exclusive_fair(&self) {
        // SAFETY: lock_api calls this only for the write lock the caller holds.
        unsafe { self.write_unlock_fair() }
    }
}

// SAFETY: as for `lock_api::RawRwLockFair`.
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
unsafe impl lock_api::RawRwLockUpgradeFair for RawRwLock {
    #[inline]
    unsafe fn unlock_upgradable_fair(&self) {
        // SAFETY: lock_api calls this only for the upgradable read the caller holds.
        unsafe { self.upgradable_unlock() }
    }
}
