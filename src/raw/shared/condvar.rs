//! The process-shared condition variable protocol: a sequence word and a count of sleepers,
//! waited on with a [`RawSharedMutex`]. `futexkit::shared::SharedCondvar` is this with guards.
//!
//! ## State
//!
//! | field      | meaning | changed by |
//! |------------|---------|------------|
//! | `seq`      | futex word: notifies so far (wrapping) | every notify adds 1; with sleepers counted, in the same kernel call that wakes them |
//! | `sleepers` | waiters counted before their unlock that no wake has woken yet | a waiter adds 1 while it still holds the mutex; a notify takes back 1 for each sleeper its wake woke; a waiter whose wait ended unwoken (its spin saw `seq` change, `seq` had changed before its sleep, its deadline passed) takes back its own |
//!
//! ## Protocol
//!
//! * **wait**: while holding the mutex, add 1 to `sleepers` and read `seq`; unlock; spin on
//!   `seq` as the spin policy says (`spin_for_notify`), then sleep on it while it holds the
//!   value read, for at most the mutex's `RECHECK` (then return as a spurious wakeup); take the
//!   1 back unless a wake ended the sleep; relock. A woken waiter whose relock fails (its
//!   deadline passed while a peer held the mutex, or the mutex is not recoverable) notifies one
//!   more waiter before it returns the error: it took a wake it cannot act on, perhaps a
//!   `notify_one`'s only one. A notify this wait is
//!   owed comes from a thread that changed the condition under the mutex after this unlock, so
//!   it sees the count (the mutex orders them) and changes `seq` after it was read: the sleep
//!   returns at once or is woken.
//! * **notify**: with no sleepers counted, add 1 to `seq` (no system call); else add 1 and wake
//!   one or all sleepers in one `FUTEX_WAKE_OP`, which the kernel applies atomically; then take
//!   back the count of each sleeper it woke, and tell the spin policy how many that was
//!   (`crate::spin::notified`). So a notifier killed at any instruction either notified or did
//!   not: there is no moment with `seq` changed and the sleepers left asleep. A woken waiter
//!   stops counting as soon as the wake returns, not a wake-up's latency later when it runs, so
//!   notifies meanwhile find nobody left to wake and make no system call. As in the in-process
//!   Condvar (`src/raw/condvar.rs`), each count is taken back at most once, by the waker or the
//!   waiter, so `sleepers` never counts fewer than the waiters owed a wake.
//!
//! ## Deaths
//!
//! Nothing here is owned: a dead notifier notified or did not (above), and a dead waiter, or a
//! notifier that dies between its wake and taking the woken counts back, leaves only `sleepers`
//! too high, which costs every later notify its wake system call (it wakes nobody more). A
//! waiter killed after a `notify_one` woke it, before it relocked, took that notify with it; the
//! sleepers left find the condition at their next `RECHECK`. The mutex is robust: a waiter that
//! relocks after its holder died gets [`Acquired::OwnerDied`]. A wait releases the mutex, so waiting while holding it
//! inconsistent (after `OwnerDied`, before `mark_consistent`) makes it not recoverable, as
//! pthread's does.

use core::fmt;

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Deadline, Error, Futex, Shared, WakeOpKind};
use crate::raw::shared::mutex::recheck_by;
use crate::raw::shared::{Acquired, RawLockError, RawSharedMutex};

/// A process-shared condition variable without guards: 8 bytes (`#[repr(C)]`) for memory that
/// several processes map. Waits release and retake a [`RawSharedMutex`] the caller holds. Its
/// protocol is at the top of `src/raw/shared/condvar.rs`;
/// [`SharedCondvar`](crate::shared::SharedCondvar) is this with guards.
///
/// ```
/// use futexkit::futex::Deadline;
/// use futexkit::raw::{Acquired, RawSharedCondvar, RawSharedMutex};
/// use std::time::Duration;
///
/// // SAFETY: kept in this frame, never moved (shared memory is where it belongs: `from_ptr`).
/// let mutex = unsafe { RawSharedMutex::new() };
/// let condvar = RawSharedCondvar::new();
/// mutex.lock()?;
/// // Nobody notifies: the wait ends at its deadline, with the mutex held again.
/// let deadline = Deadline::after(Duration::from_millis(1));
/// // SAFETY: this thread holds `mutex`, which outlives the call.
/// let (acquired, timed_out) = unsafe { condvar.wait(&mutex, Some(deadline)) }?;
/// assert_eq!((acquired, timed_out), (Acquired::Consistent, true));
/// // SAFETY: held again after the wait.
/// unsafe { mutex.unlock() };
/// # Ok::<(), futexkit::raw::RawLockError>(())
/// ```
#[repr(C)]
pub struct RawSharedCondvar {
    seq: Futex<Shared>,
    sleepers: AtomicU32,
}

impl Default for RawSharedCondvar {
    fn default() -> RawSharedCondvar {
        RawSharedCondvar::new()
    }
}

impl fmt::Debug for RawSharedCondvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawSharedCondvar")
            .field("sleepers", &self.sleepers.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RawSharedCondvar {
    crate::futex::sys::const_fn! {
        /// A condition variable with no waiters.
        #[must_use]
        pub const fn new() -> RawSharedCondvar {
            RawSharedCondvar {
                seq: Futex::shared(0),
                sleepers: AtomicU32::new(0),
            }
        }
    }

    /// Uses the condition variable at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::from_ptr`], for these 8 bytes (4-aligned).
    pub unsafe fn from_ptr<'a>(ptr: *const RawSharedCondvar) -> &'a RawSharedCondvar {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Wakes one waiter, if any. A notify with nobody waiting is not remembered.
    pub fn notify_one(&self) {
        self.notify(1);
    }

    /// Wakes all waiters.
    pub fn notify_all(&self) {
        self.notify(i32::MAX as u32);
    }

    fn notify(&self, n: u32) {
        if self.sleepers.load(Ordering::Relaxed) == 0 {
            self.seq.fetch_add(1, Ordering::Release);
            crate::spin::notified(0);
        } else {
            // One kernel call adds 1 and wakes: a notifier that dies in it did both or neither.
            // The woken stop counting now: they do not take their counts back themselves.
            let woken = self.seq.change_and_wake(WakeOpKind::Add, 1, n);
            self.sleepers.fetch_sub(woken as u32, Ordering::Relaxed);
            crate::spin::notified(woken);
        }
    }

    /// Unlocks `mutex`, waits for a notify, a spurious wakeup (one at least every 100 ms, so
    /// that a waiter killed holding a notify strands nobody) or `deadline`, and locks `mutex`
    /// again, by `deadline` too: a peer that holds the mutex (or scribbles it) cannot keep a
    /// timed wait past its deadline. Returns how the relock went and whether the deadline
    /// passed without a notify.
    ///
    /// # Errors
    ///
    /// What [`RawSharedMutex::lock`] (or, with a deadline, [`RawSharedMutex::try_lock_until`],
    /// so [`RawLockError::TimedOut`]) returns when relocking; the mutex is not held then.
    ///
    /// # Safety
    ///
    /// The calling thread must hold `mutex`; as for [`RawSharedMutex::unlock`], both must stay
    /// mapped until the call returns.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub unsafe fn wait(
        &self,
        mutex: &RawSharedMutex,
        deadline: Option<Deadline>,
    ) -> Result<(Acquired, bool), RawLockError> {
        // Counted and read under the lock: a notify this wait is owed comes after both.
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        let seq = self.seq.load(Ordering::Relaxed);
        // SAFETY: the caller holds the lock and keeps the memory mapped.
        unsafe { mutex.unlock() };
        // Woken (spuriously or not), or not: `seq` changed before the sleep, or the deadline
        // passed. Either way this wait is over (callers re-check their condition).
        // The sleep ends by `RECHECK` at the latest (a spurious wakeup): a waiter whose wake was
        // taken by one killed before it could relock is not left asleep for good.
        let slept =
            if crate::spin::spin_for_notify(deadline, || self.seq.load(Ordering::Relaxed) != seq) {
                None
            } else {
                Some(self.seq.wait(seq, recheck_by(deadline)))
            };
        let woken = slept == Some(Ok(()));
        if !woken {
            // Not woken: no notify took this count back.
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
        }
        let timed_out =
            slept == Some(Err(Error::TimedOut)) && deadline.is_some_and(|d| d.has_passed());
        let relocked = match deadline {
            None => mutex.lock(),
            Some(deadline) => mutex.try_lock_until(deadline),
        };
        if woken && relocked.is_err() {
            // This waiter took a wake (perhaps a `notify_one`'s only one) and returns without
            // the mutex, so without looking at the condition: another sleeper may be owed it.
            self.notify(1);
        }
        relocked.map(|acquired| (acquired, timed_out))
    }
}
