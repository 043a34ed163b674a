//! An adaptive mutex with `std::sync::Mutex`'s API, on one 32-bit futex word (and, only where the
//! kernel has `FUTEX2_SPIN`, a second one for the owner's TID).
//!
//! ## State encoding
//!
//! ```text
//! bit 0      LOCKED             someone owns the lock
//! bit 1      HANDOFF_REQUESTED  a waiter has slept for STARVATION_LIMIT: hand it the lock
//! bit 2      HANDED             locked, and reserved for a waiter woken to take it
//! bit 3      WAKING             a woken waiter is on its way to the lock: do not wake another
//! bit 4      REQUEUED           a Condvar may have moved sleepers here that `parked` omits
//! bit 5      WAKE_PENDING       (REQUEUED only) the owner is in its wake call: nobody sleeps
//! bit 6      WAKE_SPENT         (REQUEUED only) a wake found nobody asleep: clear before sleeping
//! bit 7      OWNER_SHOWN        (FUTEX2_SPIN only) the owner's TID is in `owner`: unlock clears it
//! bit 8      OWNER_WATCHED      (FUTEX2_SPIN only) a waiter may wait on `owner`: wake it then
//! bits 9..31 parked             how many waiters sleep (or are about to) on this word
//! ```
//!
//! A second word, `owner`, holds 0, or the TID of an owner that took the lock on the contended
//! path where the kernel has `FUTEX2_SPIN` (below).
//!
//! * Lock: one CAS `0 -> LOCKED`, inline. Unlock: one CAS `LOCKED -> 0`, inline. Two common
//!   contended cases also stay inline, each one more CAS: taking a free lock whose word is not
//!   0, and releasing while a wake needs no call (`WAKING` or `WAKE_SPENT`). Anything else is
//!   `#[cold]`.
//! * Contended lock: spin through the shared policy ([`crate::spin`]: learned per mutex,
//!   bounded, a few spinners at most, none on one CPU or when oversubscribed, and on first
//!   arrival not past registered waiters), taking the lock whenever it is seen free; only then
//!   register in `parked` and sleep on the word. Where spinning cannot pay (one CPU, or
//!   oversubscribed) on a small machine whose runnable threads are mostly lock waiters, the
//!   policy yields a few times instead, also past registered waiters: every thread that could
//!   take the lock is on a run queue then, and a sleeper that waits long has the lock handed
//!   to it. Once an owner that relocks at once has won races for the free lock, the waiter
//!   looks only every 32 `spin_loop` hints (0.1-1.5 us depending on the CPU) for the next
//!   several contended locks, else at the usual exponential pace
//!   ([`Spinner::spin_for_lock`]). A waiter that sleeps costs some later
//!   unlock a wake call, so with an owner that relocks at once, spinning on (not giving up at
//!   the first lost race) is what keeps the owner on its fast path. A long wait teaches the
//!   spinner to spin less only if the lock was never seen taken by another thread meanwhile (a
//!   long critical section, not an owner that keeps winning the race). The yield phase is
//!   not parking_lot's unconditional one: yielding on every contended lock worsened a
//!   server's p99 1.5-2x, as its waiters queued behind client threads. (Waiters
//!   do yield through the short `HANDED` and `WAKE_PENDING` windows, below; a `SCHED_FIFO`
//!   waiter on the CPU of a lower-priority owner preempted in such a window would yield in
//!   vain: do not mix real-time priorities on one futexkit mutex.)
//! * Because `parked` is exact, unlock makes a wake call only when someone is registered (or
//!   may have been moved here, `REQUEUED`), and wakes exactly one; `WAKING` keeps the unlocks
//!   that follow from waking more while the woken waiter is on its way (on a VM a wake-up
//!   takes tens of microseconds, in which a running thread unlocks many times). The woken
//!   waiter keeps the mark until it takes the lock, sleeps again or gives up, so no unlock
//!   wakes a second waiter to compete with it.
//! * Release before the wake: an unlock that wakes releases the lock, sets `WAKING` and wakes
//!   one in a single `FUTEX_WAKE_OP` (the kernel changes the word under its bucket lock, so a
//!   sleeper is queued before the change, and may be woken, or sees it). Apart from Condvar
//!   requeue and hand-off (below), the lock is not held across the wake call, so a waker
//!   preempted by the thread it woke (common on an oversubscribed machine) holds nothing; an
//!   earlier protocol that held it there and had waiters yield meanwhile ran a bounded Mutex +
//!   Condvar queue 2-4x slower than std's.
//! * No sleeper is ever stranded by `WAKING`. The unlock cannot see whether its wake found
//!   anyone (the word may be freed once released). If it found nobody, every registered waiter
//!   was awake: a waiter that sees `WAKING` appear while it is registered and awake clears it
//!   before sleeping, and a sleep on a value with `WAKING` is bounded by `WAKE_GRACE` (1 ms),
//!   after which the sleeper clears it (a waiter that read `WAKING` before the wake and after
//!   cannot tell the two marks apart). A mistaken clear costs one extra wake, never a lost one.
//! * Condvar requeue keeps the older, holding protocol (below): an unlock that sees
//!   `REQUEUED` sets `WAKE_PENDING` while it still owns the lock, wakes one, and then: if
//!   someone woke, releases and turns `WAKE_PENDING` into `WAKING`; if nobody was asleep
//!   (nobody sleeps on a value with `WAKE_PENDING`: waiters yield for the length of the wake
//!   call), releases with `WAKE_SPENT` and clears `REQUEUED`, as moved sleepers are always
//!   queued; `WAKE_SPENT` is cleared by each registered waiter before it sleeps, and until
//!   then unlocks do not wake in vain. If a returning waiter cleared `WAKE_PENDING` meanwhile,
//!   someone may have slept since, so the release and a wake go in one `FUTEX_WAKE_OP`.
//!   Nobody registers while `HANDED` is set (below).
//! * Starvation: a waiter that has been parked for [`STARVATION_LIMIT`] sets
//!   `HANDOFF_REQUESTED`. The next unlock (at most one per `STARVATION_LIMIT` per mutex, as
//!   parking_lot's eventual fairness, so hand-offs cannot become a convoy) keeps the word
//!   `LOCKED`, sets `HANDED` and wakes one waiter, which claims the lock by clearing `HANDED`:
//!   newcomers cannot barge in, and yield until the claim. Every registered waiter unregisters
//!   after its wait returns (woken, timed out or not yet asleep) and unregistering claims a
//!   pending hand-off; as no registered waiter slept on a value with `HANDED`, at least one of
//!   them returns, so a hand-off never strands the lock.
//! * Condvar requeue: `Condvar::notify_all` wakes one waiter and moves the others onto this
//!   word without touching it (the mutex may be freed by a returning waiter at any moment), so
//!   `parked` does not count them. A waiter that may have been moved takes the lock through
//!   `RawMutex::lock_after_requeue`, which marks `REQUEUED`: while it is set every unlock
//!   wakes one (as std's "contended" state), and an unlock whose wake found nobody clears it
//!   as it releases. Moved sleepers are always queued (the kernel moves them asleep), so
//!   "nobody asleep" proves none is left at the wake; sleepers moved after it are covered
//!   because the waiter the notify woke directly marks the word after the move (it can take
//!   the lock only after this release), so the chain of wakes cannot stop while one sleeps.
//! * `FUTEX2_SPIN` (never merged; probed and opted in with `FUTEXKIT_ENABLE=spin`, see
//!   [`crate::futex::Capability::Spin`]): the kernel spins while the thread named by a word
//!   runs, then sleeps. Where it is present, a thread that takes the lock on the contended path
//!   writes its TID to `owner` and sets `OWNER_SHOWN` (the fast path stays one CAS and shows
//!   nothing), and a waiter arriving at a lock whose owner is shown, with no waiter registered
//!   (as a spin, it does not pass sleepers), sets `OWNER_WATCHED` and waits on `owner` through
//!   [`crate::spin::wait_on_owner`] (which caps kernel spinners as user-space ones) for at most
//!   its spin budget; after a watch it looks once instead of spinning again. `OWNER_SHOWN`
//!   sends the owner's unlock to the slow path, which clears `owner` and both marks while still
//!   holding the lock, releases, and then, if `OWNER_WATCHED` was set, wakes every watcher (by
//!   address, as the lock may be freed by then; a late wake only ends a later watch early): a
//!   watcher that set the mark before the clear is woken or sees the word changed (the kernel's
//!   wake orders the clear before it), and one that comes after finds `OWNER_SHOWN` gone and
//!   does not wait. A watcher re-reads the marks after reading the TID, so it does not wait on
//!   a later owner's TID without the mark that gets it woken, unless that owner is the thread
//!   it read before (shown again in a later hold): that miss is bounded by the watch's budget.
//!   Watchers are not registered in `parked`: once the watch ends they go on as any waiter.
//!   The opt-in is the user's: the RFC has no stable ABI, and it mishandles a TID that names no
//!   thread (an owner that exited holding the lock, its guard forgotten).
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
use crate::futex::{Deadline, Error, Futex, WakeOpKind};
use crate::spin::{LockLook, LockWaiter, Spinner};

const LOCKED: u32 = 1;
const HANDOFF_REQUESTED: u32 = 2;
const HANDED: u32 = 4;
const WAKING: u32 = 8;
const REQUEUED: u32 = 16;
const WAKE_PENDING: u32 = 32;
const WAKE_SPENT: u32 = 64;
const OWNER_SHOWN: u32 = 128;
const OWNER_WATCHED: u32 = 256;
const ONE_PARKED: u32 = 512;
/// What a waiter clears when it claims a hand-off or takes the lock after a requeue: it is the
/// one a wake was for (or it takes the place of one that found nobody).
const WAKE_FLAGS: u32 = WAKING | WAKE_PENDING | WAKE_SPENT;

/// How long a waiter may sleep before the lock is handed to it (as parking_lot and WebKit).
#[cfg(not(loom))]
pub const STARVATION_LIMIT: Duration = Duration::from_millis(1);
/// Zero under loom, so models explore the hand-off on every second sleep.
#[cfg(loom)]
pub const STARVATION_LIMIT: Duration = Duration::ZERO;

/// How long a waiter sleeps on a word marked `WAKING` before it clears the mark itself
/// (`RawMutex::sleep`): the longest a wake that found nobody asleep can delay a waiter.
const WAKE_GRACE: Duration = Duration::from_millis(1);

fn parked(state: u32) -> u32 {
    state / ONE_PARKED
}

/// The word after an unlock of `state` that needs no wake call, or `None` if one is due. None
/// is due with nobody to wake (no registered waiter and no possibly moved one, `REQUEUED`), or
/// with a wake already on its way (`WAKING`: a woken waiter is on its way to the lock;
/// `WAKE_SPENT`: no registered waiter is asleep yet). With nobody registered, a stale hand-off
/// request or wake mark is dropped. An owner that showed its TID (`OWNER_SHOWN`) must clear it
/// first, in `unlock_contended`: `None`.
#[inline]
fn release_without_wake(state: u32) -> Option<u32> {
    if state & OWNER_SHOWN != 0 {
        return None;
    }
    let waiters = parked(state);
    let wake_in_flight = state & (WAKING | WAKE_SPENT) != 0;
    if !wake_in_flight && (waiters > 0 || state & REQUEUED != 0) {
        return None;
    }
    let mut next = state & !LOCKED;
    if waiters == 0 {
        next &= !(HANDOFF_REQUESTED | WAKE_SPENT | WAKING);
    }
    Some(next)
}

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
    /// The TID of an owner that took the lock on the contended path, or 0; used only where the
    /// kernel has `FUTEX2_SPIN` (module documentation).
    owner: Futex,
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

impl RawMutex {
    /// An unlocked raw mutex.
    #[cfg(not(loom))]
    pub const fn new() -> RawMutex {
        RawMutex {
            state: Futex::new(0),
            owner: Futex::new(0),
            spinner: Spinner::new(),
            next_hand_off_ms: AtomicU32::new(0),
        }
    }

    /// An unlocked raw mutex (not `const` under loom).
    #[cfg(loom)]
    pub fn new() -> RawMutex {
        RawMutex {
            state: Futex::new(0),
            owner: Futex::new(0),
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
            // Free but the word is not 0 (waiters registered, or a flag): take it in place, as
            // the contended path would at once, without the call.
            if state & LOCKED != 0
                || self
                    .state
                    .compare_exchange(state, state | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            {
                self.lock_contended(None);
            }
        }
    }

    /// Takes the lock if it is free now (even ahead of parked waiters, as std's does).
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
        self.try_lock() || self.lock_contended(Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread owns the lock or `timeout` passes; returns whether it does.
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        self.try_lock() || self.lock_contended(Some(Deadline::after(timeout)))
    }

    /// Releases the lock, waking one waiter if any sleeps.
    ///
    /// # Safety
    ///
    /// The calling thread must own the lock (taken with `lock` or a successful `try_lock*`).
    #[inline]
    pub unsafe fn unlock(&self) {
        if let Err(state) =
            self.state
                .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
        {
            // A release that needs no wake call (the common contended case: a wake already on
            // its way) stays inline.
            match release_without_wake(state) {
                Some(next) if self.try_release(state, next).is_ok() => {}
                _ => self.unlock_contended(),
            }
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

    /// Takes the lock for a Condvar waiter that may have been moved onto this word and woken
    /// by an unlock (which set `WAKING` for it, or `HANDED`: a hand-off meant for a parked
    /// waiter that this one must claim, as the parked one may sleep on). Marks `REQUEUED` so
    /// that this thread's unlock wakes the next moved sleeper.
    pub(crate) fn lock_after_requeue(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let (next, owned) = if state & HANDED != 0 {
                ((state & !(HANDED | WAKE_FLAGS)) | REQUEUED, true)
            } else if state & LOCKED == 0 {
                ((state & !WAKE_FLAGS) | LOCKED | REQUEUED, true)
            } else {
                (state & !WAKE_FLAGS, false)
            };
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) if owned => return,
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        self.lock();
        self.state.fetch_or(REQUEUED, Ordering::Relaxed);
    }

    /// Spins (or, oversubscribed, yields) for the lock through the shared policy, taking it
    /// whenever it is seen free; with `report_sleepers`, tells the policy when waiters are
    /// registered (a spin then stops: spinning past sleepers would starve them). Returns
    /// whether this thread owns the lock; sets `lost_race` if it saw the lock free but another
    /// thread took it first.
    ///
    /// A spinner that sees the lock free but loses the race keeps spinning: with a barging
    /// owner that relocks at once, giving up there would put it to sleep and cost the owner a
    /// wake call on some later unlock.
    fn spin_to_acquire(
        &self,
        deadline: Option<Deadline>,
        report_sleepers: bool,
        clear: u32,
        lost_race: &mut bool,
    ) -> bool {
        let mut acquired = false;
        self.spinner.spin_for_lock_before(deadline, || {
            let state = self.state.load(Ordering::Relaxed);
            if state & LOCKED == 0 {
                return match self.state.compare_exchange(
                    state,
                    (state | LOCKED) & !clear,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        acquired = true;
                        LockLook::Done
                    }
                    Err(now) if now & LOCKED != 0 => {
                        *lost_race = true;
                        LockLook::LostRace
                    }
                    // Still free: only another bit changed (a waiter came or went); look again.
                    Err(_) => LockLook::Held,
                };
            }
            if report_sleepers && parked(state) > 0 {
                LockLook::HeldWithSleepers
            } else {
                LockLook::Held
            }
        });
        acquired
    }

    #[cold]
    fn lock_contended(&self, deadline: Option<Deadline>) -> bool {
        let watch = owner_watch_enabled();
        let acquired = self.acquire_contended(deadline, watch);
        if acquired && watch {
            self.show_owner();
        }
        acquired
    }

    /// The contended lock: with `watch`, first waits while a shown owner runs
    /// ([`watch_owner`](RawMutex::watch_owner)); then spins (or yields) through the shared
    /// policy, registers and sleeps. Returns whether this thread owns the lock.
    fn acquire_contended(&self, deadline: Option<Deadline>, watch: bool) -> bool {
        let _waiter = LockWaiter::enter();
        let mut lost_race = false;
        // A timed lock spins no further than its deadline; one whose deadline has passed
        // (`try_lock_for(Duration::ZERO)`) only looks once more, as does one that has just
        // watched the owner (it waited a spin budget already).
        let spin_deadline = if watch && self.watch_owner(deadline) {
            Some(Deadline::after(Duration::ZERO))
        } else {
            deadline
        };
        if self.spin_to_acquire(spin_deadline, true, 0, &mut lost_race) {
            return true;
        }
        let mut first_sleep: Option<Instant> = None;
        // A long wait teaches the spinner to spin less, unless this thread saw the lock free
        // and lost it to another meanwhile: then the lock was changing hands and the wait was
        // long only because others took it first, which is no reason to stop spinning.
        let learn = |first_sleep: Option<Instant>, lost_race: bool| {
            if let (Some(start), false) = (first_sleep, lost_race) {
                self.spinner.record_sleep(start.elapsed());
            }
        };
        // WAKING this thread must clear: set once it returns from a sleep, as the waiter an
        // unlock woke (or in the place of one) that is still on its way to the lock. Keeping
        // the mark until this thread takes the lock, sleeps again or gives up spares the
        // unlocks meanwhile from waking others to compete with it.
        let mut owed_clear = 0;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state & LOCKED == 0 {
                if self
                    .state
                    .compare_exchange_weak(
                        state,
                        (state | LOCKED) & !owed_clear,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    learn(first_sleep, lost_race);
                    return true;
                }
                continue;
            }
            if deadline.is_some_and(|d| d.has_passed()) {
                // Clear an owed WAKING only while the lock is held, so that the owner's unlock
                // wakes the next waiter; clearing it after an unlock that skipped its wake
                // because of the mark would strand a sleeper.
                if state & owed_clear == 0
                    || self
                        .state
                        .compare_exchange_weak(
                            state,
                            state & !owed_clear,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                {
                    return false;
                }
                continue;
            }
            if state & (HANDED | WAKE_PENDING) != 0 {
                // The lock is reserved for a registered waiter about to claim it, or its owner
                // is in the middle of a wake. A value with HANDED must never be slept on: it
                // could recur in a later hand-off while we still sleep on it, with everyone
                // asleep and nobody left to claim; nor one with WAKE_PENDING, so that a wake
                // that finds nobody proves nobody sleeps (`unlock_contended`). Either window is
                // short (one wake-up, at most once per STARVATION_LIMIT; one wake call), so step
                // aside.
                crate::thread::yield_now();
                continue;
            }
            let starving = first_sleep.is_some_and(|start| start.elapsed() >= STARVATION_LIMIT);
            // Never sleep on WAKE_SPENT: clear it, so the next unlock wakes again
            // (`release_after_vain_wake`). WAKING stays unless this thread owes it: another
            // woken waiter is most likely on its way, and clearing it would let the next unlock
            // wake a second one (`sleep`).
            let registered = ((state + ONE_PARKED) & !(WAKE_SPENT | owed_clear))
                | if starving { HANDOFF_REQUESTED } else { 0 };
            if self
                .state
                .compare_exchange_weak(state, registered, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            first_sleep.get_or_insert_with(Instant::now);
            let expected = self.sleep(registered, deadline);
            // Any other outcome (woken, timed out, spurious) goes through the same
            // unregistering, which claims a hand-off meant for us.
            if self.unregister(expected & REQUEUED != 0) {
                return true;
            }
            owed_clear = WAKING;
            // Woken: the waker released the lock in (or, on a requeued word, just after) its
            // wake call, and may take it back at once; give it a chance to come free before
            // sleeping again (as std does), even with others parked: going back to sleep here
            // costs the waker another wake.
            if self.spin_to_acquire(deadline, false, owed_clear, &mut lost_race) {
                learn(first_sleep, lost_race);
                return true;
            }
        }
    }

    /// Sleeps as a registered waiter, first on `registered`, until woken, the lock is free or
    /// handed over, or `deadline` passes; returns the value it last slept on.
    ///
    /// Other waiters registering change the word too: while the lock stays held (and not
    /// handed over), sleep again on the new value instead of unregistering and registering
    /// anew, which would change the word under yet others (a cascade of failed waits). A value
    /// that could have been registered is as safe to sleep on.
    ///
    /// `WAKING` is kept when sleeping, so that the unlocks after a wake do not wake others
    /// while the woken waiter is on its way. But the unlock that sets it cannot see whether its
    /// wake found anyone (it has released the word by then): if nobody was asleep, every
    /// registered waiter was awake, and one of them must clear it. So a waiter that sees
    /// `WAKING` appear while it is registered and awake clears it, and a sleep on a value with
    /// `WAKING` is bounded by [`WAKE_GRACE`], after which the waiter clears it too (the wake it
    /// waited for may have found nobody: a value seen before and after it can be equal). Either
    /// way a mistaken clear costs one extra wake, never a lost one.
    fn sleep(&self, registered: u32, deadline: Option<Deadline>) -> u32 {
        let mut expected = registered;
        loop {
            let bounded = if expected & WAKING == 0 {
                deadline
            } else {
                match deadline {
                    Some(d) if d.remaining() <= WAKE_GRACE => Some(d),
                    _ => Some(Deadline::after(WAKE_GRACE)),
                }
            };
            let grace_over = match self.state.wait(expected, bounded) {
                Err(Error::ValueChanged) => false,
                Err(Error::TimedOut) if !deadline.is_some_and(|d| d.has_passed()) => true,
                // Woken, timed out or spurious: the caller unregisters.
                _ => return expected,
            };
            let mut now = self.state.load(Ordering::Relaxed);
            while now & WAKE_PENDING != 0 {
                crate::thread::yield_now();
                now = self.state.load(Ordering::Relaxed);
            }
            if now & LOCKED == 0 || now & HANDED != 0 {
                return expected;
            }
            let mut clear = WAKE_SPENT;
            if now & WAKING != 0 && (expected & WAKING == 0 || grace_over) {
                clear |= WAKING;
            }
            expected = now & !clear;
            if now & clear != 0 {
                // If this fails the word changed: the next wait returns at once, or sleeps on
                // a value without the flags (another waiter cleared them), as wanted.
                let _ = self.state.compare_exchange(
                    now,
                    expected,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// Leaves the parked count; if the lock was handed over, claims it (returns true).
    ///
    /// `slept_on_requeued`: the value this waiter last slept on had `REQUEUED`. An unlock that
    /// saw only moved sleepers releases, clears `REQUEUED` and wakes one in one call, counting
    /// on the woken to re-mark it; a registered waiter queued ahead of them (a higher-priority
    /// thread that registered meanwhile) may be the one woken instead, so it re-marks it.
    fn unregister(&self, slept_on_requeued: bool) -> bool {
        let remark = if slept_on_requeued { REQUEUED } else { 0 };
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let (next, claimed) = if state & HANDED != 0 {
                (
                    ((state - ONE_PARKED) & !(HANDED | WAKE_FLAGS)) | remark,
                    true,
                )
            } else {
                // WAKING stays: the caller clears it when it takes the lock, sleeps again or
                // gives up (`lock_contended`).
                (
                    ((state - ONE_PARKED) & !(WAKE_PENDING | WAKE_SPENT)) | remark,
                    false,
                )
            };
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return claimed,
                Err(now) => state = now,
            }
        }
    }

    #[cold]
    fn unlock_contended(&self) {
        let state = self.state.load(Ordering::Relaxed);
        if state & OWNER_SHOWN == 0 {
            return self.release_contended(state);
        }
        let (state, watched) = self.hide_owner();
        // A raw address: once released, the mutex may be freed before the wake.
        let owner = self.owner.as_ptr();
        self.release_contended(state);
        if watched {
            let _ = Futex::wake_at(owner, i32::MAX as u32);
        }
    }

    /// The contended unlock proper, from the word `state` (no owner shown).
    fn release_contended(&self, mut state: u32) {
        // Decided at most once per unlock: the check consumes the rate limit.
        let mut hand_off_allowed = None;
        loop {
            if let Some(next) = release_without_wake(state) {
                match self.try_release(state, next) {
                    Ok(()) => return,
                    Err(now) => state = now,
                }
                continue;
            }
            let waiters = parked(state);
            if waiters == 0 {
                // Only moved sleepers may be queued: release and wake one in one call. The one
                // woken re-marks REQUEUED when it takes the lock (a moved sleeper through
                // `lock_after_requeue`, a registered one through `unregister`), so the chain
                // goes on; if nobody was queued, none is left (moved sleepers are always
                // queued).
                let _ = self
                    .state
                    .update_and_wake(WakeOpKind::AndNot, LOCKED | REQUEUED, 1);
                return;
            }
            // A wake is due. Fairness is considered only then (as parking_lot decides it only
            // when it unparks), so an owner that keeps relocking pays no clock read.
            if state & HANDOFF_REQUESTED != 0
                && *hand_off_allowed.get_or_insert_with(|| self.hand_off_due())
            {
                let handed = (state & !HANDOFF_REQUESTED) | HANDED | WAKING;
                match self.try_release(state, handed) {
                    Ok(()) => return self.finish_hand_off(),
                    Err(now) => state = now,
                }
                continue;
            }
            if state & REQUEUED == 0 {
                // Release and wake in one call, marking WAKING in the same step: the kernel
                // changes the word under its bucket lock, so every sleeper is either queued
                // before (and one is woken) or sees the new word. The woken waiter clears
                // WAKING once it takes the lock or sleeps again; if nobody was asleep, a
                // registered waiter clears it (`sleep`), so no wake is withheld for long. The
                // lock is free before the wake call: the woken thread can take it at once, and
                // a waker preempted in the call holds nothing. Only the owner sets LOCKED and
                // WAKING, both known here (held, and clear), so the flip is exact.
                let _ = self
                    .state
                    .update_and_wake(WakeOpKind::Xor, LOCKED | WAKING, 1);
                return;
            }
            // Moved sleepers may be queued too: an unlock whose wake finds nobody clears
            // REQUEUED, so it must see the outcome while still owning the word. Reserve the
            // wake while still owning the lock (the word stays alive for it). Nobody sleeps on
            // a value with WAKE_PENDING, so any sleeper this wake can miss is queued before
            // it; a waiter that returns from its wait meanwhile clears it.
            if let Err(now) = self.state.compare_exchange_weak(
                state,
                state | WAKE_PENDING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                state = now;
                continue;
            }
            let woken = self.state.wake(1).unwrap_or(0);
            state = self.state.load(Ordering::Relaxed);
            if woken == 0 {
                return self.release_after_vain_wake(state);
            }
            // Release, turning WAKE_PENDING into WAKING for the woken waiter to clear, unless
            // a returning waiter cleared it: the woken one may have found the lock still held
            // and gone back to sleep, so wake again.
            while state & WAKE_PENDING != 0 {
                match self.try_release(state, (state & !(LOCKED | WAKE_PENDING)) | WAKING) {
                    Ok(()) => return,
                    Err(now) => state = now,
                }
            }
        }
    }

    /// Releases after a wake that found nobody asleep: the registered waiters are all between
    /// registering and sleeping, or back from a wait and about to unregister.
    ///
    /// If `WAKE_PENDING` is still set, no registered waiter has slept since it was set:
    /// release with `WAKE_SPENT`, which every registered waiter clears before it sleeps or as
    /// it unregisters, and until then no unlock wakes in vain (a thread relocking in a loop
    /// would otherwise pay a wake on nearly every unlock while a waiter gets to sleep). If a
    /// returning waiter cleared it, others may have slept since: release and wake in one call
    /// (under the kernel's bucket lock a waiter is queued before the change or sees it).
    /// Moved (requeued) sleepers are always queued, so none was left at the wake; any moved
    /// later are covered by the re-mark of the waiter the notify woke (module documentation).
    /// With nobody registered, a stale hand-off request is dropped too.
    fn release_after_vain_wake(&self, mut state: u32) {
        loop {
            if state & WAKE_PENDING == 0 && parked(state) > 0 {
                let _ = self
                    .state
                    .update_and_wake(WakeOpKind::AndNot, LOCKED | REQUEUED, 1);
                return;
            }
            let mut next = state & !(LOCKED | REQUEUED | WAKE_PENDING);
            if parked(state) > 0 {
                next |= WAKE_SPENT;
            } else {
                next &= !HANDOFF_REQUESTED;
            }
            match self.try_release(state, next) {
                Ok(()) => return,
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

    /// The word is `LOCKED | HANDED`: wake a waiter to claim it. Every registered waiter
    /// unregisters after its wait returns, and unregistering claims `HANDED`, so the hand-off
    /// completes even when this wake finds nobody asleep yet (the waiter is between registering
    /// and sleeping: its wait sees the changed word and returns at once).
    fn finish_hand_off(&self) {
        // A raw address: the claimant may unlock and free the mutex before this call.
        let _ = Futex::wake_at(self.state.as_ptr(), 1);
    }

    /// Shows this thread, which has just taken the lock on the contended path, as its owner:
    /// its TID in `owner`, then `OWNER_SHOWN` (both release: a watcher that reads the mark with
    /// acquire reads this TID or a later value).
    fn show_owner(&self) {
        self.owner
            .store(crate::futex::current_tid(), Ordering::Release);
        self.state.fetch_or(OWNER_SHOWN, Ordering::Release);
    }

    /// Takes back what [`show_owner`](RawMutex::show_owner) wrote, while still holding the
    /// lock: clears `owner` and both marks. Returns the word after, and whether a watcher was
    /// marked (the caller wakes watchers once it has released: a watcher queued before that
    /// wake is woken, and one that checks `owner` after it sees the clear, as the kernel's
    /// wake is a full barrier after it; the two stores need no order of their own).
    fn hide_owner(&self) -> (u32, bool) {
        self.owner.store(0, Ordering::Relaxed);
        let before = self
            .state
            .fetch_and(!(OWNER_SHOWN | OWNER_WATCHED), Ordering::Relaxed);
        (
            before & !(OWNER_SHOWN | OWNER_WATCHED),
            before & OWNER_WATCHED != 0,
        )
    }

    /// Waits while the lock's shown owner runs, through [`crate::spin::wait_on_owner`] (the
    /// kernel's `FUTEX2_SPIN`: it spins while the owner is on a CPU, else sleeps until the
    /// unlock wakes it), for at most this mutex's spin budget. Returns whether it waited: not
    /// if no owner is shown, waiters are registered or spinning cannot pay now. The caller goes
    /// on as any waiter afterwards.
    fn watch_owner(&self, deadline: Option<Deadline>) -> bool {
        // Under loom the watch is untimed: the real machine's load and clock must not steer a
        // model, and a watcher that no unlock wakes then shows as loom's deadlock. (Within the
        // models' preemption bounds no watcher meets the one miss the real watch's bound
        // covers, a TID shown again in a later hold: the models pass.)
        if cfg!(loom) {
            return self.watch_owner_until(None);
        }
        if deadline.is_some_and(|d| d.has_passed()) {
            return false;
        }
        let budget_ns = self.spinner.budget_ns_before(deadline);
        // Forced on in a test: watch on a loaded machine too, so the protocol runs.
        #[cfg(test)]
        let budget_ns = if budget_ns == 0 && tests_force_owner_watch::on() {
            tests_force_owner_watch::BUDGET_NS
        } else {
            budget_ns
        };
        if budget_ns == 0 {
            return false;
        }
        let until = Deadline::after(Duration::from_nanos(budget_ns.into()));
        // The budget is already cut to the time `deadline` leaves.
        self.watch_owner_until(Some(until))
    }

    /// [`watch_owner`](RawMutex::watch_owner) until `until` (or, with `None`, until woken).
    fn watch_owner_until(&self, until: Option<Deadline>) -> bool {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & OWNER_SHOWN == 0
                || parked(state) > 0
                || until.is_some_and(|d| d.has_passed())
            {
                return false;
            }
            if state & OWNER_WATCHED == 0 {
                if let Err(now) = self.state.compare_exchange_weak(
                    state,
                    state | OWNER_WATCHED,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    state = now;
                    continue;
                }
            }
            // Acquire: a TID read here was shown after every hide that came before its show,
            // so the marks read next are no older than that hide.
            let owner_tid = self.owner.load(Ordering::Acquire);
            if owner_tid == 0 || owner_tid == crate::futex::current_tid() {
                return false;
            }
            // The mark must still be set, or the hide that clears it (and wakes) may already
            // have come and gone, and this TID belong to a later owner nobody will wake us for.
            state = self.state.load(Ordering::Acquire);
            if state & (OWNER_SHOWN | OWNER_WATCHED) != OWNER_SHOWN | OWNER_WATCHED {
                continue;
            }
            #[cfg(test)]
            tests_force_owner_watch::WATCHES.set(tests_force_owner_watch::WATCHES.get() + 1);
            let _ = crate::spin::wait_on_owner(&self.owner, owner_tid, &self.spinner, until);
            return true;
        }
    }
}

/// Whether contended owners show their TID and waiters watch it: where the kernel has
/// `FUTEX2_SPIN` (probed and opted in). Unit tests may force it on, to run the protocol with
/// [`crate::spin::wait_on_owner`]'s user-space fallback.
fn owner_watch_enabled() -> bool {
    #[cfg(test)]
    if tests_force_owner_watch::on() {
        return true;
    }
    crate::capabilities().has(crate::futex::Capability::Spin)
}

/// The switch unit tests turn on to run the `FUTEX2_SPIN` protocol on any kernel, and a count
/// of the watches that waited, per thread (so tests running alongside do not count), so tests
/// can tell that the protocol ran.
#[cfg(test)]
mod tests_force_owner_watch {
    use core::sync::atomic::{AtomicBool, Ordering};

    pub(super) static FORCE: AtomicBool = AtomicBool::new(false);
    std::thread_local! {
        pub(super) static WATCHES: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    }
    /// The watch's bound where spinning cannot pay but a test forces the protocol on.
    pub(super) const BUDGET_NS: u32 = 20_000;

    pub(super) fn on() -> bool {
        FORCE.load(Ordering::Relaxed)
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
    use super::*;
    use std::sync::Arc;

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

    /// Runs the `FUTEX2_SPIN` protocol on any kernel (with `wait_on_owner`'s user-space
    /// fallback). Left on: the protocol is correct either way, so other tests may run with it.
    fn force_owner_watch() {
        tests_force_owner_watch::FORCE.store(true, core::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn a_contended_owner_shows_its_tid_and_its_unlock_hides_it() {
        force_owner_watch();
        let raw = Arc::new(RawMutex::new());
        raw.lock(); // fast path: nothing shown
        assert_eq!(raw.state.load(Ordering::Relaxed) & OWNER_SHOWN, 0);
        let waiter = {
            let raw = Arc::clone(&raw);
            std::thread::spawn(move || {
                raw.lock(); // held by main: the contended path
                let shown = raw.state.load(Ordering::Relaxed) & OWNER_SHOWN != 0;
                let owner = raw.owner.load(Ordering::Relaxed);
                // SAFETY: locked just above.
                unsafe { raw.unlock() };
                (shown, owner, crate::futex::current_tid())
            })
        };
        while raw.state.load(Ordering::Relaxed) == LOCKED {
            std::thread::yield_now(); // until the waiter is registered or watching
        }
        // SAFETY: locked above by this thread.
        unsafe { raw.unlock() };
        let (shown, owner, waiter_tid) = waiter.join().unwrap();
        assert!(shown);
        assert_eq!(owner, waiter_tid);
        assert_eq!(raw.owner.load(Ordering::Relaxed), 0);
        assert_eq!(
            raw.state.load(Ordering::Relaxed),
            0,
            "no mark outlives the unlock"
        );
    }

    mod blocked {
        include!("../tests/common/blocked.rs");
    }

    /// An owner TID no thread has (above the largest `pid_max`): a spawned thread could have
    /// any TID near this one's.
    const NO_SUCH_THREAD: u32 = crate::futex::pi_bits::TID_MASK;

    #[test]
    fn an_unlock_wakes_a_watcher_asleep_on_the_owner() {
        let raw = Arc::new(RawMutex::new());
        let fake_owner = NO_SUCH_THREAD;
        raw.owner.store(fake_owner, Ordering::Relaxed);
        raw.state
            .store(LOCKED | OWNER_SHOWN | OWNER_WATCHED, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        let watcher = {
            let raw = Arc::clone(&raw);
            // As the kernel's FUTEX2_SPIN sleeps once the owner is off its CPU.
            std::thread::spawn(move || {
                tx.send(crate::futex::current_tid()).unwrap();
                raw.owner
                    .wait(fake_owner, Some(Deadline::after(Duration::from_secs(30))))
            })
        };
        blocked::wait_until_blocked(rx.recv().unwrap());
        // SAFETY: the word says locked, and nobody else unlocks it.
        unsafe { raw.unlock() };
        assert_eq!(
            watcher.join().unwrap(),
            Ok(()),
            "a sleeping watcher must be woken by the unlock, not left to its deadline"
        );
        assert_eq!(raw.owner.load(Ordering::Relaxed), 0);
        assert_eq!(raw.state.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_watch_needs_a_shown_owner_no_sleepers_and_another_thread() {
        let raw = RawMutex::new();
        let far = || Some(Deadline::after(Duration::from_secs(30)));
        raw.state.store(LOCKED, Ordering::Relaxed);
        assert!(!raw.watch_owner_until(far()), "no owner shown");
        raw.owner.store(NO_SUCH_THREAD, Ordering::Relaxed);
        raw.state
            .store(LOCKED | OWNER_SHOWN | ONE_PARKED, Ordering::Relaxed);
        assert!(!raw.watch_owner_until(far()), "a sleeper is registered");
        assert_eq!(raw.state.load(Ordering::Relaxed) & OWNER_WATCHED, 0);
        // A thread that relocks what it holds does not wait on itself (it deadlocks later, as
        // with std, but not in the kernel's spin).
        raw.owner
            .store(crate::futex::current_tid(), Ordering::Relaxed);
        raw.state.store(LOCKED | OWNER_SHOWN, Ordering::Relaxed);
        assert!(!raw.watch_owner_until(far()), "its own TID");
    }

    #[test]
    fn a_watch_marks_the_word_and_ends_when_the_owner_unlocks() {
        let raw = Arc::new(RawMutex::new());
        let owner = NO_SUCH_THREAD;
        raw.owner.store(owner, Ordering::Relaxed);
        raw.state.store(LOCKED | OWNER_SHOWN, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        let watcher = {
            let raw = Arc::clone(&raw);
            std::thread::spawn(move || {
                tx.send(crate::futex::current_tid()).unwrap();
                raw.watch_owner_until(None)
            })
        };
        // Asleep in the watch (an unlock before that could end it before it waits).
        blocked::wait_until_blocked(rx.recv().unwrap());
        assert_ne!(raw.state.load(Ordering::Relaxed) & OWNER_WATCHED, 0);
        // SAFETY: the word says locked, and nobody else unlocks it.
        unsafe { raw.unlock() };
        assert!(
            watcher.join().unwrap(),
            "it watched, and the unlock ended the watch"
        );
        assert_eq!(raw.state.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn watched_owners_lose_no_increment() {
        force_owner_watch();
        // As many threads as CPUs, so that spinning (and so watching) can pay; then more, so
        // that it cannot and waiters sleep with owners shown. A watch needs a waiter to arrive
        // while an owner is shown and nobody is registered, which a slow machine's scheduling
        // can make rare (none in two phases under qemu TCG): the phases repeat until one ran.
        // At least four repetitions (20,000 rounds per phase), more only until a watch ran.
        let cpus = crate::capabilities().usable_cpus().clamp(2, 8);
        let mut watches = 0;
        for repetition in 0..20 {
            if repetition >= 4 && watches > 0 {
                break;
            }
            for threads in [cpus, cpus * 3] {
                watches += contend_and_count(threads, 5_000);
            }
        }
        assert!(
            watches > 0,
            "the protocol never ran: no waiter watched a shown owner in 20 repetitions"
        );
    }

    /// `threads` threads add 1 `rounds` times each, every 64th time with a timed lock; the
    /// count must be exact and no owner left shown. Returns how many watches the threads made.
    fn contend_and_count(threads: usize, rounds: usize) -> u32 {
        let counter = Arc::new(Mutex::new(0usize));
        let start = Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (counter, start) = (Arc::clone(&counter), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    for round in 0..rounds {
                        let mut guard = if (round + i) % 64 == 0 {
                            // Timed locks go through the same watch, and time out in it.
                            loop {
                                if let Ok(guard) = counter.try_lock_for(Duration::from_micros(20)) {
                                    break guard;
                                }
                            }
                        } else {
                            counter.lock().unwrap()
                        };
                        *guard += 1;
                        for _ in 0..20 {
                            core::hint::spin_loop(); // a section long enough to contend over
                        }
                        if round % 512 == 0 {
                            std::thread::yield_now(); // preempted holders: watchers sleep
                        } else if round % 64 == 0 {
                            // A long hold, which waiters arriving meanwhile can watch.
                            std::thread::sleep(Duration::from_micros(100));
                        }
                    }
                    tests_force_owner_watch::WATCHES.get()
                })
            })
            .collect();
        let watches = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(*counter.lock().unwrap(), threads * rounds);
        assert_eq!(counter.raw.owner.load(Ordering::Relaxed), 0);
        assert_eq!(counter.raw.state.load(Ordering::Relaxed), 0);
        watches
    }
}

/// loom models of the `FUTEX2_SPIN` protocol (owner shown, watched, hidden), forced on and run
/// with `wait_on_owner`'s user-space fallback: mutual exclusion and no lost wakeup (a watcher
/// or sleeper nobody wakes shows as loom's deadlock).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::Condvar;
    use ::loom::sync::atomic::AtomicU32;
    use ::loom::sync::Arc;

    include!("../tests/common/loom_models.rs");

    /// [`model`] with the protocol forced on (it stays on: these are the only models here).
    fn watched_model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
        tests_force_owner_watch::FORCE.store(true, core::sync::atomic::Ordering::Relaxed);
        model(preemptions, f);
    }

    /// Mutual exclusion, and neither mark nor TID left once every thread is through.
    fn check_increments(preemptions: usize, locks: &'static [usize]) {
        watched_model(preemptions, move || {
            let (raw, count) = increments_in_threads(locks);
            assert_eq!(count as usize, locks.iter().sum::<usize>());
            assert_eq!(raw.state.load(Ordering::Relaxed), 0);
            assert_eq!(raw.owner.load(Ordering::Relaxed), 0);
        });
    }

    #[test]
    fn two_threads_with_watched_owners() {
        check_increments(3, &[2, 2]);
    }

    #[test]
    fn three_threads_with_watched_owners() {
        check_increments(2, &[1, 1, 1]);
    }

    /// Four holds among three threads: enough for a watcher to find a later owner's TID.
    #[test]
    fn three_threads_and_a_relock_with_watched_owners() {
        check_increments(2, &[1, 1, 2]);
    }

    /// Condvar requeue onto a mutex whose owners are shown and watched.
    #[test]
    fn a_broadcast_to_two_waiters_with_watched_owners() {
        watched_model(2, || {
            let state = broadcast_to_two_waiters();
            assert_eq!(state.0.raw.state.load(Ordering::Relaxed), 0);
        });
    }

    #[test]
    fn a_timed_lock_against_a_watched_owner() {
        watched_model(3, || {
            let raw = Arc::new(RawMutex::new());
            let counter = Arc::new(AtomicU32::new(0));
            let t = {
                let (raw, counter) = (Arc::clone(&raw), Arc::clone(&counter));
                ::loom::thread::spawn(move || {
                    if raw.try_lock_for(Duration::from_millis(1)) {
                        counter.fetch_add(1, Ordering::Relaxed);
                        // SAFETY: the timed lock succeeded.
                        unsafe { raw.unlock() };
                    }
                    locked_increment(&raw, &counter);
                })
            };
            locked_increment(&raw, &counter);
            t.join().unwrap();
            let v = counter.load(Ordering::Relaxed);
            assert!(v == 2 || v == 3);
            assert_eq!(raw.state.load(Ordering::Relaxed), 0);
        });
    }
}
