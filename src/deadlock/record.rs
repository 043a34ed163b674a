//! Each thread's record of the locks it holds and the one it waits for, and the hooks' work on
//! it (module documentation of `src/deadlock/mod.rs`, "The record" in `docs/design.md`): a
//! record never claims more than its thread holds.

use core::cell::{Cell, RefCell};
use core::fmt;
use std::collections::HashSet;
use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::Thread;

use super::order::{order, Graph};
use super::{LockKind, Mode, Outcome, Target, Wait};

pub(super) type Site = &'static Location<'static>;

/// 0 while the checks are off; else the number of the period they are on in, so that
/// records made in an earlier period are known as stale.
pub(super) static PERIOD: AtomicU32 = AtomicU32::new(1);
/// The next number for a lock of this process; shared locks are numbered by address with
/// the top bit set, so the two never meet.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
pub(super) const SHARED_BIT: u64 = 1 << 63;
/// Every thread's record and the order graph; replaced (the old one leaked) in a forked
/// child, where a thread that is gone may hold their mutexes.
pub(super) static TRACKER: AtomicPtr<Tracker> = AtomicPtr::new(core::ptr::null_mut());
/// Bumped when shared locks are forgotten: threads drop the pairs they have seen.
pub(super) static FORGOTTEN: AtomicU64 = AtomicU64::new(0);

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

pub(super) struct Tracker {
    pub(super) threads: Mutex<Vec<Weak<ThreadRecord>>>,
    pub(super) graph: Mutex<Graph>,
}

pub(super) fn tracker() -> &'static Tracker {
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

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while one is held leaves the data whole (each change is one push or
    // removal): go on.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A lock as reports name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockName {
    pub(super) kind: LockKind,
    pub(super) id: u64,
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
                        match id
                            .id
                            .compare_exchange(0, fresh, Ordering::Relaxed, Ordering::Relaxed)
                        {
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
pub(super) struct Held {
    pub(super) lock: LockName,
    pub(super) mode: Mode,
    pub(super) at: Site,
}

/// One thread's locks, as its own calls recorded them.
pub(super) struct ThreadRecord {
    /// `None` for a thread whose std handle is gone (a lock taken in a late thread-local
    /// destructor).
    pub(super) thread: Option<Thread>,
    pub(super) state: Mutex<ThreadState>,
}

#[derive(Clone, Default)]
pub(super) struct ThreadState {
    /// Bumped by every change: two reads with the same version saw the same state.
    pub(super) version: u64,
    pub(super) period: u32,
    pub(super) held: Vec<Held>,
    /// The untimed acquisition this thread is in, if any.
    pub(super) waiting: Option<Held>,
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
    /// Set once this thread has made a record (in some tracker): before that, a step that may
    /// not make one leaves `LOCAL` alone.
    static HAS_RECORD: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` unless this thread is inside the checks already (or its thread-locals are gone,
/// as they are while it exits); then returns `None`.
pub(super) fn outside_checks<R>(f: impl FnOnce() -> R) -> Option<R> {
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
/// is bumped. Making a record allocates, so only a step before an acquisition calls this;
/// the others call [`with_existing_record`]. Called inside `outside_checks`.
fn with_record<R>(
    f: impl FnOnce(&mut ThreadState, &mut HashSet<(u64, u64)>, Option<&Thread>) -> R,
) -> Option<R> {
    record_access(true, f)
}

/// [`with_record`] for a step that may hold the lock it records (the end of an acquisition,
/// a release, a downgrade), where allocating could wait for that very lock (an allocator's):
/// `None` where this thread has no record yet, as when the checks were turned on after its
/// acquisition began.
fn with_existing_record<R>(
    f: impl FnOnce(&mut ThreadState, &mut HashSet<(u64, u64)>, Option<&Thread>) -> R,
) -> Option<R> {
    record_access(false, f)
}

fn record_access<R>(
    make: bool,
    f: impl FnOnce(&mut ThreadState, &mut HashSet<(u64, u64)>, Option<&Thread>) -> R,
) -> Option<R> {
    let period = PERIOD.load(Ordering::Relaxed);
    if period == 0 {
        return None;
    }
    // Without making one, neither the record nor the tracker (gone after a `fork`) is made, and
    // `LOCAL` is not touched first: its first touch may allocate (registering its destructor).
    if !make
        && (!HAS_RECORD.try_with(Cell::get).unwrap_or(false)
            || TRACKER.load(Ordering::Acquire).is_null())
    {
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
                if !make {
                    return None;
                }
                let _ = HAS_RECORD.try_with(|has| has.set(true));
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
            Some(f(&mut state, seen_pairs, record.thread.as_ref()))
        })
        .ok()
        .flatten()
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
            with_existing_record(|state, _, _| {
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
pub(super) fn acquire<T: Outcome>(
    lock: Target<'_>,
    mode: Mode,
    wait: Wait,
    acquire: impl FnOnce() -> T,
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
                state.held.reserve(1);
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
    } else {
        outside_checks(|| with_record(|state, _, _| state.held.reserve(1)));
    }
    // Room for the entry was made above, before the acquisition: once this thread has the lock
    // it must not allocate, as the lock may be the allocator's own. Where there is no room (the
    // checks were off at that step), the acquisition goes unrecorded.
    let push = |state: &mut ThreadState| {
        if state.held.len() < state.held.capacity() {
            state.held.push(wanted);
        }
    };
    let mut finish = Finish { waited, took: None };
    let result = acquire();
    if result.took() {
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
        with_existing_record(|state, _, _| {
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
    outside_checks(|| with_existing_record(|state, _, _| change_mode(state, name, from, to)));
}

#[track_caller]
pub(super) fn upgrade(lock: Target<'_>, wait: Wait, upgrade: impl FnOnce() -> bool) -> bool {
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
    let strengthen =
        |state: &mut ThreadState| change_mode(state, name, Mode::UpgradableRead, Mode::Exclusive);
    let mut finish = Finish { waited, took: None };
    let result = upgrade();
    if result {
        finish.took = Some(&strengthen);
    }
    drop(finish);
    result
}

/// A thread as reports name it: its name in quotes, or its id.
pub(super) fn thread_name(thread: Option<&Thread>) -> String {
    let Some(thread) = thread else {
        return "(exiting)".to_owned();
    };
    match thread.name() {
        Some(name) => format!("'{name}'"),
        None => format!("{:?}", thread.id()),
    }
}
