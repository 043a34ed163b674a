//! Raw system calls: the one file in futexkit that enters the kernel.
//!
//! Everything here is a thin, typed doorway to one syscall. Policy (retrying `EINTR`, mapping
//! errno values to [`Error`](super::Error), choosing flags) lives in the callers in
//! `src/futex/`. Functions whose syscall may read or write user memory are `unsafe` and state
//! what the pointer must be; the wake family only hashes its address, so it is safe to call with
//! any pointer (see `docs/kernel.md`, "Wake after unlock").
//!
//! `libc::syscall` is used for every futex operation, not rustix's safe wrappers, because those
//! take `&AtomicU32` (a reference that may dangle once a lock is released, rust-lang/rust#55005)
//! and have no op 13 probing or futex2 `wait`/`requeue`.

use core::ptr;

/// An errno value as the kernel returned it.
pub(crate) type Errno = i32;

/// `struct futex_waitv` from the uapi headers (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FutexWaitv {
    pub val: u64,
    pub uaddr: u64,
    pub flags: u32,
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<FutexWaitv>() == 24);

// futex2 syscall numbers are the same in every architecture's table since the tables were
// unified (docs/kernel.md); libc does not name all of them on every target.
pub(crate) const SYS_FUTEX_WAITV: libc::c_long = 449;
pub(crate) const SYS_FUTEX_WAKE: libc::c_long = 454;
pub(crate) const SYS_FUTEX_WAIT: libc::c_long = 455;
pub(crate) const SYS_FUTEX_REQUEUE: libc::c_long = 456;

// prctl(PR_RSEQ_SLICE_EXTENSION, PR_RSEQ_SLICE_EXTENSION_GET): merged in Linux 7.0.
const PR_RSEQ_SLICE_EXTENSION: libc::c_int = 79;
const PR_RSEQ_SLICE_EXTENSION_GET: libc::c_ulong = 1;

fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

fn check(ret: libc::c_long) -> Result<usize, Errno> {
    if ret < 0 {
        Err(last_errno())
    } else {
        Ok(ret as usize)
    }
}

/// The legacy multiplexed `futex(2)` call.
///
/// `arg4` is the op's fourth argument: a `*const timespec` for waits and locks, or `val2` (a
/// count) for requeue and wake_op.
///
/// # Safety
///
/// For every op that reads or writes the futex words (waits, requeues with a compare value,
/// wake_op, the PI family), `uaddr` and `uaddr2` (where the op uses it) must point to live,
/// 4-byte-aligned `AtomicU32`s for the duration of the call, and `arg4`, where it is a pointer,
/// must be null or point to a valid `timespec`.
pub(crate) unsafe fn futex(
    uaddr: *const u32,
    op: i32,
    val: u32,
    arg4: usize,
    uaddr2: *const u32,
    val3: u32,
) -> Result<usize, Errno> {
    // SAFETY: the caller guarantees the pointers are valid for what `op` does with them; the
    // kernel validates everything else and reports problems as errno values.
    let ret = unsafe { libc::syscall(libc::SYS_futex, uaddr, op, val, arg4, uaddr2, val3) };
    check(ret)
}

/// `FUTEX_WAKE` / `FUTEX_WAKE_BITSET` with the given op (flags included).
///
/// Safe for any address: the kernel hashes the address (private futexes) or looks up the page
/// it lies in (shared futexes) and never reads or writes the word. A stale address can at worst
/// wake an unrelated waiter spuriously, which every futex waiter must tolerate.
pub(crate) fn futex_wake(uaddr: *const u32, op: i32, n: u32, bitset: u32) -> Result<usize, Errno> {
    // SAFETY: wake ops never dereference `uaddr` (see above); the timeout and `uaddr2` slots are
    // unused by FUTEX_WAKE and FUTEX_WAKE_BITSET.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_futex,
            uaddr,
            op,
            n,
            ptr::null::<libc::timespec>(),
            ptr::null::<u32>(),
            bitset,
        )
    };
    check(ret)
}

/// futex2 `futex_wait(uaddr, val, mask, flags, timeout, clockid)` (Linux 6.7+).
///
/// # Safety
///
/// `uaddr` must point to a live, naturally aligned word of the size named in `flags` (and, with
/// `FUTEX2_NUMA`, the node word after it) for the duration of the call; `timeout` must be null
/// or valid.
pub(crate) unsafe fn futex2_wait(
    uaddr: *const u8,
    val: u64,
    mask: u64,
    flags: u32,
    timeout: *const libc::timespec,
    clockid: libc::clockid_t,
) -> Result<usize, Errno> {
    // SAFETY: forwarded from the caller's guarantee; the kernel validates flags and sizes.
    let ret = unsafe { libc::syscall(SYS_FUTEX_WAIT, uaddr, val, mask, flags, timeout, clockid) };
    check(ret)
}

/// futex2 `futex_wake(uaddr, mask, nr, flags)` (Linux 6.7+).
///
/// Safe for any address for the same reason as [`futex_wake`], with one exception handled by
/// the caller: with `FUTEX2_NUMA` the kernel reads the node word, so NUMA wakes go through
/// [`futex2_wake_numa`].
pub(crate) fn futex2_wake(uaddr: *const u8, mask: u64, n: i32, flags: u32) -> Result<usize, Errno> {
    debug_assert!(
        flags & 0x04 == 0,
        "NUMA wakes read memory: use futex2_wake_numa"
    );
    // SAFETY: without FUTEX2_NUMA the kernel only hashes the address.
    let ret = unsafe { libc::syscall(SYS_FUTEX_WAKE, uaddr, mask, n, flags) };
    check(ret)
}

/// futex2 `futex_wake` with `FUTEX2_NUMA`, which reads the node word.
///
/// # Safety
///
/// `uaddr` must point to a live, 8-byte-aligned `{ value, node }` pair of `u32`s.
pub(crate) unsafe fn futex2_wake_numa(
    uaddr: *const u8,
    mask: u64,
    n: i32,
    flags: u32,
) -> Result<usize, Errno> {
    // SAFETY: forwarded from the caller's guarantee.
    let ret = unsafe { libc::syscall(SYS_FUTEX_WAKE, uaddr, mask, n, flags) };
    check(ret)
}

/// futex2 `futex_requeue(waiters[2], flags, nr_wake, nr_requeue)` (Linux 6.7+).
///
/// # Safety
///
/// Both entries' `uaddr` must point to live, aligned words of the size their flags name.
pub(crate) unsafe fn futex2_requeue(
    waiters: &[FutexWaitv; 2],
    nr_wake: i32,
    nr_requeue: i32,
) -> Result<usize, Errno> {
    // SAFETY: `waiters` is a valid array of two entries; the words they name are the caller's
    // responsibility. The syscall's `flags` argument must be 0.
    let ret = unsafe {
        libc::syscall(
            SYS_FUTEX_REQUEUE,
            waiters.as_ptr(),
            0u32,
            nr_wake,
            nr_requeue,
        )
    };
    check(ret)
}

/// `futex_waitv(waiters, nr, flags, timeout, clockid)` (Linux 5.16+).
///
/// # Safety
///
/// Every entry's `uaddr` must point to a live, aligned `u32` for the duration of the call, and
/// `timeout` must be null or valid.
pub(crate) unsafe fn futex_waitv(
    waiters: &[FutexWaitv],
    timeout: *const libc::timespec,
    clockid: libc::clockid_t,
) -> Result<usize, Errno> {
    // SAFETY: the slice is valid for `len` entries; the words are the caller's responsibility.
    let ret = unsafe {
        libc::syscall(
            SYS_FUTEX_WAITV,
            waiters.as_ptr(),
            waiters.len() as libc::c_uint,
            0u32,
            timeout,
            clockid,
        )
    };
    check(ret)
}

/// The calling thread's kernel thread id.
pub(crate) fn gettid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// Reads `clock` (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`).
pub(crate) fn clock_now(clock: libc::clockid_t) -> libc::timespec {
    let id = if clock == libc::CLOCK_REALTIME {
        rustix::time::ClockId::Realtime
    } else {
        rustix::time::ClockId::Monotonic
    };
    let ts = rustix::time::clock_gettime(id);
    libc::timespec {
        tv_sec: ts.tv_sec as libc::time_t,
        tv_nsec: ts.tv_nsec as _,
    }
}

/// How many CPUs this process may run on (its affinity mask), at least 1.
pub(crate) fn usable_cpus() -> usize {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => set.count().max(1) as usize,
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// How many times the calling thread has been switched out involuntarily (preempted) since it
/// started: `getrusage(RUSAGE_THREAD)`'s `ru_nivcsw`; 0 if the call fails.
pub(crate) fn involuntary_switches() -> u64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `usage`, which we own; RUSAGE_THREAD is a valid
    // `who` on Linux since 2.6.26.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_nivcsw as u64
}

/// The running kernel's release string (`uname -r`).
pub(crate) fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// `prctl(PR_RSEQ_SLICE_EXTENSION, PR_RSEQ_SLICE_EXTENSION_GET)`: non-negative where the rseq
/// time-slice extension exists (Linux 7.0+).
pub(crate) fn rseq_slice_extension_get() -> Result<usize, Errno> {
    // SAFETY: this prctl takes no pointers; unknown options return EINVAL.
    let ret = unsafe {
        libc::prctl(
            PR_RSEQ_SLICE_EXTENSION,
            PR_RSEQ_SLICE_EXTENSION_GET,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    check(ret as libc::c_long)
}

// ---------------------------------------------------------------------------------------------
// Shared memory and peer processes, for FlipCall's packet windows.

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

/// Maps the first `len` bytes of `fd` shared, readable and writable.
pub(crate) fn map_shared(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> std::io::Result<*mut u8> {
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

/// This process's id.
pub(crate) fn getpid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// What [`pid_namespace`] answers on a kernel built without pid namespaces
/// (`CONFIG_PID_NS=n`): every process is in the one namespace there. Namespace inodes are
/// allocated far above it, so it names no real namespace.
const THE_ONLY_PID_NAMESPACE: u32 = 1;

/// This process's pid namespace, as its inode folded to 32 bits (0 if unknown): two processes
/// can name each other by pid only if these match. Where `/proc` is mounted but has no
/// `ns/pid`, the kernel has no pid namespaces and every process shares the one there is.
pub(crate) fn pid_namespace() -> u32 {
    match rustix::fs::stat("/proc/self/ns/pid") {
        Ok(st) => {
            let ino = st.st_ino;
            (ino ^ (ino >> 32)) as u32
        }
        Err(rustix::io::Errno::NOENT) if rustix::fs::stat("/proc/self/stat").is_ok() => {
            THE_ONLY_PID_NAMESPACE
        }
        Err(_) => 0,
    }
}

/// A handle on process `pid` that tells whether it has exited: a pidfd (Linux 5.3+), or the pid
/// itself on older kernels.
#[derive(Debug)]
pub(crate) enum ProcessWatch {
    /// Readable once the process has exited, even while it is an unreaped zombie.
    Pidfd(std::os::fd::OwnedFd),
    /// `kill(pid, 0)`: cannot tell a zombie from a live process, and may be fooled by pid reuse.
    Pid(rustix::process::Pid),
}

/// Watches process `pid`; `Ok(None)` if it no longer exists.
pub(crate) fn watch_process(pid: u32) -> std::io::Result<Option<ProcessWatch>> {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Ok(None);
    };
    match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => Ok(Some(ProcessWatch::Pidfd(fd))),
        Err(rustix::io::Errno::SRCH) => Ok(None),
        Err(rustix::io::Errno::NOSYS) => Ok(process_exists(pid).then_some(ProcessWatch::Pid(pid))),
        Err(err) => Err(err.into()),
    }
}

fn process_exists(pid: rustix::process::Pid) -> bool {
    // EPERM means it exists but belongs to someone else.
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// Whether the watched process has exited. Never blocks.
pub(crate) fn has_exited(watch: &ProcessWatch) -> bool {
    match watch {
        ProcessWatch::Pidfd(fd) => {
            use rustix::event::{PollFd, PollFlags};
            let mut fds = [PollFd::new(fd, PollFlags::IN)];
            let zero = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        }
        ProcessWatch::Pid(pid) => !process_exists(*pid),
    }
}
