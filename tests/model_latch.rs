//! The latch's protocol under a model checker (`--cfg futexkit_loom` or `--cfg futexkit_shuttle`;
//! see `tests/model/mod.rs`): the last count-down releases every waiter (a lost wakeup shows as
//! the checker's deadlock report), what the counting threads wrote is seen after the wait, and
//! a timed wait racing the last count-down ends either way.
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::raw::RawLatch;
use model::atomic::{AtomicUsize, Ordering};
use model::{check, in_threads, Arc, FAR};

/// `counters` threads each write a unit and count down; `waiters` threads wait and then must
/// see every unit.
fn counters_and_waiters(counters: usize, waiters: usize, timed: bool) {
    let shared = Arc::new((RawLatch::new(counters as u32), AtomicUsize::new(0)));
    let mut work: Vec<model::Job<(RawLatch, AtomicUsize)>> = Vec::new();
    for _ in 0..counters {
        work.push(Box::new(|(latch, units): &(RawLatch, AtomicUsize)| {
            units.fetch_add(1, Ordering::Relaxed);
            latch.count_down();
        }));
    }
    for _ in 0..waiters {
        work.push(Box::new(move |(latch, units): &(RawLatch, AtomicUsize)| {
            let deadline = timed.then(|| futexkit::futex::Deadline::after(FAR));
            assert!(latch.wait(deadline), "opened before FAR");
            assert_eq!(units.load(Ordering::Relaxed), counters);
        }));
    }
    in_threads(&shared, work);
}

#[test]
fn the_last_count_down_releases_every_waiter() {
    let (counters, waiters) = if cfg!(futexkit_loom) { (1, 2) } else { (3, 4) };
    check(3, move || counters_and_waiters(counters, waiters, false));
}

#[test]
fn two_count_downs_race_a_waiter() {
    let waiters = if cfg!(futexkit_loom) { 1 } else { 3 };
    check(3, move || counters_and_waiters(2, waiters, false));
}

#[test]
fn a_timed_wait_races_the_last_count_down() {
    check(3, || counters_and_waiters(1, 1, true));
}
