//! `std::sync::Barrier`'s API over [`RawBarrier`](crate::raw::RawBarrier) (the protocol is
//! there).

use core::fmt;

use crate::raw::RawBarrier;

/// A barrier: `parties` threads wait for each other, then all continue, and it is ready for the
/// next round. `std::sync::Barrier`'s API and behaviour; one futex word (plus the party count)
/// where std's is a Mutex and a Condvar.
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use futexkit::sync::Barrier;
///
/// let barrier = Arc::new(Barrier::new(4));
/// let handles: Vec<_> = (0..4)
///     .map(|_| {
///         let barrier = Arc::clone(&barrier);
///         thread::spawn(move || barrier.wait().is_leader())
///     })
///     .collect();
/// let leaders = handles.into_iter().map(|h| h.join().unwrap());
/// assert_eq!(leaders.filter(|&leader| leader).count(), 1);
/// ```
pub struct Barrier {
    raw: RawBarrier,
}

/// What [`Barrier::wait`] returns: whether this thread was the round's leader (as std's).
pub struct BarrierWaitResult(pub(crate) bool);

impl BarrierWaitResult {
    /// True for exactly one thread per round (the last to arrive).
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl fmt::Debug for BarrierWaitResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierWaitResult")
            .field("is_leader", &self.is_leader())
            .finish()
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").finish_non_exhaustive()
    }
}

impl Barrier {
    crate::futex::sys::const_fn! {
        /// A barrier that releases its waiters each time `parties` of them have called
        /// [`wait`](Barrier::wait). With 0 or 1 parties, `wait` returns at once.
        #[must_use]
        pub const fn new(parties: usize) -> Barrier {
            Barrier {
                raw: RawBarrier::new(parties),
            }
        }
    }

    /// Blocks until `parties` threads have called `wait` in this round, then returns in all of
    /// them; exactly one is told it is the leader.
    pub fn wait(&self) -> BarrierWaitResult {
        BarrierWaitResult(self.raw.wait())
    }
}
