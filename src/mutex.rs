//! A mutual-exclusion lock with `std::sync::Mutex`'s API and size, on one futex word.
//!
//! ## State
//!
//! [`RawMutex`] is one 32-bit futex word holding one of four values:
//!
//! | value       | meaning                              | set by                                  | left by |
//! |-------------|--------------------------------------|-----------------------------------------|---------|
//! | `UNLOCKED`  | free                                 | an unlock that hands nothing off        | a thread taking the lock |
//! | `LOCKED`    | held; no thread sleeps on the word   | a thread taking a free lock before it has slept | the holder's unlock; a waiter about to sleep (to `CONTENDED`) |
//! | `CONTENDED` | held; threads may sleep on the word  | a waiter about to sleep; a thread that slept taking the lock or claiming a hand-off | the holder's unlock, which wakes a sleeper |
//! | `HANDED`    | held in trust for a woken sleeper    | an unlock handing the lock off          | a thread back from a sleep, claiming it (to `CONTENDED`) |
//!
//! Invariants, kept by the transitions below:
//!
//! 1. **No lost wakeup.** A thread sleeps only through `futex_wait` on the value it saw,
//!    `CONTENDED` or `HANDED`, so it is asleep only while the word holds one of them or a
//!    release from `CONTENDED` has yet to wake it. Every release from `CONTENDED` wakes a
//!    sleeper; that sleeper (or one that slept later) takes the lock back as `CONTENDED`,
//!    never as `LOCKED`, so the unlock after it wakes the next. (As in std's futex mutex, a
//!    thread that takes a lock released by such an unlock before the woken one runs takes it
//!    as `LOCKED`; the woken one then finds it held and marks it `CONTENDED` again before it
//!    sleeps.)
//! 2. **Only the holder writes a held word**, except a waiter turning `LOCKED` into
//!    `CONTENDED`. So an unlock finds `LOCKED` (no sleeper: release, no syscall) or
//!    `CONTENDED` (release and wake one, or hand off).
//! 3. **A hand-off always has a claimer.** The unlock wakes one *untimed* sleeper before it
//!    writes `HANDED`, and writes it only if that wake found one; else it releases. The woken
//!    sleeper never gives up, so it comes back and claims `HANDED`, unless another thread back
//!    from a sleep claimed it first. If it looked before `HANDED` was written and went back to
//!    sleep on `CONTENDED`, the unlock's second wake, after writing `HANDED`, or the changed
//!    word sends it (or another untimed sleeper) back to claim it. Timed waiters sleep with a
//!    futex bitset of their own that hand-off wakes do not match, so a deadline never strands
//!    a hand-off. Once `HANDED` is written the unlocking thread no longer owns the lock and
//!    touches the word only by address: another thread may own it and free it by then.
//!
//! ## Transitions
//!
//! * **lock**: `UNLOCKED -> LOCKED` by one CAS. Else the slow path
//!   (`RawMutex::lock_contended`): while the word is `LOCKED` (the holder is likely running,
//!   nobody sleeps), spin ([`SpinWait`]) and take it when it turns `UNLOCKED`; then turn
//!   `LOCKED` into `CONTENDED` and sleep on what the word holds. After every wake: take
//!   `UNLOCKED` as `CONTENDED`, claim `HANDED`, spin again while `LOCKED`, or sleep again.
//! * **unlock**: `LOCKED -> UNLOCKED` by one CAS. Else (`CONTENDED`): release and wake one
//!   sleeper; or, when the fairness policy says so and an untimed sleeper was woken, write
//!   `HANDED` and wake once more.
//!
//! Policy lives apart from this mechanism: how long to spin in [`crate::spin`], when to hand
//! off in `src/fairness.rs`. Under a model checker the same code runs on the emulated futex.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{LockResult, TryLockError, TryLockResult};
use std::time::{Duration, Instant};

use crate::poison;

use crate::atomic::Ordering;
use crate::futex::{Deadline, Error, Futex};
use crate::spin::SpinWait;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;
const HANDED: u32 = 3;

/// The futex bitset untimed waiters sleep with: the only ones a hand-off wakes.
const UNTIMED_WAITER: u32 = 0b01;
/// The futex bitset timed waiters sleep with.
const TIMED_WAITER: u32 = 0b10;
/// Wakes either kind of waiter.
const ANY_WAITER: u32 = UNTIMED_WAITER | TIMED_WAITER;

/// The lock without the data: one 32-bit futex word (the [module documentation](self) has its
/// states). [`Mutex`] is this plus a poison flag and the data; with the `lock_api` feature it
/// implements `lock_api::RawMutex` and `lock_api::RawMutexTimed`.
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
/// // SAFETY: taken just above.
/// unsafe { raw.unlock() };
/// ```
#[derive(Default)]
pub struct RawMutex {
    word: Futex,
}

impl fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawMutex")
            .field("locked", &self.is_locked())
            .finish()
    }
}

impl RawMutex {
    /// An unlocked mutex.
    #[cfg(not(model))]
    pub const fn new() -> RawMutex {
        RawMutex {
            word: Futex::new(UNLOCKED),
        }
    }

    /// An unlocked mutex (not `const` under a model checker).
    #[cfg(model)]
    pub fn new() -> RawMutex {
        RawMutex {
            word: Futex::new(UNLOCKED),
        }
    }

    /// Blocks until this thread holds the lock.
    #[inline]
    pub fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended(None);
        }
    }

    /// Takes the lock if it is free now; returns whether it did.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.word
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Blocks until this thread holds the lock or `deadline` passes; returns whether it does.
    pub fn try_lock_until(&self, deadline: Instant) -> bool {
        self.try_lock() || self.lock_contended(Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread holds the lock or `timeout` passes; returns whether it does.
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        self.try_lock() || self.lock_contended(Some(Deadline::after(timeout)))
    }

    /// Releases the lock, waking a sleeping waiter if there is one.
    ///
    /// # Safety
    ///
    /// The calling thread must hold the lock (taken with `lock` or a successful `try_lock*`).
    #[inline]
    pub unsafe fn unlock(&self) {
        if self
            .word
            .compare_exchange(LOCKED, UNLOCKED, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_contended();
        }
    }

    /// Whether some thread holds the lock now (a snapshot).
    pub fn is_locked(&self) -> bool {
        self.word.load(Ordering::Relaxed) != UNLOCKED
    }

    /// The slow path of a lock: spin while the holder is likely running and nobody sleeps,
    /// then sleep until woken, and again, until the lock is taken or `deadline` passes.
    /// Returns whether this thread holds the lock.
    #[cold]
    fn lock_contended(&self, deadline: Option<Deadline>) -> bool {
        let bitset = if deadline.is_some() {
            TIMED_WAITER
        } else {
            UNTIMED_WAITER
        };
        // Until this thread sleeps, it takes a free lock as LOCKED; after, as CONTENDED, since
        // others may sleep still and this thread's unlock must wake the next (invariant 1).
        let mut slept = false;
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
                LOCKED if spin.spin() => continue,
                LOCKED => {
                    if !self.take(LOCKED, CONTENDED) {
                        continue;
                    }
                    CONTENDED
                }
                HANDED if slept => {
                    if self.take(HANDED, CONTENDED) {
                        return true;
                    }
                    continue;
                }
                // CONTENDED, or HANDED to a sleeper (this thread has not slept yet).
                state => state,
            };
            if deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
            if self.word.wait_bitset(sleep_on, bitset, deadline) == Err(Error::TimedOut) {
                return false;
            }
            // Woken, or the word changed before the sleep: look again, spinning afresh.
            slept = true;
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

    /// The slow path of an unlock: the word is `CONTENDED` and only this thread writes it
    /// (invariant 2).
    #[cold]
    fn unlock_contended(&self) {
        let addr = self.word.as_ptr();
        // The first wake goes through `&self`: the lock is still held, so the word is alive.
        let hand_off =
            crate::fairness::hand_off_now() && self.word.wake_bitset(1, UNTIMED_WAITER) == Ok(1);
        let next = if hand_off { HANDED } else { UNLOCKED };
        self.word.store(next, Ordering::Release);
        // From here another thread may own the lock and free it: wake by address only. After a
        // hand-off this wakes the woken sleeper again if it went back to sleep too early
        // (invariant 3); after a release, the sleeper that takes the lock next.
        let wake = if hand_off { UNTIMED_WAITER } else { ANY_WAITER };
        let _ = Futex::wake_bitset_at(addr, 1, wake);
    }
}

#[cfg(all(feature = "lock_api", not(model)))]
// SAFETY: `lock` and the `try_lock*` that return true give this thread exclusive ownership until
// `unlock` (Acquire on taking, Release on releasing), which is lock_api's contract.
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex::new();
    type GuardMarker = lock_api::GuardNoSend;

    fn lock(&self) {
        RawMutex::lock(self);
    }

    fn try_lock(&self) -> bool {
        RawMutex::try_lock(self)
    }

    unsafe fn unlock(&self) {
        // SAFETY: lock_api calls this only for a lock the caller holds.
        unsafe { RawMutex::unlock(self) }
    }

    fn is_locked(&self) -> bool {
        RawMutex::is_locked(self)
    }
}

#[cfg(all(feature = "lock_api", not(model)))]
// SAFETY: as for `lock_api::RawMutex`; the timed variants give ownership only when they return
// true.
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

/// A mutual-exclusion lock: `std::sync::Mutex`'s API, behaviour and size (8 bytes for
/// `Mutex<()>`), plus [`try_lock_for`](Mutex::try_lock_for) and
/// [`try_lock_until`](Mutex::try_lock_until).
///
/// Poisoning works as in std: a guard dropped while its thread panics marks the mutex
/// poisoned, and later locks return the guard inside a [`PoisonError`](std::sync::PoisonError).
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
    poison: poison::Flag,
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
    poison: poison::Guard,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, which is fine to share when `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    #[cfg(not(model))]
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            poison: poison::Flag::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// A new unlocked mutex holding `value` (not `const` under a model checker).
    #[cfg(model)]
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            poison: poison::Flag::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns the data.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the data if the mutex is poisoned.
    pub fn into_inner(self) -> LockResult<T> {
        self.poison.result(self.data.into_inner())
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Blocks until this thread holds the lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if another thread panicked
    /// while holding the lock.
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
        poison::try_result(self.raw.try_lock(), || self.guard())
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
        poison::try_result(self.raw.try_lock_for(timeout), || self.guard())
    }

    /// Blocks until this thread holds the lock or `deadline` has passed.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Mutex::try_lock_for).
    pub fn try_lock_until(&self, deadline: Instant) -> TryLockResult<MutexGuard<'_, T>> {
        poison::try_result(self.raw.try_lock_until(deadline), || self.guard())
    }

    /// Whether a thread panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poisoned flag.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// Mutable access without locking: the borrow proves no one else holds the lock.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the reference if the mutex is poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.result(self.data.get_mut())
    }

    /// Wraps a freshly taken lock in a guard, reporting poison.
    fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        self.poison.result(MutexGuard {
            lock: self,
            poison: self.poison.guard(),
            not_send: PhantomData,
        })
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The raw lock this guard holds, for the Condvar.
    pub(crate) fn raw(&self) -> &'a RawMutex {
        &self.lock.raw
    }

    /// This guard as a fresh lock reports it (inside a
    /// [`PoisonError`](std::sync::PoisonError) if the mutex is poisoned), for the Condvar's relock.
    pub(crate) fn relocked(self) -> LockResult<MutexGuard<'a, T>> {
        let lock = self.lock;
        lock.poison.result(self)
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
        self.lock.poison.done(self.poison);
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
