//! The semaphore's protocol under a model checker (`--cfg futexkit_loom` or
//! `--cfg futexkit_shuttle`; see `tests/model/mod.rs`): never more holders than permits, no lost
//! wakeup when a release races a waiter counting itself (the checker reports a deadlock), a
//! timed acquire racing a release either takes the permit or leaves it for the next, and
//! permits added from outside reach every waiter.
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::raw::RawSemaphore;
use model::atomic::{AtomicUsize, Ordering};
use model::{check, in_threads, sized, Arc, FAR};

/// `threads` threads each take a permit `rounds` times out of `permits`, count themselves in
/// while they hold it and check the count never passes `permits`; the permits all come back.
fn holders_never_exceed_permits(permits: u32, threads: usize, rounds: usize) {
    let shared = Arc::new((RawSemaphore::new(permits), AtomicUsize::new(0)));
    let work = (0..threads)
        .map(|_| {
            Box::new(move |(sem, inside): &(RawSemaphore, AtomicUsize)| {
                for _ in 0..rounds {
                    sem.acquire();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(
                        now <= permits as usize,
                        "{now} holders of {permits} permits"
                    );
                    inside.fetch_sub(1, Ordering::SeqCst);
                    sem.release(1);
                }
            }) as Box<dyn FnOnce(&_) + Send>
        })
        .collect();
    in_threads(&shared, work);
    assert_eq!(shared.0.available(), permits);
}

#[test]
fn one_permit_among_threads() {
    let (threads, rounds) = sized((2, 2), (4, 4));
    check(3, move || holders_never_exceed_permits(1, threads, rounds));
}

#[test]
fn two_permits_among_three_threads() {
    let (threads, rounds) = sized((3, 1), (6, 3));
    check(2, move || holders_never_exceed_permits(2, threads, rounds));
}

/// Waiters for permits that do not exist yet, and a thread that adds them in two releases:
/// every waiter gets one (a release's wake must reach a waiter that counted itself).
#[test]
fn added_permits_reach_every_waiter() {
    let waiters = if cfg!(futexkit_loom) { 2 } else { 5 };
    check(3, move || {
        let shared = Arc::new(RawSemaphore::new(0));
        let mut work: Vec<model::Job<RawSemaphore>> = vec![Box::new(move |sem: &RawSemaphore| {
            sem.release(1);
            sem.release(waiters as u32 - 1);
        })];
        for _ in 0..waiters {
            work.push(Box::new(|sem: &RawSemaphore| sem.acquire()));
        }
        in_threads(&shared, work);
        assert_eq!(shared.available(), 0);
    });
}

/// One permit, released once, passed between a timed and an untimed acquirer: the emulated
/// futex lets the timed one's sleeps end as timeouts at scheduling points, and a wake spent on
/// it must not leave the other asleep beside the free permit.
#[test]
fn a_timed_acquirer_never_strands_a_permit() {
    check(3, || {
        let shared = Arc::new(RawSemaphore::new(0));
        let work: Vec<model::Job<RawSemaphore>> = vec![
            Box::new(|sem: &RawSemaphore| sem.release(1)),
            Box::new(|sem: &RawSemaphore| {
                assert!(
                    sem.try_acquire_for(FAR),
                    "the permit comes round before FAR"
                );
                sem.release(1);
            }),
            Box::new(|sem: &RawSemaphore| {
                sem.acquire();
                sem.release(1);
            }),
        ];
        in_threads(&shared, work);
        assert_eq!(shared.available(), 1);
    });
}

/// An auto-reset event's shape: permits released up to 1. Two waiters, and a setter that sets
/// again only after a waiter acknowledged the last set: each set must reach a waiter even
/// though it adds a permit only when none is free.
#[test]
fn capped_releases_reach_every_waiter() {
    check(3, || {
        let shared = Arc::new((RawSemaphore::new(0), RawSemaphore::new(0)));
        let waiter = |(signal, ack): &(RawSemaphore, RawSemaphore)| {
            signal.acquire();
            ack.release(1);
        };
        let work: Vec<model::Job<(RawSemaphore, RawSemaphore)>> = vec![
            Box::new(|(signal, ack): &(RawSemaphore, RawSemaphore)| {
                for _ in 0..2 {
                    assert_eq!(signal.release_up_to(1, 1), 1, "the last set was consumed");
                    ack.acquire();
                }
            }),
            Box::new(waiter),
            Box::new(waiter),
        ];
        in_threads(&shared, work);
        assert_eq!(shared.0.available(), 0);
    });
}
