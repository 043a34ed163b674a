//! The process-shared protocols under a model checker (`--cfg futexkit_loom` or `--cfg
//! futexkit_shuttle`; see `tests/model/mod.rs`): the shared mutex's exclusion and wakeups (a woken
//! thread carries `WAITERS` on for the sleepers left; a take in passing leaves it clear), the condvar's
//! notify against a waiter counted before its unlock, the rwlock's reader slots against the
//! writer's word, and (shuttle only: their sleeps are sliced) the barrier's rounds and the
//! semaphore's permits. The code checked
//! is the shipped code, robust list included (each model thread registers a head of its own, as a
//! thread with no C library's would); deaths are not modelled (tests/shared_kill.rs kills real
//! processes).
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::futex::Deadline;
use futexkit::raw::{Acquired, RawLockError, RawSharedCondvar, RawSharedMutex, RawSharedRwLock};
#[cfg(futexkit_shuttle)]
use futexkit::raw::{RawSharedBarrier, RawSharedSemaphore};
use model::atomic::{AtomicUsize, Ordering};
use model::{check, in_threads, sized, Arc, FAR};

/// Locked increments split into a load and a store; with `timed`, the odd threads lock with a
/// (far) deadline.
fn mutex_increments(threads: usize, increments: usize, timed: bool) {
    // SAFETY: in an Arc before its first use, never moved out.
    let shared = Arc::new((unsafe { RawSharedMutex::new() }, AtomicUsize::new(0)));
    let work = (0..threads)
        .map(|i| {
            Box::new(move |(raw, count): &(RawSharedMutex, AtomicUsize)| {
                for _ in 0..increments {
                    // The emulated futex may time a timed sleep out (both outcomes are
                    // explored); a sleep that ends before the deadline looks again, and a
                    // timed attempt that did give up is followed by an untimed one.
                    let taken = if timed && i % 2 == 1 {
                        match raw.try_lock_until(Deadline::after(FAR)) {
                            Err(RawLockError::TimedOut) => raw.lock(),
                            taken => taken,
                        }
                    } else {
                        raw.lock()
                    };
                    assert_eq!(taken, Ok(Acquired::Consistent));
                    let v = count.load(Ordering::Relaxed);
                    model::thread::yield_now();
                    count.store(v + 1, Ordering::Relaxed);
                    // SAFETY: locked just above; `raw` outlives the call.
                    unsafe { raw.unlock() };
                }
            }) as Box<dyn FnOnce(&_) + Send>
        })
        .collect();
    in_threads(&shared, work);
    let (raw, count) = &*shared;
    assert_eq!(count.load(Ordering::Relaxed), threads * increments);
    assert!(!raw.is_locked());
}

#[test]
fn shared_mutex_excludes_and_wakes() {
    let (threads, n) = sized((2, 2), (4, 3));
    check(3, move || mutex_increments(threads, n, false));
}

#[test]
fn shared_mutex_with_timed_lockers() {
    let (threads, n) = sized((3, 1), (4, 2));
    check(2, move || mutex_increments(threads, n, true));
}

#[test]
fn shared_condvar_does_not_lose_a_notify() {
    let waiters = if cfg!(futexkit_loom) { 1 } else { 3 };
    check(3, move || {
        let shared = Arc::new((
            // SAFETY: in an Arc before its first use, never moved out.
            unsafe { RawSharedMutex::new() },
            RawSharedCondvar::new(),
            AtomicUsize::new(0),
        ));
        let mut work: Vec<model::Job<(RawSharedMutex, RawSharedCondvar, AtomicUsize)>> =
            vec![Box::new(|(m, cv, flag)| {
                m.lock().unwrap();
                flag.store(1, Ordering::Relaxed);
                // SAFETY: held.
                unsafe { m.unlock() };
                cv.notify_all();
            })];
        for _ in 0..waiters {
            work.push(Box::new(|(m, cv, flag)| {
                m.lock().unwrap();
                while flag.load(Ordering::Relaxed) == 0 {
                    // SAFETY: this thread holds `m`; both outlive the call.
                    unsafe { cv.wait(m, None) }.unwrap();
                }
                // SAFETY: held again after the wait.
                unsafe { m.unlock() };
            }));
        }
        in_threads(&shared, work);
    });
}

#[test]
fn shared_condvar_notify_one_hands_turns() {
    check(3, || {
        let shared = Arc::new((
            // SAFETY: in an Arc before its first use, never moved out.
            unsafe { RawSharedMutex::new() },
            RawSharedCondvar::new(),
            AtomicUsize::new(0),
        ));
        let turns = |mine: usize| {
            Box::new(
                move |(m, cv, turn): &(RawSharedMutex, RawSharedCondvar, AtomicUsize)| {
                    m.lock().unwrap();
                    loop {
                        let t = turn.load(Ordering::Relaxed);
                        if t >= 3 {
                            break;
                        }
                        if t % 2 == mine {
                            turn.store(t + 1, Ordering::Relaxed);
                            cv.notify_one();
                        } else {
                            // SAFETY: this thread holds `m`.
                            match unsafe { cv.wait(m, Some(Deadline::after(FAR))) } {
                                Ok(_) => {}
                                // The emulated futex timed the relock out: relock untimed.
                                Err(RawLockError::TimedOut) => {
                                    m.lock().unwrap();
                                }
                                Err(err) => panic!("{err}"),
                            }
                        }
                    }
                    // SAFETY: held.
                    unsafe { m.unlock() };
                },
            ) as Box<dyn FnOnce(&_) + Send>
        };
        in_threads(&shared, vec![turns(0), turns(1)]);
    });
}

#[test]
fn shared_rwlock_readers_never_see_a_write_in_progress() {
    let (readers, writers) = sized((1, 1), (3, 2));
    check(2, move || {
        let shared = Arc::new((
            // SAFETY: in an Arc before its first use, never moved out.
            unsafe { RawSharedRwLock::new() },
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        ));
        let mut work: Vec<model::Job<(RawSharedRwLock, AtomicUsize, AtomicUsize)>> = Vec::new();
        for _ in 0..writers {
            work.push(Box::new(|(lock, a, b)| {
                lock.write().unwrap();
                a.fetch_add(1, Ordering::Relaxed);
                model::thread::yield_now();
                b.fetch_add(1, Ordering::Relaxed);
                // SAFETY: this thread holds the write lock.
                unsafe { lock.write_unlock() };
            }));
        }
        for _ in 0..readers {
            work.push(Box::new(|(lock, a, b)| {
                let (slot, _) = lock.read().unwrap();
                assert_eq!(a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
                // SAFETY: this thread holds that read lock.
                unsafe { lock.read_unlock(slot) };
            }));
        }
        in_threads(&shared, work);
        let (lock, a, _) = &*shared;
        assert_eq!(a.load(Ordering::Relaxed), writers);
        assert!(!lock.is_write_locked());
    });
}

/// Three readers crowding the reader slots (a model has two) beside a writer that waits for
/// one: a writer woken on a slot that finds it taken again, and then free, passes its wake on
/// to the reader still asleep there (shuttle only: four threads).
#[test]
#[cfg(futexkit_shuttle)]
fn shared_rwlock_writer_woken_on_a_taken_slot_passes_its_wake_on() {
    check(3, || {
        // SAFETY: in an Arc before its first use, never moved out.
        let lock = Arc::new(unsafe { RawSharedRwLock::new() });
        let mut work: Vec<model::Job<RawSharedRwLock>> = Vec::new();
        work.push(Box::new(|lock| {
            lock.write().unwrap();
            // SAFETY: this thread holds the write lock.
            unsafe { lock.write_unlock() };
        }));
        for _ in 0..3 {
            work.push(Box::new(|lock| {
                let (slot, _) = lock.read().unwrap();
                model::thread::yield_now();
                // SAFETY: this thread holds that read lock.
                unsafe { lock.read_unlock(slot) };
            }));
        }
        in_threads(&lock, work);
        assert!(!lock.is_write_locked());
    });
}

#[test]
#[cfg(futexkit_shuttle)]
fn shared_barrier_rounds_have_one_leader() {
    check(2, || {
        const PARTIES: usize = 3;
        const ROUNDS: usize = 2;
        // SAFETY: in an Arc before its first use, never moved out.
        let shared = Arc::new((
            unsafe { RawSharedBarrier::new(PARTIES) },
            AtomicUsize::new(0),
        ));
        let work = (0..PARTIES)
            .map(|_| {
                Box::new(|(barrier, leaders): &(RawSharedBarrier, AtomicUsize)| {
                    let party = barrier.join().unwrap();
                    for _ in 0..ROUNDS {
                        // SAFETY: this thread joined as `party`.
                        if unsafe { barrier.wait(party, Some(Deadline::after(FAR))) }.unwrap() {
                            leaders.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }) as Box<dyn FnOnce(&_) + Send>
            })
            .collect();
        in_threads(&shared, work);
        assert_eq!(shared.1.load(Ordering::Relaxed), ROUNDS);
    });
}

/// A party whose deadline has passed gives up while the last party arrives: the round ends
/// for both or for neither (the one gives up `TimedOut`, the other gets `Broken`), never with
/// one leading it and the other timed out.
#[test]
#[cfg(futexkit_shuttle)]
fn a_shared_barrier_round_ends_for_every_party_or_for_none() {
    use futexkit::raw::BarrierError;
    use std::time::Duration;
    type Results = std::sync::Mutex<Vec<Result<bool, BarrierError>>>;
    check(2, || {
        // SAFETY: in an Arc before its first use, never moved out.
        let shared = Arc::new((
            unsafe { RawSharedBarrier::new(2) },
            Results::new(Vec::new()),
        ));
        let work = [Some(Duration::ZERO), None]
            .into_iter()
            .map(|timeout| {
                Box::new(move |(barrier, results): &(RawSharedBarrier, Results)| {
                    // A party that comes after the other gave up finds the barrier broken.
                    let result = barrier.join().and_then(|party| {
                        let deadline = timeout.map_or(Deadline::after(FAR), Deadline::after);
                        // SAFETY: this thread joined as `party`.
                        unsafe { barrier.wait(party, Some(deadline)) }
                    });
                    results.lock().unwrap().push(result);
                }) as Box<dyn FnOnce(&_) + Send>
            })
            .collect();
        in_threads(&shared, work);
        let mut results = shared.1.lock().unwrap().clone();
        results.sort_by_key(|r| format!("{r:?}"));
        assert!(
            results == [Ok(false), Ok(true)]
                || results == [Err(BarrierError::Broken), Err(BarrierError::TimedOut)],
            "{results:?}"
        );
    });
}

/// The shared semaphore (shuttle only: its sleeps are sliced, so a lost wakeup would show as a
/// slice's wait, not a deadlock): never more holders than permits, and every permit back at
/// the end, with a release sequence and sleepers counted around the slots.
#[test]
#[cfg(futexkit_shuttle)]
fn shared_semaphore_never_has_more_holders_than_permits() {
    check(2, || {
        const PERMITS: usize = 2;
        const THREADS: usize = 4;
        // SAFETY: in an Arc before its first use, never moved out.
        let shared = Arc::new((
            unsafe { RawSharedSemaphore::new(PERMITS) },
            AtomicUsize::new(0),
        ));
        let work = (0..THREADS)
            .map(|_| {
                Box::new(|(semaphore, inside): &(RawSharedSemaphore, AtomicUsize)| {
                    for _ in 0..2 {
                        let permit = semaphore.acquire(None).unwrap();
                        assert!(!permit.previous_holder_died());
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= PERMITS, "{now} holders of {PERMITS} permits");
                        inside.fetch_sub(1, Ordering::SeqCst);
                        // SAFETY: this thread holds `permit`; `semaphore` outlives the call.
                        unsafe { semaphore.release(permit) };
                    }
                }) as Box<dyn FnOnce(&_) + Send>
            })
            .collect();
        in_threads(&shared, work);
        assert_eq!(shared.0.available(), PERMITS);
    });
}
