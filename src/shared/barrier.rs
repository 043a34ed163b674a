//! [`SharedBarrier`]: a process-shared barrier whose parties are known, over
//! [`RawSharedBarrier`].

use core::fmt;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::futex::Deadline;
use crate::raw::{BarrierError, Party, RawSharedBarrier};
use crate::sync::BarrierWaitResult;

/// A process-shared barrier for a fixed number of parties, each a thread that
/// [`join`](SharedBarrier::join)s it. Unlike std's, a party's death (or its leaving, or a
/// timeout) breaks the barrier: every wait then fails with [`BarrierError::Broken`] instead of
/// waiting for ever for a party that cannot arrive. `#[repr(C)]`, 64-aligned.
///
/// ```
/// use futexkit::shared::Region;
///
/// let region = Region::builder().barrier("start", 2).build()?;
/// let start = region.barrier("start")?;
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let me = start.join().unwrap();
///         me.wait().unwrap();
///     });
///     let me = start.join().unwrap();
///     me.wait().unwrap();
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(C)]
pub struct SharedBarrier {
    raw: RawSharedBarrier,
}

impl SharedBarrier {
    /// A barrier for `parties` parties, to be placed in shared memory by the caller.
    ///
    /// # Panics
    ///
    /// If `parties` is 0 or more than [`BARRIER_MAX_PARTIES`](crate::raw::BARRIER_MAX_PARTIES).
    ///
    /// # Safety
    ///
    /// As [`RawSharedBarrier::new`]: from the first join until it is dropped, the barrier
    /// stays at its address and its memory is not freed without dropping it.
    pub unsafe fn new(parties: usize) -> SharedBarrier {
        SharedBarrier {
            // SAFETY: the caller's promise, passed on.
            raw: unsafe { RawSharedBarrier::new(parties) },
        }
    }

    /// Uses the barrier at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedBarrier::from_ptr`].
    pub unsafe fn from_ptr<'a>(ptr: *const SharedBarrier) -> &'a SharedBarrier {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Takes a party's place for this thread; the place is held until the handle is dropped
    /// (which breaks the barrier) or the thread dies (likewise).
    ///
    /// # Errors
    ///
    /// [`BarrierError::Broken`], [`BarrierError::Full`], [`BarrierError::AlreadyJoined`],
    /// [`BarrierError::Corrupted`], [`BarrierError::Unsupported`].
    pub fn join(&self) -> Result<BarrierParty<'_>, BarrierError> {
        Ok(BarrierParty {
            barrier: self,
            party: self.raw.join()?,
            _not_send: PhantomData,
        })
    }

    /// How many parties a round takes.
    ///
    /// # Errors
    ///
    /// [`BarrierError::Corrupted`] if the memory holds no possible count.
    pub fn parties(&self) -> Result<usize, BarrierError> {
        self.raw.parties()
    }

    /// Whether no round can complete again.
    pub fn is_broken(&self) -> bool {
        self.raw.is_broken()
    }
}

impl fmt::Debug for SharedBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.raw, f)
    }
}

/// One party of a [`SharedBarrier`]: the thread that joined. Dropping it leaves the barrier,
/// which breaks it. Not `Send`.
pub struct BarrierParty<'a> {
    barrier: &'a SharedBarrier,
    party: Party,
    _not_send: PhantomData<*const ()>,
}

impl BarrierParty<'_> {
    /// Arrives and waits until every party has arrived. One party per round is the leader.
    ///
    /// # Errors
    ///
    /// [`BarrierError::Broken`] if a party died, left or timed out, before or during the wait.
    pub fn wait(&self) -> Result<BarrierWaitResult, BarrierError> {
        self.wait_deadline(None)
    }

    /// As [`wait`](Self::wait), for `timeout` at most; a timeout breaks the barrier.
    ///
    /// # Errors
    ///
    /// [`BarrierError::TimedOut`]; otherwise as [`wait`](Self::wait).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<BarrierWaitResult, BarrierError> {
        self.wait_deadline(Some(Deadline::after(timeout)))
    }

    /// As [`wait`](Self::wait), until `deadline` at the latest; a timeout breaks the barrier.
    ///
    /// # Errors
    ///
    /// [`BarrierError::TimedOut`]; otherwise as [`wait`](Self::wait).
    pub fn wait_until(&self, deadline: Instant) -> Result<BarrierWaitResult, BarrierError> {
        self.wait_deadline(Some(Deadline::at(deadline)))
    }

    /// This party's place, 0 to parties - 1.
    pub fn index(&self) -> usize {
        self.party.index()
    }

    fn wait_deadline(&self, deadline: Option<Deadline>) -> Result<BarrierWaitResult, BarrierError> {
        // SAFETY: this thread joined as `party` (the handle is not `Send`) and has not left; the
        // barrier outlives the handle.
        unsafe { self.barrier.raw.wait(self.party, deadline) }.map(BarrierWaitResult)
    }
}

impl Drop for BarrierParty<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `wait_deadline`.
        unsafe { self.barrier.raw.leave(self.party) };
    }
}

impl fmt::Debug for BarrierParty<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierParty")
            .field("index", &self.index())
            .finish_non_exhaustive()
    }
}
