//! The priority-inheritance mutex protocol: the kernel's PI futex word, taken and released in
//! user space while nobody waits. `futexkit::sync::PiMutex` is this with std's API.
//!
//! ## State
//!
//! The word is the kernel's (`FUTEX_LOCK_PI`, see [`pi_bits`]):
//!
//! | field        | bits | meaning | set by | cleared by |
//! |--------------|------|---------|--------|------------|
//! | owner        | 0-29 | the holder's thread id; 0: free | a lock's CAS from 0; the kernel, for a thread it lets in | an unlock's CAS to 0; the kernel's unlock, which writes the next owner |
//! | `WAITERS`    | 31   | threads may be queued in the kernel | the kernel, as a thread queues; kept on the word it writes when it hands the lock over | the kernel's unlock when it finds nobody queued (it writes 0) |
//! | `OWNER_DIED` | 30   | never set here: only a robust list's owner death sets it, and these words are on none | | |
//!
//! Invariant, **no lost waiter**: while any thread is queued the word has `WAITERS` set, so
//! the user-space unlock (a CAS from exactly this thread's id to 0) fails and the unlock goes
//! through `FUTEX_UNLOCK_PI`, which hands the lock to the queued thread of highest priority.
//! While threads are queued the kernel lends the owner the highest of their priorities: this
//! is the inversion the lock prevents.
//!
//! ## Transitions
//!
//! * **lock**: CAS `0 -> tid`. Else `FUTEX_LOCK_PI`, in which the kernel queues the thread
//!   (setting `WAITERS`) or takes the lock for it. No spinning: the thread that would spin
//!   may be the one whose priority the owner needs.
//! * **unlock**: CAS `tid -> 0`. Else (`WAITERS`) `FUTEX_UNLOCK_PI`.
//!
//! [`pi_bits`]: crate::futex::pi_bits

use core::fmt;
use std::time::{Duration, Instant};

use crate::atomic::Ordering;
use crate::deadlock::{LockId, Mode, Target, Wait};
use crate::futex::{current_tid, pi_bits, Capability, Deadline, Error, Futex};

/// The kernel lacks priority-inheritance futexes (`CONFIG_FUTEX_PI`), or `FUTEXKIT_DISABLE`
/// names `pi`: [`RawPiMutex::new`] and [`PiMutex::new`](crate::sync::PiMutex::new) refuse, as
/// `pthread_mutex_init` refuses a `PTHREAD_PRIO_INHERIT` mutex there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PiUnsupported;

impl fmt::Display for PiUnsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("this kernel has no priority-inheritance futexes (CONFIG_FUTEX_PI)")
    }
}

impl std::error::Error for PiUnsupported {}

/// A priority-inheritance mutex: the kernel's PI futex word. Its protocol and state table are
/// at the top of `src/raw/pi_mutex.rs`.
///
/// ```
/// use futexkit::raw::RawPiMutex;
///
/// let lock = RawPiMutex::new().expect("the kernel has PI futexes");
/// lock.lock();
/// assert!(!lock.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { lock.unlock() };
/// ```
pub struct RawPiMutex {
    word: Futex,
    /// The deadlock checks' name for it (empty without the `deadlock` feature).
    id: LockId,
}

impl fmt::Debug for RawPiMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawPiMutex")
            .field("locked", &self.is_locked())
            .finish()
    }
}

impl RawPiMutex {
    /// A free PI mutex, if the kernel has PI futexes (probed once per process).
    ///
    /// # Errors
    ///
    /// [`PiUnsupported`] where the kernel lacks them.
    pub fn new() -> Result<RawPiMutex, PiUnsupported> {
        if !crate::futex::sys::MODEL_CHECKED && !crate::capabilities().has(Capability::Pi) {
            return Err(PiUnsupported);
        }
        Ok(RawPiMutex {
            word: Futex::new(0),
            id: LockId::new(),
        })
    }

    /// Blocks until this thread holds the lock, lending the holder this thread's priority
    /// meanwhile.
    ///
    /// # Panics
    ///
    /// If this thread holds the lock already (the kernel reports the deadlock), or its holder
    /// thread exited holding it while nobody waited. What a holder's exit leaves is not a
    /// contract: with waiters queued the kernel hands the lock to one of them at the exit (its
    /// call returns holding the lock, as if unlocked), and once the holder's thread id is
    /// reused, the kernel takes the new thread for the holder (a lock call waits for it, or
    /// panics as a deadlock on that thread).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn lock(&self) {
        let lock = || self.take_free() || self.lock_contended(None);
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Untimed, lock);
    }

    /// Takes the lock if it is free now; returns whether it did.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock(&self) -> bool {
        self.lock_bounded(None)
    }

    /// A bounded lock: one attempt without a deadline, else waits until `deadline`.
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn lock_bounded(&self, deadline: Option<Deadline>) -> bool {
        let lock = || self.take_free() || deadline.is_some_and(|d| self.lock_contended(Some(d)));
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Bounded, lock)
    }

    /// The lock as the deadlock checks name it.
    fn checked(&self) -> Target<'_> {
        Target::local(crate::deadlock::LockKind::PiMutex, &self.id)
    }

    /// The fast path: this thread's id into a free word.
    fn take_free(&self) -> bool {
        self.word
            .compare_exchange(0, current_tid(), Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Blocks until this thread holds the lock or `deadline` passes; returns whether it holds
    /// it. Before Linux 5.14 the kernel measures it on the realtime clock (converted once), so
    /// a wall clock set back or forward meanwhile lengthens or shortens the wait.
    ///
    /// # Panics
    ///
    /// As [`lock`](RawPiMutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_until(&self, deadline: Instant) -> bool {
        self.lock_bounded(Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread holds the lock or `timeout` passes; returns whether it holds
    /// it. Before Linux 5.14 the kernel measures it on the realtime clock (converted once), so
    /// a wall clock set back or forward meanwhile lengthens or shortens the wait.
    ///
    /// # Panics
    ///
    /// As [`lock`](RawPiMutex::lock).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        self.lock_bounded(Some(Deadline::after(timeout)))
    }

    /// Releases the lock, to the queued thread of highest priority if any.
    ///
    /// # Safety
    ///
    /// This thread holds the lock.
    pub unsafe fn unlock(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        if self
            .word
            .compare_exchange(current_tid(), 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // Threads may be queued: the kernel hands the lock over. It refuses only a thread
            // that is not the owner by the kernel's reckoning (the caller promised this one
            // is; a thread id cached wrongly, after a fork that ran no fork handlers, is the
            // one way it is not), and a refusal would leave the queued threads asleep.
            if let Err(err) = self.word.unlock_pi() {
                panic!("FUTEX_UNLOCK_PI refused the PiMutex's owner: {err}");
            }
        }
    }

    /// Whether some thread holds the lock now.
    pub fn is_locked(&self) -> bool {
        self.word.load(Ordering::Relaxed) & pi_bits::TID_MASK != 0
    }

    /// The slow path: the kernel queues this thread, boosting the holder, until the lock is
    /// this thread's or `deadline` passes. Before Linux 5.14 (no `FUTEX_LOCK_PI2`) the kernel
    /// measures the deadline on the realtime clock, converted once here: a wall clock set back
    /// meanwhile lengthens the wait.
    #[cold]
    fn lock_contended(&self, deadline: Option<Deadline>) -> bool {
        let locked = match deadline {
            None => self.word.lock_pi(None),
            // LOCK_PI2 measures a monotonic deadline; LOCK_PI converts it to the realtime clock.
            Some(_) if crate::capabilities().has(Capability::LockPi2) => {
                self.word.lock_pi2(deadline)
            }
            Some(_) => self.word.lock_pi(deadline),
        };
        match locked {
            Ok(()) => true,
            // The kernel gave this thread the lock, marked as left by a dead owner: it is held
            // all the same, and a panic here would leave it held for good. (Only a robust
            // list's death handling sets the mark, and this word is on none: no thread of this
            // crate's makes it.) The unlock's CAS from this thread's id fails on the mark and
            // goes through the kernel, which clears it.
            Err(Error::OwnerDied) => true,
            Err(Error::TimedOut) => false,
            Err(Error::WouldDeadlock) => panic!("this thread already holds the PiMutex"),
            Err(Error::NoSuchOwner) => panic!("the PiMutex's holder thread exited holding it"),
            Err(other) => panic!("FUTEX_LOCK_PI failed: {other}"),
        }
    }
}
