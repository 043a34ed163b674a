//! futexkit::Mutex against std::sync::Mutex's contract, and under stress.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::cell::RefCell;
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe, RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, TryLockError};
use std::time::{Duration, Instant};

use futexkit::{Mutex, MutexGuard};

/// Code written for std, with only the import changed.
mod written_for_std {
    use futexkit as sync;

    pub fn run() -> Vec<i32> {
        let m = sync::Mutex::new(vec![1]);
        {
            let r: sync::LockResult<sync::MutexGuard<'_, Vec<i32>>> = m.lock();
            r.unwrap().push(2);
        }
        match m.try_lock() {
            Ok(mut g) => g.push(3),
            Err(sync::TryLockError::WouldBlock) => unreachable!(),
            Err(sync::TryLockError::Poisoned(e)) => e.into_inner().push(-1),
        }
        let _: fn(sync::PoisonError<()>) -> () = sync::PoisonError::into_inner;
        m.into_inner().unwrap_or_else(sync::PoisonError::into_inner)
    }
}

#[test]
fn code_written_for_std_runs_unchanged() {
    assert_eq!(written_for_std::run(), vec![1, 2, 3]);
}

fn poison<T: Send + 'static>(m: &Arc<Mutex<T>>) {
    let m2 = Arc::clone(m);
    let r = std::thread::spawn(move || {
        let _g = m2.lock().unwrap();
        panic!("poisoning on purpose");
    })
    .join();
    assert!(r.is_err());
}

#[test]
fn a_panic_while_locked_poisons_and_clear_poison_clears() {
    let m = Arc::new(Mutex::new(5));
    assert!(!m.is_poisoned());
    poison(&m);
    assert!(m.is_poisoned());
    let err = m.lock().unwrap_err();
    assert_eq!(**err.get_ref(), 5, "the guard is still usable");
    drop(err);
    assert!(matches!(m.try_lock(), Err(TryLockError::Poisoned(_))));
    m.clear_poison();
    assert!(!m.is_poisoned());
    assert_eq!(*m.lock().unwrap(), 5);
}

#[test]
fn into_inner_and_get_mut_report_poison() {
    let mut m = Arc::new(Mutex::new(String::from("x")));
    poison(&m);
    let inner = Arc::get_mut(&mut m).unwrap();
    assert_eq!(inner.get_mut().unwrap_err().into_inner(), "x");
    let m = Arc::try_unwrap(m).unwrap();
    assert_eq!(m.into_inner().unwrap_err().into_inner(), "x");

    let mut clean = Mutex::new(3);
    *clean.get_mut().unwrap() += 1;
    assert_eq!(clean.into_inner().unwrap(), 4);
}

/// Drops of this type look at the mutex that held it: `set` must drop the old value only once
/// the lock is free again (as std's does), so a drop that locks cannot deadlock.
struct LocksOnDrop(Arc<Mutex<Option<LocksOnDrop>>>);

impl Drop for LocksOnDrop {
    fn drop(&mut self) {
        assert!(
            self.0.try_lock().is_ok(),
            "dropped while the mutex was held"
        );
    }
}

#[test]
fn get_cloned_set_and_replace_as_std_nightly() {
    let m = Arc::new(Mutex::new(vec![1]));
    assert_eq!(m.get_cloned().unwrap(), vec![1]);
    m.set(vec![2]).unwrap();
    assert_eq!(m.replace(vec![3]).unwrap(), vec![2]);
    assert_eq!(*m.lock().unwrap(), vec![3]);

    poison(&m);
    assert!(m.get_cloned().is_err());
    assert_eq!(
        m.set(vec![4]).unwrap_err().into_inner(),
        vec![4],
        "the value comes back"
    );
    assert_eq!(m.replace(vec![5]).unwrap_err().into_inner(), vec![5]);
    m.clear_poison();
    assert_eq!(
        m.get_cloned().unwrap(),
        vec![3],
        "a poisoned set stores nothing"
    );

    let holder = Arc::new(Mutex::new(None));
    holder.set(Some(LocksOnDrop(Arc::clone(&holder)))).unwrap();
    holder.set(None).unwrap(); // drops the old value: after the unlock
}

#[test]
fn try_lock_while_held_would_block() {
    let m = Arc::new(Mutex::new(()));
    let g = m.lock().unwrap();
    assert!(matches!(m.try_lock(), Err(TryLockError::WouldBlock)));
    let m2 = Arc::clone(&m);
    let other = std::thread::spawn(move || matches!(m2.try_lock(), Err(TryLockError::WouldBlock)))
        .join()
        .unwrap();
    assert!(other);
    drop(g);
    assert!(m.try_lock().is_ok());
}

#[test]
fn unsized_mutexes_work() {
    let slice: &Mutex<[i32]> = &Mutex::new([1, 2, 3]);
    slice.lock().unwrap()[1] = 20;
    assert_eq!(&*slice.lock().unwrap(), &[1, 20, 3]);

    let boxed: Box<Mutex<dyn Debug + Send>> = Box::new(Mutex::new(7u8));
    assert_eq!(format!("{:?}", boxed.lock().unwrap()), "7");

    let shared: Arc<Mutex<dyn Fn() -> i32 + Send>> = Arc::new(Mutex::new(|| 42));
    assert_eq!((shared.lock().unwrap())(), 42);
}

#[test]
fn data_is_dropped_exactly_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    drop(Mutex::new(Counted));
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    let inner = Mutex::new(Counted).into_inner().unwrap();
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    drop(inner);
    assert_eq!(DROPS.load(Ordering::SeqCst), 2);
}

#[test]
fn guards_across_catch_unwind() {
    let m = Mutex::new(1);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut g = m.lock().unwrap();
        *g = 2;
        panic!("inside the lock");
    }));
    assert!(r.is_err());
    assert!(m.is_poisoned());
    assert_eq!(*m.lock().unwrap_err().into_inner(), 2);
    // A guard taken while already panicking does not poison again (std's rule).
    m.clear_poison();
    struct LockOnDrop<'a>(&'a Mutex<i32>);
    impl Drop for LockOnDrop<'_> {
        fn drop(&mut self) {
            let _g = self.0.lock().unwrap();
        }
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _d = LockOnDrop(&m);
        panic!("unwinding");
    }));
    assert!(r.is_err());
    assert!(!m.is_poisoned());
}

#[test]
fn debug_matches_std() {
    let ours = Mutex::new(vec![1, 2]);
    let std = std::sync::Mutex::new(vec![1, 2]);
    assert_eq!(format!("{ours:?}"), format!("{std:?}"));
    let (g1, g2) = (ours.lock().unwrap(), std.lock().unwrap());
    assert_eq!(format!("{ours:?}"), format!("{std:?}"));
    assert_eq!(format!("{g1:?}"), format!("{g2:?}"));
    drop((g1, g2));

    let ours = Arc::new(Mutex::new(0));
    let std = Arc::new(std::sync::Mutex::new(0));
    poison(&ours);
    let std2 = Arc::clone(&std);
    let _ = std::thread::spawn(move || {
        let _g = std2.lock().unwrap();
        panic!("poisoning on purpose");
    })
    .join();
    assert_eq!(format!("{ours:#?}"), format!("{std:#?}"));
}

#[test]
fn display_default_and_from() {
    let m = Mutex::new(String::from("hello"));
    assert_eq!(m.lock().unwrap().to_string(), "hello");
    assert_eq!(*Mutex::<u32>::default().lock().unwrap(), 0);
    assert_eq!(*Mutex::from(9).lock().unwrap(), 9);
}

#[test]
fn auto_traits_match_std() {
    fn send_sync<T: Send + Sync>() {}
    fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}
    fn sync<T: Sync>() {}
    send_sync::<Mutex<RefCell<i32>>>();
    unwind_safe::<Mutex<RefCell<i32>>>();
    sync::<MutexGuard<'static, i32>>();
    // `MutexGuard: !Send` is checked by a compile_fail doctest on `MutexGuard`.
}

#[test]
fn sizes_are_std_s() {
    if cfg!(feature = "deadlock") {
        return; // each lock carries its number for the checks
    }
    assert_eq!(std::mem::size_of::<Mutex<()>>(), 8);
    assert_eq!(
        std::mem::size_of::<Mutex<()>>(),
        std::mem::size_of::<std::sync::Mutex<()>>()
    );
    assert!(std::mem::size_of::<futexkit::Condvar>() <= 8);
}

#[test]
fn const_new_works_in_a_static() {
    static GLOBAL: Mutex<Vec<u8>> = Mutex::new(Vec::new());
    GLOBAL.lock().unwrap().push(1);
    assert_eq!(GLOBAL.lock().unwrap().len(), 1);
}

#[test]
fn timed_locks_time_out_and_succeed() {
    let m = Arc::new(Mutex::new(0));
    let g = m.lock().unwrap();
    let m2 = Arc::clone(&m);
    let r = std::thread::spawn(move || {
        let start = Instant::now();
        let timed_out = matches!(
            m2.try_lock_for(Duration::from_millis(20)),
            Err(TryLockError::WouldBlock)
        );
        let until = matches!(
            m2.try_lock_until(Instant::now() + Duration::from_millis(5)),
            Err(TryLockError::WouldBlock)
        );
        (timed_out, until, start.elapsed())
    })
    .join()
    .unwrap();
    assert!(r.0 && r.1);
    assert!(
        r.2 >= Duration::from_millis(25),
        "timed out before the deadline"
    );
    drop(g);

    // Released while a timed waiter sleeps: it gets the lock.
    let g = m.lock().unwrap();
    let m2 = Arc::clone(&m);
    let waiter = std::thread::spawn(move || {
        *m2.try_lock_for(Duration::from_secs(60)).unwrap() += 1;
    });
    std::thread::sleep(Duration::from_millis(10));
    drop(g);
    waiter.join().unwrap();
    assert_eq!(*m.lock().unwrap(), 1);
}

#[test]
fn eight_threads_times_a_million_increments_lose_nothing() {
    const THREADS: usize = 8;
    const EACH: usize = 1_000_000;
    let m = Arc::new(Mutex::new(0usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    *m.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), THREADS * EACH);
}

#[test]
fn random_sleeps_keep_mutual_exclusion() {
    let m = Arc::new(Mutex::new(0u64));
    let inside = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..16u64)
        .map(|seed| {
            let (m, inside) = (Arc::clone(&m), Arc::clone(&inside));
            std::thread::spawn(move || {
                let mut x = seed * 2_654_435_761 + 1;
                for _ in 0..200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut g = m.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two owners");
                    *g += 1;
                    if x % 4 == 0 {
                        std::thread::sleep(Duration::from_micros(x % 200));
                    }
                    inside.store(false, Ordering::SeqCst);
                    drop(g);
                    if x % 3 == 0 {
                        std::thread::sleep(Duration::from_micros(x % 100));
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 16 * 200);
}

/// A hog re-locks in a tight loop (barging is allowed); the starvation bound still lets a
/// sleeping waiter in, again and again.
#[test]
fn a_waiter_is_not_starved_by_a_barging_hog() {
    let m = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut g = m.lock().unwrap();
                    for _ in 0..100 {
                        *g = std::hint::black_box(*g + 1);
                    }
                }
            })
        })
        .collect();
    for _ in 0..200 {
        drop(m.lock().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
}

/// A sleeper woken by an unlock that finds the lock taken again (by a thread that had not slept)
/// asks for it, and the next plain unlock hands the lock to it: the lock is not free for the
/// unlocking thread a moment later. Rounds where the woken sleeper took the lock first decide
/// nothing (on a loaded machine most may not); some must decide.
#[test]
fn a_woken_sleeper_that_finds_the_lock_taken_gets_it_next() {
    use futexkit::raw::RawMutex;
    use futexkit_support::blocked::{gettid, wait_until_blocked_on};
    use std::sync::mpsc;

    let raw = Arc::new(RawMutex::new());
    let mut decided = 0;
    for round in 0..1000 {
        if decided == 5 {
            break;
        }
        raw.lock();
        let (tid_tx, tid_rx) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let sleeper = std::thread::spawn({
            let raw = Arc::clone(&raw);
            move || {
                tid_tx.send(gettid()).unwrap();
                raw.lock();
                // Held until the main thread has looked.
                released.recv().unwrap();
                // SAFETY: locked just above.
                unsafe { raw.unlock() };
            }
        });
        let tid = tid_rx.recv().unwrap();
        wait_until_blocked_on(tid, &*raw);
        // SAFETY: this thread took the lock above. The unlock wakes the sleeper.
        unsafe { raw.unlock() };
        if raw.try_lock() {
            // Taken before the woken sleeper ran: it finds the lock held, asks for it, spins
            // and sleeps again.
            wait_until_blocked_on(tid, &*raw);
            // SAFETY: taken just above.
            unsafe { raw.unlock() };
            assert!(
                !raw.try_lock(),
                "round {round}: the lock was free after an unlock that a woken sleeper asked for"
            );
            decided += 1;
        }
        release.send(()).unwrap();
        sleeper.join().unwrap();
    }
    assert!(
        decided > 0,
        "in no round did this thread retake the lock before the sleeper ran"
    );
    assert!(raw.try_lock(), "the lock ends free");
}

/// `RawMutex::unlock_fair` with a thread asleep in `lock`: the lock goes to that thread, so it
/// is not free for the unlocking thread a moment later, round after round. (A plain unlock
/// would release it: this sleeper has not been woken yet, so it has not asked.)
#[test]
fn a_fair_unlock_hands_the_lock_to_the_sleeper() {
    use futexkit::raw::RawMutex;
    use std::sync::mpsc;

    let raw = Arc::new(RawMutex::new());
    for round in 0..20 {
        raw.lock();
        let (release, released) = mpsc::channel::<()>();
        // Asleep on the lock's word, not on another futex (an allocator's lock, or the spin
        // policy's first measurement): only then is the fair unlock's hand-off owed to it.
        let sleeper = futexkit_support::blocked::spawn_blocked_on(&*raw, {
            let raw = Arc::clone(&raw);
            move || {
                raw.lock();
                // Held until the main thread has looked.
                released.recv().unwrap();
                // SAFETY: locked just above.
                unsafe { raw.unlock() };
            }
        });
        // SAFETY: this thread took the lock above.
        unsafe { raw.unlock_fair() };
        assert!(
            !raw.try_lock(),
            "round {round}: the lock was free after a fair unlock with a sleeper"
        );
        release.send(()).unwrap();
        sleeper.join().unwrap();
    }
    assert!(raw.try_lock(), "the lock ends free");
}

/// Where a sandbox refuses `FUTEX_WAIT_BITSET` (the wait every futexkit sleep makes), a waiter
/// cannot sleep: a timed wait must still end at its deadline, and a waiter must still get the
/// lock once it is free, each by looking again instead of sleeping.
#[test]
fn a_thread_refused_futex_wait_still_gets_the_lock_and_meets_its_deadlines() {
    const FUTEX_WAIT_BITSET: u32 = 9;
    let pair = Arc::new((Mutex::new(0u32), futexkit::Condvar::new()));
    let held = pair.0.lock().unwrap();
    let (timed_out_tx, timed_out_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn({
        let pair = Arc::clone(&pair);
        move || {
            futexkit_support::seccomp::refuse_futex_op(FUTEX_WAIT_BITSET);
            let deadline = futexkit::futex::Deadline::after(Duration::from_millis(1));
            assert_eq!(
                futexkit::futex::Futex::new(0).wait(0, Some(deadline)),
                Err(futexkit::futex::Error::PermissionDenied),
                "the filter refuses the wait every futexkit sleep makes"
            );
            let (mutex, condvar) = &*pair;
            assert!(matches!(
                mutex.try_lock_for(Duration::from_millis(20)),
                Err(TryLockError::WouldBlock)
            ));
            timed_out_tx.send(()).unwrap();
            let mut guard = mutex.lock().unwrap();
            *guard += 1;
            let (guard, timeout) = condvar
                .wait_timeout_while(guard, Duration::from_millis(20), |_| true)
                .unwrap();
            assert!(timeout.timed_out());
            *guard
        }
    });
    timed_out_rx.recv().unwrap();
    // Time for the waiter's lock to run out of spin and be refused its sleep (it gets the lock
    // either way).
    std::thread::sleep(Duration::from_millis(20));
    drop(held);
    assert_eq!(waiter.join().unwrap(), 1);
}
