//! futexkit::profile (feature `profile`): a hot lock's call site tops the profile over a cold
//! one's; a wait the test measures itself is what the profile reports (within the factor
//! stated below); nothing is recorded at rate 0; every kind of lock is named; folded stacks
//! name the caller. The tests share one process-wide profile, so they run one at a time.
#![cfg(all(feature = "profile", not(any(futexkit_loom, futexkit_shuttle))))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futexkit::profile::{self, LockKind};
use futexkit::sync::{Mutex, RwLock};
use futexkit_support::blocked::spawn_blocked;

/// One test at a time: the profile is the process's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    profile::reset();
    guard
}

#[inline(never)]
fn take_hot(hot: &Mutex<u64>) {
    let mut value = hot.lock().unwrap();
    *value += 1;
    // Give the CPU away while holding it: the others then find it held, however the machine
    // schedules them.
    std::thread::yield_now();
}

#[inline(never)]
fn take_cold(cold: &Mutex<u64>) {
    *cold.lock().unwrap() += 1;
}

/// Runs `f` in a thread that is asleep in a futex call (waiting for a lock held here) when this
/// returns, with the time `f` itself took measured around its call.
fn spawn_blocked_waiter(f: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<Duration> {
    spawn_blocked(move || {
        let start = Instant::now();
        f();
        start.elapsed()
    })
}

#[test]
fn the_hot_lock_tops_the_profile() {
    let _one = exclusive();
    profile::set_rate(1);
    let hot = Arc::new(Mutex::new(0));
    let cold = Arc::new(Mutex::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (hot, cold) = (Arc::clone(&hot), Arc::clone(&cold));
            std::thread::spawn(move || {
                for i in 0..2_000 {
                    take_hot(&hot);
                    if i % 100 == 0 {
                        take_cold(&cold);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    profile::set_rate(0);
    let snapshot = profile::snapshot();
    let top = snapshot
        .sites()
        .first()
        .expect("four threads on one lock contend");
    let caller = top.caller().expect("a caller frame");
    assert!(caller.function.contains("take_hot"), "{snapshot}");
    assert_eq!(top.kind, LockKind::Mutex);
    assert!(snapshot.to_string().contains("take_hot"), "{snapshot}");
}

/// One waiter, asleep until the holder lets go: the profile's wait is the waiter's own
/// measured time in `lock()` less its fast path and the stack capture, so it lies between half
/// that time and that time (the factor stated: 2).
#[test]
fn a_measured_wait_is_what_the_profile_reports() {
    let _one = exclusive();
    profile::set_rate(1);
    let lock = Arc::new(Mutex::new(()));
    let held = lock.lock().unwrap();
    let waiter = {
        let lock = Arc::clone(&lock);
        spawn_blocked_waiter(move || drop(lock.lock().unwrap()))
    };
    std::thread::sleep(Duration::from_millis(50));
    drop(held);
    let measured = waiter.join().unwrap();
    profile::set_rate(0);
    let snapshot = profile::snapshot();
    let site = snapshot
        .sites()
        .iter()
        .find(|site| {
            site.frames.iter().any(|f| {
                f.function
                    .contains("a_measured_wait_is_what_the_profile_reports")
            })
        })
        .unwrap_or_else(|| panic!("the waiter's site: {snapshot}"));
    assert_eq!(site.events, 1);
    assert!(
        site.total_wait <= measured && site.total_wait * 2 >= measured,
        "profiled {:?}, measured {measured:?}",
        site.total_wait
    );
    assert_eq!(site.max_wait, site.total_wait);
}

#[test]
fn nothing_is_recorded_at_rate_zero() {
    let _one = exclusive();
    profile::set_rate(0);
    let lock = Arc::new(Mutex::new(()));
    let held = lock.lock().unwrap();
    let waiter = {
        let lock = Arc::clone(&lock);
        spawn_blocked_waiter(move || drop(lock.lock().unwrap()))
    };
    drop(held);
    waiter.join().unwrap();
    assert!(profile::snapshot().sites().is_empty());
    assert_eq!(profile::rate(), 0);
}

/// Read and write waits of a RwLock, and a shared lock's wait, each under its own kind; the
/// folded stacks name each caller and end in a number.
#[test]
fn rwlocks_and_shared_locks_are_profiled_too() {
    let _one = exclusive();
    profile::set_rate(1);
    let rwlock = Arc::new(RwLock::new(0));
    let writer_held = rwlock.write().unwrap();
    let reader = {
        let rwlock = Arc::clone(&rwlock);
        spawn_blocked_waiter(move || drop(rwlock.read().unwrap()))
    };
    drop(writer_held);
    reader.join().unwrap();
    let reader_held = rwlock.read().unwrap();
    let writer = {
        let rwlock = Arc::clone(&rwlock);
        spawn_blocked_waiter(move || drop(rwlock.write().unwrap()))
    };
    drop(reader_held);
    writer.join().unwrap();
    let region = Arc::new(
        futexkit::shared::Region::builder()
            .mutex("m", 0u32)
            .build()
            .unwrap(),
    );
    let shared_held = region.mutex::<u32>("m").unwrap().lock().unwrap();
    let shared_waiter = {
        let region = Arc::clone(&region);
        spawn_blocked_waiter(move || drop(region.mutex::<u32>("m").unwrap().lock().unwrap()))
    };
    drop(shared_held);
    shared_waiter.join().unwrap();
    profile::set_rate(0);
    let snapshot = profile::snapshot();
    for kind in [
        LockKind::RwLockRead,
        LockKind::RwLockWrite,
        LockKind::Shared,
    ] {
        assert!(
            snapshot.sites().iter().any(|site| site.kind == kind),
            "no {kind} site: {snapshot}"
        );
    }
    let folded = snapshot.folded();
    assert_eq!(folded.lines().count(), snapshot.sites().len());
    for line in folded.lines() {
        let (stack, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<u128>().is_ok(), "{line}");
        assert!(
            stack.contains("rwlocks_and_shared_locks_are_profiled_too"),
            "{line}"
        );
    }
}
