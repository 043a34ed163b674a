//! The reader-writer lock protocol, on one futex word, in which neither writers nor readers
//! starve. `futexkit::sync::RwLock` is this with std's API.
//!
//! ## State
//!
//! [`RawRwLock`] is one 32-bit futex word:
//!
//! | field             | bits | meaning | set by | cleared by |
//! |-------------------|------|---------|--------|------------|
//! | `WRITERS_WAITING` | 0    | writers (or the upgrader) sleep on the word, or are about to; no reader may take the lock but in a read phase | a writer or upgrader about to sleep; a writer taking the lock after it slept | an unlock that leaves the lock free and keeps it for no writer (it wakes one); a timed writer or upgrader giving up (which wakes every sleeper with it) |
//! | `READERS_WAITING` | 1    | readers or upgradable readers sleep on the word, or are about to | a reader about to sleep | a write unlock or downgrade that wakes every reader; the upgradable read leaving (released, or downgraded to a plain read) while no writer waits or spins, which wakes every reader too (a read unlock that wakes them otherwise leaves it, stale) |
//! | `READ_PHASE`      | 2    | readers woken from a sleep may take the lock although writers wait; no writer may | a fair write unlock (`write_unlock_fair`, or a plain one the fairness policy makes fair) that woke untimed readers; a downgrade while readers and writers wait | the read unlock that leaves no reader; an upgrade |
//! | `UPGRADABLE`      | 3    | one of the readers holds the upgradable read: no other thread may take an upgradable read | a thread taking an upgradable read; a downgrade to one | its unlock, downgrade to a plain read, or upgrade |
//! | `UPGRADING`       | 4    | the upgradable reader sleeps until it is the only reader, or is about to | the upgradable reader about to sleep in an upgrade | its upgrade; its giving up (with `WRITERS_WAITING`, waking every sleeper) |
//! | `HANDED`          | 5    | with `WRITE_LOCKED`: the write lock is held in trust for a writer woken from a sleep | a fair write unlock that woke an untimed writer | an untimed writer back from a sleep, claiming the lock |
//! | `WRITER_SPINNING` | 6    | a writer (or the upgrader) spins for the readers in the lock to leave; no reader may take the lock. Never with `WRITE_LOCKED`, `WRITERS_WAITING` or `READ_PHASE` | a writer or upgrader that finds other readers in the lock and no waiting bit, read phase or `WRITER_SPINNING` set | every take of the write lock (an upgrade's too); a writer's or upgrader's step to sleep, which sets `WRITERS_WAITING` in its place |
//! | count             | 7-31 | readers holding the lock, the upgradable one included; all ones (`WRITE_LOCKED`) while a writer holds it | a thread taking the lock | its unlock |
//!
//! Readers, upgradable readers, writers and the upgrader sleep on the same word with different
//! futex bitsets, so a wake reaches one kind only; the untimed and the timed of each kind have
//! bitsets of their own too.
//!
//! Invariants:
//!
//! 1. **No lost wakeup.** A waiter sleeps only on the exact value it saw, with its waiting bit
//!    set in it. An unlock that clears `READERS_WAITING` wakes every reader, upgradable ones
//!    included. A writer that took the lock after sleeping holds it with `WRITERS_WAITING`
//!    set, since others may sleep still, so that its own unlock looks for the next.
//! 2. **No bit outlives its waiters where it blocks others.** A stale `READERS_WAITING` costs a
//!    spurious wake, nothing more. `WRITERS_WAITING` keeps readers out, so a timed writer that
//!    gives up clears it and wakes every sleeper in one `FUTEX_WAKE_OP`, atomically with
//!    respect to threads going to sleep: the writers still waiting set it again. Untimed
//!    writers never give up. (Such a wake in a read phase lets the readers it woke join the
//!    phase, which lasts until its last reader leaves: timed writers that keep giving up while
//!    readers keep overlapping can keep a phase open, and an untimed writer waiting, as long
//!    as they go on.)
//! 3. **Writers do not starve.** While `WRITERS_WAITING` is set, readers take the lock only in
//!    a read phase, which admits only readers woken from a sleep in their wait. The last reader
//!    out wakes one writer *while it still holds its read lock*, and keeps `WRITERS_WAITING`
//!    set for it only if it woke one, so that no reader slips in while that writer wakes (a
//!    timed one gives up only through invariant 2); it wakes once more after its release, by
//!    address, in case the writer looked too early and slept again. If it woke none, it clears
//!    the bit and wakes a writer that may have begun to sleep since, or the readers. (A writer
//!    that sets the bit after the last reader's look and before its subtraction is woken by
//!    address, and its sleep, on a count that has changed, returns at once.) A write
//!    unlock that is not fair does not keep the lock for the next writer: it clears the bit and
//!    wakes one, and readers that arrive first take the lock, after which the writer waits only
//!    for them (a fair one hands off, invariant 8).
//! 4. **Readers do not starve.** A write unlock that the fairness policy makes fair (one
//!    contended write unlock in `HAND_OFF_PERIOD` of a thread, `src/fairness.rs`), like every
//!    `write_unlock_fair`, opens a read phase if readers wait, and no writer takes the lock in
//!    a read phase; so a reader waits for a bounded number of writers. The unlock wakes the
//!    untimed readers, plain and upgradable, *before* it opens the phase, while it still holds
//!    the lock, and opens it only if it woke one: that reader never gives up, so it takes the
//!    lock in the phase (or finds the upgradable read taken by a reader in the phase, or
//!    upgraded, which closes the phase: then it waits for that one writer), and the read unlock
//!    that leaves no reader closes it. (If it looked before the phase opened and slept again,
//!    the unlock's second wake or the changed word sends it back.) Timed readers are not
//!    counted on: their bitsets are not in the first wake. What is bounded is the readers' side,
//!    not each reader: a phase admits the woken readers that arrive before its last reader
//!    leaves, at least one, and a woken reader that arrives after that sleeps again, until the
//!    next phase.
//! 5. **After its release, an unlock touches the word only by address**: another thread may
//!    take the lock and free it by then, and a futex wake only hashes the address.
//! 6. **One upgradable reader, and its upgrade neither deadlocks nor starves.** The upgradable
//!    reader is a reader in the count, so writers wait for it as for any reader; `UPGRADABLE`
//!    keeps out a second one, which sleeps as a reader does (`READERS_WAITING`, bitsets of its
//!    own) and is woken with every reader, or by the release of `UPGRADABLE` if no writer waits
//!    (which clears `READERS_WAITING` and wakes every reader, so that the next release of the
//!    upgradable read does not wake again, finding nobody). (With writers waiting it could come
//!    in only through a read phase, which admits only readers woken from a sleep in their wait: it
//!    waits for the readers' turn of invariant 4, else upgradable readers passing the
//!    upgradable read on would hold a phase open for ever.) An upgrade waits for the count to
//!    fall to one, itself: no writer can take the lock meanwhile (the count is not zero), nor
//!    can another upgrader. It sets `WRITERS_WAITING` as a writer does, so that no new reader
//!    comes in but in a read phase, and `UPGRADING`, so that the read unlock that leaves it
//!    alone (2 to 1) wakes it. It takes the lock with `READ_PHASE` cleared (it is the phase's
//!    last reader) and `WRITERS_WAITING` kept, since writers may sleep too.
//! 7. **`WRITER_SPINNING` never outlives its spinners, and nobody owes a wake for it.** It is
//!    set only while readers hold the lock and no waiting bit is set (`UPGRADING` aside: its
//!    upgrader is woken by the read unlock that leaves it alone), by a thread in a writer's
//!    or upgrader's spin, and that thread's next step out of the spin (taking the lock, or
//!    going to sleep, which a timed one's giving up passes through) is a CAS of the word that
//!    clears it, unless another writer's did first: while it is set, a spinning writer or
//!    upgrader will look at the word again. No read unlock clears it, so the last reader out
//!    leaves the lock to the spinner, and readers that arrive meanwhile spin or sleep behind it
//!    as behind a held write lock: a spinner that takes the lock finds their `READERS_WAITING`
//!    at its unlock and wakes them, and one that sleeps sets `WRITERS_WAITING`, whose clearing
//!    wakes them (invariants 1 and 3).
//! 8. **A fair unlock's hand-off always has a claimer.** A fair write unlock that opens no read
//!    phase and finds writers waiting wakes one *untimed* writer while it holds the lock, and
//!    only if that wake found one does it set `HANDED`, keeping the lock; it then wakes once
//!    more, by address, in case the writer looked before `HANDED` was set and slept again. Only
//!    an untimed writer woken from a sleep (not one whose wait found the word changed) claims a
//!    handed lock (taking it with `WRITERS_WAITING`); the woken one never gives up, so it
//!    claims it unless another such writer did first, and then it sleeps again on a word that
//!    holds a plain write lock. A running thread that has not slept never takes a handed lock:
//!    it sees it write-locked.
//!
//! ## Transitions
//!
//! * **read**: one CAS adds a reader if the count has room and no writer waits or spins (or a
//!   read phase is open and this reader was woken from a sleep); a CAS that lost to another
//!   thread is tried again after a pause (`crate::spin::back_off`). Else spin ([`SpinWait`])
//!   while a writer holds the lock or spins, and nobody waits; then set `READERS_WAITING` and
//!   sleep.
//! * **write**: one CAS from 0 to `WRITE_LOCKED`. Else take it once no reader holds it and no
//!   read phase is open; while readers hold it and nobody waits, set `WRITER_SPINNING` first
//!   (invariant 7); spin while nobody waits; then set `WRITERS_WAITING` in place of
//!   `WRITER_SPINNING` and sleep.
//! * **read unlock**: one atomic subtraction (a CAS for the upgradable read, which clears
//!   `UPGRADABLE`), unless a read phase is open or writers wait: then
//!   the last reader out closes the phase and hands to a writer (invariant 3).
//! * **write unlock**: one CAS to 0, unless threads wait. A fair unlock (`write_unlock_fair`,
//!   or a plain one the fairness policy makes fair) opens a read phase if readers wait
//!   (invariant 4), else hands the lock to a writer (invariant 8); any other wakes one writer
//!   if writers wait, else every reader.
//! * **downgrade**: the writer becomes a reader (or the upgradable reader) and wakes the
//!   waiting readers, in a read phase if writers wait too (this reader's unlock closes it at
//!   the latest).
//! * **upgradable read**: as a read, and only while `UPGRADABLE` is clear, which it sets.
//!   Its unlock is a read unlock that clears `UPGRADABLE` and, if readers wait and no writer
//!   does, `READERS_WAITING` in the same CAS, then wakes every reader; so is its downgrade to a
//!   plain read, without the unlock.
//! * **upgrade**: one CAS to `WRITE_LOCKED` if the count is one. Else as a writer: set
//!   `WRITER_SPINNING` while nobody waits, spin, then set `WRITERS_WAITING | UPGRADING` and
//!   sleep (invariant 6). A timed upgrade that gives up clears both and wakes every sleeper, as
//!   a timed writer does.
//!
//! Policy lives apart: how long to spin in [`crate::spin`], when to open a read phase in
//! `src/fairness.rs`. Under a model checker the same code runs on the emulated futex.

use core::fmt;
use std::time::{Duration, Instant};

use crate::atomic::Ordering;
use crate::deadlock::{LockId, Mode, Target, Wait};
use crate::futex::{Deadline, Error, Futex, WakeOpKind};
use crate::spin::SpinWait;

const WRITERS_WAITING: u32 = 1 << 0;
const READERS_WAITING: u32 = 1 << 1;
const READ_PHASE: u32 = 1 << 2;
const UPGRADABLE: u32 = 1 << 3;
const UPGRADING: u32 = 1 << 4;
const HANDED: u32 = 1 << 5;
const WRITER_SPINNING: u32 = 1 << 6;
/// Where the count of readers starts.
const COUNT_SHIFT: u32 = 7;
/// One reader in the count (bits 7-31).
const READER: u32 = 1 << COUNT_SHIFT;
const WRITE_LOCKED: u32 = !(READER - 1);
/// The most readers at once: one fewer than `WRITE_LOCKED` counts.
const MAX_READERS: u32 = (WRITE_LOCKED >> COUNT_SHIFT) - 1;

/// What a plain read lock adds to the word, and what an upgradable one adds.
const PLAIN_READ: u32 = READER;
const UPGRADABLE_READ: u32 = READER | UPGRADABLE;

/// Futex bitsets: who sleeps with which, so that a wake reaches one kind only.
const UNTIMED_READER: u32 = 0b000_0001;
const TIMED_READER: u32 = 0b000_0010;
const UNTIMED_UPGRADABLE: u32 = 0b000_1000;
const TIMED_UPGRADABLE: u32 = 0b100_0000;
/// Either kind of upgradable reader.
const UPGRADABLE_READER: u32 = UNTIMED_UPGRADABLE | TIMED_UPGRADABLE;
/// Every sleeper that set `READERS_WAITING`.
const ANY_READER: u32 = UNTIMED_READER | TIMED_READER | UPGRADABLE_READER;
const UNTIMED_WRITER: u32 = 0b000_0100;
const TIMED_WRITER: u32 = 0b010_0000;
/// Either kind of writer.
const WRITER: u32 = UNTIMED_WRITER | TIMED_WRITER;
const UPGRADER: u32 = 0b001_0000;

/// Readers holding the lock (`MAX_READERS + 1` while a writer holds it).
fn readers(state: u32) -> u32 {
    state >> COUNT_SHIFT
}

fn is_write_locked(state: u32) -> bool {
    state & WRITE_LOCKED == WRITE_LOCKED
}

/// Whether a read lock of kind `held` (`PLAIN_READ` or `UPGRADABLE_READ`) may be taken now;
/// `woken`: the thread was woken from a sleep in this attempt.
fn read_lockable(state: u32, held: u32, woken: bool) -> bool {
    readers(state) < MAX_READERS
        && (state & (WRITERS_WAITING | WRITER_SPINNING) == 0 || (woken && state & READ_PHASE != 0))
        && state & held & UPGRADABLE == 0
}

fn write_lockable(state: u32) -> bool {
    readers(state) == 0 && state & READ_PHASE == 0
}

/// Whether the release of the upgradable read, from the word `before` it, should wake the
/// readers (clearing `READERS_WAITING`, see [`without`]): if they sleep and upgradable readers
/// may take it now. With writers waiting they may not, but in a read phase; and a phase admits
/// only readers woken from a sleep in their wait, so they wait for the wake that comes with the
/// writers' turn (invariant 6). Behind a spinning writer they wait for its unlock's wake, or for
/// the one that comes with `WRITERS_WAITING` (invariant 7).
fn upgradable_readers_may_come(before: u32) -> bool {
    before & (READERS_WAITING | WRITERS_WAITING | WRITER_SPINNING) == READERS_WAITING
}

/// The word after `leaving` (a read lock of kind `held`, or `UPGRADABLE` alone for a
/// downgrade to a plain read) leaves `state`. When the upgradable read leaves while upgradable
/// readers may come, the leaver wakes every reader, so it clears `READERS_WAITING` in the same
/// step (invariant 1): left set, the bit would make every later release of the upgradable read
/// wake again, finding nobody.
fn without(state: u32, leaving: u32) -> u32 {
    if leaving & UPGRADABLE != 0 && upgradable_readers_may_come(state) {
        (state - leaving) & !READERS_WAITING
    } else {
        state - leaving
    }
}

/// How the deadlock checks name a read lock of kind `held`.
fn mode(held: u32) -> Mode {
    if held & UPGRADABLE != 0 {
        Mode::UpgradableRead
    } else {
        Mode::Read
    }
}

/// The word after the upgradable reader, alone in the count, upgrades (invariant 6).
fn upgraded(state: u32) -> u32 {
    (state & (WRITERS_WAITING | READERS_WAITING)) | WRITE_LOCKED
}

/// The lock without the data: one 32-bit futex word (its state table is at the top of
/// `src/raw/rwlock.rs`). [`RwLock`](crate::sync::RwLock) is this plus a poison flag and the
/// data; with the `lock_api` or `lock_api_05` feature it implements lock_api's `RawRwLock`,
/// `RawRwLockFair`, `RawRwLockDowngrade`, `RawRwLockTimed` and the upgradable-read traits.
///
/// ```
/// use futexkit::raw::RawRwLock;
///
/// let raw = RawRwLock::new();
/// raw.read();
/// raw.read();
/// assert!(!raw.try_write());
/// // SAFETY: this thread holds two read locks.
/// unsafe { raw.read_unlock() };
/// // SAFETY: as above.
/// unsafe { raw.read_unlock() };
/// assert!(raw.try_write());
/// // SAFETY: taken just above.
/// unsafe { raw.write_unlock() };
/// ```
///
/// An upgradable read shares the lock with readers, excludes writers and other upgradable
/// readers, and can become the write lock with nothing written in between:
///
/// ```
/// use futexkit::raw::RawRwLock;
///
/// let raw = RawRwLock::new();
/// raw.upgradable_read();
/// assert!(raw.try_read());
/// assert!(!raw.try_upgradable_read());
/// // SAFETY: this thread holds a plain read lock, taken just above.
/// unsafe { raw.read_unlock() };
/// // SAFETY: this thread holds the upgradable read; once upgraded, the write lock.
/// unsafe {
///     raw.upgrade();
///     assert!(raw.is_locked_exclusive());
///     raw.write_unlock();
/// }
/// ```
#[derive(Default)]
pub struct RawRwLock {
    state: Futex,
    /// The deadlock checks' name for it (empty without the `deadlock` feature).
    id: LockId,
}

impl fmt::Debug for RawRwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.load(Ordering::Relaxed);
        f.debug_struct("RawRwLock")
            .field("write_locked", &is_write_locked(state))
            .field(
                "readers",
                &if is_write_locked(state) {
                    0
                } else {
                    readers(state)
                },
            )
            .field(
                "upgradable",
                &(!is_write_locked(state) && state & UPGRADABLE != 0),
            )
            .finish()
    }
}

impl RawRwLock {
    crate::futex::sys::const_fn! {
        /// An unlocked lock.
        pub const fn new() -> RawRwLock {
            RawRwLock {
                state: Futex::new(0),
                id: LockId::new(),
            }
        }
    }

    /// Blocks until this thread holds a read lock.
    ///
    /// # Panics
    ///
    /// If the lock already has the most readers it can count (2^25 - 2).
    ///
    /// With the `deadlock` feature, also if this thread holds the lock already
    /// (the `deadlock` module).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn read(&self) {
        self.read_kind(PLAIN_READ);
    }

    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn read_kind(&self, held: u32) {
        let read = || self.try_read_kind(held) || self.read_contended(held, None);
        crate::deadlock::acquire(|| self.checked(), mode(held), Wait::Untimed, read);
    }

    /// A bounded read lock of kind `held`: one attempt without a deadline, else waits until
    /// `deadline`.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn read_bounded(&self, held: u32, deadline: Option<Deadline>) -> bool {
        let read = || {
            self.try_read_kind(held) || deadline.is_some_and(|d| self.read_contended(held, Some(d)))
        };
        crate::deadlock::acquire(|| self.checked(), mode(held), Wait::Bounded, read)
    }

    /// The lock as the deadlock checks name it.
    #[inline(always)]
    fn checked(&self) -> Target<'_> {
        Target::local(crate::deadlock::LockKind::RwLock, &self.id)
    }

    /// Takes a read lock if one can be had now (no writer holds, waits or spins for the
    /// readers to leave); returns whether it did.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_read(&self) -> bool {
        self.read_bounded(PLAIN_READ, None)
    }

    /// A read lock's fast path: one CAS adding a reader of kind `held` to the word as loaded;
    /// false, with no CAS, if the word is not lockable; `try_read_again` if the CAS fails.
    #[inline]
    fn try_read_kind(&self, held: u32) -> bool {
        let state = self.state.load(Ordering::Relaxed);
        read_lockable(state, held, false)
            && (self
                .state
                .compare_exchange(state, state + held, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                || self.try_read_again(held))
    }

    /// `try_read_kind` after its CAS failed: other readers and waiters change the word
    /// meanwhile, so it fails only when the word is not lockable. That CAS lost to another
    /// thread (a strong CAS fails only then), so it pauses first, as after every loss.
    #[cold]
    fn try_read_again(&self, held: u32) -> bool {
        crate::spin::back_off(0);
        let mut failures = 1;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if !read_lockable(state, held, false) {
                return false;
            }
            if self.add_reader(state, held, &mut failures) {
                return true;
            }
        }
    }

    /// One attempt to add a reader of kind `held` to the word, seen as `state`; returns whether
    /// it did. An attempt that lost to another thread (the word changed; `failures` counts
    /// them) pauses before the caller looks again (`crate::spin::back_off`); a spurious
    /// failure (the word did not change) does not.
    #[inline]
    fn add_reader(&self, state: u32, held: u32, failures: &mut u32) -> bool {
        match self.state.compare_exchange_weak(
            state,
            state + held,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => true,
            Err(now) => {
                if now != state {
                    crate::spin::back_off(*failures);
                    *failures = failures.saturating_add(1);
                }
                false
            }
        }
    }

    /// Blocks until this thread holds a read lock or `deadline` passes; returns whether it
    /// does. Returns false at once if the lock has the most readers it can count.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_until(&self, deadline: Instant) -> bool {
        self.read_bounded(PLAIN_READ, Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread holds a read lock or `timeout` passes; returns whether it does.
    /// Returns false at once if the lock has the most readers it can count.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_read_for(&self, timeout: Duration) -> bool {
        self.read_bounded(PLAIN_READ, Some(Deadline::after(timeout)))
    }

    /// Blocks until this thread holds the upgradable read: a read lock that no other thread
    /// holds in this mode, which [`upgrade`](RawRwLock::upgrade) can turn into the write lock.
    ///
    /// # Panics
    ///
    /// As [`read`](RawRwLock::read).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn upgradable_read(&self) {
        self.read_kind(UPGRADABLE_READ);
    }

    /// Takes the upgradable read if it can be had now (no writer holds, waits or spins for the
    /// readers to leave, no thread holds the upgradable read); returns whether it did.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_upgradable_read(&self) -> bool {
        self.read_bounded(UPGRADABLE_READ, None)
    }

    /// Blocks until this thread holds the upgradable read or `deadline` passes; returns
    /// whether it does (false at once if the lock has the most readers it can count).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_upgradable_read_until(&self, deadline: Instant) -> bool {
        self.read_bounded(UPGRADABLE_READ, Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread holds the upgradable read or `timeout` passes; returns whether
    /// it does (false at once if the lock has the most readers it can count).
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_upgradable_read_for(&self, timeout: Duration) -> bool {
        self.read_bounded(UPGRADABLE_READ, Some(Deadline::after(timeout)))
    }

    /// Blocks until this thread holds the write lock.
    ///
    /// # Panics
    ///
    /// With the `deadlock` feature, if this thread holds the lock already
    /// (the `deadlock` module).
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn write(&self) {
        let write = || self.take_write() || self.write_contended(None);
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Untimed, write);
    }

    /// Takes the write lock if no thread holds it now (and no read phase is open); returns
    /// whether it did.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    pub fn try_write(&self) -> bool {
        self.write_bounded(None)
    }

    /// A bounded write lock: one attempt without a deadline, else waits until `deadline`.
    #[cfg_attr(feature = "deadlock", track_caller)]
    #[inline]
    fn write_bounded(&self, deadline: Option<Deadline>) -> bool {
        let write = || self.take_write() || deadline.is_some_and(|d| self.write_contended(Some(d)));
        crate::deadlock::acquire(|| self.checked(), Mode::Exclusive, Wait::Bounded, write)
    }

    /// The write lock's fast path: the word from 0, or from waiting bits alone.
    #[inline]
    fn take_write(&self) -> bool {
        self.state
            .compare_exchange(0, WRITE_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            || self.try_write_with_bits()
    }

    /// `try_write` when the word is not 0: free perhaps, with waiting bits set.
    #[cold]
    fn try_write_with_bits(&self) -> bool {
        let state = self.state.load(Ordering::Relaxed);
        write_lockable(state)
            && self
                .state
                .compare_exchange(
                    state,
                    (state & !WRITER_SPINNING) | WRITE_LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Blocks until this thread holds the write lock or `deadline` passes; returns whether it
    /// does.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_until(&self, deadline: Instant) -> bool {
        self.write_bounded(Some(Deadline::at(deadline)))
    }

    /// Blocks until this thread holds the write lock or `timeout` passes; returns whether it
    /// does.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub fn try_write_for(&self, timeout: Duration) -> bool {
        self.write_bounded(Some(Deadline::after(timeout)))
    }

    /// Releases a read lock.
    ///
    /// # Safety
    ///
    /// The calling thread must hold a plain read lock (taken with `read` or a successful
    /// `try_read*`, or by a [`downgrade`](RawRwLock::downgrade) or
    /// [`downgrade_upgradable`](RawRwLock::downgrade_upgradable)).
    #[inline]
    pub unsafe fn read_unlock(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Read);
        self.release_read(PLAIN_READ);
    }

    /// Releases the upgradable read.
    ///
    /// # Safety
    ///
    /// The calling thread must hold the upgradable read (taken with `upgradable_read` or a
    /// successful `try_upgradable_read*`, or by
    /// [`downgrade_to_upgradable`](RawRwLock::downgrade_to_upgradable)).
    #[inline]
    pub unsafe fn upgradable_unlock(&self) {
        crate::deadlock::release(|| self.checked(), Mode::UpgradableRead);
        self.release_read(UPGRADABLE_READ);
    }

    /// Replaces the word by `next` of it, starting from `state` (a recent load of it), and
    /// returns the word replaced; `success` orders the replacing write.
    fn update(&self, mut state: u32, success: Ordering, next: impl Fn(u32) -> u32) -> u32 {
        loop {
            match self
                .state
                .compare_exchange_weak(state, next(state), success, Ordering::Relaxed)
            {
                Ok(_) => return state,
                Err(now) => state = now,
            }
        }
    }

    /// Releases a read lock of kind `held`, which the caller holds.
    #[inline]
    fn release_read(&self, held: u32) {
        // No read phase can open while this thread holds a read lock (only a writer's unlock
        // or downgrade opens one), so if none is open now, none is when the subtraction lands.
        let state = self.state.load(Ordering::Relaxed);
        if state & (READ_PHASE | WRITERS_WAITING) == 0 {
            let before = if held & UPGRADABLE == 0 {
                self.state.fetch_sub(held, Ordering::Release)
            } else {
                self.update(state, Ordering::Release, |now| without(now, held))
            };
            // Bits set meanwhile, or the upgradable read leaving with readers waiting.
            let wake_if = WRITERS_WAITING
                | UPGRADING
                | if held & UPGRADABLE != 0 {
                    READERS_WAITING
                } else {
                    0
                };
            if before & wake_if != 0 {
                self.wake_after_read_release(before, held);
            }
            return;
        }
        self.read_unlock_slow(held);
    }

    /// After a read release that needed no hand-off (`before`: the word it replaced), by
    /// address only (invariant 5): wake a writer if this was the last reader and one began to
    /// wait; the upgrader if this left it alone; every reader if the upgradable read was
    /// released while upgradable readers may take it (`upgradable_readers_may_come`).
    #[cold]
    fn wake_after_read_release(&self, before: u32, held: u32) {
        let addr = self.state.as_ptr();
        if readers(before) == 1 && before & WRITERS_WAITING != 0 {
            // That writer saw a reader and is asleep (this wakes it) or about to sleep on a
            // word that has changed (it looks again and takes the lock).
            let _ = Futex::wake_bitset_at(addr, 1, WRITER);
        } else if readers(before) == 2 && before & UPGRADING != 0 {
            // The reader left is the upgrader (invariant 6).
            let _ = Futex::wake_bitset_at(addr, 1, UPGRADER);
        }
        if held & UPGRADABLE != 0 && upgradable_readers_may_come(before) {
            // `without` cleared READERS_WAITING: wake every reader (invariant 1).
            let _ = Futex::wake_bitset_at(addr, i32::MAX as u32, ANY_READER);
        }
    }

    /// A read unlock with a read phase to close or writers to hand to, if it is the last.
    #[cold]
    fn read_unlock_slow(&self, held: u32) {
        let mut state = self.state.load(Ordering::Relaxed);
        let mut woke_writer = false;
        loop {
            let last = readers(state) == 1;
            // The last reader, with writers waiting: wake one while still holding the read
            // lock, so that the lock can be kept for it (invariant 3). Decided for the word this
            // attempt replaces, as other readers may leave in between.
            if last && !woke_writer && state & WRITERS_WAITING != 0 {
                woke_writer = self.state.wake_bitset(1, WRITER) == Ok(1);
            }
            // A woken timed writer may have given up since, clearing the bit (and waking
            // everyone): then there is nobody to keep the lock for. Nor is there while a reader
            // that came in meanwhile (in a read phase) still holds the lock: the woken writer
            // finds it and sleeps again, and this is an unlock like any other.
            let handing = last && woke_writer && state & WRITERS_WAITING != 0;
            let next = if !last {
                without(state, held)
            } else if handing {
                (state - held) & !READ_PHASE
            } else {
                (state - held) & !(READ_PHASE | WRITERS_WAITING)
            };
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) if handing => {
                    // Once more, by address (invariant 5): the woken writer may have looked
                    // before this release and slept again.
                    let _ = Futex::wake_bitset_at(self.state.as_ptr(), 1, WRITER);
                    return;
                }
                Ok(_) if last => return self.wake_writer_or_readers(state),
                Ok(_) => return self.wake_after_read_release(state, held),
                Err(now) => state = now,
            }
        }
    }

    /// After a release that left the lock free and cleared `WRITERS_WAITING` (`before`: the
    /// word just before it), by address only (invariant 5): wake one writer if writers waited,
    /// and every reader if readers waited and no writer was woken.
    fn wake_writer_or_readers(&self, before: u32) {
        let addr = self.state.as_ptr();
        let woke_writer = before & WRITERS_WAITING != 0
            && Futex::wake_bitset_at(addr, 1, WRITER).is_ok_and(|woken| woken > 0);
        if !woke_writer && before & READERS_WAITING != 0 {
            let _ = Futex::wake_bitset_at(addr, i32::MAX as u32, ANY_READER);
        }
    }

    /// Releases the write lock.
    ///
    /// # Safety
    ///
    /// The calling thread must hold the write lock (taken with `write` or a successful
    /// `try_write*`, or by an upgrade).
    #[inline]
    pub unsafe fn write_unlock(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        if !self.release_write_uncontended() {
            self.write_unlock_contended(crate::fairness::hand_off_now());
        }
    }

    /// The write unlock when nobody waits: one CAS to 0; returns whether it did it.
    #[inline]
    fn release_write_uncontended(&self) -> bool {
        self.state
            .compare_exchange(WRITE_LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases the write lock, handing it to the threads that sleep: to the readers, if any,
    /// which take it in a read phase that no writer may enter; else to one writer, which takes
    /// it before any other thread can. Either way no running thread overtakes them.
    ///
    /// # Safety
    ///
    /// As [`write_unlock`](RawRwLock::write_unlock).
    pub unsafe fn write_unlock_fair(&self) {
        crate::deadlock::release(|| self.checked(), Mode::Exclusive);
        if !self.release_write_uncontended() {
            self.write_unlock_contended(true);
        }
    }

    /// The slow path of a write unlock: threads wait. If `fair`, opens a read phase if readers
    /// wait, else hands the lock to a writer; else wakes one writer if writers wait, else every
    /// reader.
    #[cold]
    fn write_unlock_contended(&self, fair: bool) {
        let mut state = self.state.load(Ordering::Relaxed);
        let phase_wanted = fair && state & READERS_WAITING != 0;
        // Invariant 4: wake the untimed readers before opening a phase, while still holding.
        let to_readers = phase_wanted
            && self
                .state
                .wake_bitset(i32::MAX as u32, UNTIMED_READER | UNTIMED_UPGRADABLE)
                .is_ok_and(|woken| woken > 0);
        // Invariant 8: a fair unlock with no reader to hand to hands to an untimed writer.
        if fair
            && !to_readers
            && state & WRITERS_WAITING != 0
            && self.state.wake_bitset(1, UNTIMED_WRITER) == Ok(1)
        {
            // Release: the claimer's Acquire CAS sees what this thread wrote.
            self.state.fetch_or(HANDED, Ordering::Release);
            // The woken writer may have looked before HANDED was set and slept again. By
            // address only (invariant 5): the lock may be claimed and freed by now.
            let _ = Futex::wake_bitset_at(self.state.as_ptr(), 1, UNTIMED_WRITER);
            return;
        }
        // Waiters set bits meanwhile: each attempt builds on the word as it is.
        loop {
            let next = if to_readers {
                (state & WRITERS_WAITING) | READ_PHASE
            } else if state & WRITERS_WAITING != 0 {
                // A writer's turn: waiting readers keep their bit.
                state & READERS_WAITING
            } else {
                0
            };
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        if to_readers {
            // The readers woken may have looked too early and slept again; timed readers join
            // now too. By address only (invariant 5).
            let _ = Futex::wake_bitset_at(self.state.as_ptr(), i32::MAX as u32, ANY_READER);
        } else {
            self.wake_writer_or_readers(state);
        }
    }

    /// Turns this thread's write lock into a read lock, atomically: no writer can take the
    /// lock in between. Waiting readers are woken to share it (in a read phase if writers
    /// wait).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the write lock; afterwards it holds a plain read lock.
    pub unsafe fn downgrade(&self) {
        crate::deadlock::weaken(|| self.checked(), Mode::Exclusive, Mode::Read);
        self.downgrade_to(PLAIN_READ);
    }

    /// Turns this thread's write lock into the upgradable read, atomically: no writer can
    /// take the lock in between. Waiting readers are woken to share it (in a read phase if
    /// writers wait).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the write lock; afterwards it holds the upgradable read.
    pub unsafe fn downgrade_to_upgradable(&self) {
        crate::deadlock::weaken(|| self.checked(), Mode::Exclusive, Mode::UpgradableRead);
        self.downgrade_to(UPGRADABLE_READ);
    }

    fn downgrade_to(&self, held: u32) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let mut next = (state & WRITERS_WAITING) | held;
            if state & READERS_WAITING != 0 && state & WRITERS_WAITING != 0 {
                next |= READ_PHASE;
            }
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        if state & READERS_WAITING != 0 {
            // This thread holds a read lock: the word is alive.
            let _ = self.state.wake_bitset(i32::MAX as u32, ANY_READER);
        }
    }

    /// Turns this thread's upgradable read into a plain read lock, so that another thread may
    /// take the upgradable read.
    ///
    /// # Safety
    ///
    /// The calling thread must hold the upgradable read; afterwards it holds a plain read
    /// lock.
    pub unsafe fn downgrade_upgradable(&self) {
        crate::deadlock::weaken(|| self.checked(), Mode::UpgradableRead, Mode::Read);
        let state = self.state.load(Ordering::Relaxed);
        let before = self.update(state, Ordering::Release, |now| without(now, UPGRADABLE));
        if upgradable_readers_may_come(before) {
            // `without` cleared READERS_WAITING: wake every reader (invariant 1). This thread
            // holds a read lock: the word is alive.
            let _ = self.state.wake_bitset(i32::MAX as u32, ANY_READER);
        }
    }

    /// Turns this thread's upgradable read into the write lock, blocking until the other
    /// readers have left; no writer takes the lock in between, and no reader comes in
    /// meanwhile but those a read phase admits (invariant 6).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the upgradable read; afterwards it holds the write lock.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub unsafe fn upgrade(&self) {
        let upgrade = || self.upgrade_now() || self.exclusive_contended(Exclusive::Upgrader, None);
        crate::deadlock::upgrade(|| self.checked(), Wait::Untimed, upgrade);
    }

    /// Turns this thread's upgradable read into the write lock if no other thread holds a
    /// read lock now; returns whether it did (if not, it still holds the upgradable read).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the upgradable read.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub unsafe fn try_upgrade(&self) -> bool {
        self.upgrade_bounded(None)
    }

    /// A bounded upgrade: one attempt without a deadline, else waits until `deadline`. The
    /// caller holds the upgradable read.
    #[inline]
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn upgrade_bounded(&self, deadline: Option<Deadline>) -> bool {
        let upgrade = || {
            self.upgrade_now()
                || deadline.is_some_and(|d| self.exclusive_contended(Exclusive::Upgrader, Some(d)))
        };
        crate::deadlock::upgrade(|| self.checked(), Wait::Bounded, upgrade)
    }

    /// The upgrade if no other reader holds the lock now; the caller holds the upgradable
    /// read.
    fn upgrade_now(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        // Waiters may set bits meanwhile; only other readers make it fail.
        while readers(state) == 1 {
            match self.state.compare_exchange_weak(
                state,
                upgraded(state),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        false
    }

    /// As [`upgrade`](RawRwLock::upgrade), giving up at `deadline`; returns whether this
    /// thread holds the write lock (if not, it still holds the upgradable read).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the upgradable read.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub unsafe fn try_upgrade_until(&self, deadline: Instant) -> bool {
        self.upgrade_bounded(Some(Deadline::at(deadline)))
    }

    /// As [`upgrade`](RawRwLock::upgrade), giving up after `timeout`; returns whether this
    /// thread holds the write lock (if not, it still holds the upgradable read).
    ///
    /// # Safety
    ///
    /// The calling thread must hold the upgradable read.
    #[cfg_attr(feature = "deadlock", track_caller)]
    pub unsafe fn try_upgrade_for(&self, timeout: Duration) -> bool {
        self.upgrade_bounded(Some(Deadline::after(timeout)))
    }

    /// Whether any thread holds the lock now (a snapshot).
    pub fn is_locked(&self) -> bool {
        readers(self.state.load(Ordering::Relaxed)) != 0
    }

    /// Whether a writer holds the lock now (a snapshot).
    pub fn is_locked_exclusive(&self) -> bool {
        is_write_locked(self.state.load(Ordering::Relaxed))
    }

    /// The waiting of a contended read lock of kind `held`; returns whether it was taken
    /// (false only at the deadline).
    #[cold]
    fn read_contended(&self, held: u32, deadline: Option<Deadline>) -> bool {
        let lock = (self as *const RawRwLock).cast();
        crate::profile::contended(crate::profile::LockKind::RwLockRead, lock, || {
            self.wait_to_read(held, deadline)
        })
    }

    /// The waiting of `read_contended`.
    #[inline(always)]
    fn wait_to_read(&self, held: u32, deadline: Option<Deadline>) -> bool {
        let bitset = match (held & UPGRADABLE != 0, deadline.is_some()) {
            (true, true) => TIMED_UPGRADABLE,
            (true, false) => UNTIMED_UPGRADABLE,
            (false, true) => TIMED_READER,
            (false, false) => UNTIMED_READER,
        };
        let mut woken = false;
        let mut spin = SpinWait::new();
        let mut failures = 0u32;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if read_lockable(state, held, woken) {
                if self.add_reader(state, held, &mut failures) {
                    return true;
                }
                continue;
            }
            if readers(state) == MAX_READERS {
                // No read unlock wakes a reader, so no wait could see the count fall: a
                // bounded attempt fails, an unbounded one cannot be granted.
                assert!(deadline.is_some(), "too many read locks on a RwLock");
                return false;
            }
            // A reader owes nobody a wake (every release that wakes readers wakes them all),
            // so a timed one leaves at its deadline without spinning or marking the word.
            if deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
            // Spin while the lock is held against this reader and nobody sleeps yet.
            if state & (READERS_WAITING | WRITERS_WAITING) == 0 && spin.spin() {
                continue;
            }
            if state & READERS_WAITING == 0
                && self
                    .state
                    .compare_exchange(
                        state,
                        state | READERS_WAITING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    )
                    .is_err()
            {
                continue;
            }
            match self
                .state
                .wait_bitset(state | READERS_WAITING, bitset, deadline)
            {
                Err(Error::TimedOut) => return false,
                Ok(()) => woken = true,
                Err(_) => {}
            }
            spin = SpinWait::new();
        }
    }

    #[cold]
    fn write_contended(&self, deadline: Option<Deadline>) -> bool {
        self.exclusive_contended(Exclusive::Writer, deadline)
    }

    /// The waiting of a writer or an upgrade; returns whether the write lock was taken (false
    /// only at the deadline).
    #[cold]
    fn exclusive_contended(&self, who: Exclusive, deadline: Option<Deadline>) -> bool {
        let lock = (self as *const RawRwLock).cast();
        crate::profile::contended(crate::profile::LockKind::RwLockWrite, lock, || {
            self.wait_for_exclusive(who, deadline)
        })
    }

    /// The waiting of `exclusive_contended`.
    #[inline(always)]
    fn wait_for_exclusive(&self, who: Exclusive, deadline: Option<Deadline>) -> bool {
        let mut marked = false;
        let taken = self.exclusive_waiting(who, deadline, &mut marked);
        if !taken && marked {
            // Invariant 2: a timed writer or upgrader leaving clears WRITERS_WAITING, which
            // keeps readers out, and wakes every sleeper in the same atomic step; writers (and
            // an upgrader) still waiting set it again. (This thread is still in a call on the
            // lock, or holds the upgradable read: the word is alive.)
            self.state
                .change_and_wake(WakeOpKind::AndNot, who.waiting_bits(), i32::MAX as u32);
        }
        taken
    }

    /// `marked`: this thread set its waiting bits or slept.
    fn exclusive_waiting(
        &self,
        who: Exclusive,
        deadline: Option<Deadline>,
        marked: &mut bool,
    ) -> bool {
        let bits = who.waiting_bits();
        let mut slept = false;
        // This thread's CAS set `WRITER_SPINNING`: its way out is a step that clears it
        // (invariant 7).
        let mut set_spinning = false;
        let mut spin = SpinWait::new();
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if who.lockable(state, slept && deadline.is_none()) {
                if self
                    .state
                    .compare_exchange_weak(
                        state,
                        who.locked(state, slept),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            // A timed waiter that has written nothing to the word leaves at its deadline
            // without spinning or marking it.
            if !*marked && !set_spinning && deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
            let nobody_waits =
                state & (READERS_WAITING | WRITERS_WAITING | READ_PHASE | WRITER_SPINNING) == 0;
            // Readers in the lock and nobody waiting: keep new readers out while this thread
            // spins for those to leave (invariant 7).
            if nobody_waits && who.waits_for_readers(state) {
                set_spinning |= self
                    .state
                    .compare_exchange(
                        state,
                        state | WRITER_SPINNING,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    )
                    .is_ok();
                continue;
            }
            // Spin while the lock is held and nobody sleeps yet.
            if state & (READERS_WAITING | WRITERS_WAITING | READ_PHASE) == 0 && spin.spin() {
                continue;
            }
            // To sleep: WRITERS_WAITING keeps readers out in place of WRITER_SPINNING.
            let sleep_on = (state | bits) & !WRITER_SPINNING;
            if sleep_on != state {
                if self
                    .state
                    .compare_exchange(state, sleep_on, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                *marked = true;
            }
            if deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
            *marked = true;
            let bitset = who.bitset(deadline.is_some());
            match self.state.wait_bitset(sleep_on, bitset, deadline) {
                Err(Error::TimedOut) => return false,
                // Only a wake makes this a writer back from a sleep (invariant 8): a wait that
                // found the word changed took no wake, and must not claim a handed lock.
                Ok(()) => slept = true,
                Err(_) => {}
            }
            spin = SpinWait::new();
        }
    }
}

/// Who waits for the write lock: a writer, or the upgradable reader upgrading.
#[derive(Clone, Copy)]
enum Exclusive {
    Writer,
    Upgrader,
}

impl Exclusive {
    /// Whether `self` may take the write lock from `state`; `may_claim`: it is an untimed
    /// writer back from a sleep, the only kind that claims a handed lock (invariant 8).
    fn lockable(self, state: u32, may_claim: bool) -> bool {
        match self {
            Exclusive::Writer => {
                write_lockable(state)
                    || (may_claim && is_write_locked(state) && state & HANDED != 0)
            }
            // The one reader left is the upgrader itself.
            Exclusive::Upgrader => readers(state) == 1,
        }
    }

    /// Whether readers other than `self` hold the lock in `state`, so that `self` waits for
    /// them to leave.
    fn waits_for_readers(self, state: u32) -> bool {
        match self {
            Exclusive::Writer => !is_write_locked(state) && readers(state) > 0,
            Exclusive::Upgrader => readers(state) > 1,
        }
    }

    /// The word once `self` takes the write lock (from a free word, or claiming a handed one:
    /// `HANDED` is set only with `WRITE_LOCKED`), `WRITER_SPINNING` cleared (invariant 7).
    /// After a sleep, other writers may sleep still: a writer then keeps `WRITERS_WAITING` so
    /// that its unlock wakes the next (invariant 1); an upgrader always keeps it, as it cannot
    /// tell whether it set the bit alone.
    fn locked(self, state: u32, slept: bool) -> u32 {
        let state = state & !WRITER_SPINNING;
        match self {
            Exclusive::Writer if slept => (state & !HANDED) | WRITE_LOCKED | WRITERS_WAITING,
            Exclusive::Writer => state | WRITE_LOCKED,
            Exclusive::Upgrader => upgraded(state),
        }
    }

    fn waiting_bits(self) -> u32 {
        match self {
            Exclusive::Writer => WRITERS_WAITING,
            Exclusive::Upgrader => WRITERS_WAITING | UPGRADING,
        }
    }

    /// The futex bitset `self` sleeps with; `timed`: it has a deadline.
    fn bitset(self, timed: bool) -> u32 {
        match self {
            Exclusive::Writer if timed => TIMED_WRITER,
            Exclusive::Writer => UNTIMED_WRITER,
            Exclusive::Upgrader => UPGRADER,
        }
    }
}
