//! `futexkit::sync` names every stable item of `std::sync`: one program, written against a
//! module path, compiled and run through `futexkit::sync` and through `std::sync`. Also the
//! switch as a user makes it (`use futexkit::sync;` where `use std::sync;` stood), and the
//! optional trait impls (`serde`, `lock_api` features).
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]
#![allow(deprecated)] // ONCE_INIT is deprecated in std, and named here because it is stable.

/// Every stable item of `std::sync` as of the toolchain CI runs (1.95), used through `$sync`.
macro_rules! every_item {
    ($($sync:ident)::+) => {
        use $($sync)::+ as sync;
        use std::time::Duration;

        pub fn run() -> u64 {
            // Arc, Weak
            let arc = sync::Arc::new(1u64);
            let weak: sync::Weak<u64> = sync::Arc::downgrade(&arc);
            // Mutex, MutexGuard, LockResult, PoisonError, TryLockError, TryLockResult
            let mutex = sync::Mutex::new(0u64);
            {
                let mut guard: sync::MutexGuard<'_, u64> = mutex.lock().unwrap();
                *guard += *weak.upgrade().unwrap();
            }
            let tried: sync::TryLockResult<sync::MutexGuard<'_, u64>> = mutex.try_lock();
            drop(tried);
            let result: sync::LockResult<sync::MutexGuard<'_, u64>> = mutex.lock();
            let err: Option<sync::PoisonError<u8>> = None;
            let try_err: Option<sync::TryLockError<u8>> = None;
            drop((result, err, try_err));
            // Condvar, WaitTimeoutResult
            let condvar = sync::Condvar::new();
            let (guard, timeout): (_, sync::WaitTimeoutResult) = condvar
                .wait_timeout(mutex.lock().unwrap(), Duration::from_millis(1))
                .unwrap();
            assert!(timeout.timed_out());
            drop(guard);
            condvar.notify_all();
            // RwLock, RwLockReadGuard, RwLockWriteGuard
            let rwlock = sync::RwLock::new(2u64);
            {
                let mut w: sync::RwLockWriteGuard<'_, u64> = rwlock.write().unwrap();
                *w += 1;
            }
            let r: sync::RwLockReadGuard<'_, u64> = rwlock.read().unwrap();
            let read = *r;
            drop(r);
            // Barrier, BarrierWaitResult
            let barrier = sync::Barrier::new(1);
            let leader: sync::BarrierWaitResult = barrier.wait();
            assert!(leader.is_leader());
            // Once, OnceState, ONCE_INIT
            static ONCE: sync::Once = sync::ONCE_INIT;
            ONCE.call_once_force(|state: &sync::OnceState| assert!(!state.is_poisoned()));
            // OnceLock, LazyLock
            static CELL: sync::OnceLock<u64> = sync::OnceLock::new();
            static LAZY: sync::LazyLock<u64> = sync::LazyLock::new(|| 4);
            // mpsc, atomic
            let (tx, rx) = sync::mpsc::channel();
            tx.send(*CELL.get_or_init(|| 5)).unwrap();
            let counter = sync::atomic::AtomicU64::new(*LAZY);
            counter.fetch_add(rx.recv().unwrap(), sync::atomic::Ordering::Relaxed);
            let total = *mutex.lock().unwrap();
            total + read + counter.load(sync::atomic::Ordering::Relaxed)
        }
    };
}

mod through_futexkit {
    every_item!(futexkit::sync);
}

mod through_std {
    every_item!(std::sync);
}

#[test]
fn every_item_of_std_sync_is_in_futexkit_sync() {
    assert_eq!(through_std::run(), 1 + 3 + 9);
    assert_eq!(through_futexkit::run(), through_std::run());
}

/// Code written for `std::sync` (a work queue with a pool of readers of shared config),
/// switched by its `use` line alone.
mod written_for_std {
    use futexkit::sync;

    use std::collections::VecDeque;
    use std::thread;

    pub fn run() -> u64 {
        let config = sync::Arc::new(sync::RwLock::new(10u64));
        let queue = sync::Arc::new((sync::Mutex::new(VecDeque::new()), sync::Condvar::new()));
        let done = sync::Arc::new(sync::atomic::AtomicU64::new(0));
        let start = sync::Arc::new(sync::Barrier::new(4));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (config, queue, done, start) = (
                    sync::Arc::clone(&config),
                    sync::Arc::clone(&queue),
                    sync::Arc::clone(&done),
                    sync::Arc::clone(&start),
                );
                thread::spawn(move || {
                    start.wait();
                    loop {
                        let (lock, ready) = &*queue;
                        let mut items = ready
                            .wait_while(lock.lock().unwrap(), |q| q.is_empty())
                            .unwrap();
                        match items.pop_front() {
                            Some(0) | None => return,
                            Some(n) => {
                                drop(items);
                                let scale = *config.read().unwrap();
                                done.fetch_add(n * scale, sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        start.wait();
        let (lock, ready) = &*queue;
        for n in 1..=100u64 {
            lock.lock().unwrap().push_back(n);
            ready.notify_one();
        }
        for _ in 0..3 {
            lock.lock().unwrap().push_back(0);
        }
        ready.notify_all();
        for w in workers {
            w.join().unwrap();
        }
        done.load(sync::atomic::Ordering::Relaxed)
    }
}

#[test]
fn code_written_for_std_sync_runs_unchanged() {
    assert_eq!(written_for_std::run(), 50_500);
}

#[cfg(feature = "serde")]
#[test]
fn serde_derives_over_lock_fields() {
    use futexkit::sync::{Mutex, RwLock};

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Stats {
        hits: Mutex<u64>,
        names: RwLock<Vec<String>>,
    }
    let stats = Stats {
        hits: Mutex::new(3),
        names: RwLock::new(vec!["a".into()]),
    };
    let json = serde_json::to_string(&stats).unwrap();
    assert_eq!(json, r#"{"hits":3,"names":["a"]}"#);
    let back: Stats = serde_json::from_str(&json).unwrap();
    assert_eq!(*back.hits.lock().unwrap(), 3);
    assert_eq!(*back.names.read().unwrap(), vec!["a".to_string()]);

    let poisoned = std::sync::Arc::new(Mutex::new(1u8));
    {
        let poisoned = std::sync::Arc::clone(&poisoned);
        let _ = std::thread::spawn(move || {
            let _g = poisoned.lock().unwrap();
            panic!("poisoning on purpose");
        })
        .join();
    }
    let err = serde_json::to_string(&*poisoned).unwrap_err();
    assert!(err.to_string().contains("poisoned"), "{err}");
}

#[cfg(feature = "lock_api")]
#[test]
fn lock_api_wrappers_over_the_raw_locks() {
    use std::time::Duration;

    type Mutex<T> = lock_api::Mutex<futexkit::RawMutex, T>;
    type RwLock<T> = lock_api::RwLock<futexkit::RawRwLock, T>;

    let m = Mutex::new(1);
    *m.lock() += 1;
    assert!(m.try_lock_for(Duration::from_millis(1)).is_some());
    let rw = RwLock::new(2);
    {
        let r1 = rw.read();
        let r2 = rw.try_read().unwrap();
        assert_eq!(*r1 + *r2, 4);
        assert!(rw.try_write_for(Duration::from_millis(1)).is_none());
    }
    let w = rw.write();
    let r = lock_api::RwLockWriteGuard::downgrade(w);
    assert_eq!(*r, 2);
    assert!(rw.try_write().is_none());
    drop(r);
    assert!(rw.try_write_until(std::time::Instant::now()).is_some());
}
