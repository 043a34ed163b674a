//! The futex layer: a safe wrapper over every futex operation Linux offers.
//!
//! A [`Futex`] is a 32-bit atomic word (`#[repr(transparent)]` over [`AtomicU32`], so any
//! `AtomicU32` can be used in place with [`Futex::from_atomic`]) tagged with its [`Scope`]:
//! [`Private`] for words used by one process (the kernel keys them by address, the fast case)
//! or [`Shared`] for words in memory shared between processes (keyed by the backing page).
//! The scope is part of the type so a shared word can never be waited on with the private flag
//! by mistake.
//!
//! Operations:
//!
//! * [`wait`](Futex::wait) / [`wake`](Futex::wake), with bitsets
//!   ([`wait_bitset`](Futex::wait_bitset), [`wake_bitset`](Futex::wake_bitset)) and absolute
//!   [`Deadline`]s on `CLOCK_MONOTONIC` or `CLOCK_REALTIME`;
//! * [`requeue`](Futex::requeue), [`cmp_requeue`](Futex::cmp_requeue),
//!   [`wake_op`](Futex::wake_op);
//! * the priority-inheritance family ([`lock_pi`](Futex::lock_pi) and friends, in `pi.rs`);
//! * futex2 `futex_wait` / `futex_wake` / `futex_requeue` and `futex_waitv` ([`futex2`]);
//! * runtime probing of what this kernel offers ([`capabilities`]).
//!
//! Wakes that may run after the word's memory is freed (an unlock that lets another thread
//! drop the lock) use [`Futex::wake_at`], which takes a raw pointer: the kernel never reads a
//! word to wake it, so a stale address is harmless, but a dangling `&` reference would not be.
//!
//! All syscalls are made in `sys/`; under a model checker the same code runs on the emulated
//! futex of `sys/model.rs` (wait and wake with bitsets, requeue, wake-op; the rest answers as a
//! kernel without it would), the one seam described in `sys/mod.rs`.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! use futexkit::futex::Futex;
//!
//! static READY: Futex = Futex::new(0);
//!
//! let waiter = std::thread::spawn(|| {
//!     while READY.load(Ordering::Acquire) == 0 {
//!         // Sleeps only while the word is still 0; a wake or a change ends it.
//!         let _ = READY.wait(0, None);
//!     }
//! });
//! READY.store(1, Ordering::Release);
//! READY.wake(1).unwrap();
//! waiter.join().unwrap();
//! ```

mod deadline;
mod error;
pub mod futex2;
mod pi;
pub(crate) mod probe;
pub(crate) mod robust;
pub(crate) mod sys;

use core::marker::PhantomData;
use core::ops::Deref;

pub use deadline::{Clock, Deadline};
pub use error::Error;
pub use probe::{capabilities, Capabilities, Capability, Detection};
pub use robust::Unsupported as RobustUnsupported;

use crate::atomic::AtomicU32;

/// Linux's futex op codes and flags (values from the uapi headers, see `docs/kernel.md`).
pub(crate) mod op {
    pub const WAIT: i32 = 0;
    pub const WAKE: i32 = 1;
    pub const REQUEUE: i32 = 3;
    pub const CMP_REQUEUE: i32 = 4;
    pub const WAKE_OP: i32 = 5;
    pub const LOCK_PI: i32 = 6;
    pub const UNLOCK_PI: i32 = 7;
    pub const TRYLOCK_PI: i32 = 8;
    pub const WAIT_BITSET: i32 = 9;
    pub const WAKE_BITSET: i32 = 10;
    pub const WAIT_REQUEUE_PI: i32 = 11;
    pub const CMP_REQUEUE_PI: i32 = 12;
    /// `FUTEX_LOCK_PI2` on mainline (5.14+); `FUTEX_SWAP` on the never-merged SWAP patches.
    pub const OP_13: i32 = 13;
    pub const PRIVATE_FLAG: i32 = 128;
    pub const CLOCK_REALTIME: i32 = 256;
    pub const BITSET_MATCH_ANY: u32 = 0xffff_ffff;
}

/// Owner-TID futex word bits (`FUTEX_WAITERS`, `FUTEX_OWNER_DIED`, `FUTEX_TID_MASK`): the PI
/// family's, and the robust words' of [`crate::shared`].
pub mod pi_bits {
    /// Set by the kernel while threads are blocked on the PI lock.
    pub const WAITERS: u32 = 0x8000_0000;
    /// Set by the kernel when the owner died holding the lock.
    pub const OWNER_DIED: u32 = 0x4000_0000;
    /// The owner's thread id.
    pub const TID_MASK: u32 = 0x3fff_ffff;
}

mod sealed {
    pub trait Sealed {}
}

/// Whether a futex word is private to one process or shared between processes.
///
/// Implemented by [`Private`] and [`Shared`] only.
pub trait Scope: sealed::Sealed + Send + Sync + 'static {
    /// The runtime form of this scope.
    const KIND: ScopeKind;
}

/// A futex used by the threads of one process (`FUTEX_PRIVATE_FLAG`): the fast default.
#[derive(Debug)]
pub enum Private {}

/// A futex in memory shared between processes (no private flag): slower to look up.
#[derive(Debug)]
pub enum Shared {}

impl sealed::Sealed for Private {}
impl sealed::Sealed for Shared {}
impl Scope for Private {
    const KIND: ScopeKind = ScopeKind::Private;
}
impl Scope for Shared {
    const KIND: ScopeKind = ScopeKind::Shared;
}

/// The runtime form of [`Scope`], for the futex2 calls that take a scope per word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScopeKind {
    /// See [`Private`].
    Private,
    /// See [`Shared`].
    Shared,
}

impl ScopeKind {
    /// The legacy `futex(2)` flag for this scope.
    pub(crate) const fn legacy_flag(self) -> i32 {
        match self {
            ScopeKind::Private => op::PRIVATE_FLAG,
            ScopeKind::Shared => 0,
        }
    }

    /// The futex2 flag for this scope (`FUTEX2_PRIVATE`).
    pub(crate) const fn futex2_flag(self) -> u32 {
        match self {
            ScopeKind::Private => futex2::FUTEX2_PRIVATE,
            ScopeKind::Shared => 0,
        }
    }
}

/// A 32-bit futex word with a [`Scope`].
///
/// Dereferences to [`AtomicU32`] for loads, stores and compare-exchange. See the
/// [module documentation](self) for the operations.
#[repr(transparent)]
pub struct Futex<S: Scope = Private> {
    word: AtomicU32,
    scope: PhantomData<fn() -> S>,
}

impl Futex<Private> {
    crate::futex::sys::const_fn! {
        /// A process-private futex word holding `value`.
        pub const fn new(value: u32) -> Futex<Private> {
            Futex::with_scope(value)
        }
    }
}

impl Futex<Shared> {
    crate::futex::sys::const_fn! {
        /// A futex word holding `value`, for memory shared between processes.
        pub const fn shared(value: u32) -> Futex<Shared> {
            Futex::with_scope(value)
        }
    }
}

impl<S: Scope> Futex<S> {
    crate::futex::sys::const_fn! {
        /// A futex word of scope `S` holding `value`.
        pub const fn with_scope(value: u32) -> Futex<S> {
            Futex {
                word: AtomicU32::new(value),
                scope: PhantomData,
            }
        }
    }

    /// Uses an existing `AtomicU32` as a futex word of scope `S`.
    ///
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use futexkit::futex::{Futex, Private};
    ///
    /// let word = AtomicU32::new(7);
    /// let futex: &Futex<Private> = Futex::from_atomic(&word);
    /// assert_eq!(futex.wake(1), Ok(0));
    /// ```
    pub fn from_atomic(word: &AtomicU32) -> &Futex<S> {
        // SAFETY: `Futex<S>` is `repr(transparent)` over `AtomicU32` (its other field is a
        // zero-sized PhantomData), so the layouts are identical and the lifetime is carried over.
        unsafe { &*(word as *const AtomicU32 as *const Futex<S>) }
    }

    /// Uses the `u32` at `ptr` (for example in a shared-memory mapping) as a futex word.
    ///
    /// # Safety
    ///
    /// As for [`AtomicU32::from_ptr`]: `ptr` must be 4-byte aligned, valid for reads and writes
    /// for `'a`, and only accessed atomically during `'a`.
    pub unsafe fn from_ptr<'a>(ptr: *mut u32) -> &'a Futex<S> {
        // SAFETY: forwarded to `AtomicU32::from_ptr`, whose contract the caller upholds.
        Futex::from_atomic(unsafe { AtomicU32::from_ptr(ptr) })
    }

    /// The scope of this word.
    pub const fn scope(&self) -> ScopeKind {
        S::KIND
    }

    /// This word's address, for [`wake_at`](Futex::wake_at).
    pub const fn as_ptr(&self) -> *const Futex<S> {
        self
    }

    /// Sleeps while the word holds `expected`, until woken or until `deadline`.
    ///
    /// Returns `Ok(())` when woken, and also spuriously: callers re-check their condition in a
    /// loop. Signals are absorbed (the wait resumes with the same absolute deadline).
    ///
    /// # Errors
    ///
    /// [`Error::ValueChanged`] if the word did not hold `expected`; [`Error::TimedOut`] at the
    /// deadline.
    pub fn wait(&self, expected: u32, deadline: Option<Deadline>) -> Result<(), Error> {
        self.wait_bitset(expected, op::BITSET_MATCH_ANY, deadline)
    }

    /// Like [`wait`](Futex::wait), but only wakes with a bitset sharing a bit with `bitset`
    /// ([`wake_bitset`](Futex::wake_bitset)) end it.
    ///
    /// # Errors
    ///
    /// As [`wait`](Futex::wait); [`Error::InvalidArgument`] if `bitset` is 0.
    pub fn wait_bitset(
        &self,
        expected: u32,
        bitset: u32,
        deadline: Option<Deadline>,
    ) -> Result<(), Error> {
        if bitset == 0 {
            return Err(Error::InvalidArgument);
        }
        // FUTEX_WAIT_BITSET takes an absolute timeout, so a retry after EINTR keeps the original
        // deadline (FUTEX_WAIT's relative timeout would stretch).
        let mut futex_op = op::WAIT_BITSET | S::KIND.legacy_flag();
        let ts = deadline.map(|d| {
            if d.clock() == Clock::Realtime {
                futex_op |= op::CLOCK_REALTIME;
            }
            d.timespec()
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
        loop {
            // SAFETY: `self` is a live, aligned AtomicU32 for the whole call; `ts_ptr` is null or
            // points to `ts`, which outlives the call.
            let result = unsafe {
                sys::futex(
                    self.word.as_ptr(),
                    futex_op,
                    expected,
                    ts_ptr as usize,
                    core::ptr::null(),
                    bitset,
                )
            };
            match result {
                Ok(_) => return Ok(()),
                Err(libc::EINTR) => continue,
                Err(errno) => return Err(Error::from_errno(errno)),
            }
        }
    }

    /// Wakes up to `n` threads waiting on this word; returns how many were woken.
    ///
    /// # Errors
    ///
    /// Only what the kernel reports for a word that is live and aligned: in practice none, but
    /// a seccomp policy can make it [`Error::PermissionDenied`] or [`Error::Unsupported`].
    pub fn wake(&self, n: u32) -> Result<usize, Error> {
        Futex::wake_at(self, n)
    }

    /// Wakes up to `n` waiters of the word at `addr`, which may already have been freed.
    ///
    /// Use this after a store that lets another thread free the word (an unlock): the kernel
    /// only hashes the address, so a stale address is harmless. At worst it wakes an unrelated
    /// waiter that reuses the address, which every futex waiter tolerates as a spurious wakeup.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a null or unaligned address; see [`wake`](Futex::wake).
    pub fn wake_at(addr: *const Futex<S>, n: u32) -> Result<usize, Error> {
        Futex::wake_bitset_at(addr, n, op::BITSET_MATCH_ANY)
    }

    /// Wakes up to `n` waiters whose wait bitset shares a bit with `bitset`.
    ///
    /// # Errors
    ///
    /// As [`wake`](Futex::wake); [`Error::InvalidArgument`] if `bitset` is 0.
    pub fn wake_bitset(&self, n: u32, bitset: u32) -> Result<usize, Error> {
        Futex::wake_bitset_at(self, n, bitset)
    }

    /// [`wake_bitset`](Futex::wake_bitset) on an address that may already have been freed, as
    /// [`wake_at`](Futex::wake_at).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a null or unaligned address or a zero bitset.
    pub fn wake_bitset_at(addr: *const Futex<S>, n: u32, bitset: u32) -> Result<usize, Error> {
        if addr.is_null() || (addr as usize) % core::mem::align_of::<u32>() != 0 || bitset == 0 {
            return Err(Error::InvalidArgument);
        }
        let n = n.min(i32::MAX as u32);
        let futex_op = op::WAKE_BITSET | S::KIND.legacy_flag();
        sys::futex_wake(addr.cast(), futex_op, n, bitset).map_err(Error::from_errno)
    }

    /// Wakes up to `n_wake` waiters of this word and moves up to `n_requeue` of the rest to wait
    /// on `target`, without checking the word. Returns how many were woken or moved.
    ///
    /// Prefer [`cmp_requeue`](Futex::cmp_requeue): an unconditional requeue can race with a
    /// waiter that has not gone to sleep yet.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `target` is this word.
    pub fn requeue(&self, n_wake: u32, target: &Futex<S>, n_requeue: u32) -> Result<usize, Error> {
        self.requeue_inner(None, n_wake, target, n_requeue)
    }

    /// Like [`requeue`](Futex::requeue), but only if this word still holds `expected` (checked
    /// atomically with the move). Returns how many waiters were woken plus how many were moved.
    ///
    /// # Errors
    ///
    /// [`Error::ValueChanged`] if the word did not hold `expected` (nobody is woken or moved);
    /// [`Error::InvalidArgument`] if `target` is this word.
    pub fn cmp_requeue(
        &self,
        expected: u32,
        n_wake: u32,
        target: &Futex<S>,
        n_requeue: u32,
    ) -> Result<usize, Error> {
        self.requeue_inner(Some(expected), n_wake, target, n_requeue)
    }

    fn requeue_inner(
        &self,
        expected: Option<u32>,
        n_wake: u32,
        target: &Futex<S>,
        n_requeue: u32,
    ) -> Result<usize, Error> {
        if core::ptr::eq(self, target) {
            return Err(Error::InvalidArgument);
        }
        let n_wake = n_wake.min(i32::MAX as u32);
        let n_requeue = n_requeue.min(i32::MAX as u32);
        let (futex_op, val3) = match expected {
            Some(expected) => (op::CMP_REQUEUE, expected),
            None => (op::REQUEUE, 0),
        };
        // SAFETY: both words are live, aligned AtomicU32s borrowed for the whole call; the
        // kernel reads only this one (the compare) and never writes the target: it hashes its
        // address (private) or looks up its page (shared).
        let result = unsafe {
            sys::futex(
                self.word.as_ptr(),
                futex_op | S::KIND.legacy_flag(),
                n_wake,
                n_requeue as usize,
                target.word.as_ptr(),
                val3,
            )
        };
        result.map_err(Error::from_errno)
    }

    /// `FUTEX_WAKE_OP`: atomically applies `operation` to `other` and compares its old value;
    /// wakes up to `n_wake` waiters of this word, and, if the comparison held, up to
    /// `n_wake_other` waiters of `other`. Returns the total woken.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// use futexkit::futex::{Futex, WakeOp, WakeOpCmp, WakeOpKind};
    ///
    /// let a = Futex::new(0);
    /// let b = Futex::new(5);
    /// // b += 3, and wake b's waiters if b was > 4 (nobody waits here).
    /// let op = WakeOp::new(WakeOpKind::Add, 3, WakeOpCmp::Gt, 4).unwrap();
    /// assert_eq!(a.wake_op(1, &b, 1, op), Ok(0));
    /// assert_eq!(b.load(Ordering::Relaxed), 8);
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `other` is this word.
    pub fn wake_op(
        &self,
        n_wake: u32,
        other: &Futex<S>,
        n_wake_other: u32,
        operation: WakeOp,
    ) -> Result<usize, Error> {
        if core::ptr::eq(self, other) {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: both words are live, aligned AtomicU32s borrowed for the whole call; the
        // kernel writes `other` atomically, as another thread's atomic RMW would.
        let result = unsafe {
            sys::futex(
                self.word.as_ptr(),
                op::WAKE_OP | S::KIND.legacy_flag(),
                n_wake.min(i32::MAX as u32),
                n_wake_other.min(i32::MAX as u32) as usize,
                other.word.as_ptr(),
                operation.encode(),
            )
        };
        result.map_err(Error::from_errno)
    }

    /// Applies `kind arg` to this word and wakes up to `n` of its waiters, atomically with
    /// respect to waiters (`FUTEX_WAKE_OP` on the word itself, under the kernel's bucket
    /// lock): a thread that calls [`wait`](Futex::wait) concurrently either was queued before
    /// the change, and may be woken, or sees the changed value and does not sleep. Returns how
    /// many were woken.
    ///
    /// This closes the window between "change the word" and "wake" that a separate store and
    /// wake leave open, without touching the word after the call (the kernel writes it once,
    /// before waking). If the word held 0 before the change, the kernel may wake one waiter
    /// more than `n` (its second wake of `FUTEX_WAKE_OP`, which checks its count only after
    /// waking one).
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// use futexkit::futex::{Futex, WakeOpKind};
    ///
    /// let word = Futex::new(0b1011);
    /// assert_eq!(word.update_and_wake(WakeOpKind::AndNot, 0b0011, 1), Ok(0));
    /// assert_eq!(word.load(Ordering::Relaxed), 0b1000);
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `arg` is 2048 or more (the kernel's operand is a signed
    /// 12-bit field).
    pub fn update_and_wake(&self, kind: WakeOpKind, arg: u32, n: u32) -> Result<usize, Error> {
        // Validates `arg`. The kernel's second wake wakes one even for a count of 0 when its
        // comparison holds, so the comparison is `old == 0`: documented below.
        self.apply_and_wake(WakeOp::new(kind, arg, WakeOpCmp::Eq, 0)?, n)
    }

    /// [`update_and_wake`](Futex::update_and_wake) where the kernel takes `FUTEX_WAKE_OP`;
    /// where it refuses it (a seccomp policy, a kernel or emulator without it), the same change
    /// as an atomic RMW with release ordering, then a wake of up to `n` by address. Either way
    /// no waiter is left asleep on the old value; only the fallback leaves a window in which a
    /// thread that dies has changed the word and woken nobody. Returns how many were woken.
    /// `arg` must be one `update_and_wake` takes (under 2048): the callers' constants.
    pub(crate) fn change_and_wake(&self, kind: WakeOpKind, arg: u32, n: u32) -> usize {
        debug_assert!(arg < 2048, "not a FUTEX_WAKE_OP operand: {arg}");
        if let Ok(woken) = self.update_and_wake(kind, arg, n) {
            return woken;
        }
        let order = crate::atomic::Ordering::Release;
        match kind {
            WakeOpKind::Set => self.word.swap(arg, order),
            WakeOpKind::Add => self.word.fetch_add(arg, order),
            WakeOpKind::Or => self.word.fetch_or(arg, order),
            WakeOpKind::AndNot => self.word.fetch_and(!arg, order),
            WakeOpKind::Xor => self.word.fetch_xor(arg, order),
        };
        Futex::wake_at(self, n).unwrap_or(0)
    }

    /// Stores `value` and wakes up to `n` waiters of this word in one `FUTEX_WAKE_OP`, as
    /// [`update_and_wake`](Futex::update_and_wake) does for its operations: a thread that dies
    /// around the call either did both or neither. `value` must be one the kernel's operand
    /// can express: -2048 to 2047 as an `i32` (sign-extended, so `u32::MAX` is -1), or a power
    /// of two.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for any other value.
    pub(crate) fn store_and_wake(&self, value: u32, n: u32) -> Result<usize, Error> {
        let set = |oparg| WakeOp::new(WakeOpKind::Set, oparg, WakeOpCmp::Eq, 0);
        let operation = if value.is_power_of_two() {
            set(value.trailing_zeros())?.with_shifted_operand()?
        } else if (-2048..0).contains(&(value as i32)) {
            // `WakeOp::new` refuses operands with the field's sign bit set; the kernel
            // sign-extends the 12 bits, so these are the negative values it can express.
            WakeOp {
                oparg: value & 0xfff,
                ..set(0)?
            }
        } else {
            set(value)?
        };
        self.apply_and_wake(operation, n)
    }

    fn apply_and_wake(&self, operation: WakeOp, n: u32) -> Result<usize, Error> {
        let n = n.min(i32::MAX as u32);
        // Release: whatever this thread wrote before is visible to whoever sees the change
        // (the kernel's atomic op is not documented as a release on every architecture).
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
        // SAFETY: the word is a live, aligned AtomicU32 borrowed for the whole call, passed as
        // both addresses; the kernel writes it atomically, as another thread's atomic RMW
        // would, and wakes none of the second address's waiters (count 0).
        let result = unsafe {
            sys::futex(
                self.word.as_ptr(),
                op::WAKE_OP | S::KIND.legacy_flag(),
                n,
                0,
                self.word.as_ptr(),
                operation.encode(),
            )
        };
        result.map_err(Error::from_errno)
    }
}

impl<S: Scope> Deref for Futex<S> {
    type Target = AtomicU32;

    fn deref(&self) -> &AtomicU32 {
        &self.word
    }
}

impl<S: Scope> Default for Futex<S> {
    fn default() -> Futex<S> {
        Futex::with_scope(0)
    }
}

impl<S: Scope> core::fmt::Debug for Futex<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Futex")
            .field("value", &self.word.load(crate::atomic::Ordering::Relaxed))
            .field("scope", &S::KIND)
            .finish()
    }
}

/// The arithmetic of a [`WakeOp`], applied to the second word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WakeOpKind {
    /// `*word = arg`
    Set,
    /// `*word += arg`
    Add,
    /// `*word |= arg`
    Or,
    /// `*word &= !arg`
    AndNot,
    /// `*word ^= arg`
    Xor,
}

/// The comparison of a [`WakeOp`], applied to the second word's old value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WakeOpCmp {
    /// `old == arg`
    Eq,
    /// `old != arg`
    Ne,
    /// `old < arg`
    Lt,
    /// `old <= arg`
    Le,
    /// `old > arg`
    Gt,
    /// `old >= arg`
    Ge,
}

/// The encoded operation of [`Futex::wake_op`]: 12-bit operand and comparison argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WakeOp {
    kind: WakeOpKind,
    shift: bool,
    oparg: u32,
    cmp: WakeOpCmp,
    cmparg: u32,
}

impl WakeOp {
    /// The kernel sign-extends both 12-bit fields, so 2048 and up would arrive negative.
    const ARG_LIMIT: u32 = 1 << 11;

    /// `kind` with operand `oparg`, waking the second word's waiters if `old cmp cmparg`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `oparg` or `cmparg` is 2048 or more (the kernel reads
    /// them as signed 12-bit fields; [`with_shifted_operand`](WakeOp::with_shifted_operand)
    /// reaches larger powers of two).
    pub fn new(kind: WakeOpKind, oparg: u32, cmp: WakeOpCmp, cmparg: u32) -> Result<WakeOp, Error> {
        if oparg >= Self::ARG_LIMIT || cmparg >= Self::ARG_LIMIT {
            return Err(Error::InvalidArgument);
        }
        Ok(WakeOp {
            kind,
            shift: false,
            oparg,
            cmp,
            cmparg,
        })
    }

    /// The same operation with operand `1 << oparg` (`FUTEX_OP_OPARG_SHIFT`); `oparg` must be
    /// below 32.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `oparg` is 32 or more.
    pub fn with_shifted_operand(self) -> Result<WakeOp, Error> {
        if self.oparg >= 32 {
            return Err(Error::InvalidArgument);
        }
        Ok(WakeOp {
            shift: true,
            ..self
        })
    }

    fn encode(self) -> u32 {
        let kind = self.kind as u32 | if self.shift { 8 } else { 0 };
        (kind << 28) | ((self.cmp as u32) << 24) | (self.oparg << 12) | self.cmparg
    }
}

/// This thread's kernel thread id (`gettid`, asked once per thread and cached; a `fork`
/// child asks again, through a `pthread_atfork` handler, so a child never acts under its
/// parent's id): the value an owner-TID word holds (the PI family, [`PiMutex`](crate::sync::PiMutex),
/// [`crate::spin::wait_on_owner`]). Under a model checker, a distinct nonzero id per model
/// thread.
///
/// ```
/// let tid = futexkit::futex::current_tid();
/// assert_ne!(tid, 0);
/// assert_eq!(tid, futexkit::futex::current_tid());
/// let other = std::thread::spawn(futexkit::futex::current_tid).join().unwrap();
/// assert_ne!(tid, other);
/// ```
pub fn current_tid() -> u32 {
    sys::current_tid()
}

/// `FUTEX_SWAP` (op 13 on kernels with the never-merged SWAP patch): wakes at most one waiter
/// of `wake`, then waits on `wait_on` while it holds `expected`, handing the woken task this
/// CPU. Its timeout is relative (monotonic), so it is recomputed from the deadline. Callers
/// must have checked [`Capability::Swap`]: on mainline op 13 is `FUTEX_LOCK_PI2`.
pub(crate) fn swap_syscall<S: Scope>(
    wait_on: &Futex<S>,
    expected: u32,
    wake: &Futex<S>,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    let ts = deadline.map(|d| {
        let left = d.remaining();
        libc::timespec {
            tv_sec: left.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: left.subsec_nanos() as _,
        }
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
    // SAFETY: both words are live, aligned AtomicU32s borrowed for the call; `ts_ptr` is null or
    // points to `ts`. Only reached where probing proved op 13 is FUTEX_SWAP (which reads
    // `wait_on` and hashes `wake`), never where it is LOCK_PI2.
    let result = unsafe {
        sys::futex(
            wait_on.word.as_ptr(),
            op::OP_13 | S::KIND.legacy_flag(),
            expected,
            ts_ptr as usize,
            wake.word.as_ptr(),
            0,
        )
    };
    result.map(drop).map_err(Error::from_errno)
}
