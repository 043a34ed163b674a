//! Locks shared between processes that survive a holder's death: [`SharedMutex`],
//! [`SharedCondvar`], [`SharedRwLock`], [`SharedBarrier`] and [`SharedSemaphore`], with
//! [`SharedLatch`] and [`SharedEvent`] beside them, living in a [`Region`] of shared memory
//! that several processes map.
//!
//! ## Robust
//!
//! A process killed (SIGKILL, at any instruction) or a thread that exits while it holds a lock does
//! not leave the lock held for ever: the kernel marks it (each lock word is on the holding thread's
//! robust list, `docs/design.md`, "Robust, process-shared locks"), and the next thread to lock it,
//! in any process, gets [`LockError::OwnerDied`] with the guard. It repairs the data and calls
//! `mark_consistent`; if it drops the guard without doing so, the lock becomes not recoverable for
//! everyone ([`LockError::NotRecoverable`]): pthread's `EOWNERDEAD` and `ENOTRECOVERABLE`. A waiter
//! killed while it sleeps strands nobody (one killed just after a release woke it, while a thread
//! that took the lock in passing holds it, delays the other sleepers by at most 100 ms; glibc's
//! robust mutex strands them), nor does a notifier killed mid-notify. A barrier's parties are
//! known, so one's death breaks the barrier ([`BarrierError::Broken`]) for the others instead of
//! leaving them waiting. A semaphore's permit held by a thread that dies comes back, and its next
//! holder is told. A latch or an event knows nobody: a process that dies before its count-down or
//! its set leaves the waiters waiting, which a deadline bounds.
//!
//! ## Plain data
//!
//! The locks guard [`Plain`] values (integers, floats, arrays of them, `#[repr(C)]` structs of
//! them without padding): every bit pattern is a value and no pointer is involved, so a value
//! means the same in every process. Values are copied in and out of the shared memory with
//! atomic accesses (`get`, `set`, `update` on the guards), never lent out as references.
//!
//! ## Sharers that misbehave
//!
//! Every process that maps a region can write all of it. A process that scribbles the region
//! can make calls fail (`NotRecoverable`, a wrong value) or wait, but a timed call returns by its
//! deadline, and nothing it writes can crash this process or cause undefined behaviour in safe
//! code: every access to shared memory is atomic, every value read from it is checked before it
//! is used (the header when the region is adopted, party counts, slot numbers), no pointer is
//! ever read from it, and the robust list links are relinked from this thread's private record,
//! never from the shared memory. An untimed lock can wait for ever on a lock a scribbler holds,
//! as it could on one a live process never releases.
//!
//! ## What is not detected
//!
//! * A process that stops (SIGSTOP, a debugger) or loops while holding a lock is alive: its
//!   locks stay held.
//! * Thread ids are compared within one pid namespace: a region made in another is refused
//!   ([`RegionError::OtherPidNamespace`]).
//! * A thread forked from one that held a lock does not hold it (as with pthread); the child
//!   must not use guards it inherited.
//! * Threads must be created through the C library (glibc registers the robust list the locks
//!   join); on a libc other than glibc, a thread whose list another library registered cannot
//!   take them ([`crate::futex::RobustUnsupported`]).
//!
//! ```
//! use futexkit::shared::{LockError, Region};
//!
//! // The parent builds the region, then forks workers that inherit the mapping and the fd.
//! let region = Region::builder().mutex("balance", 100i64).build()?;
//! let balance = region.mutex::<i64>("balance")?;
//! let mut guard = match balance.lock() {
//!     Ok(guard) => guard,
//!     Err(LockError::OwnerDied(mut guard)) => {
//!         guard.mark_consistent(); // after checking the value
//!         guard
//!     }
//!     Err(other) => return Err(other.without_guard().into()),
//! };
//! guard.update(|b| *b -= 30);
//! assert_eq!(guard.get(), 70);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod barrier;
mod condvar;
mod error;
mod event;
mod latch;
mod mutex;
mod plain;
mod region;
mod rwlock;
mod semaphore;

pub use crate::raw::{BarrierError, LatchOpen, SemaphoreError};
pub use barrier::{BarrierParty, SharedBarrier};
pub use condvar::SharedCondvar;
pub use error::{LockError, RegionError};
pub use event::SharedEvent;
pub use latch::SharedLatch;
pub use mutex::{SharedMutex, SharedMutexGuard};
#[cfg(feature = "bytemuck")]
#[doc(hidden)]
pub use plain::bytemuck_proves_plain;
#[cfg(feature = "zerocopy")]
#[doc(hidden)]
pub use plain::zerocopy_proves_plain;
pub use plain::Plain;
pub use region::{ObjectKind, Region, RegionBuilder, MAX_NAME_LEN, MAX_OBJECTS, MAX_REGION_LEN};
pub use rwlock::{SharedRwLock, SharedRwLockReadGuard, SharedRwLockWriteGuard};
pub use semaphore::{SharedSemaphore, SharedSemaphorePermit};
