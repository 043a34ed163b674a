//! The mutex protocol, on one futex word. `futexkit::sync::Mutex` is this with std's API.
//!
//! ## State
//!
//! [`RawMutex`] is one 32-bit futex word: a state in its low three bits and, in `ASKED` and
//! `HANDED`, a waiter's ticket (`src/fairness.rs`) in the rest. `ASKED(t)` and `HANDED(t)`
//! below name the waiter with ticket `t`; `HANDED(0)` names none.
//!
//! | value       | meaning                              | set by                                  | left by |
//! |-------------|--------------------------------------|-----------------------------------------|---------|
//! | `UNLOCKED`  | free                                 | an unlock that hands nothing off        | a thread taking the lock |
//! | `LOCKED`    | held; no wake owed (a sleeper left by a release is a woken thread's to mark for) | a thread taking a free lock before it has slept | the holder's unlock; a waiter about to sleep (to `CONTENDED`) or asking (to `ASKED`) |
//! | `CONTENDED` | held; threads may sleep on the word  | a waiter about to sleep, or a timed one giving up after a sleep; a thread that went to its futex wait (woken or not) taking the lock or claiming a hand-off | the holder's unlock, which wakes a sleeper or hands off; an asking waiter (to `ASKED`) |
//! | `ASKED(t)`  | held; threads may sleep, and waiter `t`, woken without the lock, asks for it | waiter `t`, in place of `LOCKED`, `CONTENDED` or an `ASKED` naming a younger waiter (`src/fairness.rs` has the rule) | the holder's unlock, which hands off to `t`; an older untimed woken waiter (to its own `ASKED`) |
//! | `HANDED(t)` | held in trust for waiter `t`, or for any thread woken from a sleep if `t` is 0 | an unlock handing the lock off          | `t` or an older untimed woken waiter (any woken thread, for 0), claiming it (to `CONTENDED`) |
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
//!    `CONTENDED`, or `LOCKED`, `CONTENDED` or an `ASKED` into its own `ASKED`. So an unlock
//!    finds `LOCKED` (no wake owed: release, no syscall), `CONTENDED` (release and wake one,
//!    or hand off; a CAS, as a waiter may ask meanwhile) or `ASKED` (hand off, keeping the
//!    ticket, which a waiter may change meanwhile but never the state).
//! 3. **A hand-off always has a claimer.** `ASKED(t)` is written only by waiter `t`, untimed
//!    and woken from a sleep, which never gives up: it claims `HANDED(t)` unless an older
//!    untimed woken waiter claims it first (that one takes the lock, and `t` asks again).
//!    Until then `t` spins, or sleeps on its own `ASKED(t)` with the `ASKING_WAITER` bitset,
//!    and every hand-off from `ASKED` wakes every sleeper with that bitset (a waiter whose
//!    `ASKED` an older one replaced may sleep with it still).
//!    A fair unlock of a `CONTENDED` word wakes one *untimed* sleeper before it writes
//!    `HANDED(0)`, and writes it only if that wake found one; the woken thread looks at the
//!    word before it sleeps again, and an untimed waiter woken from a sleep sleeps again only
//!    on an `ASKED` or `HANDED` word, so it claims the hand-off unless another thread woken
//!    from a sleep did; if it or another asked first, the unlock hands the lock to the asker
//!    named instead.
//!    Timed waiters sleep with a futex bitset of their own that hand-off wakes do not match,
//!    never ask, and claim only `HANDED(0)`, so a deadline never strands a hand-off. Once
//!    `HANDED` is written the unlocking thread no longer owns the lock and touches the word
//!    only by address: another thread may own it and free it by then.
//!
//! ## Transitions
//!
//! * **lock**: `UNLOCKED -> LOCKED` by one CAS. Else the slow path
//!   (`RawMutex::lock_contended`): while the word is `LOCKED` (the holder is likely running,
//!   nobody sleeps), spin ([`SpinWait`]) and take it when it turns `UNLOCKED`; then turn
//!   `LOCKED` into `CONTENDED`, take a ticket and sleep on what the word holds. After every
//!   return from a sleep: take `UNLOCKED` as `CONTENDED`. A thread woken from a sleep also
//!   claims a hand-off that names nobody; if untimed, also one that names it or a younger
//!   waiter, and it asks for a held word (its `ASKED` in place of `LOCKED`, `CONTENDED` or a
//!   younger waiter's `ASKED`), then spins for the hand-off before it sleeps again (with the
//!   `ASKING_WAITER` bitset); behind an older waiter's `ASKED` or hand-off it sleeps again at
//!   once. A timed one spins again while `LOCKED`, or sleeps again. A timed waiter leaves at
//!   its deadline: before its first sleep without spinning or writing the word (unless the
//!   deadline comes between its turning `LOCKED` into `CONTENDED` and its sleep: a stray
//!   wake for the next unlock), after one with the word `CONTENDED` if it is held, at once.
//! * **unlock**: `LOCKED -> UNLOCKED` by one CAS. Else: from `ASKED(t)`, write `HANDED(t)`
//!   and wake the `ASKING_WAITER` sleepers; from `CONTENDED`, release and wake one sleeper,
//!   or, for a fair unlock (`unlock_fair`) that woke an untimed sleeper, write `HANDED(0)`
//!   (or `HANDED(t)` if waiter `t` asked meanwhile, waking as above).
//!
//! Policy lives apart from this mechanism: how long to spin in [`crate::spin`], who asks and
//! whom a hand-off names in `src/fairness.rs`. Under a model checker the same code runs on the
//! emulated futex.

use core::fmt;
use std::time::{Duration, Instant};

use crate::atomic::Ordering;
use crate::deadlock::{LockId, Mode, Target, Wait};
use crate::fairness;
use crate::futex::{Deadline, Error, Futex};
use crate::profile::LockKind;
use crate::spin::SpinWait;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;
const HANDED: u32 = 3;
const ASKED: u32 = 4;
/// The bits of the word that hold its state; the rest hold a ticket, in `ASKED` and `HANDED`.
const STATE: u32 = 0b111;
/// Where a word's ticket starts.
const TICKET_SHIFT: u32 = 3;
const _: () = assert!(TICKET_SHIFT + fairness::TICKET_BITS == 32 && STATE >> TICKET_SHIFT == 0);

/// `state` naming the waiter with `ticket` (0: none).
const fn naming(state: u32, ticket: u32) -> u32 {
    state | ticket << TICKET_SHIFT
}

/// The futex bitset untimed waiters sleep with: the only ones a fair unlock's hand-off wakes.
const UNTIMED_WAITER: u32 = 0b001;
/// The futex bitset timed waiters sleep with.
const TIMED_WAITER: u32 = 0b010;
/// In the bitset of an untimed waiter asleep on an `ASKED` word that named it, beside
/// `UNTIMED_WAITER`: the ones a hand-off from `ASKED` wakes, all of them (the waiter named, and
/// any it named before an older waiter took its place).
const ASKING_WAITER: u32 = 0b100;
/// Wakes any waiter.
const ANY_WAITER: u32 = UNTIMED_WAITER | TIMED_WAITER;

/// The lock without the data: one 32-bit futex word (its state table is at the top of
/// `src/raw/mutex.rs`). [`Mutex`](crate::sync::Mutex) is this plus a poison flag and the data;
/// with the `lock_api` feature it implements `lock_api::RawMutex` and `lock_api::RawMutexTimed`.
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
    /// (the `deadlock` module).
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

    /// Releases the lock as [`unlock`](RawMutex::unlock) does, except that when a thread sleeps in
    /// an untimed lock, the lock is handed over: only a thread woken from a futex wait in a lock
    /// can take it (the one this unlock wakes, or one woken before it; or the waiter that asked for
    /// it, if one did), never one that has not been woken. lock_api's `unlock_fair`. It is not a
    /// strict queue: the kernel wakes sleepers in arrival order, and an untimed woken thread that
    /// finds the lock claimed by another asks for it, the one that slept first winning
    /// (`src/fairness.rs` bounds how often a waiter is passed over). A hand-off costs the lock a
    /// wake-up's latency, during which nobody uses it; [`unlock`](RawMutex::unlock) hands off only
    /// to a waiter that was woken without getting the lock and asked for it, which is usually still
    /// spinning for it.
    ///
    /// Threads in a timed lock (`try_lock_for`, `try_lock_until`) are never woken for a
    /// hand-off, as one may give up at its deadline with the lock in trust for it (one woken
    /// earlier in its lock call may still claim a hand-off that names nobody): after a fair
    /// unlock with only those asleep, the lock is released and one of them is woken, as by
    /// `unlock`.
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
    /// or a waiter asks (`CONTENDED`, `ASKED`: the slow path's business).
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
    /// again, until the lock is taken or `deadline` passes; an untimed waiter woken from a
    /// sleep asks for the lock and spins for it. Returns whether this thread holds the lock.
    #[inline(always)]
    fn wait_for_lock(&self, deadline: Option<Deadline>) -> bool {
        // Until this thread sleeps, it takes a free lock as LOCKED; after, as CONTENDED, since
        // others may sleep still and this thread's unlock must wake the next (invariant 1).
        let mut slept = false;
        // Whether a futex wake ended one of this thread's sleeps: then it claims a hand-off
        // that names nobody and, if untimed, asks and claims one that names it or a younger
        // waiter (`src/fairness.rs`). A timed waiter never asks, as it may give up with the
        // lock handed to it (invariant 3).
        let mut woken = false;
        let asks = deadline.is_none();
        // Taken before the first sleep; 0 names nobody.
        let mut ticket = 0;
        let mut spin = SpinWait::new();
        loop {
            let word = self.word.load(Ordering::Relaxed);
            let named = word >> TICKET_SHIFT;
            let late = deadline.is_some_and(|d| d.has_passed());
            let sleep_on = match word & STATE {
                UNLOCKED => {
                    if self.take(word, if slept { CONTENDED } else { LOCKED }) {
                        return true;
                    }
                    continue;
                }
                HANDED
                    if woken
                        && (named == 0
                            || named == ticket
                            || (asks && fairness::older(ticket, named))) =>
                {
                    if self.take(word, CONTENDED) {
                        return true;
                    }
                    continue;
                }
                LOCKED | CONTENDED if woken && asks => {
                    self.ask(word, ticket);
                    continue;
                }
                ASKED if woken && asks && fairness::older(ticket, named) => {
                    self.ask(word, ticket);
                    continue;
                }
                // A timed waiter that has not slept has changed nothing and owes nothing: at
                // its deadline it leaves without spinning or marking the word. (One that slept
                // marks a held word below before it leaves: it may have taken the wake owed to
                // the sleepers behind it, invariant 1.)
                _ if late && !slept => return false,
                // Named by the word: spin for the hand-off.
                ASKED if named == ticket && spin.spin() => continue,
                LOCKED if !late && spin.spin() => continue,
                LOCKED => {
                    if !self.take(LOCKED, CONTENDED) {
                        continue;
                    }
                    CONTENDED
                }
                // CONTENDED, ASKED, or HANDED that this thread may not claim.
                _ => word,
            };
            if deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
            if ticket == 0 {
                ticket = fairness::ticket();
            }
            let bitset = match deadline {
                Some(_) => TIMED_WAITER,
                None if sleep_on == naming(ASKED, ticket) => UNTIMED_WAITER | ASKING_WAITER,
                None => UNTIMED_WAITER,
            };
            match self.word.wait_bitset(sleep_on, bitset, deadline) {
                Err(Error::TimedOut) => return false,
                Ok(()) => woken = true,
                // The word changed before the sleep: not a wake.
                Err(_) => {}
            }
            // Look again, spinning afresh.
            slept = true;
            spin = SpinWait::new();
        }
    }

    /// Asks for the lock: one CAS of the held `word` to `ASKED` naming `ticket`. Asking acquires
    /// nothing, so Relaxed: the hand-off's write and the claim's CAS order the holder's writes
    /// before the claimer's reads. A failure needs no retry here: the caller looks again.
    #[inline]
    fn ask(&self, word: u32, ticket: u32) {
        let _ = self.word.compare_exchange(
            word,
            naming(ASKED, ticket),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// One CAS of the word from `from` to `to`, with acquire ordering on success.
    #[inline]
    fn take(&self, from: u32, to: u32) -> bool {
        self.word
            .compare_exchange(from, to, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The slow path of an unlock: the word is `CONTENDED` or `ASKED`, and this thread
    /// holds the lock (invariant 2). Hands the lock off to the waiter that asks for it
    /// (`ASKED`), or, if `fair` and an untimed sleeper is woken, to any thread woken from a
    /// sleep; else releases it and wakes a sleeper.
    #[cold]
    fn unlock_contended(&self, fair: bool) {
        let addr = self.word.as_ptr();
        // Until the release or the hand-off, the lock is held, so the word is alive and the
        // fair unlock's wake goes through `&self`.
        if self.word.load(Ordering::Relaxed) & STATE != ASKED
            && !(fair && self.word.wake_bitset(1, UNTIMED_WAITER) == Ok(1))
        {
            // A failure means a waiter asked meanwhile (the only change a waiter makes to
            // CONTENDED): hand off below.
            if self
                .word
                .compare_exchange(CONTENDED, UNLOCKED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                // From here another thread may own the lock and free it: wake by address
                // only, the sleeper that takes the lock next.
                let _ = Futex::wake_bitset_at(addr, 1, ANY_WAITER);
                return;
            }
        }
        // Hand off: to the waiter an ASKED word names, keeping its ticket (an older waiter may
        // replace it meanwhile, never the state); from CONTENDED, after a fair unlock's wake,
        // to nobody in particular.
        let handed_from = self
            .word
            .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                Some(if word & STATE == ASKED {
                    word - (ASKED - HANDED)
                } else {
                    HANDED
                })
            })
            .unwrap_or_else(|word| word);
        // Wake by address only (as above): the waiter named, if it sleeps, and any that an
        // older one replaced (invariant 3). A fair unlock's woken thread needs no second wake:
        // it looks at the word before it sleeps again.
        if handed_from & STATE == ASKED {
            let _ = Futex::wake_bitset_at(addr, i32::MAX as u32, ASKING_WAITER);
        }
    }
}
