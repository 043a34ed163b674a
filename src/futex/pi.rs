//! The priority-inheritance futex family: `FUTEX_LOCK_PI`, `FUTEX_LOCK_PI2`,
//! `FUTEX_TRYLOCK_PI`, `FUTEX_UNLOCK_PI`, `FUTEX_WAIT_REQUEUE_PI`, `FUTEX_CMP_REQUEUE_PI`.
//!
//! A PI word holds the owner's thread id ([`pi_bits::TID_MASK`]), plus
//! [`pi_bits::WAITERS`] while threads are blocked and [`pi_bits::OWNER_DIED`] after the owner
//! died holding it; 0 means unlocked. User space takes the lock with a `0 -> tid` CAS and only
//! calls the kernel when that fails; these calls are that slow path, and the kernel boosts the
//! owner's priority while others wait.

use super::{op, pi_bits, sys, Clock, Deadline, Error, Futex, Scope};

impl<S: Scope> Futex<S> {
    /// `FUTEX_LOCK_PI`: blocks until this thread owns the PI lock, or until `deadline`.
    ///
    /// The kernel measures this op's timeout on `CLOCK_REALTIME`; a monotonic deadline is
    /// converted at the call. Prefer [`lock_pi2`](Futex::lock_pi2) where
    /// [`Capability::LockPi2`](super::Capability::LockPi2) is present.
    ///
    /// ```
    /// use futexkit::futex::{Error, Futex};
    ///
    /// let lock = Futex::new(0);
    /// lock.lock_pi(None).unwrap();
    /// assert_eq!(lock.trylock_pi(), Err(Error::WouldDeadlock));
    /// lock.unlock_pi().unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::WouldDeadlock`] if this thread already owns it; [`Error::OwnerDied`] if the lock
    /// was taken but its previous owner died (the caller owns it now);
    /// [`Error::NoSuchOwner`] if the word names a thread that does not exist;
    /// [`Error::TimedOut`]; [`Error::Unsupported`] without `CONFIG_FUTEX_PI`.
    pub fn lock_pi(&self, deadline: Option<Deadline>) -> Result<(), Error> {
        let deadline = deadline.map(|d| d.on_clock(Clock::Realtime));
        self.lock_pi_op(op::LOCK_PI, deadline)
    }

    /// `FUTEX_LOCK_PI2` (Linux 5.14+): as [`lock_pi`](Futex::lock_pi), but the deadline may be
    /// on either clock (monotonic by default, as it should be).
    ///
    /// # Errors
    ///
    /// As [`lock_pi`](Futex::lock_pi); [`Error::Unsupported`] before 5.14. On a kernel with the
    /// never-merged FUTEX_SWAP patch op 13 means something else, so this refuses to run there
    /// ([`Error::Unsupported`]) unless probing found `LOCK_PI2`.
    pub fn lock_pi2(&self, deadline: Option<Deadline>) -> Result<(), Error> {
        if !crate::futex::capabilities().has(super::Capability::LockPi2) {
            return Err(Error::Unsupported);
        }
        self.lock_pi_op(op::OP_13, deadline)
    }

    fn lock_pi_op(&self, base_op: i32, deadline: Option<Deadline>) -> Result<(), Error> {
        let mut futex_op = base_op | S::KIND.legacy_flag();
        let ts = deadline.map(|d| {
            if d.clock() == Clock::Realtime && base_op != op::LOCK_PI {
                futex_op |= op::CLOCK_REALTIME;
            }
            d.timespec()
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
        loop {
            // SAFETY: `self` is a live, aligned AtomicU32 for the call (the kernel CASes the
            // owner TID into it atomically); `ts_ptr` is null or points to `ts`.
            let result = unsafe {
                sys::futex(
                    self.as_ptr().cast(),
                    futex_op,
                    0,
                    ts_ptr as usize,
                    core::ptr::null(),
                    0,
                )
            };
            match result {
                Ok(_) => return self.acquired(),
                // The owner is exiting: the kernel asks us to try again.
                Err(libc::EAGAIN) | Err(libc::EINTR) => core::hint::spin_loop(),
                Err(errno) => return Err(Error::from_errno(errno)),
            }
        }
    }

    /// `FUTEX_TRYLOCK_PI`: takes the PI lock if it is free, without blocking.
    ///
    /// # Errors
    ///
    /// [`Error::WouldBlock`] if another thread owns it; [`Error::WouldDeadlock`] if this thread
    /// does; [`Error::OwnerDied`] as for [`lock_pi`](Futex::lock_pi).
    pub fn trylock_pi(&self) -> Result<(), Error> {
        // SAFETY: as in `lock_pi_op`; this op takes no timeout.
        let result = unsafe {
            sys::futex(
                self.as_ptr().cast(),
                op::TRYLOCK_PI | S::KIND.legacy_flag(),
                0,
                0,
                core::ptr::null(),
                0,
            )
        };
        match result {
            Ok(_) => self.acquired(),
            Err(libc::EAGAIN) => Err(Error::WouldBlock),
            Err(errno) => Err(Error::from_errno(errno)),
        }
    }

    /// `FUTEX_UNLOCK_PI`: releases the PI lock and hands it to the highest-priority waiter.
    ///
    /// # Errors
    ///
    /// [`Error::PermissionDenied`] if this thread does not own the lock.
    pub fn unlock_pi(&self) -> Result<(), Error> {
        // SAFETY: `self` is live and aligned; the kernel writes the new owner's TID atomically.
        let result = unsafe {
            sys::futex(
                self.as_ptr().cast(),
                op::UNLOCK_PI | S::KIND.legacy_flag(),
                0,
                0,
                core::ptr::null(),
                0,
            )
        };
        result.map(drop).map_err(Error::from_errno)
    }

    /// `FUTEX_WAIT_REQUEUE_PI`: waits on this (non-PI) word while it holds `expected`; a
    /// [`cmp_requeue_pi`](Futex::cmp_requeue_pi) moves the waiter onto `pi_lock`, and the call
    /// returns once the waiter owns `pi_lock` (the condition-variable pattern of PI mutexes).
    ///
    /// # Errors
    ///
    /// [`Error::ValueChanged`]; [`Error::TimedOut`] (the lock is not held);
    /// [`Error::OwnerDied`] (the lock is held); [`Error::InvalidArgument`] if `pi_lock` is this
    /// word.
    pub fn wait_requeue_pi(
        &self,
        expected: u32,
        pi_lock: &Futex<S>,
        deadline: Option<Deadline>,
    ) -> Result<(), Error> {
        if core::ptr::eq(self, pi_lock) {
            return Err(Error::InvalidArgument);
        }
        let mut futex_op = op::WAIT_REQUEUE_PI | S::KIND.legacy_flag();
        let ts = deadline.map(|d| {
            if d.clock() == Clock::Realtime {
                futex_op |= op::CLOCK_REALTIME;
            }
            d.timespec()
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
        // SAFETY: both words are live and aligned for the call; `ts_ptr` is null or points to
        // `ts`. The kernel may write `pi_lock` (taking the lock for us) atomically.
        let result = unsafe {
            sys::futex(
                self.as_ptr().cast(),
                futex_op,
                expected,
                ts_ptr as usize,
                pi_lock.as_ptr().cast(),
                0,
            )
        };
        match result {
            Ok(_) => pi_lock.acquired(),
            Err(errno) => Err(Error::from_errno(errno)),
        }
    }

    /// `FUTEX_CMP_REQUEUE_PI`: if this word holds `expected`, wakes one waiter of it (by taking
    /// `pi_lock` on its behalf, when free) and moves up to `n_requeue` others onto `pi_lock`.
    /// Returns how many were woken or moved.
    ///
    /// # Errors
    ///
    /// [`Error::ValueChanged`]; [`Error::InvalidArgument`] if the waiters did not wait with
    /// [`wait_requeue_pi`](Futex::wait_requeue_pi) on `pi_lock` or `pi_lock` is this word.
    pub fn cmp_requeue_pi(
        &self,
        expected: u32,
        pi_lock: &Futex<S>,
        n_requeue: u32,
    ) -> Result<usize, Error> {
        if core::ptr::eq(self, pi_lock) {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: both words are live and aligned for the call; the kernel may write `pi_lock`.
        let result = unsafe {
            sys::futex(
                self.as_ptr().cast(),
                op::CMP_REQUEUE_PI | S::KIND.legacy_flag(),
                1,
                n_requeue.min(i32::MAX as u32) as usize,
                pi_lock.as_ptr().cast(),
                expected,
            )
        };
        result.map_err(Error::from_errno)
    }

    /// After the kernel gave us the lock: report a dead previous owner.
    fn acquired(&self) -> Result<(), Error> {
        if self.load(core::sync::atomic::Ordering::Relaxed) & pi_bits::OWNER_DIED != 0 {
            Err(Error::OwnerDied)
        } else {
            Ok(())
        }
    }
}
