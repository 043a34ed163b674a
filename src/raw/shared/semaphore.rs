//! The process-shared, robust semaphore protocol: one robust word per permit, a release
//! sequence and a count of sleepers. `futexkit::shared::SharedSemaphore` is this with permits
//! as guards.
//!
//! A count of free permits in one word cannot survive a holder's death: nobody would know to
//! give the dead holder's permits back. So each permit is a slot of its own, a robust word
//! (`mutex.rs`) that the kernel frees when its holder dies: **a dead holder's permit is free
//! again at once**, and the next thread to take that slot is told
//! ([`Acquired::OwnerDied`]). A permit is held by a thread, as a lock is.
//!
//! ## State
//!
//! | word | meaning | changed by |
//! |------|---------|------------|
//! | `permits` | how many slots are permits, 1 to [`SEMAPHORE_MAX_PERMITS`] | set once, when made |
//! | `slots[i]` | the id of the thread holding permit `i`; no id: free (with `OWNER_DIED` if its last holder died) | a take, by CAS from free, which clears `OWNER_DIED` and reports it; the holder's release; the kernel, at the holder's death |
//! | `released` | a sequence that every release adds 1 to (wrapping) | releases |
//! | `sleepers` | threads counted as about to sleep on `released`, or asleep | a waiter adds itself before its last look at the slots, and takes itself out after |
//!
//! Invariants:
//!
//! 1. **No lost wakeup** (the Condvar's pattern, `src/raw/condvar.rs`). A waiter counts itself
//!    in `sleepers`, reads `released`, looks at every slot and sleeps on the `released` value
//!    it read. A release frees its slot, adds 1 to `released`, then reads `sleepers` and wakes
//!    one sleeper if any is counted. Both sides touch `sleepers` with an acquire-release
//!    read-modify-write (the release adds 0), so either the release sees the waiter counted,
//!    and wakes it (or makes its sleep's compare fail), or the waiter's comes second and sees
//!    the free slot.
//! 2. **Deaths.** The kernel frees a dead holder's slot, and wakes no sleeper on `released`;
//!    so a sleeper looks at the slots again at least every [`SLICE`]. A new acquirer takes the
//!    slot at once. A waiter killed while counted leaves `sleepers` one too high: every
//!    release then makes a wake call (a cost, not a lost wakeup).
//! 3. **Peers that scribble.** A `permits` out of range fails every call
//!    ([`SemaphoreError::Corrupted`]). A slot word no protocol writes (an id that never
//!    releases, `NOT_RECOVERABLE`) is a permit lost; a slot zeroed under its holder lets a
//!    second thread in (as any count a peer rewrites can), and the first holder's release
//!    then frees the second's. A `sleepers` of 0 under sleepers makes them wait for their
//!    slice; any other `released` or `sleepers` costs a wake or ends a sleep early. Every wait
//!    ends by its deadline, and nothing a peer writes is undefined behaviour here.
//!
//! A woken waiter whose permit another thread took sleeps again; no order among waiters is
//! promised. A waiter does not spin (as the in-process semaphore's).

use core::fmt;
use std::time::Duration;

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::robust::{self, Unsupported};
use crate::futex::{current_tid, Deadline, Error, Futex, Shared};
use crate::raw::shared::mutex::owner;
use crate::raw::shared::{Acquired, RawLockError, RawSharedMutex};

/// The most permits a [`RawSharedSemaphore`] has (a slot each).
pub const SEMAPHORE_MAX_PERMITS: usize = 64;

/// How often a sleeping acquirer looks at the slots for a permit whose holder died.
const SLICE: Duration = Duration::from_millis(50);

/// A permit of a [`RawSharedSemaphore`]: the slot this thread took. Neither `Copy` nor
/// `Clone`: [`release`](RawSharedSemaphore::release) consumes it, so a permit given back cannot
/// be given back again (which would free the slot this thread took anew since).
///
/// ```compile_fail,E0382
/// use futexkit::raw::{Permit, RawSharedSemaphore};
///
/// fn give_back_twice(semaphore: &RawSharedSemaphore, permit: Permit) {
///     // SAFETY: the semaphore is borrowed, so its memory stays mapped.
///     unsafe {
///         semaphore.release(permit);
///         semaphore.release(permit); // the permit was moved into the first release
///     }
/// }
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Permit {
    slot: usize,
    previous_holder_died: bool,
}

impl Permit {
    /// The slot, 0 to permits - 1.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Whether this permit's previous holder died holding it (the kernel gave it back).
    pub fn previous_holder_died(&self) -> bool {
        self.previous_holder_died
    }
}

/// Why a shared semaphore's permit was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SemaphoreError {
    /// No permit is free now (`try_acquire`).
    WouldBlock,
    /// The deadline passed first.
    TimedOut,
    /// The semaphore's memory holds a permit count no semaphore has (a peer wrote it).
    Corrupted,
    /// This thread cannot hold robust words.
    Unsupported(Unsupported),
    /// The kernel refused a futex call on the semaphore.
    Futex(Error),
}

impl fmt::Display for SemaphoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SemaphoreError::WouldBlock => f.write_str("no permit is free"),
            SemaphoreError::TimedOut => f.write_str("the deadline passed before a permit was free"),
            SemaphoreError::Corrupted => {
                f.write_str("the semaphore's memory holds an impossible permit count")
            }
            SemaphoreError::Unsupported(why) => write!(f, "robust words are unavailable: {why}"),
            SemaphoreError::Futex(err) => write!(f, "a futex call on the semaphore failed: {err}"),
        }
    }
}

impl std::error::Error for SemaphoreError {}

/// A process-shared counting semaphore whose permits return when their holder dies
/// (`#[repr(C)]`, 64-aligned). Its state table is at the top of
/// `src/raw/shared/semaphore.rs`; [`SharedSemaphore`](crate::shared::SharedSemaphore) is this
/// with guards. The thread that took a permit releases it.
///
/// ```
/// use futexkit::raw::{RawSharedSemaphore, SemaphoreError};
///
/// // SAFETY: kept in this frame, never moved (shared memory is where it belongs: `from_ptr`).
/// let slots = unsafe { RawSharedSemaphore::new(1) };
/// let permit = slots.acquire(None)?;
/// assert_eq!(slots.try_acquire(), Err(SemaphoreError::WouldBlock));
/// // SAFETY: this thread holds `permit`.
/// unsafe { slots.release(permit) };
/// # Ok::<(), SemaphoreError>(())
/// ```
#[repr(C, align(64))]
pub struct RawSharedSemaphore {
    released: Futex<Shared>,
    sleepers: AtomicU32,
    permits: AtomicU32,
    slots: [RawSharedMutex; SEMAPHORE_MAX_PERMITS],
}

impl fmt::Debug for RawSharedSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawSharedSemaphore")
            .field("permits", &self.permits.load(Ordering::Relaxed))
            .field("available", &self.available())
            .finish_non_exhaustive()
    }
}

impl RawSharedSemaphore {
    /// A semaphore of `permits` permits, all free.
    ///
    /// # Panics
    ///
    /// If `permits` is 0 or more than [`SEMAPHORE_MAX_PERMITS`].
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::new`], whose words its permits are: from the first time a thread
    /// of this process takes a permit until it is dropped, it stays at its address and its
    /// memory is not freed or reused without dropping it.
    pub unsafe fn new(permits: usize) -> RawSharedSemaphore {
        assert!(
            (1..=SEMAPHORE_MAX_PERMITS).contains(&permits),
            "a shared semaphore has 1 to {SEMAPHORE_MAX_PERMITS} permits, not {permits}"
        );
        RawSharedSemaphore {
            released: Futex::shared(0),
            sleepers: AtomicU32::new(0),
            permits: AtomicU32::new(permits as u32),
            // SAFETY: the slots' words are the semaphore's, placed where the caller places it.
            slots: core::array::from_fn(|_| unsafe { RawSharedMutex::new() }),
        }
    }

    /// Uses the semaphore at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::from_ptr`], for `size_of::<RawSharedSemaphore>()` bytes,
    /// 64-aligned.
    pub unsafe fn from_ptr<'a>(ptr: *const RawSharedSemaphore) -> &'a RawSharedSemaphore {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// How many permits it has, taken or not.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::Corrupted`] if the memory holds no possible count.
    pub fn permits(&self) -> Result<usize, SemaphoreError> {
        let permits = self.permits.load(Ordering::Relaxed) as usize;
        if (1..=SEMAPHORE_MAX_PERMITS).contains(&permits) {
            Ok(permits)
        } else {
            Err(SemaphoreError::Corrupted)
        }
    }

    /// The permits free now (a snapshot; 0 if the count is corrupted).
    pub fn available(&self) -> usize {
        let permits = self.permits().unwrap_or(0);
        self.slots[..permits]
            .iter()
            .filter(|slot| owner(slot.robust().word.load(Ordering::Relaxed)) == 0)
            .count()
    }

    /// Every slot's robust word.
    pub(crate) fn robust_words(&self) -> impl Iterator<Item = &RawSharedMutex> {
        self.slots.iter()
    }

    /// Takes a permit if one is free now.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::WouldBlock`], [`SemaphoreError::Corrupted`],
    /// [`SemaphoreError::Unsupported`].
    pub fn try_acquire(&self) -> Result<Permit, SemaphoreError> {
        self.take_any(self.permits()?)?
            .ok_or(SemaphoreError::WouldBlock)
    }

    /// Blocks until this thread holds a permit, or until `deadline`.
    ///
    /// # Errors
    ///
    /// [`SemaphoreError::TimedOut`], [`SemaphoreError::Corrupted`],
    /// [`SemaphoreError::Unsupported`], [`SemaphoreError::Futex`].
    pub fn acquire(&self, deadline: Option<Deadline>) -> Result<Permit, SemaphoreError> {
        let permits = self.permits()?;
        if let Some(permit) = self.take_any(permits)? {
            return Ok(permit);
        }
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        let taken = self.sleep_for_permit(permits, deadline);
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        taken
    }

    /// Gives `permit` back, waking a sleeping acquirer if one is counted. Does nothing if
    /// this thread does not hold it.
    ///
    /// # Safety
    ///
    /// The memory stays mapped until the call returns.
    pub unsafe fn release(&self, permit: Permit) {
        let Some(slot) = self.slots.get(permit.slot) else {
            return;
        };
        if robust::release(slot.robust(), |_| slot.release(1)) {
            self.released.fetch_add(1, Ordering::Release);
            if self.sleepers.fetch_add(0, Ordering::AcqRel) != 0 {
                let _ = self.released.wake(1);
            }
        }
    }

    /// The waiting half of `acquire`, counted in `sleepers`.
    fn sleep_for_permit(
        &self,
        permits: usize,
        deadline: Option<Deadline>,
    ) -> Result<Permit, SemaphoreError> {
        loop {
            let seen = self.released.load(Ordering::Acquire);
            if let Some(permit) = self.take_any(permits)? {
                return Ok(permit);
            }
            if deadline.is_some_and(|d| d.has_passed()) {
                return Err(SemaphoreError::TimedOut);
            }
            let slice_ends = match deadline {
                Some(d) if d.remaining() < SLICE => d,
                _ => Deadline::after(SLICE),
            };
            match self.released.wait(seen, Some(slice_ends)) {
                Ok(()) | Err(Error::ValueChanged | Error::TimedOut) => {}
                Err(err) => return Err(SemaphoreError::Futex(err)),
            }
        }
    }

    /// Takes the first free slot, looking from one this thread's id picks (so that threads
    /// spread over the slots); `None` if every slot is held.
    fn take_any(&self, permits: usize) -> Result<Option<Permit>, SemaphoreError> {
        let start = current_tid() as usize % permits;
        for k in 0..permits {
            let index = (start + k) % permits;
            let slot = &self.slots[index];
            if owner(slot.robust().word.load(Ordering::Relaxed)) != 0 {
                continue;
            }
            // The death of a previous holder is reported once and forgotten: a permit guards
            // no data of its own.
            match robust::acquire(slot.robust(), |tid| slot.take_now(tid, false)) {
                Ok(acquired) => {
                    return Ok(Some(Permit {
                        slot: index,
                        previous_holder_died: acquired == Acquired::OwnerDied,
                    }))
                }
                Err(
                    RawLockError::WouldBlock
                    | RawLockError::NotRecoverable
                    | RawLockError::WouldDeadlock,
                ) => {}
                Err(RawLockError::Unsupported(why)) => {
                    return Err(SemaphoreError::Unsupported(why))
                }
                Err(RawLockError::Futex(err)) => return Err(SemaphoreError::Futex(err)),
                Err(RawLockError::TimedOut) => unreachable!("take_now has no deadline"),
            }
        }
        Ok(None)
    }
}
