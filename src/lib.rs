//! futexkit: futex-based synchronization for Linux.
//!
//! * [`futex`]: a safe wrapper over every futex operation (wait, wake, bitsets, requeue,
//!   wake_op, priority inheritance, futex2 and `futex_waitv`) with typed errors, absolute
//!   deadlines and runtime probing of what the running kernel offers ([`capabilities`]).
//! * [`swap`]: the directed hand-off (wake a partner and wait, as one step): kernel
//!   `FUTEX_SWAP` where present, an adaptive-spin emulation everywhere else, and [`swap::Parker`],
//!   a hand-off that makes no syscall while both sides are running.
//! * [`Mutex`]: a drop-in for `std::sync::Mutex` (same API, std's own result types, poisoning),
//!   adaptive underneath: one CAS to lock and to unlock, a learned bounded spin, exact wakes,
//!   and a 1 ms starvation bound.
//! * [`Condvar`]: a drop-in for `std::sync::Condvar` whose `notify_all` wakes one waiter and
//!   requeues the rest onto the mutex, and whose notifies make no syscall when nobody sleeps.
//! * [`flipcall`]: synchronous request/response over shared memory, in one process or across
//!   processes, with timeouts, shutdown and peer-death detection.
//! * [`spin`]: the one spin policy every primitive shares.
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
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
// Under loom the futex calls are emulated, leaving the syscall layer unused.
#![cfg_attr(loom, allow(dead_code))]

pub mod condvar;
pub mod flipcall;
pub mod futex;
#[cfg(loom)]
mod loom;
pub mod mutex;
pub mod spin;
pub mod swap;

pub use condvar::{Condvar, WaitTimeoutResult};
pub use futex::{Capabilities, Capability};
pub use mutex::{Mutex, MutexGuard, RawMutex};
/// std's own result and error types, so `use futexkit as sync;` compiles code written for std.
pub use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

/// The atomics the crate's primitives use: std's, or loom's under `cfg(loom)`.
pub(crate) mod atomic {
    #[cfg(loom)]
    pub(crate) use ::loom::sync::atomic::{fence, AtomicU32, Ordering};
    #[cfg(not(loom))]
    pub(crate) use core::sync::atomic::{fence, AtomicU32, Ordering};
}

/// Thread operations the primitives use: std's, or loom's under `cfg(loom)`.
pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use ::loom::thread::yield_now;
    #[cfg(not(loom))]
    pub(crate) use std::thread::yield_now;
}

/// What the running kernel offers, probed once (at the first call) and cached.
///
/// ```
/// use futexkit::Capability;
///
/// let caps = futexkit::capabilities();
/// if !caps.has(Capability::Swap) {
///     // Every mainline kernel: swap() runs its emulation.
/// }
/// println!("{caps}");
/// ```
pub fn capabilities() -> &'static Capabilities {
    static CAPABILITIES: std::sync::OnceLock<Capabilities> = std::sync::OnceLock::new();
    CAPABILITIES.get_or_init(Capabilities::detect)
}
