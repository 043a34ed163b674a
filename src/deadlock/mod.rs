//! Deadlock checks (feature `deadlock`): a thread that locks a lock it holds panics with both
//! call sites instead of hanging; locks taken in an order that contradicts an order seen
//! before are reported, with the call sites of both orders, before they ever deadlock (the
//! idea of the kernel's lockdep and of tracing-mutex); and [`check_deadlock`] returns the
//! threads that wait for each other now, as parking_lot's `deadlock::check_deadlock` does.
//!
//! The checks cover every futexkit lock: `sync`'s [`Mutex`](crate::sync::Mutex),
//! [`RwLock`](crate::sync::RwLock) and [`PiMutex`](crate::sync::PiMutex), the nonpoison
//! locks, the `futexkit::parking_lot` and `lock_api` types built on [`crate::raw`], and the
//! [`shared`](crate::shared) mutex and rwlock. They run from the start of the program;
//! [`set_enabled`] turns them off and on.
//!
//! ```
//! # // The module is private without the feature, and rustdoc still collects this example.
//! # #[cfg(feature = "deadlock")]
//! # fn main() {
//! use futexkit::sync::Mutex;
//!
//! let accounts = Mutex::new(100);
//! let audit = Mutex::new(Vec::<i32>::new());
//! {
//!     let _a = accounts.lock().unwrap();
//!     let _b = audit.lock().unwrap(); // accounts, then audit
//! }
//! {
//!     let _b = audit.lock().unwrap();
//!     let _a = accounts.lock().unwrap(); // audit, then accounts: reported (and on stderr)
//! }
//! let violation = &futexkit::deadlock::order_violations()[0];
//! println!("{violation}"); // both orders, each with its call sites
//! assert!(futexkit::deadlock::check_deadlock().is_empty()); // nobody waits now
//! # }
//! # #[cfg(not(feature = "deadlock"))]
//! # fn main() {}
//! ```
//!
//! ## What each check does
//!
//! * **Relocking.** An untimed acquisition (`lock`, `read`, `write`, `upgradable_read`) of a
//!   lock this thread holds, where the two can never be held together (a mutex; a rwlock's
//!   write lock with anything; two upgradable reads), panics instead of hanging, naming where
//!   the thread took the lock and where it asked again. A read lock asked for again (beside a
//!   read or an upgradable read) is allowed, as std allows it, and reported as the lock order
//!   below is: a writer that starts waiting between the two keeps the second out, and the
//!   thread waits for itself (parking_lot#212). An untimed upgrade while this thread also holds
//!   a plain read of the lock panics too: the upgrade waits for every other reader. `try_*`
//!   calls and timed calls do not panic (they fail or time out). The
//!   [`shared`](crate::shared) locks keep their own answer, `WouldDeadlock`, and such a
//!   refused call adds no order.
//! * **Lock order.** Each untimed acquisition of a lock B while this thread holds a lock A
//!   records the order "A before B" with both call sites. If the order "B before A" was seen
//!   before (directly or through other locks), the two can deadlock when two threads run them
//!   at once: the first time for each pair, the report is written to stderr (fd 2 directly,
//!   errors ignored) and kept for [`order_violations`]. The program goes on: a report is a
//!   warning, as the kernel's lockdep gives, since panicking inside a Condvar's relock would
//!   leave its guard unsound. The order is kept even when reported, so later cycles through
//!   it are found. Modes are not told apart (two read locks in opposite orders deadlock once a
//!   writer waits on each).
//! * **Waits.** [`check_deadlock`] returns each cycle of threads in which every thread waits,
//!   untimed, for a lock the next one holds in a mode that keeps it out. Only such cycles:
//!   the threads' records are read twice and a cycle is returned only if none of its threads
//!   changed its record between the two reads, so every thread in it was waiting at one
//!   instant for a lock the next held at that instant. A thread's record never claims more
//!   than the thread holds: it gains an entry after the lock is taken and loses it before the
//!   lock is released.
//!
//! ## Limits
//!
//! * A thread is known by the records of its own calls: a lock unlocked by another thread than
//!   the one that took it (the raw API forbids it) leaves a stale entry behind.
//! * A lock is named by its kind and a number (an address for the shared locks); the call
//!   sites say which it is. A shared lock's order is forgotten when its [`Region`] is dropped.
//! * Waits for a lock held in another process, timed waits, Condvar waits and waits of a
//!   Barrier, Semaphore, Latch or Event are not in the wait graph; waiting behind a waiting
//!   writer (rather than a holder) is not an edge either.
//! * A forked child starts with empty records.
//!
//! ## What it costs
//!
//! Compiled out (the default), nothing. Compiled in and turned off, one relaxed load per lock
//! and unlock. Turned on, each acquisition and release updates this thread's record under a
//! mutex of its own, and the first time a thread sees a pair of locks in an order it updates
//! the order graph under a global mutex. `docs/benchmarks.md` has the measured costs.
//!
//! [`Region`]: crate::shared::Region

// Without the checks, the hooks keep only the acquisitions they wrap.
#![cfg_attr(
    not(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle)))),
    allow(dead_code)
)]

use core::fmt;

/// Which kind of lock a report names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A mutex ([`RawMutex`](crate::raw::RawMutex) and the types on it).
    Mutex,
    /// A read-write lock ([`RawRwLock`](crate::raw::RawRwLock) and the types on it).
    RwLock,
    /// A priority-inheriting mutex ([`RawPiMutex`](crate::raw::RawPiMutex)).
    PiMutex,
    /// A process-shared mutex ([`crate::shared::SharedMutex`] and its raw type).
    SharedMutex,
    /// A process-shared rwlock ([`crate::shared::SharedRwLock`] and its raw type).
    SharedRwLock,
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockKind::Mutex => "Mutex",
            LockKind::RwLock => "RwLock",
            LockKind::PiMutex => "PiMutex",
            LockKind::SharedMutex => "SharedMutex",
            LockKind::SharedRwLock => "SharedRwLock",
        })
    }
}

/// How a thread holds or wants a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Alone: a mutex, or a rwlock's write lock.
    Exclusive,
    /// A rwlock's read lock.
    Read,
    /// A rwlock's upgradable read.
    UpgradableRead,
}

impl Mode {
    /// Whether a holder in mode `held` keeps out a thread that wants `self`.
    fn kept_out_by(self, held: Mode) -> bool {
        match (self, held) {
            (Mode::Exclusive, _) | (_, Mode::Exclusive) => true,
            (Mode::UpgradableRead, Mode::UpgradableRead) => true,
            (Mode::Read, _) | (Mode::UpgradableRead, Mode::Read) => false,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Exclusive => "exclusive",
            Mode::Read => "read",
            Mode::UpgradableRead => "upgradable read",
        })
    }
}

/// How an acquisition may wait: only untimed waits are checked and can deadlock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// `lock`, `read`, `write`, `upgradable_read`: waits for as long as it takes.
    Untimed,
    /// `try_*` and the timed calls: fails or gives up instead.
    Bounded,
}

/// Which lock a hook is about: a lock of this process, named by its [`LockId`], or a shared
/// lock, named by its address in this process. Hooks take a function that makes it, called
/// only while the checks run: one that finds them off does nothing else.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    Local(LockKind, &'a LockId),
    Shared(LockKind, usize),
}

impl<'a> Target<'a> {
    /// A lock of this process with its id field.
    #[inline(always)]
    pub(crate) fn local(kind: LockKind, id: &'a LockId) -> Target<'a> {
        Target::Local(kind, id)
    }

    /// A process-shared lock at `address`.
    #[inline(always)]
    pub(crate) fn shared<T>(kind: LockKind, address: *const T) -> Target<'static> {
        Target::Shared(kind, address as usize)
    }
}

/// What an acquisition returns, as the checks read it: whether it took the lock.
pub(crate) trait Outcome {
    fn took(&self) -> bool;
}

impl Outcome for bool {
    fn took(&self) -> bool {
        *self
    }
}

/// Shared locks: `Ok` (also after a holder's death) holds the lock; an error does not.
impl<T, E> Outcome for Result<T, E> {
    fn took(&self) -> bool {
        self.is_ok()
    }
}

/// An acquisition of `lock` in `mode` by `acquire`. An untimed one is checked first (relock,
/// order) and is in the wait graph while it runs. Without the feature, `acquire()` and nothing
/// else.
#[cfg_attr(feature = "deadlock", track_caller)]
#[inline(always)]
pub(crate) fn acquire<'a, T: Outcome>(
    lock: impl FnOnce() -> Target<'a>,
    mode: Mode,
    wait: Wait,
    acquire: impl FnOnce() -> T,
) -> T {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if record::is_enabled() {
        return record::acquire(lock(), mode, wait, acquire);
    }
    let _ = (lock, mode, wait);
    acquire()
}

/// Before a release of `lock` held in `mode`: this thread's record loses it.
#[inline(always)]
pub(crate) fn release<'a>(lock: impl FnOnce() -> Target<'a>, mode: Mode) {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if record::is_enabled() {
        return record::release(lock(), mode);
    }
    let _ = (lock, mode);
}

/// A downgrade, before it is made: `lock` held in `from` is held in the weaker `to`.
#[inline(always)]
pub(crate) fn weaken<'a>(lock: impl FnOnce() -> Target<'a>, from: Mode, to: Mode) {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if record::is_enabled() {
        return record::change(lock(), from, to);
    }
    let _ = (lock, from, to);
}

/// An upgrade of `lock` from the upgradable read to exclusive by `upgrade`, which returns
/// whether it did. An untimed one is in the wait graph while it runs.
#[cfg_attr(feature = "deadlock", track_caller)]
#[inline(always)]
pub(crate) fn upgrade<'a>(
    lock: impl FnOnce() -> Target<'a>,
    wait: Wait,
    upgrade: impl FnOnce() -> bool,
) -> bool {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if record::is_enabled() {
        return record::upgrade(lock(), wait, upgrade);
    }
    let _ = (lock, wait);
    upgrade()
}

/// The shared locks in `[start, start + len)` are gone (their region is unmapped): their
/// order is forgotten, as another lock may come to live at the same address.
#[inline(always)]
pub(crate) fn forget_shared(start: *const u8, len: usize) {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    order::forget_shared(start as usize, len);
    #[cfg(not(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle)))))]
    let _ = (start, len);
}

/// A lock's number for the checks, given the first time the lock is taken while they run;
/// forgotten (its order with it) when the lock is dropped. Without the feature it is empty.
#[derive(Default)]
pub(crate) struct LockId {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    id: std::sync::atomic::AtomicU64,
}

impl LockId {
    /// Not numbered yet.
    pub(crate) const fn new() -> LockId {
        LockId {
            #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
            id: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
impl Drop for LockId {
    fn drop(&mut self) {
        let id = *self.id.get_mut();
        // While the checks are off its edges stay: numbers are never reused, so they only
        // take room.
        if id != 0 && record::is_enabled() {
            order::forget(id);
        }
    }
}

// The checks themselves: each thread's record and the hooks' work (`record`), the lock order
// graph (`order`), the wait graph (`waits`).
#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
mod order;
#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
mod record;
#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
mod waits;

#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
pub use order::{order_violations, OrderEdge, OrderViolation};
#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
pub use record::{is_enabled, set_enabled, LockName};
#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
pub use waits::{check_deadlock, Deadlock, Waiter};
