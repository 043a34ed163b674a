//! All of `std::sync`, with futexkit's own locks: switching a program from std is changing the
//! path `std::sync` to `futexkit::sync`.
//!
//! futexkit's own: [`Mutex`], [`MutexGuard`], [`Condvar`], [`WaitTimeoutResult`], [`RwLock`],
//! [`RwLockReadGuard`], [`RwLockWriteGuard`], [`Barrier`], [`BarrierWaitResult`], each written
//! over the protocol of [`crate::raw`], which knows nothing of guards or poison. Beyond std's
//! types: [`Semaphore`], [`Latch`], [`Event`], [`AutoResetEvent`] and [`PiMutex`] (priority
//! inheritance). std's own, re-exported: everything else
//! std stabilized in `std::sync` (`Arc`, `Weak`, `Once`, `OnceState`, `OnceLock`, `LazyLock`,
//! `mpsc`, `atomic`, the poison and try-lock result types, and the deprecated `ONCE_INIT`).
//! The lock results are std's types, so code that matches on them is unchanged.
//!
//! Two nightly-only parts of std's next API are here on stable: [`nonpoison`], locks that never
//! poison (rust-lang/rust#134645), and `get_cloned`, `set` and `replace` on [`Mutex`] and
//! [`RwLock`] (rust-lang/rust#133407).
//!
//! ```
//! use futexkit::sync::{atomic::AtomicUsize, atomic::Ordering, mpsc, Arc, Mutex, RwLock};
//!
//! let config = Arc::new(RwLock::new(String::from("v1")));
//! let hits = Arc::new(AtomicUsize::new(0));
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let (tx, rx) = mpsc::channel();
//! for id in 0..4 {
//!     let (config, hits, log, tx) = (config.clone(), hits.clone(), log.clone(), tx.clone());
//!     std::thread::spawn(move || {
//!         let version = config.read().unwrap().clone();
//!         hits.fetch_add(1, Ordering::Relaxed);
//!         log.lock().unwrap().push((id, version));
//!         tx.send(id).unwrap();
//!     });
//! }
//! drop(tx);
//! assert_eq!(rx.iter().count(), 4);
//! assert_eq!(hits.load(Ordering::Relaxed), 4);
//! assert_eq!(log.lock().unwrap().len(), 4);
//! ```

mod auto_reset_event;
mod barrier;
mod condvar;
mod event;
mod latch;
mod mutex;
pub mod nonpoison;
mod pi_mutex;
mod poison;
mod rwlock;
mod semaphore;
#[cfg(feature = "serde")]
mod serde;

pub use auto_reset_event::AutoResetEvent;
pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use event::Event;
pub use latch::Latch;
pub use mutex::{Mutex, MutexGuard};
pub use pi_mutex::{PiMutex, PiMutexGuard};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
#[allow(deprecated)]
pub use std::sync::ONCE_INIT;
pub use std::sync::{
    atomic, mpsc, Arc, LazyLock, LockResult, Once, OnceLock, OnceState, PoisonError, TryLockError,
    TryLockResult, Weak,
};

use core::fmt;
use core::ops::Deref;

/// A lock's `Debug` as std prints it: `Name { data: .., poisoned: .., .. }`, with `locked` in
/// place of the data while another thread holds the lock. `attempt` is a try-lock's answer.
fn debug_lock<G, T>(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    attempt: TryLockResult<G>,
    poisoned: bool,
    locked: &dyn fmt::Debug,
) -> fmt::Result
where
    G: Deref<Target = T>,
    T: ?Sized + fmt::Debug,
{
    let mut d = f.debug_struct(name);
    match attempt {
        Ok(guard) => {
            d.field("data", &&*guard);
        }
        Err(TryLockError::Poisoned(err)) => {
            d.field("data", &&**err.get_ref());
        }
        Err(TryLockError::WouldBlock) => {
            d.field("data", locked);
        }
    }
    d.field("poisoned", &poisoned);
    d.finish_non_exhaustive()
}

/// What every lock and guard has alike, written once: `Default` and `From` for a lock (a new,
/// unlocked lock around the value), `Debug` and `Display` for its guards (the data's own).
/// A lock with a fallible constructor (the [`PiMutex`]) takes only the guards' part:
/// `lock_impls!(guards: PiMutexGuard)`.
macro_rules! lock_impls {
    ($lock:ident; $($guard:ident),+) => {
        impl<T: Default> Default for $lock<T> {
            fn default() -> $lock<T> {
                $lock::new(T::default())
            }
        }

        impl<T> From<T> for $lock<T> {
            fn from(value: T) -> $lock<T> {
                $lock::new(value)
            }
        }

        $crate::sync::lock_impls!(guards: $($guard),+);
    };
    (guards: $($guard:ident),+) => {
        $(
            impl<T: ?Sized + fmt::Debug> fmt::Debug for $guard<'_, T> {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    fmt::Debug::fmt(&**self, f)
                }
            }

            impl<T: ?Sized + fmt::Display> fmt::Display for $guard<'_, T> {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    fmt::Display::fmt(&**self, f)
                }
            }
        )+
    };
}
pub(crate) use lock_impls;
