//! A counting semaphore with RAII permits over [`RawSemaphore`] (the protocol is there).

use core::fmt;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::raw::RawSemaphore;

/// A counting semaphore: at most as many holders at once as it has permits. std has none
/// (it removed its own); this is one futex word of free permits and a waiters bit.
/// A permit is a guard that gives its permit back when dropped;
/// [`add_permits`](Semaphore::add_permits) adds permits that nobody took (a `sem_post`).
/// Waiters are not served in arrival order.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use futexkit::sync::Semaphore;
///
/// // At most 2 of the 8 threads are inside at once.
/// let slots = Semaphore::new(2);
/// let inside = AtomicUsize::new(0);
/// std::thread::scope(|s| {
///     for _ in 0..8 {
///         s.spawn(|| {
///             let _permit = slots.acquire();
///             assert!(inside.fetch_add(1, Ordering::SeqCst) < 2);
///             inside.fetch_sub(1, Ordering::SeqCst);
///         });
///     }
/// });
/// assert_eq!(slots.available_permits(), 2);
/// ```
pub struct Semaphore {
    raw: RawSemaphore,
}

/// One permit of a [`Semaphore`], given back when dropped (or kept for good by
/// [`forget`](SemaphorePermit::forget)). Like a lock guard it is `!Send`: the permit belongs
/// to the thread that took it.
#[must_use = "if unused the permit is given back at once"]
#[clippy::has_significant_drop]
pub struct SemaphorePermit<'a> {
    semaphore: &'a Semaphore,
    not_send: PhantomData<*const ()>,
}

// SAFETY: a shared permit gives nothing but the semaphore's address.
unsafe impl Sync for SemaphorePermit<'_> {}

impl Semaphore {
    crate::futex::sys::const_fn! {
        /// A semaphore with `permits` free permits.
        ///
        /// # Panics
        ///
        /// If `permits` is above [`MAX_PERMITS`](crate::raw::MAX_PERMITS) (2^31 - 1).
        #[must_use]
        pub const fn new(permits: u32) -> Semaphore {
            Semaphore {
                raw: RawSemaphore::new(permits),
            }
        }
    }

    /// Blocks until this thread has taken a permit.
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        self.raw.acquire();
        self.permit()
    }

    /// Takes a permit if one is free now.
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        self.raw.try_acquire().then(|| self.permit())
    }

    /// Takes a permit, waiting at most about `timeout`.
    pub fn try_acquire_for(&self, timeout: Duration) -> Option<SemaphorePermit<'_>> {
        self.raw.try_acquire_for(timeout).then(|| self.permit())
    }

    /// Takes a permit, waiting until `deadline` at most.
    pub fn try_acquire_until(&self, deadline: Instant) -> Option<SemaphorePermit<'_>> {
        self.raw.try_acquire_until(deadline).then(|| self.permit())
    }

    /// Adds `n` free permits, waking up to `n` waiters.
    ///
    /// # Panics
    ///
    /// If the free permits would pass [`MAX_PERMITS`](crate::raw::MAX_PERMITS) (2^31 - 1).
    pub fn add_permits(&self, n: u32) {
        self.raw.release(n);
    }

    /// The permits free now (others may take or add some at any moment).
    pub fn available_permits(&self) -> u32 {
        self.raw.available()
    }

    fn permit(&self) -> SemaphorePermit<'_> {
        SemaphorePermit {
            semaphore: self,
            not_send: PhantomData,
        }
    }
}

impl SemaphorePermit<'_> {
    /// Keeps the permit taken for good: the semaphore has one permit fewer from now on.
    pub fn forget(self) {
        core::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    /// Gives the permit back, unless [`add_permits`](Semaphore::add_permits) has filled the
    /// semaphore to [`MAX_PERMITS`](crate::raw::MAX_PERMITS) meanwhile: then the permit is
    /// dropped, as a drop must not panic.
    fn drop(&mut self) {
        self.semaphore.raw.release_up_to(1, crate::raw::MAX_PERMITS);
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available_permits", &self.available_permits())
            .finish()
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").finish_non_exhaustive()
    }
}
