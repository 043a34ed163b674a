//! futexkit::sync::RwLock against std::sync::RwLock's contract, its starvation bounds, and
//! under stress.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, TryLockError};
use std::thread;
use std::time::Duration;

use futexkit::sync::{Barrier, RwLock, RwLockReadGuard, RwLockWriteGuard};
use futexkit_support::blocked::{gettid, spawn_blocked, spawn_blocked_on, wait_until_blocked};

fn poison_by_writer<T: Send + Sync + 'static>(lock: &Arc<RwLock<T>>) {
    let lock = Arc::clone(lock);
    let _ = thread::spawn(move || {
        let _guard = lock.write().unwrap();
        panic!("poisoning on purpose");
    })
    .join();
}

#[test]
fn a_writer_panicking_poisons_a_reader_panicking_does_not() {
    let lock = Arc::new(RwLock::new(1));
    {
        let lock = Arc::clone(&lock);
        let _ = thread::spawn(move || {
            let _guard = lock.read().unwrap();
            panic!("a reader panics");
        })
        .join();
    }
    assert!(!lock.is_poisoned(), "a read guard does not poison");
    poison_by_writer(&lock);
    assert!(lock.is_poisoned());
    assert_eq!(**lock.read().unwrap_err().get_ref(), 1);
    assert_eq!(**lock.write().unwrap_err().get_ref(), 1);
    assert!(matches!(lock.try_read(), Err(TryLockError::Poisoned(_))));
    assert!(matches!(lock.try_write(), Err(TryLockError::Poisoned(_))));
    lock.clear_poison();
    assert!(!lock.is_poisoned());
    assert_eq!(*lock.read().unwrap(), 1);
}

#[test]
fn into_inner_and_get_mut_report_poison() {
    let mut lock = RwLock::new(vec![1]);
    lock.get_mut().unwrap().push(2);
    assert_eq!(lock.into_inner().unwrap(), vec![1, 2]);
    let lock = Arc::new(RwLock::new(3));
    poison_by_writer(&lock);
    let mut lock = Arc::try_unwrap(lock).unwrap();
    assert_eq!(*lock.get_mut().unwrap_err().into_inner(), 3);
    assert_eq!(lock.into_inner().unwrap_err().into_inner(), 3);
}

#[test]
fn get_cloned_set_and_replace_as_std_nightly() {
    let lock = Arc::new(RwLock::new(String::from("a")));
    assert_eq!(lock.get_cloned().unwrap(), "a");
    lock.set(String::from("b")).unwrap();
    assert_eq!(lock.replace(String::from("c")).unwrap(), "b");
    // get_cloned is a read: it runs beside another reader.
    let reader = lock.read().unwrap();
    assert_eq!(lock.get_cloned().unwrap(), "c");
    drop(reader);

    poison_by_writer(&lock);
    assert!(lock.get_cloned().is_err());
    assert_eq!(lock.set(String::from("d")).unwrap_err().into_inner(), "d");
    assert_eq!(
        lock.replace(String::from("e")).unwrap_err().into_inner(),
        "e"
    );
    lock.clear_poison();
    assert_eq!(
        lock.get_cloned().unwrap(),
        "c",
        "a poisoned set stores nothing"
    );
}

#[test]
fn try_variants_while_held() {
    let lock = RwLock::new(0);
    {
        let _r = lock.read().unwrap();
        assert!(lock.try_read().is_ok(), "readers share");
        assert!(matches!(lock.try_write(), Err(TryLockError::WouldBlock)));
        assert!(matches!(
            lock.try_write_for(Duration::from_millis(5)),
            Err(TryLockError::WouldBlock)
        ));
    }
    {
        let _w = lock.write().unwrap();
        assert!(matches!(lock.try_read(), Err(TryLockError::WouldBlock)));
        assert!(matches!(lock.try_write(), Err(TryLockError::WouldBlock)));
        assert!(matches!(
            lock.try_read_for(Duration::from_millis(5)),
            Err(TryLockError::WouldBlock)
        ));
    }
    assert!(lock.try_write().is_ok());
}

#[test]
fn timed_locks_succeed_when_the_holder_lets_go() {
    let lock = Arc::new(RwLock::new(0));
    let writer = lock.write().unwrap();
    let waiter = {
        let lock = Arc::clone(&lock);
        spawn_blocked(move || {
            let r = lock.try_read_for(Duration::from_secs(30)).map(|g| *g);
            let w = lock.try_write_for(Duration::from_secs(30)).map(|g| *g);
            (r.ok(), w.ok())
        })
    };
    drop(writer);
    assert_eq!(waiter.join().unwrap(), (Some(0), Some(0)));
}

#[test]
fn a_waiting_writer_keeps_new_readers_out_and_gets_in_after_the_reader() {
    let lock = Arc::new(RwLock::new(0));
    let reader = lock.read().unwrap();
    let writer = {
        let lock = Arc::clone(&lock);
        spawn_blocked(move || *lock.write().unwrap() = 1)
    };
    // The writer waits: a new reader must not slip in ahead of it.
    assert!(matches!(lock.try_read(), Err(TryLockError::WouldBlock)));
    drop(reader);
    writer.join().unwrap();
    assert_eq!(*lock.read().unwrap(), 1);
}

#[test]
fn many_readers_hold_at_once() {
    const READERS: usize = 6;
    let lock = Arc::new(RwLock::new(7));
    let all_in = Arc::new(Barrier::new(READERS));
    let handles: Vec<_> = (0..READERS)
        .map(|_| {
            let (lock, all_in) = (Arc::clone(&lock), Arc::clone(&all_in));
            thread::spawn(move || {
                let guard = lock.read().unwrap();
                // Every reader reaches this point while holding its read lock.
                all_in.wait();
                *guard
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 7);
    }
}

#[test]
fn unsized_values_work() {
    let lock: &RwLock<[u32]> = &RwLock::new([1, 2, 3]);
    lock.write().unwrap()[1] = 5;
    assert_eq!(&*lock.read().unwrap(), &[1, 5, 3]);
    let boxed: Box<RwLock<dyn std::fmt::Debug + Send + Sync>> = Box::new(RwLock::new(4u8));
    assert_eq!(format!("{:?}", &*boxed.read().unwrap()), "4");
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
    drop(RwLock::new(Counted));
    let lock = RwLock::new(Counted);
    let inner = lock.into_inner().unwrap();
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    drop(inner);
    assert_eq!(DROPS.load(Ordering::SeqCst), 2);
}

#[test]
fn downgrade_keeps_writers_out_and_lets_readers_in() {
    let lock = Arc::new(RwLock::new(0));
    let mut w = lock.write().unwrap();
    *w = 1;
    let reader = {
        let lock = Arc::clone(&lock);
        spawn_blocked(move || *lock.read().unwrap())
    };
    let r = RwLockWriteGuard::downgrade(w);
    // The reader that waited is let in; no writer is.
    assert_eq!(reader.join().unwrap(), 1);
    assert!(matches!(lock.try_write(), Err(TryLockError::WouldBlock)));
    assert_eq!(*r, 1);
    drop(r);
    assert!(lock.try_write().is_ok());
}

#[test]
fn debug_default_from_and_display_match_std() {
    let ours = RwLock::new(vec![1, 2]);
    let std = std::sync::RwLock::new(vec![1, 2]);
    assert_eq!(format!("{ours:?}"), format!("{std:?}"));
    {
        let (w1, w2) = (ours.write().unwrap(), std.write().unwrap());
        assert_eq!(format!("{ours:?}"), format!("{std:?}"));
        assert_eq!(format!("{w1:?}"), format!("{w2:?}"));
    }
    let ours = Arc::new(RwLock::new(0));
    let std = Arc::new(std::sync::RwLock::new(0));
    poison_by_writer(&ours);
    {
        let std = Arc::clone(&std);
        let _ = thread::spawn(move || {
            let _g = std.write().unwrap();
            panic!("poisoning on purpose");
        })
        .join();
    }
    assert_eq!(format!("{ours:#?}"), format!("{std:#?}"));
    assert_eq!(*RwLock::<u8>::default().read().unwrap(), 0);
    assert_eq!(*RwLock::from(3).read().unwrap(), 3);
    assert_eq!(RwLock::new("x").read().unwrap().to_string(), "x");
    assert_eq!(RwLock::new("y").write().unwrap().to_string(), "y");
}

#[test]
fn auto_traits_and_size_match_std() {
    fn send_sync<T: Send + Sync>() {}
    fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}
    fn sync<T: Sync>() {}
    send_sync::<RwLock<u32>>();
    unwind_safe::<RwLock<u32>>();
    sync::<RwLockReadGuard<'static, u32>>();
    sync::<RwLockWriteGuard<'static, u32>>();
    // With the deadlock checks, each lock carries its number for them.
    if !cfg!(feature = "deadlock") {
        assert!(std::mem::size_of::<RwLock<()>>() <= std::mem::size_of::<std::sync::RwLock<()>>());
    }
    static STATIC: RwLock<u32> = RwLock::new(5);
    assert_eq!(*STATIC.read().unwrap(), 5);
}

/// Readers overlap so that, without writer preference, the count would never drop to zero: a
/// writer must still get in (the test hangs, and times out, if it does not).
#[test]
fn a_stream_of_readers_does_not_starve_a_writer() {
    let lock = Arc::new(RwLock::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (lock, stop) = (Arc::clone(&lock), Arc::clone(&stop));
            thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = lock.read().unwrap();
                    // Hold long enough that another reader is always inside.
                    thread::sleep(Duration::from_micros(200));
                    drop(g);
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    for i in 1..=20 {
        *lock.write().unwrap() = i;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*lock.read().unwrap(), 20);
}

/// Writers follow one another with no gap: a reader waiting meanwhile must still get in.
#[test]
fn a_stream_of_writers_does_not_starve_a_reader() {
    let lock = Arc::new(RwLock::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let (lock, stop) = (Arc::clone(&lock), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut g = lock.write().unwrap();
                    *g += 1;
                    thread::sleep(Duration::from_micros(200));
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    for _ in 0..20 {
        let seen = *lock.read().unwrap();
        assert!(seen > 0);
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
}

/// Many threads, mixed reads, writes, timed tries and downgrades: no writer ever alongside a
/// reader or another writer, and the count of writes is exact.
#[test]
fn stress_keeps_every_invariant() {
    let threads = thread::available_parallelism().map_or(2, |n| n.get()) * 4;
    let threads = threads.clamp(8, 64);
    const ROUNDS: usize = 4000;
    struct Shared {
        lock: RwLock<u64>,
        readers_in: AtomicUsize,
        writers_in: AtomicUsize,
    }
    let shared = Arc::new(Shared {
        lock: RwLock::new(0),
        readers_in: AtomicUsize::new(0),
        writers_in: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                let mut writes = 0u64;
                for i in 0..ROUNDS {
                    let writer_inside = |s: &Shared| s.writers_in.load(Ordering::SeqCst);
                    match (t + i) % 7 {
                        0 | 1 => {
                            let mut g = shared.lock.write().unwrap();
                            assert_eq!(shared.writers_in.fetch_add(1, Ordering::SeqCst), 0);
                            assert_eq!(shared.readers_in.load(Ordering::SeqCst), 0);
                            *g += 1;
                            writes += 1;
                            shared.writers_in.fetch_sub(1, Ordering::SeqCst);
                        }
                        2 => {
                            if let Ok(mut g) = shared.lock.try_write_for(Duration::from_micros(50))
                            {
                                assert_eq!(shared.writers_in.fetch_add(1, Ordering::SeqCst), 0);
                                assert_eq!(shared.readers_in.load(Ordering::SeqCst), 0);
                                *g += 1;
                                writes += 1;
                                shared.writers_in.fetch_sub(1, Ordering::SeqCst);
                            }
                        }
                        3 => {
                            let mut g = shared.lock.write().unwrap();
                            assert_eq!(shared.readers_in.load(Ordering::SeqCst), 0);
                            *g += 1;
                            writes += 1;
                            let r = RwLockWriteGuard::downgrade(g);
                            shared.readers_in.fetch_add(1, Ordering::SeqCst);
                            assert_eq!(writer_inside(&shared), 0);
                            let _ = *r;
                            shared.readers_in.fetch_sub(1, Ordering::SeqCst);
                        }
                        4 => {
                            if let Ok(g) = shared.lock.try_read_for(Duration::from_micros(50)) {
                                shared.readers_in.fetch_add(1, Ordering::SeqCst);
                                assert_eq!(writer_inside(&shared), 0);
                                let _ = *g;
                                shared.readers_in.fetch_sub(1, Ordering::SeqCst);
                            }
                        }
                        _ => {
                            let g = shared.lock.read().unwrap();
                            shared.readers_in.fetch_add(1, Ordering::SeqCst);
                            assert_eq!(writer_inside(&shared), 0);
                            let _ = *g;
                            shared.readers_in.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                }
                writes
            })
        })
        .collect();
    let writes: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(*shared.lock.read().unwrap(), writes);
    assert!(shared.lock.try_write().is_ok(), "the lock ends free");
}

/// A reader asleep behind a writer is woken by its unlock (checked asleep first).
#[test]
fn a_sleeping_reader_is_woken_by_the_write_unlock() {
    let lock = Arc::new(RwLock::new(0));
    let writer = lock.write().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let lock = Arc::clone(&lock);
        thread::spawn(move || {
            tx.send(gettid()).unwrap();
            *lock.read().unwrap()
        })
    };
    wait_until_blocked(rx.recv().unwrap());
    drop(writer);
    assert_eq!(reader.join().unwrap(), 0);
}

/// Upgradable reads through the raw API: shared with plain readers, exclusive of each other
/// and of writers. An upgrade sleeps until the last plain reader leaves (that reader's unlock
/// wakes it) and lets in no writer, although one was asleep before it.
#[test]
fn an_upgrade_waits_for_the_reader_and_lets_no_writer_in() {
    use futexkit::raw::RawRwLock;
    use std::sync::mpsc;

    let raw = Arc::new(RawRwLock::new());
    raw.upgradable_read();
    assert!(
        !raw.try_upgradable_read(),
        "one upgradable reader at a time"
    );
    assert!(!raw.try_write());
    let (go, leave) = mpsc::channel::<()>();
    let (entered, has_entered) = mpsc::channel::<()>();
    let reader = thread::spawn({
        let raw = Arc::clone(&raw);
        move || {
            assert!(
                raw.try_read(),
                "a plain reader shares with the upgradable one"
            );
            entered.send(()).unwrap();
            leave.recv().unwrap();
            // SAFETY: taken just above.
            unsafe { raw.read_unlock() };
        }
    });
    has_entered.recv().unwrap();
    // SAFETY: this thread holds the upgradable read; another thread holds a plain one.
    assert!(!unsafe { raw.try_upgrade() }, "an upgrade beside a reader");
    let written = Arc::new(AtomicBool::new(false));
    let writer = spawn_blocked({
        let (raw, written) = (Arc::clone(&raw), Arc::clone(&written));
        move || {
            raw.write();
            written.store(true, Ordering::Relaxed);
            // SAFETY: taken just above.
            unsafe { raw.write_unlock() };
        }
    });
    // Let the reader go once this thread sleeps in the upgrade.
    let upgrader = gettid();
    let releaser = thread::spawn(move || {
        wait_until_blocked(upgrader);
        go.send(()).unwrap();
    });
    // SAFETY: this thread holds the upgradable read; then the write lock.
    unsafe {
        raw.upgrade();
        assert!(
            !written.load(Ordering::Relaxed),
            "a writer came in during the upgrade"
        );
        raw.write_unlock();
    }
    releaser.join().unwrap();
    reader.join().unwrap();
    writer.join().unwrap();
    assert!(written.load(Ordering::Relaxed));
    assert!(raw.try_write(), "the lock ends free");
}

/// `RawRwLock::write_unlock_fair` with one thread asleep taking the lock in `mode`, round
/// after round: the lock goes to that thread, so no other can take it a moment later. (A plain
/// unlock releases it: the unlocking thread could take it straight back.)
fn a_fair_write_unlock_hands_the_lock_to_the_sleeper(mode: Mode) {
    use futexkit::raw::RawRwLock;
    use std::sync::mpsc;

    let raw = Arc::new(RawRwLock::new());
    for round in 0..20 {
        raw.write();
        let (release, released) = mpsc::channel::<()>();
        // Asleep on the lock's word, not on another futex (an allocator's lock, or the spin
        // policy's first measurement): only then is the fair unlock's hand-off owed to it.
        let sleeper = spawn_blocked_on(&*raw, {
            let raw = Arc::clone(&raw);
            move || {
                mode.lock(&raw);
                released.recv().unwrap();
                // SAFETY: taken just above.
                unsafe { mode.unlock(&raw) };
            }
        });
        // SAFETY: this thread took the write lock above.
        unsafe { raw.write_unlock_fair() };
        assert!(
            !raw.try_write(),
            "round {round}: the lock was free after a fair unlock with a {mode:?} asleep"
        );
        release.send(()).unwrap();
        sleeper.join().unwrap();
    }
    assert!(raw.try_write(), "the lock ends free");
}

/// How the sleeper of `a_fair_write_unlock_hands_the_lock_to_the_sleeper` takes the lock.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Reader,
    Writer,
}

impl Mode {
    fn lock(self, raw: &futexkit::raw::RawRwLock) {
        match self {
            Mode::Reader => raw.read(),
            Mode::Writer => raw.write(),
        }
    }

    /// # Safety
    ///
    /// The caller holds `raw` in this mode.
    unsafe fn unlock(self, raw: &futexkit::raw::RawRwLock) {
        // SAFETY: the caller holds `raw` in this mode.
        unsafe {
            match self {
                Mode::Reader => raw.read_unlock(),
                Mode::Writer => raw.write_unlock(),
            }
        }
    }
}

/// With a reader asleep and no writer waiting, the reader gets the lock in a read phase.
#[test]
fn a_fair_write_unlock_hands_the_lock_to_a_sleeping_reader() {
    a_fair_write_unlock_hands_the_lock_to_the_sleeper(Mode::Reader);
}

/// With a writer asleep and no reader waiting, the lock is handed to that writer.
#[test]
fn a_fair_write_unlock_hands_the_lock_to_a_sleeping_writer() {
    a_fair_write_unlock_hands_the_lock_to_the_sleeper(Mode::Writer);
}

/// The reader count's limit: untimed reads panic there (documented), the bounded attempts fail.
/// (Not with the deadlock checks, which would record all 33 million holds.)
#[test]
#[cfg(not(feature = "deadlock"))]
fn bounded_reads_fail_at_the_reader_limit() {
    let raw = futexkit::raw::RawRwLock::new();
    let mut held = 0u64;
    while raw.try_read() {
        held += 1;
    }
    assert_eq!(held, (1 << 25) - 2, "the count's limit");
    assert!(!raw.try_read_for(Duration::from_millis(1)));
    assert!(!raw.try_read_until(std::time::Instant::now() + Duration::from_millis(1)));
    assert!(!raw.try_upgradable_read_for(Duration::from_millis(1)));
    assert!(!raw.try_upgradable_read_until(std::time::Instant::now()));
    let reader = std::panic::catch_unwind(|| raw.read());
    assert!(reader.is_err(), "an untimed read at the limit panics");
    for _ in 0..held {
        // SAFETY: this thread holds `held` read locks on `raw`.
        unsafe { raw.read_unlock() };
    }
    assert!(raw.try_write());
}

/// A timed writer that gives up clears its waiting bit, which keeps readers out, even where the
/// kernel refuses it `FUTEX_WAKE_OP` (a sandbox's seccomp policy): a reader arriving after it
/// gets in beside the reader that held the lock all along.
#[test]
fn a_writer_giving_up_lets_readers_in_where_futex_wake_op_is_refused() {
    use futexkit::raw::RawRwLock;
    use futexkit_support::seccomp::without_futex_wake_op;

    let lock = RawRwLock::new();
    lock.read();
    let gave_up = without_futex_wake_op(|| !lock.try_write_for(Duration::from_millis(50)));
    assert!(gave_up, "a reader holds the lock");
    assert!(
        lock.try_read_for(Duration::from_secs(60)),
        "no writer waits any more"
    );
    // SAFETY: two reads taken above, by this thread.
    unsafe {
        lock.read_unlock();
        lock.read_unlock();
    }
}
