//! The Condvar against std's contract, and its broadcast path.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::blocked;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use blocked::{gettid, wait_until_blocked};
use futexkit::{Condvar, Mutex};

/// A producer/consumer queue written against `std::sync`, compiled against futexkit by
/// changing only the import.
mod written_for_std {
    use futexkit as sync;

    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::thread;

    pub fn run() -> u64 {
        let queue = Arc::new((sync::Mutex::new(VecDeque::new()), sync::Condvar::new()));
        let consumer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                let (lock, ready) = &*queue;
                let mut sum = 0u64;
                loop {
                    let mut items = ready
                        .wait_while(lock.lock().unwrap(), |q| q.is_empty())
                        .unwrap();
                    match items.pop_front() {
                        Some(0) => return sum,
                        Some(n) => sum += n,
                        None => unreachable!(),
                    }
                }
            })
        };
        let (lock, ready) = &*queue;
        for n in (1..=1000u64).chain([0]) {
            lock.lock().unwrap().push_back(n);
            ready.notify_one();
        }
        consumer.join().unwrap()
    }
}

#[test]
fn code_written_for_std_runs_unchanged() {
    assert_eq!(written_for_std::run(), 500_500);
}

#[test]
fn a_notify_before_the_wait_is_not_remembered() {
    let m = Mutex::new(());
    let cv = Condvar::new();
    cv.notify_one();
    cv.notify_all();
    let (_g, result) = cv
        .wait_timeout(m.lock().unwrap(), Duration::from_millis(20))
        .unwrap();
    assert!(result.timed_out());
}

#[test]
fn wait_while_absorbs_notifies_that_do_not_change_the_condition() {
    let state = Arc::new((Mutex::new(0u32), Condvar::new()));
    let notifier = {
        let state = Arc::clone(&state);
        thread::spawn(move || {
            let (lock, cv) = &*state;
            for i in 1..=50 {
                *lock.lock().unwrap() = i;
                cv.notify_all();
                thread::yield_now();
            }
        })
    };
    let (lock, cv) = &*state;
    let g = cv.wait_while(lock.lock().unwrap(), |v| *v < 50).unwrap();
    assert_eq!(*g, 50);
    drop(g);
    notifier.join().unwrap();
}

#[test]
fn timeouts_report_timed_out_and_recompute_the_time_left() {
    let state = Arc::new((Mutex::new(false), Condvar::new(), AtomicBool::new(false)));
    // Notifies every millisecond without ever making the condition true: a wait that restarted
    // its full timeout on every wakeup would never return.
    let notifier = {
        let state = Arc::clone(&state);
        thread::spawn(move || {
            while !state.2.load(Ordering::Relaxed) {
                state.1.notify_all();
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let (lock, cv, stop) = &*state;
    let timeout = Duration::from_millis(30);
    let start = Instant::now();
    let (g, result) = cv
        .wait_timeout_while(lock.lock().unwrap(), timeout, |ready| !*ready)
        .unwrap();
    assert!(result.timed_out());
    assert!(!*g);
    assert!(start.elapsed() >= timeout);
    drop(g);

    // A condition that is already false returns at once, not timed out.
    let (g, result) = cv
        .wait_timeout_while(lock.lock().unwrap(), timeout, |ready| *ready)
        .unwrap();
    assert!(!result.timed_out());
    drop(g);

    // A notify that arrives in time: not timed out.
    let waiter = {
        let state = Arc::clone(&state);
        thread::spawn(move || {
            let (lock, cv, _) = &*state;
            let (g, result) = cv
                .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(60), |r| !*r)
                .unwrap();
            (*g, result.timed_out())
        })
    };
    *lock.lock().unwrap() = true;
    cv.notify_all();
    assert_eq!(waiter.join().unwrap(), (true, false));
    stop.store(true, Ordering::Relaxed);
    notifier.join().unwrap();
}

#[test]
fn a_poisoned_mutex_propagates_through_wait() {
    let state = Arc::new((Mutex::new(0u32), Condvar::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let state = Arc::clone(&state);
        thread::spawn(move || {
            let (lock, cv) = &*state;
            let g = lock.lock().unwrap();
            tx.send(gettid()).unwrap();
            match cv.wait(g) {
                Err(poisoned) => *poisoned.into_inner() + 100,
                Ok(_) => 0,
            }
        })
    };
    wait_until_blocked(rx.recv().unwrap());
    let poisoner = {
        let state = Arc::clone(&state);
        thread::spawn(move || {
            let mut g = state.0.lock().unwrap();
            *g = 7;
            panic!("poisoning on purpose");
        })
    };
    assert!(poisoner.join().is_err());
    state.1.notify_one();
    assert_eq!(waiter.join().unwrap(), 107);

    // wait_timeout and wait_while report it too, with the guard inside.
    let (lock, cv) = &*state;
    let g = lock.lock().unwrap_or_else(|e| e.into_inner());
    let err = cv.wait_timeout(g, Duration::from_millis(1)).unwrap_err();
    let (g, result) = err.into_inner();
    assert!(result.timed_out());
    assert_eq!(*g, 7);
    drop(g);
    let g = lock.lock().unwrap_or_else(|e| e.into_inner());
    let g = cv
        .wait_while(g, |_| false)
        .unwrap_or_else(|e| e.into_inner());
    assert_eq!(*g, 7);
}

/// Starts `n` threads that wait for `generation` to pass 0, each confirmed asleep in the
/// kernel before returning.
fn sleeping_waiters(state: &Arc<(Mutex<u32>, Condvar)>, n: usize) -> Vec<thread::JoinHandle<u32>> {
    (0..n)
        .map(|_| {
            let state = Arc::clone(state);
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = thread::spawn(move || {
                let (lock, cv) = &*state;
                let g = lock.lock().unwrap();
                tx.send(gettid()).unwrap();
                let g = cv.wait_while(g, |generation| *generation == 0).unwrap();
                *g
            });
            wait_until_blocked(rx.recv().unwrap());
            handle
        })
        .collect()
}

#[test]
fn one_notify_all_releases_32_sleeping_waiters() {
    let state = Arc::new((Mutex::new(0u32), Condvar::new()));
    let waiters = sleeping_waiters(&state, 32);
    *state.0.lock().unwrap() = 1;
    state.1.notify_all();
    for w in waiters {
        assert_eq!(w.join().unwrap(), 1);
    }
    // The mutex is left consistent: free, and usable by everyone.
    assert!(state.0.try_lock().is_ok());
    let waiters = sleeping_waiters(&state, 0);
    assert!(waiters.is_empty());
}

#[test]
fn notify_all_without_the_lock_held_and_with_the_lock_held() {
    for hold in [false, true] {
        let state = Arc::new((Mutex::new(0u32), Condvar::new()));
        let waiters = sleeping_waiters(&state, 8);
        let mut g = state.0.lock().unwrap();
        *g = 1;
        if hold {
            // Moved waiters queue on the held mutex; each unlock lets the next through.
            state.1.notify_all();
            drop(g);
        } else {
            drop(g);
            state.1.notify_all();
        }
        for w in waiters {
            assert_eq!(w.join().unwrap(), 1);
        }
        assert!(state.0.try_lock().is_ok());
    }
}

#[test]
fn notify_one_wakes_exactly_one() {
    let state = Arc::new((Mutex::new(0u32), Condvar::new()));
    let woken = Arc::new(AtomicUsize::new(0));
    let first_woken = Arc::new(AtomicUsize::new(0));
    let mut tids = Vec::new();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let (state, woken, first_woken) = (
                Arc::clone(&state),
                Arc::clone(&woken),
                Arc::clone(&first_woken),
            );
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = thread::spawn(move || {
                let (lock, cv) = &*state;
                let g = lock.lock().unwrap();
                tx.send(gettid()).unwrap();
                // Consumes one token per wakeup that finds one.
                let mut g = cv.wait_while(g, |tokens| *tokens == 0).unwrap();
                *g -= 1;
                let _ = first_woken.compare_exchange(
                    0,
                    gettid() as usize,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                woken.fetch_add(1, Ordering::SeqCst);
            });
            let tid = rx.recv().unwrap();
            wait_until_blocked(tid);
            tids.push(tid);
            handle
        })
        .collect();
    *state.0.lock().unwrap() += 1;
    state.1.notify_one();
    while woken.load(Ordering::SeqCst) == 0 {
        thread::yield_now();
    }
    // The other one is still asleep in the kernel, and has not run.
    let first = first_woken.load(Ordering::SeqCst) as u32;
    let still_waiting = tids.iter().copied().find(|&tid| tid != first).unwrap();
    wait_until_blocked(still_waiting);
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    *state.0.lock().unwrap() += 1;
    state.1.notify_one();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(woken.load(Ordering::SeqCst), 2);
    assert_eq!(*state.0.lock().unwrap(), 0);
}

/// std's contract: a Condvar may be used with one mutex, then another (never both at once).
#[test]
fn one_condvar_serves_two_mutexes_in_turn() {
    let cv = Arc::new(Condvar::new());
    let a = Arc::new(Mutex::new(false));
    let b = Arc::new(Mutex::new(false));
    let _ = cv.wait_timeout(a.lock().unwrap(), Duration::from_millis(1));
    let _ = cv.wait_timeout(b.lock().unwrap(), Duration::from_millis(1));
    for m in [&a, &b, &a] {
        *m.lock().unwrap() = false;
        let setter = {
            let (cv, m) = (Arc::clone(&cv), Arc::clone(m));
            thread::spawn(move || {
                *m.lock().unwrap() = true;
                cv.notify_all();
            })
        };
        let ready = cv.wait_while(m.lock().unwrap(), |ready| !*ready).unwrap();
        assert!(*ready);
        drop(ready);
        setter.join().unwrap();
    }
}

/// std's contract: a `(Mutex, Condvar)` pair may move between waits (here, as a `Vec` grows).
#[test]
fn a_pair_moved_between_waits_keeps_working() {
    let mut v = Vec::with_capacity(1);
    v.push((Mutex::new(0), Condvar::new()));
    let _ = v[0]
        .1
        .wait_timeout(v[0].0.lock().unwrap(), Duration::from_millis(1));
    let before = &v[0] as *const _ as usize;
    for _ in 0..64 {
        v.push((Mutex::new(0), Condvar::new()));
    }
    assert_ne!(before, &v[0] as *const _ as usize, "the pair moved");
    let (lock, cv) = &v[0];
    let (_, result) = cv
        .wait_timeout(lock.lock().unwrap(), Duration::from_millis(1))
        .unwrap();
    assert!(result.timed_out());
    // And a real notify still reaches a waiter on the moved pair.
    thread::scope(|s| {
        s.spawn(|| {
            *lock.lock().unwrap() = 1;
            cv.notify_one();
        });
        let value = cv.wait_while(lock.lock().unwrap(), |v| *v == 0).unwrap();
        assert_eq!(*value, 1);
    });
    // A boxed pair, moved after use, likewise.
    let pair = Box::new((Mutex::new(false), Condvar::new()));
    let _ = pair
        .1
        .wait_timeout(pair.0.lock().unwrap(), Duration::from_millis(1));
    let moved = *pair;
    let (_, result) = moved
        .1
        .wait_timeout(moved.0.lock().unwrap(), Duration::from_millis(1))
        .unwrap();
    assert!(result.timed_out());
}

/// notify_all racing with new waiters, timed waiters and notify_one: every waiter that waits
/// for a generation gets through, nothing hangs, and the mutex ends free.
#[test]
fn broadcasts_race_with_new_waiters_and_timeouts() {
    const ROUNDS: u32 = 300;
    let state = Arc::new((Mutex::new(0u32), Condvar::new()));
    let threads: Vec<_> = (0..12)
        .map(|i| {
            let state = Arc::clone(&state);
            thread::spawn(move || {
                let (lock, cv) = &*state;
                let mut seen = 0;
                while seen < ROUNDS {
                    let g = lock.lock().unwrap();
                    let g = if i % 3 == 0 {
                        // Timed waiters: time out often, racing the broadcast.
                        cv.wait_timeout_while(g, Duration::from_micros(50), |gen| *gen == seen)
                            .unwrap()
                            .0
                    } else {
                        cv.wait_while(g, |gen| *gen == seen).unwrap()
                    };
                    seen = *g;
                }
            })
        })
        .collect();
    let (lock, cv) = &*state;
    for round in 1..=ROUNDS {
        *lock.lock().unwrap() = round;
        if round % 7 == 0 {
            cv.notify_one();
            cv.notify_all();
        } else {
            cv.notify_all();
        }
        if round % 16 == 0 {
            thread::sleep(Duration::from_micros(200));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    for t in threads {
        while !t.is_finished() {
            assert!(Instant::now() < deadline, "a waiter hung");
            thread::sleep(Duration::from_millis(1));
        }
        t.join().unwrap();
    }
    assert!(lock.try_lock().is_ok());
}

/// A bounded queue with N producers and N consumers on one Mutex and two Condvars.
#[test]
fn bounded_queue_with_two_condvars_loses_nothing() {
    const PER_PRODUCER: u64 = 20_000;
    const CAPACITY: usize = 8;
    struct Queue {
        items: Mutex<VecDeque<u64>>,
        not_empty: Condvar,
        not_full: Condvar,
    }
    let q = Arc::new(Queue {
        items: Mutex::new(VecDeque::new()),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let producers: Vec<_> = (0..4)
        .map(|_| {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for n in 1..=PER_PRODUCER {
                    let mut items = q
                        .not_full
                        .wait_while(q.items.lock().unwrap(), |i| i.len() >= CAPACITY)
                        .unwrap();
                    items.push_back(n);
                    drop(items);
                    q.not_empty.notify_one();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                let mut sum = 0;
                loop {
                    let mut items = q
                        .not_empty
                        .wait_while(q.items.lock().unwrap(), |i| i.is_empty())
                        .unwrap();
                    let n = items.pop_front().unwrap();
                    drop(items);
                    // Broadcast, to exercise the requeue under load.
                    q.not_full.notify_all();
                    if n == 0 {
                        return sum;
                    }
                    sum += n;
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    for _ in 0..4 {
        let mut items = q
            .not_full
            .wait_while(q.items.lock().unwrap(), |i| i.len() >= CAPACITY)
            .unwrap();
        items.push_back(0);
        drop(items);
        q.not_empty.notify_one();
    }
    let total: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(total, 4 * PER_PRODUCER * (PER_PRODUCER + 1) / 2);
}

#[test]
fn debug_default_and_wait_timeout_result() {
    let cv = Condvar::default();
    assert_eq!(
        format!("{cv:?}"),
        format!("{:?}", std::sync::Condvar::new())
    );
    static STATIC_CV: Condvar = Condvar::new();
    STATIC_CV.notify_all();
}

/// Waiters notified in time report no timeout even when the mutex they relock stays held past
/// their deadline (as std: the notify reached them before the timeout).
#[test]
fn a_notify_in_time_is_not_reported_as_a_timeout_while_the_mutex_stays_held() {
    let state = Arc::new((Mutex::new(false), Condvar::new()));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let state = Arc::clone(&state);
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = thread::spawn(move || {
                let (lock, cv) = &*state;
                let g = lock.lock().unwrap();
                tx.send(gettid()).unwrap();
                let (g, result) = cv.wait_timeout(g, Duration::from_secs(1)).unwrap();
                (*g, result.timed_out())
            });
            wait_until_blocked(rx.recv().unwrap());
            handle
        })
        .collect();
    let (lock, cv) = &*state;
    let mut g = lock.lock().unwrap();
    *g = true;
    // Wakes all three, then keeps the mutex past their deadline.
    cv.notify_all();
    thread::sleep(Duration::from_millis(1500));
    drop(g);
    for w in waiters {
        assert_eq!(w.join().unwrap(), (true, false));
    }
}
