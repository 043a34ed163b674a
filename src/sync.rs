//! All of `std::sync`, with futexkit's own locks: switching a program from std is changing the
//! path `std::sync` to `futexkit::sync`.
//!
//! futexkit's own: [`Mutex`], [`MutexGuard`], [`Condvar`], [`WaitTimeoutResult`], [`RwLock`],
//! [`RwLockReadGuard`], [`RwLockWriteGuard`], [`Barrier`], [`BarrierWaitResult`] (and the raw
//! locks under them, [`RawMutex`] and [`RawRwLock`]). std's own, re-exported: everything else
//! std stabilized in `std::sync` (`Arc`, `Weak`, `Once`, `OnceState`, `OnceLock`, `LazyLock`,
//! `mpsc`, `atomic`, the poison and try-lock result types, and the deprecated `ONCE_INIT`).
//! The lock results are std's types, so code that matches on them is unchanged.
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

pub use crate::barrier::{Barrier, BarrierWaitResult};
pub use crate::condvar::{Condvar, WaitTimeoutResult};
pub use crate::mutex::{Mutex, MutexGuard, RawMutex};
pub use crate::rwlock::{RawRwLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[allow(deprecated)]
pub use std::sync::ONCE_INIT;
pub use std::sync::{
    atomic, mpsc, Arc, LazyLock, LockResult, Once, OnceLock, OnceState, PoisonError, TryLockError,
    TryLockResult, Weak,
};
