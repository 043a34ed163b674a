//! FlipCall: synchronous request/response over shared memory, in one process or across
//! processes, after gVisor's flipcall.
//!
//! A channel is a packet window (a header with one futex word saying whose turn it is, and a
//! data area) and two [`Endpoint`]s, a client and a server. The side holding the turn owns the
//! data area; [`Endpoint::send_recv`] hands the first `len` bytes over with the turn and sleeps
//! until the turn comes back with the reply. Hand-offs go through [`crate::swap`]'s idea: kernel
//! `FUTEX_SWAP` where probed, otherwise wake, learned spin, sleep; and no syscall at all while
//! both sides are running. Unlike gVisor's flipcall, waits can time out, either side or any
//! thread can shut the channel down ([`ShutdownHandle`]), and a peer process that dies (even by
//! SIGKILL) is reported as [`Error::PeerDied`] within [`PEER_CHECK_INTERVAL`].
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
//! ## Untrusted peers and the memory model
//!
//! A peer process can write anything into the window at any time. Everything futexkit reads
//! from it is read with atomics, once, and validated before use: the state word against the
//! protocol ([`Violation::UnknownState`], [`Violation::TurnTaken`]), the message length against
//! the capacity this process measured itself ([`Violation::LengthOutOfRange`]), the header and
//! file size and seals when a window is adopted. Waits are bounded by the caller's deadline and
//! by the peer checks, so a lying peer can make calls fail but cannot make them hang past a
//! deadline, index out of bounds, or truncate the file under our mapping (it is sealed).
//!
//! The data area is plain bytes handed out as `&[u8]`/`&mut [u8]` while this side holds the
//! turn, with the Release/Acquire pair on the state word ordering each side's writes before the
//! other's reads. A peer that writes the area out of turn races with us; as with every
//! shared-memory IPC in Rust, we rely on the compiler not seeing the other process (the memory
//! is a shared mapping it cannot reason about) and on `u8` having no invalid values, so such a
//! race yields garbage bytes, not undefined behaviour in practice. Copy out what you must trust
//! before validating it, as you would with bytes from a socket.

mod endpoint;
mod error;
#[cfg(not(model))]
mod peer;
mod window;

pub use endpoint::{Endpoint, Role, ShutdownHandle, PEER_CHECK_INTERVAL};
pub use error::{Error, Violation};
#[cfg(not(model))]
pub use window::PacketWindow;
pub use window::MAX_CAPACITY;

/// A client and a server endpoint connected by an in-process window of `data_cap` bytes.
///
/// # Errors
///
/// [`Error::TooLong`] above [`MAX_CAPACITY`].
pub fn pair(data_cap: usize) -> Result<(Endpoint, Endpoint), Error> {
    let region = window::Region::heap(data_cap)?;
    let client = Endpoint::claim(std::sync::Arc::clone(&region), Role::Client)?;
    let server = Endpoint::claim(region, Role::Server)?;
    Ok((client, server))
}
