//! loom models of the Condvar: a notify after the condition changed is never lost, a broadcast
//! (wake one, move the rest onto the mutex word) lets every waiter through, and a timed wait
//! racing a notify ends either way with the lock held. A lost wakeup shows up as loom's
//! deadlock report.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use std::time::Duration;

use futexkit::{Condvar, Mutex, RawMutex};

include!("common/loom_models.rs");

#[test]
fn a_waiter_and_a_notifier() {
    model(3, || {
        let state = Arc::new((Mutex::new(false), Condvar::new()));
        let notifier = {
            let state = Arc::clone(&state);
            loom::thread::spawn(move || {
                *state.0.lock().unwrap() = true;
                state.1.notify_one();
            })
        };
        let (lock, cv) = &*state;
        let ready = cv
            .wait_while(lock.lock().unwrap(), |ready| !*ready)
            .unwrap();
        assert!(*ready);
        drop(ready);
        notifier.join().unwrap();
    });
}

#[test]
fn two_waiters_and_a_broadcast() {
    model(2, || {
        let state = broadcast_to_two_waiters();
        assert!(state.0.try_lock().is_ok());
    });
}

#[test]
fn a_timed_wait_against_a_notify() {
    model(3, || {
        let state = Arc::new((Mutex::new(0u32), Condvar::new()));
        let notifier = {
            let state = Arc::clone(&state);
            loom::thread::spawn(move || {
                *state.0.lock().unwrap() += 1;
                state.1.notify_all();
            })
        };
        let (lock, cv) = &*state;
        let (mut g, result) = cv
            .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(60), |n| *n == 0)
            .unwrap();
        // Either the notify came (the count moved) or the time ran out first.
        assert!(*g == 1 || result.timed_out());
        *g += 10;
        drop(g);
        notifier.join().unwrap();
        assert_eq!(*state.0.lock().unwrap(), 11);
    });
}
