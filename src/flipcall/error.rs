//! FlipCall's error type, and the ways a peer can break the protocol.

use core::fmt;

/// Why a FlipCall operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The channel was shut down (by either side's [`ShutdownHandle`](super::ShutdownHandle), or
    /// by an endpoint being dropped).
    Shutdown,
    /// The peer process exited (or was killed) while this side waited for it.
    PeerDied,
    /// The deadline of a `*_timeout` call passed first. The turn stays where it was: call
    /// [`Endpoint::recv`](super::Endpoint::recv) to keep waiting for the same reply (after
    /// [`connect_timeout`](super::Endpoint::connect_timeout), call `connect` again).
    TimedOut,
    /// The peer wrote something into the window that the protocol cannot produce.
    Protocol(Violation),
    /// A message longer than the window's data capacity.
    TooLong {
        /// The length asked for.
        len: usize,
        /// The window's data capacity.
        capacity: usize,
    },
    /// The window already has an endpoint of this role.
    RoleTaken,
    /// A [`Server`](super::Server) already serves its maximum number of channels.
    ServerFull {
        /// The maximum ([`MAX_CHANNELS`](super::MAX_CHANNELS)).
        max: usize,
    },
    /// The call needs the turn, and this side does not hold it (or the reverse: it waits for
    /// the turn while holding it); or a client call before [`connect`](super::Endpoint::connect).
    WrongTurn,
    /// A system call failed (creating, mapping or checking a window, or a futex operation).
    Io(std::io::Error),
    /// Directed hand-offs cannot be had here; the endpoint is unchanged and hands off as before.
    DirectedUnavailable(Unavailable),
    /// A call that directed hand-offs do not allow.
    DirectedMisuse(Misuse),
}

/// Why this thread cannot opt in to directed hand-offs
/// ([`directed_wakeups_available`](super::directed_wakeups_available)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unavailable {
    /// futexkit knows no seccomp audit architecture number for this CPU (x86-64 and AArch64
    /// only).
    UnknownArchitecture,
    /// `prctl(PR_SET_NO_NEW_PRIVS)` was refused (its errno).
    NoNewPrivsRefused(i32),
    /// The seccomp filter with a listener was refused (its errno): a sandbox forbids seccomp
    /// (`EACCES`, `EPERM`), the kernel lacks user notifications (`EINVAL`, before 5.0), or the
    /// thread already carries a filter with a listener (`EBUSY`: it opted in before, or was
    /// created by a thread that had).
    FilterRefused(i32),
    /// The kernel lacks the synchronous wake-ups (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`,
    /// Linux 6.6).
    KernelTooOld,
    /// A descriptor given as a listener is not one.
    NotAListener,
    /// No thread could be made to ask the question on.
    NoThread,
}

/// A call that directed hand-offs do not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misuse {
    /// A directed server endpoint used on a thread other than the one that opted in: only that
    /// thread carries the filter its sleeps need.
    WrongThread,
    /// A timed wait on a directed server: its sleep, a system call answered by the client,
    /// cannot time out.
    Timeout,
    /// A directed server endpoint given to a [`Server`](super::Server), which waits for many
    /// channels on one thread by futex.
    ManyChannelServer,
    /// Opting in on an endpoint that has started (connected, or received its first call), that
    /// has opted in already, or of the other role.
    NotAtStart,
    /// A client connecting to a server that opted in, without its listener
    /// ([`Endpoint::accept_directed_wakeups`](super::Endpoint::accept_directed_wakeups)): it
    /// could not wake the server.
    NotAccepted,
    /// [`Endpoint::send_last`](super::Endpoint::send_last) on a directed client: it wakes a
    /// sleeping server by answering the server's call, which it can only do while in a call of
    /// its own (use [`send_recv`](super::Endpoint::send_recv)).
    ClientSendLast,
}

/// What a peer wrote that cannot be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// The state word holds bits or a turn that no endpoint writes.
    UnknownState(u32),
    /// The turn is somewhere it cannot be now: taken while this side held it, or moved to a
    /// step the peer could not have reached.
    TurnTaken(u32),
    /// The state word kept changing while this side held the turn (a peer may only add
    /// `SLEEPING` or `SHUTDOWN` then, once each).
    Unsettled(u32),
    /// A message length beyond the window's capacity.
    LengthOutOfRange {
        /// The length the peer wrote.
        len: u32,
        /// The window's data capacity.
        capacity: usize,
    },
    /// The window's header does not describe a FlipCall window of this version.
    BadHeader(&'static str),
    /// The window's file is not sealed against shrinking, so its owner could make our accesses
    /// fault (SIGBUS).
    NotSealed,
    /// The window's file is not plain shared memory (a memfd on shmem): on hugetlbfs, say, a
    /// peer that punches a hole could make our accesses fault (SIGBUS).
    NotShmem,
    /// The kernel could not read the window's state word (`EFAULT` from a futex call): the peer
    /// removed its page (punched a hole in the file) at the wrong moment.
    PageRemoved,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shutdown => f.write_str("flipcall channel shut down"),
            Error::PeerDied => f.write_str("flipcall peer process died"),
            Error::TimedOut => f.write_str("flipcall call timed out"),
            Error::Protocol(violation) => {
                write!(f, "flipcall peer broke the protocol: {violation}")
            }
            Error::TooLong { len, capacity } => write!(
                f,
                "flipcall message of {len} bytes exceeds the window's capacity of {capacity}"
            ),
            Error::RoleTaken => f.write_str("flipcall window already has an endpoint of this role"),
            Error::ServerFull { max } => {
                write!(
                    f,
                    "flipcall server already serves its maximum of {max} channels"
                )
            }
            Error::WrongTurn => {
                f.write_str("flipcall call made out of turn (or before connect/recv_first)")
            }
            Error::Io(err) => write!(f, "flipcall system call failed: {err}"),
            Error::DirectedUnavailable(why) => {
                write!(f, "flipcall directed hand-offs unavailable: {why}")
            }
            Error::DirectedMisuse(misuse) => write!(f, "flipcall directed hand-offs: {misuse}"),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::UnknownState(state) => write!(f, "unknown state word {state:#x}"),
            Violation::TurnTaken(state) => {
                write!(f, "turn taken while this side held it (state {state:#x})")
            }
            Violation::Unsettled(state) => {
                write!(
                    f,
                    "state word kept changing while this side held the turn ({state:#x})"
                )
            }
            Violation::LengthOutOfRange { len, capacity } => {
                write!(f, "length {len} beyond capacity {capacity}")
            }
            Violation::BadHeader(what) => write!(f, "bad window header: {what}"),
            Violation::NotSealed => f.write_str("window file not sealed against shrinking"),
            Violation::NotShmem => f.write_str("window file is not a plain shared-memory memfd"),
            Violation::PageRemoved => {
                f.write_str("the kernel could not read the state word (page removed by the peer)")
            }
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errno = |n: i32| std::io::Error::from_raw_os_error(n);
        match self {
            Unavailable::UnknownArchitecture => {
                f.write_str("no seccomp architecture number known for this CPU")
            }
            Unavailable::NoNewPrivsRefused(n) => write!(f, "no_new_privs refused: {}", errno(*n)),
            Unavailable::FilterRefused(n) => {
                write!(f, "seccomp filter with a listener refused: {}", errno(*n))
            }
            Unavailable::KernelTooOld => f.write_str(
                "the kernel lacks seccomp's synchronous wake-ups (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6)",
            ),
            Unavailable::NotAListener => f.write_str("the descriptor is not a seccomp listener"),
            Unavailable::NoThread => f.write_str("no thread could be spawned to probe on"),
        }
    }
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Misuse::WrongThread => "server endpoint used off the thread that opted in",
            Misuse::Timeout => "a directed server's waits cannot time out",
            Misuse::ManyChannelServer => "a directed server endpoint cannot join a Server",
            Misuse::NotAtStart => {
                "opt in on a server before recv_first, a client before connect, once"
            }
            Misuse::NotAccepted => {
                "the server opted in: the client needed its listener before connect"
            }
            Misuse::ClientSendLast => "a directed client cannot send without waiting",
        })
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(err) => Some(err),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Error {
        Error::Io(err)
    }
}

impl From<crate::futex::Error> for Error {
    /// A futex call on a window word fails with [`Fault`](crate::futex::Error::Fault) only when
    /// the peer removed the word's page under us: a [`Violation::PageRemoved`], not an I/O
    /// error. Other failures are reported as [`Error::Io`].
    fn from(err: crate::futex::Error) -> Error {
        match err {
            crate::futex::Error::Fault => Error::Protocol(Violation::PageRemoved),
            err => Error::Io(err.into()),
        }
    }
}

impl From<Violation> for Error {
    fn from(violation: Violation) -> Error {
        Error::Protocol(violation)
    }
}
