//! One thread serving many FlipCall channels.
//!
//! ## State
//!
//! Each attached channel is a server [`Endpoint`] in one of its two running phases: *waiting*
//! (the client holds the turn: idle, or writing a call) or *holding* (a call that
//! [`Server::next_event`] returned and nobody has answered yet). Besides the channels:
//!
//! ```text
//! control   a private futex word, shared with every ServerHandle
//!   bit 31      SHUTDOWN  the server's one record of shutdown: set once, never cleared, by
//!                         ServerHandle::shutdown or by dropping the Server, under the registry
//!                         lock and after every registered channel was shut down. So a check
//!                         under that lock is exact (no attach once set), and whoever sees the
//!                         bit finds every channel shut down. next_event returns Shutdown once
//!                         it sees the bit.
//!   bits 0-30   sequence  bumped (wrapping, SHUTDOWN kept) by each attach through a handle,
//!                         after its channel is in the registry, to wake the server
//! registry  behind a Mutex, shared with every ServerHandle: the channels attached through
//!           handles and not yet adopted by the server thread, the number of channels (attached
//!           plus adopted-to-be, at most MAX_CHANNELS), and a shutdown handle per channel; empty,
//!           with a count of 0, from the moment SHUTDOWN is set
//! cursor    where the next round-robin scan starts: the channel after the last one served
//! per channel, `state_seen`: its state word as the server's last look found it, the client's
//!           turn; what a sleep marks and waits on
//! ```
//!
//! Only the server thread changes the channel list, the cursor and `state_seen`; handles only
//! add to the registry, under its lock, and then bump `control`; a shutdown empties the
//! registry and sets `SHUTDOWN` under that lock.
//!
//! ## Waiting on all channels
//!
//! The server waits through the endpoint's wait steps (see the `endpoint` module), on many
//! words instead of one. Each scan `look`s at every waiting channel: a call is taken, an ending
//! closes the channel, and a word that still holds the client's turn is kept as `state_seen`.
//! With nothing to do, the server spins a learned while (polling `peer_holds_turn`), then
//! `mark_sleeping`s every waiting channel's word (the mark its client's hand-over looks for
//! before it wakes the peer) and sleeps in one `futex_waitv` on all of those words and on
//! `control`: a call, a shutdown or an attach wakes it, and a word that changed since the scan
//! makes the mark fail or the call return at once, and the server looks again. Marks outlive
//! the sleep: a client whose channel was marked pays one wake on its next call (the reply
//! clears the mark), and a busy server, which never sleeps, marks nothing.
//!
//! `futex_waitv` takes 128 words: with [`MAX_CHANNELS`] attached there is no room for
//! `control`, and none needed, since an attach is refused then and a shutdown also shuts every
//! channel down (which changes their words).
//!
//! Without `futex_waitv` (before Linux 5.16, or [`WaitMode::Poll`]) the server sleeps on the
//! word of one channel (the one served last) in slices of [`POLL_INTERVAL`], and looks at the
//! others between slices: a call on another channel waits up to one slice when the server has
//! gone to sleep, and none while it is busy.
//!
//! ## Fairness
//!
//! Each scan starts after the channel served last and takes the first channel with a call, so
//! among channels that always have a call ready each is served once per round: a client that
//! floods cannot delay another by more than one call per channel.
//!
//! ## Peers that die or go quiet
//!
//! Every [`PEER_CHECK_INTERVAL`] (when the channels are cross-process) the server asks whether
//! each waiting channel's client process still lives, and closes the channels of those that
//! died with [`Error::PeerDied`]. A channel attached with an idle timeout whose client makes no
//! call for that long after its last reply is closed with [`Error::TimedOut`]. A client that
//! never reads its reply costs nothing: the server does not wait for it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::endpoint::{Endpoint, Look, PeerTurn, ShutdownHandle, PEER_CHECK_INTERVAL};
use super::error::Error;
use crate::atomic::Ordering;
use crate::futex::futex2::{self, WaitvEntry};
use crate::futex::{Capability, Deadline, Futex, Private, Scope, ScopeKind, Shared};
use crate::spin::Spinner;

/// The most channels one server serves: `futex_waitv`'s limit on words per call.
pub const MAX_CHANNELS: usize = futex2::WAITV_MAX;

/// Without `futex_waitv`, how long a call on a channel other than the one the sleeping server
/// watches can wait to be noticed.
pub const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Between two housekeeping rounds (peer checks, idle timeouts), a busy server returns at most
/// this many calls: housekeeping reads the clock, which a call does not.
const CALLS_BETWEEN_HOUSEKEEPING: u32 = 64;

const SHUTDOWN: u32 = 1 << 31;
const SEQUENCE_MASK: u32 = SHUTDOWN - 1;

/// How an idle [`Server`] waits for its channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// One `futex_waitv` on every channel (Linux 5.16+): any call wakes the server at once.
    Waitv,
    /// A sleep on one channel in slices of [`POLL_INTERVAL`], looking at the others between
    /// slices: for kernels without `futex_waitv`, or a sandbox that forbids it.
    Poll,
}

impl WaitMode {
    /// The best mode this kernel offers.
    pub fn probed() -> WaitMode {
        if crate::futex::capabilities().has(Capability::Waitv) {
            WaitMode::Waitv
        } else {
            WaitMode::Poll
        }
    }
}

/// A channel's name within its server, never reused by that server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(u64);

impl core::fmt::Display for ChannelId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "channel {}", self.0)
    }
}

/// What [`Server::next_event`] found.
#[derive(Debug)]
pub enum Event {
    /// A call of `len` bytes on `channel`: read it through [`Server::channel`], answer with
    /// [`Server::reply`]. Until then the channel is not watched (the server holds its turn).
    Call {
        /// The channel the call came on.
        channel: ChannelId,
        /// The call's length in bytes.
        len: usize,
    },
    /// `channel` ended and is no longer attached: its client shut it down or dropped its
    /// endpoint ([`Error::Shutdown`]), its process died ([`Error::PeerDied`]), it made no call
    /// within its idle timeout ([`Error::TimedOut`]), or it broke the protocol
    /// ([`Error::Protocol`]).
    Closed {
        /// The channel that ended.
        channel: ChannelId,
        /// Why.
        reason: Error,
    },
}

/// One attached channel.
struct Channel<S: Scope> {
    id: ChannelId,
    endpoint: Endpoint<S>,
    idle_timeout: Option<Duration>,
    /// When the channel last became the client's (attached, or a reply sent).
    idle_since: Instant,
    /// The state word as the last look at it found it, the client's turn: what a sleep marks
    /// and waits on. Every scan that finds nothing to do looks at every waiting channel first;
    /// a word that moved since makes the mark fail or the sleep return at once.
    state_seen: PeerTurn,
}

impl<S: Scope> Channel<S> {
    /// When the channel times out, if it can (a timeout too long to add to the clock never
    /// does).
    fn idle_expiry(&self) -> Option<Instant> {
        self.idle_timeout
            .and_then(|timeout| self.idle_since.checked_add(timeout))
    }
}

struct Registry<S: Scope> {
    pending: Vec<Channel<S>>,
    count: usize,
    next_id: u64,
    shutdown_handles: Vec<(ChannelId, ShutdownHandle)>,
}

/// What a server shares with its handles.
struct Control<S: Scope> {
    word: Futex,
    registry: crate::Mutex<Registry<S>>,
}

impl<S: Scope> Control<S> {
    fn registry(&self) -> crate::MutexGuard<'_, Registry<S>> {
        // A panic while the lock was held cannot leave the registry inconsistent: every
        // update of it is a single push, pop or assignment.
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the server was shut down; exact under the registry lock, under which the bit is
    /// set.
    fn is_shut_down(&self) -> bool {
        self.word.load(Ordering::Acquire) & SHUTDOWN != 0
    }

    /// Registers `endpoint` (a server endpoint not yet started) as a new channel: takes a
    /// place among the [`MAX_CHANNELS`], starts serving on it, then names it. On an error the
    /// endpoint is dropped, which shuts its channel down.
    fn register(
        &self,
        mut endpoint: Endpoint<S>,
        idle_timeout: Option<Duration>,
    ) -> Result<Channel<S>, Error> {
        let shutdown = endpoint.shutdown_handle();
        {
            let mut registry = self.registry();
            if self.is_shut_down() {
                return Err(Error::Shutdown);
            }
            if registry.count >= MAX_CHANNELS {
                return Err(Error::ServerFull { max: MAX_CHANNELS });
            }
            // The place is taken before the client can connect, so a client that connected
            // is never turned away for want of one.
            registry.count += 1;
        }
        let state_seen = match endpoint.start_serving() {
            Ok(state_seen) => state_seen,
            Err(err) => {
                let mut registry = self.registry();
                // A shutdown since the place was taken has zeroed the count already.
                if !self.is_shut_down() {
                    registry.count -= 1;
                }
                return Err(err);
            }
        };
        let mut registry = self.registry();
        // Checked again: the lock was let go while the endpoint started.
        if self.is_shut_down() {
            return Err(Error::Shutdown);
        }
        let id = ChannelId(registry.next_id);
        registry.next_id += 1;
        registry.shutdown_handles.push((id, shutdown));
        Ok(Channel {
            id,
            endpoint,
            idle_timeout,
            idle_since: Instant::now(),
            state_seen,
        })
    }

    fn unregister(&self, id: ChannelId) {
        let mut registry = self.registry();
        // After a shutdown the count is 0 and the handles are gone.
        if !self.is_shut_down() {
            registry.count -= 1;
            registry.shutdown_handles.retain(|(other, _)| *other != id);
        }
    }

    /// Shuts every registered channel down, then sets `SHUTDOWN`, all under the registry lock:
    /// a registration either sees the bit or is in the registry already, and whoever sees the
    /// bit finds every channel shut down.
    fn shut_down(&self) {
        let (first, pending, handles) = {
            let mut registry = self.registry();
            let pending = core::mem::take(&mut registry.pending);
            let handles = core::mem::take(&mut registry.shutdown_handles);
            registry.count = 0;
            for (_, handle) in &handles {
                handle.shutdown();
            }
            let first = self.word.fetch_or(SHUTDOWN, Ordering::AcqRel) & SHUTDOWN == 0;
            (first, pending, handles)
        };
        // Dropping the endpoints nobody adopted and the handles lets the windows go once their
        // endpoints have.
        drop((pending, handles));
        if first {
            let _ = self.word.wake(u32::MAX);
        }
    }
}

/// Serves up to [`MAX_CHANNELS`] FlipCall channels from one thread.
///
/// Attach a channel by giving the server its server [`Endpoint`] (before
/// [`recv_first`](Endpoint::recv_first)); the client side connects and calls as with a server of
/// its own. [`next_event`](Server::next_event) returns the next call, round-robin among the channels, or
/// tells that a channel closed; [`reply`](Server::reply) answers a call. Channels can be
/// attached from any thread while the server runs, through a [`ServerHandle`].
///
/// ```
/// use futexkit::flipcall::{self, Error, Event, Server};
///
/// let mut server = Server::new();
/// let mut clients = Vec::new();
/// for _ in 0..3 {
///     let (client, endpoint) = flipcall::pair(64)?;
///     server.attach(endpoint)?;
///     clients.push(client);
/// }
/// let serving = std::thread::spawn(move || -> Result<(), Error> {
///     while !server.is_empty() {
///         match server.next_event()? {
///             Event::Call { channel, len } => {
///                 let mut call = server.channel(channel).unwrap();
///                 call.data_mut()[..len].make_ascii_uppercase();
///                 server.reply(channel, len)?;
///             }
///             Event::Closed { .. } => {} // a client went away
///         }
///     }
///     Ok(())
/// });
/// for client in &mut clients {
///     client.connect()?;
///     client.data_mut()[..2].copy_from_slice(b"hi");
///     let len = client.send_recv(2)?;
///     assert_eq!(&client.data()[..len], b"HI");
/// }
/// drop(clients); // each channel closes; the server loop ends with the last one
/// serving.join().unwrap()?;
/// # Ok::<(), Error>(())
/// ```
pub struct Server<S: Scope> {
    channels: Vec<Channel<S>>,
    control: Arc<Control<S>>,
    /// The `control` value the server last acted on.
    control_seen: u32,
    cursor: usize,
    mode: WaitMode,
    spinner: Spinner,
    /// Closed channels found by housekeeping, reported before anything else.
    closed: VecDeque<Event>,
    calls_since_housekeeping: u32,
    next_peer_check: Instant,
}

impl<S: Scope> Default for Server<S> {
    fn default() -> Server<S> {
        Server::new()
    }
}

impl<S: Scope> Server<S> {
    /// A server with no channels, waiting the best way this kernel offers
    /// ([`WaitMode::probed`]).
    pub fn new() -> Server<S> {
        Server::with_mode(WaitMode::probed())
    }

    /// A server that waits in `mode`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] (`Unsupported`) for [`WaitMode::Waitv`] on a kernel without `futex_waitv`.
    pub fn with_wait_mode(mode: WaitMode) -> Result<Server<S>, Error> {
        if mode == WaitMode::Waitv && WaitMode::probed() != WaitMode::Waitv {
            return Err(Error::Io(crate::futex::Error::Unsupported.into()));
        }
        Ok(Server::with_mode(mode))
    }

    fn with_mode(mode: WaitMode) -> Server<S> {
        Server {
            channels: Vec::new(),
            control: Arc::new(Control {
                word: Futex::new(0),
                registry: crate::Mutex::new(Registry {
                    pending: Vec::new(),
                    count: 0,
                    next_id: 0,
                    shutdown_handles: Vec::new(),
                }),
            }),
            control_seen: 0,
            cursor: 0,
            mode,
            spinner: Spinner::new(),
            closed: VecDeque::new(),
            calls_since_housekeeping: 0,
            next_peer_check: Instant::now() + PEER_CHECK_INTERVAL,
        }
    }

    /// How this server waits.
    pub fn wait_mode(&self) -> WaitMode {
        self.mode
    }

    /// A handle to attach channels and shut the server down from other threads.
    pub fn handle(&self) -> ServerHandle<S> {
        ServerHandle {
            control: Arc::clone(&self.control),
        }
    }

    /// The number of attached channels (those attached through a handle count once the server
    /// has seen them, in [`next_event`](Server::next_event)).
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    /// Whether no channel is attached.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// Attaches a channel: `endpoint` must be a server endpoint that has not started
    /// ([`recv_first`](Endpoint::recv_first) not called). Its client can connect from now on.
    ///
    /// # Errors
    ///
    /// [`Error::ServerFull`] with [`MAX_CHANNELS`] attached; [`Error::WrongTurn`] for a client
    /// endpoint or one that has started; [`Error::Shutdown`] if the server or the channel was
    /// shut down; [`Error::Protocol`] if the window's state is not a new channel's. On an
    /// error the endpoint is dropped, which shuts its channel down.
    pub fn attach(&mut self, endpoint: Endpoint<S>) -> Result<ChannelId, Error> {
        self.attach_channel(endpoint, None)
    }

    /// [`attach`](Server::attach), closing the channel with [`Error::TimedOut`] whenever its
    /// client makes no call for `idle_timeout`: counted from the attach (so a client that is
    /// slow to connect counts too) and again from each reply.
    ///
    /// # Errors
    ///
    /// As [`attach`](Server::attach).
    pub fn attach_with_idle_timeout(
        &mut self,
        endpoint: Endpoint<S>,
        idle_timeout: Duration,
    ) -> Result<ChannelId, Error> {
        self.attach_channel(endpoint, Some(idle_timeout))
    }

    fn attach_channel(
        &mut self,
        endpoint: Endpoint<S>,
        idle_timeout: Option<Duration>,
    ) -> Result<ChannelId, Error> {
        let channel = self.control.register(endpoint, idle_timeout)?;
        let id = channel.id;
        self.channels.push(channel);
        Ok(id)
    }

    /// The data area of `channel`, to read a call and write its reply (while the call is held),
    /// if it is attached. Only the data: the turn goes back through [`reply`](Server::reply).
    pub fn channel(&mut self, channel: ChannelId) -> Option<ChannelData<'_, S>> {
        let index = self.index_of(channel)?;
        Some(ChannelData(&mut self.channels[index].endpoint))
    }

    /// Answers the call held on `channel` with the first `len` bytes of its data area.
    ///
    /// # Errors
    ///
    /// [`Error::WrongTurn`] if the channel holds no call (or is not attached);
    /// [`Error::TooLong`] (nothing sent; answer again). Any other error ends the channel, which
    /// is detached at once (no [`Event::Closed`] follows): [`Error::Shutdown`] if its client
    /// left, [`Error::Protocol`].
    pub fn reply(&mut self, channel: ChannelId, len: usize) -> Result<(), Error> {
        let index = self.index_of(channel).ok_or(Error::WrongTurn)?;
        let entry = &mut self.channels[index];
        if !entry.endpoint.holds_turn() {
            return Err(Error::WrongTurn);
        }
        match entry.endpoint.send_last(len) {
            Ok(()) => {
                if entry.idle_timeout.is_some() {
                    entry.idle_since = Instant::now();
                }
                Ok(())
            }
            Err(err @ Error::TooLong { .. }) => Err(err),
            Err(err) => {
                self.detach(index);
                Err(err)
            }
        }
    }

    /// Shuts `channel` down and detaches it; `false` if it was not attached.
    pub fn close(&mut self, channel: ChannelId) -> bool {
        match self.index_of(channel) {
            Some(index) => {
                self.detach(index);
                true
            }
            None => false,
        }
    }

    /// Waits for the next call or closed channel.
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`] once the server was shut down through a handle; [`Error::Io`] if
    /// the kernel refuses the wait.
    pub fn next_event(&mut self) -> Result<Event, Error> {
        self.next_until(None)
    }

    /// [`next_event`](Server::next_event), giving up with [`Error::TimedOut`] after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`next_event`](Server::next_event), and [`Error::TimedOut`].
    pub fn next_event_timeout(&mut self, timeout: Duration) -> Result<Event, Error> {
        // A timeout too long to add to the clock is no timeout.
        self.next_until(Instant::now().checked_add(timeout))
    }

    fn next_until(&mut self, deadline: Option<Instant>) -> Result<Event, Error> {
        loop {
            if let Some(event) = self.closed.pop_front() {
                return Ok(event);
            }
            self.adopt_attached()?;
            if let Some(event) = self.scan() {
                if matches!(event, Event::Call { .. }) {
                    self.calls_since_housekeeping += 1;
                    if self.calls_since_housekeeping >= CALLS_BETWEEN_HOUSEKEEPING {
                        self.housekeeping(Instant::now());
                    }
                }
                return Ok(event);
            }
            let now = Instant::now();
            self.housekeeping(now);
            if !self.closed.is_empty() {
                continue;
            }
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(Error::TimedOut);
            }
            let spin_deadline = deadline.map(Deadline::at);
            if self
                .spinner
                .spin_until_before(spin_deadline, || self.something_to_do())
            {
                continue;
            }
            self.sleep(deadline)?;
        }
    }

    fn index_of(&self, channel: ChannelId) -> Option<usize> {
        self.channels.iter().position(|entry| entry.id == channel)
    }

    /// Detaches the channel at `index`; dropping its endpoint shuts it down.
    fn detach(&mut self, index: usize) {
        let entry = self.channels.remove(index);
        self.control.unregister(entry.id);
        if index < self.cursor {
            self.cursor -= 1;
        }
        if self.cursor >= self.channels.len() {
            self.cursor = 0;
        }
    }

    /// Takes in the channels attached through handles; fails once the server is shut down.
    fn adopt_attached(&mut self) -> Result<(), Error> {
        let control = self.control.word.load(Ordering::Acquire);
        if control & SHUTDOWN != 0 {
            return Err(Error::Shutdown);
        }
        if control != self.control_seen {
            self.control_seen = control;
            let pending = core::mem::take(&mut self.control.registry().pending);
            self.channels.extend(pending);
        }
        Ok(())
    }

    /// Round robin: the first channel after the last one served with a call or an ending.
    fn scan(&mut self) -> Option<Event> {
        let n = self.channels.len();
        for k in 0..n {
            let index = (self.cursor + k) % n;
            let entry = &mut self.channels[index];
            if entry.endpoint.holds_turn() {
                continue;
            }
            match entry.endpoint.look() {
                Ok(Look::Pending(state_seen)) => entry.state_seen = state_seen,
                Ok(Look::Taken(len)) => {
                    self.cursor = (index + 1) % n;
                    return Some(Event::Call {
                        channel: entry.id,
                        len,
                    });
                }
                Err(reason) => {
                    let channel = entry.id;
                    self.detach(index);
                    // The channel after the closed one now sits at `index`: it is next.
                    self.cursor = if index < self.channels.len() {
                        index
                    } else {
                        0
                    };
                    return Some(Event::Closed { channel, reason });
                }
            }
        }
        None
    }

    /// Whether a call, an ending, an attach or a shutdown is there to see.
    fn something_to_do(&self) -> bool {
        self.control.word.load(Ordering::Relaxed) != self.control_seen
            || self
                .channels
                .iter()
                .any(|entry| !entry.endpoint.holds_turn() && !entry.endpoint.peer_holds_turn())
    }

    /// Closes channels waiting for a call whose peer died (checked every
    /// [`PEER_CHECK_INTERVAL`]) or whose idle timeout ran out.
    fn housekeeping(&mut self, now: Instant) {
        self.calls_since_housekeeping = 0;
        let check_peers = S::KIND == ScopeKind::Shared && now >= self.next_peer_check;
        if check_peers {
            self.next_peer_check = now + PEER_CHECK_INTERVAL;
        }
        let mut index = 0;
        while index < self.channels.len() {
            let entry = &mut self.channels[index];
            // A channel the server holds, or whose word shows a call (or an ending) the scan has
            // not reached yet, is not idle: the scan delivers what is there.
            let reason = if entry.endpoint.holds_turn() || !entry.endpoint.peer_holds_turn() {
                None
            } else if check_peers && !entry.endpoint.peer_alive() {
                Some(Error::PeerDied)
            } else if entry.idle_expiry().is_some_and(|expiry| now >= expiry) {
                Some(Error::TimedOut)
            } else {
                None
            };
            // Shut down only while the client still holds the turn: a call it hands over
            // meanwhile is left for the scan to serve.
            match reason {
                Some(reason) if entry.endpoint.shut_down_while_peer_holds_turn() => {
                    let channel = entry.id;
                    self.detach(index);
                    self.closed.push_back(Event::Closed { channel, reason });
                }
                _ => index += 1,
            }
        }
    }

    /// When the next sleep must end: the caller's deadline, the next peer check, the first
    /// idle timeout.
    fn wake_by(&self, deadline: Option<Instant>) -> Option<Instant> {
        let peer_check = (S::KIND == ScopeKind::Shared && !self.channels.is_empty())
            .then_some(self.next_peer_check);
        let idle = self
            .channels
            .iter()
            .filter(|entry| !entry.endpoint.holds_turn())
            .filter_map(Channel::idle_expiry)
            .min();
        [deadline, peer_check, idle].into_iter().flatten().min()
    }

    /// Sleeps until something may have happened (the caller looks).
    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), Error> {
        let wake_by = self.wake_by(deadline);
        let started = Instant::now();
        let result = match self.mode {
            WaitMode::Waitv => self.sleep_waitv(wake_by),
            WaitMode::Poll => self.sleep_polling(wake_by),
        };
        match result {
            Ok(()) | Err(crate::futex::Error::ValueChanged) => {
                self.spinner.record_sleep(started.elapsed());
                Ok(())
            }
            Err(crate::futex::Error::TimedOut) => {
                self.spinner.record_timeout(started.elapsed());
                Ok(())
            }
            // A channel's page was removed under the wait: the next scan finds its word
            // zeroed and closes it.
            Err(crate::futex::Error::Fault) => Ok(()),
            Err(err) => Err(Error::Io(err.into())),
        }
    }

    fn sleep_waitv(&self, wake_by: Option<Instant>) -> Result<(), crate::futex::Error> {
        let mut entries: Vec<WaitvEntry<'_>> = Vec::with_capacity(self.channels.len() + 1);
        for entry in &self.channels {
            if entry.endpoint.holds_turn() {
                continue;
            }
            // A word that moved since the scan: the caller looks again.
            let Some(asleep) = entry.endpoint.mark_sleeping(entry.state_seen) else {
                return Ok(());
            };
            entries.push(WaitvEntry::new(entry.endpoint.state_futex(), asleep));
        }
        if entries.len() < MAX_CHANNELS {
            entries.push(WaitvEntry::new(&self.control.word, self.control_seen));
        }
        futex2::waitv(&entries, wake_by.map(Deadline::at)).map(drop)
    }

    fn sleep_polling(&self, wake_by: Option<Instant>) -> Result<(), crate::futex::Error> {
        let n = self.channels.len();
        // The channel served last (just before the cursor), else the first waiting one.
        let watched = (0..n)
            .map(|k| (self.cursor + n - 1 + k) % n)
            .find(|&index| !self.channels[index].endpoint.holds_turn());
        let Some(index) = watched else {
            return self
                .control
                .word
                .wait(self.control_seen, wake_by.map(Deadline::at));
        };
        let slice = Instant::now() + POLL_INTERVAL;
        let wake_by = wake_by.map_or(slice, |wake_by| wake_by.min(slice));
        let entry = &self.channels[index];
        match entry.endpoint.mark_sleeping(entry.state_seen) {
            Some(asleep) => entry
                .endpoint
                .state_futex()
                .wait(asleep, Some(Deadline::at(wake_by))),
            None => Ok(()),
        }
    }
}

impl<S: Scope> Drop for Server<S> {
    fn drop(&mut self) {
        // Refuses attaches from now on and shuts down the channels attached through handles
        // but never adopted; the attached ones shut down as their endpoints drop.
        self.control.shut_down();
    }
}

impl<S: Scope> core::fmt::Debug for Server<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("channels", &self.channels.len())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// Attaches channels to a running [`Server`] and shuts it down, from any thread.
///
/// ```
/// use futexkit::flipcall::{self, Event, Server};
///
/// let mut server = Server::new();
/// let handle = server.handle();
/// let serving = std::thread::spawn(move || {
///     let mut calls = 0;
///     while let Ok(event) = server.next_event() {
///         if let Event::Call { channel, len } = event {
///             calls += 1;
///             server.reply(channel, len).unwrap();
///         }
///     }
///     calls // next_event() failed: shut down
/// });
/// // Attached while the server waits in next_event().
/// let (mut client, endpoint) = flipcall::pair(16)?;
/// handle.attach(endpoint)?;
/// client.connect()?;
/// client.send_recv(0)?;
/// handle.shutdown();
/// assert_eq!(serving.join().unwrap(), 1);
/// assert!(matches!(client.send_recv(0), Err(flipcall::Error::Shutdown)));
/// # Ok::<(), flipcall::Error>(())
/// ```
pub struct ServerHandle<S: Scope> {
    control: Arc<Control<S>>,
}

impl<S: Scope> Clone for ServerHandle<S> {
    fn clone(&self) -> ServerHandle<S> {
        ServerHandle {
            control: Arc::clone(&self.control),
        }
    }
}

impl<S: Scope> ServerHandle<S> {
    /// [`Server::attach`] from another thread: the server takes the channel in at its next
    /// look (waking if it sleeps). The client can connect at once.
    ///
    /// # Errors
    ///
    /// As [`Server::attach`]; [`Error::Shutdown`] also once the server is dropped.
    pub fn attach(&self, endpoint: Endpoint<S>) -> Result<ChannelId, Error> {
        self.attach_channel(endpoint, None)
    }

    /// [`Server::attach_with_idle_timeout`] from another thread.
    ///
    /// # Errors
    ///
    /// As [`attach`](ServerHandle::attach).
    pub fn attach_with_idle_timeout(
        &self,
        endpoint: Endpoint<S>,
        idle_timeout: Duration,
    ) -> Result<ChannelId, Error> {
        self.attach_channel(endpoint, Some(idle_timeout))
    }

    fn attach_channel(
        &self,
        endpoint: Endpoint<S>,
        idle_timeout: Option<Duration>,
    ) -> Result<ChannelId, Error> {
        let channel = self.control.register(endpoint, idle_timeout)?;
        let id = channel.id;
        {
            let mut registry = self.control.registry();
            if self.control.is_shut_down() {
                // Shut down since it was registered: dropping the channel shuts it down.
                return Err(Error::Shutdown);
            }
            registry.pending.push(channel);
        }
        let word = &self.control.word;
        let _ = word.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |value| {
            Some((value & SHUTDOWN) | (value.wrapping_add(1) & SEQUENCE_MASK))
        });
        let _ = word.wake(1);
        Ok(id)
    }

    /// Shuts the server down: every channel is shut down (their clients' calls return
    /// [`Error::Shutdown`]), attaching fails, and the server's [`next_event`](Server::next_event) returns
    /// [`Error::Shutdown`]. Idempotent.
    pub fn shutdown(&self) {
        self.control.shut_down();
    }

    /// Whether the server was shut down (or dropped).
    pub fn is_shutdown(&self) -> bool {
        self.control.is_shut_down()
    }
}

impl<S: Scope> core::fmt::Debug for ServerHandle<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("is_shutdown", &self.is_shutdown())
            .finish()
    }
}

/// A channel's data area, lent by [`Server::channel`]: what an endpoint offers for reading a
/// call and writing its reply, and nothing that moves the turn, which stays the server's to
/// hand back ([`Server::reply`]) or to wait for.
pub struct ChannelData<'a, S: Scope>(&'a mut Endpoint<S>);

impl<S: Scope> ChannelData<'_, S> {
    /// As [`Endpoint::capacity`].
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Whether the server holds this channel's turn: a call is there to answer.
    pub fn holds_turn(&self) -> bool {
        self.0.holds_turn()
    }

    /// As [`Endpoint::read_into`].
    ///
    /// # Panics
    ///
    /// If the server does not hold the turn, or the range goes past the capacity.
    pub fn read_into(&self, offset: usize, dst: &mut [u8]) {
        self.0.read_into(offset, dst);
    }

    /// As [`Endpoint::write_from`].
    ///
    /// # Panics
    ///
    /// If the server does not hold the turn, or the range goes past the capacity.
    pub fn write_from(&mut self, offset: usize, src: &[u8]) {
        self.0.write_from(offset, src);
    }
}

impl ChannelData<'_, Private> {
    /// As [`Endpoint::data`].
    ///
    /// # Panics
    ///
    /// If the server does not hold the turn.
    pub fn data(&self) -> &[u8] {
        self.0.data()
    }

    /// As [`Endpoint::data_mut`].
    ///
    /// # Panics
    ///
    /// If the server does not hold the turn.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.0.data_mut()
    }
}

impl ChannelData<'_, Shared> {
    /// As [`Endpoint::data_unchecked`].
    ///
    /// # Safety
    ///
    /// As for [`Endpoint::data_unchecked`].
    ///
    /// # Panics
    ///
    /// If the server does not hold the turn.
    pub unsafe fn data_unchecked(&self) -> &[u8] {
        // SAFETY: the caller keeps `Endpoint::data_unchecked`'s contract.
        unsafe { self.0.data_unchecked() }
    }

    /// As [`Endpoint::data_mut_unchecked`].
    ///
    /// # Safety
    ///
    /// As for [`Endpoint::data_mut_unchecked`].
    ///
    /// # Panics
    ///
    /// If the server does not hold the turn.
    pub unsafe fn data_mut_unchecked(&mut self) -> &mut [u8] {
        // SAFETY: the caller keeps `Endpoint::data_mut_unchecked`'s contract.
        unsafe { self.0.data_mut_unchecked() }
    }
}

impl<S: Scope> core::fmt::Debug for ChannelData<'_, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("ChannelData").field(&self.0).finish()
    }
}
