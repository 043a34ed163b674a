//! The process-shared, robust reader-writer lock protocol: a writer's robust word and one robust
//! word per reader slot. `futexkit::shared::SharedRwLock` is this with a typed value and guards.
//!
//! A reader count in one word cannot survive a reader's death (nobody would know whose count to
//! take back), so each reader holds a slot of its own, a robust word the kernel frees when the
//! reader dies. The writer's word is a [`RawSharedMutex`]; so is each slot.
//!
//! ## State
//!
//! | word | holds | taken by | released by |
//! |------|-------|----------|-------------|
//! | `writer` | the id of the writer that holds the lock or is waiting for readers to leave; `WAITERS`, `OWNER_DIED`, `NOT_RECOVERABLE` as the mutex's | a writer (the mutex protocol) | the writer's unlock, which wakes *all* its sleepers (readers wait on it too); the kernel, when the writer dies |
//! | `readers[i]` | the id of a reader holding slot `i`; `WAITERS` if a thread sleeps on it | a reader, by CAS from free, starting at a slot its thread id picks | the reader's unlock (wakes one sleeper); the kernel, when the reader dies |
//!
//! Invariants:
//!
//! 1. **Exclusion.** A reader takes a slot, then reads `writer`; a writer takes `writer`, then
//!    reads every slot, each with a `SeqCst` fence between its take and its reads (a store,
//!    then loads of the other side's words: Dekker's pattern, which needs the fences). So
//!    either the reader sees the writer and gives its slot back before it reads anything, or
//!    the writer sees the reader and waits for its slot to be free.
//! 2. **Writers first.** A reader backs off while `writer` is held, whether its writer has the
//!    lock or waits for readers, so a waiting writer is not starved by new readers. (A stream of
//!    writers can starve readers; each reader waits only for one writer at a time.)
//! 3. **No lost wakeup.** A reader backing off sleeps on `writer` (setting `WAITERS`), and
//!    every writer unlock wakes all of `writer`'s sleepers, in the same kernel call as the
//!    release. A writer waiting for a slot sleeps on it, and every slot release with
//!    `WAITERS` wakes one sleeper: a reader waiting for that slot (all were taken), which takes
//!    it, sees the writer and releases it, waking the next; or the writer, which does not take
//!    the slot, so it passes the wake on to the next sleeper on that slot. A reader waiting
//!    for a slot sleeps on the one its thread id picks, and looks at every slot again at the
//!    shared mutex's recheck: another slot's release wakes only that slot's sleepers.
//! 4. **Deaths.** A dead reader's slot is freed by the kernel (`OWNER_DIED` in it is ignored:
//!    readers change nothing), which wakes one sleeper on it (the writer, or a reader waiting
//!    for the slot: either passes on as above). A dead writer's word gets `OWNER_DIED`: the
//!    next writer is told ([`Acquired::OwnerDied`]) and can repair and mark it consistent;
//!    readers that find it so are told too, until then. The kernel wakes one of `writer`'s
//!    sleepers; a reader woken so wakes all the others, as all of them wait for the same thing.

use core::fmt;

use crate::atomic::{fence, Ordering};
use crate::deadlock::{Mode, Target, Wait};
use crate::futex::robust;
use crate::futex::Deadline;
use crate::raw::shared::mutex::{owner, recheck_by, NOT_RECOVERABLE};
use crate::raw::shared::{Acquired, RawLockError, RawSharedMutex};

/// Readers that can hold a [`RawSharedRwLock`] at once without waiting for a slot.
/// (Under a model checker, 2: a model's few readers then wait for a slot, as a crowd of
/// readers does.)
pub const READER_SLOTS: usize = if crate::futex::sys::MODEL_CHECKED {
    2
} else {
    32
};

/// One word on a cache line of its own.
#[repr(C, align(64))]
struct Slot {
    lock: RawSharedMutex,
}

/// A reader's slot, which its read unlock gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReaderSlot(usize);

impl ReaderSlot {
    /// The slot's index, 0 to [`READER_SLOTS`] - 1.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A process-shared, robust reader-writer lock without data (`#[repr(C)]`, 64-aligned, one
/// cache line per word: the writer's and [`READER_SLOTS`] readers'). Its state table is at the
/// top of `src/raw/shared/rwlock.rs`; [`SharedRwLock`](crate::shared::SharedRwLock) is this with
/// a value and guards. As with [`RawSharedMutex`], the thread that takes it releases it.
///
/// ```
/// use futexkit::raw::{Acquired, RawSharedRwLock};
///
/// // SAFETY: kept in this frame, never moved (shared memory is where it belongs: `from_ptr`).
/// let lock = unsafe { RawSharedRwLock::new() };
/// let (slot, acquired) = lock.read()?;
/// assert_eq!(acquired, Acquired::Consistent);
/// // SAFETY: this thread holds that read lock.
/// unsafe { lock.read_unlock(slot) };
/// lock.write()?;
/// // SAFETY: this thread holds the write lock.
/// unsafe { lock.write_unlock() };
/// # Ok::<(), futexkit::raw::RawLockError>(())
/// ```
#[repr(C, align(64))]
pub struct RawSharedRwLock {
    writer: Slot,
    readers: [Slot; READER_SLOTS],
}

impl fmt::Debug for RawSharedRwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let readers = self
            .readers
            .iter()
            .filter(|slot| slot.lock.is_locked())
            .count();
        f.debug_struct("RawSharedRwLock")
            .field("writer", &self.writer.lock)
            .field("readers", &readers)
            .finish()
    }
}

impl RawSharedRwLock {
    /// An unlocked lock.
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::new`], whose words it is made of: from the first time a thread of
    /// this process locks it until it is dropped, it stays at its address and its memory is not
    /// freed or reused without dropping it.
    pub unsafe fn new() -> RawSharedRwLock {
        let slot = || Slot {
            // SAFETY: the slots' words are the lock's, placed where the caller places it.
            lock: unsafe { RawSharedMutex::new() },
        };
        RawSharedRwLock {
            writer: slot(),
            readers: core::array::from_fn(|_| slot()),
        }
    }

    /// Uses the lock at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::from_ptr`], for `size_of::<RawSharedRwLock>()` bytes, 64-aligned.
    pub unsafe fn from_ptr<'a>(ptr: *const RawSharedRwLock) -> &'a RawSharedRwLock {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// Blocks until this thread holds a read lock. [`Acquired::OwnerDied`]: a writer died
    /// holding the lock and none has marked it consistent since, so the data may be
    /// half-updated.
    ///
    /// # Errors
    ///
    /// As [`RawSharedMutex::lock`]; [`RawLockError::WouldDeadlock`] if this thread holds a
    /// read lock or the write lock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn read(&self) -> Result<(ReaderSlot, Acquired), RawLockError> {
        let read = || self.read_until(None, false);
        crate::deadlock::acquire(|| self.checked(), Mode::Read, Wait::Untimed, read)
    }

    /// The lock as the deadlock checks name it.
    #[inline(always)]
    fn checked(&self) -> Target<'static> {
        Target::shared(crate::deadlock::LockKind::SharedRwLock, self)
    }

    /// Takes a read lock if no writer holds or waits for the lock now.
    ///
    /// # Errors
    ///
    /// [`RawLockError::WouldBlock`] if a writer holds or waits for it, or every slot is taken;
    /// otherwise as [`read`](Self::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read(&self) -> Result<(ReaderSlot, Acquired), RawLockError> {
        let read = || self.read_until(None, true);
        crate::deadlock::acquire(|| self.checked(), Mode::Read, Wait::Bounded, read)
    }

    /// Blocks until this thread holds a read lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`RawLockError::TimedOut`]; otherwise as [`read`](Self::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_until(
        &self,
        deadline: Deadline,
    ) -> Result<(ReaderSlot, Acquired), RawLockError> {
        let read = || self.read_until(Some(deadline), false);
        crate::deadlock::acquire(|| self.checked(), Mode::Read, Wait::Bounded, read)
    }

    /// Releases a read lock.
    ///
    /// # Safety
    ///
    /// The calling thread holds the read lock `slot` came with; the memory stays mapped until
    /// the call returns.
    pub unsafe fn read_unlock(&self, slot: ReaderSlot) {
        crate::deadlock::release(|| self.checked(), Mode::Read);
        if let Some(slot) = self.readers.get(slot.0) {
            robust::release(slot.lock.robust(), |_| slot.lock.release(1));
        }
    }

    /// Blocks until this thread holds the write lock.
    ///
    /// # Errors
    ///
    /// As [`RawSharedMutex::lock`]; [`RawLockError::WouldDeadlock`] if this thread holds a
    /// read lock or the write lock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn write(&self) -> Result<Acquired, RawLockError> {
        let write = || self.write_until(None, false);
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Untimed, write)
    }

    /// Takes the write lock if nobody holds the lock now.
    ///
    /// # Errors
    ///
    /// [`RawLockError::WouldBlock`]; otherwise as [`write`](Self::write).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write(&self) -> Result<Acquired, RawLockError> {
        let write = || self.write_until(None, true);
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Bounded, write)
    }

    /// Blocks until this thread holds the write lock or `deadline` passes.
    ///
    /// # Errors
    ///
    /// [`RawLockError::TimedOut`]; otherwise as [`write`](Self::write).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_until(&self, deadline: Deadline) -> Result<Acquired, RawLockError> {
        let write = || self.write_until(Some(deadline), false);
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Bounded, write)
    }

    /// Releases the write lock, waking every thread asleep on it. If the lock was taken after a
    /// writer's death and not marked consistent since, it becomes not recoverable.
    ///
    /// # Safety
    ///
    /// The calling thread holds the write lock; the memory stays mapped until the call returns.
    pub unsafe fn write_unlock(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        let writer = &self.writer.lock;
        robust::release(writer.robust(), |_| writer.release(i32::MAX as u32));
    }

    /// Marks the lock consistent after a writer's death (see [`RawSharedMutex::mark_consistent`]).
    ///
    /// # Safety
    ///
    /// As for [`write_unlock`](Self::write_unlock).
    pub unsafe fn mark_consistent(&self) {
        // SAFETY: forwarded: this thread holds the writer's word.
        unsafe { self.writer.lock.mark_consistent() };
    }

    /// Every robust word of the lock: the writer's, then each reader slot's.
    pub(crate) fn robust_words(&self) -> impl Iterator<Item = &RawSharedMutex> {
        core::iter::once(&self.writer.lock).chain(self.readers.iter().map(|slot| &slot.lock))
    }

    /// Whether a writer holds the lock or waits for readers to leave (a snapshot).
    pub fn is_write_locked(&self) -> bool {
        self.writer.lock.is_locked()
    }

    /// Whether the lock can never be taken again.
    pub fn is_not_recoverable(&self) -> bool {
        self.writer.lock.is_not_recoverable()
    }

    fn read_until(
        &self,
        deadline: Option<Deadline>,
        try_only: bool,
    ) -> Result<(ReaderSlot, Acquired), RawLockError> {
        let first = robust::current_owner_id()? as usize % READER_SLOTS;
        if self.holds_a_slot() {
            // Whichever slot it holds: a second read would wait behind a writer that waits
            // for the first.
            return Err(RawLockError::WouldDeadlock);
        }
        loop {
            let slot = self.take_slot(first, deadline, try_only)?;
            let taken = &self.readers[slot].lock;
            fence(Ordering::SeqCst);
            let writer = self.writer.lock.robust().word.load(Ordering::Acquire);
            match owner(writer) {
                0 => {
                    let acquired = if writer & crate::futex::pi_bits::OWNER_DIED != 0 {
                        Acquired::OwnerDied
                    } else {
                        Acquired::Consistent
                    };
                    return Ok((ReaderSlot(slot), acquired));
                }
                held => {
                    robust::release(taken.robust(), |_| taken.release(1));
                    if held == NOT_RECOVERABLE {
                        return Err(RawLockError::NotRecoverable);
                    }
                    if try_only {
                        return Err(RawLockError::WouldBlock);
                    }
                    self.writer.lock.wait_while_held(deadline, false, true)?;
                    // Writers coming and going (or a peer changing the writer's word) must not
                    // keep a timed read past its deadline.
                    if deadline.is_some_and(|d| d.has_passed()) {
                        return Err(RawLockError::TimedOut);
                    }
                }
            }
        }
    }

    /// Whether this thread holds one of the reader slots.
    fn holds_a_slot(&self) -> bool {
        let slots = self.readers.as_ptr_range();
        robust::holds_any(|word| slots.contains(&word.cast()))
    }

    /// Takes a free reader slot, trying each from `first`; if none is free, waits for `first`
    /// until the shared mutex's next recheck, then tries them all again (a slot other than
    /// `first` may free meanwhile, and its release wakes only its own sleepers).
    fn take_slot(
        &self,
        first: usize,
        deadline: Option<Deadline>,
        try_only: bool,
    ) -> Result<usize, RawLockError> {
        loop {
            for i in 0..READER_SLOTS {
                let index = (first + i) % READER_SLOTS;
                let slot = &self.readers[index].lock;
                match robust::acquire(slot.robust(), |tid| slot.take_now(tid, false)) {
                    Ok(_) => return Ok(index),
                    Err(RawLockError::WouldBlock) => {}
                    Err(err) => return Err(err),
                }
            }
            if try_only {
                return Err(RawLockError::WouldBlock);
            }
            let slot = &self.readers[first].lock;
            match robust::acquire(slot.robust(), |tid| {
                slot.take_contended(tid, recheck_by(deadline), false)
            }) {
                Ok(_) => return Ok(first),
                Err(RawLockError::TimedOut) if !deadline.is_some_and(|d| d.has_passed()) => {}
                Err(err) => return Err(err),
            }
        }
    }

    fn write_until(
        &self,
        deadline: Option<Deadline>,
        try_only: bool,
    ) -> Result<Acquired, RawLockError> {
        let writer = &self.writer.lock;
        let acquired = if try_only {
            robust::acquire(writer.robust(), |tid| writer.take_now(tid, true))?
        } else {
            robust::acquire(writer.robust(), |tid| writer.take(tid, deadline))?
        };
        fence(Ordering::SeqCst);
        for slot in &self.readers {
            let slot = &slot.lock;
            let held = slot.robust().word.load(Ordering::Acquire);
            if matches!(owner(held), 0 | NOT_RECOVERABLE) {
                continue;
            }
            let waited = if try_only {
                Err(RawLockError::WouldBlock)
            } else {
                slot.wait_while_held(deadline, true, false)
            };
            if let Err(err) = waited {
                // Give the writer's word back as it was: a death recorded in it stays recorded.
                robust::release(writer.robust(), |_| {
                    writer.release_untouched(i32::MAX as u32)
                });
                return Err(err);
            }
        }
        Ok(acquired)
    }
}
