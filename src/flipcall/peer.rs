//! Noticing that the peer process died: its pid comes from the window header (untrusted), and a
//! pidfd opened once answers "has it exited?" without blocking.

use super::endpoint::Role;
use super::window::Header;
use crate::atomic::Ordering;
use crate::futex::sys::{self, ProcessWatch};

/// What one endpoint knows about its peer's process.
#[derive(Debug)]
pub(crate) struct PeerWatch {
    role: Role,
    own_pid: u32,
    watch: Option<ProcessWatch>,
    died: bool,
}

impl PeerWatch {
    pub(crate) fn new(role: Role) -> PeerWatch {
        PeerWatch {
            role,
            own_pid: sys::getpid(),
            watch: None,
            died: false,
        }
    }

    /// Whether the peer was already found dead.
    pub(crate) fn died(&self) -> bool {
        self.died
    }

    /// Whether the peer may still be alive: `false` only once its process is known to have
    /// exited. A peer that has not written its pid yet, or shares our process, counts as alive.
    ///
    /// The pid is whatever the peer wrote: a lying peer can only make this report its own death
    /// (or fail to report it), which ends its channel and nothing else.
    pub(crate) fn check(&mut self, header: &Header) -> bool {
        if self.died {
            return false;
        }
        if self.watch.is_none() {
            let pid = match self.role {
                Role::Client => header.server_pid.load(Ordering::Acquire),
                Role::Server => header.client_pid.load(Ordering::Acquire),
            };
            if pid == 0 || pid == self.own_pid {
                return true;
            }
            match sys::watch_process(pid) {
                Ok(Some(watch)) => self.watch = Some(watch),
                Ok(None) => self.died = true,
                // Cannot tell (out of descriptors, say): keep waiting, check again next slice.
                Err(_) => return true,
            }
        }
        if let Some(watch) = &self.watch {
            self.died = sys::has_exited(watch);
        }
        !self.died
    }
}
