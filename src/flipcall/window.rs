//! Packet windows: the header FlipCall's protocol runs on, followed by the data area.
//!
//! ## Layout (little-endian `u32`s; version 2)
//!
//! ```text
//! offset 0    magic       "FKfc"
//!        4    version     2 (a window of any other version is refused)
//!        8    capacity    data bytes the creator asked for
//!        12   roles       bit 0: a client endpoint exists, bit 1: a server endpoint exists
//!        16   client_pid  the client's process id, written when its endpoint is made
//!        20   server_pid  the server's process id, likewise
//!        24   client_pidns the client's pid namespace (its inode, folded to 32 bits; 0 unknown)
//!        28   server_pidns likewise: peer death is watched only within one pid namespace
//!        32   client_cpu  the CPU the client last handed the turn over from (u32::MAX: unknown)
//!        36   server_cpu  likewise for the server: a spin-policy hint, never trusted for more
//!        64   state       the futex word (see `endpoint.rs`), on its own cache line
//!        68   len         length of the message handed over with the turn
//!        128  data        `capacity` bytes
//! ```
//!
//! A window made by [`PacketWindow::new`] is a memfd, sized once and then sealed against
//! shrinking and growing, so a peer holding the fd can never truncate it under our mapping (which
//! would turn our accesses into SIGBUS). [`PacketWindow::from_fd`] refuses a file without that
//! seal, and a file that is not on shmem: on hugetlbfs a peer that punches a hole frees a huge
//! page, and faulting it back in fails with SIGBUS when the pool is empty, where shmem hands
//! out a zeroed page. It takes the data capacity from the header only after checking it fits the file it
//! measured itself. The in-process [`pair`](super::pair) uses a heap allocation instead.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::endpoint::Role;
use super::error::Error;
use super::error::Violation;
use crate::atomic::AtomicU32;
use crate::atomic::Ordering;

const MAGIC: u32 = u32::from_le_bytes(*b"FKfc");
const VERSION: u32 = 2;
/// Bytes before the data area.
pub(crate) const HEADER_SIZE: usize = 128;
/// The largest data capacity a window may have (1 GiB): a bound on what a peer's header or file
/// size can make us map.
pub const MAX_CAPACITY: usize = 1 << 30;

/// The role bits in the header's `roles` word.
pub(crate) const CLIENT_ROLE: u32 = 1;
pub(crate) const SERVER_ROLE: u32 = 2;

/// The window header. Every field is an atomic: the peer may write any of them at any time.
#[repr(C)]
pub(crate) struct Header {
    magic: AtomicU32,
    version: AtomicU32,
    capacity: AtomicU32,
    pub(crate) roles: AtomicU32,
    client_pid: AtomicU32,
    server_pid: AtomicU32,
    client_pidns: AtomicU32,
    server_pidns: AtomicU32,
    client_cpu: AtomicU32,
    server_cpu: AtomicU32,
    _reserved: [AtomicU32; 6],
    pub(crate) state: AtomicU32,
    pub(crate) len: AtomicU32,
    _reserved_line: [AtomicU32; 14],
}

// The offsets of the layout above.
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
const _: () = {
    assert!(core::mem::offset_of!(Header, client_cpu) == 32);
    assert!(core::mem::offset_of!(Header, server_cpu) == 36);
    assert!(core::mem::offset_of!(Header, state) == 64);
    assert!(core::mem::offset_of!(Header, len) == 68);
};

// The header is HEADER_SIZE / 4 words with no padding: 128 bytes of `u32`s, the layout a peer
// maps (the atomics are plain words in memory; a model checker's are larger, and map nothing).
const _: () =
    assert!(core::mem::size_of::<Header>() == HEADER_SIZE / 4 * core::mem::size_of::<AtomicU32>());

impl Header {
    fn new(capacity: usize) -> Header {
        Header {
            magic: AtomicU32::new(MAGIC),
            version: AtomicU32::new(VERSION),
            capacity: AtomicU32::new(capacity as u32),
            roles: AtomicU32::new(0),
            client_pid: AtomicU32::new(0),
            server_pid: AtomicU32::new(0),
            client_pidns: AtomicU32::new(0),
            server_pidns: AtomicU32::new(0),
            client_cpu: AtomicU32::new(crate::spin::NO_CPU),
            server_cpu: AtomicU32::new(crate::spin::NO_CPU),
            _reserved: core::array::from_fn(|_| AtomicU32::new(0)),
            state: AtomicU32::new(0),
            len: AtomicU32::new(0),
            _reserved_line: core::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Where the endpoint of `role` writes its process id, and its pid namespace.
    pub(crate) fn process_of(&self, role: Role) -> (&AtomicU32, &AtomicU32) {
        match role {
            Role::Client => (&self.client_pid, &self.client_pidns),
            Role::Server => (&self.server_pid, &self.server_pidns),
        }
    }

    /// Where the endpoint of `role` writes the CPU it last handed the turn over from.
    pub(crate) fn cpu_of(&self, role: Role) -> &AtomicU32 {
        match role {
            Role::Client => &self.client_cpu,
            Role::Server => &self.server_cpu,
        }
    }
}

/// Where a window's memory comes from.
enum Backing {
    /// In-process: the header and data are separate heap allocations.
    Heap {
        header: Box<Header>,
        data: *mut [u8],
    },
    /// A shared mapping of a memfd, `len` bytes at `base`.
    Mapped {
        base: *mut u8,
        len: usize,
        fd: OwnedFd,
    },
}

/// A window's memory, kept alive by every endpoint and shutdown handle that uses it.
pub(crate) struct Region {
    backing: Backing,
    capacity: usize,
    shared: bool,
}

// SAFETY: the header is all atomics. The data area of a private window is only read or written
// by the endpoint that holds the turn (the protocol hands it over with Release/Acquire on
// `state`), and each endpoint is one `&mut`-guarded object; a shared window's, which a peer may
// write at any time, is only read and written by atomic copies (`atomic_copy`), or through the
// `unsafe` accessors whose callers vouch for it. The raw pointers are owned by the region and
// freed in its Drop.
unsafe impl Send for Region {}
// SAFETY: as above: shared access goes through atomics only.
unsafe impl Sync for Region {}

impl Region {
    /// An in-process window with `capacity` data bytes.
    pub(crate) fn heap(capacity: usize) -> Result<Arc<Region>, Error> {
        check_capacity(capacity)?;
        let data = Box::into_raw(vec![0u8; capacity].into_boxed_slice());
        Ok(Arc::new(Region {
            backing: Backing::Heap {
                header: Box::new(Header::new(capacity)),
                data,
            },
            capacity,
            shared: false,
        }))
    }

    pub(crate) fn header(&self) -> &Header {
        match &self.backing {
            Backing::Heap { header, .. } => header,
            // SAFETY: the mapping is page-aligned, at least HEADER_SIZE long (checked when it was
            // made or adopted) and lives as long as `self`; Header is all atomics (plus padding
            // nobody reads), for which concurrent access by the peer is allowed.
            Backing::Mapped { base, .. } => unsafe { &*base.cast::<Header>() },
        }
    }

    /// The data area: `capacity` bytes, valid as long as `self`.
    pub(crate) fn data_ptr(&self) -> *mut u8 {
        match &self.backing {
            Backing::Heap { data, .. } => data.cast(),
            // SAFETY: HEADER_SIZE + capacity <= the mapping's length (checked when mapped).
            Backing::Mapped { base, .. } => unsafe { base.add(HEADER_SIZE) },
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Copies `dst.len()` bytes of the data area, from `offset`, into `dst`.
    ///
    /// # Safety
    ///
    /// The caller's endpoint holds the turn, and `offset + dst.len() <= capacity`.
    pub(crate) unsafe fn copy_out(&self, offset: usize, dst: &mut [u8]) {
        debug_assert!(offset + dst.len() <= self.capacity);
        // SAFETY: `offset + dst.len() <= capacity` (the caller's promise), so the range lies in
        // the data area, which lives as long as `self`.
        let src = unsafe { self.data_ptr().add(offset) };
        match self.backing {
            // SAFETY: the range is in bounds (above) and `dst` is a separate Rust slice. The
            // peer is an endpoint of this process, which touches the data area only while it
            // holds the turn, and the caller holds it: nothing writes the range meanwhile.
            Backing::Heap { .. } => unsafe {
                core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len())
            },
            // SAFETY: the range is in bounds (above), in a mapping this process accesses only
            // with atomics (every access to a mapped data area goes through `copy_out` and
            // `copy_in`, or through an `unsafe` accessor whose contract excludes racing them),
            // and only while its endpoint holds the turn: two copies of this process overlap
            // only if it holds both endpoints and a third process forges the turn, the case
            // the module's docs (`flipcall`) leave out.
            Backing::Mapped { .. } => unsafe { crate::atomic_copy::load(src, dst) },
        }
    }

    /// Copies `src` into the data area at `offset`.
    ///
    /// # Safety
    ///
    /// The caller's endpoint holds the turn, and `offset + src.len() <= capacity`.
    pub(crate) unsafe fn copy_in(&self, offset: usize, src: &[u8]) {
        debug_assert!(offset + src.len() <= self.capacity);
        // SAFETY: in bounds, as in `copy_out`.
        let dst = unsafe { self.data_ptr().add(offset) };
        match self.backing {
            // SAFETY: as in `copy_out`: in bounds, and nobody else reads or writes the range
            // while the caller holds the turn.
            Backing::Heap { .. } => unsafe {
                core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
            },
            // SAFETY: as in `copy_out`.
            Backing::Mapped { .. } => unsafe { crate::atomic_copy::store(dst, src) },
        }
    }

    /// Whether the futex word must use shared (cross-process) scope.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        match &self.backing {
            // SAFETY: `data` came from Box::into_raw in `heap` and is freed only here.
            Backing::Heap { data, .. } => drop(unsafe { Box::from_raw(*data) }),
            // SAFETY: the whole mapping, made in `map`, and no endpoint or handle is left to use
            // it (they hold the Arc this region lives in).
            Backing::Mapped { base, len, .. } => unsafe {
                crate::futex::sys::memory::unmap(*base, *len)
            },
        }
    }
}

fn check_capacity(capacity: usize) -> Result<(), Error> {
    if capacity > MAX_CAPACITY {
        return Err(Error::TooLong {
            len: capacity,
            capacity: MAX_CAPACITY,
        });
    }
    Ok(())
}

/// A packet window in shared memory, for a FlipCall channel between processes.
///
/// One process makes it with [`new`](PacketWindow::new) and passes [`fd`](PacketWindow::fd) to
/// the other (by inheritance across `fork`/`exec`, see
/// [`inheritable_fd`](PacketWindow::inheritable_fd), or over a Unix socket), which adopts it with
/// [`from_fd`](PacketWindow::from_fd). Each side then makes its [`Endpoint`](super::Endpoint).
///
/// ```
/// use futexkit::flipcall::{Endpoint, PacketWindow};
///
/// let window = PacketWindow::new(4096)?;
/// // In the other process: PacketWindow::from_fd(fd)?, then Endpoint::server(&window)?.
/// let adopted = PacketWindow::from_fd(window.fd().try_clone_to_owned()?)?;
/// assert_eq!(adopted.capacity(), 4096);
/// let client = Endpoint::client(&window)?;
/// let server = Endpoint::server(&adopted)?;
/// # drop((client, server));
/// # Ok::<(), futexkit::flipcall::Error>(())
/// ```
pub struct PacketWindow {
    pub(crate) region: Arc<Region>,
}

impl PacketWindow {
    /// A new window with `data_cap` bytes of data (at most [`MAX_CAPACITY`]).
    ///
    /// # Errors
    ///
    /// [`Error::TooLong`] above the maximum; [`Error::Io`] if the memfd cannot be made, sealed or
    /// mapped.
    pub fn new(data_cap: usize) -> Result<PacketWindow, Error> {
        check_capacity(data_cap)?;
        let len = HEADER_SIZE + data_cap;
        let fd = crate::futex::sys::memory::memfd_sized("futexkit-flipcall", len as u64)?;
        use std::os::fd::AsFd;
        crate::futex::sys::memory::seal_size(fd.as_fd())?;
        let base = crate::futex::sys::memory::map_shared(fd.as_fd(), len)?;
        // SAFETY: a fresh, page-aligned mapping of at least HEADER_SIZE bytes that no other
        // process can have yet (the fd has not been shared), so nothing reads it meanwhile.
        unsafe { base.cast::<Header>().write(Header::new(data_cap)) };
        let region = Region {
            backing: Backing::Mapped { base, len, fd },
            capacity: data_cap,
            shared: true,
        };
        Ok(PacketWindow {
            region: Arc::new(region),
        })
    }

    /// Adopts a window another process made (its fd, received by inheritance or over a socket).
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] with [`Violation::NotSealed`] if the file can still shrink,
    /// [`Violation::NotShmem`] if it is not a plain memfd (a hugetlbfs one, say), or
    /// [`Violation::BadHeader`] if it is not a FlipCall window of this version or its header's
    /// capacity does not fit the file; [`Error::Io`] if it cannot be measured or mapped.
    pub fn from_fd(fd: OwnedFd) -> Result<PacketWindow, Error> {
        use std::os::fd::AsFd;
        if !crate::futex::sys::memory::is_sealed_against_shrinking(fd.as_fd())? {
            return Err(Violation::NotSealed.into());
        }
        if !crate::futex::sys::memory::is_shmem(fd.as_fd())? {
            return Err(Violation::NotShmem.into());
        }
        let file_len = crate::futex::sys::memory::file_size(fd.as_fd())?;
        if file_len < HEADER_SIZE as u64 {
            return Err(Violation::BadHeader("file shorter than the header").into());
        }
        let len = usize::try_from(file_len)
            .ok()
            .filter(|&len| len <= HEADER_SIZE + MAX_CAPACITY)
            .ok_or(Violation::BadHeader("file larger than the largest window"))?;
        let base = crate::futex::sys::memory::map_shared(fd.as_fd(), len)?;
        let mut region = Region {
            backing: Backing::Mapped { base, len, fd },
            capacity: 0,
            shared: true,
        };
        let header = region.header();
        if header.magic.load(Ordering::Acquire) != MAGIC {
            return Err(Violation::BadHeader("wrong magic").into());
        }
        if header.version.load(Ordering::Relaxed) != VERSION {
            return Err(Violation::BadHeader("unsupported version").into());
        }
        let capacity = header.capacity.load(Ordering::Relaxed) as usize;
        if capacity > len - HEADER_SIZE {
            return Err(Violation::BadHeader("capacity beyond the end of the file").into());
        }
        region.capacity = capacity;
        Ok(PacketWindow {
            region: Arc::new(region),
        })
    }

    /// The window's memfd, to pass to the peer process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match &self.region.backing {
            Backing::Mapped { fd, .. } => fd.as_fd(),
            Backing::Heap { .. } => unreachable!("a PacketWindow is always mapped"),
        }
    }

    /// A copy of [`fd`](PacketWindow::fd) without close-on-exec, for a child process started
    /// with `exec` to inherit (pass its number on the command line or in the environment, and
    /// drop it in the parent once the child is started).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if `dup` fails.
    pub fn inheritable_fd(&self) -> Result<OwnedFd, Error> {
        Ok(crate::futex::sys::memory::dup_inheritable(self.fd())?)
    }

    /// Data bytes per message.
    pub fn capacity(&self) -> usize {
        self.region.capacity()
    }
}

impl core::fmt::Debug for PacketWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PacketWindow")
            .field("fd", &self.fd())
            .field("capacity", &self.capacity())
            .finish()
    }
}
