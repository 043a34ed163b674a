//! futexkit::sync::nonpoison against std's nightly `nonpoison` contract: no poisoning, guards
//! returned directly, `WouldBlock` from the try-locks, the Condvar's `&mut` guard waits.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use futexkit::sync::nonpoison::{Condvar, Mutex, RwLock, RwLockWriteGuard, WouldBlock};

#[test]
fn a_panic_while_locked_leaves_the_data_and_no_poison() {
    let m = Arc::new(Mutex::new(vec![1]));
    let m2 = Arc::clone(&m);
    let panicked = thread::spawn(move || {
        let mut guard = m2.lock();
        guard.push(2);
        panic!("panicking on purpose while the lock is held");
    })
    .join();
    assert!(panicked.is_err());
    assert_eq!(
        *m.lock(),
        vec![1, 2],
        "the data as the panicking thread left it"
    );

    let lock = Arc::new(RwLock::new(0));
    let lock2 = Arc::clone(&lock);
    let _ = thread::spawn(move || {
        *lock2.write() = 5;
        panic!("panicking on purpose while writing");
    })
    .join();
    assert_eq!(*lock.read(), 5);
    *lock.write() += 1;
    assert_eq!(Arc::try_unwrap(lock).unwrap().into_inner(), 6);
}

#[test]
fn try_locks_would_block_while_held() {
    let m = Mutex::new(0);
    let guard = m.lock();
    assert_eq!(m.try_lock().err(), Some(WouldBlock));
    assert_eq!(
        m.try_lock_for(Duration::from_millis(5)).err(),
        Some(WouldBlock)
    );
    assert_eq!(
        WouldBlock.to_string(),
        "try_lock failed because the operation would block"
    );
    assert_eq!(format!("{m:?}"), r#"Mutex { data: "<locked>", .. }"#);
    drop(guard);
    assert_eq!(format!("{m:?}"), "Mutex { data: 0, .. }");

    let lock = RwLock::new(1);
    let reader = lock.read();
    let second = lock.try_read().expect("readers share the lock");
    assert_eq!(lock.try_write().err(), Some(WouldBlock));
    assert_eq!(
        lock.try_write_for(Duration::from_millis(5)).err(),
        Some(WouldBlock)
    );
    assert_eq!(format!("{lock:?}"), "RwLock { data: 1, .. }");
    drop((reader, second));
    let writer = lock.write();
    assert_eq!(lock.try_read().err(), Some(WouldBlock));
    assert_eq!(format!("{lock:?}"), "RwLock { data: <locked>, .. }");
    let reader = RwLockWriteGuard::downgrade(writer);
    assert!(lock.try_read().is_ok(), "a downgraded lock admits readers");
    assert_eq!(lock.try_write().err(), Some(WouldBlock));
    drop(reader);
}

#[test]
fn get_cloned_set_and_replace() {
    let m = Mutex::new(String::from("a"));
    assert_eq!(m.get_cloned(), "a");
    m.set(String::from("b"));
    assert_eq!(m.replace(String::from("c")), "b");
    let mut m = m;
    m.get_mut().push('!');
    assert_eq!(m.into_inner(), "c!");

    let lock = RwLock::new(1);
    lock.set(2);
    assert_eq!(lock.replace(3), 2);
    assert_eq!(lock.get_cloned(), 3);
}

#[test]
fn condvar_waits_with_a_mut_guard() {
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let producer = {
        let pair = Arc::clone(&pair);
        thread::spawn(move || {
            for _ in 0..100 {
                let (lock, changed) = &*pair;
                *lock.lock() += 1;
                changed.notify_all();
            }
        })
    };
    let (lock, changed) = &*pair;
    let mut count = lock.lock();
    changed.wait_while(&mut count, |n| *n < 100);
    assert_eq!(*count, 100);
    drop(count);
    producer.join().unwrap();

    // Timed waits: nobody notifies, so the time runs out, and the guard is held again.
    let mut count = lock.lock();
    let _ = changed.wait_timeout(&mut count, Duration::from_millis(5));
    *count += 1;
    let result = changed.wait_timeout_while(&mut count, Duration::from_millis(5), |n| *n < 1000);
    assert!(result.timed_out());
    assert_eq!(*count, 101);
    let result = changed.wait_timeout_while(&mut count, Duration::from_millis(5), |_| false);
    assert!(!result.timed_out());
}

#[test]
fn a_condvar_wait_releases_the_mutex_meanwhile() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let (lock, ready) = &*pair;
    let mut flag = lock.lock();
    let setter = {
        let pair = Arc::clone(&pair);
        thread::spawn(move || {
            let (lock, ready) = &*pair;
            *lock.lock() = true; // only possible while the waiter sleeps
            ready.notify_one();
        })
    };
    while !*flag {
        ready.wait(&mut flag);
    }
    drop(flag);
    setter.join().unwrap();
}
