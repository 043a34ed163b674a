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
//!   client answers it, or fails once the listener is closed (the client went);
//! * a client sleeps in `poll` on the listener ([`Sleeps::OnListener`]), in slices, so that it
//!   keeps its deadline and notices a shutdown or a dead server;
//! * a server handing the turn to a sleeping client stores the client's turn *with* `SLEEPING`
//!   and makes the intercepted call: the call wakes the client and is the server's own sleep,
//!   the one step of a swap. The client receives it, and answers it when it next hands the
//!   turn over;
//! * a client handing the turn to a sleeping server answers the call it received, or, if it has
//!   not arrived yet, owes the answer: its next wait answers the next call first, without
//!   spinning or marking (the server cannot run until answered).
//!
//! ## The client's bookkeeping ([`Answerer`])
//!
//! | field      | meaning                                                  | set by                              | cleared by |
//! |------------|----------------------------------------------------------|-------------------------------------|------------|
//! | `received` | a call of the server's received and not answered         | a wait that receives while not owing | the next hand-over to a sleeping server |
//! | `owed`     | the server's call, once it arrives, is answered at once  | a hand-over to a sleeping server with nothing received, or whose answer found the call withdrawn | a wait that receives and answers |
//! | `hung_up`  | no thread carries the filter any more                    | a wait                              | never      |
//!
//! An honest server has at most one call outstanding, so a call received while owing is the
//! owed one; one that a signal withdrew is made again, and the answer to the withdrawn one
//! fails (`ENOENT`) and leaves the answer owed.

use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::time::Duration;

use super::error::{Error, Unavailable};
use crate::futex::sys::notify::{self, Listener, Readiness};

/// How long a client sleeps on the listener before it looks at the state word again: the bound
/// on how late it notices a shutdown by a [`ShutdownHandle`](super::ShutdownHandle), as
/// shutdown wakes futex sleepers only.
pub(crate) const LISTENER_SLICE: Duration = super::endpoint::PEER_CHECK_INTERVAL;

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

/// A directed client's listener and what it owes (module docs: the client's bookkeeping).
#[derive(Debug)]
pub(crate) struct Answerer {
    listener: Listener,
    received: Option<u64>,
    owed: bool,
    hung_up: bool,
    synchronous: bool,
    /// The last hand-over woke the server synchronously: it is queued on this CPU.
    woke_server_here: bool,
}

impl Answerer {
    pub(crate) fn new(wakeups: DirectedWakeups) -> Answerer {
        Answerer {
            listener: wakeups.listener,
            received: None,
            owed: false,
            hung_up: false,
            synchronous: false,
            woke_server_here: false,
        }
    }

    /// Whether the server waits for an answer this side has not given: then waiting means
    /// answering first.
    pub(crate) fn owes(&self) -> bool {
        self.owed
    }

    /// Whether the last hand-over woke the server synchronously, which queues it on this
    /// CPU: then a spin only keeps it from running. Asked once per wait.
    pub(crate) fn take_woke_server_here(&mut self) -> bool {
        core::mem::take(&mut self.woke_server_here)
    }

    /// Whether no thread carries the filter any more.
    pub(crate) fn hung_up(&self) -> bool {
        self.hung_up
    }

    /// Wakes the server after a hand-over found it asleep: answers the call received, or owes
    /// the answer. First makes the wake-ups synchronous, or not, as the policy says now.
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
                self.owed = true;
                Ok(())
            }
        }
    }

    fn answer(&mut self, id: u64) -> Result<(), Error> {
        match notify::answer_call(&self.listener, id) {
            Ok(()) => {
                self.owed = false;
                self.woke_server_here = self.synchronous;
                Ok(())
            }
            // Withdrawn by a signal (and made again), or its thread exited: owed still.
            Err(libc::ENOENT) => {
                self.owed = true;
                Ok(())
            }
            Err(errno) => Err(std::io::Error::from_raw_os_error(errno).into()),
        }
    }

    /// Sleeps on the listener for one slice at most: receives a call that came (answering it if
    /// owed, else keeping it), or notes that no thread carries the filter any more. Returns
    /// whether anything came; `false` when the slice ran out.
    pub(crate) fn sleep(&mut self) -> Result<bool, Error> {
        let io = |errno| Error::Io(std::io::Error::from_raw_os_error(errno));
        match notify::wait_for_call(&self.listener, LISTENER_SLICE).map_err(io)? {
            Readiness::Call => match notify::receive_call(&self.listener) {
                Ok(id) if self.owed => self.answer(id)?,
                Ok(id) => self.received = Some(id),
                // Withdrawn since the poll saw it: it comes again.
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
/// checks that at each call's entry). `Ok` once the client answered, or the listener is closed
/// (then `listener_gone` is set).
pub(crate) fn sleep_in_call(listener_gone: &mut bool) -> Result<(), Error> {
    match notify::intercepted_call() {
        Ok(()) => Ok(()),
        Err(libc::ENOSYS) => {
            *listener_gone = true;
            Ok(())
        }
        Err(errno) => Err(std::io::Error::from_raw_os_error(errno).into()),
    }
}
