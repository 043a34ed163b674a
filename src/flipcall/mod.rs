//! FlipCall: synchronous request/response over shared memory, in one process or across
//! processes, after gVisor's flipcall.
//!
//! A channel is a packet window (a header with one futex word saying whose turn it is, and a
//! data area) and two [`Endpoint`]s, a client and a server. The side holding the turn owns the
//! data area; [`Endpoint::send_recv`] hands the first `len` bytes over with the turn and sleeps
//! until the turn comes back with the reply. Hand-offs go through [`crate::swap`]'s idea: kernel
//! `FUTEX_SWAP` where probed, otherwise wake, learned spin, sleep; and no futex call at all
//! while both sides are running. A waiter whose peer last handed the turn over from the
//! waiter's own CPU does not spin: the peer waits for that CPU. Unlike gVisor's flipcall, waits
//! can time out, either side or any thread can shut the channel down ([`ShutdownHandle`]), and
//! a peer process that dies (even by SIGKILL) is reported as [`Error::PeerDied`] within
//! [`PEER_CHECK_INTERVAL`] (for a peer whose process id can be checked: `Endpoint`'s "Peer
//! death" says which).
//!
//! * In one process: [`pair`].
//! * Across processes: [`PacketWindow::new`] in one, pass [`PacketWindow::fd`] to the other
//!   (inherited, or over a Unix socket), [`PacketWindow::from_fd`] there; then
//!   [`Endpoint::client`] on one side and [`Endpoint::server`] on the other.
//!
//! The turn protocol and its state word are described in the `endpoint` module source, the
//! window layout in the `window` module source.
//!
//! ```
//! use futexkit::flipcall::{self, Error};
//!
//! let (mut client, mut server) = flipcall::pair(1024)?;
//! let server = std::thread::spawn(move || -> Result<(), Error> {
//!     let mut len = server.recv_first()?;
//!     loop {
//!         let sum: u32 = server.data()[..len].iter().map(|&b| u32::from(b)).sum();
//!         server.data_mut()[..4].copy_from_slice(&sum.to_le_bytes());
//!         len = match server.send_recv(4) {
//!             Ok(len) => len,
//!             Err(Error::Shutdown) => return Ok(()),
//!             Err(err) => return Err(err),
//!         };
//!     }
//! });
//! client.connect()?;
//! for n in 1..=10u8 {
//!     client.data_mut()[..3].copy_from_slice(&[n, n, n]);
//!     let len = client.send_recv(3)?;
//!     assert_eq!(client.data()[..len], (3 * u32::from(n)).to_le_bytes());
//! }
//! drop(client);
//! server.join().unwrap()?;
//! # Ok::<(), Error>(())
//! ```
//!
//! ## Threat model: a peer process is untrusted
//!
//! With a [`PacketWindow`] the peer may be another process, buggy or hostile, which can write
//! anything into the window at any moment, punch holes in its file, stop answering, flood, or
//! die. What it can make the honest side see:
//!
//! * errors: [`Error::Protocol`] for anything the protocol cannot produce (the state word is
//!   checked at every step, the message length against the capacity this process measured
//!   itself, the header, seals and filesystem when a window is adopted), [`Error::PeerDied`],
//!   [`Error::Shutdown`], [`Error::TimedOut`];
//! * garbage payloads: any bytes, including bytes that change while they are copied out (each
//!   byte copied is one the area held at some moment). Validate a message after copying it out,
//!   as with bytes from a socket.
//! * a slower channel: the CPU the peer says it last handed over from (a header word) only
//!   decides whether this side spins before it sleeps.
//!
//! What it cannot do:
//!
//! * make a call wait past its deadline, however it rewrites the state word (an untimed call
//!   waits while the peer lives and the channel is open, as a blocking read on a socket does;
//!   the peer's death is noticed within [`PEER_CHECK_INTERVAL`]);
//! * crash this process: the file is sealed against shrinking and must be shmem, so no access
//!   to the mapping can raise SIGBUS (a punched hole reads back as zeros, which the protocol
//!   reports as a violation, except to a client still connecting, for which zero is the state
//!   it waits out: it waits to its deadline or the peer's death), and a futex call that faults
//!   on a removed page is reported as [`Violation::PageRemoved`];
//! * make futexkit index out of bounds, or map more than [`MAX_CAPACITY`] bytes;
//! * cause undefined behaviour: every read and write of the window by safe code is atomic (the
//!   header fields, and the data area through [`Endpoint::read_into`] and
//!   [`Endpoint::write_from`]), so a racing peer is a race on atomics, which Rust defines. No
//!   safe function hands out a `&[u8]` over memory another process can write; the zero-copy view
//!   ([`Endpoint::data_unchecked`]) is `unsafe`, with the peer's good behaviour as its contract.
//!
//! Out of scope: a peer that exhausts memory (refaulting a punched page can then fail), or one
//! with the power to ptrace or signal this process. And one case of a process racing itself:
//! with *both* endpoints of one shared window in this process, a third process that forges the
//! turn can make their two copies overlap in time, and this process's word and byte accesses
//! of different sizes then race each other, which Rust's memory model leaves undefined. Give a
//! window you do not trust one endpoint per process (in one process, use [`pair`]).
//!
//! In one process ([`pair`]) both endpoints are futexkit's, the data area is lent out as plain
//! slices ([`Endpoint::data`], [`Endpoint::data_mut`]), and the turn protocol with `&mut self` on
//! every call keeps them exclusive.

use crate::futex::Private;

mod endpoint;
mod error;
mod peer;
mod server;
mod window;

pub use endpoint::{Endpoint, Role, ShutdownHandle, PEER_CHECK_INTERVAL};
pub use error::{Error, Violation};
pub use server::{
    ChannelData, ChannelId, Event, Server, ServerHandle, WaitMode, MAX_CHANNELS, POLL_INTERVAL,
};
pub use window::PacketWindow;
pub use window::MAX_CAPACITY;

/// A client and a server endpoint connected by an in-process window of `data_cap` bytes.
///
/// # Errors
///
/// [`Error::TooLong`] above [`MAX_CAPACITY`].
pub fn pair(data_cap: usize) -> Result<(Endpoint<Private>, Endpoint<Private>), Error> {
    let region = window::Region::heap(data_cap)?;
    let client = Endpoint::claim(std::sync::Arc::clone(&region), Role::Client)?;
    let server = Endpoint::claim(region, Role::Server)?;
    Ok((client, server))
}
