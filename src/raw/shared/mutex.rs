//! The process-shared, robust mutex protocol, on one robust word (`src/futex/robust.rs`).
//! `futexkit::shared::SharedMutex` is this with a typed value and guards.
//!
//! ## State
//!
//! [`RawSharedMutex`] is one 32-bit futex word in shared memory and the robust-list entry the
//! kernel reads when a holder dies:
//!
//! | field | meaning | set by | cleared by |
//! |-------|---------|--------|------------|
//! | word bits 0-29 `owner` | the holder's thread id; 0: free; `NOT_RECOVERABLE` (all ones, an id no thread has): never lockable again | a locker's CAS from free | the holder's unlock; the kernel, when the holder dies |
//! | word bit 31 `WAITERS` | threads may sleep on the word: its release must wake one | a waiter, before it sleeps (on a word it then finds free, a stray bit); a woken waiter, in the CAS that takes the word, or as it gives up on a held word; a barrier party, for good (`barrier.rs`); kept by the kernel at a death, and by every take of a word with `OWNER_DIED` | every release (which then wakes one); a take in passing of a word without `OWNER_DIED` (a stray bit) |
//! | word bit 30 `OWNER_DIED` | a holder died holding the lock: the data may be inconsistent | the kernel, as the holder dies | [`mark_consistent`](RawSharedMutex::mark_consistent); an unlock without it makes the word `NOT_RECOVERABLE`; a take that forgets deaths (a reader slot: readers change nothing) |
//!
//! Invariants:
//!
//! 1. **No lost wakeup.** A thread sleeps only on a value with `WAITERS` set, and every
//!    release of such a value wakes one sleeper. A release clears the bit (as glibc's does), so
//!    the thread it wakes carries the bit on for the sleepers that may be left: it takes the
//!    word with `WAITERS` (as std's futex mutex takes it `CONTENDED` after a sleep), or sets it
//!    again before it sleeps again; one that leaves without the word (a deadline, a waiter that
//!    only waits for the word to be free) sets it on a held word or wakes one sleeper of a free
//!    one. A thread that takes the word in passing, never woken, takes it without the bit: the
//!    sleepers left are the woken thread's to mark for, and a lock taken and released in
//!    passing costs no wake.
//! 2. **Deaths.** Every operation runs with the word named as the thread's robust operation under
//!    way, and a held word is linked in the thread's robust list (`robust.rs`). So whenever a
//!    thread dies: if its id is in the word, the kernel sets `OWNER_DIED` (keeping `WAITERS`,
//!    clearing the id) and wakes one waiter if `WAITERS` was set; if the word is free and the
//!    thread was in an operation on it (a release before its wake, a woken waiter before it took
//!    the lock), the kernel wakes one waiter. That one wake is all a death can get, and is
//!    enough where a release wakes one, as the kernel keeps `WAITERS` in a dead holder's word
//!    and every take keeps it in a word with `OWNER_DIED` (as glibc's does), so the next
//!    release wakes again; where one must wake all (`NOT_RECOVERABLE`, whose owner bits are not
//!    0, and a writer's release, for every reader), the store and the wake are one
//!    `FUTEX_WAKE_OP`, and a release by CAS is made only while no wake is owed (`WAITERS`
//!    clear: the sleepers left, if any, are a woken thread's to mark for). Two deaths the
//!    kernel cannot pass on, both while a thread that took the word in passing holds it: a
//!    woken waiter's, before it ran, and a releaser's, between its release and its wake (the
//!    word it named as pending is not free). That holder's release wakes nobody, so every
//!    sleep lasts at most `RECHECK`, after which the sleeper looks at the word again: either
//!    death delays the sleepers left by at most that, never strands them (glibc's robust mutex
//!    strands them until the lock is next contended). Under a model checker, where nobody dies, sleeps are
//!    untimed, so that a lost wakeup shows as a deadlock there.
//! 3. **A death is reported once per inconsistency.** The thread that takes a word with
//!    `OWNER_DIED` set gets [`Acquired::OwnerDied`] and keeps the bit while it holds the lock,
//!    so if it dies too, the next one is told again. [`mark_consistent`](RawSharedMutex::mark_consistent)
//!    clears it; an unlock with the bit still set stores `NOT_RECOVERABLE` and wakes every
//!    sleeper, and every lock from then on fails with [`RawLockError::NotRecoverable`]
//!    (pthread's `EOWNERDEAD` and `ENOTRECOVERABLE`).
//!
//! ## Transitions
//!
//! * **lock**: free → this thread's id, keeping `OWNER_DIED` (and then `WAITERS`), by one CAS.
//!   Else, while the word is held without `WAITERS`, spin ([`SpinWait`]); then set `WAITERS`
//!   and, if the word is still held, sleep on what it holds, for at most `RECHECK`. Once woken,
//!   a thread takes the word with `WAITERS`. A woken thread looks again before it minds its
//!   deadline, and passes its wake on before it gives up (`WAITERS` on a held word, a wake on
//!   a free one), so a wake it was given is never dropped.
//! * **unlock**: with `OWNER_DIED` set, store `NOT_RECOVERABLE` and wake all. Else clear the
//!   owner and `WAITERS` (one `fetch_and`), and wake one sleeper if `WAITERS` was set. A
//!   thread that took the word and leaves without touching the data (a look, a writer giving
//!   up) releases it keeping `OWNER_DIED`.
//!
//! After the release, the unlock touches the word only by address (the wake), which is harmless
//! should the memory be gone by then. Everything is atomic, and every loop that another
//! process could keep going by changing the word checks the deadline, so a peer that scribbles
//! the word can make calls fail or wait, but a timed call returns by its deadline.

use core::fmt;
use std::time::Duration;

use crate::atomic::Ordering;
use crate::deadlock::{Mode, Target, Wait};
use crate::futex::pi_bits::{OWNER_DIED, TID_MASK, WAITERS};
use crate::futex::robust::{self, RobustWord, Unsupported};
use crate::futex::sys::MODEL_CHECKED;
use crate::futex::{Deadline, Error, Futex, Shared};
use crate::spin::SpinWait;

/// The owner bits of a word that can never be taken again: an id no thread has (Linux's
/// `pid_max` is at most 2^22).
pub(crate) const NOT_RECOVERABLE: u32 = TID_MASK;

/// The longest a sleeper sleeps before it looks at the word again, woken or not: the longest
/// a woken waiter killed before it ran can keep the other sleepers waiting for a free lock
/// (invariant 2). A sleeper that looks and finds the lock held sleeps again, so a longer one
/// costs a sleeper one wake-up per `RECHECK`.
const RECHECK: Duration = Duration::from_millis(100);

/// When a sleep for the word ends without a wake: at `deadline`, or at the next `RECHECK` if
/// that is sooner. Untimed where `deadline` is none under a model checker, where nobody dies
/// and a recheck would hide a lost wakeup.
pub(crate) fn recheck_by(deadline: Option<Deadline>) -> Option<Deadline> {
    if MODEL_CHECKED {
        return deadline;
    }
    match deadline {
        Some(d) if d.remaining() <= RECHECK => Some(d),
        _ => Some(Deadline::after(RECHECK)),
    }
}

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
/// Dropping one that the dropping thread holds unlocks it. Dropping one that another live
/// thread of this process holds (its guard leaked) aborts the process: that thread's robust
/// list, which the kernel walks when the thread dies, would run through the freed memory.
///
/// ```
/// use futexkit::raw::{Acquired, RawSharedMutex};
///
/// // SAFETY: kept in this frame, never moved (shared memory is where it belongs: `from_ptr`).
/// let raw = unsafe { RawSharedMutex::new() };
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

impl Drop for RawSharedMutex {
    /// A mutex dropped while a thread of this process holds it (its guard leaked with
    /// `mem::forget`, or `lock` without `unlock`) is still linked in that thread's robust list,
    /// which the kernel walks when the thread dies, reading each entry's link in the lock's own
    /// memory. This thread's hold is released here. Another live thread's cannot be unlinked
    /// from here, so the process aborts rather than leave that thread's list running through
    /// freed memory. (A region's locks are never dropped: a region whose lock is held keeps its
    /// mapping instead, `Region`'s `Drop`.)
    ///
    /// This thread's list is asked first, not the word, which a peer may have overwritten.
    fn drop(&mut self) {
        if robust::holds(&self.robust) {
            // SAFETY: this thread holds the lock, and `self` stays valid until `drop` returns.
            unsafe { self.unlock() };
            return;
        }
        // A word naming this thread, which holds nothing here, was written by a peer (unless
        // this thread's list is gone: then it may be a leaked hold, and counts as one).
        let Some(holder) = self
            .holder()
            .filter(|&tid| tid != crate::futex::current_tid() || !robust::can_tell_holds())
        else {
            return;
        };
        let ours = crate::futex::sys::process::thread_ids();
        if ours.map_or(true, |ours| ours.contains(&holder)) {
            eprintln!(
                "futexkit: a RawSharedMutex was dropped while thread {holder} of this process \
                 holds it (a leaked guard); its robust-list entry would point into freed memory"
            );
            std::process::abort();
        }
    }
}

impl RawSharedMutex {
    crate::futex::sys::const_fn! {
        /// An unlocked mutex.
        ///
        /// # Safety
        ///
        /// From the first time a thread of this process locks it until it is dropped, the
        /// value must stay at its address, and its memory must not be freed or reused without
        /// dropping it (moved out of its place, or `mem::forget` and then freed): the thread's
        /// robust list, which the kernel walks when the thread dies, holds that address until
        /// the lock is released (`Drop` releases this thread's, and aborts the process if
        /// another thread's remain). So put it where it stays before locking it: in shared
        /// memory ([`from_ptr`](Self::from_ptr)), a `Box`, an `Arc` or a `static`, never to be
        /// moved out. A value made on the stack, locked, then moved would leave the robust list
        /// pointing at the stack slot it left, which is why this is not a safe function:
        ///
        /// ```compile_fail,E0133
        /// let m = futexkit::raw::RawSharedMutex::new();
        /// ```
        pub const unsafe fn new() -> RawSharedMutex {
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
    /// all zeros) in memory that stays mapped, readable and writable for `'a`, until every
    /// call on it has returned, and while a thread of this process holds it (its robust list
    /// holds the address: [`new`](Self::new)); every process that maps it must access those 40
    /// bytes only through a `RawSharedMutex`, or atomically, and be in this process's pid
    /// namespace (the word holds thread ids: a [`Region`](crate::shared::Region) checks this,
    /// raw memory cannot). Another process may write any value into it (that makes calls fail
    /// or wait, never unsound), but must not unmap or truncate it under this process (a sealed
    /// memfd rules that out).
    pub unsafe fn from_ptr<'a>(ptr: *const RawSharedMutex) -> &'a RawSharedMutex {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access; the type is
        // all atomics (its reserved space included).
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
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn lock(&self) -> Result<Acquired, RawLockError> {
        let lock = || robust::acquire(&self.robust, |tid| self.take(tid, None));
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Untimed, lock)
    }

    /// The lock as the deadlock checks name it.
    #[inline(always)]
    fn checked(&self) -> Target<'static> {
        Target::shared(crate::deadlock::LockKind::SharedMutex, self)
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`RawLockError::WouldBlock`] if another thread holds it; otherwise as
    /// [`lock`](Self::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock(&self) -> Result<Acquired, RawLockError> {
        let lock = || robust::acquire(&self.robust, |tid| self.take_now(tid, true));
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Bounded, lock)
    }

    /// Blocks until this thread holds the lock or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`RawLockError::TimedOut`]; otherwise as [`lock`](Self::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Acquired, RawLockError> {
        self.try_lock_until(Deadline::after(timeout))
    }

    /// Blocks until this thread holds the lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`RawLockError::TimedOut`]; otherwise as [`lock`](Self::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(&self, deadline: Deadline) -> Result<Acquired, RawLockError> {
        let lock = || robust::acquire(&self.robust, |tid| self.take(tid, Some(deadline)));
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Bounded, lock)
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
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
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

    /// Whether a thread of this process holds the lock, as far as `ours` (this process's thread
    /// ids, `None` where they cannot be read: then any holder counts) tells.
    pub(crate) fn held_by_one_of(&self, ours: Option<&[u32]>) -> bool {
        self.holder()
            .is_some_and(|tid| ours.map_or(true, |ours| ours.contains(&tid)))
    }

    /// Whether the lock can never be taken again.
    pub fn is_not_recoverable(&self) -> bool {
        owner(self.word().load(Ordering::Relaxed)) == NOT_RECOVERABLE
    }

    /// One attempt (a few, should the word change under the CAS): takes the word in passing
    /// if it is free. `keep_owner_died`: whether a death stays recorded in the word (a mutex),
    /// or is forgotten (a reader slot, whose holders never change the data).
    pub(crate) fn take_now(
        &self,
        tid: u32,
        keep_owner_died: bool,
    ) -> Result<Acquired, RawLockError> {
        self.take_free(tid, keep_owner_died, false)
    }

    /// [`take_now`](Self::take_now), keeping `OWNER_DIED`, with `WAITERS` set in the same
    /// step: a word whose holder's death must wake a sleeper from the moment it is taken (a
    /// barrier party's).
    pub(crate) fn take_now_marked(&self, tid: u32) -> Result<Acquired, RawLockError> {
        self.take_free(tid, true, true)
    }

    /// [`take_now`](Self::take_now) for a thread that has been `woken`, which takes the word
    /// with `WAITERS`: sleepers may be left, and its release must wake one (invariant 1).
    fn take_free(
        &self,
        tid: u32,
        keep_owner_died: bool,
        woken: bool,
    ) -> Result<Acquired, RawLockError> {
        let word = self.word();
        let kept = if keep_owner_died { OWNER_DIED } else { 0 };
        let waiters = if woken { WAITERS } else { 0 };
        for _ in 0..16 {
            let v = word.load(Ordering::Relaxed);
            match owner(v) {
                0 => {
                    // After a death the kernel woke one sleeper and kept `WAITERS` for the
                    // rest: the bit stays (as glibc keeps it), whoever takes the word.
                    let after_death = if v & OWNER_DIED != 0 { v & WAITERS } else { 0 };
                    let taken = tid | (v & kept) | waiters | after_death;
                    if word
                        .compare_exchange(v, taken, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
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
        let word = self.word();
        if word.load(Ordering::Acquire) == 0
            && word
                .compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return Ok(Acquired::Consistent);
        }
        self.take_contended(tid, deadline, true)
    }

    /// The slow path of a lock (sampled by the contention profile, `src/profile.rs`).
    #[cold]
    pub(crate) fn take_contended(
        &self,
        tid: u32,
        deadline: Option<Deadline>,
        keep_owner_died: bool,
    ) -> Result<Acquired, RawLockError> {
        let lock = (self as *const RawSharedMutex).cast();
        crate::profile::contended(crate::profile::LockKind::Shared, lock, || {
            self.wait_for_word(tid, deadline, keep_owner_died)
        })
    }

    /// Spin while the holder is likely running and nobody sleeps, then sleep until woken, and
    /// again, until the word is taken or `deadline` passes.
    #[inline(always)]
    fn wait_for_word(
        &self,
        tid: u32,
        deadline: Option<Deadline>,
        keep_owner_died: bool,
    ) -> Result<Acquired, RawLockError> {
        let word = self.word();
        let mut spin = SpinWait::new();
        // Once woken, this thread carries `WAITERS` on for the sleepers left (invariant 1).
        let mut woken = false;
        loop {
            let v = word.load(Ordering::Relaxed);
            match owner(v) {
                0 => match self.take_free(tid, keep_owner_died, woken) {
                    Err(RawLockError::WouldBlock) => {}
                    taken => return taken,
                },
                NOT_RECOVERABLE => return Err(RawLockError::NotRecoverable),
                o if o == tid => return Err(RawLockError::WouldDeadlock),
                // A timed waiter that was not woken owes nobody a wake: at its deadline it
                // leaves without spinning or marking the word.
                _ if !woken && deadline.is_some_and(|d| d.has_passed()) => {
                    return Err(RawLockError::TimedOut)
                }
                _ => {
                    if v & WAITERS == 0 && spin.spin() {
                        continue;
                    }
                    spin = SpinWait::new();
                    if self.sleep_while_held(deadline)? {
                        // A woken thread looks again before it minds its deadline.
                        woken = true;
                        continue;
                    }
                }
            }
            // The word changed under the CAS, or was free or changed when this thread came to
            // sleep: a peer keeping it changing must not keep a timed call past its deadline.
            if deadline.is_some_and(|d| d.has_passed()) {
                if woken {
                    self.pass_wake_on();
                }
                return Err(RawLockError::TimedOut);
            }
        }
    }

    /// For a woken thread that leaves without the word: the wake it was given goes on to the
    /// next sleeper, by `WAITERS` on a held word (its holder's release wakes one) or by a wake
    /// on a free one (a bit on a free word is dropped by the next take in passing).
    fn pass_wake_on(&self) {
        let word = self.word();
        if owner(word.fetch_or(WAITERS, Ordering::Relaxed)) == 0 {
            let _ = word.wake(1);
        }
    }

    /// Sets `WAITERS` in the word and, if the word is still held, sleeps on what it holds, for
    /// at most `RECHECK`. Returns whether it was woken (`false`: the word changed or is free,
    /// or the recheck came); `Err` at the deadline, with `WAITERS` left set, so that a wake
    /// this thread was given goes on to the next sleeper when the holder releases.
    fn sleep_while_held(&self, deadline: Option<Deadline>) -> Result<bool, RawLockError> {
        let word = self.word();
        let before = word.fetch_or(WAITERS, Ordering::Relaxed);
        if matches!(owner(before), 0 | NOT_RECOVERABLE) {
            return Ok(false);
        }
        if deadline.is_some_and(|d| d.has_passed()) {
            return Err(RawLockError::TimedOut);
        }
        match word.wait(before | WAITERS, recheck_by(deadline)) {
            Ok(()) => Ok(true),
            Err(Error::ValueChanged) => Ok(false),
            Err(Error::TimedOut) if deadline.is_some_and(|d| d.has_passed()) => {
                Err(RawLockError::TimedOut)
            }
            Err(Error::TimedOut) => Ok(false),
            Err(err) => Err(RawLockError::Futex(err)),
        }
    }

    /// Waits until nobody holds the word (or it is not recoverable), without taking it: a
    /// writer waiting for a reader slot, a reader waiting for the writer. Runs as a robust wait
    /// (a death of this thread after a wake passes the wake on).
    ///
    /// A release wakes one sleeper on the assumption that it takes the word; this waiter does
    /// not, so with `pass_on` a wake it was given goes on to the next sleeper, if there is one
    /// (a reader waiting for the same slot as the writer). With `wake_all_after_death`
    /// a waiter that finds the holder died wakes every other waiter: the kernel woke only one,
    /// and they all wait for the same thing.
    pub(crate) fn wait_while_held(
        &self,
        deadline: Option<Deadline>,
        pass_on: bool,
        wake_all_after_death: bool,
    ) -> Result<(), RawLockError> {
        robust::waiting(&self.robust, |tid| {
            let word = self.word();
            let mut woken = false;
            loop {
                let v = word.load(Ordering::Acquire);
                match owner(v) {
                    0 => {
                        if wake_all_after_death && v & OWNER_DIED != 0 && v & WAITERS != 0 {
                            let _ = word.wake(i32::MAX as u32);
                        } else if pass_on && woken {
                            let _ = word.wake(1);
                        }
                        return Ok(());
                    }
                    NOT_RECOVERABLE => return Ok(()),
                    o if o == tid => return Err(RawLockError::WouldDeadlock),
                    // Sticky: a wake this thread was given is passed on however many times it
                    // finds the word taken again before it is free.
                    _ => {
                        if self.sleep_while_held(deadline)? {
                            woken = true;
                        } else if deadline.is_some_and(|d| d.has_passed()) {
                            // The word was free or changed when this thread came to sleep: a
                            // peer keeping it changing must not keep a timed wait past its
                            // deadline.
                            if pass_on && woken {
                                self.pass_wake_on();
                            }
                            return Err(RawLockError::TimedOut);
                        }
                    }
                }
            }
        })
    }

    /// The unlock's protocol, once the word is unlinked and named as the operation under way:
    /// releases and wakes up to `wake` sleepers, or, if the lock is becoming not recoverable,
    /// stores `NOT_RECOVERABLE` and wakes all of them in one kernel call (a thread that died
    /// between the two would leave them asleep: the kernel wakes nobody for a word whose owner
    /// bits are not 0).
    pub(crate) fn release(&self, wake: u32) {
        let word = self.word();
        if word.load(Ordering::Relaxed) & OWNER_DIED != 0 {
            // All ones: NOT_RECOVERABLE's owner bits (and WAITERS and OWNER_DIED, which change
            // nothing then).
            if word.store_and_wake(u32::MAX, i32::MAX as u32).is_err() {
                // Once per lock: wake all whether or not the bit says anyone sleeps.
                word.store(u32::MAX, Ordering::Release);
                let _ = Futex::wake_at(word.as_ptr(), i32::MAX as u32);
            }
            return;
        }
        self.release_keeping(0, wake);
    }

    /// [`unlock`](Self::unlock) for a look that took the lock and changed nothing (`Debug`): a
    /// death recorded in the word stays recorded.
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock).
    pub(crate) unsafe fn unlock_untouched(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        robust::release(&self.robust, |_| self.release_untouched(1));
    }

    /// Releases a word this thread took without touching what it guards (a look, a write lock
    /// given up while waiting for readers): a death recorded in it stays recorded.
    pub(crate) fn release_untouched(&self, wake: u32) {
        self.release_keeping(OWNER_DIED, wake);
    }

    /// Clears the owner and `WAITERS` (every bit but `keep`), then wakes up to `wake` sleepers
    /// if `WAITERS` was set. From the release on, the word is touched by address only.
    ///
    /// A release that wakes one needs nothing more: should this thread die between the release
    /// and the wake, the kernel wakes one waiter of the free word it named as pending. One
    /// that wakes more (a writer's, for every reader) releases and wakes in one kernel call
    /// whenever anyone may sleep, and releases by CAS only while nobody can.
    fn release_keeping(&self, keep: u32, wake: u32) {
        let word = self.word();
        let addr = word.as_ptr();
        if wake > 1 {
            for _ in 0..16 {
                let v = word.load(Ordering::Relaxed);
                if v & WAITERS != 0 {
                    if word.store_and_wake(v & keep, wake).is_ok() {
                        return;
                    }
                    break;
                }
                if word
                    .compare_exchange(v, v & keep, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            }
        }
        let before = word.fetch_and(keep, Ordering::Release);
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
