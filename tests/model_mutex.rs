//! The Mutex's protocol under a model checker (`--cfg futexkit_loom` or `--cfg futexkit_shuttle`;
//! see `tests/model/mod.rs`): mutual exclusion (an increment split into a load and a store loses
//! nothing), no lost wakeup (the checker reports a deadlock), the fairness hand-off (a waiter
//! woken without the lock asks for it, and the unlock hands it over, as it ships: no clock is
//! involved), fair unlocks, and timed waiters beside hand-offs. The code checked is the shipped
//! code; only the futex and the spin bound are the checker's.
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::{Mutex, RawMutex};
use model::atomic::{AtomicUsize, Ordering};
use model::{check, in_threads, sized, Arc, FAR};

/// How a model thread takes and releases the lock.
#[derive(Clone, Copy)]
enum Locker {
    /// `lock`, then `unlock`.
    Plain,
    /// `lock`, then `unlock_fair` (a hand-off whenever an untimed sleeper is woken).
    Fair,
    /// `try_lock_for`, then `unlock_fair`; gives up only at a timeout, which the emulated futex
    /// may decide at any scheduling point.
    TimedFair,
}

/// One model thread per entry of `lockers`, each making `increments` locked increments of a
/// counter whose increment is a separate relaxed load and store (so only mutual exclusion, and
/// the lock's acquire and release orderings, keep it exact); a timed thread makes only the ones
/// it got the lock for. Asserts the total and that the lock ends free, not held in trust.
fn increments(lockers: Vec<Locker>, each: usize) {
    let untimed = lockers
        .iter()
        .filter(|l| !matches!(l, Locker::TimedFair))
        .count();
    let shared = Arc::new((RawMutex::new(), AtomicUsize::new(0), AtomicUsize::new(0)));
    let work = lockers
        .into_iter()
        .map(|locker| {
            Box::new(
                move |(raw, count, timed_taken): &(RawMutex, AtomicUsize, AtomicUsize)| {
                    for _ in 0..each {
                        match locker {
                            Locker::TimedFair => {
                                if !raw.try_lock_for(FAR) {
                                    continue;
                                }
                                timed_taken.fetch_add(1, Ordering::Relaxed);
                            }
                            Locker::Plain | Locker::Fair => raw.lock(),
                        }
                        let v = count.load(Ordering::Relaxed);
                        model::thread::yield_now();
                        count.store(v + 1, Ordering::Relaxed);
                        // SAFETY: taken just above.
                        unsafe {
                            match locker {
                                Locker::Plain => raw.unlock(),
                                Locker::Fair | Locker::TimedFair => raw.unlock_fair(),
                            }
                        }
                    }
                },
            ) as Box<dyn FnOnce(&(RawMutex, AtomicUsize, AtomicUsize)) + Send>
        })
        .collect();
    in_threads(&shared, work);
    let (raw, count, timed_taken) = &*shared;
    assert_eq!(
        count.load(Ordering::Relaxed),
        untimed * each + timed_taken.load(Ordering::Relaxed)
    );
    assert!(!raw.is_locked());
    assert!(raw.try_lock(), "the lock ends free, not held in trust");
}

#[test]
fn two_threads_contending_twice_each() {
    // A woken waiter that finds the lock taken asks for it, so unlocks both release (to a free
    // word or a woken thread) and hand off (to one that asked).
    let (threads, n) = sized((2, 2), (4, 4));
    check(3, move || increments(vec![Locker::Plain; threads], n));
}

#[test]
fn fair_unlocks_hand_off_to_every_sleeper() {
    let (threads, n) = sized((2, 2), (4, 4));
    check(3, move || increments(vec![Locker::Fair; threads], n));
}

#[test]
fn three_threads_contending() {
    let (threads, n) = sized((3, 1), (8, 2));
    check(2, move || increments(vec![Locker::Plain; threads], n));
}

/// Fair unlocks among three threads: each hand-off meets a third thread arriving, asleep, or
/// back from a wait that found the word changed (a hand-off written between its look and its
/// sleep), and still ends with the lock claimed and, at the end, free.
#[test]
fn three_threads_with_fair_unlocks() {
    let (threads, n) = sized((3, 1), (6, 2));
    check(2, move || increments(vec![Locker::Fair; threads], n));
}

/// Two waiters woken at once: a release wakes one sleeper, a thread that has not slept takes
/// the lock before that one runs, a newcomer marks it and sleeps, and the next release wakes a
/// second sleeper. The two ask in either order: the older takes the younger's place or claims
/// the lock handed to the younger, or the younger finds the older asking, or the lock handed
/// to it, and sleeps again. Every increment gets through and the lock ends free.
#[test]
fn two_waiters_woken_at_once() {
    check(3, || {
        let shared = Arc::new(Mutex::new(0u32));
        let mut work: Vec<model::Job<Mutex<u32>>> = vec![Box::new(|m| {
            for _ in 0..2 {
                *m.lock().unwrap() += 1;
            }
        })];
        for _ in 0..3 {
            work.push(Box::new(|m| *m.lock().unwrap() += 1));
        }
        in_threads(&shared, work);
        assert_eq!(*shared.try_lock().expect("the lock ends free"), 5);
    });
}

/// A timed waiter beside an untimed one: a hand-off goes to the untimed one (timed waiters
/// sleep on their own bitset), the timed one takes the lock or times out, and nothing is left
/// held.
#[test]
fn timed_and_untimed_waiters_with_hand_offs() {
    let timed_threads = if cfg!(futexkit_loom) { 1 } else { 3 };
    check(2, move || {
        let shared = Arc::new(Mutex::new(0u32));
        let mut work: Vec<model::Job<Mutex<u32>>> = vec![
            Box::new(|m| *m.lock().unwrap() += 1),
            Box::new(|m| *m.lock().unwrap() += 1),
        ];
        for _ in 0..timed_threads {
            work.push(Box::new(|m| {
                if let Ok(mut g) = m.try_lock_for(FAR) {
                    *g += 10;
                }
            }));
        }
        in_threads(&shared, work);
        let total = *shared.try_lock().expect("the lock ends free");
        assert_eq!(total % 10, 2, "both untimed lockers got through ({total})");
    });
}

/// `untimed` threads adding 10 under the lock beside one `try_lock_for(timeout)` adding 1: the
/// timed one gets the lock or gives up, nobody is stranded, and the lock ends free.
fn timed_lock_beside(untimed: u32, timeout: std::time::Duration) {
    check(3, move || {
        let shared = Arc::new(Mutex::new(0u32));
        let mut lockers: Vec<model::Job<Mutex<u32>>> = (0..untimed)
            .map(|_| Box::new(|m: &Mutex<u32>| *m.lock().unwrap() += 10) as Box<_>)
            .collect();
        lockers.push(Box::new(move |m| {
            if let Ok(mut g) = m.try_lock_for(timeout) {
                *g += 1;
            }
        }));
        in_threads(&shared, lockers);
        let v = *shared.try_lock().expect("the lock ends free");
        assert!(v == 10 * untimed || v == 10 * untimed + 1, "{v}");
    });
}

/// A timed lock against a holder: it gets the lock or times out.
#[test]
fn timed_lock_against_a_holder() {
    timed_lock_beside(1, FAR);
}

/// An attempt whose deadline has passed, beside a holder and an untimed waiter: it takes a free
/// lock or leaves without touching the word, and the waiter is not stranded.
#[test]
fn an_attempt_whose_deadline_has_passed_beside_a_waiter() {
    timed_lock_beside(2, std::time::Duration::ZERO);
}

/// A fair unlock while only a timed waiter sleeps must release, not hand off (the timed waiter
/// may give up); beside it, an untimed waiter woken without the lock asks for it.
#[test]
fn fair_unlocks_beside_a_timed_waiter() {
    let n = if cfg!(futexkit_loom) { 2 } else { 4 };
    check(2, move || {
        increments(vec![Locker::Fair, Locker::TimedFair], n)
    });
}

/// Plain and fair unlocks mixed: a fair unlock whose wake finds no untimed sleeper falls back
/// to a release, which finds the word asked for meanwhile and hands off instead.
#[test]
fn plain_and_fair_unlocks_mixed() {
    let (threads, n) = sized((3, 1), (6, 2));
    let lockers: Vec<Locker> = (0..threads)
        .map(|i| match i % 3 {
            0 => Locker::Plain,
            1 => Locker::Fair,
            _ => Locker::TimedFair,
        })
        .collect();
    check(2, move || increments(lockers.clone(), n));
}
