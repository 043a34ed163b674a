//! The shared locks' error types: [`LockError`] for taking a lock, [`RegionError`] for making
//! and adopting regions.

use core::fmt;

use crate::futex::RobustUnsupported;
use crate::raw::RawLockError;
use crate::shared::ObjectKind;

/// Why a shared lock was not taken cleanly. `G` is the guard, which
/// [`OwnerDied`](LockError::OwnerDied) carries: the lock *is* held then.
///
/// ```
/// use futexkit::shared::{LockError, Region};
///
/// let region = Region::builder().mutex("total", 0u64).build()?;
/// let total = region.mutex::<u64>("total")?;
/// let mut guard = match total.lock() {
///     Ok(guard) => guard,
///     Err(LockError::OwnerDied(mut guard)) => {
///         // A holder died mid-update: repair, then say so.
///         guard.set(0);
///         guard.mark_consistent();
///         guard
///     }
///     Err(other) => return Err(other.without_guard().into()),
/// };
/// guard.update(|total| *total += 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
pub enum LockError<G> {
    /// A holder died holding the lock (or a thread that took it after such a death did, before
    /// marking it consistent). This thread holds it now: repair the data, then call the guard's
    /// `mark_consistent`; dropping the guard without doing so makes the lock not recoverable.
    OwnerDied(G),
    /// A holder died, and the lock was released without being marked consistent: nobody can
    /// take it again (pthread's `ENOTRECOVERABLE`).
    NotRecoverable,
    /// Another thread holds the lock (`try_*`).
    WouldBlock,
    /// The deadline passed first.
    TimedOut,
    /// This thread holds the lock already (or, for a read lock, the write lock).
    WouldDeadlock,
    /// This thread cannot take robust locks (see [`RobustUnsupported`]).
    Unsupported(RobustUnsupported),
    /// The kernel refused a futex call on the lock.
    Futex(crate::futex::Error),
}

impl<G> LockError<G> {
    /// The guard of [`OwnerDied`](LockError::OwnerDied), if that is what this is.
    pub fn into_guard(self) -> Option<G> {
        match self {
            LockError::OwnerDied(guard) => Some(guard),
            _ => None,
        }
    }

    /// This error without its guard (which, for [`OwnerDied`](LockError::OwnerDied), is
    /// dropped: the lock becomes not recoverable unless it was marked consistent).
    pub fn without_guard(self) -> LockError<()> {
        self.map_guard(drop)
    }

    /// This error with `f` applied to its guard.
    pub fn map_guard<H>(self, f: impl FnOnce(G) -> H) -> LockError<H> {
        match self {
            LockError::OwnerDied(guard) => LockError::OwnerDied(f(guard)),
            LockError::NotRecoverable => LockError::NotRecoverable,
            LockError::WouldBlock => LockError::WouldBlock,
            LockError::TimedOut => LockError::TimedOut,
            LockError::WouldDeadlock => LockError::WouldDeadlock,
            LockError::Unsupported(why) => LockError::Unsupported(why),
            LockError::Futex(err) => LockError::Futex(err),
        }
    }
}

impl<G> From<RawLockError> for LockError<G> {
    fn from(err: RawLockError) -> LockError<G> {
        match err {
            RawLockError::WouldBlock => LockError::WouldBlock,
            RawLockError::TimedOut => LockError::TimedOut,
            RawLockError::NotRecoverable => LockError::NotRecoverable,
            RawLockError::WouldDeadlock => LockError::WouldDeadlock,
            RawLockError::Unsupported(why) => LockError::Unsupported(why),
            RawLockError::Futex(err) => LockError::Futex(err),
        }
    }
}

impl<G> fmt::Debug for LockError<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::OwnerDied(_) => f.write_str("OwnerDied(..)"),
            LockError::NotRecoverable => f.write_str("NotRecoverable"),
            LockError::WouldBlock => f.write_str("WouldBlock"),
            LockError::TimedOut => f.write_str("TimedOut"),
            LockError::WouldDeadlock => f.write_str("WouldDeadlock"),
            LockError::Unsupported(why) => f.debug_tuple("Unsupported").field(why).finish(),
            LockError::Futex(err) => f.debug_tuple("Futex").field(err).finish(),
        }
    }
}

impl<G> fmt::Display for LockError<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::OwnerDied(_) => f.write_str(
                "the lock's previous holder died holding it: the data may be inconsistent",
            ),
            LockError::NotRecoverable => f.write_str(
                "the lock is not recoverable: a holder died and it was released without being marked consistent",
            ),
            LockError::WouldBlock => f.write_str("the lock is held by another thread"),
            LockError::TimedOut => f.write_str("the deadline passed before the lock was taken"),
            LockError::WouldDeadlock => f.write_str("this thread already holds the lock"),
            LockError::Unsupported(why) => write!(f, "robust locks are unavailable: {why}"),
            LockError::Futex(err) => write!(f, "a futex call on the lock failed: {err}"),
        }
    }
}

impl<G> std::error::Error for LockError<G> {}

impl<G> PartialEq for LockError<G> {
    /// Compares the kinds of error (not the guards).
    fn eq(&self, other: &LockError<G>) -> bool {
        match (self, other) {
            (LockError::OwnerDied(_), LockError::OwnerDied(_)) => true,
            (LockError::Unsupported(a), LockError::Unsupported(b)) => a == b,
            (LockError::Futex(a), LockError::Futex(b)) => a == b,
            (a, b) => core::mem::discriminant(a) == core::mem::discriminant(b),
        }
    }
}

/// Why a region could not be made, adopted or looked into.
#[derive(Debug)]
#[non_exhaustive]
pub enum RegionError {
    /// A system call failed (making, sealing, measuring or mapping the memfd).
    Io(std::io::Error),
    /// The file is not sealed against shrinking and growing: its owner could make our accesses
    /// fault (SIGBUS).
    NotSealed,
    /// The file is not plain shared memory (a memfd on shmem).
    NotShmem,
    /// The header does not describe a region of this version, or describes objects that do not
    /// fit the file.
    BadHeader(&'static str),
    /// The region was made in another pid namespace: thread ids in its lock words would name
    /// other threads here.
    OtherPidNamespace,
    /// No object has this name.
    NotFound(String),
    /// The object is of another kind.
    WrongKind {
        /// Its name.
        name: String,
        /// The kind asked for.
        expected: ObjectKind,
        /// The kind the region holds.
        found: ObjectKind,
    },
    /// The object guards a value of another size or alignment than the type asked for.
    WrongType {
        /// Its name.
        name: String,
        /// The size and alignment of the type asked for.
        expected: (usize, usize),
        /// The size and alignment the region records.
        found: (usize, usize),
    },
    /// A name that is empty, longer than 32 bytes, or given twice.
    BadName(String),
    /// A barrier's party count outside 1 to [`BARRIER_MAX_PARTIES`](crate::raw::BARRIER_MAX_PARTIES).
    BadParties(usize),
    /// A semaphore's permits outside 1 to
    /// [`SEMAPHORE_MAX_PERMITS`](crate::raw::SEMAPHORE_MAX_PERMITS), or a latch's count above
    /// [`MAX_LATCH_COUNT`](crate::raw::MAX_LATCH_COUNT).
    BadCount {
        /// The object's kind.
        kind: ObjectKind,
        /// The count asked for.
        count: usize,
    },
    /// A value type aligned to more than 64 bytes.
    OverAligned(usize),
    /// More objects, or more bytes, than a region holds.
    TooLarge,
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionError::Io(err) => write!(f, "shared region: {err}"),
            RegionError::NotSealed => {
                f.write_str("shared region: the file is not sealed against resizing")
            }
            RegionError::NotShmem => f.write_str("shared region: the file is not a shmem memfd"),
            RegionError::BadHeader(why) => write!(f, "shared region: bad header: {why}"),
            RegionError::OtherPidNamespace => {
                f.write_str("shared region: made in another pid namespace")
            }
            RegionError::NotFound(name) => write!(f, "shared region: no object named {name:?}"),
            RegionError::WrongKind {
                name,
                expected,
                found,
            } => write!(f, "shared region: {name:?} is a {found}, not a {expected}"),
            RegionError::WrongType {
                name,
                expected,
                found,
            } => write!(
                f,
                "shared region: {name:?} guards {} bytes aligned to {}, not {} aligned to {}",
                found.0, found.1, expected.0, expected.1
            ),
            RegionError::BadName(name) => write!(
                f,
                "shared region: bad object name {name:?} (1 to 32 bytes, each name once)"
            ),
            RegionError::BadParties(parties) => write!(
                f,
                "shared region: a barrier takes 1 to {} parties, not {parties}",
                crate::raw::BARRIER_MAX_PARTIES
            ),
            RegionError::BadCount { kind, count } => write!(
                f,
                "shared region: a {kind} cannot count {count} (a semaphore has 1 to {} permits, a latch counts down from at most {})",
                crate::raw::SEMAPHORE_MAX_PERMITS,
                crate::raw::MAX_LATCH_COUNT
            ),
            RegionError::OverAligned(align) => write!(
                f,
                "shared region: values aligned to {align} bytes (at most 64)"
            ),
            RegionError::TooLarge => f.write_str("shared region: too many objects or bytes"),
        }
    }
}

impl std::error::Error for RegionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegionError::Io(err) => Some(err),
            _ => None,
        }
    }
}

impl From<std::io::Error> for RegionError {
    fn from(err: std::io::Error) -> RegionError {
        RegionError::Io(err)
    }
}
