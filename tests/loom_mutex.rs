//! loom models of the Mutex: mutual exclusion (a split read-modify-write inside the lock loses
//! no update), no lost wakeup (loom reports a deadlock), on the contended, hand-off
//! (STARVATION_LIMIT is zero under loom) and timed paths.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use std::time::Duration;

use futexkit::{Condvar, Mutex, RawMutex};

include!("common/loom_models.rs");

#[test]
fn two_threads_exclude_each_other() {
    model(3, || {
        let (raw, count) = increments_in_threads(&[2, 2]);
        assert_eq!(count, 4);
        assert!(!raw.is_locked());
    });
}

#[test]
fn three_threads_exclude_each_other() {
    model(2, || {
        let (raw, count) = increments_in_threads(&[1, 1, 1]);
        assert_eq!(count, 3);
        assert!(!raw.is_locked());
    });
}

#[test]
fn timed_lock_against_a_holder() {
    model(3, || {
        let m = Arc::new(Mutex::new(0u32));
        let t = {
            let m = Arc::clone(&m);
            loom::thread::spawn(move || {
                if let Ok(mut g) = m.try_lock_for(Duration::from_millis(1)) {
                    *g += 1;
                }
            })
        };
        *m.lock().unwrap() += 10;
        t.join().unwrap();
        let v = *m.lock().unwrap();
        assert!(v == 10 || v == 11);
    });
}
