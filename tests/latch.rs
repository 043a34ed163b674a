//! futexkit::sync::Latch: opens after its count, releases every waiter, times out while closed,
//! refuses a count-down past zero, and publishes what the counting threads did.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futexkit::sync::Latch;
use futexkit_support::blocked::spawn_blocked;

#[test]
fn the_last_count_down_releases_every_sleeping_waiter() {
    let latch = Arc::new(Latch::new(2));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let latch = Arc::clone(&latch);
            spawn_blocked(move || latch.wait())
        })
        .collect();
    latch.count_down();
    assert!(!latch.is_open());
    assert_eq!(latch.count(), 1);
    latch.count_down();
    for waiter in waiters {
        waiter.join().unwrap();
    }
    assert!(latch.is_open());
    latch.wait(); // open for good
}

#[test]
fn waits_time_out_while_closed() {
    let latch = Latch::new(1);
    assert!(!latch.wait_timeout(Duration::from_millis(10)));
    assert!(!latch.wait_until(Instant::now() + Duration::from_millis(10)));
    assert_eq!(format!("{latch:?}"), "Latch { count: 1 }");
    latch.count_down();
    assert!(latch.wait_timeout(Duration::ZERO));
    assert!(Latch::new(0).is_open());
}

#[test]
fn a_count_down_past_zero_panics() {
    let latch = Latch::new(1);
    latch.count_down();
    assert!(std::panic::catch_unwind(|| latch.count_down()).is_err());
    assert!(latch.is_open());
}

#[test]
fn workers_writes_are_seen_after_the_wait() {
    for _ in 0..200 {
        let done = Latch::new(4);
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for i in 1..=4 {
                let (done, total) = (&done, &total);
                s.spawn(move || {
                    total.fetch_add(i, Ordering::Relaxed);
                    done.count_down_and_wait();
                    assert_eq!(total.load(Ordering::Relaxed), 10);
                });
            }
            done.wait();
            assert_eq!(total.load(Ordering::Relaxed), 10);
        });
    }
}
