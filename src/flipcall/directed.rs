//! Directed hand-offs (opt-in): the server sleeps in a system call its client answers, so each
//! side's wake-up can run the woken thread on the waker's CPU.
//!
//! ## Roles
//!
//! The server thread installs a seccomp filter that sends one call of futexkit's to a listener
//! ([`Endpoint::direct_wakeups`](super::Endpoint::direct_wakeups)); the listener goes to the
//! client ([`Endpoint::accept_directed_wakeups`](super::Endpoint::accept_directed_wakeups)),
//! which holds its only copy. The state word keeps its meaning (`endpoint.rs`): `SLEEPING`
//! says the side waiting for the turn sleeps, and
//!
//! * a server sleeps in the intercepted call ([`Sleeps::InCall`]), which returns once the
//!   client answers it, fails once the listener is closed (the client went), or is
//!   interrupted by a signal; in each case it looks at the word before it calls again;
//! * a client sleeps in `poll` on the listener ([`Sleeps::OnListener`]), in slices, so that it
//!   keeps its deadline and notices a shutdown or a dead server;
//! * a server handing the turn to a sleeping client stores the client's turn *with* `SLEEPING`
//!   and makes the intercepted call: the call wakes the client and is the server's own sleep,
//!   the one step of a swap;
//! * a client answers each call as soon as the word shows the turn is the server's: at once if
//!   it is when the call is received, else when the client hands the turn over.
//!
//! That last rule is the whole of the client's bookkeeping, and it needs no count of calls: the
//! server, blocked in its call, cannot change the word, so the word read after a call arrives
//! says whose turn the call waits for. A call made while the turn is the client's (the server
//! waits for it, or has just handed it over) is kept until the client hands the turn over; any
//! other (the server's wait, made before the client handed the turn over; or a call the kernel
//! restarted after a signal, when its answer raced the signal and was lost) waits for a turn
//! the server already has, and is answered at once. An answer to a call that a signal withdrew
//! fails (`ENOENT`) and needs nothing more: the interrupted server looks at the word itself.
//!
//! | field              | meaning                                        | set by              | cleared by |
//! |--------------------|------------------------------------------------|---------------------|------------|
//! | `received`         | a call received while the turn was the client's | a wait              | the client's next hand-over, which answers it |
//! | `server_unanswered`| the last hand-over found the server asleep with no call received: it cannot run before its call is answered, so the client does not spin, and a wait that times out looks once more for the call | a hand-over | an answer (or an answer that found the call withdrawn) |
//! | `woke_server_here` | the last answer woke the server synchronously, onto this CPU: the client does not spin | an answer | the next wait |
//! | `hung_up`          | no thread carries the filter any more           | a wait              | never      |

use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::time::Duration;

use super::error::{Error, Unavailable};
use crate::futex::sys::notify::{self, Listener, Readiness};
use crate::futex::Deadline;

/// How long a client sleeps on the listener before it looks at the state word again: the bound
/// on how late it notices a shutdown by a [`ShutdownHandle`](super::ShutdownHandle), as
/// shutdown wakes futex sleepers only.
pub(crate) const LISTENER_SLICE: Duration = super::endpoint::PEER_CHECK_INTERVAL;

/// The slice a client sleeps on the listener for: [`LISTENER_SLICE`], cut to what is left
/// before `deadline` (nothing, once it has passed: one look).
pub(crate) fn slice_before(deadline: Option<Deadline>) -> Duration {
    match deadline {
        Some(deadline) => deadline.remaining().min(LISTENER_SLICE),
        None => LISTENER_SLICE,
    }
}

/// The listener of a server thread's directed hand-offs, on its way to the client: from
/// [`Endpoint::direct_wakeups`](super::Endpoint::direct_wakeups) to
/// [`Endpoint::accept_directed_wakeups`](super::Endpoint::accept_directed_wakeups), in this
/// process or, as a descriptor ([`into_fd`](DirectedWakeups::into_fd),
/// [`from_fd`](DirectedWakeups::from_fd)), in another.
///
/// The client must hold the only copy: the server's pending call ends when the client's
/// endpoint closes it, and only then. Dropping this unused closes it too, and the server's
/// waits fail with [`Error::PeerDied`].
#[derive(Debug)]
pub struct DirectedWakeups {
    pub(crate) listener: Listener,
}

impl DirectedWakeups {
    /// The listener as a descriptor, to pass to the client's process (over a Unix socket, or
    /// inherited). Close every other copy, so that the client holds the only one.
    pub fn into_fd(self) -> OwnedFd {
        self.listener.into_fd()
    }

    /// Adopts a listener passed from the server's process.
    ///
    /// # Errors
    ///
    /// [`Error::DirectedUnavailable`] with [`Unavailable::NotAListener`] if `fd` is not a
    /// seccomp listener (or this kernel lacks the synchronous wake-ups).
    pub fn from_fd(fd: OwnedFd) -> Result<DirectedWakeups, Error> {
        let listener = Listener::from_fd(fd);
        notify::set_sync_wake_up(&listener, false)
            .map_err(|_| Error::DirectedUnavailable(Unavailable::NotAListener))?;
        Ok(DirectedWakeups { listener })
    }
}

impl From<DirectedWakeups> for OwnedFd {
    fn from(wakeups: DirectedWakeups) -> OwnedFd {
        wakeups.into_fd()
    }
}

/// Whether a thread of this process may opt in to directed hand-offs: a seccomp filter with a
/// listener can be installed (`no_new_privs` allowed, no sandbox refusing it), and the kernel
/// has the synchronous wake-ups (Linux 6.6). Asked once per process, on a thread made for the
/// question (the filter stays with a thread for its life): the answer is remembered.
///
/// ```
/// match futexkit::flipcall::directed_wakeups_available() {
///     Ok(()) => println!("directed hand-offs available"),
///     Err(why) => println!("ordinary hand-offs: {why}"),
/// }
/// ```
///
/// # Errors
///
/// Why not, as an [`Unavailable`].
pub fn directed_wakeups_available() -> Result<(), Unavailable> {
    static ANSWER: OnceLock<Result<(), Unavailable>> = OnceLock::new();
    *ANSWER.get_or_init(|| {
        notify::probe().map_err(|err| match err {
            notify::ProbeError::Filter(err) => err.into(),
            notify::ProbeError::SyncWakeUp(_) => Unavailable::KernelTooOld,
            notify::ProbeError::NoThread => Unavailable::NoThread,
        })
    })
}

/// Installs the filter on the calling thread, after [`directed_wakeups_available`] said it
/// would work there; returns the listener.
pub(crate) fn install_on_this_thread() -> Result<Listener, Error> {
    directed_wakeups_available().map_err(Error::DirectedUnavailable)?;
    notify::install_filter().map_err(|err| Error::DirectedUnavailable(err.into()))
}

impl From<notify::FilterError> for Unavailable {
    fn from(err: notify::FilterError) -> Unavailable {
        match err {
            notify::FilterError::UnknownArchitecture => Unavailable::UnknownArchitecture,
            notify::FilterError::NoNewPrivs(errno) => Unavailable::NoNewPrivsRefused(errno),
            notify::FilterError::Seccomp(errno) => Unavailable::FilterRefused(errno),
        }
    }
}

/// How an endpoint sleeps while the peer holds the turn, and wakes the peer.
#[derive(Debug)]
pub(crate) enum Sleeps {
    /// On the state word, by futex; the peer is woken by a futex wake (or a kernel swap).
    OnFutex,
    /// A directed server: in the intercepted call, on the thread whose filter sends it.
    InCall {
        /// The thread carrying the filter (`sys::thread_key`).
        thread: u32,
        /// The call failed with the listener closed: the client went.
        listener_gone: bool,
    },
    /// A directed client: in `poll` on the listener; wakes the server by answering its call.
    OnListener(Answerer),
}

impl Sleeps {
    pub(crate) fn is_directed(&self) -> bool {
        !matches!(self, Sleeps::OnFutex)
    }
}

/// A directed client's listener and its bookkeeping (module docs).
#[derive(Debug)]
pub(crate) struct Answerer {
    listener: Listener,
    received: Option<u64>,
    server_unanswered: bool,
    woke_server_here: bool,
    hung_up: bool,
    synchronous: bool,
    wakes_since_peer_check: u32,
}

/// How many wakes on the listener may pass without a check of the peer's life
/// ([`Answerer::peer_check_due`]).
const WAKES_PER_PEER_CHECK: u32 = 64;

impl Answerer {
    pub(crate) fn new(wakeups: DirectedWakeups) -> Answerer {
        Answerer {
            listener: wakeups.listener,
            received: None,
            server_unanswered: false,
            woke_server_here: false,
            hung_up: false,
            synchronous: false,
            wakes_since_peer_check: 0,
        }
    }

    /// Whether spinning for the server's answer can pay: not when the server waits for an
    /// answer of ours, nor when our last answer woke it onto this CPU (a spin would only keep
    /// it from running). Asked once per wait.
    pub(crate) fn server_may_be_running(&mut self) -> bool {
        !core::mem::take(&mut self.woke_server_here) && !self.server_unanswered
    }

    /// Whether no thread carries the filter any more.
    pub(crate) fn hung_up(&self) -> bool {
        self.hung_up
    }

    /// Wakes the server after a hand-over found it asleep: answers the call received, if any
    /// (else the call is answered when it arrives, the turn being the server's then). First
    /// makes the wake-ups synchronous, or not, as the policy says now.
    pub(crate) fn wake_server(&mut self) -> Result<(), Error> {
        let synchronous = crate::spin::directed_wakeups_should_be_synchronous();
        if synchronous != self.synchronous
            && notify::set_sync_wake_up(&self.listener, synchronous).is_ok()
        {
            self.synchronous = synchronous;
        }
        match self.received.take() {
            Some(id) => self.answer(id),
            None => {
                self.server_unanswered = true;
                Ok(())
            }
        }
    }

    fn answer(&mut self, id: u64) -> Result<(), Error> {
        self.server_unanswered = false;
        match notify::answer_call(&self.listener, id) {
            Ok(()) => {
                self.woke_server_here = self.synchronous;
                Ok(())
            }
            // Withdrawn by a signal, or its thread exited: the server looks at the word itself.
            Err(libc::ENOENT) => Ok(()),
            Err(errno) => Err(std::io::Error::from_raw_os_error(errno).into()),
        }
    }

    /// Whether the server still waits for an answer to a hand-over of ours that found it
    /// asleep, its call not received yet.
    pub(crate) fn server_unanswered(&self) -> bool {
        self.server_unanswered
    }

    /// Whether a wait should check the peer's life now, though a call came: one wake in
    /// `WAKES_PER_PEER_CHECK`, so that calls that keep coming (from a process that inherited
    /// the server's filter, say) cannot keep a dead server's death unnoticed.
    pub(crate) fn peer_check_due(&mut self) -> bool {
        if self.wakes_since_peer_check < WAKES_PER_PEER_CHECK {
            return false;
        }
        self.wakes_since_peer_check = 0;
        true
    }

    /// Sleeps on the listener for one slice at most: receives a call that came, answering it
    /// at once if `servers_turn()` (read after the call arrived) says the turn is the server's,
    /// else keeping it for the next hand-over; or notes that no thread carries the filter any
    /// more. Returns whether anything came; `false` when the slice ran out.
    pub(crate) fn sleep(
        &mut self,
        slice: Duration,
        servers_turn: impl FnOnce() -> bool,
    ) -> Result<bool, Error> {
        self.wakes_since_peer_check = self.wakes_since_peer_check.wrapping_add(1);
        let io = |errno| Error::Io(std::io::Error::from_raw_os_error(errno));
        match notify::wait_for_call(&self.listener, slice).map_err(io)? {
            Readiness::Call => match notify::receive_call(&self.listener) {
                Ok(id) if servers_turn() => self.answer(id)?,
                Ok(id) => self.received = Some(id),
                // Withdrawn since the poll saw it.
                Err(libc::ENOENT) => {}
                Err(errno) => return Err(io(errno)),
            },
            Readiness::Hangup => self.hung_up = true,
            Readiness::Nothing => return Ok(false),
        }
        Ok(true)
    }
}

/// The server's sleep: the intercepted call, on the thread carrying the filter (the endpoint
/// checks that at each call's entry). `Ok` once the client answered, a signal interrupted it
/// (the caller looks at the word again, as after a spurious wake-up), or the listener is closed
/// (then `listener_gone` is set).
pub(crate) fn sleep_in_call(listener_gone: &mut bool) -> Result<(), Error> {
    match notify::intercepted_call() {
        Ok(()) | Err(libc::EINTR) => Ok(()),
        Err(libc::ENOSYS) => {
            *listener_gone = true;
            Ok(())
        }
        Err(errno) => Err(std::io::Error::from_raw_os_error(errno).into()),
    }
}
