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
    /// A message length beyond the window's capacity. The turn came with it, so this side
    /// holds the turn ([`Endpoint::holds_turn`](super::Endpoint::holds_turn)): it may answer
    /// (with an error message, say), or drop the endpoint.
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
