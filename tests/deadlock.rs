//! futexkit::deadlock (feature `deadlock`): a relock panics with both call sites; an inverted
//! lock order is reported with both orders' call sites although nothing deadlocks; a real
//! deadlock is found by `check_deadlock`; and the programs that made parking_lot's detector
//! report false cycles (parking_lot#489, #490: an upgrade waiting for readers) get none.
//!
//! The checks are process-wide and the tests run in parallel: each looks only at reports that
//! name its own call sites or threads.
#![cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]

use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use futexkit::deadlock::{self, Deadlock, LockKind, Mode, OrderViolation};
use futexkit::sync::{Barrier, Condvar, Mutex, RwLock};

/// The line of the call that follows on the same line.
#[track_caller]
fn here() -> u32 {
    Location::caller().line()
}

/// The message of the panic `f` raises.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("a panic");
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

fn site(line: u32) -> String {
    format!("{}:{line}:", file!())
}

#[test]
fn relocking_a_held_mutex_panics_with_both_call_sites() {
    let mutex = Mutex::new(0);
    let (guard, first) = (mutex.lock().unwrap(), here());
    let (message, second) = (panic_message(|| drop(mutex.lock())), here());
    assert!(message.contains(&site(first)), "{message}");
    assert!(message.contains(&site(second)), "{message}");
    assert!(message.contains("Mutex #"), "{message}");
    // Nothing was taken by the panicking call: the lock works on.
    assert!(mutex.try_lock().is_err());
    drop(guard);
    *mutex.lock().unwrap() += 1;
    assert_eq!(*mutex.lock().unwrap(), 1);
}

#[test]
fn try_and_timed_relocks_fail_without_panicking() {
    let mutex = Mutex::new(0);
    let _guard = mutex.lock().unwrap();
    assert!(mutex.try_lock().is_err());
    let rwlock = RwLock::new(0);
    let _read = rwlock.read().unwrap();
    assert!(rwlock.try_write().is_err());
    let raw = futexkit::raw::RawMutex::new();
    raw.lock();
    assert!(!raw.try_lock_for(Duration::from_millis(1)));
    // SAFETY: taken above.
    unsafe { raw.unlock() };
}

#[test]
fn relocking_a_held_rwlock_panics_in_every_mode() {
    let rwlock = RwLock::new(0);
    {
        let (_write, first) = (rwlock.write().unwrap(), here());
        let message = panic_message(|| drop(rwlock.read()));
        assert!(message.contains(&site(first)), "{message}");
    }
    {
        let (_read, first) = (rwlock.read().unwrap(), here());
        let message = panic_message(|| drop(rwlock.write()));
        assert!(message.contains(&site(first)), "{message}");
        // A second read is allowed (std allows it), and reported once as a hazard.
        let (_again, second) = (rwlock.read().unwrap(), here());
        let found = violations_at(first, second);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].before.is_empty());
        assert_eq!(found[0].now.first, found[0].now.then);
        let text = found[0].to_string();
        assert!(text.contains("writer"), "{text}");
        assert!(
            text.contains(&site(first)) && text.contains(&site(second)),
            "{text}"
        );
    }
    assert!(rwlock.try_write().is_ok());
}

#[cfg(feature = "lock_api_05")]
#[test]
fn parking_lot_types_report_relocks_at_the_callers_site() {
    use futexkit::parking_lot::{ReentrantMutex, RwLock as PlRwLock};

    let mutex = futexkit::parking_lot::Mutex::new(0);
    let (_guard, first) = (mutex.lock(), here());
    let (message, second) = (panic_message(|| drop(mutex.lock())), here());
    assert!(message.contains(&site(first)), "{message}");
    assert!(message.contains(&site(second)), "{message}");

    let rwlock = PlRwLock::new(0);
    let (upgradable, first) = (rwlock.upgradable_read(), here());
    let message = panic_message(|| drop(rwlock.upgradable_read()));
    assert!(message.contains(&site(first)), "{message}");
    // Upgrading is not relocking.
    let write = futexkit::parking_lot::RwLockUpgradableReadGuard::upgrade(upgradable);
    drop(write);

    // Every entry counts, not the first: read, upgradable read, then the upgradable read
    // again (which only the second excludes).
    let read = rwlock.read();
    let (upgradable, first) = (rwlock.upgradable_read(), here());
    let message = panic_message(|| drop(rwlock.upgradable_read()));
    assert!(message.contains(&site(first)), "{message}");
    // An upgrade waits for every other reader, this thread's own plain read among them.
    let message = panic_message(|| {
        drop(futexkit::parking_lot::RwLockUpgradableReadGuard::upgrade(
            upgradable,
        ))
    });
    assert!(message.contains("upgrade"), "{message}");
    drop(read);

    // A reentrant mutex relocks by design.
    let reentrant = ReentrantMutex::new(0);
    let _outer = reentrant.lock();
    let _inner = reentrant.lock();
}

/// lock_api 0.5 gives the upgradable guard up before the upgrade: an upgrade that panics (the
/// relock report) releases the upgradable read, so the lock is free once the plain read goes.
#[cfg(feature = "lock_api_05")]
#[test]
fn a_lock_api_05_upgrade_that_panics_releases_the_upgradable_read() {
    use lock_api_05::{RwLock, RwLockUpgradableReadGuard};
    let rwlock = RwLock::<futexkit::RawRwLock, u32>::new(0);
    let read = rwlock.read();
    let upgradable = rwlock.upgradable_read();
    let message = panic_message(|| drop(RwLockUpgradableReadGuard::upgrade(upgradable)));
    assert!(message.contains("upgrade"), "{message}");
    drop(read);
    let mut write = rwlock.try_write().expect("the lock is free");
    *write += 1;
}

#[test]
fn relocking_a_pi_mutex_panics_with_both_call_sites() {
    let Ok(mutex) = futexkit::sync::PiMutex::new(0) else {
        return; // no PI futexes on this kernel
    };
    let (_guard, first) = (mutex.lock().unwrap(), here());
    let message = panic_message(|| drop(mutex.lock()));
    assert!(message.contains(&site(first)), "{message}");
    assert!(message.contains("already holds"), "{message}");
}

#[test]
fn shared_locks_are_in_the_order_and_wait_graphs() {
    use futexkit::shared::Region;
    let region: &'static Region = Box::leak(Box::new(
        Region::builder()
            .mutex("left", 0u32)
            .rwlock("right", 0u32)
            .build()
            .unwrap(),
    ));
    let left = region.mutex::<u32>("left").unwrap();
    let right = region.rwlock::<u32>("right").unwrap();
    {
        let _l = left.lock().unwrap();
        let _r = right.read().unwrap();
    }
    let (_r, first) = (right.write().unwrap(), here());
    let (_l, then) = (left.lock().unwrap(), here());
    let found = violations_at(first, then);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].now.first.kind(), LockKind::SharedRwLock);
    assert_eq!(found[0].now.then.kind(), LockKind::SharedMutex);
    drop((_r, _l));

    // Two threads of this process stuck on the two shared locks (leaked with the region).
    let both_hold: &'static Barrier = Box::leak(Box::new(Barrier::new(2)));
    std::thread::Builder::new()
        .name("shared-stuck-writer".into())
        .spawn(move || {
            let _r = right.write().unwrap();
            both_hold.wait();
            let _l = left.lock();
            unreachable!("a deadlocked thread went on");
        })
        .unwrap();
    std::thread::Builder::new()
        .name("shared-stuck-locker".into())
        .spawn(move || {
            let _l = left.lock().unwrap();
            both_hold.wait();
            let _r = right.read();
            unreachable!("a deadlocked thread went on");
        })
        .unwrap();
    let found = wait_for_deadlock("shared-stuck-");
    let mut kinds: Vec<String> = found
        .threads
        .iter()
        .map(|w| w.lock.kind().to_string())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["SharedMutex", "SharedRwLock"], "{found}");
}

/// The violations whose current order was taken at the lines `then_line` (held lock taken at
/// `first_line`).
fn violations_at(first_line: u32, then_line: u32) -> Vec<OrderViolation> {
    deadlock::order_violations()
        .into_iter()
        .filter(|v| {
            v.now.first_at.file() == file!()
                && v.now.first_at.line() == first_line
                && v.now.then_at.line() == then_line
        })
        .collect()
}

#[test]
fn an_inverted_order_in_two_threads_is_reported_though_they_never_deadlock() {
    let a = Arc::new(Mutex::new(0));
    let b = Arc::new(Mutex::new(0));
    let (a1, b1) = (Arc::clone(&a), Arc::clone(&b));
    let lines = std::thread::Builder::new()
        .name("a-then-b".into())
        .spawn(move || {
            let (_a, first) = (a1.lock().unwrap(), here());
            let (_b, then) = (b1.lock().unwrap(), here());
            (first, then)
        })
        .unwrap()
        .join()
        .unwrap();
    // One after the other: these two threads can never deadlock, yet the order is inverted.
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    let inverted = std::thread::Builder::new()
        .name("b-then-a".into())
        .spawn(move || {
            let (_b, first) = (b2.lock().unwrap(), here());
            let (_a, then) = (a2.lock().unwrap(), here());
            (first, then)
        })
        .unwrap()
        .join()
        .unwrap();
    let found = violations_at(inverted.0, inverted.1);
    assert_eq!(found.len(), 1, "{found:?}");
    let violation = &found[0];
    assert_eq!(violation.now.thread, "'b-then-a'");
    assert_eq!(violation.before.len(), 1);
    let before = &violation.before[0];
    assert_eq!(
        (before.first_at.line(), before.then_at.line()),
        lines,
        "{violation}"
    );
    assert_eq!(before.thread, "'a-then-b'");
    assert_eq!(before.first, violation.now.then);
    assert_eq!(before.then, violation.now.first);
    assert_eq!(violation.now.first.kind(), LockKind::Mutex);
    let text = violation.to_string();
    for line in [lines.0, lines.1, inverted.0, inverted.1] {
        assert!(text.contains(&site(line)), "{text}");
    }
    // Reported once per pair.
    {
        let _b = b.lock().unwrap();
        let _a = a.lock().unwrap();
    }
    assert_eq!(violations_at(inverted.0, inverted.1).len(), 1);
}

#[test]
fn an_inversion_through_a_chain_of_locks_is_reported_with_the_chain() {
    let (a, b, c) = (RwLock::new(0), Mutex::new(0), RwLock::new(0));
    {
        let _a = a.read().unwrap();
        let _b = b.lock().unwrap();
    }
    {
        let _b = b.lock().unwrap();
        let _c = c.write().unwrap();
    }
    let (_c, first) = (c.read().unwrap(), here());
    let (_a, then) = (a.write().unwrap(), here());
    let found = violations_at(first, then);
    assert_eq!(found.len(), 1);
    let chain: Vec<LockKind> = found[0]
        .before
        .iter()
        .map(|edge| edge.first.kind())
        .collect();
    // From `a` (asked for now) to `c` (held now): a before b, b before c.
    assert_eq!(chain, [LockKind::RwLock, LockKind::Mutex]);
    assert_eq!(found[0].before.len(), 2, "{}", found[0]);
}

#[test]
fn an_order_already_reported_still_closes_later_cycles() {
    let (a, b, x) = (Mutex::new(0), Mutex::new(0), Mutex::new(0));
    {
        let _b = b.lock().unwrap();
        let _a = a.lock().unwrap();
    }
    {
        let _a = a.lock().unwrap();
        let _b = b.lock().unwrap(); // reported: b before a was seen
    }
    {
        let _b = b.lock().unwrap();
        let _x = x.lock().unwrap();
    }
    let (_x, first) = (x.lock().unwrap(), here());
    let (_a, then) = (a.lock().unwrap(), here());
    // a before b (reported, yet seen), b before x: x before a closes a -> b -> x -> a.
    let found = violations_at(first, then);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].before.len(), 2, "{}", found[0]);
}

#[test]
fn a_shared_relock_refused_at_once_reports_no_order() {
    use futexkit::shared::{LockError, Region};
    let region = Region::builder().mutex("m", 0u32).build().unwrap();
    let shared = region.mutex::<u32>("m").unwrap();
    let other = Mutex::new(0);
    let _s = shared.lock().unwrap();
    let _o = other.lock().unwrap();
    // Refused with WouldDeadlock without waiting: no "other before shared" order.
    let (refused, line) = (shared.lock(), here());
    assert!(matches!(refused, Err(LockError::WouldDeadlock)));
    assert!(deadlock::order_violations()
        .iter()
        .all(|v| v.now.then_at.file() != file!() || v.now.then_at.line() != line));
    drop(_o);
    let _o = other.lock().unwrap(); // same order as before, nothing to report either
}

#[test]
fn one_order_kept_everywhere_and_condvar_waits_report_nothing() {
    let start = line!();
    let outer = Arc::new(Mutex::new(0));
    let inner = Arc::new((Mutex::new(false), Condvar::new()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (outer, inner) = (Arc::clone(&outer), Arc::clone(&inner));
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let _o = outer.lock().unwrap();
                    let _i = inner.0.lock().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // A Condvar wait releases and retakes its mutex under the outer lock: the same order.
    let (outer2, inner2) = (Arc::clone(&outer), Arc::clone(&inner));
    let waiter = std::thread::spawn(move || {
        let _o = outer2.lock().unwrap();
        let mut ready = inner2.0.lock().unwrap();
        while !*ready {
            ready = inner2.1.wait(ready).unwrap();
        }
    });
    while !waiter.is_finished() {
        *inner.0.lock().unwrap() = true;
        inner.1.notify_all();
        std::thread::sleep(Duration::from_millis(1));
    }
    waiter.join().unwrap();
    let end = line!();
    let in_this_test =
        |at: &Location<'_>| at.file() == file!() && (start..end).contains(&at.line());
    let ours: Vec<_> = deadlock::order_violations()
        .into_iter()
        .filter(|v| in_this_test(v.now.first_at) || in_this_test(v.now.then_at))
        .collect();
    assert!(ours.is_empty(), "{ours:?}");
}

/// The deadlocks among threads whose names start with `prefix`.
fn deadlocks_of(prefix: &str) -> Vec<Deadlock> {
    deadlock::check_deadlock()
        .into_iter()
        .filter(|d| {
            d.threads
                .iter()
                .any(|w| w.thread.starts_with(&format!("'{prefix}")))
        })
        .collect()
}

/// Polls `check_deadlock` until it finds a deadlock among the threads named `prefix*`; a
/// minute without one is a failure (the threads are stuck for good by then).
fn wait_for_deadlock(prefix: &str) -> Deadlock {
    let start = Instant::now();
    loop {
        if let Some(found) = deadlocks_of(prefix).pop() {
            return found;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no deadlock found among {prefix}*"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_real_two_thread_deadlock_is_found() {
    // Two threads that each hold one lock and wait for the other's: stuck for good, so the
    // locks and threads are leaked (the process's exit ends them).
    let a: &'static Mutex<u32> = Box::leak(Box::new(Mutex::new(0)));
    let b: &'static Mutex<u32> = Box::leak(Box::new(Mutex::new(0)));
    let both_hold: &'static Barrier = Box::leak(Box::new(Barrier::new(2)));
    let (tx, rx) = mpsc::channel();
    for (name, first, second) in [("stuck-left", a, b), ("stuck-right", b, a)] {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let (_first, took) = (first.lock().unwrap(), here());
                both_hold.wait();
                tx.send((took, here() + 1)).unwrap();
                let _second = second.lock().unwrap();
                unreachable!("a deadlocked thread went on");
            })
            .unwrap();
    }
    let lines = [rx.recv().unwrap(), rx.recv().unwrap()];
    let found = wait_for_deadlock("stuck-");
    assert_eq!(found.threads.len(), 2, "{found}");
    let mut names: Vec<&str> = found.threads.iter().map(|w| w.thread.as_str()).collect();
    names.sort();
    assert_eq!(names, ["'stuck-left'", "'stuck-right'"]);
    for waiter in &found.threads {
        assert_eq!(waiter.mode, Mode::Exclusive);
        assert_eq!(waiter.held_as, Mode::Exclusive);
        assert_eq!(waiter.waits_at.line(), lines[0].1);
        assert_eq!(waiter.holder_took_it_at.line(), lines[0].0);
        assert_eq!(waiter.lock.kind(), LockKind::Mutex);
    }
    assert_ne!(found.threads[0].lock, found.threads[1].lock);
    let text = found.to_string();
    assert!(
        text.contains("stuck-left") && text.contains(&site(lines[0].1)),
        "{text}"
    );
    // Found once, not once per thread.
    assert_eq!(deadlocks_of("stuck-").len(), 1);
}

#[cfg(feature = "lock_api_05")]
#[test]
fn an_upgrade_waiting_for_a_reader_that_waits_for_the_upgrader_is_a_deadlock() {
    use futexkit::parking_lot::{RwLock as PlRwLock, RwLockUpgradableReadGuard};
    let lock: &'static PlRwLock<u32> = Box::leak(Box::new(PlRwLock::new(0)));
    let mutex: &'static Mutex<u32> = Box::leak(Box::new(Mutex::new(0)));
    let (tell_reader, reader_told) = mpsc::channel();
    let (tell_upgrader, upgrader_told) = mpsc::channel();
    std::thread::Builder::new()
        .name("upgrade-deadlock-upgrader".into())
        .spawn(move || {
            let _mutex = mutex.lock().unwrap();
            let upgradable = lock.upgradable_read();
            tell_reader.send(()).unwrap();
            upgrader_told.recv().unwrap();
            // Waits for the reader to leave; the reader waits for this thread's mutex.
            let _write = RwLockUpgradableReadGuard::upgrade(upgradable);
            unreachable!("a deadlocked thread went on");
        })
        .unwrap();
    std::thread::Builder::new()
        .name("upgrade-deadlock-reader".into())
        .spawn(move || {
            reader_told.recv().unwrap();
            let _read = lock.read();
            tell_upgrader.send(()).unwrap();
            let _mutex = mutex.lock();
            unreachable!("a deadlocked thread went on");
        })
        .unwrap();
    let found = wait_for_deadlock("upgrade-deadlock-");
    let modes: Vec<(Mode, Mode)> = found.threads.iter().map(|w| (w.mode, w.held_as)).collect();
    assert_eq!(found.threads.len(), 2, "{found}");
    assert!(modes.contains(&(Mode::Exclusive, Mode::Read)), "{found}");
    assert!(
        modes.contains(&(Mode::Exclusive, Mode::Exclusive)),
        "{found}"
    );
}

/// parking_lot#489: upgradable readers that upgrade, among plain readers. parking_lot's
/// detector reported the upgrade's wait as a cycle; these threads only ever wait for threads
/// that are not waiting for them, so no cycle may be reported while they run.
#[cfg(feature = "lock_api_05")]
#[test]
fn upgrades_among_readers_are_never_reported_as_deadlocks() {
    use futexkit::parking_lot::{RwLock as PlRwLock, RwLockUpgradableReadGuard};
    use std::sync::atomic::{AtomicBool, Ordering};
    let lock = Arc::new(PlRwLock::new(0u64));
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..4 {
        let (lock, done) = (Arc::clone(&lock), Arc::clone(&done));
        let upgrader = i % 2 == 0;
        threads.push(
            std::thread::Builder::new()
                .name(format!("pl489-{i}"))
                .spawn(move || {
                    for _ in 0..3_000 {
                        if upgrader {
                            let read = lock.upgradable_read();
                            let mut write = RwLockUpgradableReadGuard::upgrade(read);
                            *write += 1;
                        } else {
                            let value = *lock.read();
                            std::hint::black_box(value);
                        }
                    }
                    done.store(true, Ordering::Relaxed);
                })
                .unwrap(),
        );
    }
    let mut checks = 0;
    while !done.load(Ordering::Relaxed) || checks == 0 {
        let found = deadlocks_of("pl489-");
        assert!(found.is_empty(), "{}", found[0]);
        checks += 1;
    }
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(*lock.read(), 2 * 3_000);
}

/// parking_lot#490's case: a thread asleep in an upgrade, waiting for a reader that waits for
/// nothing futexkit knows (a channel). No cycle: the upgrade waits for the reader, and the
/// reader for nobody.
#[cfg(feature = "lock_api_05")]
#[test]
fn an_upgrade_waiting_for_a_busy_reader_is_no_deadlock() {
    use futexkit::parking_lot::{RwLock as PlRwLock, RwLockUpgradableReadGuard};
    let lock = Arc::new(PlRwLock::new(0u64));
    let (reading, read_taken) = mpsc::channel();
    let (finish, finished) = mpsc::channel::<()>();
    let reader = {
        let lock = Arc::clone(&lock);
        std::thread::Builder::new()
            .name("pl490-reader".into())
            .spawn(move || {
                let _read = lock.read();
                reading.send(()).unwrap();
                finished.recv().unwrap();
            })
            .unwrap()
    };
    read_taken.recv().unwrap();
    let upgrader = {
        let lock = Arc::clone(&lock);
        let thread = std::thread::Builder::new().name("pl490-upgrader".into());
        // Returns once the upgrader is asleep in the upgrade.
        futexkit_support::blocked::spawn_blocked_by(thread, move || {
            let read = lock.upgradable_read();
            *RwLockUpgradableReadGuard::upgrade(read) += 1;
        })
    };
    assert!(deadlocks_of("pl490-").is_empty());
    finish.send(()).unwrap();
    reader.join().unwrap();
    upgrader.join().unwrap();
    assert_eq!(*lock.read(), 1);
}

/// A look (`Debug`) that takes a shared mutex whose owner died, and releases it keeping the
/// death, leaves no hold of it recorded: locks taken later are not ordered after it.
#[test]
fn a_look_at_a_shared_mutex_whose_owner_died_leaves_no_hold_behind() {
    use futexkit::shared::{LockError, SharedMutex};
    // SAFETY: leaked in a Box before its first lock, never moved.
    let looked: &'static SharedMutex<u32> = Box::leak(Box::new(unsafe { SharedMutex::new(5) }));
    let other: &'static Mutex<u32> = Box::leak(Box::new(Mutex::new(0)));
    // The holder exits holding it: the kernel marks the owner dead.
    std::thread::spawn(move || std::mem::forget(looked.lock().unwrap()))
        .join()
        .unwrap();
    let text = format!("{looked:?}");
    assert!(text.contains("owner_died"), "{text}");
    // Had the look left a hold recorded, this would order `looked` before `other`...
    drop(other.lock().unwrap());
    // ...and this, the other way round, would be reported as an inversion.
    let (first, then) = std::thread::spawn(move || {
        let (_other, first) = (other.lock().unwrap(), here());
        let (taken, then) = (looked.lock(), here());
        assert!(matches!(taken, Err(LockError::OwnerDied(_))));
        (first, then)
    })
    .join()
    .unwrap();
    assert!(violations_at(first, then).is_empty());
}

/// A shared RwLock's `try_write` leaves no hold of its writer's word recorded once unlocked.
/// That word is a `RawSharedMutex` at the lock's first byte (the documented layout), which a
/// peer may lock as one: had the hold stayed, the other lock this thread takes next would be
/// ordered after the word, and a thread taking the other lock and then the word would be
/// reported as an inversion.
#[test]
fn a_shared_try_write_leaves_no_hold_behind() {
    use futexkit::raw::{RawSharedMutex, RawSharedRwLock};
    // SAFETY: leaked in a Box before its first lock, never moved.
    let lock: &'static RawSharedRwLock = Box::leak(Box::new(unsafe { RawSharedRwLock::new() }));
    // SAFETY: the writer's word, a RawSharedMutex, opens the lock's memory, which is leaked.
    let writer_word: &'static RawSharedMutex =
        unsafe { RawSharedMutex::from_ptr((lock as *const RawSharedRwLock).cast()) };
    let other: &'static Mutex<u32> = Box::leak(Box::new(Mutex::new(0)));
    std::thread::spawn(move || {
        lock.try_write().unwrap();
        // SAFETY: taken just above.
        unsafe { lock.write_unlock() };
        drop(other.lock().unwrap());
    })
    .join()
    .unwrap();
    let (first, then) = std::thread::spawn(move || {
        let (_other, first) = (other.lock().unwrap(), here());
        let (taken, then) = (writer_word.lock(), here());
        taken.unwrap();
        // SAFETY: taken just above.
        unsafe { writer_word.unlock() };
        (first, then)
    })
    .join()
    .unwrap();
    assert!(violations_at(first, then).is_empty());
}
