//! The Condvar's protocol under a model checker (`--cfg futexkit_loom` or `--cfg futexkit_shuttle`;
//! see `tests/model/mod.rs`): a notify that follows a change of the condition is never lost
//! (`notify_one`, `notify_all`, and the notify that skips its syscall because nobody sleeps), a
//! timed wait racing a notify ends either way with the lock held, and one Condvar serves two
//! mutexes in turn. A lost wakeup shows up as the checker's deadlock report.
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::{Condvar, Mutex};
use model::{check, in_threads, Arc, FAR};

/// `waiters` threads each wait for a unit and take it; the caller adds all the units and
/// notifies with `notify_all`, or adds them one by one with a `notify_one` after each, as
/// `one_by_one` says.
fn waiters_and_a_notifier(waiters: usize, one_by_one: bool) {
    let shared = Arc::new((Mutex::new(0usize), Condvar::new()));
    let mut work: Vec<model::Job<(Mutex<usize>, Condvar)>> = vec![Box::new(move |(lock, cv)| {
        if one_by_one {
            for _ in 0..waiters {
                *lock.lock().unwrap() += 1;
                cv.notify_one();
            }
        } else {
            *lock.lock().unwrap() = waiters;
            cv.notify_all();
        }
    })];
    for _ in 0..waiters {
        work.push(Box::new(move |(lock, cv)| {
            // Each waiter takes one unit: a notify_one per unit added must let every waiter
            // through (a notify_all adds them all at once).
            let mut units = cv.wait_while(lock.lock().unwrap(), |n| *n == 0).unwrap();
            *units -= 1;
        }));
    }
    in_threads(&shared, work);
}

#[test]
fn notify_one_reaches_a_waiter() {
    check(3, || waiters_and_a_notifier(1, true));
}

#[test]
fn notify_all_reaches_every_waiter() {
    let waiters = if cfg!(futexkit_loom) { 2 } else { 6 };
    check(2, move || waiters_and_a_notifier(waiters, false));
}

#[test]
fn one_notify_one_per_change_reaches_every_waiter() {
    let waiters = if cfg!(futexkit_loom) { 2 } else { 5 };
    check(2, move || waiters_and_a_notifier(waiters, true));
}

/// A timed wait racing a notify: it returns with the lock held whether it timed out or was
/// notified, and then waits (untimed) until the flag is set, which must not hang either.
#[test]
fn timed_wait_racing_a_notify() {
    check(3, || {
        let shared = Arc::new((Mutex::new(false), Condvar::new()));
        in_threads(
            &shared,
            vec![
                Box::new(|(lock, cv)| {
                    let mut g = lock.lock().unwrap();
                    if !*g {
                        g = cv.wait_timeout(g, FAR).unwrap().0;
                    }
                    drop(cv.wait_while(g, |set| !*set).unwrap());
                }),
                Box::new(|(lock, cv)| {
                    *lock.lock().unwrap() = true;
                    cv.notify_one();
                }),
            ],
        );
    });
}

/// A `notify_one` with a timed and an untimed waiter asleep: a timed wait that reports a
/// timeout was not the one notified, so the notify reaches the other. Here the timed waiter,
/// when notified, passes a notify on, and otherwise leaves: if a timed waiter could take the
/// notify and still report a timeout, the untimed one would sleep for ever (the checker's
/// deadlock report).
#[test]
fn a_timed_wait_that_times_out_took_no_notify() {
    check(3, || {
        let shared = Arc::new((Mutex::new(false), Condvar::new()));
        in_threads(
            &shared,
            vec![
                Box::new(|(lock, cv)| {
                    *lock.lock().unwrap() = true;
                    cv.notify_one();
                }),
                Box::new(|(lock, cv)| {
                    let g = lock.lock().unwrap();
                    if !*g {
                        let (g, result) = cv.wait_timeout(g, FAR).unwrap();
                        drop(g);
                        if !result.timed_out() {
                            cv.notify_one();
                        }
                    }
                }),
                Box::new(|(lock, cv)| {
                    drop(cv.wait_while(lock.lock().unwrap(), |set| !*set).unwrap());
                }),
            ],
        );
    });
}

/// std's contract: one Condvar with one mutex, then another.
#[test]
fn one_condvar_with_two_mutexes_in_turn() {
    check(2, || {
        let shared = Arc::new((Mutex::new(false), Mutex::new(false), Condvar::new()));
        in_threads(
            &shared,
            vec![
                Box::new(|(a, b, cv)| {
                    drop(cv.wait_while(a.lock().unwrap(), |set| !*set).unwrap());
                    drop(cv.wait_while(b.lock().unwrap(), |set| !*set).unwrap());
                }),
                Box::new(|(a, b, cv)| {
                    *a.lock().unwrap() = true;
                    cv.notify_all();
                    *b.lock().unwrap() = true;
                    cv.notify_all();
                }),
            ],
        );
    });
}
