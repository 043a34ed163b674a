//! The futex2 syscalls: `futex_wait`, `futex_wake`, `futex_requeue` (Linux 6.7+) and
//! `futex_waitv` (5.16+).
//!
//! futex2 names the word's size in its flags ([`Word`] is implemented for the four atomic
//! integer sizes; kernels so far implement only 32-bit words and answer
//! [`Error::Unsupported`] for the others), takes 64-bit values and masks, and can wait on up to
//! [`WAITV_MAX`] words at once. [`NumaFutex`] is the 8-byte `{ value, node }` pair that
//! `FUTEX2_NUMA` (6.16+) keys by NUMA node.
//!
//! ```
//! use futexkit::futex::{futex2, Error, Futex};
//!
//! if futexkit::capabilities().has(futexkit::futex::Capability::Waitv) {
//!     let a = Futex::new(1);
//!     let b = Futex::new(2);
//!     let waits = [futex2::WaitvEntry::new(&a, 1), futex2::WaitvEntry::new(&b, 0)];
//!     // b does not hold 0: the whole wait returns at once.
//!     assert_eq!(futex2::waitv(&waits, None), Err(Error::ValueChanged));
//! }
//! ```

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};

use super::{sys, Deadline, Error, Futex, Scope, ScopeKind};

/// `FUTEX2_SIZE_U32`.
pub const FUTEX2_SIZE_U32: u32 = 2;
/// `FUTEX2_NUMA`: the word is followed by a NUMA node id (6.16+).
pub const FUTEX2_NUMA: u32 = 0x04;
/// `FUTEX2_MPOL` on mainline 6.16+ (the never-merged FUTEX2_SPIN used the same bit).
pub const FUTEX2_MPOL: u32 = 0x08;
/// `FUTEX2_PRIVATE`.
pub const FUTEX2_PRIVATE: u32 = 128;
/// `FUTEX_WAITV_MAX`: the most words one [`waitv`] accepts.
pub const WAITV_MAX: usize = 128;
/// The mask that matches every waiter (futex2 masks must fit the word size).
pub const MASK_ANY_U32: u64 = 0xffff_ffff;

mod sealed {
    pub trait Sealed {}
}

/// An atomic integer futex2 can wait on; its size goes into the flags.
pub trait Word: sealed::Sealed {
    /// `FUTEX2_SIZE_*` for this type.
    const SIZE_FLAG: u32;
    /// The largest value (and mask) this size can hold.
    const MAX: u64;
}

macro_rules! impl_word {
    ($($ty:ty => $flag:expr, $max:expr;)*) => {$(
        impl sealed::Sealed for $ty {}
        impl Word for $ty {
            const SIZE_FLAG: u32 = $flag;
            const MAX: u64 = $max;
        }
    )*};
}

impl_word! {
    AtomicU8 => 0, u8::MAX as u64;
    AtomicU16 => 1, u16::MAX as u64;
    AtomicU32 => FUTEX2_SIZE_U32, u32::MAX as u64;
    AtomicU64 => 3, u64::MAX;
}

/// futex2 `futex_wait`: sleeps while `word` holds `expected`, until a wake whose mask shares a
/// bit with `mask`, or until `deadline`.
///
/// ```
/// use std::sync::atomic::AtomicU8;
/// use futexkit::futex::{futex2, Error, ScopeKind};
///
/// // No kernel implements 8-bit futexes yet.
/// let byte = AtomicU8::new(0);
/// let r = futex2::wait(&byte, ScopeKind::Private, 1, 0xff, None);
/// assert!(matches!(r, Err(Error::Unsupported)));
/// ```
///
/// # Errors
///
/// [`Error::ValueChanged`]; [`Error::TimedOut`]; [`Error::Unsupported`] before 6.7 or for a
/// size this kernel lacks; [`Error::InvalidArgument`] if `expected` or `mask` does not fit the
/// size or `mask` is 0.
pub fn wait<W: Word>(
    word: &W,
    scope: ScopeKind,
    expected: u64,
    mask: u64,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    if expected > W::MAX || mask > W::MAX || mask == 0 {
        return Err(Error::InvalidArgument);
    }
    let flags = W::SIZE_FLAG | scope.futex2_flag();
    // SAFETY: `word` is a live, naturally aligned atomic of the size named in `flags`.
    unsafe {
        wait_raw(
            word as *const W as *const u8,
            expected,
            mask,
            flags,
            deadline,
        )
    }
    .map_err(|e| size_error::<W>(e))
}

/// futex2 `futex_wake`: wakes up to `n` waiters of the word at `addr` whose mask shares a bit
/// with `mask`. As with [`Futex::wake_at`], `addr` may be stale.
///
/// # Errors
///
/// [`Error::InvalidArgument`] for a null or unaligned address, or a zero or oversized mask;
/// [`Error::Unsupported`] before 6.7 or for a size this kernel lacks.
pub fn wake<W: Word>(addr: *const W, scope: ScopeKind, mask: u64, n: u32) -> Result<usize, Error> {
    if addr.is_null() || (addr as usize) % core::mem::align_of::<W>() != 0 {
        return Err(Error::InvalidArgument);
    }
    if mask > W::MAX || mask == 0 {
        return Err(Error::InvalidArgument);
    }
    let flags = W::SIZE_FLAG | scope.futex2_flag();
    sys::futex2_wake(addr.cast(), mask, n.min(i32::MAX as u32) as i32, flags)
        .map_err(|e| size_error::<W>(Error::from_errno(e)))
}

/// futex2 `futex_requeue`: if `from` holds `expected`, wakes up to `n_wake` of its waiters and
/// moves up to `n_requeue` others onto `to`. Returns how many were woken or moved.
///
/// # Errors
///
/// [`Error::ValueChanged`]; [`Error::Unsupported`] before 6.7; [`Error::InvalidArgument`] if
/// `from` and `to` are the same word.
pub fn requeue<S: Scope>(
    from: &Futex<S>,
    expected: u32,
    n_wake: u32,
    to: &Futex<S>,
    n_requeue: u32,
) -> Result<usize, Error> {
    if core::ptr::eq(from, to) {
        return Err(Error::InvalidArgument);
    }
    let flags = FUTEX2_SIZE_U32 | S::KIND.futex2_flag();
    let waiters = [
        sys::FutexWaitv {
            val: u64::from(expected),
            uaddr: from.as_ptr() as u64,
            flags,
            reserved: 0,
        },
        sys::FutexWaitv {
            val: 0,
            uaddr: to.as_ptr() as u64,
            flags,
            reserved: 0,
        },
    ];
    // SAFETY: both entries name live, aligned 32-bit words borrowed for the whole call.
    let result = unsafe {
        sys::futex2_requeue(
            &waiters,
            n_wake.min(i32::MAX as u32) as i32,
            n_requeue.min(i32::MAX as u32) as i32,
        )
    };
    result.map_err(Error::from_errno)
}

/// One word of a [`waitv`] call: wait while it holds `expected`.
#[derive(Debug, Clone, Copy)]
pub struct WaitvEntry<'a> {
    raw: sys::FutexWaitv,
    word: PhantomData<&'a AtomicU32>,
}

impl<'a> WaitvEntry<'a> {
    /// Wait while `futex` holds `expected`.
    pub fn new<S: Scope>(futex: &'a Futex<S>, expected: u32) -> WaitvEntry<'a> {
        WaitvEntry {
            raw: sys::FutexWaitv {
                val: u64::from(expected),
                uaddr: futex.as_ptr() as u64,
                flags: FUTEX2_SIZE_U32 | S::KIND.futex2_flag(),
                reserved: 0,
            },
            word: PhantomData,
        }
    }
}

/// `futex_waitv`: sleeps until any of `entries` is woken, one of them does not hold its
/// expected value, or `deadline`. Returns the index of the woken entry.
///
/// # Errors
///
/// [`Error::ValueChanged`] if some entry did not hold its value; [`Error::TimedOut`];
/// [`Error::TooManyWords`] above [`WAITV_MAX`]; [`Error::InvalidArgument`] for an empty list;
/// [`Error::Unsupported`] before 5.16.
pub fn waitv(entries: &[WaitvEntry<'_>], deadline: Option<Deadline>) -> Result<usize, Error> {
    if entries.len() > WAITV_MAX {
        return Err(Error::TooManyWords {
            given: entries.len(),
            max: WAITV_MAX,
        });
    }
    if entries.is_empty() {
        return Err(Error::InvalidArgument);
    }
    let mut raw = [sys::FutexWaitv {
        val: 0,
        uaddr: 0,
        flags: 0,
        reserved: 0,
    }; WAITV_MAX];
    for (slot, entry) in raw.iter_mut().zip(entries) {
        *slot = entry.raw;
    }
    let raw = &raw[..entries.len()];
    let ts = deadline.map(|d| d.timespec());
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
    let clockid = deadline.map_or(libc::CLOCK_MONOTONIC, |d| d.clock().id());
    loop {
        // SAFETY: every entry names a word borrowed for `'a`, which outlives this call; `ts_ptr`
        // is null or points to `ts`.
        match unsafe { sys::futex_waitv(raw, ts_ptr, clockid) } {
            Ok(index) => return Ok(index),
            Err(libc::EINTR) => continue,
            Err(errno) => return Err(Error::from_errno(errno)),
        }
    }
}

/// A futex word followed by its NUMA node id, for `FUTEX2_NUMA` (Linux 6.16+).
///
/// The node starts as [`NumaFutex::ANY_NODE`]; the kernel fills in the waiter's node and keys
/// the futex in that node's hash table, so waiters and wakers on one node stay local.
#[repr(C, align(8))]
#[derive(Debug)]
pub struct NumaFutex {
    value: AtomicU32,
    node: AtomicU32,
}

impl NumaFutex {
    /// The node id that lets the kernel choose (`FUTEX_NO_NODE`).
    pub const ANY_NODE: u32 = u32::MAX;

    /// A word holding `value`, on no particular node yet.
    pub const fn new(value: u32) -> NumaFutex {
        NumaFutex {
            value: AtomicU32::new(value),
            node: AtomicU32::new(Self::ANY_NODE),
        }
    }

    /// The value word.
    pub fn value(&self) -> &AtomicU32 {
        &self.value
    }

    /// The node id word (written by the kernel when it was [`ANY_NODE`](Self::ANY_NODE)).
    pub fn node(&self) -> &AtomicU32 {
        &self.node
    }

    /// futex2 `futex_wait` with `FUTEX2_NUMA` (and `FUTEX2_MPOL` if `mpol`).
    ///
    /// # Errors
    ///
    /// As [`wait`]; [`Error::Unsupported`] before 6.16 (or for `mpol` without the flag).
    pub fn wait(
        &self,
        scope: ScopeKind,
        expected: u32,
        mpol: bool,
        deadline: Option<Deadline>,
    ) -> Result<(), Error> {
        let flags = self.flags(scope, mpol);
        // SAFETY: `self` is a live, 8-byte-aligned `{ value, node }` pair.
        unsafe {
            wait_raw(
                self as *const NumaFutex as *const u8,
                u64::from(expected),
                MASK_ANY_U32,
                flags,
                deadline,
            )
        }
        .map_err(numa_error)
    }

    /// futex2 `futex_wake` with `FUTEX2_NUMA` (and `FUTEX2_MPOL` if `mpol`). Unlike other
    /// wakes this reads the node word, so it takes a reference.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] before 6.16.
    pub fn wake(&self, scope: ScopeKind, n: u32, mpol: bool) -> Result<usize, Error> {
        let flags = self.flags(scope, mpol);
        // SAFETY: `self` is a live, 8-byte-aligned `{ value, node }` pair.
        let result = unsafe {
            sys::futex2_wake_numa(
                self as *const NumaFutex as *const u8,
                MASK_ANY_U32,
                n.min(i32::MAX as u32) as i32,
                flags,
            )
        };
        result.map_err(|e| numa_error(Error::from_errno(e)))
    }

    fn flags(&self, scope: ScopeKind, mpol: bool) -> u32 {
        FUTEX2_SIZE_U32 | FUTEX2_NUMA | scope.futex2_flag() | if mpol { FUTEX2_MPOL } else { 0 }
    }
}

/// # Safety
///
/// `addr` must point to a live, aligned word of the size in `flags` (and its node word with
/// `FUTEX2_NUMA`) for the whole call.
unsafe fn wait_raw(
    addr: *const u8,
    expected: u64,
    mask: u64,
    flags: u32,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    let ts = deadline.map(|d| d.timespec());
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
    let clockid = deadline.map_or(libc::CLOCK_MONOTONIC, |d| d.clock().id());
    loop {
        // SAFETY: forwarded from the caller; `ts_ptr` is null or points to `ts`.
        match unsafe { sys::futex2_wait(addr, expected, mask, flags, ts_ptr, clockid) } {
            Ok(_) => return Ok(()),
            // The absolute deadline does not stretch on retry.
            Err(libc::EINTR) => continue,
            Err(errno) => return Err(Error::from_errno(errno)),
        }
    }
}

/// Kernels reject sizes they have not implemented with EINVAL: report that as unsupported.
fn size_error<W: Word>(err: Error) -> Error {
    match err {
        Error::InvalidArgument if W::SIZE_FLAG != FUTEX2_SIZE_U32 => Error::Unsupported,
        other => other,
    }
}

/// Kernels before 6.16 reject `FUTEX2_NUMA` (and `FUTEX2_MPOL`) with EINVAL.
fn numa_error(err: Error) -> Error {
    match err {
        Error::InvalidArgument => Error::Unsupported,
        other => other,
    }
}

/// `FUTEX2_SPIN` from the never-merged 2024 RFC: the word holds the owner's TID, and the kernel
/// spins while that owner runs before it sleeps. The bit is `FUTEX2_MPOL` on 6.16+, so a kernel
/// with both puts SPIN at [`FUTEX2_SPIN_BESIDE_MPOL`]; [`Capabilities::spin_flag`] says which
/// one the running kernel uses.
///
/// [`Capabilities::spin_flag`]: super::Capabilities::spin_flag
pub const FUTEX2_SPIN: u32 = 0x08;

/// Where `FUTEX2_SPIN` lives on a kernel that also has `FUTEX2_MPOL` (6.16+): the first bit
/// mainline leaves free. futexkit's test kernel (`scripts/kernel/`) puts it there.
pub const FUTEX2_SPIN_BESIDE_MPOL: u32 = 0x10;

/// futex2 `futex_wait` with `FUTEX2_SPIN` on a 32-bit word holding `owner_tid`: queued as any
/// waiter, the caller spins in the kernel while the owner runs, then sleeps. `Ok(())` on a wake,
/// whether it came during the spin or the sleep (possibly spuriously: re-check); a word that no
/// longer holds `owner_tid` when the call queues gives [`Error::ValueChanged`], as [`wait`]
/// does. Most callers want [`crate::spin::wait_on_owner`], which falls back to the user-space
/// policy where this is missing.
///
/// # Errors
///
/// [`Error::Unsupported`] unless [`Capability::Spin`](super::Capability::Spin) is in use
/// (probed, and opted in with `FUTEXKIT_ENABLE=spin`): elsewhere the flag means something else
/// or nothing. Otherwise as [`wait`]; the RFC's `EAGAIN` for an owner that does not exist is
/// reported as [`Error::ValueChanged`], and `EPERM` (a kernel-thread owner) as
/// [`Error::PermissionDenied`].
pub fn wait_spinning_on_owner<S: Scope>(
    word: &Futex<S>,
    owner_tid: u32,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    let caps = super::capabilities();
    let spin_flag = match caps.spin_flag() {
        Some(flag) if caps.has(super::Capability::Spin) => flag,
        _ => return Err(Error::Unsupported),
    };
    let flags = FUTEX2_SIZE_U32 | S::KIND.futex2_flag() | spin_flag;
    // SAFETY: `word` is a live, 4-byte-aligned AtomicU32, the size named in `flags`.
    unsafe {
        wait_raw(
            word.as_ptr().cast(),
            u64::from(owner_tid),
            MASK_ANY_U32,
            flags,
            deadline,
        )
    }
}
