//! Noticing that the peer process died: its pid comes from the window header (untrusted), and a
//! pidfd opened once answers "has it exited?" without blocking.
//!
//! Pids name processes only within one pid namespace, so each endpoint also writes its pid
//! namespace, and the watch is off unless both match: a peer in another namespace (a sandbox, a
//! container) is never declared dead by mistake, and its death is noticed only by the caller's
//! deadline. A peer that dies before it has made its endpoint is likewise noticed only by the
//! deadline of `connect` or `recv_first`.
//!
//! A fork child that uses an endpoint its parent made announces itself at its first call, and
//! a peer whose announced pid changes is watched afresh, so the watch follows the process that
//! uses each side.

use super::endpoint::Role;
use super::window::Header;
use crate::atomic::Ordering;
use crate::futex::sys::process::{self as sys, ProcessWatch};

/// What one endpoint knows about its peer's process.
#[derive(Debug)]
pub(crate) struct PeerWatch {
    role: Role,
    peer_role: Role,
    own_pid: u32,
    own_pidns: u32,
    /// The fork count (`sys::forks`) when this process announced itself.
    forks: Option<u32>,
    /// The pid watched, and its pidfd.
    watch: Option<(u32, ProcessWatch)>,
    died: bool,
}

impl PeerWatch {
    /// Writes this process's pid and pid namespace into `header` for `role`, and prepares to
    /// watch the other role's process.
    pub(crate) fn announce(header: &Header, role: Role) -> PeerWatch {
        let forks = crate::futex::sys::forks();
        let own_pid = sys::getpid();
        let own_pidns = sys::pid_namespace();
        let (pid, pidns) = header.process_of(role);
        pidns.store(own_pidns, Ordering::Relaxed);
        pid.store(own_pid, Ordering::Release);
        PeerWatch {
            role,
            peer_role: match role {
                Role::Client => Role::Server,
                Role::Server => Role::Client,
            },
            own_pid,
            own_pidns,
            forks,
            watch: None,
            died: false,
        }
    }

    /// Whether the peer was already found dead.
    pub(crate) fn died(&self) -> bool {
        self.died
    }

    /// In a fork child using an endpoint its parent made: announces the child in the parent's
    /// place, so that the peer watches the child, and looks at the peer afresh (the parent,
    /// this process's own before, may be the peer's process now). One load while the fork
    /// count is kept and unchanged; a `getpid` otherwise.
    pub(crate) fn follow_fork(&mut self, header: &Header) {
        let forks = crate::futex::sys::forks();
        if forks.is_some() && forks == self.forks {
            return;
        }
        if sys::getpid() == self.own_pid {
            self.forks = forks;
        } else {
            let died = self.died;
            *self = PeerWatch {
                died,
                ..PeerWatch::announce(header, self.role)
            };
        }
    }

    /// Opens the peer's pidfd if its pid is known and not yet watched, or changed since (a
    /// `getpid` and a load otherwise, to follow a fork on either side).
    pub(crate) fn watch(&mut self, header: &Header) {
        self.follow_fork(header);
        if self.died || self.own_pidns == 0 {
            return;
        }
        let (pid, pidns) = header.process_of(self.peer_role);
        let pid = pid.load(Ordering::Acquire);
        // The peer announced another process (it forked, and its child took over): watch that.
        if self
            .watch
            .as_ref()
            .is_some_and(|(watched, _)| *watched == pid)
        {
            return;
        }
        self.watch = None;
        if pid == 0 || pid == self.own_pid || pidns.load(Ordering::Relaxed) != self.own_pidns {
            return;
        }
        match sys::watch_process(pid) {
            Ok(Some(watch)) => self.watch = Some((pid, watch)),
            Ok(None) => self.died = true,
            // Cannot tell (out of descriptors, say): try again at the next check.
            Err(_) => {}
        }
    }

    /// Whether the peer may still be alive: `false` only once its process is known to have
    /// exited. A peer that has not written its pid yet, shares our process, or lives in another
    /// pid namespace counts as alive.
    ///
    /// The pid is whatever the peer wrote: a lying peer can only make this report its own death
    /// (or fail to report it), which ends its channel and nothing else.
    pub(crate) fn check(&mut self, header: &Header) -> bool {
        self.watch(header);
        if let Some((_, watch)) = &self.watch {
            self.died = sys::has_exited(watch);
        }
        !self.died
    }
}
