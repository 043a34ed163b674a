//! The process-shared, robust barrier protocol: a generation word, an arrival count, and one
//! robust word per party. `futexkit::shared::SharedBarrier` is this with handles.
//!
//! A barrier's sleepers wait for parties that have not arrived. If one of those has died, it
//! never will; so parties are known: each holds a member word of its own, a robust word the
//! kernel marks `OWNER_DIED` (and wakes a sleeper on) when the party's thread dies. Sleepers
//! watch the member words as well as the generation, so a death breaks the barrier for all.
//!
//! ## State
//!
//! | word | meaning | changed by |
//! |------|---------|------------|
//! | `generation` bit 0 | the round's parity | the last arrival of a round flips it unless `BROKEN` is set, then wakes every sleeper |
//! | `generation` bit 31 `BROKEN` | no round can complete again; waits fail | a party that finds a member dead, times out, leaves, or is refused its sleep (one that has arrived: by CAS from the generation it saw, so only if its round has not ended); never cleared |
//! | `arrived` | parties that arrived in this round | each arrival adds 1; the last one stores 0 before flipping the parity |
//! | `parties` | how many parties a round takes (1 to [`BARRIER_MAX_PARTIES`]) | set once, when the barrier is made |
//! | `members[i]` | party `i`'s thread id with `WAITERS` set (so that the kernel wakes a sleeper when it dies); 0: nobody joined; `OWNER_DIED`: the party died | [`join`](RawSharedBarrier::join), [`leave`](RawSharedBarrier::leave), the kernel |
//!
//! Invariants:
//!
//! 1. **A sleeper of round `r` wakes when `r` ends.** It sleeps on the parity it read before it
//!    arrived; the last arrival flips it, then wakes all (one that dies between the two leaves
//!    the sleepers to their next look, a slice later). A sleeper cannot miss the flip and sleep
//!    through the next one, which needs its own arrival.
//! 2. **A round ends for every party or for none.** The flip and a break by an arrived party
//!    are each one atomic step on the generation, and each happens only if the other has not:
//!    the flip only without `BROKEN` (else the last arrival reports `Broken` too), the break
//!    by CAS from the value its party saw (else that party looks again and finds the round
//!    over).
//! 3. **A party's death breaks the barrier.** Sleepers sleep in one `futex_waitv` on the
//!    generation and every member word, each of which has `WAITERS` set, so the kernel's wake at
//!    a party's death reaches one sleeper, which sets `BROKEN` and wakes the others. Kernels
//!    without `futex_waitv` (before 5.16), and threads a sandbox refuses it, get the same answer
//!    by a look at the member words every `SLICE_WITHOUT_WAITV`; with it, a look every
//!    `SLICE_WITH_WAITV` covers a sleeper that dies between the kernel's wake and its own. A
//!    party that joins after a death, or arrives, looks at the member words first, and a
//!    sleeper sleeps on the very values it looked at, so a death after its look ends the sleep.
//! 4. **Timeouts, leaving and a refused sleep break it too**, as they would leave a round one
//!    arrival short for ever (Python's `threading.Barrier` does the same).

use core::fmt;
use std::time::Duration;

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::futex2::{self, WaitvEntry};
use crate::futex::pi_bits::OWNER_DIED;
use crate::futex::robust::{self, Unsupported};
use crate::futex::{Deadline, Error, Futex, Shared};
use crate::raw::shared::mutex::{owner, NOT_RECOVERABLE};
use crate::raw::shared::{Acquired, RawLockError, RawSharedMutex};

/// The most parties a [`RawSharedBarrier`] takes (its sleepers wait on a word per party and the
/// generation, within `futex_waitv`'s 128).
pub const BARRIER_MAX_PARTIES: usize = 64;

const ROUND_PARITY: u32 = 1;
const BROKEN: u32 = 1 << 31;

/// How often a sleeper looks at the member words where the kernel has no `futex_waitv`: how
/// soon a death is noticed there.
const SLICE_WITHOUT_WAITV: Duration = Duration::from_millis(2);
/// How often a sleeper looks at the member words with `futex_waitv` (which wakes it at once
/// when a party dies), should the sleeper that the kernel woke die before it passed it on.
const SLICE_WITH_WAITV: Duration = Duration::from_millis(100);

/// A party's place in a [`RawSharedBarrier`], from [`join`](RawSharedBarrier::join).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Party(usize);

impl Party {
    /// The member index, 0 to parties - 1.
    pub fn index(self) -> usize {
        self.0
    }
}

/// Why a barrier wait or join failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BarrierError {
    /// A party died, left, or timed out: no round can complete again.
    Broken,
    /// The deadline passed first (and broke the barrier, see [`Broken`](BarrierError::Broken)).
    TimedOut,
    /// Every party's place is taken.
    Full,
    /// This thread holds another place in this barrier already.
    AlreadyJoined,
    /// The barrier's memory holds a party count no barrier has (a peer wrote it).
    Corrupted,
    /// This thread cannot take robust words.
    Unsupported(Unsupported),
    /// The kernel refused a futex call on the barrier (a refused wait breaks it, as a timeout
    /// does).
    Futex(Error),
}

impl From<Unsupported> for BarrierError {
    fn from(why: Unsupported) -> BarrierError {
        BarrierError::Unsupported(why)
    }
}

impl fmt::Display for BarrierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BarrierError::Broken => {
                f.write_str("the barrier is broken: a party died, left or timed out")
            }
            BarrierError::TimedOut => f.write_str(
                "the deadline passed before the round completed (the barrier is now broken)",
            ),
            BarrierError::Full => f.write_str("every party's place in the barrier is taken"),
            BarrierError::AlreadyJoined => {
                f.write_str("this thread has joined the barrier already")
            }
            BarrierError::Corrupted => {
                f.write_str("the barrier's memory holds an impossible party count")
            }
            BarrierError::Unsupported(why) => write!(f, "robust words are unavailable: {why}"),
            BarrierError::Futex(err) => write!(f, "a futex call on the barrier failed: {err}"),
        }
    }
}

impl std::error::Error for BarrierError {}

/// A process-shared barrier whose parties are known, so that one's death breaks it instead of
/// stranding the rest (`#[repr(C)]`, 64-aligned). Its state table is at the top of
/// `src/raw/shared/barrier.rs`; [`SharedBarrier`](crate::shared::SharedBarrier) is this with
/// handles. A party is a thread: the one that joined waits and leaves.
///
/// ```
/// use futexkit::raw::RawSharedBarrier;
///
/// // SAFETY: kept in this frame, never moved (shared memory is where it belongs: `from_ptr`).
/// let barrier = unsafe { RawSharedBarrier::new(1) };
/// let party = barrier.join()?;
/// // SAFETY: this thread joined as `party`.
/// assert!(unsafe { barrier.wait(party, None) }?, "the only party leads");
/// // SAFETY: as above; leaving breaks the barrier for good.
/// unsafe { barrier.leave(party) };
/// # Ok::<(), futexkit::raw::BarrierError>(())
/// ```
#[repr(C, align(64))]
pub struct RawSharedBarrier {
    generation: Futex<Shared>,
    arrived: AtomicU32,
    parties: AtomicU32,
    members: [RawSharedMutex; BARRIER_MAX_PARTIES],
}

impl fmt::Debug for RawSharedBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawSharedBarrier")
            .field("parties", &self.parties.load(Ordering::Relaxed))
            .field("arrived", &self.arrived.load(Ordering::Relaxed))
            .field("broken", &self.is_broken())
            .finish_non_exhaustive()
    }
}

impl RawSharedBarrier {
    /// A barrier for `parties` parties.
    ///
    /// # Panics
    ///
    /// If `parties` is 0 or more than [`BARRIER_MAX_PARTIES`].
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::new`], whose words its members are: from the first time a thread
    /// of this process joins it until it is dropped, it stays at its address and its memory is
    /// not freed or reused without dropping it.
    pub unsafe fn new(parties: usize) -> RawSharedBarrier {
        assert!(
            (1..=BARRIER_MAX_PARTIES).contains(&parties),
            "a shared barrier takes 1 to {BARRIER_MAX_PARTIES} parties, not {parties}"
        );
        RawSharedBarrier {
            generation: Futex::shared(0),
            arrived: AtomicU32::new(0),
            parties: AtomicU32::new(parties as u32),
            // SAFETY: the members' words are the barrier's, placed where the caller places it.
            members: core::array::from_fn(|_| unsafe { RawSharedMutex::new() }),
        }
    }

    /// Uses the barrier at `ptr`, in memory the caller mapped.
    ///
    /// # Safety
    ///
    /// As [`RawSharedMutex::from_ptr`], for `size_of::<RawSharedBarrier>()` bytes, 64-aligned.
    pub unsafe fn from_ptr<'a>(ptr: *const RawSharedBarrier) -> &'a RawSharedBarrier {
        // SAFETY: the caller vouches for alignment, lifetime and atomic-only access.
        unsafe { &*ptr }
    }

    /// How many parties a round takes.
    ///
    /// # Errors
    ///
    /// [`BarrierError::Corrupted`] if the memory holds no possible count.
    pub fn parties(&self) -> Result<usize, BarrierError> {
        let parties = self.parties.load(Ordering::Relaxed) as usize;
        if (1..=BARRIER_MAX_PARTIES).contains(&parties) {
            Ok(parties)
        } else {
            Err(BarrierError::Corrupted)
        }
    }

    /// Every party's robust word.
    pub(crate) fn robust_words(&self) -> impl Iterator<Item = &RawSharedMutex> {
        self.members.iter()
    }

    /// Whether no round can complete again.
    pub fn is_broken(&self) -> bool {
        self.generation.load(Ordering::Relaxed) & BROKEN != 0
    }

    /// Takes a free party place for this thread, which waits as that party until it leaves
    /// (or dies: then the barrier breaks).
    ///
    /// # Errors
    ///
    /// [`BarrierError::Broken`], [`BarrierError::Full`], [`BarrierError::AlreadyJoined`],
    /// [`BarrierError::Corrupted`], [`BarrierError::Unsupported`].
    pub fn join(&self) -> Result<Party, BarrierError> {
        let parties = self.parties()?;
        if self.is_broken() || self.member_words(parties).is_none() {
            self.break_it();
            return Err(BarrierError::Broken);
        }
        for (index, member) in self.members[..parties].iter().enumerate() {
            // With `WAITERS` from the start: the kernel wakes a sleeper on this word when this
            // thread dies, however soon.
            match robust::acquire(member.robust(), |tid| member.take_now_marked(tid)) {
                Ok(Acquired::Consistent) => return Ok(Party(index)),
                Ok(Acquired::OwnerDied) => {
                    // A party died here: give the place back (for good) and break.
                    self.break_it();
                    robust::release(member.robust(), |_| member.release(1));
                    return Err(BarrierError::Broken);
                }
                Err(RawLockError::WouldBlock | RawLockError::NotRecoverable) => {}
                Err(RawLockError::WouldDeadlock) => return Err(BarrierError::AlreadyJoined),
                Err(RawLockError::Unsupported(why)) => return Err(BarrierError::Unsupported(why)),
                Err(RawLockError::Futex(err)) => return Err(BarrierError::Futex(err)),
                Err(RawLockError::TimedOut) => unreachable!("take_now has no deadline"),
            }
        }
        Err(BarrierError::Full)
    }

    /// Leaves the barrier, which breaks it: no round can complete without this party.
    ///
    /// # Safety
    ///
    /// This thread joined as `party` and has not left; the memory stays mapped until the call
    /// returns.
    pub unsafe fn leave(&self, party: Party) {
        let Some(member) = self.members.get(party.0) else {
            return;
        };
        if robust::holds(member.robust()) {
            self.break_it();
            robust::release(member.robust(), |_| member.release(1));
        }
    }

    /// Arrives as `party` and waits until every party has arrived, the barrier breaks, or
    /// `deadline` passes. Returns whether this party was the last to arrive (the leader).
    ///
    /// # Errors
    ///
    /// [`BarrierError::Broken`]; [`BarrierError::TimedOut`], which breaks the barrier;
    /// [`BarrierError::Corrupted`]; [`BarrierError::Futex`] where the kernel refuses both
    /// `futex_waitv` and `FUTEX_WAIT` (a sandbox's policy), which breaks it too.
    ///
    /// # Safety
    ///
    /// This thread joined as `party` and has not left; the memory stays mapped until the call
    /// returns.
    pub unsafe fn wait(
        &self,
        party: Party,
        deadline: Option<Deadline>,
    ) -> Result<bool, BarrierError> {
        let parties = self.parties()?;
        if party.0 >= parties {
            return Err(BarrierError::Corrupted);
        }
        let seen = self.generation.load(Ordering::Acquire);
        if seen & BROKEN != 0 {
            return Err(BarrierError::Broken);
        }
        if self.member_words(parties).is_none() {
            self.break_it();
            return Err(BarrierError::Broken);
        }
        // Wrapping: a peer may have written any count.
        if self.arrived.fetch_add(1, Ordering::AcqRel).wrapping_add(1) >= parties as u32 {
            self.arrived.store(0, Ordering::Relaxed);
            return self.end_round(seen);
        }
        let round_over = |now: u32| (now ^ seen) & ROUND_PARITY != 0;
        if crate::spin::spin_for_arrivals(parties, deadline, || {
            round_over(self.generation.load(Ordering::Acquire))
        }) {
            return Ok(false);
        }
        loop {
            let now = self.generation.load(Ordering::Acquire);
            if round_over(now) {
                return Ok(false);
            }
            if now & BROKEN != 0 {
                return Err(BarrierError::Broken);
            }
            // Its arrival is counted: a party that leaves without the round breaks it
            // (invariant 4), unless the round ended first.
            let Some(members) = self.member_words(parties) else {
                if self.break_round(now) {
                    return Err(BarrierError::Broken);
                }
                return Ok(false);
            };
            if deadline.is_some_and(|d| d.has_passed()) {
                if self.break_round(now) {
                    return Err(BarrierError::TimedOut);
                }
                return Ok(false);
            }
            if let Err(err) = self.sleep(now, &members, deadline) {
                if self.break_round(now) {
                    return Err(err);
                }
                return Ok(false);
            }
        }
    }

    /// The member words as they are now, or `None` if a party died (its word has `OWNER_DIED`,
    /// or was given back as not recoverable). A sleep waits on these very values, so that a
    /// death after this look ends it.
    fn member_words(&self, parties: usize) -> Option<Vec<u32>> {
        self.members[..parties]
            .iter()
            .map(|member| {
                let word = member.robust().word.load(Ordering::Acquire);
                let died = match owner(word) {
                    0 => word & OWNER_DIED != 0,
                    NOT_RECOVERABLE => true,
                    _ => false,
                };
                (!died).then_some(word)
            })
            .collect()
    }

    /// The last arrival of the round that began at generation `seen`: flips the parity
    /// unless the barrier broke first (then the round ends for no party), and wakes every
    /// sleeper. One CAS: while a round is on, the only other write a party makes to the
    /// generation is `BROKEN`, so a word that is neither `seen` nor broken was written by a
    /// peer, which breaks the barrier too.
    fn end_round(&self, seen: u32) -> Result<bool, BarrierError> {
        if let Err(now) = self.generation.compare_exchange(
            seen,
            seen ^ ROUND_PARITY,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            if now & BROKEN == 0 {
                self.break_it();
            }
            return Err(BarrierError::Broken);
        }
        let woken = self.generation.wake(i32::MAX as u32).unwrap_or(0);
        crate::spin::notified(woken);
        Ok(true)
    }

    /// Breaks the barrier for an arrived party that gives up, unless its round ended first:
    /// by CAS from `now`, the generation it last saw, so that a round ends for every party or
    /// for none. Returns whether it broke (or found) the barrier broken; `false`: the round
    /// ended (its parity moved), and the caller returns as released.
    fn break_round(&self, now: u32) -> bool {
        match self.generation.compare_exchange(
            now,
            now | BROKEN,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let _ = self.generation.wake(i32::MAX as u32);
                true
            }
            // The parity moved: the round ended.
            Err(actual) if (actual ^ now) & ROUND_PARITY != 0 => false,
            // Broken meanwhile, or another bit written (a peer): broken either way.
            Err(_) => {
                self.break_it();
                true
            }
        }
    }

    fn break_it(&self) {
        if self.generation.fetch_or(BROKEN, Ordering::AcqRel) & BROKEN == 0 {
            let _ = self.generation.wake(i32::MAX as u32);
        }
    }

    /// Sleeps until the generation or a member word changes from what was seen (or a slice
    /// passes), with `futex_waitv` where the kernel has it, else on the generation alone.
    fn sleep(
        &self,
        generation: u32,
        members: &[u32],
        deadline: Option<Deadline>,
    ) -> Result<(), BarrierError> {
        static NO_WAITV: core::sync::atomic::AtomicBool =
            core::sync::atomic::AtomicBool::new(false);
        let slice_ends = |slice: Duration| match deadline {
            Some(d) if d.remaining() < slice => d,
            _ => Deadline::after(slice),
        };
        if !NO_WAITV.load(core::sync::atomic::Ordering::Relaxed) {
            let mut entries = Vec::with_capacity(members.len() + 1);
            entries.push(WaitvEntry::new(&self.generation, generation));
            for (member, &seen) in self.members.iter().zip(members) {
                entries.push(WaitvEntry::new(&member.robust().word, seen));
            }
            match futex2::waitv(&entries, Some(slice_ends(SLICE_WITH_WAITV))) {
                Ok(_) | Err(Error::ValueChanged | Error::TimedOut) => return Ok(()),
                Err(Error::Unsupported) => {
                    NO_WAITV.store(true, core::sync::atomic::Ordering::Relaxed);
                }
                // Refused (a sandbox's policy, per thread, may refuse a call newer than it with
                // `EPERM`) or short of memory for the list: this sleep on the generation alone.
                Err(_) => {}
            }
        }
        match self
            .generation
            .wait(generation, Some(slice_ends(SLICE_WITHOUT_WAITV)))
        {
            Ok(()) | Err(Error::ValueChanged | Error::TimedOut) => Ok(()),
            Err(err) => Err(BarrierError::Futex(err)),
        }
    }
}
