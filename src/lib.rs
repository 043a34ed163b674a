//! futexkit: futex-based synchronization for Linux.
//!
//! * [`futex`]: a safe wrapper over every futex operation (wait, wake, bitsets, requeue,
//!   wake_op, priority inheritance, futex2 and `futex_waitv`) with typed errors, absolute
//!   deadlines and runtime probing of what the running kernel offers ([`capabilities`]).
//! * [`swap`]: the directed hand-off (wake a partner and wait, as one step): kernel
//!   `FUTEX_SWAP` where present, an adaptive-spin emulation everywhere else, and [`swap::Parker`],
//!   a hand-off that makes no syscall while both sides are running.
//! * [`Mutex`]: a drop-in for `std::sync::Mutex` (same API, std's own result types, poisoning,
//!   std's size): one CAS to lock and one to unlock, a short bounded spin, a wake of one
//!   sleeper per contended unlock, or a hand-off to a waiter woken without the lock, which
//!   asks for it.
//! * [`Condvar`]: a drop-in for `std::sync::Condvar` (any mutex, in turn; pairs may move
//!   between waits) whose notifies make no syscall when nobody waits.
//! * [`flipcall`]: synchronous request/response over shared memory, in one process or across
//!   processes, with timeouts, shutdown and peer-death detection.
//! * [`shared`]: a Mutex, Condvar, RwLock and Barrier for memory shared between processes,
//!   robust against a holder's death (the next locker is told, and can repair the data).
//! * [`spin`]: the one spin policy every primitive shares.
//!
//! Design notes, the state table of each primitive and the kernel facts the code relies on are
//! in `docs/design.md` and `docs/kernel.md`.
//!
//! The kernel is probed once, at first use; `FUTEXKIT_DISABLE=swap,spin,...` forces
//! capabilities off so the fallbacks can be exercised on any kernel.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! use std::sync::Arc;
//! use futexkit::futex::Futex;
//!
//! println!("{}", futexkit::capabilities());
//!
//! let flag = Arc::new(Futex::new(0));
//! let waiter = {
//!     let flag = Arc::clone(&flag);
//!     std::thread::spawn(move || {
//!         while flag.load(Ordering::Acquire) == 0 {
//!             let _ = flag.wait(0, None);
//!         }
//!     })
//! };
//! flag.store(1, Ordering::Release);
//! flag.wake(1).unwrap();
//! waiter.join().unwrap();
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(docsrs, doc(auto_cfg(hide(futexkit_loom, futexkit_shuttle))))]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod atomic_copy;
#[cfg(feature = "deadlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "deadlock")))]
pub mod deadlock;
#[cfg(not(feature = "deadlock"))]
mod deadlock;
mod fairness;
pub mod flipcall;
pub mod futex;
// Over the raw types' lock_api 0.5 impls, which model builds leave out (`src/raw/mod.rs`).
#[cfg(all(feature = "lock_api_05", not(any(futexkit_loom, futexkit_shuttle))))]
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_05")))]
pub mod parking_lot;
#[cfg(feature = "profile")]
#[cfg_attr(docsrs, doc(cfg(feature = "profile")))]
pub mod profile;
#[cfg(not(feature = "profile"))]
mod profile;
pub mod raw;
pub mod shared;
pub mod spin;
pub mod swap;
pub mod sync;

#[doc(no_inline)]
pub use futex::{capabilities, Capabilities, Capability};
#[doc(no_inline)]
pub use raw::{RawMutex, RawRwLock};
/// std's own result and error types, beside the locks at the root, so that code which names
/// them with the locks needs no second path; `futexkit::sync` names every item of `std::sync`.
#[doc(no_inline)]
pub use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};
#[doc(no_inline)]
pub use sync::{
    Barrier, BarrierWaitResult, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard,
    RwLockWriteGuard, WaitTimeoutResult,
};

/// The atomics (and the fence) the crate's primitives use: core's, or the model checker's
/// (`futex/sys/mod.rs`).
pub(crate) mod atomic {
    pub(crate) use crate::futex::sys::{fence, AtomicU32, Ordering};
}

/// Thread operations the primitives use: std's, or the model checker's (`futex/sys/mod.rs`).
pub(crate) mod thread {
    pub(crate) use crate::futex::sys::{thread_local, yield_now};
}
