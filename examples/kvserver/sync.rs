//! The one place the key-value server names a lock library: std's `Mutex`/`Condvar`,
//! futexkit's, or parking_lot's, behind one small trait (`benches/common/locks.rs`, shared with
//! the condvar benches), picked at start-up by [`Backend`].
//!
//! futexkit is a drop-in for `std::sync`, so one macro body serves both: the only difference
//! between the two impls is the path the types come from (`std::sync` or `futexkit`), which is
//! the one-line change a user makes in their own server.
#![allow(dead_code)]

use std::fmt;
use std::str::FromStr;

/// The lock library a server runs on, chosen at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `std::sync::{Mutex, Condvar}`.
    Std,
    /// `futexkit::{Mutex, Condvar}`.
    Futexkit,
    /// `parking_lot::{Mutex, Condvar}`.
    ParkingLot,
}

impl Backend {
    /// Every backend, in the order tables print them.
    pub const ALL: [Backend; 3] = [Backend::Futexkit, Backend::Std, Backend::ParkingLot];

    /// The name the `--backend` flag takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Std => "std",
            Backend::Futexkit => "futexkit",
            Backend::ParkingLot => "parking_lot",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown backend {s:?} (expected std, futexkit or parking_lot)"))
    }
}

#[path = "../../benches/common/locks.rs"]
mod locks;
/// The Mutex + Condvar family the server is generic over; it uses nothing else to synchronise
/// threads.
pub use locks::{Futexkit, Locks, ParkingLot, Std};
