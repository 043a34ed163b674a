//! The futex backend under a model checker (`cfg(futexkit_loom)` or `cfg(futexkit_shuttle)`): the
//! items of `linux.rs`, with the same signatures, on the checker's atomics and threads and an
//! emulated futex.
//!
//! Real futexes are kernel objects a model checker cannot see, so the futex calls act on one
//! table of `(address, bitset, waiter id)` entries in arrival order, guarded by the checker's
//! `Mutex` so that "compare the word, then enqueue" is atomic with respect to wakers (the
//! kernel's hash-bucket lock does the same), and one `Condvar` that every wake notifies; a
//! waiter returns once its entry is gone. A timed wait gives the checker a scheduling point
//! and then, if nobody woke it, times out, so both outcomes are explored. A lost wakeup shows
//! up as the checker's deadlock report.
//!
//! Modelled: `FUTEX_WAIT(_BITSET)`, `FUTEX_WAKE(_BITSET)`, `FUTEX_(CMP_)REQUEUE` and
//! `FUTEX_WAKE_OP`, with the kernel's answers (`EAGAIN` on a mismatch, `ETIMEDOUT`, `EINVAL`
//! for a requeue onto the same word) and its quirk of waking one waiter for a count of 0 in
//! `FUTEX_WAKE_OP`; and the PI lock's untimed `FUTEX_LOCK_PI`, `FUTEX_TRYLOCK_PI` and
//! `FUTEX_UNLOCK_PI` on the kernel's word protocol (owner id; `WAITERS` set as a thread queues
//! and kept by a hand-off, cleared only by an unlock that finds nobody queued; an unlock that
//! hands the lock to the longest waiter), without priorities, timeouts or owner deaths, for
//! model threads only (the PI probe does not run under a checker). Every other operation
//! answers `ENOSYS` without reading memory, as a kernel without it would, so the probe finds
//! nothing and the fallbacks run.

#[cfg(futexkit_loom)]
use ::loom as checker;
#[cfg(futexkit_shuttle)]
use ::shuttle as checker;

use core::ops::Deref;

use checker::lazy_static;
use checker::sync::{Condvar, Mutex};

pub(crate) use checker::sync::atomic::fence;
pub(crate) use checker::thread::yield_now;
pub(crate) use checker::thread_local;
pub(crate) use core::sync::atomic::Ordering;

use super::{Errno, FutexWaitv, RobustListHead};
use crate::futex::op;

/// True: every spin is one look, so that models stay finite (see [`crate::spin`]).
pub(crate) const MODEL_CHECKED: bool = true;

/// The checker's 32-bit atomic, with an address that names it in a futex call, as a real
/// word's does ([`as_ptr`](AtomicU32::as_ptr)).
pub struct AtomicU32(checker::sync::atomic::AtomicU32);

impl AtomicU32 {
    /// A word holding `value` (not `const`: a checker's atomics are made while a model runs;
    /// constructors above use [`const_fn!`](super::const_fn)).
    pub fn new(value: u32) -> AtomicU32 {
        AtomicU32(checker::sync::atomic::AtomicU32::new(value))
    }

    /// This word's address, to name it in a futex call.
    pub const fn as_ptr(&self) -> *mut u32 {
        self as *const AtomicU32 as *mut u32
    }

    /// The word whose address [`as_ptr`](AtomicU32::as_ptr) gave.
    ///
    /// # Safety
    ///
    /// `ptr` must come from `as_ptr` of an `AtomicU32` that lives for `'a`.
    pub unsafe fn from_ptr<'a>(ptr: *mut u32) -> &'a AtomicU32 {
        // SAFETY: the caller passes the address of a live `AtomicU32` of this module.
        unsafe { &*ptr.cast::<AtomicU32>() }
    }
}

impl Deref for AtomicU32 {
    type Target = checker::sync::atomic::AtomicU32;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl core::fmt::Debug for AtomicU32 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AtomicU32(..)")
    }
}

/// A distinct nonzero id per model thread, the same in every execution of a model (the
/// checker replays executions, which must not depend on what earlier ones did): ids are
/// handed out in the order threads first ask, from a counter made afresh per execution.
pub(crate) fn current_tid() -> u32 {
    lazy_static! {
        static ref NEXT: checker::sync::atomic::AtomicU32 =
            checker::sync::atomic::AtomicU32::new(1);
    }
    thread_local! {
        static TID: u32 = NEXT.fetch_add(1, Ordering::Relaxed) % crate::futex::pi_bits::TID_MASK + 1;
    }
    TID.with(|tid| *tid)
}

/// No model thread forks.
pub(crate) fn forks() -> Option<u32> {
    Some(0)
}

/// The next number of a count made afresh per execution, one per call (as `linux.rs`'s, and
/// the same in every execution of a model with the same schedule; see [`current_tid`]). It
/// starts two short of the Mutex tickets' wrap, so that models order waiters across it and
/// skip the ticket 0, which names nobody (`src/fairness.rs`).
pub(crate) fn next_ticket() -> u32 {
    lazy_static! {
        static ref NEXT: checker::sync::atomic::AtomicU32 =
            checker::sync::atomic::AtomicU32::new((1 << crate::fairness::TICKET_BITS) - 2);
    }
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// No model thread has a robust list head of the C library's: the robust list code registers
/// its own, which [`set_robust_list`] accepts. No model thread dies at an arbitrary
/// instruction, so the kernel's walk of the list is not modelled.
pub(crate) fn robust_list_head() -> Result<*mut RobustListHead, Errno> {
    Ok(core::ptr::null_mut())
}

/// Accepts any head without reading it (see [`robust_list_head`]).
///
/// # Safety
///
/// None needed here; the signature is `linux.rs`'s.
pub(crate) unsafe fn set_robust_list(_head: *mut RobustListHead) -> Result<(), Errno> {
    Ok(())
}

struct Waiter {
    addr: usize,
    bitset: u32,
    id: u64,
    /// The thread id of a `FUTEX_LOCK_PI` waiter, which an unlock writes into the word; 0 for
    /// the other waits.
    pi_tid: u32,
}

struct Table {
    /// Sleeping waiters in arrival order.
    waiters: Vec<Waiter>,
    next_id: u64,
}

struct Emulated {
    table: Mutex<Table>,
    woken: Condvar,
}

lazy_static! {
    static ref FUTEXES: Emulated = Emulated {
        table: Mutex::new(Table {
            waiters: Vec::new(),
            next_id: 0
        }),
        woken: Condvar::new(),
    };
}

/// The emulated `futex(2)`; see the module documentation for what it models.
///
/// # Safety
///
/// As `linux.rs`'s `futex`: for the ops that read a word (waits, a compare-requeue, wake-op),
/// `uaddr` and `uaddr2` point to live words, which in this build are this module's
/// [`AtomicU32`]s (the futex layer's words are).
pub(crate) unsafe fn futex(
    uaddr: *const u32,
    futex_op: i32,
    val: u32,
    arg4: usize,
    uaddr2: *const u32,
    val3: u32,
) -> Result<usize, Errno> {
    let timed = arg4 != 0;
    match futex_op & !(op::PRIVATE_FLAG | op::CLOCK_REALTIME) {
        // SAFETY: a wait reads `uaddr`, which the caller guarantees is a live word.
        op::WAIT => unsafe { wait(uaddr, val, op::BITSET_MATCH_ANY, timed) },
        // SAFETY: as above.
        op::WAIT_BITSET => unsafe { wait(uaddr, val, val3, timed) },
        op::WAKE => Ok(wake(uaddr, val, op::BITSET_MATCH_ANY)),
        op::WAKE_BITSET => Ok(wake(uaddr, val, val3)),
        op::REQUEUE => Ok(requeue(uaddr, None, val, uaddr2, arg4 as u32)?),
        // SAFETY: a compare-requeue reads `uaddr`, a live word by the caller's guarantee.
        op::CMP_REQUEUE => unsafe { compare_and_requeue(uaddr, val3, val, uaddr2, arg4 as u32) },
        // SAFETY: wake-op writes `uaddr2`, a live word by the caller's guarantee.
        op::WAKE_OP => unsafe { wake_op(uaddr, val, uaddr2, arg4 as u32, val3) },
        // SAFETY: the PI calls read and write `uaddr`, a live word by the caller's guarantee.
        op::LOCK_PI if !timed => unsafe { lock_pi(uaddr, true) },
        // SAFETY: as above.
        op::TRYLOCK_PI => unsafe { lock_pi(uaddr, false) },
        // SAFETY: as above.
        op::UNLOCK_PI => unsafe { unlock_pi(uaddr) },
        _ => Err(libc::ENOSYS),
    }
}

/// The emulated `FUTEX_WAKE(_BITSET)`: any address, as the kernel's.
pub(crate) fn futex_wake(
    uaddr: *const u32,
    futex_op: i32,
    n: u32,
    bitset: u32,
) -> Result<usize, Errno> {
    // SAFETY: wakes read no memory.
    unsafe { futex(uaddr, futex_op, n, 0, core::ptr::null(), bitset) }
}

/// futex2 `futex_wait`: not modelled.
///
/// # Safety
///
/// None needed here; the signature is `linux.rs`'s.
pub(crate) unsafe fn futex2_wait(
    _uaddr: *const u8,
    _val: u64,
    _mask: u64,
    _flags: u32,
    _timeout: *const libc::timespec,
    _clockid: libc::clockid_t,
) -> Result<usize, Errno> {
    Err(libc::ENOSYS)
}

/// futex2 `futex_wake`: not modelled.
pub(crate) fn futex2_wake(
    _uaddr: *const u8,
    _mask: u64,
    _n: i32,
    _flags: u32,
) -> Result<usize, Errno> {
    Err(libc::ENOSYS)
}

/// futex2 `futex_wake` with `FUTEX2_NUMA`: not modelled.
///
/// # Safety
///
/// None needed here; the signature is `linux.rs`'s.
pub(crate) unsafe fn futex2_wake_numa(
    _uaddr: *const u8,
    _mask: u64,
    _n: i32,
    _flags: u32,
) -> Result<usize, Errno> {
    Err(libc::ENOSYS)
}

/// futex2 `futex_requeue`: not modelled.
///
/// # Safety
///
/// None needed here; the signature is `linux.rs`'s.
pub(crate) unsafe fn futex2_requeue(
    _waiters: &[FutexWaitv; 2],
    _nr_wake: i32,
    _nr_requeue: i32,
) -> Result<usize, Errno> {
    Err(libc::ENOSYS)
}

/// `futex_waitv`: not modelled.
///
/// # Safety
///
/// None needed here; the signature is `linux.rs`'s.
pub(crate) unsafe fn futex_waitv(
    _waiters: &[FutexWaitv],
    _timeout: *const libc::timespec,
    _clockid: libc::clockid_t,
) -> Result<usize, Errno> {
    Err(libc::ENOSYS)
}

/// # Safety
///
/// `uaddr` points to a live [`AtomicU32`].
unsafe fn wait(uaddr: *const u32, expected: u32, bitset: u32, timed: bool) -> Result<usize, Errno> {
    if bitset == 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's guarantee.
    let word = unsafe { AtomicU32::from_ptr(uaddr.cast_mut()) };
    let addr = uaddr as usize;
    let mut table = FUTEXES.table.lock().unwrap();
    if word.load(Ordering::SeqCst) != expected {
        return Err(libc::EAGAIN);
    }
    let id = table.next_id;
    table.next_id += 1;
    table.waiters.push(Waiter {
        addr,
        bitset,
        id,
        pi_tid: 0,
    });
    if timed {
        drop(table);
        yield_now();
        let mut table = FUTEXES.table.lock().unwrap();
        return match table.waiters.iter().position(|w| w.id == id) {
            Some(pos) => {
                table.waiters.remove(pos);
                Err(libc::ETIMEDOUT)
            }
            None => Ok(0),
        };
    }
    while table.waiters.iter().any(|w| w.id == id) {
        table = FUTEXES.woken.wait(table).unwrap();
    }
    Ok(0)
}

/// The emulated `FUTEX_LOCK_PI` (`block`) or `FUTEX_TRYLOCK_PI`: takes a word with no owner;
/// else (blocking) sets `WAITERS` and queues until an unlock hands the lock over.
///
/// # Safety
///
/// `uaddr` points to a live [`AtomicU32`].
unsafe fn lock_pi(uaddr: *const u32, block: bool) -> Result<usize, Errno> {
    use crate::futex::pi_bits::{TID_MASK, WAITERS};
    // SAFETY: the caller's guarantee.
    let word = unsafe { AtomicU32::from_ptr(uaddr.cast_mut()) };
    let addr = uaddr as usize;
    let me = current_tid();
    let mut table = FUTEXES.table.lock().unwrap();
    // The owner's user-space unlock may change the word meanwhile: every change here is a CAS
    // from the value just read, as the kernel's.
    let mut value = word.load(Ordering::SeqCst);
    loop {
        let (next, taken) = match value & TID_MASK {
            0 => (me | (value & WAITERS), true),
            owner if owner == me => return Err(libc::EDEADLK),
            _ if !block => return Err(libc::EAGAIN),
            _ => (value | WAITERS, false),
        };
        match word.compare_exchange(value, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) if taken => return Ok(0),
            Ok(_) => break,
            Err(now) => value = now,
        }
    }
    let id = table.next_id;
    table.next_id += 1;
    table.waiters.push(Waiter {
        addr,
        bitset: 0,
        id,
        pi_tid: me,
    });
    while table.waiters.iter().any(|w| w.id == id) {
        table = FUTEXES.woken.wait(table).unwrap();
    }
    Ok(0)
}

/// The emulated `FUTEX_UNLOCK_PI`: the owner hands the lock to the longest waiter, keeping
/// `WAITERS` as the kernel does (so the new owner's unlock comes here too), or frees it.
///
/// # Safety
///
/// `uaddr` points to a live [`AtomicU32`].
unsafe fn unlock_pi(uaddr: *const u32) -> Result<usize, Errno> {
    use crate::futex::pi_bits::{TID_MASK, WAITERS};
    // SAFETY: the caller's guarantee.
    let word = unsafe { AtomicU32::from_ptr(uaddr.cast_mut()) };
    let addr = uaddr as usize;
    let mut table = FUTEXES.table.lock().unwrap();
    if word.load(Ordering::SeqCst) & TID_MASK != current_tid() {
        return Err(libc::EPERM);
    }
    let is_pi_waiter = |w: &Waiter| w.addr == addr && w.pi_tid != 0;
    match table.waiters.iter().position(is_pi_waiter) {
        None => word.store(0, Ordering::SeqCst),
        Some(pos) => {
            let next = table.waiters.remove(pos);
            word.store(next.pi_tid | WAITERS, Ordering::SeqCst);
            FUTEXES.woken.notify_all();
        }
    }
    Ok(0)
}

fn wake(uaddr: *const u32, n: u32, bitset: u32) -> usize {
    let mut table = FUTEXES.table.lock().unwrap();
    let woken = take_waiters(&mut table, uaddr as usize, bitset, n as usize, None);
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    woken
}

/// # Safety
///
/// `uaddr` points to a live [`AtomicU32`].
unsafe fn compare_and_requeue(
    uaddr: *const u32,
    expected: u32,
    n_wake: u32,
    target: *const u32,
    n_requeue: u32,
) -> Result<usize, Errno> {
    // SAFETY: the caller's guarantee.
    let word = unsafe { AtomicU32::from_ptr(uaddr.cast_mut()) };
    requeue(uaddr, Some((word, expected)), n_wake, target, n_requeue)
}

fn requeue(
    uaddr: *const u32,
    compare: Option<(&AtomicU32, u32)>,
    n_wake: u32,
    target: *const u32,
    n_requeue: u32,
) -> Result<usize, Errno> {
    if uaddr == target {
        return Err(libc::EINVAL);
    }
    let mut table = FUTEXES.table.lock().unwrap();
    if let Some((word, expected)) = compare {
        if word.load(Ordering::SeqCst) != expected {
            return Err(libc::EAGAIN);
        }
    }
    let addr = uaddr as usize;
    let woken = take_waiters(&mut table, addr, u32::MAX, n_wake as usize, None);
    let moved = take_waiters(
        &mut table,
        addr,
        u32::MAX,
        n_requeue as usize,
        Some(target as usize),
    );
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    Ok(woken + moved)
}

/// `FUTEX_WAKE_OP`: applies the encoded operation to `uaddr2`, wakes up to `n_wake` waiters of
/// `uaddr` and, if the comparison on `uaddr2`'s old value holds, up to `n_wake2` of `uaddr2`'s,
/// all atomically with respect to waiters. As the kernel's, each wake wakes at least one
/// waiter, whatever its count.
///
/// # Safety
///
/// `uaddr2` points to a live [`AtomicU32`].
unsafe fn wake_op(
    uaddr: *const u32,
    n_wake: u32,
    uaddr2: *const u32,
    n_wake2: u32,
    encoded: u32,
) -> Result<usize, Errno> {
    // SAFETY: the caller's guarantee.
    let other = unsafe { AtomicU32::from_ptr(uaddr2.cast_mut()) };
    let kind = (encoded >> 28) & 0b111;
    // The kernel sign-extends both 12-bit fields (`sign_extend32(.., 11)`).
    let sign_extend = |field: u32| (((field & 0xfff) << 20) as i32 >> 20) as u32;
    let oparg = (encoded >> 12) & 0xfff;
    let oparg = if (encoded >> 28) & 0b1000 != 0 {
        1u32.checked_shl(oparg).ok_or(libc::EINVAL)?
    } else {
        sign_extend(oparg)
    };
    let cmparg = sign_extend(encoded);
    let mut table = FUTEXES.table.lock().unwrap();
    let mut old = other.load(Ordering::SeqCst);
    loop {
        let new = match kind {
            0 => oparg,
            1 => old.wrapping_add(oparg),
            2 => old | oparg,
            3 => old & !oparg,
            4 => old ^ oparg,
            _ => return Err(libc::ENOSYS),
        };
        match other.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => break,
            Err(now) => old = now,
        }
    }
    let holds = match (encoded >> 24) & 0xf {
        0 => old == cmparg,
        1 => old != cmparg,
        2 => old < cmparg,
        3 => old <= cmparg,
        4 => old > cmparg,
        5 => old >= cmparg,
        _ => return Err(libc::ENOSYS),
    };
    let any = op::BITSET_MATCH_ANY;
    let mut woken = take_waiters(
        &mut table,
        uaddr as usize,
        any,
        n_wake.max(1) as usize,
        None,
    );
    if holds {
        let n = n_wake2.max(1) as usize;
        woken += take_waiters(&mut table, uaddr2 as usize, any, n, None);
    }
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    Ok(woken)
}

/// Removes (or, with `move_to`, re-addresses) the first `n` waiters of `addr` whose bitset
/// shares a bit with `bitset`.
fn take_waiters(
    table: &mut Table,
    addr: usize,
    bitset: u32,
    n: usize,
    move_to: Option<usize>,
) -> usize {
    let mut done = 0;
    let mut i = 0;
    while i < table.waiters.len() && done < n {
        let waiter = &mut table.waiters[i];
        if waiter.addr != addr || waiter.bitset & bitset == 0 {
            i += 1;
            continue;
        }
        done += 1;
        match move_to {
            Some(target) => {
                waiter.addr = target;
                i += 1;
            }
            None => {
                table.waiters.remove(i);
            }
        }
    }
    done
}
