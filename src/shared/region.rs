//! Regions: a sealed memfd holding a header and named process-shared objects.
//!
//! ## Layout (integers in the machine's byte order)
//!
//! ```text
//! offset 0    magic          "FKshared"
//!        8    version        VERSION
//!        12   object_count   entries in the table below (at most MAX_OBJECTS)
//!        16   region_len     the file's length in bytes (u64)
//!        24   pid_namespace  the creator's pid namespace (its inode folded to 32 bits; 0: unknown)
//!        28   reserved       zeros, to 64
//!        64   object table   object_count entries of 64 bytes:
//!                 0   name         1 to 32 bytes of UTF-8, NUL-padded, unique
//!                 32  kind         1 mutex, 2 condvar, 3 rwlock, 4 barrier, 5 semaphore, 6 latch,
//!                                  7 event
//!                 36  value_size   the guarded value's size (mutex, rwlock; else 0)
//!                 40  value_align  its alignment, a power of two up to 64 (likewise)
//!                 44  param        a barrier's parties; a semaphore's permits; else 0
//!                 48  offset       where the object starts, a multiple of 64 past the table (u64)
//!                 56  len          its size in bytes (u64)
//!        ...  the objects, each the `#[repr(C)]` type its kind names
//! ```
//!
//! [`Region::from_fd`] refuses a file that is not a sealed shmem memfd (as FlipCall's windows),
//! then copies the header and the table out of the mapping once and checks them: the magic and
//! version, the length against the file it measured itself, every entry's kind, name, bounds,
//! alignment and size, and that no two objects overlap. Later lookups use that private copy, so
//! a peer that rewrites the header afterwards changes nothing here; what it writes into the
//! objects themselves can make their calls fail or wait, never misbehave (`src/raw/shared/`).

use core::alloc::Layout;
use core::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::futex::sys;
use crate::raw::{RawSharedMutex, RawSharedRwLock};
use crate::raw::{BARRIER_MAX_PARTIES, MAX_LATCH_COUNT, SEMAPHORE_MAX_PERMITS};
use crate::shared::plain::{self, Plain};
use crate::shared::{
    RegionError, SharedBarrier, SharedCondvar, SharedEvent, SharedLatch, SharedMutex, SharedRwLock,
    SharedSemaphore,
};

const MAGIC: [u8; 8] = *b"FKshared";
/// The region format's version, raised whenever the layout or a protocol over the region's
/// words changes, so that processes built with different ones refuse to share a region.
const VERSION: u32 = 3;
/// The most objects a region holds.
pub const MAX_OBJECTS: usize = 1024;
/// The largest region, in bytes.
pub const MAX_REGION_LEN: usize = 1 << 30;
/// The longest object name, in bytes.
pub const MAX_NAME_LEN: usize = 32;
const HEADER_LEN: usize = 64;
const ENTRY_LEN: usize = 64;
pub(crate) const OBJECT_ALIGN: usize = 64;

#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    magic: [u8; 8],
    version: u32,
    object_count: u32,
    region_len: u64,
    pid_namespace: u32,
    reserved: [u32; 9],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    name: [u8; MAX_NAME_LEN],
    kind: u32,
    value_size: u32,
    value_align: u32,
    param: u32,
    offset: u64,
    len: u64,
}

const _: () = assert!(core::mem::size_of::<Header>() == HEADER_LEN);
const _: () = assert!(core::mem::size_of::<Entry>() == ENTRY_LEN);

// SAFETY: `#[repr(C)]` structs of integers and byte arrays, sized without padding (asserted
// above): every bit pattern is a valid value.
unsafe impl Plain for Header {}
// SAFETY: as for `Header`.
unsafe impl Plain for Entry {}

/// What an object in a region is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A [`SharedMutex`].
    Mutex,
    /// A [`SharedCondvar`].
    Condvar,
    /// A [`SharedRwLock`].
    RwLock,
    /// A [`SharedBarrier`].
    Barrier,
    /// A [`SharedSemaphore`].
    Semaphore,
    /// A [`SharedLatch`].
    Latch,
    /// A [`SharedEvent`].
    Event,
}

impl ObjectKind {
    fn code(self) -> u32 {
        match self {
            ObjectKind::Mutex => 1,
            ObjectKind::Condvar => 2,
            ObjectKind::RwLock => 3,
            ObjectKind::Barrier => 4,
            ObjectKind::Semaphore => 5,
            ObjectKind::Latch => 6,
            ObjectKind::Event => 7,
        }
    }

    fn from_code(code: u32) -> Option<ObjectKind> {
        Some(match code {
            1 => ObjectKind::Mutex,
            2 => ObjectKind::Condvar,
            3 => ObjectKind::RwLock,
            4 => ObjectKind::Barrier,
            5 => ObjectKind::Semaphore,
            6 => ObjectKind::Latch,
            7 => ObjectKind::Event,
            _ => return None,
        })
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjectKind::Mutex => "mutex",
            ObjectKind::Condvar => "condvar",
            ObjectKind::RwLock => "rwlock",
            ObjectKind::Barrier => "barrier",
            ObjectKind::Semaphore => "semaphore",
            ObjectKind::Latch => "latch",
            ObjectKind::Event => "event",
        })
    }
}

/// The size an object of `kind` takes, guarding a value of `value_size` bytes aligned to
/// `value_align` (the `#[repr(C)]` layout of `SharedMutex<T>` and `SharedRwLock<T>`).
fn object_len(kind: ObjectKind, value_size: usize, value_align: usize) -> Option<usize> {
    let with_value = |lock: Layout| {
        let value = Layout::from_size_align(value_size, value_align).ok()?;
        Some(lock.extend(value).ok()?.0.pad_to_align().size())
    };
    match kind {
        ObjectKind::Mutex => with_value(Layout::new::<RawSharedMutex>()),
        ObjectKind::RwLock => with_value(Layout::new::<RawSharedRwLock>()),
        ObjectKind::Condvar => Some(core::mem::size_of::<SharedCondvar>()),
        ObjectKind::Barrier => Some(core::mem::size_of::<SharedBarrier>()),
        ObjectKind::Semaphore => Some(core::mem::size_of::<SharedSemaphore>()),
        ObjectKind::Latch => Some(core::mem::size_of::<SharedLatch>()),
        ObjectKind::Event => Some(core::mem::size_of::<SharedEvent>()),
    }
}

/// A region of shared memory holding named process-shared, robust locks: a sealed memfd,
/// mapped. One process builds it ([`Region::builder`]) and hands its descriptor to the others
/// (inherited across `fork`, across `exec` with [`inheritable_fd`](Region::inheritable_fd), or
/// over a Unix socket), which adopt it with [`Region::from_fd`]; each then looks its objects up
/// by name and type. The layout is at the top of `src/shared/region.rs`.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder()
///     .mutex("counter", 0u64)
///     .condvar("changed")
///     .rwlock("table", [0u32; 16])
///     .barrier("start", 1)
///     .build()?;
/// // In another process: Region::from_fd(fd)?, then the same lookups.
/// let adopted = Region::from_fd(region.fd().try_clone_to_owned()?)?;
/// let counter = adopted.mutex::<u64>("counter")?;
/// counter.lock().unwrap().update(|n| *n += 1);
/// assert_eq!(region.mutex::<u64>("counter")?.lock().unwrap().get(), 1);
/// assert!(adopted.mutex::<u32>("counter").is_err(), "another type");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Region {
    base: *mut u8,
    len: usize,
    fd: OwnedFd,
    entries: Vec<Entry>,
}

// SAFETY: the mapping is owned by the region and unmapped in its Drop; everything in it is
// accessed atomically, through the objects, by any thread.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Drop for Region {
    /// Unmaps the region, unless a thread of this process still holds one of its locks: that
    /// lock's guard was leaked (`mem::forget`), and its word is still linked in that thread's
    /// robust list. The kernel reads the list when the thread dies, and an unmapped entry would
    /// end its walk there, leaving the thread's later entries (glibc's robust mutexes among
    /// them) unmarked; so the mapping is left in place, for good.
    ///
    /// The lock words are in memory a peer process can write, so a hostile peer decides this
    /// too: one that writes a thread id of this process into a word keeps the mapping for good,
    /// and one that clears a word this process holds gets it unmapped, which ends that thread's
    /// walk early, the harm a peer that rewrites an entry's `next` can do already
    /// (`src/futex/robust.rs`).
    fn drop(&mut self) {
        if self.held_in_this_process() {
            return;
        }
        crate::deadlock::forget_shared(self.base.cast_const().cast(), self.len);
        // SAFETY: the whole mapping, made by `map_shared`; no object borrowed from the region
        // outlives it, and no thread of this process has a word of it in its robust list.
        unsafe { sys::memory::unmap(self.base, self.len) };
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("fd", &self.fd)
            .field("len", &self.len)
            .field("objects", &self.objects().collect::<Vec<_>>())
            .finish()
    }
}

impl Region {
    /// Starts a region: name its objects, then [`build`](RegionBuilder::build).
    pub fn builder() -> RegionBuilder {
        RegionBuilder {
            objects: Vec::new(),
        }
    }

    /// Adopts a region another process built (its descriptor, inherited or received), after
    /// checking the file and the header.
    ///
    /// # Errors
    ///
    /// [`RegionError::NotSealed`], [`RegionError::NotShmem`], [`RegionError::BadHeader`],
    /// [`RegionError::OtherPidNamespace`], [`RegionError::Io`].
    pub fn from_fd(fd: OwnedFd) -> Result<Region, RegionError> {
        if !sys::memory::is_sealed_against_shrinking(fd.as_fd())? {
            return Err(RegionError::NotSealed);
        }
        if !sys::memory::is_shmem(fd.as_fd())? {
            return Err(RegionError::NotShmem);
        }
        let file_len = sys::memory::file_size(fd.as_fd())?;
        let len = usize::try_from(file_len)
            .ok()
            .filter(|len| (HEADER_LEN..=MAX_REGION_LEN).contains(len))
            .ok_or(RegionError::BadHeader("file length out of range"))?;
        let base = sys::memory::map_shared(fd.as_fd(), len)?;
        let mut region = Region {
            base,
            len,
            fd,
            entries: Vec::new(),
        };
        region.entries = region.read_table()?;
        Ok(region)
    }

    /// The region's memfd, to pass to another process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A copy of [`fd`](Region::fd) without close-on-exec, for a child started with `exec`
    /// to inherit (pass its number on the command line or in the environment).
    ///
    /// # Errors
    ///
    /// [`RegionError::Io`] if `dup` fails.
    pub fn inheritable_fd(&self) -> Result<OwnedFd, RegionError> {
        Ok(sys::memory::dup_inheritable(self.fd())?)
    }

    /// The region's objects: their names and kinds.
    pub fn objects(&self) -> impl Iterator<Item = (&str, ObjectKind)> + '_ {
        self.entries.iter().map(|entry| {
            (
                entry_name(entry).unwrap_or(""),
                ObjectKind::from_code(entry.kind).expect("checked when adopted"),
            )
        })
    }

    /// The mutex named `name`, guarding a `T`.
    ///
    /// # Errors
    ///
    /// [`RegionError::NotFound`], [`RegionError::WrongKind`], [`RegionError::WrongType`].
    pub fn mutex<T: Plain>(&self, name: &str) -> Result<&SharedMutex<T>, RegionError> {
        let object = self.find::<T>(name, ObjectKind::Mutex, Layout::new::<SharedMutex<T>>())?;
        // SAFETY: `find` checked that the object is a mutex guarding a value of `T`'s size and
        // alignment, lies in the mapping, and is aligned for `SharedMutex<T>`; the mapping lives
        // as long as `self`, and every process touches it through these types or atomically.
        Ok(unsafe { SharedMutex::from_ptr(object.cast()) })
    }

    /// The condition variable named `name`.
    ///
    /// # Errors
    ///
    /// [`RegionError::NotFound`], [`RegionError::WrongKind`].
    pub fn condvar(&self, name: &str) -> Result<&SharedCondvar, RegionError> {
        let object = self.find::<()>(name, ObjectKind::Condvar, Layout::new::<SharedCondvar>())?;
        // SAFETY: as in `mutex`, for a condition variable.
        Ok(unsafe { SharedCondvar::from_ptr(object.cast()) })
    }

    /// The reader-writer lock named `name`, guarding a `T`.
    ///
    /// # Errors
    ///
    /// [`RegionError::NotFound`], [`RegionError::WrongKind`], [`RegionError::WrongType`].
    pub fn rwlock<T: Plain>(&self, name: &str) -> Result<&SharedRwLock<T>, RegionError> {
        let object = self.find::<T>(name, ObjectKind::RwLock, Layout::new::<SharedRwLock<T>>())?;
        // SAFETY: as in `mutex`, for a reader-writer lock.
        Ok(unsafe { SharedRwLock::from_ptr(object.cast()) })
    }

    /// The semaphore named `name`.
    ///
    /// # Errors
    ///
    /// As [`condvar`](Self::condvar).
    pub fn semaphore(&self, name: &str) -> Result<&SharedSemaphore, RegionError> {
        let object = self.find::<()>(
            name,
            ObjectKind::Semaphore,
            Layout::new::<SharedSemaphore>(),
        )?;
        // SAFETY: as in `mutex`, for a semaphore.
        Ok(unsafe { SharedSemaphore::from_ptr(object.cast()) })
    }

    /// The latch named `name`.
    ///
    /// # Errors
    ///
    /// As [`condvar`](Self::condvar).
    pub fn latch(&self, name: &str) -> Result<&SharedLatch, RegionError> {
        let object = self.find::<()>(name, ObjectKind::Latch, Layout::new::<SharedLatch>())?;
        // SAFETY: as in `mutex`, for a latch.
        Ok(unsafe { SharedLatch::from_ptr(object.cast()) })
    }

    /// The event named `name`.
    ///
    /// # Errors
    ///
    /// As [`condvar`](Self::condvar).
    pub fn event(&self, name: &str) -> Result<&SharedEvent, RegionError> {
        let object = self.find::<()>(name, ObjectKind::Event, Layout::new::<SharedEvent>())?;
        // SAFETY: as in `mutex`, for an event.
        Ok(unsafe { SharedEvent::from_ptr(object.cast()) })
    }

    /// The barrier named `name`.
    ///
    /// # Errors
    ///
    /// [`RegionError::NotFound`], [`RegionError::WrongKind`].
    pub fn barrier(&self, name: &str) -> Result<&SharedBarrier, RegionError> {
        let object = self.find::<()>(name, ObjectKind::Barrier, Layout::new::<SharedBarrier>())?;
        // SAFETY: as in `mutex`, for a barrier.
        Ok(unsafe { SharedBarrier::from_ptr(object.cast()) })
    }

    /// The object named `name`, checked to be a `kind` laid out as `layout`, guarding a `T`
    /// (for the kinds that guard a value).
    fn find<T>(
        &self,
        name: &str,
        kind: ObjectKind,
        layout: Layout,
    ) -> Result<*const u8, RegionError> {
        let entry = self
            .entries
            .iter()
            .find(|entry| entry_name(entry) == Some(name))
            .ok_or_else(|| RegionError::NotFound(name.to_owned()))?;
        let found = ObjectKind::from_code(entry.kind).expect("checked when adopted");
        if found != kind {
            return Err(RegionError::WrongKind {
                name: name.to_owned(),
                expected: kind,
                found,
            });
        }
        if matches!(kind, ObjectKind::Mutex | ObjectKind::RwLock) {
            let expected = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
            let found = (entry.value_size as usize, entry.value_align as usize);
            if expected != found {
                return Err(RegionError::WrongType {
                    name: name.to_owned(),
                    expected,
                    found,
                });
            }
        }
        // Checked when adopted (or built): in bounds, 64-aligned, of this kind's length.
        debug_assert_eq!(entry.len as usize, layout.size());
        debug_assert_eq!(entry.offset as usize % layout.align(), 0);
        // SAFETY: `offset + len <= self.len`, checked when the table was read.
        Ok(unsafe { self.base.add(entry.offset as usize) })
    }

    /// Whether a thread of this process holds a lock of the region (any, where this process's
    /// threads cannot be listed).
    fn held_in_this_process(&self) -> bool {
        let ours = sys::process::thread_ids();
        // The object at each entry was checked when the table was read (kind, bounds,
        // alignment, size), and each of these types starts with its raw lock, all atomics.
        let mut locks = self.entries.iter().flat_map(|entry| {
            let at = self.base.wrapping_add(entry.offset as usize);
            let words: Box<dyn Iterator<Item = &RawSharedMutex>> =
                match ObjectKind::from_code(entry.kind) {
                    Some(ObjectKind::Mutex) => {
                        // SAFETY: a checked mutex entry (above).
                        let mutex = unsafe { RawSharedMutex::from_ptr(at.cast()) };
                        Box::new(core::iter::once(mutex))
                    }
                    Some(ObjectKind::RwLock) => {
                        // SAFETY: a checked rwlock entry (above).
                        let rwlock = unsafe { RawSharedRwLock::from_ptr(at.cast()) };
                        Box::new(rwlock.robust_words())
                    }
                    Some(ObjectKind::Barrier) => {
                        // SAFETY: a checked barrier entry (above).
                        let barrier = unsafe { crate::raw::RawSharedBarrier::from_ptr(at.cast()) };
                        Box::new(barrier.robust_words())
                    }
                    Some(ObjectKind::Semaphore) => {
                        // SAFETY: a checked semaphore entry (above).
                        let semaphore = unsafe { SharedSemaphore::from_ptr(at.cast()) };
                        Box::new(semaphore.raw().robust_words())
                    }
                    _ => Box::new(core::iter::empty()),
                };
            words
        });
        locks.any(|lock| lock.held_by_one_of(ours.as_deref()))
    }

    /// Copies the header and the object table out of the mapping and checks them.
    fn read_table(&self) -> Result<Vec<Entry>, RegionError> {
        // SAFETY: the mapping is at least HEADER_LEN bytes (checked before mapping), page
        // aligned, and accessed only atomically.
        let header: Header = unsafe { plain::load(self.base.cast::<Header>()) };
        if header.magic != MAGIC {
            return Err(RegionError::BadHeader("not a futexkit shared region"));
        }
        if header.version != VERSION {
            return Err(RegionError::BadHeader("unsupported version"));
        }
        if header.region_len != self.len as u64 {
            return Err(RegionError::BadHeader("length differs from the file's"));
        }
        let ours = sys::process::pid_namespace();
        if header.pid_namespace != 0 && ours != 0 && header.pid_namespace != ours {
            return Err(RegionError::OtherPidNamespace);
        }
        let count = header.object_count as usize;
        if count > MAX_OBJECTS {
            return Err(RegionError::BadHeader("too many objects"));
        }
        let table_end = HEADER_LEN + count * ENTRY_LEN;
        if table_end > self.len {
            return Err(RegionError::BadHeader(
                "object table beyond the end of the file",
            ));
        }
        let entries: Vec<Entry> = (0..count)
            .map(|i| {
                // SAFETY: entry `i` lies within the table, which lies within the mapping
                // (checked above); 8-aligned as the table starts at 64.
                unsafe { plain::load(self.base.add(HEADER_LEN + i * ENTRY_LEN).cast::<Entry>()) }
            })
            .collect();
        check_entries(&entries, table_end, self.len)?;
        Ok(entries)
    }
}

/// An entry's name, if it is 1 to 32 bytes of UTF-8 (NUL-padded).
fn entry_name(entry: &Entry) -> Option<&str> {
    let len = entry
        .name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(MAX_NAME_LEN);
    let name = core::str::from_utf8(&entry.name[..len]).ok()?;
    (!name.is_empty()).then_some(name)
}

/// Checks every entry: its name, kind, value layout, bounds and size, and that no two overlap.
fn check_entries(
    entries: &[Entry],
    table_end: usize,
    region_len: usize,
) -> Result<(), RegionError> {
    let mut spans = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let name = entry_name(entry).ok_or(RegionError::BadHeader(
            "an object name is not 1 to 32 bytes of UTF-8",
        ))?;
        if entries[..i]
            .iter()
            .any(|other| entry_name(other) == Some(name))
        {
            return Err(RegionError::BadHeader("two objects have one name"));
        }
        let kind = ObjectKind::from_code(entry.kind)
            .ok_or(RegionError::BadHeader("an object of no known kind"))?;
        let (value_size, value_align) = match kind {
            ObjectKind::Mutex | ObjectKind::RwLock => {
                let align = entry.value_align as usize;
                if !align.is_power_of_two() || align > OBJECT_ALIGN {
                    return Err(RegionError::BadHeader(
                        "a value alignment that is no power of two up to 64",
                    ));
                }
                (entry.value_size as usize, align)
            }
            _ => (0, 1),
        };
        if kind == ObjectKind::Semaphore
            && !(1..=SEMAPHORE_MAX_PERMITS).contains(&(entry.param as usize))
        {
            return Err(RegionError::BadHeader(
                "a semaphore with an impossible permit count",
            ));
        }
        if kind == ObjectKind::Barrier
            && !(1..=BARRIER_MAX_PARTIES).contains(&(entry.param as usize))
        {
            return Err(RegionError::BadHeader(
                "a barrier with an impossible party count",
            ));
        }
        let len = object_len(kind, value_size, value_align)
            .ok_or(RegionError::BadHeader("an object of impossible size"))?;
        let offset = usize::try_from(entry.offset)
            .map_err(|_| RegionError::BadHeader("an object beyond the end of the file"))?;
        if entry.len != len as u64 {
            return Err(RegionError::BadHeader(
                "an object's length does not fit its kind",
            ));
        }
        if offset % OBJECT_ALIGN != 0 || offset < table_end {
            return Err(RegionError::BadHeader(
                "an object misplaced (unaligned, or over the header)",
            ));
        }
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= region_len)
            .ok_or(RegionError::BadHeader(
                "an object beyond the end of the file",
            ))?;
        spans.push((offset, end));
    }
    spans.sort_unstable();
    if spans.windows(2).any(|pair| pair[0].1 > pair[1].0) {
        return Err(RegionError::BadHeader("two objects overlap"));
    }
    Ok(())
}

/// One object of a [`RegionBuilder`], not yet placed.
struct Planned {
    entry: Entry,
    init: Box<dyn FnOnce(*mut u8)>,
}

/// Names the objects of a new [`Region`]; [`build`](RegionBuilder::build) makes it.
pub struct RegionBuilder {
    objects: Vec<Result<Planned, RegionError>>,
}

impl fmt::Debug for RegionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionBuilder")
            .field("objects", &self.objects.len())
            .finish_non_exhaustive()
    }
}

impl RegionBuilder {
    /// Adds a [`SharedMutex`] named `name` holding `value`.
    pub fn mutex<T: Plain>(self, name: &str, value: T) -> RegionBuilder {
        self.plan::<T>(name, ObjectKind::Mutex, 0, move |at| {
            // SAFETY: `at` is this object's place in a fresh mapping nobody else has yet,
            // aligned and sized for it (`build`); the lock is made in its place, which it never
            // leaves, and the mapping stays while a thread of this process holds a lock of it
            // (`Region`'s `Drop`).
            unsafe { at.cast::<SharedMutex<T>>().write(SharedMutex::new(value)) }
        })
    }

    /// Adds a [`SharedCondvar`] named `name`.
    pub fn condvar(self, name: &str) -> RegionBuilder {
        self.plan::<()>(name, ObjectKind::Condvar, 0, |at| {
            // SAFETY: as in `mutex`.
            unsafe { at.cast::<SharedCondvar>().write(SharedCondvar::new()) }
        })
    }

    /// Adds a [`SharedRwLock`] named `name` holding `value`.
    pub fn rwlock<T: Plain>(self, name: &str, value: T) -> RegionBuilder {
        self.plan::<T>(name, ObjectKind::RwLock, 0, move |at| {
            // SAFETY: as in `mutex`, the lock made in its place.
            unsafe { at.cast::<SharedRwLock<T>>().write(SharedRwLock::new(value)) }
        })
    }

    /// Adds a [`SharedBarrier`] named `name` for `parties` parties (1 to
    /// [`BARRIER_MAX_PARTIES`](crate::raw::BARRIER_MAX_PARTIES); checked by `build`).
    pub fn barrier(mut self, name: &str, parties: usize) -> RegionBuilder {
        if !(1..=BARRIER_MAX_PARTIES).contains(&parties) {
            self.objects.push(Err(RegionError::BadParties(parties)));
            return self;
        }
        self.plan::<()>(name, ObjectKind::Barrier, parties as u32, move |at| {
            // SAFETY: as in `mutex`.
            unsafe {
                at.cast::<SharedBarrier>()
                    .write(SharedBarrier::new(parties))
            }
        })
    }

    /// Adds a [`SharedSemaphore`] named `name` with `permits` permits (1 to
    /// [`SEMAPHORE_MAX_PERMITS`](crate::raw::SEMAPHORE_MAX_PERMITS); checked by `build`).
    pub fn semaphore(mut self, name: &str, permits: usize) -> RegionBuilder {
        if !(1..=SEMAPHORE_MAX_PERMITS).contains(&permits) {
            self.objects.push(Err(RegionError::BadCount {
                kind: ObjectKind::Semaphore,
                count: permits,
            }));
            return self;
        }
        self.plan::<()>(name, ObjectKind::Semaphore, permits as u32, move |at| {
            // SAFETY: as in `mutex`.
            unsafe {
                at.cast::<SharedSemaphore>()
                    .write(SharedSemaphore::new(permits))
            }
        })
    }

    /// Adds a [`SharedLatch`] named `name` that opens after `count` count-downs (at most
    /// [`MAX_LATCH_COUNT`](crate::raw::MAX_LATCH_COUNT); checked by `build`).
    pub fn latch(mut self, name: &str, count: u32) -> RegionBuilder {
        if count > MAX_LATCH_COUNT {
            self.objects.push(Err(RegionError::BadCount {
                kind: ObjectKind::Latch,
                count: count as usize,
            }));
            return self;
        }
        self.plan::<()>(name, ObjectKind::Latch, 0, move |at| {
            // SAFETY: as in `mutex`.
            unsafe { at.cast::<SharedLatch>().write(SharedLatch::new(count)) }
        })
    }

    /// Adds a [`SharedEvent`] named `name`, set or not as `set` says.
    pub fn event(self, name: &str, set: bool) -> RegionBuilder {
        self.plan::<()>(name, ObjectKind::Event, 0, move |at| {
            // SAFETY: as in `mutex`.
            unsafe { at.cast::<SharedEvent>().write(SharedEvent::new(set)) }
        })
    }

    fn plan<T>(
        mut self,
        name: &str,
        kind: ObjectKind,
        param: u32,
        init: impl FnOnce(*mut u8) + 'static,
    ) -> RegionBuilder {
        let planned = (|| {
            if name.is_empty() || name.len() > MAX_NAME_LEN || name.contains('\0') {
                return Err(RegionError::BadName(name.to_owned()));
            }
            let (value_size, value_align) = match kind {
                ObjectKind::Mutex | ObjectKind::RwLock => {
                    (core::mem::size_of::<T>(), core::mem::align_of::<T>())
                }
                _ => (0, 1),
            };
            if value_align > OBJECT_ALIGN {
                return Err(RegionError::OverAligned(value_align));
            }
            let len = object_len(kind, value_size, value_align).ok_or(RegionError::TooLarge)?;
            let mut entry = Entry {
                name: [0; MAX_NAME_LEN],
                kind: kind.code(),
                value_size: u32::try_from(value_size).map_err(|_| RegionError::TooLarge)?,
                value_align: if matches!(kind, ObjectKind::Mutex | ObjectKind::RwLock) {
                    value_align as u32
                } else {
                    0
                },
                param,
                offset: 0,
                len: len as u64,
            };
            entry.name[..name.len()].copy_from_slice(name.as_bytes());
            Ok(Planned {
                entry,
                init: Box::new(init),
            })
        })();
        self.objects.push(planned);
        self
    }

    /// Makes the region: a memfd sized for the header and every object, sealed against
    /// resizing, mapped, with each object initialized in place.
    ///
    /// # Errors
    ///
    /// [`RegionError::BadName`], [`RegionError::BadParties`], [`RegionError::BadCount`],
    /// [`RegionError::OverAligned`],
    /// [`RegionError::TooLarge`], [`RegionError::Io`].
    pub fn build(self) -> Result<Region, RegionError> {
        let mut planned = self.objects.into_iter().collect::<Result<Vec<_>, _>>()?;
        if planned.len() > MAX_OBJECTS {
            return Err(RegionError::TooLarge);
        }
        for (i, object) in planned.iter().enumerate() {
            if planned[..i]
                .iter()
                .any(|other| other.entry.name == object.entry.name)
            {
                let name = entry_name(&object.entry).unwrap_or("").to_owned();
                return Err(RegionError::BadName(name));
            }
        }
        let mut end = (HEADER_LEN + planned.len() * ENTRY_LEN).next_multiple_of(OBJECT_ALIGN);
        for object in &mut planned {
            object.entry.offset = end as u64;
            end = (end + object.entry.len as usize).next_multiple_of(OBJECT_ALIGN);
            if end > MAX_REGION_LEN {
                return Err(RegionError::TooLarge);
            }
        }
        let len = end;
        let fd = sys::memory::memfd_sized("futexkit-shared", len as u64)?;
        sys::memory::seal_size(fd.as_fd())?;
        let base = sys::memory::map_shared(fd.as_fd(), len)?;
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            object_count: planned.len() as u32,
            region_len: len as u64,
            pid_namespace: sys::process::pid_namespace(),
            reserved: [0; 9],
        };
        // SAFETY: a fresh, page-aligned mapping of `len` bytes that no other process can have
        // yet (the fd has not been shared): the header, the table and every object (each at a
        // 64-aligned offset, in bounds by the arithmetic above) are written before anyone reads.
        unsafe {
            base.cast::<Header>().write(header);
            for (i, object) in planned.into_iter().enumerate() {
                base.add(HEADER_LEN + i * ENTRY_LEN)
                    .cast::<Entry>()
                    .write(object.entry);
                (object.init)(base.add(object.entry.offset as usize));
            }
        }
        let mut region = Region {
            base,
            len,
            fd,
            entries: Vec::new(),
        };
        region.entries = region.read_table()?;
        Ok(region)
    }
}
