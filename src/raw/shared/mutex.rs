//! The process-shared, robust mutex protocol, on one robust word (`src/futex/robust.rs`).
//! `futexkit::shared::SharedMutex` is this with a typed value and guards.
//!
//! ## State
//!
//! [`RawSharedMutex`] is one 32-bit futex word in shared memory, a count of sleepers beside
//! it, and the robust-list entry the kernel reads when a holder dies:
//!
//! | field | meaning | set by | cleared by |
//! |-------|---------|--------|------------|
//! | word bits 0-29 `owner` | the holder's thread id; 0: free; `NOT_RECOVERABLE` (all ones, an id no thread has): never lockable again | a locker's CAS from free | the holder's unlock; the kernel, when the holder dies |
//! | word bit 31 `WAITERS` | a thread may sleep on the word | a waiter, before it sleeps | a *holder* that finds no sleeper counted (never a release) |
//! | word bit 30 `OWNER_DIED` | a holder died holding the lock: the data may be inconsistent | the kernel, as the holder dies | [`mark_consistent`](RawSharedMutex::mark_consistent); an unlock without it makes the word `NOT_RECOVERABLE` |
//! | `sleepers` | threads counted as about to sleep on the word or asleep | a waiter adds 1 before it sets `WAITERS` | the waiter takes it back when its sleep ends |
//!
//! Invariants:
//!
//! 1. **No lost wakeup.** A thread sleeps only on a value with `WAITERS` set, and `WAITERS`
//!    stays set while it sleeps: takes, releases and the kernel keep the bit, and the one
//!    thing that clears it is the holder, after a take, when it counts no sleeper. That clear
//!    is a double check (read `sleepers` with a read-modify-write, clear the bit, read again,
//!    set it back if a sleeper came), and a waiter counts itself before it sets the bit and
//!    sleeps (so before the kernel compares the word): either the holder sees the waiter
//!    counted and keeps the bit, or the waiter's sleep sees the cleared word and returns, and
//!    the waiter sets the bit itself before it sleeps again. Every release of a word with
//!    `WAITERS` wakes a sleeper, so every sleeper is woken by some release (or by the kernel).
//!    A release never clears the bit: a clear after a wake that found nobody would race with
//!    sleepers of a later holder (the word can read `WAITERS` again by then).
//! 2. **Deaths.** Every operation runs with the word named as the thread's robust operation under
//!    way, and a held word is linked in the thread's robust list (`robust.rs`). So whenever a
//!    thread dies: if its id is in the word, the kernel sets `OWNER_DIED` (keeping `WAITERS`,
//!    clearing the id) and wakes one waiter if `WAITERS` was set; if the word is free and the
//!    thread was in an operation on it (a release before its wake, a woken waiter before it took
//!    the lock), the kernel wakes one waiter. A woken waiter that dies before it took the lock
//!    while another thread holds it strands nobody: it is still counted, so `WAITERS` is still
//!    set (invariant 1) and that holder's release wakes the next. A waiter that dies counted
//!    leaves `sleepers` one too high for good: `WAITERS` then stays set, and every release
//!    makes a wake system call that finds nobody (a cost, not a lost wakeup).
//! 3. **A death is reported once per inconsistency.** The thread that takes a word with
//!    `OWNER_DIED` set gets [`Acquired::OwnerDied`] and keeps the bit while it holds the lock,
//!    so if it dies too, the next one is told again. [`mark_consistent`](RawSharedMutex::mark_consistent)
//!    clears it; an unlock with the bit still set stores `NOT_RECOVERABLE` and wakes every
//!    sleeper, and every lock from then on fails with [`RawLockError::NotRecoverable`]
//!    (pthread's `EOWNERDEAD` and `ENOTRECOVERABLE`).
//!
//! ## Transitions
//!
//! * **lock**: free → this thread's id, keeping `WAITERS` and `OWNER_DIED`, by one CAS (the
//!   first one blind, from 0); a take that kept `WAITERS` then clears it if no sleeper is
//!   counted (invariant 1). Else, while the word is held without `WAITERS`, spin
//!   ([`SpinWait`]); then count itself, set `WAITERS` and sleep on what the word holds,
//!   uncounting itself when the sleep ends. A woken thread looks again before it minds its
//!   deadline, so a wake it was given is never dropped while the lock is free.
//! * **unlock**: with `OWNER_DIED` set, store `NOT_RECOVERABLE` and wake all. Else clear the
//!   owner keeping `WAITERS` (one `fetch_and`), and wake one sleeper if `WAITERS` was set. A
//!   thread that took the word and leaves without touching the data (a look, a writer giving
//!   up) releases it keeping `OWNER_DIED` too.
//!
//! After the release, the unlock touches the word only by address (the wake), which is harmless
//! should the memory be gone by then. Everything is atomic, and every loop that another
//! process could keep going by changing the word checks the deadline, so a peer that scribbles
//! the word can make calls fail or wait, but a timed call returns by its deadline.

use core::fmt;
use std::time::Duration;

use crate::atomic::Ordering;
use crate::futex::pi_bits::{OWNER_DIED, TID_MASK, WAITERS};
use crate::futex::robust::{self, RobustWord, Unsupported};
use crate::futex::{Deadline, Error, Futex, Shared};
use crate::spin::SpinWait;

/// The owner bits of a word that can never be taken again: an id no thread has (Linux's
/// `pid_max` is at most 2^22).
pub(crate) const NOT_RECOVERABLE: u32 = TID_MASK;

/// The owner bits of `word`.
#[inline]
pub(crate) fn owner(word: u32) -> u32 {
    word & TID_MASK
}

/// How a lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Acquired {
    /// The last holder released it.
    Consistent,
    /// A holder died holding it (or a thread that took it after such a death did, before it
    /// called [`mark_consistent`](RawSharedMutex::mark_consistent)): this thread holds it now,
    /// and the data it guards may be half-updated.
    OwnerDied,
}

/// Why a raw shared lock was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RawLockError {
    /// Another thread holds it (`try_lock`).
    WouldBlock,
    /// The deadline passed first.
    TimedOut,
    /// A holder died and the lock was released without being marked consistent: nobody can
    /// take it again.
    NotRecoverable,
    /// This thread holds it already.
    WouldDeadlock,
    /// This thread cannot take robust locks.
    Unsupported(Unsupported),
    /// The kernel refused a futex call on the word.
    Futex(Error),
}

impl From<Unsupported> for RawLockError {
    fn from(why: Unsupported) -> RawLockError {
        RawLockError::Unsupported(why)
    }
}

impl fmt::Display for RawLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawLockError::WouldBlock => f.write_str("the lock is held by another thread"),
            RawLockError::TimedOut => f.write_str("the deadline passed before the lock was taken"),
            RawLockError::NotRecoverable => f.write_str(
                "the lock is not recoverable: a holder died and it was released without being marked consistent",
            ),
            RawLockError::WouldDeadlock => f.write_str("this thread already holds the lock"),
            RawLockError::Unsupported(why) => write!(f, "robust locks are unavailable: {why}"),
            RawLockError::Futex(err) => write!(f, "a futex call on the lock failed: {err}"),
        }
    }
}

impl std::error::Error for RawLockError {}

/// A process-shared, robust mutex without data: 40 bytes (`#[repr(C)]`, 8-aligned) for memory
/// that several processes map. When a holder dies, the next thread to take it is told
/// ([`Acquired::OwnerDied`]). Its state table is at the top of `src/raw/shared/mutex.rs`;
/// [`SharedMutex`](crate::shared::SharedMutex) is this with a value and guards.
///
/// A lock is held by a thread: the thread that took it unlocks it (the kernel tracks it in
/// that thread's robust list).
///
/// ```
/// use futexkit::raw::{Acquired, RawSharedMutex};
///
/// let raw = RawSharedMutex::new(); // in memory of one process here; see `from_ptr`
/// assert_eq!(raw.lock(), Ok(Acquired::Consistent));
/// // SAFETY: this thread holds it, and `raw` outlives the call.
/// unsafe { raw.unlock() };
/// ```
#[repr(C)]
pub struct RawSharedMutex {
    robust: RobustWord,
}

impl fmt::Debug for RawSharedMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.word().load(Ordering::Relaxed);
        f.debug_struct("RawSharedMutex")
            .field("owner", &owner(word))
            .field("waiters", &(word & WAITERS != 0))
            .field("owner_died", &(word & OWNER_DIED != 0))
            .finish()
    }
}

impl Default for RawSharedMutex {
    fn default() -> RawSharedMutex {
        RawSharedMutex::new()
    }
}

impl RawSharedMutex {
    crate::futex::sys::const_fn! {
        /// An unlocked mutex.
        pub const fn new() -> RawSharedMutex {
            RawSharedMutex {
                robust: RobustWord::new(0),
            }
        }
    }

    /// Uses the mutex at `ptr`, in memory the caller mapped (a region of
    /// [`futexkit::shared`](crate::shared) does this for you).
    ///
    /// # Safety
    ///
    /// `ptr` must be 8-aligned and point to a `RawSharedMutex` (made by [`new`](Self::new), or
    /// all zeros) in memory that stays mapped, readable and writable for `'a` and until every
    /// call on it has returned; every process that maps it must access those 40 bytes only
    /// through a `RawSharedMutex`, or atomically. Another process may write any value into it
    /// (that makes calls fail or wait, never unsound), but must not unmap or truncate it under
    /// this process (a sealed memfd rules that out).
    pub unsafe fn from_ptr<'a>(ptr: *const RawSharedMutex) -> &'a RawSharedMutex {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access; the type is
        // all atomics.
        unsafe { &*ptr }
    }

    pub(crate) fn robust(&self) -> &RobustWord {
        &self.robust
    }

    fn word(&self) -> &Futex<Shared> {
        &self.robust.word
    }

    /// Blocks until this thread holds the lock.
    ///
    /// # Errors
    ///
    /// [`RawLockError::NotRecoverable`], [`RawLockError::WouldDeadlock`] if this thread holds
    /// it, [`RawLockError::Unsupported`] if this thread cannot take robust locks, and
    /// [`RawLockError::Futex`] if the kernel refuses to sleep on the word.
    #[inline]
    pub fn lock(&self) -> Result<Acquired, RawLockError> {
        robust::acquire(&self.robust, |tid| self.take(tid, None))
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`RawLockError::WouldBlock`] if another thread holds it; otherwise as
    /// [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Acquired, RawLockError> {
        robust::acquire(&self.robust, |tid| self.take_now(tid, true))
    }

    /// Blocks until this thread holds the lock or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`RawLockError::TimedOut`]; otherwise as [`lock`](Self::lock).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Acquired, RawLockError> {
        self.try_lock_until(Deadline::after(timeout))
    }

    /// Blocks until this thread holds the lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`RawLockError::TimedOut`]; otherwise as [`lock`](Self::lock).
    pub fn try_lock_until(&self, deadline: Deadline) -> Result<Acquired, RawLockError> {
        robust::acquire(&self.robust, |tid| self.take(tid, Some(deadline)))
    }

    /// Releases the lock, waking a sleeper if there is one. If the lock was taken after a
    /// holder's death ([`Acquired::OwnerDied`]) and not marked consistent since, it becomes
    /// not recoverable instead, and every sleeper is woken to be told so.
    ///
    /// Does nothing if this thread does not hold the lock (for example in the child of a `fork`,
    /// which owns none of its parent's locks).
    ///
    /// # Safety
    ///
    /// The memory must stay mapped until this call returns. (After the release, the word is
    /// touched by address only, so another thread may take the lock and let it go meanwhile.)
    pub unsafe fn unlock(&self) {
        robust::release(&self.robust, |_| self.release(1));
    }

    /// Marks the lock consistent after a holder's death: the data is repaired, and the next
    /// unlock releases the lock as usual. Does nothing if this thread does not hold it.
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock).
    pub unsafe fn mark_consistent(&self) {
        if robust::holds(&self.robust) {
            self.word().fetch_and(!OWNER_DIED, Ordering::Relaxed);
        }
    }

    /// Whether some thread holds the lock now (a snapshot).
    pub fn is_locked(&self) -> bool {
        !matches!(
            owner(self.word().load(Ordering::Relaxed)),
            0 | NOT_RECOVERABLE
        )
    }

    /// The thread id of the holder now (a snapshot, in the pid namespace of the process that
    /// took the lock), if any.
    pub fn holder(&self) -> Option<u32> {
        match owner(self.word().load(Ordering::Relaxed)) {
            0 | NOT_RECOVERABLE => None,
            tid => Some(tid),
        }
    }

    /// Whether the lock can never be taken again.
    pub fn is_not_recoverable(&self) -> bool {
        owner(self.word().load(Ordering::Relaxed)) == NOT_RECOVERABLE
    }

    /// One attempt (a few, should the word change under the CAS): takes the word if it is
    /// free. `keep_owner_died`: whether a death stays recorded in the word (a mutex), or is
    /// forgotten (a reader slot, whose holders never change the data).
    pub(crate) fn take_now(
        &self,
        tid: u32,
        keep_owner_died: bool,
    ) -> Result<Acquired, RawLockError> {
        let word = self.word();
        for _ in 0..16 {
            let v = word.load(Ordering::Relaxed);
            match owner(v) {
                0 => {
                    let kept = if keep_owner_died {
                        WAITERS | OWNER_DIED
                    } else {
                        WAITERS
                    };
                    if word
                        .compare_exchange(v, tid | (v & kept), Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        if v & WAITERS != 0 {
                            self.clear_waiters_if_none();
                        }
                        return Ok(acquired(v));
                    }
                }
                NOT_RECOVERABLE => return Err(RawLockError::NotRecoverable),
                o if o == tid => return Err(RawLockError::WouldDeadlock),
                _ => return Err(RawLockError::WouldBlock),
            }
        }
        Err(RawLockError::WouldBlock)
    }

    /// The lock's protocol, once the word is named as this thread's operation under way.
    #[inline]
    pub(crate) fn take(
        &self,
        tid: u32,
        deadline: Option<Deadline>,
    ) -> Result<Acquired, RawLockError> {
        if self
            .word()
            .compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(Acquired::Consistent);
        }
        self.take_contended(tid, deadline, true)
    }

    /// The slow path of a lock: spin while the holder is likely running and nobody sleeps, then
    /// sleep until woken, and again, until the word is taken or `deadline` passes.
    #[cold]
    pub(crate) fn take_contended(
        &self,
        tid: u32,
        deadline: Option<Deadline>,
        keep_owner_died: bool,
    ) -> Result<Acquired, RawLockError> {
        let word = self.word();
        let mut spin = SpinWait::new();
        loop {
            let v = word.load(Ordering::Relaxed);
            match owner(v) {
                0 => match self.take_now(tid, keep_owner_died) {
                    Err(RawLockError::WouldBlock) => {}
                    taken => return taken,
                },
                NOT_RECOVERABLE => return Err(RawLockError::NotRecoverable),
                o if o == tid => return Err(RawLockError::WouldDeadlock),
                _ => {
                    if v & WAITERS == 0 && spin.spin() {
                        continue;
                    }
                    self.sleep_while(v, deadline)?;
                    spin = SpinWait::new();
                    continue;
                }
            }
            // The word changed under the CAS: a peer keeping it changing must not keep a timed
            // call past its deadline.
            if deadline.is_some_and(|d| d.has_passed()) {
                return Err(RawLockError::TimedOut);
            }
        }
    }

    /// Sleeps while the word holds `seen` (a held value), counted in `sleepers` and after
    /// setting `WAITERS` in it. Returns when woken, or at once if the word changed; `Err` at the
    /// deadline.
    fn sleep_while(&self, seen: u32, deadline: Option<Deadline>) -> Result<(), RawLockError> {
        if deadline.is_some_and(|d| d.has_passed()) {
            return Err(RawLockError::TimedOut);
        }
        let word = self.word();
        let sleepers = &self.robust.sleepers;
        // Counted before anything of the word is read again (invariant 1).
        sleepers.fetch_add(1, Ordering::AcqRel);
        let sleep_on = seen | WAITERS;
        let slept = if seen != sleep_on
            && word
                .compare_exchange(seen, sleep_on, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            Ok(())
        } else {
            word.wait(sleep_on, deadline)
        };
        sleepers.fetch_sub(1, Ordering::AcqRel);
        match slept {
            Ok(()) | Err(Error::ValueChanged) => Ok(()),
            Err(Error::TimedOut) => Err(RawLockError::TimedOut),
            Err(err) => Err(RawLockError::Futex(err)),
        }
    }

    /// After a take that kept `WAITERS`, by the new holder: clears the bit if no thread is
    /// counted as about to sleep, and sets it back should one have come meanwhile (invariant
    /// 1). Read-modify-writes on `sleepers`, so that they are ordered with the waiters' adds.
    fn clear_waiters_if_none(&self) {
        let sleepers = &self.robust.sleepers;
        if sleepers.fetch_add(0, Ordering::AcqRel) == 0 {
            let word = self.word();
            word.fetch_and(!WAITERS, Ordering::Relaxed);
            if sleepers.fetch_add(0, Ordering::AcqRel) != 0 {
                word.fetch_or(WAITERS, Ordering::Relaxed);
            }
        }
    }

    /// Waits until nobody holds the word (or it is not recoverable), without taking it: a
    /// writer waiting for a reader slot, a reader waiting for the writer. Runs as a robust wait
    /// (a death of this thread after a wake passes the wake on). `wake_all_after_death`: a
    /// waiter that finds the holder died wakes every other waiter too, as the kernel woke only
    /// one and they all wait for the same thing.
    pub(crate) fn wait_while_held(
        &self,
        deadline: Option<Deadline>,
        wake_all_after_death: bool,
    ) -> Result<(), RawLockError> {
        robust::waiting(&self.robust, |tid| {
            let word = self.word();
            loop {
                let v = word.load(Ordering::Acquire);
                match owner(v) {
                    0 => {
                        if wake_all_after_death && v & OWNER_DIED != 0 && v & WAITERS != 0 {
                            let _ = word.wake(i32::MAX as u32);
                        }
                        return Ok(());
                    }
                    NOT_RECOVERABLE => return Ok(()),
                    o if o == tid => return Err(RawLockError::WouldDeadlock),
                    _ => self.sleep_while(v, deadline)?,
                }
            }
        })
    }

    /// The unlock's protocol, once the word is unlinked and named as the operation under way:
    /// releases and wakes up to `wake` sleepers (or all, if the lock is becoming not
    /// recoverable).
    pub(crate) fn release(&self, wake: u32) {
        let word = self.word();
        let addr = word.as_ptr();
        if word.load(Ordering::Relaxed) & OWNER_DIED != 0 {
            let before = word.swap(NOT_RECOVERABLE, Ordering::Release);
            if before & WAITERS != 0 {
                let _ = Futex::wake_at(addr, i32::MAX as u32);
            }
            return;
        }
        self.release_keeping(0, wake);
    }

    /// Releases a word this thread took without touching what it guards (a look, a write lock
    /// given up while waiting for readers): a death recorded in it stays recorded.
    pub(crate) fn release_untouched(&self, wake: u32) {
        self.release_keeping(OWNER_DIED, wake);
    }

    /// Clears the owner (and every bit but `WAITERS` and `keep`), then wakes up to `wake`
    /// sleepers if `WAITERS` was set. From the release on, the word is touched by address only.
    fn release_keeping(&self, keep: u32, wake: u32) {
        let word = self.word();
        let addr = word.as_ptr();
        let before = word.fetch_and(WAITERS | keep, Ordering::Release);
        if before & WAITERS != 0 {
            let _ = Futex::wake_at(addr, wake);
        }
    }
}

fn acquired(seen: u32) -> Acquired {
    if seen & OWNER_DIED != 0 {
        Acquired::OwnerDied
    } else {
        Acquired::Consistent
    }
}
