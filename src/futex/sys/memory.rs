//! System calls about memory shared between processes: memfds, their seals and file system,
//! descriptors to hand them to a child, and shared mappings (FlipCall's packet windows).

use core::ptr;

/// A new memfd of `len` bytes that accepts seals, closed on exec (a child that should inherit it
/// gets a [`dup_inheritable`] copy).
pub(crate) fn memfd_sized(name: &str, len: u64) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::MemfdFlags;
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::ftruncate(&fd, len)?;
    Ok(fd)
}

/// Seals `fd` against shrinking and growing, and against further sealing.
pub(crate) fn seal_size(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use rustix::fs::SealFlags;
    rustix::fs::fcntl_add_seals(fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok(())
}

/// Whether `fd` is sealed against shrinking (`Ok(false)` also for files that take no seals).
pub(crate) fn is_sealed_against_shrinking(
    fd: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<bool> {
    match rustix::fs::fcntl_get_seals(fd) {
        Ok(seals) => Ok(seals.contains(rustix::fs::SealFlags::SHRINK)),
        Err(rustix::io::Errno::INVAL) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// `TMPFS_MAGIC` from the uapi's `linux/magic.h`: the filesystem of plain memfds (shmem).
const TMPFS_MAGIC: u64 = 0x0102_1994;

/// Whether `fd` is a file on tmpfs/shmem (a plain memfd), rather than hugetlbfs or anything else.
pub(crate) fn is_shmem(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<bool> {
    let fs = rustix::fs::fstatfs(fd)?;
    Ok(u64::try_from(fs.f_type).ok() == Some(TMPFS_MAGIC))
}

/// The size of the file behind `fd`.
pub(crate) fn file_size(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<u64> {
    Ok(rustix::fs::fstat(fd)?.st_size as u64)
}

/// A copy of `fd` without close-on-exec, for a child process to inherit.
pub(crate) fn dup_inheritable(
    fd: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<std::os::fd::OwnedFd> {
    // dup(2) clears FD_CLOEXEC on the new descriptor.
    Ok(rustix::io::dup(fd)?)
}

/// Maps the first `len` bytes of `fd` shared, readable and writable (`ENOSYS` under a model
/// checker).
pub(crate) fn map_shared(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> std::io::Result<*mut u8> {
    if super::MODEL_CHECKED {
        // A model checker's atomics are objects of their own, not words that could overlay a
        // mapping: under one, shared-memory windows are refused and only in-process ones exist.
        return Err(std::io::Error::from_raw_os_error(libc::ENOSYS));
    }
    use rustix::mm::{MapFlags, ProtFlags};
    // SAFETY: a fresh mapping chosen by the kernel (null hint, no MAP_FIXED) cannot alias any
    // memory Rust already uses; the caller owns it until `unmap`.
    let ptr = unsafe {
        rustix::mm::mmap(
            ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )?
    };
    Ok(ptr.cast())
}

/// Unmaps a mapping made by [`map_shared`].
///
/// # Safety
///
/// `ptr` and `len` must be exactly a live mapping from [`map_shared`], and nothing may use it
/// afterwards.
pub(crate) unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: the caller passes a whole mapping of ours that nothing uses any more.
    let _ = unsafe { rustix::mm::munmap(ptr.cast(), len) };
}
