//! The PI mutex's user-space half under a model checker (`--cfg futexkit_loom` or
//! `--cfg futexkit_shuttle`; see `tests/model/mod.rs`), over the emulated kernel PI calls
//! (`src/futex/sys/model.rs`): one holder at a time, and an unlock that finds threads queued
//! hands the lock to one of them (an unlock that cleared the word instead would leave the
//! queued thread asleep: the checker's deadlock report).
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::raw::RawPiMutex;
use model::atomic::{AtomicUsize, Ordering};
use model::{check, in_threads, sized, Arc};

type Shared = (RawPiMutex, AtomicUsize, AtomicUsize);

/// `threads` threads each take the lock `rounds` times, count themselves in while they hold
/// it (nobody else may be in) and bump a counter by a relaxed load and store, which loses
/// counts unless each unlock happens before the next lock.
fn one_holder_at_a_time(threads: usize, rounds: usize) {
    let shared = Arc::new((
        RawPiMutex::new().unwrap(),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ));
    let work = (0..threads)
        .map(|_| {
            Box::new(move |(lock, inside, count): &Shared| {
                for _ in 0..rounds {
                    lock.lock();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    // SAFETY: this thread holds the lock.
                    unsafe { lock.unlock() };
                }
            }) as Box<dyn FnOnce(&_) + Send>
        })
        .collect();
    in_threads(&shared, work);
    assert!(!shared.0.is_locked());
    assert_eq!(
        shared.2.load(Ordering::Relaxed),
        threads * rounds,
        "a lost count"
    );
}

#[test]
fn two_threads() {
    let (threads, rounds) = sized((2, 2), (2, 6));
    check(3, move || one_holder_at_a_time(threads, rounds));
}

#[test]
fn three_threads() {
    let (threads, rounds) = sized((3, 1), (5, 3));
    check(2, move || one_holder_at_a_time(threads, rounds));
}

/// A try-lock racing a holder and a queued waiter: it takes only a free word.
#[test]
fn try_lock_takes_only_a_free_lock() {
    check(3, || {
        let shared = Arc::new((RawPiMutex::new().unwrap(), AtomicUsize::new(0)));
        let holder = |(lock, inside): &(RawPiMutex, AtomicUsize)| {
            lock.lock();
            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
            inside.fetch_sub(1, Ordering::SeqCst);
            // SAFETY: this thread holds the lock.
            unsafe { lock.unlock() };
        };
        let trier = |(lock, inside): &(RawPiMutex, AtomicUsize)| {
            if lock.try_lock() {
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                inside.fetch_sub(1, Ordering::SeqCst);
                // SAFETY: this thread holds the lock.
                unsafe { lock.unlock() };
            }
        };
        let work: Vec<model::Job<(RawPiMutex, AtomicUsize)>> =
            vec![Box::new(holder), Box::new(holder), Box::new(trier)];
        in_threads(&shared, work);
        assert!(!shared.0.is_locked());
    });
}
