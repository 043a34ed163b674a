//! The mutex protocol, on one futex word. `futexkit::sync::Mutex` is this with std's API.
//!
//! ## State
//!
//! [`RawMutex`] is one 32-bit futex word holding one of five values:
//!
//! | value       | meaning                              | set by                                  | left by |
//! |-------------|--------------------------------------|-----------------------------------------|---------|
//! | `UNLOCKED`  | free                                 | an unlock that hands nothing off        | a thread taking the lock |
//! | `LOCKED`    | held; no wake owed (a sleeper left by a release is a woken thread's to mark for) | a thread taking a free lock before it has slept | the holder's unlock; a waiter about to sleep (to `CONTENDED`) or asking (to `ASKED`) |
//! | `CONTENDED` | held; threads may sleep on the word  | a waiter about to sleep; a thread that slept taking the lock or claiming a hand-off | the holder's unlock, which wakes a sleeper or hands off; an asking waiter (to `ASKED`) |
//! | `ASKED`     | held; threads may sleep, and an untimed waiter woken without the lock asks for it | that waiter (`src/fairness.rs` has the rule) | the holder's unlock, which hands off |
//! | `HANDED`    | held in trust for a thread that slept | an unlock handing the lock off          | a thread back from a sleep, claiming it (to `CONTENDED`) |
//!
//! Invariants, kept by the transitions below:
//!
//! 1. **No lost wakeup.** A thread sleeps only through `futex_wait` on the value it saw,
//!    `CONTENDED`, `ASKED` or `HANDED`, so it is asleep only while the word holds one of
//!    them or a release from one has yet to wake it. Every release from `CONTENDED` wakes a
//!    sleeper, and every other unlock of a word that sleepers may be on hands the lock to a
//!    thread that slept; that thread takes the lock as `CONTENDED`, never as `LOCKED`, so the
//!    unlock after it wakes the next. (As in std's futex mutex, a thread that takes a lock
//!    released by such an unlock before the woken one runs takes it as `LOCKED`; the woken one
//!    then finds it held and marks it `ASKED`, or `CONTENDED` if it is timed, before it sleeps
//!    again.)
//! 2. **Only the holder writes a held word**, except a waiter turning `LOCKED` into
//!    `CONTENDED`, or `LOCKED` or `CONTENDED` into `ASKED`. So an unlock finds `LOCKED` (no
//!    wake owed: release, no syscall), `CONTENDED` (release and wake one, or hand off; a CAS,
//!    as a waiter may turn it `ASKED` meanwhile) or `ASKED` (hand off; only the holder
//!    changes it).
//! 3. **A hand-off always has a claimer.** `ASKED` is written only by an untimed waiter,
//!    which never gives up: it claims `HANDED`, unless another thread back from a futex wait
//!    (woken, or finding the word changed) claimed it first. A fair unlock of a `CONTENDED`
//!    word wakes one *untimed* sleeper before it writes `HANDED`, and writes it only if that
//!    wake found one; else it releases. Either way, if the claimer looked before `HANDED` was
//!    written and went back to sleep, the unlock's second wake, after writing `HANDED`, or the
//!    changed word sends it (or another sleeper of its kind) back to claim it. Timed waiters
//!    sleep with a futex bitset of their own that hand-off wakes do not match, so a deadline
//!    never strands a hand-off. Once `HANDED` is written the unlocking thread no longer owns
//!    the lock and touches the word only by address: another thread may own it and free it by
//!    then.
//!
//! ## Transitions
//!
//! * **lock**: `UNLOCKED -> LOCKED` by one CAS. Else the slow path
//!   (`RawMutex::lock_contended`): while the word is `LOCKED` (the holder is likely running,
//!   nobody sleeps), spin ([`SpinWait`]) and take it when it turns `UNLOCKED`; then turn
//!   `LOCKED` into `CONTENDED` and sleep on what the word holds. After every wake: take
//!   `UNLOCKED` as `CONTENDED` or claim `HANDED`; an untimed waiter turns a held word `ASKED`
//!   and spins for the hand-off before it sleeps again (on the `ASKING_WAITER` bitset); a
//!   timed one spins again while `LOCKED`, or sleeps again.
//! * **unlock**: `LOCKED -> UNLOCKED` by one CAS. Else: from `ASKED`, write `HANDED` and
//!   wake an `ASKING_WAITER` sleeper; from `CONTENDED`, release and wake one sleeper, or, for
//!   a fair unlock (`unlock_fair`) that woke an untimed sleeper, write `HANDED` and wake once
//!   more.
//!
//! Policy lives apart from this mechanism: how long to spin in [`crate::spin`], when a waiter
//! asks for a hand-off in `src/fairness.rs`. Under a model checker the same code runs on the
//! emulated futex.

use core::fmt;
use std::time::{Duration, Instant};

use crate::atomic::Ordering;
use crate::deadlock::{LockId, Mode, Target, Wait};
use crate::futex::{Deadline, Error, Futex};
use crate::profile::LockKind;
use crate::spin::SpinWait;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;
const HANDED: u32 = 3;
const ASKED: u32 = 4;

/// The futex bitset untimed waiters sleep with: the only ones a fair unlock's hand-off wakes.
const UNTIMED_WAITER: u32 = 0b001;
/// The futex bitset timed waiters sleep with.
const TIMED_WAITER: u32 = 0b010;
/// In the bitset of an untimed waiter that asked for the lock, beside `UNTIMED_WAITER`: the
/// only ones a hand-off from `ASKED` wakes.
const ASKING_WAITER: u32 = 0b100;
/// Wakes any waiter.
const ANY_WAITER: u32 = UNTIMED_WAITER | TIMED_WAITER;

/// The lock without the data: one 32-bit futex word (its state table is at the top of
/// `src/raw/mutex.rs`). [`Mutex`](crate::sync::Mutex) is this plus a poison flag and the data; with the
/// `lock_api` feature it implements `lock_api::RawMutex` and `lock_api::RawMutexTimed`.
///
/// ```
/// use futexkit::raw::RawMutex;
///
/// let raw = RawMutex::new();
/// raw.lock();
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// assert!(raw.try_lock());
/// // SAFETY: taken just above.
/// unsafe { raw.unlock() };
/// ```
#[derive(Default)]
pub struct RawMutex {
    word: Futex,
    /// The deadlock checks' name for it (empty without the `deadlock` feature).
    id: LockId,
}

impl fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawMutex")
            .field("locked", &self.is_locked())
            .finish()
    }
}

impl RawMutex {
    crate::futex::sys::const_fn! {
        /// An unlocked mutex.
        pub const fn new() -> RawMutex {
            RawMutex {
                word: Futex::new(UNLOCKED),
                id: LockId::new(),
            }
        }
    }

    /// Blocks until this thread holds the lock.
    ///
    /// # Panics
    ///
    /// With the `deadlock` feature, if this thread holds the lock already
    /// ([`crate::deadlock`]).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn lock(&self) {
        self.checked_acquire(Wait::Untimed, || {
            self.take_free() || self.lock_contended(None)
        });
    }

    /// Takes the lock if it is free now; returns whether it did.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.checked_acquire(Wait::Bounded, || self.take_free())
    }

    /// Blocks until this thread holds the lock or `deadline` passes; returns whether it does.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(&self, deadline: Instant) -> bool {
        self.lock_bounded(Deadline::at(deadline))
    }

    /// Blocks until this thread holds the lock or `timeout` passes; returns whether it does.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        self.lock_bounded(Deadline::after(timeout))
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    fn lock_bounded(&self, deadline: Deadline) -> bool {
        self.checked_acquire(Wait::Bounded, || {
            self.take_free() || self.lock_contended(Some(deadline))
        })
    }

    /// An acquisition by `lock`, which returns whether it took the lock, as the deadlock
    /// checks see it (`src/deadlock/`; without the feature, `lock()`).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline(always)]
    fn checked_acquire(&self, wait: Wait, lock: impl FnOnce() -> bool) -> bool {
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, wait, lock)
    }

    /// The lock as the deadlock checks name it.
    #[inline(always)]
    fn checked(&self) -> Target<'_> {
        Target::local(crate::deadlock::LockKind::Mutex, &self.id)
    }

    /// A lock's fast path: `UNLOCKED -> LOCKED` by one CAS.
    #[inline]
    fn take_free(&self) -> bool {
        self.word
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases the lock, waking a sleeping waiter if there is one; or hands it to a waiter
    /// that was woken without getting it and asked for it (`src/fairness.rs`).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the lock (taken with `lock` or a successful `try_lock*`).
    #[inline]
    pub unsafe fn unlock(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        if !self.release_uncontended() {
            self.unlock_contended(false);
        }
    }

    /// Releases the lock as [`unlock`](RawMutex::unlock) does, except that when a thread sleeps
    /// in an untimed lock, the lock is handed over: only a thread back from a futex wait in a
    /// lock can take it (the one this unlock wakes, one woken before it, or one whose wait found
    /// the word changed), never one that has not waited yet.
    /// lock_api's `unlock_fair`. It is not a queue: the kernel wakes sleepers in arrival
    /// order, but a woken thread that finds the lock claimed by another sleeps again behind
    /// the rest. A hand-off costs the lock a wake-up's latency, during which nobody uses it;
    /// [`unlock`](RawMutex::unlock) hands off only to a waiter that was woken without getting
    /// the lock and asked for it, which is usually still spinning for it.
    ///
    /// Threads in a timed lock (`try_lock_for`, `try_lock_until`) are never woken for a
    /// hand-off, as one may give up at its deadline with the lock in trust for it (one that is
    /// running may still claim a handed lock): after a fair unlock with only those asleep, the
    /// lock is released and one of them is woken, as by `unlock`.
    ///
    /// # Safety
    ///
    /// As for [`unlock`](RawMutex::unlock): the calling thread must hold the lock.
    ///
    /// ```
    /// use futexkit::raw::RawMutex;
    ///
    /// let raw = RawMutex::new();
    /// raw.lock();
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock_fair() };
    /// assert!(raw.try_lock());
    /// // SAFETY: taken just above.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub unsafe fn unlock_fair(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        if !self.release_uncontended() {
            self.unlock_contended(true);
        }
    }

    /// An unlock's fast path: `LOCKED -> UNLOCKED` by one CAS, which fails if threads may sleep
    /// (`CONTENDED`: the slow path's business).
    #[inline]
    fn release_uncontended(&self) -> bool {
        self.word
            .compare_exchange(LOCKED, UNLOCKED, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether some thread holds the lock now (a snapshot).
    pub fn is_locked(&self) -> bool {
        self.word.load(Ordering::Relaxed) != UNLOCKED
    }

    /// The slow path of a lock (sampled by the contention profile, `src/profile.rs`).
    #[cold]
    fn lock_contended(&self, deadline: Option<Deadline>) -> bool {
        let lock = (self as *const RawMutex).cast();
        crate::profile::contended(LockKind::Mutex, lock, || self.wait_for_lock(deadline))
    }

    /// Spin while the holder is likely running and nobody sleeps, then sleep until woken, and
    /// again, until the lock is taken or `deadline` passes; an untimed waiter back from a
    /// sleep asks for the lock and spins for it. Returns whether this thread holds the lock.
    #[inline(always)]
    fn wait_for_lock(&self, deadline: Option<Deadline>) -> bool {
        // Until this thread sleeps, it takes a free lock as LOCKED; after, as CONTENDED, since
        // others may sleep still and this thread's unlock must wake the next (invariant 1).
        let mut slept = false;
        // Whether this thread asks for the lock: once back from a futex wait, if untimed
        // (`src/fairness.rs`); a timed waiter never asks, as it may give up with the lock
        // handed to it (invariant 3).
        let mut asking = false;
        let mut spin = SpinWait::new();
        loop {
            let taken_as = if slept { CONTENDED } else { LOCKED };
            let sleep_on = match self.word.load(Ordering::Relaxed) {
                UNLOCKED => {
                    if self.take(UNLOCKED, taken_as) {
                        return true;
                    }
                    continue;
                }
                HANDED if slept => {
                    if self.take(HANDED, CONTENDED) {
                        return true;
                    }
                    continue;
                }
                held @ (LOCKED | CONTENDED) if asking => {
                    // Asking acquires nothing: Relaxed. The hand-off's swap and the claim's
                    // CAS order the holder's writes before the claimer's reads.
                    let _ = self.word.compare_exchange(
                        held,
                        ASKED,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    continue;
                }
                ASKED if asking && spin.spin() => continue,
                LOCKED if spin.spin() => continue,
                LOCKED => {
                    if !self.take(LOCKED, CONTENDED) {
                        continue;
                    }
                    CONTENDED
                }
                // CONTENDED, ASKED, or HANDED to a thread that slept (this one has not).
                state => state,
            };
            if deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
            let bitset = match deadline {
                Some(_) => TIMED_WAITER,
                None if asking => UNTIMED_WAITER | ASKING_WAITER,
                None => UNTIMED_WAITER,
            };
            if self.word.wait_bitset(sleep_on, bitset, deadline) == Err(Error::TimedOut) {
                return false;
            }
            // Woken, or the word changed before the sleep: look again, spinning afresh.
            slept = true;
            asking = deadline.is_none();
            spin = SpinWait::new();
        }
    }

    /// One CAS of the word from `from` to `to`, with acquire ordering on success.
    #[inline]
    fn take(&self, from: u32, to: u32) -> bool {
        self.word
            .compare_exchange(from, to, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The slow path of an unlock: the word is `CONTENDED` or `ASKED`, and this thread
    /// holds the lock (invariant 2). Hands the lock off if a waiter asks for it (`ASKED`),
    /// or if `fair` and an untimed sleeper is woken; else releases it and wakes a sleeper.
    #[cold]
    fn unlock_contended(&self, fair: bool) {
        let addr = self.word.as_ptr();
        // The sleepers that may claim a hand-off: the waiters that asked, or the untimed ones.
        // Until the release or the hand-off, the lock is held, so the word is alive and the
        // fair unlock's first wake goes through `&self`.
        let claimer = if self.word.load(Ordering::Relaxed) == ASKED {
            ASKING_WAITER
        } else if fair && self.word.wake_bitset(1, UNTIMED_WAITER) == Ok(1) {
            UNTIMED_WAITER
        } else {
            match self.word.compare_exchange(
                CONTENDED,
                UNLOCKED,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                // From here another thread may own the lock and free it: wake by address
                // only, the sleeper that takes the lock next.
                Ok(_) => {
                    let _ = Futex::wake_bitset_at(addr, 1, ANY_WAITER);
                    return;
                }
                // A waiter asked meanwhile (the only change a waiter makes to CONTENDED).
                Err(_) => ASKING_WAITER,
            }
        };
        // A swap, not a store: a waiter may be turning CONTENDED into ASKED meanwhile, and
        // the hand-off must come after that in the word's order.
        self.word.swap(HANDED, Ordering::Release);
        // Wake by address only (as above): the claimer, if it sleeps still or went back to
        // sleep too early (invariant 3).
        let _ = Futex::wake_bitset_at(addr, 1, claimer);
    }
}
