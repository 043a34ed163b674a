//! An adaptive mutex with `std::sync::Mutex`'s API, on one 32-bit futex word.
//!
//! ## State encoding
//!
//! ```text
//! bit 0  LOCKED     someone owns the lock
//! bit 1  CONTENDED  waiters may sleep on the word: the unlock that clears it wakes one
//! bit 2  HEIR       one waiter (the heir) has slept for STARVATION_LIMIT: hand it the lock
//! bit 3  HANDED     locked, and handed to the heir, which has not claimed it yet
//! ```
//!
//! A free word is `0` or `HEIR`; `HANDED` implies `LOCKED`.
//!
//! * Lock: one CAS `0 -> LOCKED`, inline (a second inline CAS takes a free word with `HEIR`).
//!   Unlock: one CAS `LOCKED -> 0`, inline. Anything else is `#[cold]`.
//! * Contended lock: spin through the shared policy ([`crate::spin`]: learned per mutex,
//!   bounded, a few spinners at most, none on one CPU or when oversubscribed, and on first
//!   arrival not past sleepers), looking at the word only every 32 `spin_loop` hints (0.1-1.5
//!   us depending on the CPU) and taking the lock whenever it is seen free. With an owner that
//!   relocks at once, spinning on after a lost race (not giving up) is what keeps the owner on
//!   its fast path. A long wait teaches the spinner to spin less only if the lock was never
//!   seen free meanwhile (a long critical section, not an owner that keeps winning the race).
//! * Then sleep as std's futex mutex does: set `CONTENDED` and sleep on the word. The unlock
//!   that finds `CONTENDED` releases first (clearing it) and then wakes one by address: the
//!   lock is never held across the wake call, where the waker may be preempted (on a busy
//!   machine the woken thread often takes the waker's CPU). A waiter that slept sets
//!   `CONTENDED` again when it takes the lock, so the chain of wakes goes on while anyone may
//!   sleep, at the cost of one wake that finds nobody at the end of a burst. A timed waiter that
//!   gives up passes the chain on (sets `CONTENDED` on a held word, or wakes one if the word is
//!   free), as the wake it may have consumed was the chain's. No waiter ever yields or spins on
//!   a preempted owner.
//! * Starvation: a waiter that has slept for [`STARVATION_LIMIT`] sets `HEIR` (if no other
//!   waiter has) and sleeps with its own futex bitset. The next unlock that finds `HEIR` (at
//!   most one per `STARVATION_LIMIT` per mutex, as parking_lot's eventual fairness, so
//!   hand-offs cannot become a convoy) keeps the word `LOCKED`, turns `HEIR` into `HANDED` and
//!   wakes the heir alone through its bitset; the heir claims the lock by clearing `HANDED`.
//!   Newcomers see a held lock meanwhile. Only the heir clears `HEIR` (taking the lock, or
//!   timing out while no hand-off is pending), and it never sleeps on a value with `HANDED`,
//!   so every hand-off has its claimant. Plain wakes match every bitset, so a heir is never left
//!   asleep on a free word.
//! * Condvar requeue: `Condvar::notify_all` wakes one waiter and moves the others onto this
//!   word without touching it. They sleep with the plain bitset (a hand-off wake never reaches
//!   them), and a waiter that may have been moved takes the lock through
//!   `RawMutex::lock_after_requeue`, which sets `CONTENDED` as any waiter that slept here does:
//!   the waiter the notify woke does so after the move, so its unlock wakes the first moved
//!   sleeper, and so on.
//! * Poisoning follows std: a guard dropped during a panic marks the mutex poisoned.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::panic::{RefUnwindSafe, UnwindSafe};
use core::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};
use std::time::{Duration, Instant};

use crate::atomic::Ordering;
use crate::futex::{Deadline, Error, Futex};
use crate::spin::Spinner;

const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;
const HEIR: u32 = 4;
const HANDED: u32 = 8;

/// The futex bitset every waiter on a mutex word sleeps with, the heir excepted (moved
/// Condvar waiters included): plain wakes match all bitsets, a hand-off wake only the heir's.
pub(crate) const WAITER_BITSET: u32 = 1;
/// The bitset the heir sleeps with.
const HEIR_BITSET: u32 = 2;

/// How long a waiter may sleep before the lock is handed to it (as parking_lot and WebKit).
#[cfg(not(loom))]
pub const STARVATION_LIMIT: Duration = Duration::from_millis(1);
/// Zero under loom, so models explore the hand-off on every second sleep.
#[cfg(loom)]
pub const STARVATION_LIMIT: Duration = Duration::ZERO;

/// The lock without data or poisoning: what [`Mutex`] is built on, and what the `lock_api`
/// feature implements `lock_api::RawMutex` for.
///
/// ```
/// use futexkit::RawMutex;
///
/// let raw = RawMutex::new();
/// raw.lock();
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// assert!(raw.try_lock());
/// # unsafe { raw.unlock() };
/// ```
#[derive(Debug)]
pub struct RawMutex {
    state: Futex,
    spinner: Spinner,
    /// When the next hand-off may happen, in milliseconds of [`clock_ms`].
    next_hand_off_ms: AtomicU32,
}

/// Whether a hand-off whose earliest time is `due` may happen at `now` (milliseconds of
/// [`clock_ms`], which wraps every 49.7 days). `due` is set at most `limit_ms` ahead, so a
/// `due` further "ahead" is a stale time from before a wrap: due.
fn hand_off_due_at(now: u32, due: u32, limit_ms: u32) -> bool {
    now.wrapping_sub(due) as i32 >= 0 || due.wrapping_sub(now) > limit_ms
}

/// Milliseconds since the first call in this process: the coarse clock of hand-off rate limits.
fn clock_ms() -> u32 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u32
}

impl Default for RawMutex {
    fn default() -> RawMutex {
        RawMutex::new()
    }
}

/// How a waiter stands while it waits for the lock in `lock_contended`.
#[derive(Clone, Copy)]
struct Waiter {
    /// When it first slept on the word (`None`: it has not slept).
    first_sleep: Option<Instant>,
    /// It set `HEIR` and has not given it up.
    heir: bool,
}

impl Waiter {
    /// The bits a waiter sets when it takes a free lock from `state`: one that slept marks
    /// `CONTENDED` (others may sleep still), the heir gives up `HEIR`.
    fn take(self, state: u32) -> u32 {
        let mut next = state | LOCKED;
        if self.first_sleep.is_some() {
            next |= CONTENDED;
        }
        if self.heir {
            next &= !HEIR;
        }
        next
    }
}

impl RawMutex {
    /// An unlocked raw mutex.
    #[cfg(not(loom))]
    pub const fn new() -> RawMutex {
        RawMutex {
            state: Futex::new(0),
            spinner: Spinner::new(),
            next_hand_off_ms: AtomicU32::new(0),
        }
    }

    /// An unlocked raw mutex (not `const` under loom).
    #[cfg(loom)]
    pub fn new() -> RawMutex {
        RawMutex {
            state: Futex::new(0),
            spinner: Spinner::new(),
            next_hand_off_ms: AtomicU32::new(0),
        }
    }

    /// Blocks until this thread owns the lock.
    #[inline]
    pub fn lock(&self) {
        if let Err(state) =
            self.state
                .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
        {
            // Free with a heir waiting (its hand-off is not due yet): take it in place.
            if state & LOCKED != 0
                || self
                    .state
                    .compare_exchange(state, state | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            {
                self.lock_contended(None, false);
            }
        }
    }

    /// Takes the lock if it is free now (even ahead of sleeping waiters, as std's does).
    #[inline]
    pub fn try_lock(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Blocks until this thread owns the lock or `deadline` passes; returns whether it does.
    pub fn try_lock_until(&self, deadline: Instant) -> bool {
        self.try_lock() || self.lock_contended(Some(Deadline::at(deadline)), false)
    }

    /// Blocks until this thread owns the lock or `timeout` passes; returns whether it does.
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        self.try_lock() || self.lock_contended(Some(Deadline::after(timeout)), false)
    }

    /// Releases the lock, waking one waiter if any may sleep.
    ///
    /// # Safety
    ///
    /// The calling thread must own the lock (taken with `lock` or a successful `try_lock*`).
    #[inline]
    pub unsafe fn unlock(&self) {
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_contended();
        }
    }

    /// Whether some thread owns the lock now (a snapshot).
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }

    /// The futex word, for the Condvar's requeue.
    pub(crate) fn futex(&self) -> &Futex {
        &self.state
    }

    /// Takes the lock for a Condvar waiter that may have been moved onto this word (and woken
    /// by an unlock): it counts as a waiter that slept here, so it sets `CONTENDED` and its
    /// unlock wakes the next moved sleeper.
    pub(crate) fn lock_after_requeue(&self) {
        self.lock_contended(None, true);
    }

    /// Spins for the lock through the shared policy, taking it (with `waiter.take`) whenever
    /// it is seen free; stops early if `stop_if_contended` and waiters may sleep (spinning past
    /// sleepers would starve them). Returns whether this thread owns the lock; sets
    /// `lost_race` if it saw the lock free but another thread took it first.
    ///
    /// A spinner that sees the lock free but loses the race keeps spinning: with a barging
    /// owner that relocks at once, giving up there would put it to sleep and cost the owner a
    /// wake call on some later unlock.
    fn spin_to_acquire(
        &self,
        waiter: Waiter,
        stop_if_contended: bool,
        lost_race: &mut bool,
    ) -> bool {
        let mut acquired = false;
        self.spinner.spin_until_patiently(|| {
            let state = self.state.load(Ordering::Relaxed);
            if state & LOCKED == 0 {
                acquired = self
                    .state
                    .compare_exchange(
                        state,
                        waiter.take(state),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok();
                *lost_race |= !acquired;
                return acquired;
            }
            stop_if_contended && state & CONTENDED != 0
        });
        acquired
    }

    /// The contended lock: spin, then sleep until owning the lock or `deadline`. `slept`: the
    /// caller counts as a waiter that slept on the word (a moved Condvar waiter).
    #[cold]
    fn lock_contended(&self, deadline: Option<Deadline>, slept: bool) -> bool {
        let mut waiter = Waiter {
            first_sleep: slept.then(Instant::now),
            heir: false,
        };
        let mut lost_race = false;
        let mut timed_out = false;
        // A timed lock whose deadline has passed (`try_lock_for(Duration::ZERO)`) gets one
        // more look in the loop below, not a spin.
        let spin = deadline.map_or(true, |d| !d.has_passed());
        if spin && self.spin_to_acquire(waiter, !slept, &mut lost_race) {
            return true;
        }
        // A long wait teaches the spinner to spin less, unless this thread saw the lock free
        // and lost it to another meanwhile: then the lock was changing hands and the wait was
        // long only because others took it first, which is no reason to stop spinning.
        let learn = |waiter: Waiter, lost_race: bool| {
            if let (Some(start), false, false) = (waiter.first_sleep, lost_race, slept) {
                self.spinner.record_sleep(start.elapsed());
            }
        };
        loop {
            let state = self.state.load(Ordering::Relaxed);
            let next = if state & LOCKED == 0 {
                waiter.take(state)
            } else if waiter.heir && state & HANDED != 0 {
                // The lock was handed to us: claim it, as a waiter that slept.
                (state & !HANDED) | CONTENDED
            } else if timed_out || deadline.is_some_and(|d| d.has_passed()) {
                if waiter.heir
                    && self
                        .state
                        .compare_exchange_weak(
                            state,
                            state & !HEIR,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_err()
                {
                    continue;
                }
                self.pass_on_wake();
                return false;
            } else {
                let become_heir = !waiter.heir
                    && state & HEIR == 0
                    && waiter
                        .first_sleep
                        .is_some_and(|start| start.elapsed() >= STARVATION_LIMIT);
                let sleep_on = state | CONTENDED | if become_heir { HEIR } else { 0 };
                if sleep_on != state
                    && self
                        .state
                        .compare_exchange_weak(
                            state,
                            sleep_on,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_err()
                {
                    continue;
                }
                waiter.heir |= become_heir;
                waiter.first_sleep.get_or_insert_with(Instant::now);
                let bitset = if waiter.heir {
                    HEIR_BITSET
                } else {
                    WAITER_BITSET
                };
                // Woken, timed out, spurious or the word changed: look again (a timeout is the
                // kernel's word that the deadline passed: take the lock if free, else give
                // up). The heir never sleeps on a value with HANDED (it claims above), so no
                // hand-off waits for a claimant asleep on it.
                timed_out =
                    self.state.wait_bitset(sleep_on, bitset, deadline) == Err(Error::TimedOut);
                if timed_out {
                    continue;
                }
                // Woken: the waker released the lock before its wake call and may take it back
                // at once; give it a chance to come free before sleeping again (as std does).
                // The heir looks at once instead: a hand-off may be waiting for its claim.
                if !waiter.heir && self.spin_to_acquire(waiter, false, &mut lost_race) {
                    learn(waiter, lost_race);
                    return true;
                }
                continue;
            };
            if self
                .state
                .compare_exchange_weak(state, next, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                learn(waiter, lost_race);
                return true;
            }
        }
    }

    /// A timed waiter gives up: the wake it may have consumed was meant to keep the chain of
    /// wakes going, so pass it on. If the lock is held, make sure its unlock wakes one; if it
    /// is free, wake one now (this thread is still inside a call on the mutex, so the word is
    /// alive).
    fn pass_on_wake(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED == 0 {
                let _ = self.state.wake(1);
                return;
            }
            if state & CONTENDED != 0 {
                return;
            }
            match self.state.compare_exchange_weak(
                state,
                state | CONTENDED,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    #[cold]
    fn unlock_contended(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        // Decided at most once per unlock: the check consumes the rate limit.
        let mut hand_off_allowed = None;
        loop {
            if state & HEIR != 0 && *hand_off_allowed.get_or_insert_with(|| self.hand_off_due()) {
                // Keep the lock LOCKED for the heir, and wake it alone.
                let handed = (state & !HEIR) | HANDED;
                match self.try_release(state, handed) {
                    Ok(()) => {
                        // A raw address: the heir may claim, unlock and free the mutex before
                        // this call.
                        let _ = Futex::wake_bitset_at(self.state.as_ptr(), 1, HEIR_BITSET);
                        return;
                    }
                    Err(now) => state = now,
                }
                continue;
            }
            match self.try_release(state, state & !(LOCKED | CONTENDED)) {
                Ok(()) => {
                    if state & CONTENDED != 0 {
                        // After the release, by address: the mutex may be freed already.
                        let _ = Futex::wake_at(self.state.as_ptr(), 1);
                    }
                    return;
                }
                Err(now) => state = now,
            }
        }
    }

    /// One attempt of a contended unlock to move the word from `state` to `next`, letting go
    /// of the lock (release ordering); on failure, the word's current value.
    #[inline]
    fn try_release(&self, state: u32, next: u32) -> Result<(), u32> {
        self.state
            .compare_exchange_weak(state, next, Ordering::Release, Ordering::Relaxed)
            .map(drop)
    }

    /// Whether the rate limit allows a hand-off now (at most one per `STARVATION_LIMIT`).
    fn hand_off_due(&self) -> bool {
        if cfg!(loom) {
            return true;
        }
        let now = clock_ms();
        let due = self
            .next_hand_off_ms
            .load(core::sync::atomic::Ordering::Relaxed);
        let limit_ms = STARVATION_LIMIT.as_millis() as u32;
        if hand_off_due_at(now, due, limit_ms) {
            let next = now.wrapping_add(limit_ms);
            self.next_hand_off_ms
                .store(next, core::sync::atomic::Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

#[cfg(all(feature = "lock_api", not(loom)))]
// SAFETY: `lock`/`try_lock` give exclusive ownership until `unlock`, which the trait makes
// unsafe to call without owning the lock; ownership is not tied to a thread beyond that, but
// guards stay !Send (GuardNoSend) as std's do.
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex::new();
    type GuardMarker = lock_api::GuardNoSend;

    fn lock(&self) {
        RawMutex::lock(self)
    }

    fn try_lock(&self) -> bool {
        RawMutex::try_lock(self)
    }

    unsafe fn unlock(&self) {
        // SAFETY: the trait's contract: the caller owns the lock.
        unsafe { RawMutex::unlock(self) }
    }

    fn is_locked(&self) -> bool {
        RawMutex::is_locked(self)
    }
}

#[cfg(all(feature = "lock_api", not(loom)))]
// SAFETY: as for `lock_api::RawMutex`: a `true` return means the lock is owned.
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        RawMutex::try_lock_for(self, timeout)
    }

    fn try_lock_until(&self, deadline: Instant) -> bool {
        RawMutex::try_lock_until(self, deadline)
    }
}

/// A mutual-exclusion lock with `std::sync::Mutex`'s API and poisoning, adaptive underneath.
///
/// Code written for std compiles unchanged with `use futexkit::Mutex;` (or
/// `use futexkit as sync;`): `lock`, `try_lock`, `is_poisoned`, `clear_poison`, `into_inner`,
/// `get_mut` return std's own `LockResult` / `TryLockResult`. Beyond std:
/// [`try_lock_for`](Mutex::try_lock_for) and [`try_lock_until`](Mutex::try_lock_until).
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use futexkit::Mutex;
///
/// let counter = Arc::new(Mutex::new(0));
/// let handles: Vec<_> = (0..4)
///     .map(|_| {
///         let counter = Arc::clone(&counter);
///         thread::spawn(move || {
///             for _ in 0..1000 {
///                 *counter.lock().unwrap() += 1;
///             }
///         })
///     })
///     .collect();
/// for h in handles {
///     h.join().unwrap();
/// }
/// assert_eq!(*counter.lock().unwrap(), 4000);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    poisoned: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: as std: the lock gives one thread at a time access to `T`, so moving `T` between
// threads (`T: Send`) is all that sharing the mutex requires.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T: ?Sized> UnwindSafe for Mutex<T> {}
impl<T: ?Sized> RefUnwindSafe for Mutex<T> {}

/// A held lock on a [`Mutex`]; dereferences to the data, unlocks on drop.
///
/// Like std's guard it is `!Send` (unlocking belongs to the locking thread) and `Sync` when
/// `T: Sync`:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let m = futexkit::Mutex::new(0);
/// send(m.lock().unwrap());
/// ```
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a Mutex<T>,
    /// Whether this thread was panicking when it locked (std's poison::Guard).
    panicking: bool,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, which is fine to share when `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            poisoned: AtomicBool::new(false),
            data: UnsafeCell::new(value),
        }
    }

    /// A new unlocked mutex holding `value` (not `const` under loom).
    #[cfg(loom)]
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            poisoned: AtomicBool::new(false),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns the data.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding the data if the mutex is poisoned.
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poisoned.load(core::sync::atomic::Ordering::Relaxed);
        let data = self.data.into_inner();
        if poisoned {
            Err(PoisonError::new(data))
        } else {
            Ok(data)
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Blocks until this thread holds the lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding the guard if another thread panicked while holding the lock.
    ///
    /// # Panics
    ///
    /// Locking a mutex this thread already holds deadlocks (as std may); it does not panic.
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.raw.lock();
        self.guard()
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if another thread holds it; [`TryLockError::Poisoned`] as
    /// for [`lock`](Mutex::lock).
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if self.raw.try_lock() {
            Ok(self.guard()?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Blocks until this thread holds the lock or `timeout` has passed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use std::sync::TryLockError;
    /// use futexkit::Mutex;
    ///
    /// let m = Mutex::new(1);
    /// let held = m.lock().unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         let r = m.try_lock_for(Duration::from_millis(10));
    ///         assert!(matches!(r, Err(TryLockError::WouldBlock)));
    ///     });
    /// });
    /// drop(held);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Mutex::try_lock), with `WouldBlock` meaning the time ran out.
    pub fn try_lock_for(&self, timeout: Duration) -> TryLockResult<MutexGuard<'_, T>> {
        if self.raw.try_lock_for(timeout) {
            Ok(self.guard()?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Blocks until this thread holds the lock or `deadline` has passed.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Mutex::try_lock_for).
    pub fn try_lock_until(&self, deadline: Instant) -> TryLockResult<MutexGuard<'_, T>> {
        if self.raw.try_lock_until(deadline) {
            Ok(self.guard()?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a thread panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// Clears the poisoned flag.
    pub fn clear_poison(&self) {
        self.poisoned
            .store(false, core::sync::atomic::Ordering::Relaxed);
    }

    /// Mutable access without locking: the borrow proves no one else holds the lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] holding the reference if the mutex is poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        let poisoned = self.is_poisoned();
        let data = self.data.get_mut();
        if poisoned {
            Err(PoisonError::new(data))
        } else {
            Ok(data)
        }
    }

    /// The raw lock, for the Condvar.
    #[allow(dead_code)]
    pub(crate) fn raw(&self) -> &RawMutex {
        &self.raw
    }

    /// Wraps a freshly taken lock in a guard, reporting poison.
    pub(crate) fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        let guard = MutexGuard {
            lock: self,
            panicking: std::thread::panicking(),
            not_send: PhantomData,
        };
        if self.is_poisoned() {
            Err(PoisonError::new(guard))
        } else {
            Ok(guard)
        }
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard locks (for the Condvar).
    #[allow(dead_code)]
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.lock
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Mutex<T> {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(guard) => {
                d.field("data", &&*guard);
            }
            Err(TryLockError::Poisoned(err)) => {
                d.field("data", &&**err.get_ref());
            }
            Err(TryLockError::WouldBlock) => {
                d.field("data", &"<locked>");
            }
        }
        d.field("poisoned", &self.is_poisoned());
        d.finish_non_exhaustive()
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard proves this thread holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves this thread holds the lock, and `&mut self` that this is the
        // only access through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.lock
                .poisoned
                .store(true, core::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { self.lock.raw.unlock() };
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::hand_off_due_at;

    #[test]
    fn hand_off_rate_limit_survives_clock_wrap() {
        assert!(hand_off_due_at(0, 0, 1));
        assert!(!hand_off_due_at(10, 11, 1), "due 1 ms from now");
        assert!(hand_off_due_at(11, 11, 1));
        // A mutex untouched for more than 2^31 ms (24.8 days): due, not "in the future".
        assert!(hand_off_due_at(0x8000_0001, 0, 1));
        assert!(hand_off_due_at(0xFFFF_FFF0, 0, 1));
        // Across the wrap itself: 0 is 1 ms after 0xFFFF_FFFF.
        assert!(!hand_off_due_at(0xFFFF_FFFF, 0, 1));
        assert!(hand_off_due_at(0, 0xFFFF_FFFF, 1));
    }
}
