//! `notify.rs` under a model checker: the filter, the intercepted call and the listener's
//! calls emulated on the checker's threads, so that a model runs the directed hand-off as
//! shipped.
//!
//! One table, guarded by the checker's `Mutex`, holds each listener (open or closed) and each
//! call made and not yet returned, with its state (waiting to be received, received, answered);
//! one `Condvar` that every change notifies. A model thread's filter is a thread-local naming
//! its listener. As in the kernel: a call on a closed listener, or from a thread without a
//! filter, fails with `ENOSYS` (also one already waiting, when the listener closes); receiving
//! takes the oldest call waiting; answering an id that is not a received call fails with
//! `ENOENT`. A timed wait for a call gives the checker a scheduling point and then, if no call
//! came, reports nothing, so both outcomes are explored. Not modelled: signals (which withdraw
//! a call) and a filter's last thread exiting (`Hangup`): model threads do neither.

#[cfg(loom)]
use ::loom as checker;
#[cfg(shuttle)]
use ::shuttle as checker;

use std::os::fd::OwnedFd;
use std::time::Duration;

use checker::lazy_static;
use checker::sync::{Condvar, Mutex};

use super::Errno;

/// A listener: an index into the table's listeners.
#[derive(Debug)]
pub(crate) struct Listener(usize);

impl Listener {
    /// Descriptors do not exist under a model checker: nothing can be passed in.
    pub(crate) fn from_fd(_fd: OwnedFd) -> Listener {
        panic!("a model has no listener descriptors to adopt")
    }

    /// Descriptors do not exist under a model checker: nothing can be passed out.
    pub(crate) fn into_fd(self) -> OwnedFd {
        panic!("a model has no listener descriptors to pass")
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut table = NOTIFY.table.lock().unwrap();
        table.open[self.0] = false;
        NOTIFY.changed.notify_all();
    }
}

/// As `notify.rs`'s (the code above matches on every variant, which no model makes).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilterError {
    /// Never under a model checker.
    UnknownArchitecture,
    /// Never under a model checker.
    NoNewPrivs(Errno),
    /// Never under a model checker.
    Seccomp(Errno),
}

/// As `notify.rs`'s (the code above matches on every variant, which no model makes).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeError {
    /// Never under a model checker.
    Filter(FilterError),
    /// Never under a model checker.
    SyncWakeUp(Errno),
    /// Never under a model checker.
    NoThread,
}

/// Always available: a model's filter is emulated.
pub(crate) fn probe() -> Result<(), ProbeError> {
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CallState {
    Waiting,
    Received,
    Answered,
}

struct Call {
    id: u64,
    listener: usize,
    state: CallState,
}

struct Table {
    /// Whether each listener is open, by index.
    open: Vec<bool>,
    /// Calls made and not returned, oldest first.
    calls: Vec<Call>,
    next_id: u64,
}

struct Emulated {
    table: Mutex<Table>,
    changed: Condvar,
}

lazy_static! {
    static ref NOTIFY: Emulated = Emulated {
        table: Mutex::new(Table {
            open: Vec::new(),
            calls: Vec::new(),
            next_id: 1,
        }),
        changed: Condvar::new(),
    };
}

checker::thread_local! {
    /// The listener of the calling model thread's filter, if it has one.
    static FILTER: core::cell::Cell<Option<usize>> = core::cell::Cell::new(None);
}

/// Gives the calling model thread a filter and a new listener.
pub(crate) fn install_filter() -> Result<Listener, FilterError> {
    let mut table = NOTIFY.table.lock().unwrap();
    table.open.push(true);
    let index = table.open.len() - 1;
    FILTER.with(|filter| filter.set(Some(index)));
    Ok(Listener(index))
}

/// Always accepted.
pub(crate) fn set_sync_wake_up(_listener: &Listener, _on: bool) -> Result<(), Errno> {
    Ok(())
}

/// The emulated intercepted call: waits until answered, or fails with `ENOSYS`.
pub(crate) fn intercepted_call() -> Result<(), Errno> {
    let Some(listener) = FILTER.with(|filter| filter.get()) else {
        return Err(libc::ENOSYS);
    };
    let mut table = NOTIFY.table.lock().unwrap();
    if !table.open[listener] {
        return Err(libc::ENOSYS);
    }
    let id = table.next_id;
    table.next_id += 1;
    table.calls.push(Call {
        id,
        listener,
        state: CallState::Waiting,
    });
    NOTIFY.changed.notify_all();
    loop {
        let position = table.calls.iter().position(|call| call.id == id);
        let answered = position.is_some_and(|p| table.calls[p].state == CallState::Answered);
        if answered || !table.open[listener] {
            if let Some(position) = position {
                table.calls.remove(position);
            }
            return if answered { Ok(()) } else { Err(libc::ENOSYS) };
        }
        table = NOTIFY.changed.wait(table).unwrap();
    }
}

/// As `notify.rs`'s: a call waiting, or (after one scheduling point) nothing.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// A call waits to be received.
    Call,
    /// Never under a model checker.
    Hangup,
    /// No call came.
    Nothing,
}

fn a_call_waits(table: &Table, listener: usize) -> bool {
    table
        .calls
        .iter()
        .any(|call| call.listener == listener && call.state == CallState::Waiting)
}

/// The emulated `poll`: every wait here is timed (the directed hand-off's are).
pub(crate) fn wait_for_call(listener: &Listener, _timeout: Duration) -> Result<Readiness, Errno> {
    if a_call_waits(&NOTIFY.table.lock().unwrap(), listener.0) {
        return Ok(Readiness::Call);
    }
    checker::thread::yield_now();
    Ok(if a_call_waits(&NOTIFY.table.lock().unwrap(), listener.0) {
        Readiness::Call
    } else {
        Readiness::Nothing
    })
}

/// The emulated `RECV`: the oldest waiting call, or `ENOENT`.
pub(crate) fn receive_call(listener: &Listener) -> Result<u64, Errno> {
    let mut table = NOTIFY.table.lock().unwrap();
    let call = table
        .calls
        .iter_mut()
        .find(|call| call.listener == listener.0 && call.state == CallState::Waiting)
        .ok_or(libc::ENOENT)?;
    call.state = CallState::Received;
    Ok(call.id)
}

/// The emulated `SEND`: answers a received call, or fails with `ENOENT`.
pub(crate) fn answer_call(listener: &Listener, id: u64) -> Result<(), Errno> {
    let mut table = NOTIFY.table.lock().unwrap();
    let call = table
        .calls
        .iter_mut()
        .find(|call| call.id == id && call.listener == listener.0)
        .filter(|call| call.state == CallState::Received)
        .ok_or(libc::ENOENT)?;
    call.state = CallState::Answered;
    NOTIFY.changed.notify_all();
    Ok(())
}
