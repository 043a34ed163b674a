//! [`SharedSemaphore`]: a process-shared counting semaphore whose permits come back when their
//! holder dies, over [`RawSharedSemaphore`] (the protocol is there).

use core::fmt;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::{Permit, RawSharedSemaphore, SemaphoreError};

/// A process-shared counting semaphore of 1 to
/// [`SEMAPHORE_MAX_PERMITS`](crate::raw::SEMAPHORE_MAX_PERMITS) permits. A permit is a guard
/// held by the thread that took it; **when that thread dies (a process killed, a thread that
/// exits holding it), the kernel gives the permit back**, and whoever takes it next is told
/// ([`previous_holder_died`](SharedSemaphorePermit::previous_holder_died)). glibc's `sem_t`
/// loses a dead holder's permits for good. A thread asleep waiting for a permit notices one
/// given back by a death within 50 ms; a release wakes it at once. `#[repr(C)]`, 64-aligned.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().semaphore("workers", 2).build()?;
/// let workers = region.semaphore("workers")?;
/// let a = workers.acquire()?;
/// let b = workers.acquire()?;
/// assert!(workers.try_acquire().is_err(), "both permits are held");
/// assert!(!a.previous_holder_died());
/// drop((a, b));
/// assert_eq!(workers.available_permits(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedSemaphore {
    raw: RawSharedSemaphore,
}

/// A permit of a [`SharedSemaphore`], given back when dropped (or when its thread dies).
/// Not `Send`: the kernel tracks it in the taking thread's robust list.
#[must_use = "if unused the permit is given back at once"]
#[clippy::has_significant_drop]
pub struct SharedSemaphorePermit<'a> {
    semaphore: &'a SharedSemaphore,
    /// Taken out only by the drop, which gives it back.
    permit: core::mem::ManuallyDrop<Permit>,
    _not_send: PhantomData<*const ()>,
}

impl SharedSemaphore {
    /// A semaphore of `permits` free permits, to be placed in shared memory by the caller (a
    /// [`Region`](crate::shared::Region) does this for you).
    ///
    /// # Panics
    ///
    /// If `permits` is 0 or more than
    /// [`SEMAPHORE_MAX_PERMITS`](crate::raw::SEMAPHORE_MAX_PERMITS).
    ///
    /// # Safety
    ///
    /// As [`RawSharedSemaphore::new`]: from the first permit taken until it is dropped, the
    /// semaphore stays at its address and its memory is not freed without dropping it.
    pub unsafe fn new(permits: usize) -> SharedSemaphore {
        SharedSemaphore {
            // SAFETY: the caller's promise, passed on.
            raw: unsafe { RawSharedSemaphore::new(permits) },
        }
    }

    /// Uses the semaphore at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedSemaphore::from_ptr`].
    pub unsafe fn from_ptr<'a>(ptr: *const SharedSemaphore) -> &'a SharedSemaphore {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Blocks until this thread holds a permit.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::Corrupted`], [`SemaphoreError::Unsupported`],
    /// [`SemaphoreError::Futex`].
    pub fn acquire(&self) -> Result<SharedSemaphorePermit<'_>, SemaphoreError> {
        self.raw.acquire(None).map(|permit| self.guard(permit))
    }

    /// Takes a permit if one is free now.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::WouldBlock`]; otherwise as [`acquire`](Self::acquire).
    pub fn try_acquire(&self) -> Result<SharedSemaphorePermit<'_>, SemaphoreError> {
        self.raw.try_acquire().map(|permit| self.guard(permit))
    }

    /// Takes a permit, waiting at most about `timeout`.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::TimedOut`]; otherwise as [`acquire`](Self::acquire).
    pub fn try_acquire_for(
        &self,
        timeout: Duration,
    ) -> Result<SharedSemaphorePermit<'_>, SemaphoreError> {
        self.raw
            .acquire(Some(Deadline::after(timeout)))
            .map(|permit| self.guard(permit))
    }

    /// Takes a permit, waiting until `deadline` at most.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::TimedOut`]; otherwise as [`acquire`](Self::acquire).
    pub fn try_acquire_until(
        &self,
        deadline: Instant,
    ) -> Result<SharedSemaphorePermit<'_>, SemaphoreError> {
        self.raw
            .acquire(Some(Deadline::at(deadline)))
            .map(|permit| self.guard(permit))
    }

    /// How many permits it has, held or not.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::Corrupted`] if the memory holds no possible count.
    pub fn permits(&self) -> Result<usize, SemaphoreError> {
        self.raw.permits()
    }

    /// The permits free now (a snapshot).
    pub fn available_permits(&self) -> usize {
        self.raw.available()
    }

    /// The protocol, for the region's check that no permit is held when it is dropped.
    pub(crate) fn raw(&self) -> &RawSharedSemaphore {
        &self.raw
    }

    fn guard(&self, permit: Permit) -> SharedSemaphorePermit<'_> {
        SharedSemaphorePermit {
            semaphore: self,
            permit: core::mem::ManuallyDrop::new(permit),
            _not_send: PhantomData,
        }
    }
}

impl SharedSemaphorePermit<'_> {
    /// Whether the previous holder of this permit died holding it, so that the kernel gave it
    /// back: whatever that holder was doing under the permit was cut short.
    pub fn previous_holder_died(&self) -> bool {
        self.permit.previous_holder_died()
    }
}

impl Drop for SharedSemaphorePermit<'_> {
    fn drop(&mut self) {
        // SAFETY: the permit is taken out here only, once, and not looked at again.
        let permit = unsafe { core::mem::ManuallyDrop::take(&mut self.permit) };
        // SAFETY: the semaphore outlives the permit, so its memory stays mapped for the call.
        unsafe { self.semaphore.raw.release(permit) };
    }
}

impl fmt::Debug for SharedSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.raw, f)
    }
}

impl fmt::Debug for SharedSemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSemaphorePermit")
            .field("slot", &self.permit.slot())
            .field("previous_holder_died", &self.previous_holder_died())
            .finish()
    }
}
