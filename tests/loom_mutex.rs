//! loom models of the Mutex: mutual exclusion (a split read-modify-write inside the lock loses
//! no update), no lost wakeup (loom reports a deadlock), on the contended, hand-off
//! (STARVATION_LIMIT is zero under loom) and timed paths.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use std::time::Duration;

use futexkit::{Mutex, RawMutex};

fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// Increments `counter` with a separate load and store: only mutual exclusion keeps it exact.
fn locked_increment(raw: &RawMutex, counter: &AtomicU32) {
    raw.lock();
    let v = counter.load(Ordering::Relaxed);
    counter.store(v + 1, Ordering::Relaxed);
    // SAFETY: locked just above.
    unsafe { raw.unlock() };
}

#[test]
fn two_threads_exclude_each_other() {
    model(3, || {
        let raw = Arc::new(RawMutex::new());
        let counter = Arc::new(AtomicU32::new(0));
        let t = {
            let (raw, counter) = (Arc::clone(&raw), Arc::clone(&counter));
            loom::thread::spawn(move || {
                locked_increment(&raw, &counter);
                locked_increment(&raw, &counter);
            })
        };
        locked_increment(&raw, &counter);
        locked_increment(&raw, &counter);
        t.join().unwrap();
        assert_eq!(counter.load(Ordering::Relaxed), 4);
        assert!(!raw.is_locked());
    });
}

#[test]
fn three_threads_exclude_each_other() {
    model(2, || {
        let raw = Arc::new(RawMutex::new());
        let counter = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (raw, counter) = (Arc::clone(&raw), Arc::clone(&counter));
                loom::thread::spawn(move || locked_increment(&raw, &counter))
            })
            .collect();
        locked_increment(&raw, &counter);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 3);
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
