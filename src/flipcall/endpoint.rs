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
//!   the emulated swap. While both sides run, a round trip makes no syscall.
//! * Waiting: spin while the peer is likely to answer soon, then set `SLEEPING` with a
//!   compare-exchange and futex-wait on that exact value. Acquire on the load that sees the turn
//!   come back makes the peer's data visible.
//! * Only the holder changes the turn; the waiter only adds `SLEEPING`; anyone adds `SHUTDOWN`
//!   (with `fetch_or`, then a wake of all). So a waiter that finds the turn moved elsewhere, or a
//!   holder that finds it gone, is looking at a lying peer: [`Violation`].
//!
//! ## Peer death
//!
//! Each endpoint writes its process id into the header when it is made. A waiter whose peer is
//! another process sleeps in slices of [`PEER_CHECK_INTERVAL`] and, between slices, asks a pidfd
//! (opened once) whether the peer has exited: a peer killed by SIGKILL is noticed within one
//! slice, and the fast path (no sleep) never pays for it. In one process, dropping an endpoint
//! (also by unwinding) shuts the channel down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{Error, Violation};
use super::window::{Region, CLIENT_ROLE, SERVER_ROLE};
use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Deadline, Futex, Private, Scope, Shared};
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

/// One side of a FlipCall channel.
///
/// Made by [`pair`](super::pair) (both sides in one process) or by [`Endpoint::client`] /
/// [`Endpoint::server`] on a [`PacketWindow`](super::PacketWindow). Calls take `&mut self`, and
/// [`data`](Endpoint::data) / [`data_mut`](Endpoint::data_mut) borrow the endpoint, so the data
/// area cannot be touched while the turn is handed over. Dropping an endpoint shuts the channel
/// down.
pub struct Endpoint {
    region: Arc<Region>,
    role: Role,
    phase: Phase,
    spinner: Spinner,
    #[cfg(not(model))]
    peer: super::peer::PeerWatch,
}

// A compile-time reminder: endpoints move between threads (a server thread), the region is
// Send + Sync, the rest is plain data.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<Endpoint>();
};

impl core::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("role", &self.role)
            .field("phase", &self.phase)
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The client endpoint of `window` (one per window).
    ///
    /// # Errors
    ///
    /// [`Error::RoleTaken`] if the window already has a client.
    #[cfg(not(model))]
    pub fn client(window: &super::PacketWindow) -> Result<Endpoint, Error> {
        Endpoint::claim(Arc::clone(&window.region), Role::Client)
    }

    /// The server endpoint of `window` (one per window).
    ///
    /// # Errors
    ///
    /// [`Error::RoleTaken`] if the window already has a server.
    #[cfg(not(model))]
    pub fn server(window: &super::PacketWindow) -> Result<Endpoint, Error> {
        Endpoint::claim(Arc::clone(&window.region), Role::Server)
    }

    pub(crate) fn claim(region: Arc<Region>, role: Role) -> Result<Endpoint, Error> {
        let header = region.header();
        if header.roles.fetch_or(role.bit(), Ordering::AcqRel) & role.bit() != 0 {
            return Err(Error::RoleTaken);
        }
        #[cfg(not(model))]
        let peer = super::peer::PeerWatch::announce(header, role);
        Ok(Endpoint {
            region,
            role,
            phase: Phase::Start,
            spinner: Spinner::new(),
            #[cfg(not(model))]
            peer,
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

    /// Whether this side holds the turn (and so may use [`data`](Endpoint::data)).
    pub fn holds_turn(&self) -> bool {
        self.phase == Phase::Holding
    }

    /// The data area, to read the message just received.
    ///
    /// # Panics
    ///
    /// If this side does not hold the turn: the peer may be writing the area.
    pub fn data(&self) -> &[u8] {
        self.assert_holding("data");
        // SAFETY: the area is `capacity` bytes that live as long as the region we hold. This
        // side holds the turn, so a peer that follows the protocol does not write it until we
        // hand the turn over, which needs `&mut self` and so ends this borrow. A peer process
        // that breaks the protocol can still change the bytes under us: see "Memory model" in
        // the module documentation for why that yields garbage bytes but not undefined
        // behaviour in practice.
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
        // and the peer endpoint (the only other user of the region's data) does not touch the
        // area while we hold the turn, if it follows the protocol.
        unsafe { core::slice::from_raw_parts_mut(self.region.data_ptr(), self.capacity()) }
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
        self.wait_for_turn(NEW, deadline).map(drop)
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
    /// the reply's length (its bytes are in [`data`](Endpoint::data)).
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
        self.wait_for_turn(self.role.peer_turn(), deadline)
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
        let pending = self.role.peer_turn();
        if peer_slept {
            if swap::mode() == SwapMode::Kernel {
                self.swap_to_peer(pending, deadline)?;
            } else {
                self.wake_peer();
            }
        }
        self.wait_for_turn(pending, deadline)
    }

    /// Moves the turn from `from` (this side's) to the peer; returns whether the peer slept.
    fn hand_over(&mut self, from: u32) -> Result<bool, Error> {
        let state = &self.region.header().state;
        let to = self.role.peer_turn();
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

    /// Kernel FUTEX_SWAP: wakes the sleeping peer and sleeps in one call (one slice at most);
    /// `wait_for_turn` looks at the word next. Should the call fail before its wake half, the
    /// peer is woken the ordinary way.
    #[cold]
    fn swap_to_peer(&mut self, pending: u32, deadline: Option<Deadline>) -> Result<(), Error> {
        let state = &self.region.header().state;
        let asleep = pending | SLEEPING;
        if state
            .compare_exchange(pending, asleep, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            self.wake_peer();
            return Ok(());
        }
        let slice = self.slice_deadline(deadline);
        match with_futex(&self.region, |futex| futex.swap_kernel(asleep, slice)) {
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
        let _ = with_futex(&self.region, |futex| futex.wake(1));
    }

    /// Waits until the turn is this side's, while the peer holds `pending`; returns the length
    /// that came with it.
    fn wait_for_turn(&mut self, pending: u32, deadline: Option<Deadline>) -> Result<usize, Error> {
        #[cfg(not(model))]
        if self.peer.died() {
            return Err(Error::PeerDied);
        }
        let mine = self.role.turn();
        let region = &self.region;
        self.spinner.spin_until_before(deadline, || {
            let current = region.header().state.load(Ordering::Relaxed);
            !matches!(classify(current & !SLEEPING, mine, pending), Seen::Pending)
        });
        let mut slept_since: Option<Instant> = None;
        let mut first = true;
        let mut lost_races = 0u32;
        loop {
            let state = &self.region.header().state;
            let current = state.load(Ordering::Acquire);
            match classify(current & !SLEEPING, mine, pending) {
                Seen::Mine => {
                    if let Some(start) = slept_since {
                        self.spinner.record_sleep(start.elapsed());
                    }
                    self.phase = Phase::Holding;
                    return self.received_len();
                }
                Seen::Pending => {}
                Seen::Shutdown => return Err(Error::Shutdown),
                seen => return Err(seen.violation(current).into()),
            }
            // A peer that keeps rewriting the word must not keep us here past the deadline.
            if !first && deadline.is_some_and(|d| d.has_passed()) {
                return Err(Error::TimedOut);
            }
            first = false;
            if current & SLEEPING == 0
                && state
                    .compare_exchange(
                        current,
                        current | SLEEPING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    )
                    .is_err()
            {
                // Only a peer rewriting the word makes this fail again and again: let it not
                // keep us from noticing its death, nor from sharing the CPU.
                lost_races += 1;
                if lost_races % MAX_STATE_CHANGES_WHILE_HOLDING == 0 {
                    self.check_peer()?;
                    crate::thread::yield_now();
                }
                continue;
            }
            if slept_since.is_none() {
                slept_since = Some(Instant::now());
                // Open the peer's pidfd before the first sleep, not at the first check, to
                // narrow the window in which its pid could be reused.
                #[cfg(not(model))]
                if self.region.is_shared() {
                    self.peer.watch(self.region.header());
                }
            }
            let slice = self.slice_deadline(deadline);
            match with_futex(&self.region, |futex| futex.wait(current | SLEEPING, slice)) {
                Ok(()) | Err(crate::futex::Error::ValueChanged) => {}
                Err(crate::futex::Error::TimedOut) => {
                    if deadline.is_some_and(|d| d.has_passed()) {
                        return Err(Error::TimedOut);
                    }
                    self.check_peer()?;
                }
                Err(err) => return Err(err.into()),
            }
        }
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
        #[cfg(not(model))]
        if self.region.is_shared() {
            let slice = Deadline::after(PEER_CHECK_INTERVAL);
            return Some(match deadline {
                Some(d) if d.remaining() < PEER_CHECK_INTERVAL => d,
                _ => slice,
            });
        }
        deadline
    }

    fn check_peer(&mut self) -> Result<(), Error> {
        #[cfg(not(model))]
        if self.region.is_shared() && !self.peer.check(self.region.header()) {
            return Err(Error::PeerDied);
        }
        Ok(())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        shut_down(&self.region);
    }
}

/// Runs `f` on the window's state word viewed as a futex of the right scope.
fn with_futex<R>(region: &Region, f: impl FnOnce(&dyn FutexOps) -> R) -> R {
    let state: &AtomicU32 = &region.header().state;
    if region.is_shared() {
        f(Futex::<Shared>::from_atomic(state))
    } else {
        f(Futex::<Private>::from_atomic(state))
    }
}

/// The futex operations the protocol uses, for either scope.
trait FutexOps {
    fn wait(&self, expected: u32, deadline: Option<Deadline>) -> Result<(), crate::futex::Error>;
    fn wake(&self, n: u32) -> Result<usize, crate::futex::Error>;
    fn swap_kernel(
        &self,
        expected: u32,
        deadline: Option<Deadline>,
    ) -> Result<(), crate::futex::Error>;
}

impl<S: Scope> FutexOps for Futex<S> {
    fn wait(&self, expected: u32, deadline: Option<Deadline>) -> Result<(), crate::futex::Error> {
        Futex::wait(self, expected, deadline)
    }
    fn wake(&self, n: u32) -> Result<usize, crate::futex::Error> {
        Futex::wake(self, n)
    }
    fn swap_kernel(
        &self,
        expected: u32,
        deadline: Option<Deadline>,
    ) -> Result<(), crate::futex::Error> {
        swap::swap_in(SwapMode::Kernel, self, expected, self, deadline)
    }
}

fn shut_down(region: &Region) {
    let previous = region.header().state.fetch_or(SHUTDOWN, Ordering::AcqRel);
    if previous & SHUTDOWN == 0 {
        let _ = with_futex(region, |futex| futex.wake(u32::MAX));
    }
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
