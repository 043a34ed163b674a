//! The futex backend on Linux: every futex system call, and the atomics and thread operations
//! the primitives use (core's and std's). Its twin under a model checker is `model.rs`, with
//! the same items and signatures (see the seam in `mod.rs`).
//!
//! Everything here is a thin, typed doorway to one syscall. Policy (retrying `EINTR`, mapping
//! errno values to [`Error`](crate::futex::Error), choosing flags) lives in the callers in
//! `src/futex/`. Functions whose syscall may read or write user memory are `unsafe` and state
//! what the pointer must be; the wake family only hashes its address, so it is safe to call with
//! any pointer (see `docs/kernel.md`, "Wake after unlock").
//!
//! `libc::syscall` is used for every futex operation, not rustix's safe wrappers, because those
//! take `&AtomicU32` (a reference that may dangle once a lock is released, rust-lang/rust#55005)
//! and have no op 13 probing or futex2 `wait`/`requeue`.

use core::ptr;

pub(crate) use core::sync::atomic::{fence, AtomicU32, Ordering};
pub(crate) use std::thread::yield_now;
pub(crate) use std::thread_local;

use super::{check, Errno, FutexWaitv, RobustListHead};

/// False: spins run their full budgets (`model.rs` shrinks them to one look).
pub(crate) const MODEL_CHECKED: bool = false;

/// The next number of a process-wide count, one per call (wrapping): the order in which
/// calls were made. The Mutex's fairness rule numbers its waiters with it (`src/fairness.rs`).
pub(crate) fn next_ticket() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// How many `fork`s made through the C library this process's image has been through (0 in
/// the first process; a child counts one more than its parent did at the fork), or `None`
/// where the count cannot be kept (`pthread_atfork` failed, or another thread is registering
/// its handler). A `pthread_atfork` child handler, registered at the first call, keeps it.
/// Registration is a flag, not a `Once`: a fork by another thread in the middle of it leaves a
/// child whose flag says "registering" for good, and that child answers `None` instead of
/// waiting for a registration that will never finish. A child made without the C library's
/// fork (a raw `clone`) runs no handlers and would keep its parent's count: as for the robust
/// list, the crate relies on threads and processes being made through the C library.
pub(crate) fn forks() -> Option<u32> {
    const UNREGISTERED: u32 = 0;
    const REGISTERING: u32 = 1;
    const REGISTERED: u32 = 2;
    static FORKS: AtomicU32 = AtomicU32::new(0);
    static HANDLER: AtomicU32 = AtomicU32::new(UNREGISTERED);
    unsafe extern "C" fn count_fork_in_child() {
        FORKS.fetch_add(1, Ordering::Relaxed);
    }
    if HANDLER.load(Ordering::Acquire) != REGISTERED {
        if HANDLER
            .compare_exchange(
                UNREGISTERED,
                REGISTERING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
            && super::process::on_fork_in_child(count_fork_in_child).is_ok()
        {
            HANDLER.store(REGISTERED, Ordering::Release);
        }
        // Counted only from the registration on (pthread_atfork fails only without memory,
        // and then never).
        return None;
    }
    Some(FORKS.load(Ordering::Relaxed))
}

/// This thread's kernel thread id (see [`crate::futex::current_tid`]), from a per-thread
/// cache. A `fork` child's one thread has a new id but inherits its parent thread's cache, so
/// the cache holds the fork count ([`forks`]) it was filled under; where no count is kept,
/// the kernel is asked every time.
pub(crate) fn current_tid() -> u32 {
    thread_local! {
        // (the fork count when filled, the id); id 0 is never a thread's, so it means empty.
        static CACHE: core::cell::Cell<(u32, u32)> = const { core::cell::Cell::new((0, 0)) };
    }
    let Some(forks) = forks() else {
        return super::thread::gettid();
    };
    // Only this thread forks this thread's image, so no fork falls between these loads and the
    // store below.
    let cached = CACHE.try_with(core::cell::Cell::get).unwrap_or((0, 0));
    if cached.1 != 0 && cached.0 == forks {
        return cached.1;
    }
    let tid = super::thread::gettid();
    let _ = CACHE.try_with(|cache| cache.set((forks, tid)));
    tid
}

// futex2 syscall numbers are the same in every architecture's table since the tables were
// unified (docs/kernel.md); libc does not name all of them on every target.
const SYS_FUTEX_WAITV: libc::c_long = 449;
const SYS_FUTEX_WAKE: libc::c_long = 454;
const SYS_FUTEX_WAIT: libc::c_long = 455;
const SYS_FUTEX_REQUEUE: libc::c_long = 456;

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

/// `get_robust_list(0, ..)`: the robust list head the calling thread registered (glibc registers
/// one for every thread it starts), or null if none.
pub(crate) fn robust_list_head() -> Result<*mut RobustListHead, Errno> {
    let mut head: *mut RobustListHead = ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: with pid 0 the kernel writes the calling thread's head pointer and its size into
    // the two locals, and reads nothing.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_get_robust_list,
            0 as libc::c_long,
            &mut head as *mut *mut RobustListHead,
            &mut len as *mut libc::size_t,
        )
    };
    check(ret)?;
    Ok(head)
}

/// `set_robust_list(head, size)`: makes `head` the calling thread's robust list head (null: none).
///
/// # Safety
///
/// `head` must be null, or point to a [`RobustListHead`] whose list the kernel may walk when
/// this thread dies: it stays valid until another head is registered or the thread has exited.
pub(crate) unsafe fn set_robust_list(head: *mut RobustListHead) -> Result<(), Errno> {
    // SAFETY: the kernel only stores the pointer now; the caller vouches for what it points to
    // for as long as the kernel may read it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_set_robust_list,
            head,
            core::mem::size_of::<RobustListHead>(),
        )
    };
    check(ret).map(drop)
}
