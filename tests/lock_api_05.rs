//! lock_api 0.5's wrappers over futexkit's raw locks and condition variable (feature
//! `lock_api_05`): parking_lot 0.13's API, with futexkit's protocols underneath.
#![cfg(all(feature = "lock_api_05", not(any(futexkit_loom, futexkit_shuttle))))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use futexkit::raw::{RawCondvar, RawMutex, RawRwLock};
use lock_api_05 as lock_api;

type Mutex<T> = lock_api::Mutex<RawMutex, T>;
type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;
type RwLock<T> = lock_api::RwLock<RawRwLock, T>;
type Condvar = lock_api::Condvar<RawCondvar>;

/// A bound on every wait in these tests: reaching it means a hang, which is a failure.
const HANG: Duration = Duration::from_secs(20);

#[test]
fn mutex_locks_try_locks_and_times_out() {
    let m = Mutex::new(1);
    *m.lock() += 1;
    assert_eq!(*m.try_lock().unwrap(), 2);
    let held = m.lock();
    assert!(m.is_locked());
    assert!(m.try_lock().is_none());
    let start = Instant::now();
    assert!(m.try_lock_for(Duration::from_millis(20)).is_none());
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert!(m.try_lock_until(Instant::now()).is_none());
    drop(held);
    assert!(m.try_lock_for(Duration::from_millis(1)).is_some());
    assert!(!m.is_locked());
}

static STATIC: Mutex<u32> = Mutex::new(7);

#[test]
fn a_static_mutex_needs_no_constructor_call() {
    *STATIC.lock() += 1;
    assert_eq!(*STATIC.lock(), 8);
}

#[test]
fn fair_unlock_and_bump_keep_mutual_exclusion() {
    let m = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                for n in 0..2_000u64 {
                    let mut guard = m.lock();
                    let v = *guard;
                    *guard = v + 1;
                    match (i + n) % 3 {
                        0 => MutexGuard::unlock_fair(guard),
                        1 => {
                            MutexGuard::bump(&mut guard);
                            *guard += 1;
                            *guard -= 1;
                        }
                        _ => drop(guard),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock(), 8_000);
}

#[test]
fn condvar_waits_for_a_notify_and_times_out() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let waiter = {
        let pair = Arc::clone(&pair);
        thread::spawn(move || {
            let (m, cv) = &*pair;
            let mut ready = m.lock();
            while !*ready {
                assert!(!cv.wait_for(&mut ready, HANG).timed_out(), "no notify came");
            }
        })
    };
    {
        let (m, cv) = &*pair;
        *m.lock() = true;
        cv.notify_one();
    }
    waiter.join().unwrap();

    let (m, cv) = &*pair;
    let mut guard = m.lock();
    let start = Instant::now();
    assert!(cv
        .wait_for(&mut guard, Duration::from_millis(20))
        .timed_out());
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert!(cv
        .wait_until(&mut guard, Instant::now() + Duration::from_millis(5))
        .timed_out());
    // The guard is held again after every wait.
    assert!(m.is_locked());
}

#[test]
fn condvar_notify_all_wakes_every_waiter_of_wait_while() {
    const WAITERS: usize = 4;
    let state = Arc::new((Mutex::new(0usize), Condvar::new()));
    let woken = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (state, woken, ready_tx) =
                (Arc::clone(&state), Arc::clone(&woken), ready_tx.clone());
            thread::spawn(move || {
                let (m, cv) = &*state;
                let mut generation = m.lock();
                ready_tx.send(()).unwrap();
                let result = cv.wait_while_for(&mut generation, |g| *g == 0, HANG);
                assert!(!result.timed_out(), "notify_all missed a waiter");
                woken.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for _ in 0..WAITERS {
        ready_rx.recv().unwrap();
    }
    {
        let (m, cv) = &*state;
        *m.lock() = 1;
        cv.notify_all();
    }
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(woken.load(Ordering::Relaxed), WAITERS);
}

#[test]
fn rwlock_reads_share_writes_exclude_and_downgrade() {
    let rw = RwLock::new(2);
    {
        let r1 = rw.read();
        let r2 = rw.try_read().unwrap();
        assert_eq!(*r1 + *r2, 4);
        assert!(rw.try_write().is_none());
        assert!(rw.try_write_for(Duration::from_millis(1)).is_none());
        assert!(rw.is_locked() && !rw.is_locked_exclusive());
    }
    let mut w = rw.write();
    *w = 3;
    assert!(rw.is_locked_exclusive());
    assert!(rw.try_read_for(Duration::from_millis(1)).is_none());
    let r = lock_api::RwLockWriteGuard::downgrade(w);
    assert_eq!(*r, 3);
    assert!(rw.try_write().is_none());
    assert!(rw.try_read_until(Instant::now()).is_some());
    drop(r);
    assert!(rw.try_write_until(Instant::now()).is_some());
}

#[test]
fn rwlock_under_readers_and_writers_loses_no_write() {
    let rw = Arc::new(RwLock::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let rw = Arc::clone(&rw);
            thread::spawn(move || {
                for _ in 0..2_000 {
                    if i % 2 == 0 {
                        *rw.write() += 1;
                    } else {
                        let seen = *rw.read();
                        assert!(seen <= 4_000);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*rw.read(), 4_000);
}
