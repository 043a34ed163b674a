//! Deadlock checks (feature `deadlock`): a thread that locks a lock it holds panics with both
//! call sites instead of hanging; locks taken in an order that contradicts an order seen
//! before are reported, with the call sites of both orders, before they ever deadlock (the
//! idea of the kernel's lockdep and of tracing-mutex); and [`check_deadlock`] returns the
//! threads that wait for each other now, as parking_lot's `deadlock::check_deadlock` does.
//!
//! The checks cover every futexkit lock: `sync`'s [`Mutex`](crate::sync::Mutex),
//! [`RwLock`](crate::sync::RwLock) and [`PiMutex`](crate::sync::PiMutex), the nonpoison
//! locks, the `futexkit::parking_lot` and `lock_api` types built on [`crate::raw`], and the
//! [`shared`](crate::shared) mutex and rwlock. They run from the start of the program;
//! [`set_enabled`] turns them off and on.
//!
//! ```
//! # // The module is private without the feature, and rustdoc still collects this example.
//! # #[cfg(feature = "deadlock")]
//! # fn main() {
//! use futexkit::sync::Mutex;
//!
//! let accounts = Mutex::new(100);
//! let audit = Mutex::new(Vec::<i32>::new());
//! {
//!     let _a = accounts.lock().unwrap();
//!     let _b = audit.lock().unwrap(); // accounts, then audit
//! }
//! {
//!     let _b = audit.lock().unwrap();
//!     let _a = accounts.lock().unwrap(); // audit, then accounts: reported (and on stderr)
//! }
//! let violation = &futexkit::deadlock::order_violations()[0];
//! println!("{violation}"); // both orders, each with its call sites
//! assert!(futexkit::deadlock::check_deadlock().is_empty()); // nobody waits now
//! # }
//! # #[cfg(not(feature = "deadlock"))]
//! # fn main() {}
//! ```
//!
//! ## What each check does
//!
//! * **Relocking.** An untimed acquisition (`lock`, `read`, `write`, `upgradable_read`) of a
//!   lock this thread holds, where the two can never be held together (a mutex; a rwlock's
//!   write lock with anything; two upgradable reads), panics instead of hanging, naming where
//!   the thread took the lock and where it asked again. A read lock asked for again (beside a
//!   read or an upgradable read) is allowed, as std allows it, and reported as the lock order
//!   below is: a writer that starts waiting between the two keeps the second out, and the
//!   thread waits for itself (parking_lot#212). An untimed upgrade while this thread also holds
//!   a plain read of the lock panics too: the upgrade waits for every other reader. `try_*`
//!   calls and timed calls do not panic (they fail or time out). The
//!   [`shared`](crate::shared) locks keep their own answer, `WouldDeadlock`, and such a
//!   refused call adds no order.
//! * **Lock order.** Each untimed acquisition of a lock B while this thread holds a lock A
//!   records the order "A before B" with both call sites. If the order "B before A" was seen
//!   before (directly or through other locks), the two can deadlock when two threads run them
//!   at once: the first time for each pair, the report is written to stderr (fd 2 directly,
//!   errors ignored) and kept for [`order_violations`]. The program goes on: a report is a
//!   warning, as the kernel's lockdep gives, since panicking inside a Condvar's relock would
//!   leave its guard unsound. The order is kept even when reported, so later cycles through
//!   it are found. Modes
//!   are not told apart (two read locks in opposite orders deadlock once a writer waits on
//!   each).
//! * **Waits.** [`check_deadlock`] returns each cycle of threads in which every thread waits,
//!   untimed, for a lock the next one holds in a mode that keeps it out. Only such cycles:
//!   the threads' records are read twice and a cycle is returned only if none of its threads
//!   changed its record between the two reads, so every thread in it was waiting at one
//!   instant for a lock the next held at that instant. A thread's record never claims more
//!   than the thread holds: it gains an entry after the lock is taken and loses it before the
//!   lock is released.
//!
//! ## Limits
//!
//! * A thread is known by the records of its own calls: a lock unlocked by another thread than
//!   the one that took it (the raw API forbids it) leaves a stale entry behind.
//! * A lock is named by its kind and a number (an address for the shared locks); the call
//!   sites say which it is. A shared lock's order is forgotten when its [`Region`] is dropped.
//! * Waits for a lock held in another process, timed waits, Condvar waits and waits of a
//!   Barrier, Semaphore, Latch or Event are not in the wait graph; waiting behind a waiting
//!   writer (rather than a holder) is not an edge either.
//! * A forked child starts with empty records.
//!
//! ## What it costs
//!
//! Compiled out (the default), nothing. Compiled in and turned off, one relaxed load per lock
//! and unlock. Turned on, each acquisition and release updates this thread's record under a
//! mutex of its own, and the first time a thread sees a pair of locks in an order it updates
//! the order graph under a global mutex. `docs/benchmarks.md` has the measured costs.
//!
//! [`Region`]: crate::shared::Region

// Without the checks, the hooks keep only the acquisitions they wrap.
#![cfg_attr(
    not(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle)))),
    allow(dead_code)
)]

use core::fmt;

/// Which kind of lock a report names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A mutex ([`RawMutex`](crate::raw::RawMutex) and the types on it).
    Mutex,
    /// A read-write lock ([`RawRwLock`](crate::raw::RawRwLock) and the types on it).
    RwLock,
    /// A priority-inheriting mutex ([`RawPiMutex`](crate::raw::RawPiMutex)).
    PiMutex,
    /// A process-shared mutex ([`crate::shared::SharedMutex`] and its raw type).
    SharedMutex,
    /// A process-shared rwlock ([`crate::shared::SharedRwLock`] and its raw type).
    SharedRwLock,
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockKind::Mutex => "Mutex",
            LockKind::RwLock => "RwLock",
            LockKind::PiMutex => "PiMutex",
            LockKind::SharedMutex => "SharedMutex",
            LockKind::SharedRwLock => "SharedRwLock",
        })
    }
}

/// How a thread holds or wants a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Alone: a mutex, or a rwlock's write lock.
    Exclusive,
    /// A rwlock's read lock.
    Read,
    /// A rwlock's upgradable read.
    UpgradableRead,
}

impl Mode {
    /// Whether a holder in mode `held` keeps out a thread that wants `self`.
    fn kept_out_by(self, held: Mode) -> bool {
        match (self, held) {
            (Mode::Exclusive, _) | (_, Mode::Exclusive) => true,
            (Mode::UpgradableRead, Mode::UpgradableRead) => true,
            (Mode::Read, _) | (Mode::UpgradableRead, Mode::Read) => false,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Exclusive => "exclusive",
            Mode::Read => "read",
            Mode::UpgradableRead => "upgradable read",
        })
    }
}

/// How an acquisition may wait: only untimed waits are checked and can deadlock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// `lock`, `read`, `write`, `upgradable_read`: waits for as long as it takes.
    Untimed,
    /// `try_*` and the timed calls: fails or gives up instead.
    Bounded,
}

/// Which lock a hook is about: a lock of this process, named by its [`LockId`], or a shared
/// lock, named by its address in this process. Hooks take a function that makes it, called
/// only while the checks run: one that finds them off does nothing else.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    Local(LockKind, &'a LockId),
    Shared(LockKind, usize),
}

impl<'a> Target<'a> {
    /// A lock of this process with its id field.
    #[inline(always)]
    pub(crate) fn local(kind: LockKind, id: &'a LockId) -> Target<'a> {
        Target::Local(kind, id)
    }

    /// A process-shared lock at `address`.
    #[inline(always)]
    pub(crate) fn shared<T>(kind: LockKind, address: *const T) -> Target<'static> {
        Target::Shared(kind, address as usize)
    }
}

/// An acquisition of `lock` in `mode` by `acquire`, which returns whether it took the lock
/// (`took`). An untimed one is checked first (relock, order) and is in the wait graph while
/// it runs. Without the feature, `acquire()` and nothing else.
#[cfg_attr(feature = "deadlock", track_caller)]
#[inline(always)]
pub(crate) fn acquire<'a, T>(
    lock: impl FnOnce() -> Target<'a>,
    mode: Mode,
    wait: Wait,
    acquire: impl FnOnce() -> T,
    took: impl FnOnce(&T) -> bool,
) -> T {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if tracking::is_enabled() {
        return tracking::acquire(lock(), mode, wait, acquire, took);
    }
    let _ = (lock, mode, wait, took);
    acquire()
}

/// Before a release of `lock` held in `mode`: this thread's record loses it.
#[inline(always)]
pub(crate) fn release<'a>(lock: impl FnOnce() -> Target<'a>, mode: Mode) {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if tracking::is_enabled() {
        return tracking::release(lock(), mode);
    }
    let _ = (lock, mode);
}

/// A downgrade, before it is made: `lock` held in `from` is held in the weaker `to`.
#[inline(always)]
pub(crate) fn weaken<'a>(lock: impl FnOnce() -> Target<'a>, from: Mode, to: Mode) {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if tracking::is_enabled() {
        return tracking::change(lock(), from, to);
    }
    let _ = (lock, from, to);
}

/// An upgrade of `lock` from the upgradable read to exclusive by `upgrade`, which returns
/// whether it did (`took`). An untimed one is in the wait graph while it runs.
#[cfg_attr(feature = "deadlock", track_caller)]
#[inline(always)]
pub(crate) fn upgrade<'a, T>(
    lock: impl FnOnce() -> Target<'a>,
    wait: Wait,
    upgrade: impl FnOnce() -> T,
    took: impl FnOnce(&T) -> bool,
) -> T {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    if tracking::is_enabled() {
        return tracking::upgrade(lock(), wait, upgrade, took);
    }
    let _ = (lock, wait, took);
    upgrade()
}

/// The shared locks in `[start, start + len)` are gone (their region is unmapped): their
/// order is forgotten, as another lock may come to live at the same address.
#[inline(always)]
pub(crate) fn forget_shared(start: *const u8, len: usize) {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    tracking::forget_shared(start as usize, len);
    #[cfg(not(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle)))))]
    let _ = (start, len);
}

/// A lock's number for the checks, given the first time the lock is taken while they run;
/// forgotten (its order with it) when the lock is dropped. Without the feature it is empty.
#[derive(Default)]
pub(crate) struct LockId {
    #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
    id: std::sync::atomic::AtomicU64,
}

impl LockId {
    /// Not numbered yet.
    pub(crate) const fn new() -> LockId {
        LockId {
            #[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
            id: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
impl Drop for LockId {
    fn drop(&mut self) {
        let id = *self.id.get_mut();
        // While the checks are off its edges stay: numbers are never reused, so they only
        // take room.
        if id != 0 && tracking::is_enabled() {
            tracking::forget(id);
        }
    }
}

#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
pub use tracking::{
    check_deadlock, is_enabled, order_violations, set_enabled, Deadlock, LockName, OrderEdge,
    OrderViolation, Waiter,
};

#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
mod tracking {
    use core::cell::{Cell, RefCell};
    use core::fmt;
    use std::collections::{HashMap, HashSet, VecDeque};
    use std::panic::Location;
    use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard, Weak};
    use std::thread::Thread;

    use super::{LockKind, Mode, Target, Wait};

    type Site = &'static Location<'static>;

    /// 0 while the checks are off; else the number of the period they are on in, so that
    /// records made in an earlier period are known as stale.
    static PERIOD: AtomicU32 = AtomicU32::new(1);
    /// The next number for a lock of this process; shared locks are numbered by address with
    /// the top bit set, so the two never meet.
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    const SHARED_BIT: u64 = 1 << 63;
    /// Every thread's record and the order graph; replaced (the old one leaked) in a forked
    /// child, where a thread that is gone may hold their mutexes.
    static TRACKER: AtomicPtr<Tracker> = AtomicPtr::new(core::ptr::null_mut());
    /// Bumped when shared locks are forgotten: threads drop the pairs they have seen.
    static FORGOTTEN: AtomicU64 = AtomicU64::new(0);

    /// Turns the checks on or off in every thread, at once. While off, acquisitions are not
    /// recorded; turning them on again starts every thread's record afresh (locks held from
    /// before are not known).
    pub fn set_enabled(on: bool) {
        if !on {
            PERIOD.store(0, Ordering::Relaxed);
            return;
        }
        if PERIOD.load(Ordering::Relaxed) == 0 {
            static LAST: AtomicU32 = AtomicU32::new(1);
            let next = LAST.fetch_add(1, Ordering::Relaxed).wrapping_add(1).max(1);
            PERIOD.store(next, Ordering::Relaxed);
        }
    }

    /// Whether the checks run now.
    #[inline]
    pub fn is_enabled() -> bool {
        PERIOD.load(Ordering::Relaxed) != 0
    }

    struct Tracker {
        threads: Mutex<Vec<Weak<ThreadRecord>>>,
        graph: Mutex<Graph>,
    }

    fn tracker() -> &'static Tracker {
        let current = TRACKER.load(Ordering::Acquire);
        if !current.is_null() {
            // SAFETY: a published tracker is leaked: it lives as long as the program.
            return unsafe { &*current };
        }
        static FORK_HANDLER: std::sync::Once = std::sync::Once::new();
        FORK_HANDLER.call_once(|| {
            // Should this fail (no memory), a forked child could wait for a mutex held by a
            // thread of its parent when it checks.
            let _ = crate::futex::sys::process::on_fork_in_child(forget_after_fork);
        });
        let fresh = Box::into_raw(Box::new(Tracker {
            threads: Mutex::new(Vec::new()),
            graph: Mutex::new(Graph::default()),
        }));
        match TRACKER.compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: published just now, never freed.
            Ok(_) => unsafe { &*fresh },
            Err(other) => {
                // SAFETY: `fresh` was never published: this thread owns it alone.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above: a published tracker is leaked.
                unsafe { &*other }
            }
        }
    }

    unsafe extern "C" fn forget_after_fork() {
        // The child's one thread makes a new tracker (and record) when it next needs one.
        TRACKER.store(core::ptr::null_mut(), Ordering::Release);
    }

    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        // A panic while one is held leaves the data whole (each change is one push or
        // removal): go on.
        mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A lock as reports name it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct LockName {
        kind: LockKind,
        id: u64,
    }

    impl LockName {
        /// The lock's kind.
        pub fn kind(&self) -> LockKind {
            self.kind
        }
    }

    impl fmt::Display for LockName {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.id & SHARED_BIT != 0 {
                write!(f, "{} at {:#x}", self.kind, self.id & !SHARED_BIT)
            } else {
                write!(f, "{} #{}", self.kind, self.id)
            }
        }
    }

    impl Target<'_> {
        fn name(self) -> LockName {
            match self {
                Target::Shared(kind, address) => LockName {
                    kind,
                    id: address as u64 | SHARED_BIT,
                },
                Target::Local(kind, id) => {
                    let id = match id.id.load(Ordering::Relaxed) {
                        0 => {
                            let fresh = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                            match id.id.compare_exchange(
                                0,
                                fresh,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => fresh,
                                Err(other) => other,
                            }
                        }
                        known => known,
                    };
                    LockName { kind, id }
                }
            }
        }

        /// The shared locks answer a relock with `WouldDeadlock` themselves.
        fn answers_relock_itself(self) -> bool {
            matches!(self, Target::Shared(..))
        }
    }

    #[derive(Clone, Copy)]
    struct Held {
        lock: LockName,
        mode: Mode,
        at: Site,
    }

    /// One thread's locks, as its own calls recorded them.
    struct ThreadRecord {
        /// `None` for a thread whose std handle is gone (a lock taken in a late thread-local
        /// destructor).
        thread: Option<Thread>,
        state: Mutex<ThreadState>,
    }

    #[derive(Clone, Default)]
    struct ThreadState {
        /// Bumped by every change: two reads with the same version saw the same state.
        version: u64,
        period: u32,
        held: Vec<Held>,
        /// The untimed acquisition this thread is in, if any.
        waiting: Option<Held>,
    }

    /// This thread's side: its record, and the pairs of locks it has already put in the
    /// order graph.
    struct Local {
        tracker: *const Tracker,
        record: Arc<ThreadRecord>,
        seen_pairs: HashSet<(u64, u64)>,
        forgotten: u64,
    }

    std::thread_local! {
        static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
        /// Set while this thread runs the checks: a lock the checks' own work takes (an
        /// allocator's, a panic hook's) goes unchecked instead of entering them again.
        static BUSY: Cell<bool> = const { Cell::new(false) };
    }

    /// Runs `f` unless this thread is inside the checks already (or its thread-locals are gone,
    /// as they are while it exits); then returns `None`.
    fn outside_checks<R>(f: impl FnOnce() -> R) -> Option<R> {
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                let _ = BUSY.try_with(|busy| busy.set(false));
            }
        }
        if BUSY.try_with(|busy| busy.replace(true)).unwrap_or(true) {
            return None;
        }
        let _leave = Leave;
        Some(f())
    }

    /// Runs `f` on this thread's record (made if need be, emptied if made in an earlier
    /// period), its pairs seen and its thread, unless the checks are off; the record's version
    /// is bumped. Called inside `outside_checks`.
    fn with_record<R>(
        f: impl FnOnce(&mut ThreadState, &mut HashSet<(u64, u64)>, Option<&Thread>) -> R,
    ) -> Option<R> {
        let period = PERIOD.load(Ordering::Relaxed);
        if period == 0 {
            return None;
        }
        LOCAL
            .try_with(|local| {
                let mut local = local.borrow_mut();
                let tracker = tracker();
                if local
                    .as_ref()
                    .map_or(true, |l| !core::ptr::eq(l.tracker, tracker))
                {
                    let record = Arc::new(ThreadRecord {
                        // Older std panics here once the thread's own locals are destroyed.
                        thread: std::panic::catch_unwind(std::thread::current).ok(),
                        state: Mutex::new(ThreadState::default()),
                    });
                    let mut threads = lock(&tracker.threads);
                    threads.retain(|t| t.strong_count() > 0);
                    threads.push(Arc::downgrade(&record));
                    drop(threads);
                    *local = Some(Local {
                        tracker,
                        record,
                        seen_pairs: HashSet::new(),
                        forgotten: FORGOTTEN.load(Ordering::Relaxed),
                    });
                }
                let Local {
                    record,
                    seen_pairs,
                    forgotten,
                    ..
                } = local.as_mut().expect("made above");
                let forgotten_now = FORGOTTEN.load(Ordering::Relaxed);
                if *forgotten != forgotten_now || seen_pairs.len() > 4096 {
                    seen_pairs.clear();
                    *forgotten = forgotten_now;
                }
                let mut state = lock(&record.state);
                if state.period != period {
                    state.held.clear();
                    state.waiting = None;
                    state.period = period;
                }
                state.version += 1;
                f(&mut state, seen_pairs, record.thread.as_ref())
            })
            .ok()
    }

    /// The end of an acquisition or upgrade, also when it unwinds: clears the waiting entry
    /// (if one was set) and records what was taken.
    struct Finish<'a> {
        waited: bool,
        took: Option<&'a dyn Fn(&mut ThreadState)>,
    }

    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            outside_checks(|| {
                with_record(|state, _, _| {
                    if self.waited {
                        state.waiting = None;
                    }
                    if let Some(took) = self.took {
                        took(state);
                    }
                })
            });
        }
    }

    #[track_caller]
    pub(super) fn acquire<T>(
        lock: Target<'_>,
        mode: Mode,
        wait: Wait,
        acquire: impl FnOnce() -> T,
        took: impl FnOnce(&T) -> bool,
    ) -> T {
        let at = Location::caller();
        let name = lock.name();
        let wanted = Held {
            lock: name,
            mode,
            at,
        };
        let waited = wait == Wait::Untimed;
        if waited {
            let relock = outside_checks(|| {
                let checked = with_record(|state, seen_pairs, thread| {
                    let again = state.held.iter().find(|h| h.lock == name).copied();
                    if again.is_some() && lock.answers_relock_itself() {
                        // The lock refuses this call itself (`WouldDeadlock`): nothing waits.
                        return Ok(None);
                    }
                    let excluding = state
                        .held
                        .iter()
                        .find(|h| h.lock == name && mode.kept_out_by(h.mode));
                    if let Some(held) = excluding {
                        return Err(*held);
                    }
                    // Pairs this thread has not put in the graph yet; a second read lock of
                    // one lock is the pair (lock, lock).
                    let new_pairs: Vec<Held> = state
                        .held
                        .iter()
                        .filter(|h| h.lock != name)
                        .chain(again.as_ref())
                        .filter(|h| seen_pairs.insert((h.lock.id, name.id)))
                        .copied()
                        .collect();
                    state.waiting = Some(wanted);
                    Ok((!new_pairs.is_empty()).then(|| (new_pairs, thread_name(thread))))
                });
                match checked {
                    Some(Err(held)) => Some(held),
                    Some(Ok(Some((new_pairs, thread)))) => {
                        order(&new_pairs, wanted, &thread);
                        None
                    }
                    _ => None,
                }
            });
            if let Some(Some(held)) = relock {
                relock_panic(held, wanted);
            }
        }
        let push = |state: &mut ThreadState| state.held.push(wanted);
        let mut finish = Finish { waited, took: None };
        let result = acquire();
        if took(&result) {
            finish.took = Some(&push);
        }
        drop(finish);
        result
    }

    #[track_caller]
    fn relock_panic(held: Held, wanted: Held) -> ! {
        panic!(
            "deadlock: this thread already holds {} ({}, taken at {}) and asks for it again ({}) \
             at {}: it would wait for itself",
            wanted.lock, held.mode, held.at, wanted.mode, wanted.at
        )
    }

    pub(super) fn release(lock: Target<'_>, mode: Mode) {
        let name = lock.name();
        outside_checks(|| {
            with_record(|state, _, _| {
                if let Some(i) = state
                    .held
                    .iter()
                    .rposition(|h| h.lock == name && h.mode == mode)
                {
                    state.held.remove(i);
                }
            })
        });
    }

    /// Changes the mode of this thread's latest entry for `name` in mode `from` to `to`.
    fn change_mode(state: &mut ThreadState, name: LockName, from: Mode, to: Mode) {
        if let Some(held) = state
            .held
            .iter_mut()
            .rev()
            .find(|h| h.lock == name && h.mode == from)
        {
            held.mode = to;
        }
    }

    pub(super) fn change(lock: Target<'_>, from: Mode, to: Mode) {
        let name = lock.name();
        outside_checks(|| with_record(|state, _, _| change_mode(state, name, from, to)));
    }

    #[track_caller]
    pub(super) fn upgrade<T>(
        lock: Target<'_>,
        wait: Wait,
        upgrade: impl FnOnce() -> T,
        took: impl FnOnce(&T) -> bool,
    ) -> T {
        let at = Location::caller();
        let name = lock.name();
        let waited = wait == Wait::Untimed;
        if waited {
            let own_read = outside_checks(|| {
                with_record(|state, _, _| {
                    let own_read = state
                        .held
                        .iter()
                        .find(|h| h.lock == name && h.mode == Mode::Read)
                        .copied();
                    if own_read.is_none() {
                        state.waiting = Some(Held {
                            lock: name,
                            mode: Mode::Exclusive,
                            at,
                        });
                    }
                    own_read
                })
            });
            if let Some(Some(Some(held))) = own_read {
                panic!(
                    "deadlock: an upgrade of {name} at {at} waits for every other read lock to \
                     go, and this thread holds one (taken at {}): it would wait for itself",
                    held.at
                );
            }
        }
        let strengthen = |state: &mut ThreadState| {
            change_mode(state, name, Mode::UpgradableRead, Mode::Exclusive)
        };
        let mut finish = Finish { waited, took: None };
        let result = upgrade();
        if took(&result) {
            finish.took = Some(&strengthen);
        }
        drop(finish);
        result
    }

    /// One pair of the order graph: `first` was held (taken at `first_at`) when `then` was
    /// taken at `then_at`, by `thread`.
    #[derive(Debug, Clone)]
    pub struct OrderEdge {
        /// The lock held.
        pub first: LockName,
        /// Where it was taken.
        pub first_at: &'static Location<'static>,
        /// The lock taken while `first` was held.
        pub then: LockName,
        /// Where it was taken.
        pub then_at: &'static Location<'static>,
        /// The thread that took them (its name, or its id).
        pub thread: String,
    }

    impl fmt::Display for OrderEdge {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "{} (taken at {}) then {} at {}, in thread {}",
                self.first, self.first_at, self.then, self.then_at, self.thread
            )
        }
    }

    /// Two locks taken in an order that contradicts an order seen before: two threads running
    /// the two can each hold one and wait for the other. Or, with `before` empty and the same
    /// lock on both sides of `now`, a read lock asked for again by a thread that holds it: a
    /// writer that starts waiting between the two keeps the second out, and the thread waits
    /// for itself.
    #[derive(Debug, Clone)]
    pub struct OrderViolation {
        /// The order seen now.
        pub now: OrderEdge,
        /// The order seen before, from `now.then` to `now.first`: one pair, or a chain of
        /// pairs through other locks; empty for a read lock asked for again.
        pub before: Vec<OrderEdge>,
    }

    impl fmt::Display for OrderViolation {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.before.is_empty() {
                return write!(
                    f,
                    "read lock asked for again: {}; a writer that waits between the two \
                     keeps the second out, and the thread waits for itself",
                    self.now
                );
            }
            writeln!(f, "lock order inversion: {}", self.now)?;
            write!(f, "  contradicts the order seen before:")?;
            for edge in &self.before {
                write!(f, "\n    {edge}")?;
            }
            Ok(())
        }
    }

    #[derive(Default)]
    struct Graph {
        /// `after[a][b]`: `b` was taken while `a` was held; the first time it was seen.
        after: HashMap<u64, HashMap<u64, OrderEdge>>,
        /// `before[b]`: every `a` with `after[a][b]`.
        before: HashMap<u64, HashSet<u64>>,
        /// Pairs reported, so that each is reported once.
        reported: HashSet<(u64, u64)>,
        violations: Vec<OrderViolation>,
    }

    impl Graph {
        /// The edges of a path from `from` to `to`, if there is one (breadth first: the
        /// shortest).
        fn path(&self, from: u64, to: u64) -> Option<Vec<OrderEdge>> {
            let mut came_from: HashMap<u64, u64> = HashMap::new();
            let mut queue = VecDeque::from([from]);
            while let Some(node) = queue.pop_front() {
                if node == to {
                    let mut path = Vec::new();
                    let mut at = to;
                    while at != from {
                        let previous = came_from[&at];
                        path.push(self.after[&previous][&at].clone());
                        at = previous;
                    }
                    path.reverse();
                    return Some(path);
                }
                for &next in self.after.get(&node).into_iter().flat_map(HashMap::keys) {
                    if next != from && !came_from.contains_key(&next) {
                        came_from.insert(next, node);
                        queue.push_back(next);
                    }
                }
            }
            None
        }

        fn remove(&mut self, id: u64) {
            self.reported.retain(|&(a, b)| a != id && b != id);
            if let Some(after) = self.after.remove(&id) {
                for next in after.keys() {
                    if let Some(before) = self.before.get_mut(next) {
                        before.remove(&id);
                    }
                }
            }
            if let Some(before) = self.before.remove(&id) {
                for previous in before {
                    if let Some(after) = self.after.get_mut(&previous) {
                        after.remove(&id);
                    }
                }
            }
        }
    }

    fn thread_name(thread: Option<&Thread>) -> String {
        let Some(thread) = thread else {
            return "(exiting)".to_owned();
        };
        match thread.name() {
            Some(name) => format!("'{name}'"),
            None => format!("{:?}", thread.id()),
        }
    }

    /// Puts "each of `held`, then `wanted`" in the order graph; reports each pair that closes
    /// a cycle instead.
    fn order(held: &[Held], wanted: Held, thread: &str) {
        let mut found = Vec::new();
        {
            let mut graph = lock(&tracker().graph);
            for first in held {
                let (a, b) = (first.lock.id, wanted.lock.id);
                if graph
                    .after
                    .get(&a)
                    .is_some_and(|after| after.contains_key(&b))
                {
                    continue;
                }
                let edge = OrderEdge {
                    first: first.lock,
                    first_at: first.at,
                    then: wanted.lock,
                    then_at: wanted.at,
                    thread: thread.to_owned(),
                };
                // A read lock asked for again: a cycle of one lock, reported, never put in.
                let cycle = if a == b {
                    Some(Vec::new())
                } else {
                    graph.path(b, a)
                };
                if let Some(before) = cycle {
                    if graph.reported.insert((a.min(b), a.max(b))) {
                        let violation = OrderViolation {
                            now: edge.clone(),
                            before,
                        };
                        graph.violations.push(violation.clone());
                        found.push(violation);
                    }
                }
                // Reported or not, the order was seen: later cycles may run through it.
                if a != b {
                    graph.after.entry(a).or_default().insert(b, edge);
                    graph.before.entry(b).or_default().insert(a);
                }
            }
        }
        for violation in found {
            crate::futex::sys::process::write_to_stderr(&format!("futexkit: {violation}\n"));
        }
    }

    /// Every lock order inversion found so far, in the order they were found (each pair of
    /// locks once).
    pub fn order_violations() -> Vec<OrderViolation> {
        outside_checks(|| lock(&tracker().graph).violations.clone()).unwrap_or_default()
    }

    pub(super) fn forget(id: u64) {
        let current = TRACKER.load(Ordering::Acquire);
        if current.is_null() {
            return;
        }
        // SAFETY: a published tracker is leaked: it lives as long as the program.
        let tracker = unsafe { &*current };
        outside_checks(|| lock(&tracker.graph).remove(id));
    }

    pub(super) fn forget_shared(start: usize, len: usize) {
        let current = TRACKER.load(Ordering::Acquire);
        if current.is_null() {
            return;
        }
        // SAFETY: a published tracker is leaked: it lives as long as the program.
        let tracker = unsafe { &*current };
        outside_checks(|| forget_range(tracker, start, len));
    }

    fn forget_range(tracker: &Tracker, start: usize, len: usize) {
        let mut graph = lock(&tracker.graph);
        let range = (start as u64 | SHARED_BIT)..((start + len) as u64 | SHARED_BIT);
        let gone: Vec<u64> = graph
            .after
            .keys()
            .chain(graph.before.keys())
            .copied()
            .filter(|id| range.contains(id))
            .collect();
        for id in gone {
            graph.remove(id);
        }
        drop(graph);
        FORGOTTEN.fetch_add(1, Ordering::Relaxed);
    }

    /// One thread of a [`Deadlock`]: it waits for a lock the next thread holds.
    #[derive(Debug, Clone)]
    pub struct Waiter {
        /// The thread (its name, or its id).
        pub thread: String,
        /// The lock it waits for.
        pub lock: LockName,
        /// How it wants it.
        pub mode: Mode,
        /// Where it waits.
        pub waits_at: &'static Location<'static>,
        /// Where the next thread of the cycle took the lock, and how it holds it.
        pub holder_took_it_at: &'static Location<'static>,
        /// How the next thread holds it.
        pub held_as: Mode,
    }

    /// Threads that wait for each other: each waits, untimed, for a lock the next one holds,
    /// and the last for one the first holds. None of them can go on.
    #[derive(Debug, Clone)]
    pub struct Deadlock {
        /// The threads of the cycle, in order.
        pub threads: Vec<Waiter>,
    }

    impl fmt::Display for Deadlock {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "deadlock of {} threads:", self.threads.len())?;
            let n = self.threads.len();
            for (i, waiter) in self.threads.iter().enumerate() {
                let holder = &self.threads[(i + 1) % n];
                write!(
                    f,
                    "\n  thread {} waits at {} for {} ({}), which thread {} holds ({}, taken at {})",
                    waiter.thread,
                    waiter.waits_at,
                    waiter.lock,
                    waiter.mode,
                    holder.thread,
                    waiter.held_as,
                    waiter.holder_took_it_at
                )?;
            }
            Ok(())
        }
    }

    /// The cycles of threads that wait for each other now (module documentation, "Waits"):
    /// empty when none does. Each cycle is returned once.
    pub fn check_deadlock() -> Vec<Deadlock> {
        outside_checks(find_deadlocks).unwrap_or_default()
    }

    fn find_deadlocks() -> Vec<Deadlock> {
        let period = PERIOD.load(Ordering::Relaxed);
        if period == 0 {
            return Vec::new();
        }
        let records: Vec<Arc<ThreadRecord>> = lock(&tracker().threads)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        // A cycle whose threads all kept their versions between the two reads is a deadlock;
        // one that changed may have been passing: look again, a few times.
        let mut confirmed = Vec::new();
        for _ in 0..5 {
            let states: Vec<ThreadState> = records
                .iter()
                .map(|record| {
                    let state = lock(&record.state).clone();
                    if state.period == period {
                        state
                    } else {
                        ThreadState::default()
                    }
                })
                .collect();
            let cycles = cycles(&states);
            confirmed = cycles
                .iter()
                .filter(|cycle| {
                    cycle
                        .iter()
                        .all(|&(i, _)| lock(&records[i].state).version == states[i].version)
                })
                .map(|cycle| Deadlock {
                    threads: cycle
                        .iter()
                        .map(|&(i, holder)| {
                            let waiting = states[i].waiting.expect("a waiter of a cycle");
                            Waiter {
                                thread: thread_name(records[i].thread.as_ref()),
                                lock: waiting.lock,
                                mode: waiting.mode,
                                waits_at: waiting.at,
                                holder_took_it_at: holder.at,
                                held_as: holder.mode,
                            }
                        })
                        .collect(),
                })
                .collect::<Vec<_>>();
            if confirmed.len() == cycles.len() {
                break;
            }
        }
        confirmed
    }

    /// The cycles of the wait graph of `states`: thread `i` has an edge to each other thread
    /// holding the lock `i` waits for in a mode that keeps it out. Each cycle is a list of
    /// (thread, the entry of the next thread that keeps it out).
    fn cycles(states: &[ThreadState]) -> Vec<Vec<(usize, Held)>> {
        let edges: Vec<Vec<(usize, Held)>> = states
            .iter()
            .enumerate()
            .map(|(i, state)| {
                let Some(waiting) = state.waiting else {
                    return Vec::new();
                };
                states
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .flat_map(|(j, other)| {
                        other
                            .held
                            .iter()
                            .filter(move |h| {
                                h.lock == waiting.lock && waiting.mode.kept_out_by(h.mode)
                            })
                            .map(move |h| (j, *h))
                    })
                    .collect()
            })
            .collect();
        // Depth first, keeping the path: an edge back into it closes a cycle.
        let mut done = vec![false; states.len()];
        let mut in_cycle = vec![false; states.len()];
        let mut found = Vec::new();
        for start in 0..states.len() {
            if done[start] {
                continue;
            }
            let mut path: Vec<(usize, usize)> = vec![(start, 0)];
            let mut on_path = vec![false; states.len()];
            on_path[start] = true;
            while let Some(&mut (node, ref mut next)) = path.last_mut() {
                let Some(&(to, _)) = edges[node].get(*next) else {
                    on_path[node] = false;
                    done[node] = true;
                    path.pop();
                    continue;
                };
                *next += 1;
                if on_path[to] {
                    let from = path
                        .iter()
                        .position(|&(n, _)| n == to)
                        .expect("on the path");
                    let members: Vec<usize> = path[from..].iter().map(|&(n, _)| n).collect();
                    if members.iter().all(|&n| !in_cycle[n]) {
                        // Each member left by the edge it took last (`next - 1`).
                        let cycle = path[from..]
                            .iter()
                            .map(|&(n, next)| (n, edges[n][next - 1].1))
                            .collect();
                        for &n in &members {
                            in_cycle[n] = true;
                        }
                        found.push(cycle);
                    }
                } else if !done[to] {
                    on_path[to] = true;
                    path.push((to, 0));
                }
            }
        }
        found
    }
}
