//! The endpoints and the turn protocol.
//!
//! ## State word (the header's `state`, a futex word)
//!
//! ```text
//! bits 0-1  turn      0 NEW (nobody connected yet: the server's to give), 1 CLIENT, 2 SERVER
//! bit 2     SLEEPING  the side waiting for the turn sleeps (or is about to) on this word, so
//!                     whoever hands the turn over must wake it
//! bit 3     SHUTDOWN  terminal: every call on either side returns `Shutdown`
//! ```
//!
//! Any other value (turn 3, higher bits) is a [`Violation::UnknownState`].
//!
//! * The server's [`recv_first`](Endpoint::recv_first) moves `NEW -> CLIENT` (so the client's
//!   [`connect`](Endpoint::connect), waiting on `NEW`, returns), then waits for `SERVER`.
//! * Handing over: the holder stores the message length in `len` (relaxed), then one
//!   compare-exchange with Release moves the turn to the peer and clears `SLEEPING`; if it was
//!   set, the holder wakes the peer: with kernel `FUTEX_SWAP` (where probed) the wake and its own
//!   sleep are one call, otherwise a wake, a learned spin ([`crate::spin`]) and a sleep, which is
//!   the emulated swap. While both sides run, a round trip makes no futex call (each side asks
//!   for its CPU once, `sched_getcpu`, which glibc answers from rseq or the vDSO where the
//!   kernel has them).
//! * Waiting: spin while the peer is likely to answer soon, then set `SLEEPING` with a
//!   compare-exchange and futex-wait on that exact value (the steps below). Acquire on the load
//!   that sees the turn come back makes the peer's data visible. Each side writes the CPU it
//!   hands over from into the header (`cpu_of`), and a waiter does not spin when the peer last
//!   handed over from the waiter's own CPU (`spin::partner_may_be_running`): a peer woken or
//!   preempted there waits for the CPU the spin would keep. A sleep after such a skipped spin
//!   teaches the spinner nothing. The many-channel `Server` waits for whichever client calls
//!   and spins without this rule.
//! * Only the holder changes the turn; the waiter only adds `SLEEPING`; anyone adds `SHUTDOWN`
//!   (with `fetch_or`, then a wake of all). So a waiter that finds the turn moved elsewhere, or a
//!   holder that finds it gone, is looking at a lying peer: [`Violation`].
//!
//! ## Waiting: one set of steps
//!
//! Both the blocking calls and the many-channel `Server` wait through the same steps, so a
//! word is classified, and `SLEEPING` is written, in one place each:
//!
//! * `peer_holds_turn`: one relaxed load, classified; what a spin polls. It takes nothing.
//! * `look`: one acquiring load, classified: the turn came back (taken, with the length of its
//!   message, even if the channel was shut down after the hand-over), the peer still holds it
//!   (a `PeerTurn`, the word as seen), the channel is shut down, or the word breaks the
//!   protocol. The turn a waiter waits out is `NEW` before the first hand-over (a connecting
//!   client), the peer's afterwards.
//! * `mark_sleeping`: adds `SLEEPING` to a `PeerTurn` with a compare-exchange and returns the
//!   value to sleep on, or nothing if the word moved since (look again). The kernel swap marks
//!   through it too, with the word its own hand-over wrote.
//! * `sleep`: one futex wait on that value, cut to a peer-check slice when the peer is another
//!   process; at the end of a slice, the deadline and the peer's life are checked.
//!
//! `wait_for_turn` spins, then loops: look, check the deadline (from the second look on, so
//! that an expired deadline still gets one look), mark, sleep. A mark that keeps failing faces
//! a peer rewriting the word: every `MAX_STATE_CHANGES_WHILE_HOLDING` failures the waiter
//! checks the peer's life and yields. The `Server` looks at each of its channels in turn,
//! marks every waiting one with the word its look found, and sleeps on all those words at once
//! with `futex_waitv`.
//!
//! ## Peer death
//!
//! Each endpoint writes its process id into the header when it is made. A waiter whose peer is
//! another process sleeps in slices of [`PEER_CHECK_INTERVAL`] and, between slices, asks a pidfd
//! (opened once) whether the peer has exited: a peer killed by SIGKILL is noticed within one
//! slice, and the fast path (no sleep) never pays for it. The process id is the peer's word, so
//! this holds for a peer that made its endpoint, in this process's pid namespace, and wrote its
//! own id: a peer that dies before making its endpoint, one in another pid namespace, or one
//! that writes another live process's id (or whose id is reused before the first sleep opens
//! the pidfd) is not noticed, and only a deadline or a shutdown ends an untimed wait on it. In
//! one process, dropping an endpoint (also by unwinding) shuts the channel down.

use core::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{Error, Violation};
use super::window::{Region, CLIENT_ROLE, SERVER_ROLE};
use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Deadline, Futex, Private, Scope, ScopeKind, Shared};
use crate::spin::Spinner;
use crate::swap::{self, SwapMode};

const TURN_MASK: u32 = 0b11;
const NEW: u32 = 0;
const CLIENT: u32 = 1;
const SERVER: u32 = 2;
const SLEEPING: u32 = 4;
const SHUTDOWN: u32 = 8;
const KNOWN_BITS: u32 = TURN_MASK | SLEEPING | SHUTDOWN;

/// While this side holds the turn the peer may change the word only by setting `SLEEPING` or
/// `SHUTDOWN`: a hand-over that keeps losing its compare-exchange more often than this faces a
/// peer rewriting the word, and gives up rather than spin forever.
const MAX_STATE_CHANGES_WHILE_HOLDING: u32 = 64;

/// How often a waiter whose peer is another process checks that the peer is alive: the bound on
/// how long a peer's death goes unnoticed. The price: a waiter on a shared window wakes this
/// often while it sleeps (100 times a second), never while the calls keep flowing.
pub const PEER_CHECK_INTERVAL: Duration = Duration::from_millis(10);

/// Which side of the channel an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Connects, then makes calls with [`Endpoint::send_recv`].
    Client,
    /// Receives the first call with [`Endpoint::recv_first`], then answers with
    /// [`Endpoint::send_recv`] (or [`Endpoint::send_last`]).
    Server,
}

impl Role {
    fn turn(self) -> u32 {
        match self {
            Role::Client => CLIENT,
            Role::Server => SERVER,
        }
    }

    fn peer_turn(self) -> u32 {
        match self {
            Role::Client => SERVER,
            Role::Server => CLIENT,
        }
    }

    fn bit(self) -> u32 {
        match self {
            Role::Client => CLIENT_ROLE,
            Role::Server => SERVER_ROLE,
        }
    }

    fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }
}

/// Where this endpoint is in the protocol (local state: the peer cannot touch it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before `connect` (client) or `recv_first` (server).
    Start,
    /// This side holds the turn and may use the data area.
    Holding,
    /// The peer holds the turn; this side waits (or timed out waiting) for it.
    Waiting,
}

/// What a state word means to a side waiting for `mine` while the peer holds `pending`.
enum Seen {
    /// The turn is ours, even if the channel was shut down after it was handed over: the
    /// message that came with it is delivered, and the next call reports the shutdown.
    Mine,
    Pending,
    Shutdown,
    /// Bits or a turn no endpoint writes.
    Unknown,
    /// A real turn, but not one this side can see now (the peer took or skipped a step).
    Unexpected,
}

fn classify(state: u32, mine: u32, pending: u32) -> Seen {
    let turn = state & TURN_MASK;
    if state & !KNOWN_BITS != 0 || turn == TURN_MASK {
        return Seen::Unknown;
    }
    if turn == mine {
        return Seen::Mine;
    }
    if state & SHUTDOWN != 0 {
        return Seen::Shutdown;
    }
    if turn == pending {
        Seen::Pending
    } else {
        Seen::Unexpected
    }
}

impl Seen {
    fn violation(self, state: u32) -> Violation {
        match self {
            Seen::Unknown => Violation::UnknownState(state),
            _ => Violation::TurnTaken(state),
        }
    }
}

/// What one [`look`](Endpoint::look) at the state word found, for a side waiting for the turn.
pub(crate) enum Look {
    /// The turn came back and this side took it: the length of the message that came with it.
    Taken(usize),
    /// The peer still holds the turn.
    Pending(PeerTurn),
}

/// A state word that holds the peer's turn, as a look found it (or as this side's own
/// hand-over wrote it): what [`mark_sleeping`](Endpoint::mark_sleeping) marks and a waiter
/// sleeps on. Whether a word is the peer's turn depends on its value alone, so a `PeerTurn`
/// never goes wrong with age: once the word has moved, the mark fails or the sleep returns at
/// once.
#[derive(Clone, Copy)]
pub(crate) struct PeerTurn(u32);

/// One side of a FlipCall channel.
///
/// The scope says where the peer is, as for a [`Futex`]:
///
/// * `Endpoint<Private>` (the default) comes from [`pair`](super::pair): the peer is a thread of
///   this process, so the data area is plain memory lent out as slices
///   ([`data`](Endpoint::data), [`data_mut`](Endpoint::data_mut)).
/// * `Endpoint<Shared>` comes from [`Endpoint::client`] / [`Endpoint::server`] on a
///   [`PacketWindow`](super::PacketWindow): the peer may be another process, which can write the
///   area at any moment, so safe code only copies in and out of it
///   ([`read_into`](Endpoint::read_into), [`write_from`](Endpoint::write_from)), and a slice
///   view is `unsafe` ([`data_unchecked`](Endpoint::data_unchecked)).
///
/// Calls take `&mut self` and every data accessor borrows the endpoint, so the data area cannot
/// be touched while the turn is handed over. Dropping an endpoint shuts the channel down.
///
/// An endpoint belongs to the process that made it: make each process's after a `fork`, from
/// the window it inherited. A fork child's copy of its parent's endpoint shuts the channel down
/// when dropped, as the parent's would; one the child uses instead of the parent announces the
/// child at its first call, so that the peer watches the child's process from then on.
pub struct Endpoint<S: Scope = Private> {
    region: Arc<Region>,
    role: Role,
    phase: Phase,
    spinner: Spinner,
    /// The CPU of this side's last hand-over (`spin::NO_CPU` before the first).
    hand_over_cpu: u32,
    peer: super::peer::PeerWatch,
    scope: PhantomData<fn() -> S>,
}

// A compile-time reminder: endpoints move between threads (a server thread), the region is
// Send + Sync, the rest is plain data.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<Endpoint<Private>>();
    assert_send::<Endpoint<Shared>>();
};

impl<S: Scope> core::fmt::Debug for Endpoint<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("role", &self.role)
            .field("scope", &S::KIND)
            .field("phase", &self.phase)
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl Endpoint<Shared> {
    /// The client endpoint of `window` (one per window).
    ///
    /// # Errors
    ///
    /// [`Error::RoleTaken`] if the window already has a client.
    pub fn client(window: &super::PacketWindow) -> Result<Endpoint<Shared>, Error> {
        Endpoint::claim(Arc::clone(&window.region), Role::Client)
    }

    /// The server endpoint of `window` (one per window).
    ///
    /// # Errors
    ///
    /// [`Error::RoleTaken`] if the window already has a server.
    pub fn server(window: &super::PacketWindow) -> Result<Endpoint<Shared>, Error> {
        Endpoint::claim(Arc::clone(&window.region), Role::Server)
    }

    /// The data area as a slice, without a copy.
    ///
    /// # Safety
    ///
    /// For as long as the slice lives, nothing may write the data area: the caller must know
    /// that the peer follows the protocol (it does not write while this side holds the turn),
    /// for example because it is this same program in a process the caller started and trusts.
    /// A peer that writes anyway makes this a data race, which is undefined behaviour: use
    /// [`read_into`](Endpoint::read_into) for a peer you do not trust.
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn.
    pub unsafe fn data_unchecked(&self) -> &[u8] {
        self.assert_holding("data_unchecked");
        // SAFETY: `capacity` bytes that live as long as the region we hold; the caller
        // guarantees nothing writes them while the borrow of `self` lasts, and handing the turn
        // over (which lets an honest peer write) needs `&mut self`.
        unsafe { core::slice::from_raw_parts(self.region.data_ptr(), self.capacity()) }
    }

    /// The data area as a mutable slice, without a copy.
    ///
    /// # Safety
    ///
    /// As [`data_unchecked`](Endpoint::data_unchecked): nothing else may read or write the area
    /// while the slice lives, which a peer that follows the protocol guarantees.
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn.
    pub unsafe fn data_mut_unchecked(&mut self) -> &mut [u8] {
        self.assert_holding("data_mut_unchecked");
        // SAFETY: as in `data_unchecked`, with `&mut self` making this the only borrow through
        // this endpoint.
        unsafe { core::slice::from_raw_parts_mut(self.region.data_ptr(), self.capacity()) }
    }
}

impl Endpoint<Private> {
    /// The data area, to read the message just received.
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn: the peer may be writing the area.
    pub fn data(&self) -> &[u8] {
        self.assert_holding("data");
        // SAFETY: the area is `capacity` bytes that live as long as the region we hold. The
        // peer is the other endpoint of an in-process pair, which touches the area only while
        // it holds the turn (every accessor checks its phase); this side holds it, and handing
        // it over needs `&mut self`, which ends this borrow first.
        unsafe { core::slice::from_raw_parts(self.region.data_ptr(), self.capacity()) }
    }

    /// The data area, to write the next message.
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.assert_holding("data_mut");
        // SAFETY: as in `data`; `&mut self` makes this the only borrow through this endpoint,
        // and the peer endpoint does not touch the area while we hold the turn.
        unsafe { core::slice::from_raw_parts_mut(self.region.data_ptr(), self.capacity()) }
    }
}

impl<S: Scope> Endpoint<S> {
    pub(crate) fn claim(region: Arc<Region>, role: Role) -> Result<Endpoint<S>, Error> {
        debug_assert_eq!(region.is_shared(), S::KIND == ScopeKind::Shared);
        let header = region.header();
        if header.roles.fetch_or(role.bit(), Ordering::AcqRel) & role.bit() != 0 {
            return Err(Error::RoleTaken);
        }
        let peer = super::peer::PeerWatch::announce(header, role);
        Ok(Endpoint {
            region,
            role,
            phase: Phase::Start,
            spinner: Spinner::new(),
            hand_over_cpu: crate::spin::NO_CPU,
            peer,
            scope: PhantomData,
        })
    }

    /// This endpoint's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Data bytes per message.
    pub fn capacity(&self) -> usize {
        self.region.capacity()
    }

    /// Whether this side holds the turn (and so may use the data area).
    pub fn holds_turn(&self) -> bool {
        self.phase == Phase::Holding
    }

    /// Copies `dst.len()` bytes of the data area, starting at `offset`, into `dst`: to read the
    /// message just received.
    ///
    /// With a peer in another process, each byte is one the area held at some moment during the
    /// copy: a peer that writes out of turn can garble the message, as any sender of bytes can,
    /// but cannot make the copy misbehave.
    ///
    /// ```
    /// use futexkit::flipcall::{Endpoint, PacketWindow};
    ///
    /// let window = PacketWindow::new(64)?;
    /// let (mut client, mut server) = (Endpoint::client(&window)?, Endpoint::server(&window)?);
    /// let echo = std::thread::spawn(move || -> Result<(), futexkit::flipcall::Error> {
    ///     let len = server.recv_first()?;
    ///     let mut request = vec![0; len];
    ///     server.read_into(0, &mut request);
    ///     request.reverse();
    ///     server.write_from(0, &request);
    ///     server.send_last(len)
    /// });
    /// client.connect()?;
    /// client.write_from(0, b"abc");
    /// let len = client.send_recv(3)?;
    /// let mut reply = [0; 3];
    /// client.read_into(0, &mut reply[..len]);
    /// assert_eq!(&reply, b"cba");
    /// echo.join().unwrap()?;
    /// # Ok::<(), futexkit::flipcall::Error>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn, or the range goes past [`capacity`](Endpoint::capacity).
    pub fn read_into(&self, offset: usize, dst: &mut [u8]) {
        self.assert_holding("read_into");
        self.assert_in_bounds(offset, dst.len());
        // SAFETY: this side holds the turn, and the range is in bounds: both asserted above.
        unsafe { self.region.copy_out(offset, dst) };
    }

    /// Copies `src` into the data area at `offset`: to write the next message.
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn, or the range goes past [`capacity`](Endpoint::capacity).
    pub fn write_from(&mut self, offset: usize, src: &[u8]) {
        self.assert_holding("write_from");
        self.assert_in_bounds(offset, src.len());
        // SAFETY: this side holds the turn, and the range is in bounds: both asserted above.
        unsafe { self.region.copy_in(offset, src) };
    }

    fn assert_in_bounds(&self, offset: usize, len: usize) {
        let capacity = self.capacity();
        assert!(
            offset <= capacity && len <= capacity - offset,
            "flipcall: range {offset}..{offset}+{len} beyond the data area's {capacity} bytes"
        );
    }

    fn assert_holding(&self, what: &str) {
        assert!(
            self.phase == Phase::Holding,
            "flipcall: {what}() called while the peer holds the turn"
        );
    }

    /// A handle that shuts the channel down from any thread (or, via the window, any process).
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            region: Arc::clone(&self.region),
        }
    }

    /// Client: waits until the server is ready ([`recv_first`](Endpoint::recv_first) called);
    /// then this side holds the turn.
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`], [`Error::PeerDied`], [`Error::Protocol`]; [`Error::WrongTurn`] on a
    /// server or a connected client.
    pub fn connect(&mut self) -> Result<(), Error> {
        self.connect_until(None)
    }

    /// [`connect`](Endpoint::connect) with a timeout ([`Error::TimedOut`]; call again to keep
    /// waiting).
    ///
    /// # Errors
    ///
    /// As [`connect`](Endpoint::connect), and [`Error::TimedOut`].
    pub fn connect_timeout(&mut self, timeout: Duration) -> Result<(), Error> {
        self.connect_until(Some(Deadline::after(timeout)))
    }

    fn connect_until(&mut self, deadline: Option<Deadline>) -> Result<(), Error> {
        if self.role != Role::Client || self.phase != Phase::Start {
            return Err(Error::WrongTurn);
        }
        self.wait_for_turn(deadline).map(drop)
    }

    /// Server: announces it is ready and waits for the first call; returns its length.
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`], [`Error::PeerDied`], [`Error::Protocol`]; [`Error::WrongTurn`] on a
    /// client or after the first call.
    pub fn recv_first(&mut self) -> Result<usize, Error> {
        self.recv_first_until(None)
    }

    /// [`recv_first`](Endpoint::recv_first) with a timeout. After [`Error::TimedOut`] the server
    /// is ready; keep waiting with [`recv`](Endpoint::recv).
    ///
    /// # Errors
    ///
    /// As [`recv_first`](Endpoint::recv_first), and [`Error::TimedOut`].
    pub fn recv_first_timeout(&mut self, timeout: Duration) -> Result<usize, Error> {
        self.recv_first_until(Some(Deadline::after(timeout)))
    }

    fn recv_first_until(&mut self, deadline: Option<Deadline>) -> Result<usize, Error> {
        if self.role != Role::Server || self.phase != Phase::Start {
            return Err(Error::WrongTurn);
        }
        self.region.header().len.store(0, Ordering::Relaxed);
        self.hand_over_and_wait(NEW, deadline)
    }

    /// Hands the first `len` bytes of the data area to the peer and waits for its reply; returns
    /// the reply's length (its bytes are in the data area).
    ///
    /// ```
    /// let (mut client, mut server) = futexkit::flipcall::pair(64)?;
    /// let echo = std::thread::spawn(move || -> Result<(), futexkit::flipcall::Error> {
    ///     let mut len = server.recv_first()?;
    ///     loop {
    ///         server.data_mut()[..len].reverse();
    ///         len = match server.send_recv(len) {
    ///             Ok(len) => len,
    ///             Err(futexkit::flipcall::Error::Shutdown) => return Ok(()),
    ///             Err(err) => return Err(err),
    ///         };
    ///     }
    /// });
    /// client.connect()?;
    /// client.data_mut()[..3].copy_from_slice(b"abc");
    /// let len = client.send_recv(3)?;
    /// assert_eq!(&client.data()[..len], b"cba");
    /// drop(client); // shuts the channel down: the server's send_recv returns Shutdown
    /// echo.join().unwrap()?;
    /// # Ok::<(), futexkit::flipcall::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::TooLong`] (nothing is sent); [`Error::Shutdown`]; [`Error::PeerDied`];
    /// [`Error::Protocol`]; [`Error::WrongTurn`] if this side does not hold the turn.
    pub fn send_recv(&mut self, len: usize) -> Result<usize, Error> {
        self.send_recv_until(len, None)
    }

    /// [`send_recv`](Endpoint::send_recv) with a timeout. After [`Error::TimedOut`] the message
    /// has been sent; keep waiting for the reply with [`recv`](Endpoint::recv).
    ///
    /// # Errors
    ///
    /// As [`send_recv`](Endpoint::send_recv), and [`Error::TimedOut`].
    pub fn send_recv_timeout(&mut self, len: usize, timeout: Duration) -> Result<usize, Error> {
        self.send_recv_until(len, Some(Deadline::after(timeout)))
    }

    fn send_recv_until(&mut self, len: usize, deadline: Option<Deadline>) -> Result<usize, Error> {
        self.store_len(len)?;
        self.hand_over_and_wait(self.role.turn(), deadline)
    }

    /// Hands the first `len` bytes to the peer without waiting for a reply (a server's last
    /// answer, for example). [`recv`](Endpoint::recv) can still wait for the turn later.
    ///
    /// # Errors
    ///
    /// As [`send_recv`](Endpoint::send_recv), without the waiting ones.
    pub fn send_last(&mut self, len: usize) -> Result<(), Error> {
        self.store_len(len)?;
        let peer_slept = self.hand_over(self.role.turn())?;
        if peer_slept {
            self.wake_peer();
        }
        Ok(())
    }

    /// Waits for the turn without sending anything: to keep waiting after a call timed out.
    /// Returns the length of the message that came with the turn.
    ///
    /// # Errors
    ///
    /// As [`send_recv`](Endpoint::send_recv); [`Error::WrongTurn`] if this side holds the turn
    /// or has not started.
    pub fn recv(&mut self) -> Result<usize, Error> {
        self.recv_until(None)
    }

    /// [`recv`](Endpoint::recv) with a timeout.
    ///
    /// # Errors
    ///
    /// As [`recv`](Endpoint::recv), and [`Error::TimedOut`].
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<usize, Error> {
        self.recv_until(Some(Deadline::after(timeout)))
    }

    fn recv_until(&mut self, deadline: Option<Deadline>) -> Result<usize, Error> {
        if self.phase != Phase::Waiting {
            return Err(Error::WrongTurn);
        }
        self.wait_for_turn(deadline)
    }

    fn store_len(&mut self, len: usize) -> Result<(), Error> {
        if self.phase != Phase::Holding {
            return Err(Error::WrongTurn);
        }
        if len > self.capacity() {
            return Err(Error::TooLong {
                len,
                capacity: self.capacity(),
            });
        }
        self.region
            .header()
            .len
            .store(len as u32, Ordering::Relaxed);
        Ok(())
    }

    fn hand_over_and_wait(
        &mut self,
        from: u32,
        deadline: Option<Deadline>,
    ) -> Result<usize, Error> {
        let peer_slept = self.hand_over(from)?;
        if peer_slept {
            if swap::mode() == SwapMode::Kernel {
                self.swap_to_peer(deadline)?;
            } else {
                self.wake_peer();
            }
        }
        self.wait_for_turn(deadline)
    }

    /// Moves the turn from `from` (this side's) to the peer; returns whether the peer slept.
    fn hand_over(&mut self, from: u32) -> Result<bool, Error> {
        self.follow_fork();
        let state = &self.region.header().state;
        let to = self.role.peer_turn();
        self.hand_over_cpu =
            crate::spin::record_hand_over_cpu(self.region.header().cpu_of(self.role));
        let mut current = state.load(Ordering::Relaxed);
        for _ in 0..MAX_STATE_CHANGES_WHILE_HOLDING {
            // Holding the turn, SHUTDOWN wins: nothing more may be handed over.
            if current & SHUTDOWN != 0 && current & !KNOWN_BITS == 0 {
                return Err(Error::Shutdown);
            }
            match classify(current & !SLEEPING, from, to) {
                Seen::Mine => {}
                seen => return Err(seen.violation(current).into()),
            }
            match state.compare_exchange_weak(current, to, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    self.phase = Phase::Waiting;
                    return Ok(current & SLEEPING != 0);
                }
                Err(now) => current = now,
            }
        }
        Err(Violation::Unsettled(current).into())
    }

    /// The window's state word as a futex of this endpoint's scope.
    pub(crate) fn state_futex(&self) -> &Futex<S> {
        Futex::from_atomic(&self.region.header().state)
    }

    /// Whether the peer may be another process (and so may die without a word).
    fn crosses_processes(&self) -> bool {
        S::KIND == ScopeKind::Shared
    }

    /// Kernel FUTEX_SWAP: wakes the sleeping peer and sleeps in one call (one slice at most);
    /// `wait_for_turn` looks at the word next. Should the call fail before its wake half, the
    /// peer is woken the ordinary way.
    #[cold]
    fn swap_to_peer(&mut self, deadline: Option<Deadline>) -> Result<(), Error> {
        // The hand-over just stored the peer's turn, without `SLEEPING`: a word the peer holds.
        let Some(asleep) = self.mark_sleeping(PeerTurn(self.role.peer_turn())) else {
            self.wake_peer();
            return Ok(());
        };
        let slice = self.slice_deadline(deadline);
        let futex = self.state_futex();
        match swap::swap_in(SwapMode::Kernel, futex, asleep, futex, slice) {
            Ok(()) | Err(crate::futex::Error::ValueChanged) => Ok(()),
            Err(crate::futex::Error::TimedOut) => self.check_peer(),
            Err(_) => {
                self.wake_peer();
                Ok(())
            }
        }
    }

    #[cold]
    fn wake_peer(&self) {
        let _ = self.state_futex().wake(1);
    }

    /// Waits until the turn is this side's; returns the length that came with it. The loop
    /// over the wait steps: spin while the peer is likely to answer soon, then look, mark
    /// `SLEEPING`, sleep, until a look takes the turn or ends the wait.
    /// In a fork child using its parent's endpoint, announces the child before its first
    /// step (one load per call otherwise), so that the peer watches the process that waits.
    fn follow_fork(&mut self) {
        if self.crosses_processes() {
            self.peer.follow_fork(self.region.header());
        }
    }

    fn wait_for_turn(&mut self, deadline: Option<Deadline>) -> Result<usize, Error> {
        self.follow_fork();
        if self.peer.died() {
            return Err(Error::PeerDied);
        }
        let peer_cpu = self.region.header().cpu_of(self.role.peer());
        let spun = crate::spin::partner_may_be_running(peer_cpu, self.hand_over_cpu);
        if spun {
            self.spinner
                .spin_until_before(deadline, || !self.peer_holds_turn());
        }
        let mut slept_since: Option<Instant> = None;
        let mut first_look = true;
        let mut lost_races = 0u32;
        loop {
            let seen = match self.look()? {
                Look::Taken(len) => {
                    // A sleep teaches the spinner only what a spin before it could have caught.
                    if let Some(start) = slept_since.filter(|_| spun) {
                        self.spinner.record_sleep(start.elapsed());
                    }
                    return Ok(len);
                }
                Look::Pending(seen) => seen,
            };
            // A peer that keeps rewriting the word must not keep us here past the deadline.
            if !first_look && deadline.is_some_and(|d| d.has_passed()) {
                return Err(Error::TimedOut);
            }
            first_look = false;
            let Some(asleep) = self.mark_sleeping(seen) else {
                // Only a peer rewriting the word makes this fail again and again: let it not
                // keep us from noticing its death, nor from sharing the CPU.
                lost_races = lost_races.wrapping_add(1);
                if lost_races % MAX_STATE_CHANGES_WHILE_HOLDING == 0 {
                    self.check_peer()?;
                    crate::thread::yield_now();
                }
                continue;
            };
            if slept_since.is_none() {
                slept_since = Some(Instant::now());
                // Open the peer's pidfd before the first sleep, not at the first check, to
                // narrow the window in which its pid could be reused.
                if self.crosses_processes() {
                    self.peer.watch(self.region.header());
                }
            }
            self.sleep(asleep, deadline)?;
        }
    }

    // ---- The wait steps (module docs), shared by `wait_for_turn` and the Server ----

    /// The turn the peer holds while this side waits: before the first hand-over nobody's
    /// (`NEW`, which only a connecting client waits out), afterwards the peer's.
    fn pending_turn(&self) -> u32 {
        match self.phase {
            Phase::Start => NEW,
            Phase::Holding | Phase::Waiting => self.role.peer_turn(),
        }
    }

    /// Loads the state word with `order` and classifies it for this side waiting for the turn:
    /// the one place a waiter decides what a word means.
    fn load_and_classify(&self, order: Ordering) -> (u32, Seen) {
        let current = self.region.header().state.load(order);
        let seen = classify(current & !SLEEPING, self.role.turn(), self.pending_turn());
        (current, seen)
    }

    /// Whether the peer still holds the turn, as far as one relaxed load can tell: `false`
    /// means there is something to [`look`](Endpoint::look) at (the turn, a shutdown, a
    /// violation). For spinning and polling: it takes nothing.
    pub(crate) fn peer_holds_turn(&self) -> bool {
        matches!(self.load_and_classify(Ordering::Relaxed).1, Seen::Pending)
    }

    /// Shuts the channel down only while the peer still holds the turn: one compare-exchange
    /// from the word seen, so that a call handed over meanwhile is not shut out unserved
    /// (`false`: something came, for the caller to look at). For closing an idle channel.
    pub(crate) fn shut_down_while_peer_holds_turn(&self) -> bool {
        let state: &AtomicU32 = &self.region.header().state;
        // A peer that keeps changing the word while it holds the turn (it may only hand the
        // turn over or shut down) is not waited for longer than a hand-over waits for one.
        for _ in 0..MAX_STATE_CHANGES_WHILE_HOLDING {
            let (current, seen) = self.load_and_classify(Ordering::Relaxed);
            if !matches!(seen, Seen::Pending) {
                return false;
            }
            if state
                .compare_exchange(
                    current,
                    current | SHUTDOWN,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                wake_everyone(&self.region);
                return true;
            }
        }
        shut_down(&self.region);
        true
    }

    /// Looks at the state word once, while waiting for the turn, and takes the turn if it came
    /// back: this side then holds it, even if the channel was shut down after the hand-over
    /// (the message that came with it is delivered; the next call reports the shutdown).
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`] while the peer holds the turn of a shut-down channel;
    /// [`Error::Protocol`] for a word or a length the peer cannot have written honestly.
    pub(crate) fn look(&mut self) -> Result<Look, Error> {
        debug_assert_ne!(self.phase, Phase::Holding);
        // Acquire: a turn that came back brings the peer's writes of the data area and `len`.
        let (current, seen) = self.load_and_classify(Ordering::Acquire);
        match seen {
            Seen::Mine => {
                self.phase = Phase::Holding;
                self.received_len().map(Look::Taken)
            }
            Seen::Pending => Ok(Look::Pending(PeerTurn(current))),
            Seen::Shutdown => Err(Error::Shutdown),
            seen => Err(seen.violation(current).into()),
        }
    }

    /// Marks the state word `SLEEPING`, so that the peer's hand-over wakes this side, and
    /// returns the value to sleep on; `None` if the word is no longer `seen` (look again). The
    /// one place a waiter writes the word.
    pub(crate) fn mark_sleeping(&self, seen: PeerTurn) -> Option<u32> {
        let PeerTurn(seen) = seen;
        let asleep = seen | SLEEPING;
        if seen == asleep {
            return Some(asleep);
        }
        self.region
            .header()
            .state
            .compare_exchange(seen, asleep, Ordering::Relaxed, Ordering::Relaxed)
            .ok()
            .map(|_| asleep)
    }

    /// Sleeps while the state word is `asleep`, for one slice at most: returns when woken, when
    /// the word moved, or when the slice ran out with the deadline still ahead and the peer
    /// still alive.
    fn sleep(&mut self, asleep: u32, deadline: Option<Deadline>) -> Result<(), Error> {
        let slice = self.slice_deadline(deadline);
        match self.state_futex().wait(asleep, slice) {
            Ok(()) | Err(crate::futex::Error::ValueChanged) => Ok(()),
            Err(crate::futex::Error::TimedOut) => {
                if deadline.is_some_and(|d| d.has_passed()) {
                    return Err(Error::TimedOut);
                }
                self.check_peer()
            }
            Err(err) => Err(err.into()),
        }
    }

    // ---- Server only ----

    /// Server: announces readiness as [`recv_first`](Endpoint::recv_first) does, without
    /// waiting for the first call; returns the word it handed over, the client's turn.
    pub(crate) fn start_serving(&mut self) -> Result<PeerTurn, Error> {
        if self.role != Role::Server || self.phase != Phase::Start {
            return Err(Error::WrongTurn);
        }
        self.region.header().len.store(0, Ordering::Relaxed);
        if self.hand_over(NEW)? {
            self.wake_peer();
        }
        Ok(PeerTurn(self.role.peer_turn()))
    }

    /// Whether the peer process is still alive (always, for a peer in this process); opens its
    /// pidfd the first time.
    pub(crate) fn peer_alive(&mut self) -> bool {
        self.check_peer().is_ok()
    }

    fn received_len(&self) -> Result<usize, Error> {
        let len = self.region.header().len.load(Ordering::Relaxed);
        let capacity = self.capacity();
        if len as usize > capacity {
            return Err(Violation::LengthOutOfRange { len, capacity }.into());
        }
        Ok(len as usize)
    }

    /// The deadline for the next sleep: the caller's, cut to one peer-check interval when the
    /// peer is another process.
    fn slice_deadline(&self, deadline: Option<Deadline>) -> Option<Deadline> {
        if self.crosses_processes() {
            let slice = Deadline::after(PEER_CHECK_INTERVAL);
            return Some(match deadline {
                Some(d) if d.remaining() < PEER_CHECK_INTERVAL => d,
                _ => slice,
            });
        }
        deadline
    }

    fn check_peer(&mut self) -> Result<(), Error> {
        if self.crosses_processes() && !self.peer.check(self.region.header()) {
            return Err(Error::PeerDied);
        }
        Ok(())
    }
}

impl<S: Scope> Drop for Endpoint<S> {
    fn drop(&mut self) {
        shut_down(&self.region);
    }
}

/// Sets `SHUTDOWN` and wakes everyone waiting on the window (a shutdown handle does not know
/// the endpoints' scope: the region does).
fn shut_down(region: &Region) {
    let state: &AtomicU32 = &region.header().state;
    let previous = state.fetch_or(SHUTDOWN, Ordering::AcqRel);
    if previous & SHUTDOWN == 0 {
        wake_everyone(region);
    }
}

fn wake_everyone(region: &Region) {
    let state: &AtomicU32 = &region.header().state;
    let _ = if region.is_shared() {
        Futex::<Shared>::from_atomic(state).wake(u32::MAX)
    } else {
        Futex::<Private>::from_atomic(state).wake(u32::MAX)
    };
}

/// Shuts a FlipCall channel down from any thread: every blocked or later call on either side
/// returns [`Error::Shutdown`].
///
/// ```
/// let (mut client, mut server) = futexkit::flipcall::pair(16)?;
/// let stop = server.shutdown_handle();
/// // The client waits for a server that never gets to announce itself.
/// let waiter = std::thread::spawn(move || client.connect());
/// stop.shutdown();
/// assert!(matches!(waiter.join().unwrap(), Err(futexkit::flipcall::Error::Shutdown)));
/// assert!(matches!(server.recv_first(), Err(futexkit::flipcall::Error::Shutdown)));
/// # Ok::<(), futexkit::flipcall::Error>(())
/// ```
#[derive(Clone)]
pub struct ShutdownHandle {
    region: Arc<Region>,
}

impl ShutdownHandle {
    /// Shuts the channel down (idempotent).
    pub fn shutdown(&self) {
        shut_down(&self.region);
    }

    /// Whether the channel has been shut down.
    pub fn is_shutdown(&self) -> bool {
        self.region.header().state.load(Ordering::Acquire) & SHUTDOWN != 0
    }
}

impl core::fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShutdownHandle")
            .field("is_shutdown", &self.is_shutdown())
            .finish()
    }
}
