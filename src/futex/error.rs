//! The futex layer's error type: one variant per outcome the kernel can report, mapped from
//! errno values in one place ([`Error::from_errno`]) so no caller sees a bare integer.

use core::fmt;

/// Why a futex operation did not do what was asked.
///
/// Each operation's documentation lists the variants it can return. Operations retry
/// [`Interrupted`](Error::Interrupted) themselves where a caller cannot care (waits recheck
/// the word and keep their absolute deadline), so it is rare in practice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The word did not hold the expected value (`EAGAIN` from a wait or compare-requeue).
    ValueChanged,
    /// The deadline passed before the operation completed (`ETIMEDOUT`).
    TimedOut,
    /// A signal interrupted a call that cannot be restarted transparently (`EINTR`).
    Interrupted,
    /// The lock is held by another thread (`EAGAIN` from `trylock_pi`).
    WouldBlock,
    /// The caller already owns the PI lock (`EDEADLK`).
    WouldDeadlock,
    /// The caller now owns the PI lock, but its previous owner died holding it: the data it
    /// protects may be inconsistent (the word carries `FUTEX_OWNER_DIED`).
    OwnerDied,
    /// The word names an owner thread that does not exist (`ESRCH`).
    NoSuchOwner,
    /// The caller is not allowed to do this, e.g. unlock a PI lock it does not own (`EPERM`).
    PermissionDenied,
    /// This kernel does not implement the operation or flag (`ENOSYS`, or `EINVAL` for a size
    /// or flag that later kernels may add).
    Unsupported,
    /// An argument was rejected: an unaligned or null address, a zero bitset, an out-of-range
    /// operand, mismatched requeue arguments (`EINVAL`).
    InvalidArgument,
    /// The address is not mapped in this process (`EFAULT`).
    Fault,
    /// More words were passed to `futex_waitv` than the kernel accepts.
    TooManyWords {
        /// How many were passed.
        given: usize,
        /// The kernel's limit, `FUTEX_WAITV_MAX`.
        max: usize,
    },
    /// The kernel could not allocate what the operation needed (`ENOMEM`).
    OutOfMemory,
    /// Any other errno: not expected from a futex call, reported rather than hidden.
    Os {
        /// The raw errno value.
        errno: i32,
    },
}

impl Error {
    /// Maps an errno from a futex call to its variant (the generic meanings: callers refine
    /// `EAGAIN` and `EINVAL` where an operation gives them a specific meaning).
    pub(crate) fn from_errno(errno: i32) -> Error {
        match errno {
            libc::EAGAIN => Error::ValueChanged,
            libc::ETIMEDOUT => Error::TimedOut,
            libc::EINTR => Error::Interrupted,
            libc::EDEADLK => Error::WouldDeadlock,
            libc::ESRCH => Error::NoSuchOwner,
            libc::EPERM => Error::PermissionDenied,
            libc::ENOSYS => Error::Unsupported,
            libc::EINVAL => Error::InvalidArgument,
            libc::EFAULT => Error::Fault,
            libc::ENOMEM => Error::OutOfMemory,
            errno => Error::Os { errno },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ValueChanged => f.write_str("futex word did not hold the expected value"),
            Error::TimedOut => f.write_str("futex operation timed out"),
            Error::Interrupted => f.write_str("futex operation interrupted by a signal"),
            Error::WouldBlock => f.write_str("PI lock is held by another thread"),
            Error::WouldDeadlock => f.write_str("caller already owns the PI lock"),
            Error::OwnerDied => {
                f.write_str("PI lock acquired, but its previous owner died holding it")
            }
            Error::NoSuchOwner => {
                f.write_str("futex word names an owner thread that does not exist")
            }
            Error::PermissionDenied => f.write_str("futex operation not permitted"),
            Error::Unsupported => {
                f.write_str("futex operation or flag not supported by this kernel")
            }
            Error::InvalidArgument => f.write_str("invalid futex argument"),
            Error::Fault => f.write_str("futex address is not mapped"),
            Error::TooManyWords { given, max } => {
                write!(f, "futex_waitv takes at most {max} words, {given} given")
            }
            Error::OutOfMemory => f.write_str("kernel out of memory for futex operation"),
            Error::Os { errno } => write!(
                f,
                "unexpected futex error: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(err: Error) -> std::io::Error {
        let kind = match err {
            Error::TimedOut => std::io::ErrorKind::TimedOut,
            Error::Interrupted => std::io::ErrorKind::Interrupted,
            Error::WouldBlock | Error::ValueChanged => std::io::ErrorKind::WouldBlock,
            Error::PermissionDenied => std::io::ErrorKind::PermissionDenied,
            Error::Unsupported => std::io::ErrorKind::Unsupported,
            Error::InvalidArgument | Error::TooManyWords { .. } => std::io::ErrorKind::InvalidInput,
            Error::OutOfMemory => std::io::ErrorKind::OutOfMemory,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, err)
    }
}
