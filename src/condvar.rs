//! A condition variable with `std::sync::Condvar`'s API whose `notify_all` moves the waiters
//! onto the mutex instead of waking them all.
//!
//! ## State encoding
//!
//! ```text
//! seq                u32 futex word  bumped (wrapping) by every notify; waiters sleep on it
//! sleepers           u32             waiters asleep (or about to be) on `seq`: notify makes
//!                                    no syscall when it is 0
//! mutex              usize           address of the mutex's futex word, bound by the first wait
//! requeues_started   u32             bumped (wrapping) by notify_all before it requeues
//! requeues_finished  u32             bumped (wrapping) by notify_all once its requeue call
//!                                    returns (made or refused)
//! ```
//!
//! * Wait: read `seq` while holding the mutex, unlock, spin briefly (the shared policy) for
//!   `seq` to move, then count in `sleepers`, sleep on the value read, and relock. A notify
//!   that follows the unlock changes `seq`, so the sleep returns at once or is woken: no lost
//!   wakeup. Only equality is compared, so wrap-around loses nothing (a waiter would have to
//!   sleep through exactly 2^32 notifies, each of which wakes or moves it first).
//! * `notify_one`: bump, and wake one sleeper if any.
//! * `notify_all`: bump, then `FUTEX_CMP_REQUEUE`: wake one sleeper and move the rest onto the
//!   mutex's word, where each unlock wakes the next (see `REQUEUED` in [`crate::mutex`]): a
//!   broadcast costs one wake instead of a stampede (rust-lang/rust#98707). The mutex word is
//!   passed by address only, as a waiter may return and drop the mutex meanwhile. Before the
//!   first wait, when the value moved under us, or when the kernel refuses, it wakes everyone.
//! * A waiter that may have been moved relocks through `RawMutex::lock_after_requeue` (which
//!   marks the mutex so that unlocks keep waking); any other waiter relocks plainly, sparing
//!   the mutex's next unlock a syscall. `FUTEX_CMP_REQUEUE` moves every sleeper queued on
//!   `seq` once the word holds the notify's new value, so a waiter that relocked after a
//!   notify's bump and slept on the new value is moved too. A waiter therefore reads
//!   `requeues_finished`, then `requeues_started`, before it sleeps, and counts itself as maybe
//!   moved if they differ (a requeue is in flight and may move this sleeper) or if
//!   `requeues_started` moved by the time it wakes (a requeue started after the read: the
//!   kernel's requeue, and the wake or timeout on the mutex word after it, go through the
//!   futex bucket locks, which order that bump before the return). A requeue that finished
//!   before the first read cannot move a sleeper that queued after it. The same rule covers
//!   the waiter a requeue wakes directly, which [`crate::mutex`] counts on to re-mark the word.

use core::fmt;
use core::sync::atomic::AtomicUsize;
use std::sync::{LockResult, PoisonError};
use std::time::{Duration, Instant};

use crate::atomic::{fence, AtomicU32, Ordering};
use crate::futex::{Deadline, Error, Futex};
use crate::mutex::{MutexGuard, RawMutex};
use crate::spin::Spinner;

/// A condition variable: `std::sync::Condvar`'s API and behaviour, with a `notify_all` that
/// wakes one waiter and queues the rest on the mutex.
///
/// Works with [`futexkit::Mutex`](crate::Mutex) guards. As with std, spurious wakeups can
/// happen: wait in a loop or with [`wait_while`](Condvar::wait_while). Using one `Condvar`
/// with two different mutexes panics.
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use futexkit::{Condvar, Mutex};
///
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let pair2 = Arc::clone(&pair);
/// thread::spawn(move || {
///     let (lock, cvar) = &*pair2;
///     *lock.lock().unwrap() = true;
///     cvar.notify_one();
/// });
/// let (lock, cvar) = &*pair;
/// let started = cvar.wait_while(lock.lock().unwrap(), |started| !*started).unwrap();
/// assert!(*started);
/// ```
pub struct Condvar {
    seq: Futex,
    sleepers: AtomicU32,
    /// The bound mutex's futex word, as an address (0 until the first wait).
    mutex: AtomicUsize,
    /// Requeues begun by `notify_all` (module documentation).
    requeues_started: AtomicU32,
    /// Requeues `notify_all` has made (or had refused).
    requeues_finished: AtomicU32,
    spinner: Spinner,
}

/// Whether a timed wait on a [`Condvar`] returned because its time ran out (as std's).
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// True if the wait ended because the timeout elapsed.
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}

impl Condvar {
    /// A condition variable with no waiters.
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new() -> Condvar {
        Condvar {
            seq: Futex::new(0),
            sleepers: AtomicU32::new(0),
            mutex: AtomicUsize::new(0),
            requeues_started: AtomicU32::new(0),
            requeues_finished: AtomicU32::new(0),
            spinner: Spinner::new(),
        }
    }

    /// A condition variable with no waiters (not `const` under loom).
    #[cfg(loom)]
    pub fn new() -> Condvar {
        Condvar {
            seq: Futex::new(0),
            sleepers: AtomicU32::new(0),
            mutex: AtomicUsize::new(0),
            requeues_started: AtomicU32::new(0),
            requeues_finished: AtomicU32::new(0),
            spinner: Spinner::new(),
        }
    }

    /// Unlocks the guard's mutex, blocks until notified (or spuriously woken), and locks it
    /// again. Returns the guard, as an error if the mutex was poisoned meanwhile.
    ///
    /// # Panics
    ///
    /// If this condition variable was used with a different mutex before.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        self.wait_raw(guard.mutex().raw(), None);
        poison_check(guard)
    }

    /// Waits until `condition` returns false, re-checking it under the lock after every
    /// wakeup (so spurious wakeups are absorbed).
    ///
    /// # Panics
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// As [`wait`](Condvar::wait), giving up after about `timeout`. The result says whether
    /// the time ran out (a notify may still have arrived meanwhile: check the condition).
    ///
    /// # Panics
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let timed_out = self.wait_raw(guard.mutex().raw(), Some(Deadline::after(timeout)));
        match poison_check(guard) {
            Ok(guard) => Ok((guard, WaitTimeoutResult(timed_out))),
            Err(poisoned) => Err(PoisonError::new((
                poisoned.into_inner(),
                WaitTimeoutResult(timed_out),
            ))),
        }
    }

    /// Waits until `condition` returns false or `timeout` has passed in all, recomputing the
    /// time left after every wakeup. The result's `timed_out()` is true if the condition still
    /// held when the time ran out.
    ///
    /// # Panics
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_timeout_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        let start = Instant::now();
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            let Some(left) = timeout.checked_sub(start.elapsed()) else {
                return Ok((guard, WaitTimeoutResult(true)));
            };
            guard = self.wait_timeout(guard, left)?.0;
        }
    }

    /// Wakes one waiter, if any. A notify with nobody waiting is not remembered.
    pub fn notify_one(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        if self.sleepers_after_notify() > 0 {
            let _ = self.seq.wake(1);
        }
    }

    /// Wakes all waiters: one now, the others one per unlock of their mutex (they are moved
    /// onto it, not woken to fight over it).
    pub fn notify_all(&self) {
        let seq = self.seq.fetch_add(1, Ordering::Release).wrapping_add(1);
        let sleepers = self.sleepers_after_notify();
        if sleepers == 0 {
            return;
        }
        let mutex = self.mutex.load(Ordering::Relaxed) as *const Futex;
        if sleepers > 1 && !mutex.is_null() {
            self.requeues_started.fetch_add(1, Ordering::Relaxed);
            #[cfg(test)]
            tests_pause_before_requeue::pause_if_asked(self);
            let moved = self
                .seq
                .cmp_requeue_at(seq, 1, mutex, i32::MAX as u32)
                .is_ok();
            // Release: a waiter that reads this bump reads the start's bump too.
            self.requeues_finished.fetch_add(1, Ordering::Release);
            // On ValueChanged (another notify moved the value) or a refusal, wake everyone.
            if moved {
                return;
            }
        }
        let _ = self.seq.wake(u32::MAX);
    }

    /// How many waiters may be asleep, after this thread bumped `seq`. The fence pairs with
    /// the one in `wait_raw` (store `sleepers`, fence, load `seq`): of two threads that each
    /// store and then load the other's variable behind a SeqCst fence, at least one sees the
    /// other's store. So either this sees the sleeper, or the sleeper sees the bump and does not
    /// sleep.
    fn sleepers_after_notify(&self) -> u32 {
        fence(Ordering::SeqCst);
        self.sleepers.load(Ordering::Relaxed)
    }

    /// Binds this condition variable to `raw`'s word, or panics if bound to another mutex.
    fn bind(&self, raw: &RawMutex) {
        let addr = raw.futex() as *const Futex as usize;
        match self
            .mutex
            .compare_exchange(0, addr, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => {}
            Err(bound) if bound == addr => {}
            Err(_) => panic!("attempted to use a condition variable with two mutexes"),
        }
    }

    /// The wait itself, with `raw` locked by the caller on entry and on return. Returns
    /// whether the deadline passed.
    fn wait_raw(&self, raw: &RawMutex, deadline: Option<Deadline>) -> bool {
        self.bind(raw);
        let seq = self.seq.load(Ordering::Relaxed);
        // SAFETY: the caller's guard proves this thread owns `raw`; it is relocked below
        // before the guard is used again.
        unsafe { raw.unlock() };
        let notified = || self.seq.load(Ordering::Acquire) != seq;
        let start = Instant::now();
        if self.spinner.spin_until_before(deadline, notified) {
            raw.lock();
            return false;
        }
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // Finished first, then started: a requeue in flight makes them differ (module doc).
        let finished = self.requeues_finished.load(Ordering::Acquire);
        let started = self.requeues_started.load(Ordering::Relaxed);
        let result = if self.seq.load(Ordering::Relaxed) == seq {
            self.seq.wait(seq, deadline)
        } else {
            Err(Error::ValueChanged)
        };
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        let maybe_moved =
            started != finished || self.requeues_started.load(Ordering::Relaxed) != started;
        #[cfg(test)]
        tests_pause_before_requeue::LAST_WAIT_MAYBE_MOVED.set(maybe_moved);
        let relock = || {
            if maybe_moved {
                raw.lock_after_requeue();
            } else {
                raw.lock();
            }
        };
        if result.is_ok() {
            // A notify that came soon after the spin gave up teaches the spinner to wait longer.
            self.spinner.record_sleep(start.elapsed());
        }
        match result {
            // Not queued when the wait returned (never slept, or a moved waiter whose wait a
            // signal ended and the retry found the value changed): nothing left on the mutex
            // word to pass a wake on to.
            Err(Error::ValueChanged) => {
                raw.lock();
                false
            }
            Err(Error::TimedOut) => {
                relock();
                // A waiter moved onto a busy mutex can time out there after its notify came:
                // report a notify that came as such, as std would.
                self.seq.load(Ordering::Relaxed) == seq
            }
            _ => {
                relock();
                false
            }
        }
    }
}

fn poison_check<T: ?Sized>(guard: MutexGuard<'_, T>) -> LockResult<MutexGuard<'_, T>> {
    if guard.mutex().is_poisoned() {
        Err(PoisonError::new(guard))
    } else {
        Ok(guard)
    }
}

/// Pauses one Condvar's `notify_all` between counting its requeue as started and making it, so
/// a unit test can put a waiter to sleep in that window; and what the last wait on this thread
/// concluded about being moved.
#[cfg(test)]
mod tests_pause_before_requeue {
    use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::cell::Cell;

    /// The address of the Condvar whose `notify_all` pauses (0: none).
    pub(super) static TARGET: AtomicUsize = AtomicUsize::new(0);
    /// Set while that `notify_all` waits for `TARGET` to be cleared.
    pub(super) static PAUSED: AtomicBool = AtomicBool::new(false);

    std::thread_local! {
        pub(super) static LAST_WAIT_MAYBE_MOVED: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn pause_if_asked(condvar: &super::Condvar) {
        if TARGET.load(Ordering::SeqCst) != condvar as *const super::Condvar as usize {
            return;
        }
        PAUSED.store(true, Ordering::SeqCst);
        while TARGET.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        PAUSED.store(false, Ordering::SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::tests_pause_before_requeue::{LAST_WAIT_MAYBE_MOVED, PAUSED, TARGET};
    use super::*;
    use crate::Mutex;
    use std::sync::{mpsc, Arc};
    use std::thread;

    mod blocked {
        include!("../tests/common/blocked.rs");
    }

    /// Yields until `done` holds; panics after 60 s (a hang is a failure).
    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "waited 60 s for {what}"
            );
            thread::yield_now();
        }
    }

    /// Ends the pause of `notify_all` when dropped.
    struct ReleasePause;

    impl Drop for ReleasePause {
        fn drop(&mut self) {
            TARGET.store(0, Ordering::SeqCst);
        }
    }

    /// `FUTEX_CMP_REQUEUE` moves every sleeper on `seq` once the word holds the notify's new
    /// value, including one that relocked after the notify's bump and went to sleep on that
    /// value before the requeue. Such a waiter must relock as possibly moved: relocking
    /// plainly, it neither passes on the wake chain of the moved sleepers behind it
    /// (`REQUEUED`) nor clears a `WAKING` meant for the waiter it was woken in place of, and
    /// sleepers are stranded (seen as a hang of `broadcasts_race_with_new_waiters_and_timeouts`).
    #[test]
    fn a_waiter_asleep_before_a_requeue_in_flight_relocks_as_moved() {
        let state = Arc::new((Mutex::new(0u32), Condvar::new()));
        let (tid_tx, tid_rx) = mpsc::channel();
        // Two sleepers, so that the notify takes the requeue path.
        let early: Vec<_> = (0..2)
            .map(|_| {
                let (state, tid_tx) = (Arc::clone(&state), tid_tx.clone());
                thread::spawn(move || {
                    tid_tx.send(crate::futex::current_tid()).unwrap();
                    let (lock, cv) = &*state;
                    drop(
                        cv.wait_while(lock.lock().unwrap(), |round| *round < 2)
                            .unwrap(),
                    );
                })
            })
            .collect();
        let (lock, cv) = &*state;
        // Counted as sleepers (so past the lock) and asleep: on `seq`, then.
        wait_for("two early sleepers", || {
            cv.sleepers.load(Ordering::Relaxed) == 2
        });
        for _ in 0..2 {
            blocked::wait_until_blocked(tid_rx.recv().unwrap());
        }
        TARGET.store(cv as *const Condvar as usize, Ordering::SeqCst);
        // Lets the notify go on even if an assertion below fails.
        let _release = ReleasePause;
        let notifier = {
            let state = Arc::clone(&state);
            thread::spawn(move || {
                *state.0.lock().unwrap() = 1;
                state.1.notify_all();
            })
        };
        wait_for("the notify to pause", || PAUSED.load(Ordering::SeqCst));
        // The requeue has been counted as started, not made: this waiter reads the new `seq`
        // and the new count, and sleeps.
        let late = {
            let (state, tid_tx) = (Arc::clone(&state), tid_tx.clone());
            thread::spawn(move || {
                tid_tx.send(crate::futex::current_tid()).unwrap();
                let (lock, cv) = &*state;
                drop(cv.wait(lock.lock().unwrap()).unwrap());
                LAST_WAIT_MAYBE_MOVED.get()
            })
        };
        wait_for("the late sleeper", || {
            cv.sleepers.load(Ordering::Relaxed) == 3
        });
        blocked::wait_until_blocked(tid_rx.recv().unwrap());
        TARGET.store(0, Ordering::SeqCst);
        notifier.join().unwrap();
        // The notify woke one early sleeper and moved the other and `late` onto the mutex; the
        // unlocks of the early ones (back to waiting: the round is not 2 yet) wake the rest.
        assert!(
            late.join().unwrap(),
            "a waiter the requeue in flight moved relocked as never moved"
        );
        *lock.lock().unwrap() = 2;
        cv.notify_all();
        for t in early {
            t.join().unwrap();
        }
    }
}
