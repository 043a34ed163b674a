//! parking_lot 0.13's API over futexkit's protocols (feature `lock_api_05`): a program written
//! against `parking_lot` switches by changing the path `parking_lot` to `futexkit::parking_lot`.
//!
//! Every type here is what parking_lot's is, lock_api 0.5's wrapper, with futexkit's raw type
//! inside: `Mutex<T>` is `lock_api::Mutex<futexkit::raw::RawMutex, T>`, and so on. So the
//! guards, mapped guards, `Arc` guards, `lock()` without `unwrap`, `Condvar::wait(&mut guard)`,
//! timed locks, `unlock_fair`, `bump` and the `const fn new` for statics are lock_api's, exactly
//! as parking_lot users know them.
//!
//! ```
//! use futexkit::parking_lot::{Condvar, Mutex, ReentrantMutex, RwLock};
//! use std::sync::Arc;
//!
//! static HITS: Mutex<u64> = Mutex::new(0);
//! *HITS.lock() += 1;
//!
//! let pair = Arc::new((Mutex::new(false), Condvar::new()));
//! let waiter = {
//!     let pair = Arc::clone(&pair);
//!     std::thread::spawn(move || {
//!         let (ready, cv) = &*pair;
//!         let mut ready = ready.lock();
//!         cv.wait_while(&mut ready, |ready| !*ready);
//!     })
//! };
//! *pair.0.lock() = true;
//! pair.1.notify_one();
//! waiter.join().unwrap();
//!
//! let config = RwLock::new(String::from("v1"));
//! config.write().push_str(".1");
//! assert_eq!(*config.read(), "v1.1");
//!
//! let nested = ReentrantMutex::new(3);
//! let outer = nested.lock();
//! let inner = nested.lock(); // the same thread: no deadlock
//! assert_eq!(*outer + *inner, 6);
//! ```
//!
//! What parking_lot has and this module has not (yet): recursive reads (`read_recursive`),
//! `RecursiveRwLock`, and parking_lot's `Once` (use `std::sync::Once` or `OnceLock`). A fair
//! unlock of the [`RwLock`] hands the lock to the readers asleep, else to one writer asleep;
//! a fair read unlock is a plain one.
//! As with parking_lot, [`Condvar`] waits on [`Mutex`]'s guards only, not on [`FairMutex`]'s.
//! Unlike parking_lot's, no guard is `Send` (there is no `send_guard` feature): a lock is
//! released by the thread that took it.

use core::num::NonZeroUsize;
use std::time::{Duration, Instant};

use lock_api_05::GuardNoSend;

pub use lock_api_05 as lock_api;
pub use lock_api_05::{
    ArcMutexGuard, ArcReentrantMutexGuard, ArcRwLockReadGuard, ArcRwLockUpgradableReadGuard,
    ArcRwLockWriteGuard, WaitTimeoutResult,
};

pub use crate::raw::{RawCondvar, RawMutex, RawRwLock};

/// A mutual-exclusion lock: parking_lot's `Mutex`, over futexkit's [`RawMutex`].
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;
/// A held [`Mutex`].
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;
/// A held [`Mutex`], narrowed to part of the data by `MutexGuard::map`.
pub type MappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMutex, T>;

/// A mutex whose every unlock is fair: parking_lot's `FairMutex`, over [`RawFairMutex`].
pub type FairMutex<T> = lock_api::Mutex<RawFairMutex, T>;
/// A held [`FairMutex`].
pub type FairMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawFairMutex, T>;
/// A held [`FairMutex`], narrowed to part of the data.
pub type MappedFairMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawFairMutex, T>;

/// A mutex the holding thread may lock again: parking_lot's `ReentrantMutex`.
pub type ReentrantMutex<T> = lock_api::ReentrantMutex<RawMutex, RawThreadId, T>;
/// A held [`ReentrantMutex`] (shared access only, as the same thread may hold it twice).
pub type ReentrantMutexGuard<'a, T> = lock_api::ReentrantMutexGuard<'a, RawMutex, RawThreadId, T>;
/// A held [`ReentrantMutex`], narrowed to part of the data.
pub type MappedReentrantMutexGuard<'a, T> =
    lock_api::MappedReentrantMutexGuard<'a, RawMutex, RawThreadId, T>;

/// A reader-writer lock: parking_lot's `RwLock`, over futexkit's [`RawRwLock`] (neither
/// readers nor writers starve; `src/raw/rwlock.rs`).
pub type RwLock<T> = lock_api::RwLock<RawRwLock, T>;
/// A read lock on a [`RwLock`].
pub type RwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawRwLock, T>;
/// The write lock on a [`RwLock`].
pub type RwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawRwLock, T>;
/// The upgradable read on a [`RwLock`]: shared with readers, exclusive of writers and other
/// upgradable readers, and able to become the write lock with no writer in between.
pub type RwLockUpgradableReadGuard<'a, T> = lock_api::RwLockUpgradableReadGuard<'a, RawRwLock, T>;
/// A read lock on a [`RwLock`], narrowed to part of the data.
pub type MappedRwLockReadGuard<'a, T> = lock_api::MappedRwLockReadGuard<'a, RawRwLock, T>;
/// The write lock on a [`RwLock`], narrowed to part of the data.
pub type MappedRwLockWriteGuard<'a, T> = lock_api::MappedRwLockWriteGuard<'a, RawRwLock, T>;

/// A condition variable for [`Mutex`]'s guards: parking_lot's `Condvar`, over futexkit's
/// [`RawCondvar`]. Wakeups may be spurious (wait in a loop, or with `wait_while`), so
/// `notify_one` returns `false` and `notify_all` 0.
pub type Condvar = lock_api::Condvar<RawCondvar>;

/// [`RawMutex`] with every unlock fair ([`RawMutex::unlock_fair`]): while threads sleep in an
/// untimed lock, each unlock hands the lock to one of them, and a thread that has not waited
/// yet cannot take it (the order among the sleepers is the kernel's wake order, not a strict
/// queue: see `unlock_fair`). It costs a wake-up's latency per contended unlock, during which
/// nobody holds the lock usefully; [`Mutex`] hands off only to a sleeper that was woken without
/// the lock and asked for it, which is usually still spinning for it.
#[derive(Debug, Default)]
pub struct RawFairMutex(RawMutex);

// SAFETY: every operation is `RawMutex`'s, which is a lock_api 0.5 `RawMutex`
// (`src/raw/lock_api_05.rs`); `unlock` is its `unlock_fair`, a release as `unlock` is.
unsafe impl lock_api::RawMutex for RawFairMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawFairMutex = RawFairMutex(RawMutex::new());
    type Guard = GuardNoSend;

    #[cfg_attr(feature = "deadlock", track_caller)]
    fn lock(&self) -> GuardNoSend {
        self.0.lock();
        GuardNoSend::new()
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    fn try_lock(&self) -> Option<GuardNoSend> {
        self.0.try_lock().then(GuardNoSend::new)
    }

    unsafe fn unlock(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of an acquisition the caller holds.
        unsafe { self.0.unlock_fair() }
    }

    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

// SAFETY: as above; `unlock_fair` is `unlock`.
unsafe impl lock_api::RawMutexFair for RawFairMutex {
    unsafe fn unlock_fair(&self, _guard: GuardNoSend) {
        // SAFETY: lock_api passes the guard state of an acquisition the caller holds.
        unsafe { self.0.unlock_fair() }
    }
}

// SAFETY: as above; the timed variants give ownership only when they return a guard.
unsafe impl lock_api::RawMutexTimed for RawFairMutex {
    type Duration = Duration;
    type Instant = Instant;

    #[cfg_attr(feature = "deadlock", track_caller)]
    fn try_lock_for(&self, timeout: Duration) -> Option<GuardNoSend> {
        self.0.try_lock_for(timeout).then(GuardNoSend::new)
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    fn try_lock_until(&self, deadline: Instant) -> Option<GuardNoSend> {
        self.0.try_lock_until(deadline).then(GuardNoSend::new)
    }
}

/// The current thread's identity for [`ReentrantMutex`]: the address of a thread-local,
/// which no two live threads share and which is never 0.
#[derive(Debug, Default)]
pub struct RawThreadId;

std::thread_local! {
    /// Its address is the thread's identity; its value is never read.
    static THREAD_MARKER: u8 = const { 0 };
}

// SAFETY: a thread-local's address is the same for the whole life of its thread and differs
// from every other live thread's, as `GetThreadId` requires; a reference is never null.
unsafe impl lock_api::GetThreadId for RawThreadId {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawThreadId = RawThreadId;

    fn nonzero_thread_id(&self) -> NonZeroUsize {
        THREAD_MARKER.with(|marker| {
            NonZeroUsize::new(core::ptr::from_ref(marker) as usize)
                .expect("a reference is never null")
        })
    }
}
