//! futexkit::shared within one process: regions (building, adopting, refusing bad headers,
//! typed lookups), and each lock's contract with threads, including a holder thread that exits
//! holding a lock (its guard leaked), which the kernel treats as a death. Deaths of processes,
//! killed at every instruction, are in tests/shared_kill.rs.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futexkit::raw::{BarrierError, RawSharedMutex, BARRIER_MAX_PARTIES, READER_SLOTS};
use futexkit::shared::{LockError, ObjectKind, Plain, Region, RegionError, SharedMutex};

/// Long enough that reaching it means a hang, not a slow machine.
const HANG: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct Pair {
    a: u64,
    b: u64,
}

// SAFETY: two u64s, 16 bytes, no padding; every bit pattern is a value.
unsafe impl Plain for Pair {}

#[test]
fn a_region_is_built_adopted_and_looked_up_by_name_and_type() {
    let region = Region::builder()
        .mutex("pair", Pair { a: 1, b: 2 })
        .condvar("cv")
        .rwlock("table", [7u32; 10])
        .barrier("start", 3)
        .mutex("byte", 5u8)
        .build()
        .unwrap();
    let kinds: Vec<_> = region.objects().collect();
    assert_eq!(
        kinds,
        [
            ("pair", ObjectKind::Mutex),
            ("cv", ObjectKind::Condvar),
            ("table", ObjectKind::RwLock),
            ("start", ObjectKind::Barrier),
            ("byte", ObjectKind::Mutex),
        ]
    );
    let adopted = Region::from_fd(region.fd().try_clone_to_owned().unwrap()).unwrap();
    assert_eq!(adopted.objects().count(), 5);
    assert_eq!(
        adopted.mutex::<Pair>("pair").unwrap().lock().unwrap().get(),
        Pair { a: 1, b: 2 }
    );
    assert_eq!(
        adopted
            .rwlock::<[u32; 10]>("table")
            .unwrap()
            .read()
            .unwrap()
            .get(),
        [7; 10]
    );
    assert_eq!(
        adopted.mutex::<u8>("byte").unwrap().lock().unwrap().get(),
        5
    );
    assert_eq!(adopted.barrier("start").unwrap().parties().unwrap(), 3);
    adopted.condvar("cv").unwrap().notify_all();

    // One mapping's writes are the other's.
    region
        .mutex::<Pair>("pair")
        .unwrap()
        .lock()
        .unwrap()
        .set(Pair { a: 9, b: 9 });
    assert_eq!(
        adopted.mutex::<Pair>("pair").unwrap().lock().unwrap().get(),
        Pair { a: 9, b: 9 }
    );
}

#[test]
fn lookups_check_the_name_kind_and_type() {
    let region = Region::builder()
        .mutex("m", 0u64)
        .condvar("c")
        .build()
        .unwrap();
    assert!(
        matches!(region.mutex::<u64>("nope"), Err(RegionError::NotFound(name)) if name == "nope")
    );
    assert!(matches!(
        region.condvar("m"),
        Err(RegionError::WrongKind {
            expected: ObjectKind::Condvar,
            found: ObjectKind::Mutex,
            ..
        })
    ));
    assert!(matches!(
        region.mutex::<u32>("m"),
        Err(RegionError::WrongType {
            expected: (4, 4),
            found: (8, 8),
            ..
        })
    ));
    assert!(matches!(
        region.rwlock::<u64>("m"),
        Err(RegionError::WrongKind { .. })
    ));
    // Every error has a message.
    let message = region.mutex::<u32>("m").unwrap_err().to_string();
    assert!(message.contains("\"m\""), "{message}");
}

#[test]
fn the_builder_refuses_bad_names_parties_and_alignments() {
    #[derive(Clone, Copy)]
    #[repr(C, align(128))]
    struct Wide([u8; 128]);
    // SAFETY: 128 bytes, no padding, any pattern valid (alignment 128, which Plain forbids, is
    // exactly what the builder must refuse).
    unsafe impl Plain for Wide {}

    let long = "x".repeat(33);
    assert!(matches!(
        Region::builder().mutex("", 0u8).build(),
        Err(RegionError::BadName(_))
    ));
    assert!(matches!(
        Region::builder().mutex(&long, 0u8).build(),
        Err(RegionError::BadName(_))
    ));
    assert!(Region::builder().mutex(&long[..32], 0u8).build().is_ok());
    assert!(matches!(
        Region::builder().mutex("a", 0u8).condvar("a").build(),
        Err(RegionError::BadName(name)) if name == "a"
    ));
    assert!(matches!(
        Region::builder().barrier("b", 0).build(),
        Err(RegionError::BadParties(0))
    ));
    assert!(matches!(
        Region::builder()
            .barrier("b", BARRIER_MAX_PARTIES + 1)
            .build(),
        Err(RegionError::BadParties(_))
    ));
    assert!(matches!(
        Region::builder().mutex("w", Wide([0; 128])).build(),
        Err(RegionError::OverAligned(128))
    ));
    for (builder, kind, count) in [
        (
            Region::builder().semaphore("s", 0),
            ObjectKind::Semaphore,
            0,
        ),
        (
            Region::builder().semaphore("s", futexkit::raw::SEMAPHORE_MAX_PERMITS + 1),
            ObjectKind::Semaphore,
            futexkit::raw::SEMAPHORE_MAX_PERMITS + 1,
        ),
        (
            Region::builder().latch("l", futexkit::raw::MAX_LATCH_COUNT + 1),
            ObjectKind::Latch,
            futexkit::raw::MAX_LATCH_COUNT as usize + 1,
        ),
    ] {
        match builder.build() {
            Err(RegionError::BadCount { kind: k, count: c }) => {
                assert_eq!((k, c), (kind, count));
            }
            other => panic!("{kind}: {other:?}"),
        }
    }
    // An empty region is a region.
    assert_eq!(Region::builder().build().unwrap().objects().count(), 0);
}

/// A memfd holding `bytes`, sealed (or not) as a region's must be.
fn memfd_with(bytes: &[u8], seal: bool) -> OwnedFd {
    // SAFETY: a plain memfd_create with a NUL-terminated name; the fd is ours.
    let fd = unsafe {
        let raw = libc::memfd_create(
            c"crafted".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        );
        assert!(raw >= 0);
        OwnedFd::from_raw_fd(raw)
    };
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes).unwrap();
    let fd = OwnedFd::from(file);
    if seal {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on our own fd with a plain integer argument.
        let ret = unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            )
        };
        assert_eq!(ret, 0);
    }
    fd
}

/// The bytes of a real region, to be altered.
fn region_bytes(region: &Region) -> Vec<u8> {
    let mut file = std::fs::File::from(region.fd().try_clone_to_owned().unwrap());
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
    bytes
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_ne_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_ne_bytes());
}

fn adopt(bytes: &[u8]) -> Result<Region, RegionError> {
    Region::from_fd(memfd_with(bytes, true))
}

#[test]
fn adopting_checks_the_file_and_every_field_of_the_header() {
    let region = Region::builder()
        .mutex("m", 0u64)
        .barrier("b", 2)
        .build()
        .unwrap();
    let good = region_bytes(&region);
    assert!(adopt(&good).is_ok());
    // Layout (src/shared/region.rs): header 64 bytes, then 64-byte entries: name 0..32,
    // kind 32, value_size 36, value_align 40, param 44, offset 48, len 56.
    let entry = |i: usize| 64 + 64 * i;
    let bad_header = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = good.clone();
        edit(&mut bytes);
        match adopt(&bytes) {
            Err(RegionError::BadHeader(why)) => why,
            other => panic!("accepted a bad header: {other:?}"),
        }
    };
    bad_header(&|b| b[0] = b'X');
    bad_header(&|b| put_u32(b, 8, 2)); // a version other than this build's: the previous one
    bad_header(&|b| put_u64(b, 16, 1 << 20));
    bad_header(&|b| put_u32(b, 12, 100_000));
    bad_header(&|b| put_u32(b, 12, 1000));
    bad_header(&|b| b[entry(0)] = 0);
    bad_header(&|b| b[entry(0)..entry(0) + 4].copy_from_slice(&[0xff, 0xfe, 0xfd, 0]));
    bad_header(&|b| b[entry(1)] = b'm');
    bad_header(&|b| put_u32(b, entry(0) + 32, 9));
    bad_header(&|b| put_u32(b, entry(0) + 36, 16));
    bad_header(&|b| put_u32(b, entry(0) + 40, 3));
    bad_header(&|b| put_u32(b, entry(0) + 40, 128));
    bad_header(&|b| put_u32(b, entry(1) + 44, 0));
    bad_header(&|b| put_u32(b, entry(1) + 44, 65));
    bad_header(&|b| put_u64(b, entry(0) + 48, 8));
    bad_header(&|b| put_u64(b, entry(0) + 48, 65));
    bad_header(&|b| put_u64(b, entry(0) + 48, u64::MAX - 63));
    bad_header(&|b| put_u64(b, entry(1) + 48, 1 << 40));
    bad_header(&|b| put_u64(b, entry(0) + 56, 41));
    let overlapping = {
        let mut bytes = good.clone();
        let first = u64::from_ne_bytes(bytes[entry(0) + 48..entry(0) + 56].try_into().unwrap());
        put_u64(&mut bytes, entry(1) + 48, first);
        bytes
    };
    assert!(matches!(
        adopt(&overlapping),
        Err(RegionError::BadHeader(_))
    ));
    assert!(matches!(adopt(&good[..32]), Err(RegionError::BadHeader(_))));
    // The file itself: sealed, shmem.
    assert!(matches!(
        Region::from_fd(memfd_with(&good, false)),
        Err(RegionError::NotSealed)
    ));
}

#[test]
fn a_mutex_counts_exactly_under_threads() {
    const THREADS: usize = 6;
    const EACH: u64 = 20_000;
    let region = Region::builder()
        .mutex("n", Pair::default())
        .build()
        .unwrap();
    let n = region.mutex::<Pair>("n").unwrap();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..EACH {
                    n.lock().unwrap().update(|p| {
                        // A torn update would show as a != b.
                        assert_eq!(p.a, p.b);
                        p.a += 1;
                        p.b += 1;
                    });
                }
            });
        }
    });
    let total = THREADS as u64 * EACH;
    assert_eq!(n.lock().unwrap().get(), Pair { a: total, b: total });
}

#[test]
fn try_lock_timed_lock_and_relocking_say_why() {
    let region = Region::builder().mutex("m", 0u32).build().unwrap();
    let m = region.mutex::<u32>("m").unwrap();
    let guard = m.lock().unwrap();
    assert!(m.is_locked());
    assert_eq!(m.raw().holder(), Some(futexkit::futex::current_tid()));
    assert!(matches!(m.lock(), Err(LockError::WouldDeadlock)));
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(m.try_lock(), Err(LockError::WouldBlock)));
            assert!(matches!(
                m.try_lock_for(Duration::from_millis(20)),
                Err(LockError::TimedOut)
            ));
            let past = std::time::Instant::now() - Duration::from_secs(1);
            assert!(matches!(m.try_lock_until(past), Err(LockError::TimedOut)));
        });
    });
    drop(guard);
    assert!(!m.is_locked());
    assert_eq!(m.raw().holder(), None);
    assert!(m.try_lock().is_ok());
    let message = LockError::<()>::TimedOut.to_string();
    assert!(message.contains("deadline"), "{message}");
    assert_eq!(format!("{:?}", m.try_lock().err()), "None");
}

/// Takes `m` in a thread that then exits without unlocking (its guard leaked): a death, to the
/// kernel, which marks the lock when the thread exits.
fn die_holding(m: &SharedMutex<u64>, set_to: u64) {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut guard = m.lock().unwrap();
            guard.set(set_to);
            std::mem::forget(guard);
        });
    });
}

#[test]
fn a_holder_thread_that_exits_is_reported_to_the_next_locker_once() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    die_holding(m, 41);
    let mut guard = match m.lock() {
        Err(LockError::OwnerDied(guard)) => guard,
        other => panic!("expected OwnerDied, got {:?}", other.map(|g| g.get())),
    };
    assert_eq!(
        guard.get(),
        41,
        "the dead holder's last write is there to repair"
    );
    guard.set(42);
    guard.mark_consistent();
    drop(guard);
    // Reported once: the next lock is clean.
    assert_eq!(m.lock().unwrap().get(), 42);
    // A death that nobody repaired is reported to the next, and the next.
    die_holding(m, 1);
    let first = m
        .lock()
        .err()
        .and_then(LockError::into_guard)
        .expect("OwnerDied");
    std::mem::forget(first); // dies too, in a way: this thread keeps it until...
    std::thread::scope(|s| {
        s.spawn(|| {
            // ...another thread tries: this thread still holds it.
            assert!(matches!(m.try_lock(), Err(LockError::WouldBlock)));
        });
    });
}

#[test]
fn an_unrepaired_lock_becomes_not_recoverable_for_every_waiter() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    die_holding(m, 7);
    let guard = m
        .lock()
        .err()
        .and_then(LockError::into_guard)
        .expect("OwnerDied");
    let woken = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let mut sleepers = Vec::new();
        for _ in 0..3 {
            let (tx, rx) = std::sync::mpsc::channel();
            let woken = &woken;
            sleepers.push(s.spawn(move || {
                tx.send(futexkit_support::blocked::gettid()).unwrap();
                let result = m.lock();
                woken.fetch_add(1, Ordering::Relaxed);
                assert!(
                    matches!(result, Err(LockError::NotRecoverable)),
                    "{:?}",
                    result.map(|g| g.get())
                );
            }));
            futexkit_support::blocked::wait_until_blocked(rx.recv().unwrap());
        }
        // Dropped without mark_consistent: nobody can take it again, and every sleeper hears.
        drop(guard);
        for sleeper in sleepers {
            sleeper.join().unwrap();
        }
    });
    assert_eq!(woken.load(Ordering::Relaxed), 3);
    assert!(m.is_not_recoverable());
    assert!(matches!(m.lock(), Err(LockError::NotRecoverable)));
    assert!(matches!(m.try_lock(), Err(LockError::NotRecoverable)));
    assert!(format!("{m:?}").contains("not_recoverable"));
}

#[test]
fn a_sleeping_waiter_is_woken_when_the_holder_thread_exits() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::mem::forget(m.lock().unwrap());
            held_tx.send(()).unwrap();
            exit_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = s.spawn(move || {
            tx.send(futexkit_support::blocked::gettid()).unwrap();
            m.try_lock_for(HANG)
                .err()
                .map(|e| e.into_guard().map(|mut g| g.mark_consistent()))
        });
        futexkit_support::blocked::wait_until_blocked(rx.recv().unwrap());
        exit_tx.send(()).unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            Some(Some(())),
            "the waiter got OwnerDied"
        );
    });
    assert!(m.lock().is_ok());
}

#[test]
fn a_condvar_hands_turns_between_threads_and_times_out() {
    let region = Region::builder()
        .mutex("turn", 0u64)
        .condvar("changed")
        .build()
        .unwrap();
    let turn = region.mutex::<u64>("turn").unwrap();
    let changed = region.condvar("changed").unwrap();
    const TURNS: u64 = 2_000;
    std::thread::scope(|s| {
        for me in 0..2u64 {
            s.spawn(move || {
                let mut guard = turn.lock().unwrap();
                loop {
                    let t = guard.get();
                    if t >= TURNS {
                        break;
                    }
                    if t % 2 == me {
                        guard.set(t + 1);
                        changed.notify_all();
                    } else {
                        guard = changed.wait(guard).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(turn.lock().unwrap().get(), TURNS);
    let guard = turn.lock().unwrap();
    let (guard, result) = changed
        .wait_timeout(guard, Duration::from_millis(10))
        .unwrap();
    assert!(result.timed_out());
    assert!(turn.raw().holder().is_some(), "held again after the wait");
    drop(guard);
}

#[test]
fn notify_one_wakes_one_and_notify_all_wakes_all() {
    let region = Region::builder()
        .mutex("go", 0u32)
        .condvar("cv")
        .build()
        .unwrap();
    let go = region.mutex::<u32>("go").unwrap();
    let cv = region.condvar("cv").unwrap();
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let mut tids = Vec::new();
        for _ in 0..4 {
            let (tx, rx) = std::sync::mpsc::channel();
            let done = &done;
            s.spawn(move || {
                tx.send(futexkit_support::blocked::gettid()).unwrap();
                let mut guard = go.lock().unwrap();
                while guard.get() == 0 {
                    guard = cv.wait(guard).unwrap();
                }
                guard.update(|g| *g -= 1);
                done.fetch_add(1, Ordering::Relaxed);
            });
            tids.push(rx.recv().unwrap());
        }
        for tid in tids {
            futexkit_support::blocked::wait_until_blocked(tid);
        }
        go.lock().unwrap().set(1);
        cv.notify_one();
        while done.load(Ordering::Relaxed) < 1 {
            std::thread::yield_now();
        }
        go.lock().unwrap().set(3);
        cv.notify_all();
    });
    assert_eq!(done.load(Ordering::Relaxed), 4);
}

#[test]
fn a_condvar_wait_reports_a_death_met_when_relocking() {
    let region = Region::builder()
        .mutex("m", 0u64)
        .condvar("cv")
        .build()
        .unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let cv = region.condvar("cv").unwrap();
    let guard = m.lock().unwrap();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        s.spawn(move || {
            rx.recv().unwrap();
            // Takes the mutex the waiter released, notifies, and exits holding it.
            let guard = m.lock().unwrap();
            cv.notify_one();
            std::mem::forget(guard);
        });
        tx.send(()).unwrap();
        let relocked = cv.wait_timeout(guard, HANG);
        let (mut guard, _) = relocked
            .err()
            .and_then(LockError::into_guard)
            .expect("OwnerDied");
        guard.mark_consistent();
    });
}

/// A value whose halves a writer keeps equal; a reader that sees them differ saw a write in
/// progress.
#[test]
fn an_rwlock_lets_readers_in_together_and_writers_alone() {
    let region = Region::builder()
        .rwlock("v", Pair::default())
        .build()
        .unwrap();
    let v = region.rwlock::<Pair>("v").unwrap();
    const WRITES: u64 = 3_000;
    let reads = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..WRITES {
                    v.write().unwrap().update(|p| {
                        assert_eq!(p.a, p.b);
                        p.a += 1;
                        std::hint::spin_loop();
                        p.b += 1;
                    });
                }
            });
        }
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..WRITES {
                    let pair = v.read().unwrap().get();
                    assert_eq!(pair.a, pair.b, "read a write in progress");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(v.read().unwrap().get().a, 2 * WRITES);
    assert_eq!(reads.load(Ordering::Relaxed), 4 * WRITES as usize);
}

#[test]
fn more_readers_than_slots_wait_for_a_slot_and_all_get_in() {
    let region = Region::builder().rwlock("v", 0u32).build().unwrap();
    let v = region.rwlock::<u32>("v").unwrap();
    let inside = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..READER_SLOTS + 8 {
            s.spawn(|| {
                for _ in 0..50 {
                    let guard = v.read().unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::Relaxed);
                    std::thread::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                }
            });
        }
    });
    assert!(most.load(Ordering::Relaxed) <= READER_SLOTS);
}

#[test]
fn rwlock_try_and_timed_calls_and_relocking_say_why() {
    let region = Region::builder().rwlock("v", 0u32).build().unwrap();
    let v = region.rwlock::<u32>("v").unwrap();
    let w = v.write().unwrap();
    assert!(matches!(v.read(), Err(LockError::WouldDeadlock)));
    assert!(matches!(v.write(), Err(LockError::WouldDeadlock)));
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(v.try_read(), Err(LockError::WouldBlock)));
            assert!(matches!(v.try_write(), Err(LockError::WouldBlock)));
            assert!(matches!(
                v.try_read_for(Duration::from_millis(10)),
                Err(LockError::TimedOut)
            ));
            assert!(matches!(
                v.try_write_for(Duration::from_millis(10)),
                Err(LockError::TimedOut)
            ));
        });
    });
    drop(w);
    let r = v.read().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(v.try_read().is_ok());
            assert!(matches!(v.try_write(), Err(LockError::WouldBlock)));
            assert!(matches!(
                v.try_write_for(Duration::from_millis(10)),
                Err(LockError::TimedOut)
            ));
            // The writer that gave up let readers back in.
            assert!(v.try_read().is_ok());
        });
    });
    assert!(matches!(v.write(), Err(LockError::WouldDeadlock)));
    drop(r);
    assert!(v.try_write().is_ok());
}

#[test]
fn a_writer_thread_that_exits_is_reported_to_readers_and_the_next_writer() {
    let region = Region::builder().rwlock("v", 0u64).build().unwrap();
    let v = region.rwlock::<u64>("v").unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut guard = v.write().unwrap();
            guard.set(13);
            std::mem::forget(guard);
        });
    });
    // Readers are told, with the value as the writer left it, until a writer repairs it.
    for _ in 0..2 {
        let reader = v
            .read()
            .err()
            .and_then(LockError::into_guard)
            .expect("OwnerDied");
        assert_eq!(reader.get(), 13);
    }
    let mut writer = v
        .write()
        .err()
        .and_then(LockError::into_guard)
        .expect("OwnerDied");
    writer.set(14);
    writer.mark_consistent();
    drop(writer);
    assert_eq!(v.read().unwrap().get(), 14);
    assert!(v.write().is_ok());
}

#[test]
fn a_reader_thread_that_exits_frees_its_slot_for_the_writer() {
    let region = Region::builder().rwlock("v", 0u64).build().unwrap();
    let v = region.rwlock::<u64>("v").unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::mem::forget(v.read().unwrap());
            held_tx.send(()).unwrap();
            exit_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = s.spawn(move || {
            tx.send(futexkit_support::blocked::gettid()).unwrap();
            v.try_write_for(HANG).map(|mut g| g.set(1)).is_ok()
        });
        futexkit_support::blocked::wait_until_blocked(rx.recv().unwrap());
        exit_tx.send(()).unwrap();
        assert!(
            writer.join().unwrap(),
            "the writer got in once the reader died"
        );
    });
    assert_eq!(v.read().unwrap().get(), 1);
}

#[test]
fn a_barrier_releases_rounds_with_one_leader_each() {
    const PARTIES: usize = 4;
    const ROUNDS: usize = 200;
    let region = Region::builder().barrier("b", PARTIES).build().unwrap();
    let b = region.barrier("b").unwrap();
    let leaders = AtomicUsize::new(0);
    let arrived = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..PARTIES {
            s.spawn(|| {
                let me = b.join().unwrap();
                for round in 0..ROUNDS {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    if me.wait().unwrap().is_leader() {
                        leaders.fetch_add(1, Ordering::Relaxed);
                    }
                    // Everyone of this round arrived before anyone left it.
                    assert!(arrived.load(Ordering::SeqCst) >= (round + 1) * PARTIES);
                    me.wait().unwrap();
                }
                std::mem::forget(me); // leaving would break the barrier for the others
            });
        }
    });
    assert_eq!(leaders.load(Ordering::Relaxed), ROUNDS);
}

#[test]
fn a_barrier_is_full_once_every_party_joined_and_a_thread_joins_once() {
    let region = Region::builder().barrier("b", 2).build().unwrap();
    let b = region.barrier("b").unwrap();
    let first = b.join().unwrap();
    assert_eq!(first.index(), 0);
    assert!(matches!(b.join(), Err(BarrierError::AlreadyJoined)));
    std::thread::scope(|s| {
        s.spawn(|| {
            let second = b.join().unwrap();
            assert_eq!(second.index(), 1);
            std::thread::scope(|s| {
                s.spawn(|| assert!(matches!(b.join(), Err(BarrierError::Full))));
            });
            std::mem::forget(second);
        });
    });
    std::mem::forget(first);
}

#[test]
fn leaving_timing_out_or_dying_breaks_a_barrier_for_the_others() {
    // Leaving.
    let region = Region::builder()
        .barrier("leave", 2)
        .barrier("timeout", 2)
        .barrier("die", 3)
        .build()
        .unwrap();
    let leave = region.barrier("leave").unwrap();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = s.spawn(move || {
            let me = leave.join().unwrap();
            tx.send(futexkit_support::blocked::gettid()).unwrap();
            me.wait_timeout(HANG)
        });
        let tid = rx.recv().unwrap();
        let me = leave.join().unwrap();
        futexkit_support::blocked::wait_until_blocked(tid);
        drop(me);
        assert!(matches!(waiter.join().unwrap(), Err(BarrierError::Broken)));
    });
    assert!(leave.is_broken());
    assert!(matches!(leave.join(), Err(BarrierError::Broken)));

    // A timeout.
    let timeout = region.barrier("timeout").unwrap();
    let me = timeout.join().unwrap();
    assert!(matches!(
        me.wait_timeout(Duration::from_millis(10)),
        Err(BarrierError::TimedOut)
    ));
    assert!(matches!(me.wait(), Err(BarrierError::Broken)));

    // A party thread that exits (its handle leaked) while two others wait.
    let die = region.barrier("die").unwrap();
    let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (joined_tx, joined_rx) = std::sync::mpsc::channel();
        s.spawn(move || {
            std::mem::forget(die.join().unwrap());
            joined_tx.send(()).unwrap();
            exit_rx.recv().unwrap();
        });
        joined_rx.recv().unwrap();
        let mut waiters = Vec::new();
        let mut tids = Vec::new();
        for _ in 0..2 {
            let (tx, rx) = std::sync::mpsc::channel();
            waiters.push(s.spawn(move || {
                let me = die.join().unwrap();
                tx.send(futexkit_support::blocked::gettid()).unwrap();
                let result = me.wait_timeout(HANG);
                std::mem::forget(me);
                result
            }));
            tids.push(rx.recv().unwrap());
        }
        for tid in tids {
            futexkit_support::blocked::wait_until_blocked(tid);
        }
        exit_tx.send(()).unwrap();
        for waiter in waiters {
            assert!(matches!(waiter.join().unwrap(), Err(BarrierError::Broken)));
        }
    });
}

#[test]
fn locks_in_memory_the_caller_mapped_work_across_fork() {
    let page = futexkit_support::shared::shared_page();
    // SAFETY: the page is ours, aligned, large enough; every process touches it only through
    // this SharedMutex.
    let m = unsafe {
        page.cast::<SharedMutex<u64>>().write(SharedMutex::new(0));
        SharedMutex::<u64>::from_ptr(page.cast())
    };
    let _ = m.lock(); // the thread's robust list, before the fork
                      // SAFETY: the child only locks the already-initialized mutex and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = match m.lock() {
            Ok(mut guard) => {
                guard.update(|n| *n += 1);
                0
            }
            Err(_) => 1,
        };
        // SAFETY: ends the child without the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: our child; a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    assert_eq!(m.lock().unwrap().get(), 1);
}

#[test]
fn a_writer_waiting_for_a_slot_passes_on_the_wake_a_reader_needed() {
    // Every reader slot taken; a writer waits for slot 0 (the first it looks at); then a reader
    // whose first choice is slot 0 finds every slot taken and waits for slot 0 too. Freeing the
    // slots wakes the writer first, which does not take slot 0: it must pass the wake on, or
    // that reader sleeps although the slot is free.
    let region = Region::builder().rwlock("v", 0u64).build().unwrap();
    let v = region.rwlock::<u64>("v").unwrap();
    std::thread::scope(|s| {
        let mut releases = Vec::new();
        for _ in 0..READER_SLOTS {
            let (held_tx, held_rx) = std::sync::mpsc::channel();
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            s.spawn(move || {
                let guard = v.read().unwrap();
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(guard);
            });
            held_rx.recv().unwrap();
            releases.push(release_tx);
        }
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let writer = s.spawn(move || {
            tid_tx.send(futexkit_support::blocked::gettid()).unwrap();
            v.try_write_for(HANG).map(|mut g| g.set(1)).is_ok()
        });
        futexkit_support::blocked::wait_until_blocked(tid_rx.recv().unwrap());
        // A reader thread whose id makes slot 0 its first choice: spawn until one comes.
        let late_reader = loop {
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let (go_tx, go_rx) = std::sync::mpsc::channel::<bool>();
            let candidate = s.spawn(move || {
                tid_tx.send(futexkit_support::blocked::gettid()).unwrap();
                // Long enough for any wake-up; reaching it means the wake was lost.
                go_rx.recv().unwrap() && v.try_read_for(Duration::from_secs(10)).is_ok()
            });
            let tid = tid_rx.recv().unwrap();
            let picked = tid as usize % READER_SLOTS == 0;
            go_tx.send(picked).unwrap();
            if picked {
                futexkit_support::blocked::wait_until_blocked(tid);
                break candidate;
            }
            candidate.join().unwrap();
        };
        for release in releases {
            release.send(()).unwrap();
        }
        assert!(writer.join().unwrap(), "the writer got the lock");
        assert!(
            late_reader.join().unwrap(),
            "the reader waiting for slot 0 was never woken"
        );
    });
    assert_eq!(v.read().unwrap().get(), 1);
}

#[test]
fn the_layouts_are_the_documented_ones() {
    use core::mem::{align_of, size_of};
    use futexkit::raw::{RawSharedBarrier, RawSharedCondvar, RawSharedRwLock};
    use futexkit::shared::{SharedBarrier, SharedCondvar, SharedRwLock};
    // Every process that maps a region must agree on these (src/raw/shared/*.rs).
    assert_eq!(
        (size_of::<RawSharedMutex>(), align_of::<RawSharedMutex>()),
        (40, 8)
    );
    assert_eq!(
        (
            size_of::<RawSharedCondvar>(),
            align_of::<RawSharedCondvar>()
        ),
        (8, 4)
    );
    assert_eq!(
        (size_of::<RawSharedRwLock>(), align_of::<RawSharedRwLock>()),
        (64 * (1 + READER_SLOTS), 64)
    );
    assert_eq!(
        (
            size_of::<RawSharedBarrier>(),
            align_of::<RawSharedBarrier>()
        ),
        (2624, 64)
    );
    // The typed ones: the raw lock first, then the value (`#[repr(C)]`).
    assert_eq!(size_of::<SharedMutex<u64>>(), 48);
    assert_eq!(size_of::<SharedMutex<[u8; 3]>>(), 48);
    assert_eq!(size_of::<SharedMutex<Pair>>(), 56);
    assert_eq!(size_of::<SharedCondvar>(), 8);
    assert_eq!(size_of::<SharedRwLock<u64>>(), 64 * (1 + READER_SLOTS) + 64);
    assert_eq!(size_of::<SharedBarrier>(), size_of::<RawSharedBarrier>());
    {
        use futexkit::raw::RawSharedSemaphore;
        use futexkit::shared::{SharedEvent, SharedLatch, SharedSemaphore};
        assert_eq!(
            (
                size_of::<RawSharedSemaphore>(),
                align_of::<RawSharedSemaphore>()
            ),
            (2624, 64)
        );
        assert_eq!(
            size_of::<SharedSemaphore>(),
            size_of::<RawSharedSemaphore>()
        );
        assert_eq!(
            (size_of::<SharedLatch>(), align_of::<SharedLatch>()),
            (4, 4)
        );
        assert_eq!(
            (size_of::<SharedEvent>(), align_of::<SharedEvent>()),
            (4, 4)
        );
    }
    // The header and each table entry are 64 bytes; objects start 64-aligned after them.
    let region = Region::builder()
        .mutex("a", 0u8)
        .condvar("b")
        .build()
        .unwrap();
    assert_eq!(region_bytes(&region).len(), 64 + 2 * 64 + 64 + 64);
}

/// The toolbox's kinds: each found under its name and kind only, listed by `objects`, and
/// usable from the region that made them.
#[test]
fn semaphores_latches_and_events_live_in_regions() {
    let region = Region::builder()
        .semaphore("pool", 3)
        .latch("ready", 1)
        .event("go", true)
        .build()
        .unwrap();
    let kinds: Vec<_> = region
        .objects()
        .map(|(name, kind)| (name.to_owned(), kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("pool".to_owned(), ObjectKind::Semaphore),
            ("ready".to_owned(), ObjectKind::Latch),
            ("go".to_owned(), ObjectKind::Event),
        ]
    );
    assert!(matches!(
        region.latch("go"),
        Err(RegionError::WrongKind {
            expected: ObjectKind::Latch,
            found: ObjectKind::Event,
            ..
        })
    ));
    let pool = region.semaphore("pool").unwrap();
    assert_eq!(pool.permits(), Ok(3));
    let held: Vec<_> = (0..3).map(|_| pool.acquire().unwrap()).collect();
    assert_eq!(pool.available_permits(), 0);
    assert!(matches!(
        pool.try_acquire_for(Duration::from_millis(5)),
        Err(futexkit::raw::SemaphoreError::TimedOut)
    ));
    drop(held);
    assert_eq!(pool.available_permits(), 3);
    let ready = region.latch("ready").unwrap();
    assert_eq!(ready.count(), 1);
    ready.count_down().unwrap();
    ready.wait();
    let go = region.event("go").unwrap();
    assert!(go.wait_timeout(Duration::ZERO));
    go.reset();
    assert!(!go.wait_timeout(Duration::from_millis(1)));
    assert_eq!(format!("{go:?}"), "SharedEvent { set: false }");
    // Adopted from the fd, as another process would.
    let again = Region::from_fd(region.inheritable_fd().unwrap()).unwrap();
    assert_eq!(again.latch("ready").unwrap().count(), 0);
}

/// A mutex dropped by the thread that holds it leaves that thread's robust list, also when a
/// peer overwrote its word meanwhile (any value may be written there): the kernel, which walks
/// the list at the thread's death and marks every word in it that holds the thread's id, then
/// finds nothing of the lock in memory that is no longer the lock's. The memory is kept, and
/// the thread's id stored where the word was, as the memory's next owner might.
#[test]
fn a_dropped_mutex_leaves_its_holders_robust_list_even_with_its_word_overwritten() {
    use std::sync::atomic::AtomicU32;
    const OWNER_DIED: u32 = 1 << 30;
    assert_eq!(
        std::mem::size_of::<RawSharedMutex>(),
        40,
        "the memory below is one lock"
    );
    let mut word_index = None;
    for overwritten in [false, true] {
        let memory: &'static mut [u64; 5] = Box::leak(Box::new([0; 5]));
        let addr = memory.as_mut_ptr() as usize;
        let (index, tid) = std::thread::spawn(move || {
            let lock = addr as *mut RawSharedMutex;
            // SAFETY: 8-aligned, 40 bytes (the type's size), leaked, so valid for good; the
            // lock is made in place and dropped there, never moved.
            unsafe { lock.write(RawSharedMutex::new()) };
            // SAFETY: made just above; this reference ends before the drop below.
            let held = unsafe { &*lock };
            held.lock().unwrap();
            let tid = held.holder().unwrap();
            // SAFETY: the lock is all atomics, and these are its 40 bytes.
            let words = unsafe { std::slice::from_raw_parts(addr as *const AtomicU32, 10) };
            let index = words
                .iter()
                .position(|w| w.load(Ordering::Relaxed) == tid)
                .unwrap();
            if overwritten {
                words[index].store(0, Ordering::Relaxed);
            }
            // SAFETY: made in place above, dropped once, not used after.
            unsafe { lock.drop_in_place() };
            words[index].store(tid, Ordering::Relaxed);
            (index, tid)
        })
        .join()
        .unwrap();
        // SAFETY: the memory is leaked, and the thread that wrote it has been joined.
        let words = unsafe { std::slice::from_raw_parts(addr as *const AtomicU32, 10) };
        assert_eq!(
            words[index].load(Ordering::Relaxed),
            tid,
            "overwritten: {overwritten}: the kernel found the dropped lock in the robust list \
             (OWNER_DIED is {OWNER_DIED:#x})"
        );
        word_index = Some(index);
    }
    // A word a peer set to this thread's id, on a lock this thread does not hold, is no
    // leaked hold of a live thread: the drop neither aborts nor unlinks anything.
    // SAFETY: boxed before any lock, never moved out.
    let lock = Box::new(unsafe { RawSharedMutex::new() });
    // SAFETY: the lock is all atomics, and these are its 40 bytes.
    let words = unsafe {
        std::slice::from_raw_parts(&*lock as *const RawSharedMutex as *const AtomicU32, 10)
    };
    words[word_index.unwrap()].store(futexkit::futex::current_tid(), Ordering::Relaxed);
    assert_eq!(lock.holder(), Some(futexkit::futex::current_tid()));
    drop(lock);
}

/// A shared mutex looked at (`Debug`) by a thread that cannot take robust locks (a sandbox
/// refuses it the robust-list calls) says why, not that the lock is held.
#[test]
fn a_shared_mutex_debug_on_a_thread_without_robust_locks_says_why() {
    // SAFETY: boxed before any lock, never moved out.
    let mutex = Box::new(unsafe { SharedMutex::new(7u32) });
    let printed = std::thread::scope(|s| {
        s.spawn(|| {
            futexkit_support::seccomp::refuse_syscall(libc::SYS_get_robust_list);
            futexkit_support::seccomp::refuse_syscall(libc::SYS_set_robust_list);
            format!("{mutex:?}")
        })
        .join()
        .unwrap()
    });
    assert!(!mutex.is_locked());
    assert!(!printed.contains("<locked>"), "{printed}");
    assert!(printed.contains("robust"), "{printed}");
}

/// A shared mutex dropped while held: this thread's own hold is released (its robust-list link
/// removed with it), and a hold of another live thread of this process, whose list the kernel
/// would walk through the freed memory, aborts the process.
#[test]
fn a_shared_mutex_dropped_while_held() {
    const CHILD: &str = "FUTEXKIT_TEST_DROP_HELD_BY_ANOTHER";
    if std::env::var_os(CHILD).is_some() {
        // SAFETY: in an Arc before its first lock, never moved out.
        let raw = std::sync::Arc::new(unsafe { RawSharedMutex::new() });
        let (held, rx) = std::sync::mpsc::channel();
        let holder = std::sync::Arc::clone(&raw);
        std::thread::spawn(move || {
            holder.lock().unwrap();
            drop(holder);
            held.send(()).unwrap();
            std::thread::park(); // alive, holding it
        });
        rx.recv().unwrap();
        drop(raw); // the last reference: aborts
        std::process::exit(0); // not reached
    }

    // This thread's own holds, raw and typed, leaked and then dropped.
    // SAFETY: boxed before its first lock, and never moved out.
    let raw = Box::new(unsafe { RawSharedMutex::new() });
    assert_eq!(raw.lock(), Ok(futexkit::raw::Acquired::Consistent));
    drop(raw);
    // SAFETY: boxed before its first lock, and never moved out.
    let typed = Box::new(unsafe { SharedMutex::new(7u32) });
    std::mem::forget(typed.lock().unwrap());
    drop(typed);
    // The thread's robust list still works after the drops: a fresh mutex locks and unlocks.
    // SAFETY: kept in this frame from its lock to its drop, never moved.
    let again = unsafe { RawSharedMutex::new() };
    assert_eq!(again.lock(), Ok(futexkit::raw::Acquired::Consistent));
    // SAFETY: locked just above.
    unsafe { again.unlock() };
    assert!(!again.is_locked());

    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "a_shared_mutex_dropped_while_held",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.status.signal(), Some(6), "{:?}", child.status);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(
        stderr.contains("dropped while thread") && stderr.contains("holds it"),
        "{stderr}"
    );
}

/// A barrier party whose thread a sandbox refuses `futex_waitv` (a policy older than the call
/// refuses it with `EPERM`) sleeps on the generation alone and completes its rounds; refused
/// its `FUTEX_WAIT` too, its wait fails and breaks the barrier, since its arrival is counted:
/// the other party gets `Broken`, not a round without it.
mod refused_barrier_sleeps {
    use std::sync::Arc;
    use std::time::Duration;

    use futexkit::futex::futex2::{waitv, WaitvEntry};
    use futexkit::futex::{Deadline, Error, Futex};
    use futexkit::raw::{BarrierError, RawSharedBarrier};
    use futexkit_support::seccomp::{refuse_futex_op, refuse_syscall};

    use super::HANG;

    const FUTEX_WAIT_BITSET: u32 = 9;

    /// Two parties: the first on a thread that `refuse` sandboxes, arriving first; the second,
    /// this thread, once `arrived` (given the barrier and the first thread's id) returns. What
    /// each wait returned.
    fn a_round(
        refuse: fn(),
        arrived: fn(&RawSharedBarrier, u32),
    ) -> (Result<bool, BarrierError>, Result<bool, BarrierError>) {
        // SAFETY: in an Arc before its first join, never moved out.
        let barrier = Arc::new(unsafe { RawSharedBarrier::new(2) });
        let this_party = barrier.join().unwrap();
        let (led_tx, led_rx) = std::sync::mpsc::channel();
        let (leave_tx, leave_rx) = std::sync::mpsc::channel();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let first_thread = std::thread::spawn({
            let barrier = Arc::clone(&barrier);
            move || {
                refuse();
                tid_tx.send(futexkit_support::blocked::gettid()).unwrap();
                let party = barrier.join().unwrap();
                // SAFETY: this thread joined as `party`; `barrier` is alive here.
                let led = unsafe { barrier.wait(party, Some(Deadline::after(HANG))) };
                led_tx.send(led).unwrap();
                // Leaving breaks the barrier: only once the other party's wait has returned.
                leave_rx.recv().unwrap();
                // SAFETY: joined as `party`, not left.
                unsafe { barrier.leave(party) };
            }
        });
        arrived(&barrier, tid_rx.recv().unwrap());
        // SAFETY: this thread joined as `this_party`; `barrier` is alive here.
        let second = unsafe { barrier.wait(this_party, Some(Deadline::after(HANG))) };
        let first = led_rx.recv().unwrap();
        leave_tx.send(()).unwrap();
        first_thread.join().unwrap();
        // SAFETY: joined as `this_party`, not left.
        unsafe { barrier.leave(this_party) };
        (first, second)
    }

    fn refuse_waitv() {
        refuse_syscall(libc::SYS_futex_waitv);
        let word = Futex::new(0);
        assert_eq!(
            waitv(&[WaitvEntry::new(&word, 1)], None),
            Err(Error::PermissionDenied),
            "the filter refuses futex_waitv"
        );
    }

    #[test]
    fn a_party_refused_futex_waitv_completes_the_round() {
        // The first party sleeps, on the generation alone.
        let asleep = |_: &RawSharedBarrier, tid| futexkit_support::blocked::wait_until_blocked(tid);
        assert_eq!(a_round(refuse_waitv, asleep), (Ok(false), Ok(true)));
    }

    #[test]
    fn a_party_refused_every_sleep_breaks_the_barrier() {
        // The first party's refused sleep broke the barrier (a bound, not a timing: without
        // the break the barrier stays whole and this fails at HANG).
        let broken = |barrier: &RawSharedBarrier, _| {
            let start = std::time::Instant::now();
            while !barrier.is_broken() {
                assert!(
                    start.elapsed() < HANG,
                    "the refused sleep left the barrier whole"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let (first, second) = a_round(
            || {
                refuse_waitv();
                refuse_futex_op(FUTEX_WAIT_BITSET);
            },
            broken,
        );
        assert_eq!(first, Err(BarrierError::Futex(Error::PermissionDenied)));
        assert_eq!(second, Err(BarrierError::Broken));
    }
}

/// Where the kernel refuses `FUTEX_WAKE_OP` to a thread (a sandbox's seccomp policy), the
/// shared Condvar's notify and the shared Barrier's release still reach their sleeper: the
/// change is made by an atomic RMW and the wake is a plain one.
mod without_futex_wake_op {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use futexkit::futex::Deadline;
    use futexkit::raw::{RawSharedBarrier, RawSharedCondvar, RawSharedMutex};
    use futexkit_support::blocked::spawn_blocked;
    use futexkit_support::seccomp::without_futex_wake_op;

    use super::HANG;

    #[test]
    fn a_condvar_notify_wakes_its_sleeper() {
        let shared = Arc::new((
            // SAFETY: in an Arc before its first lock, never moved out.
            unsafe { RawSharedMutex::new() },
            RawSharedCondvar::new(),
            AtomicBool::new(false),
        ));
        let waiter = spawn_blocked({
            let shared = Arc::clone(&shared);
            move || {
                let (mutex, condvar, ready) = &*shared;
                mutex.lock().unwrap();
                let deadline = Deadline::after(HANG);
                let mut notified = true;
                while notified && !ready.load(Ordering::Relaxed) {
                    // SAFETY: this thread holds `mutex`; both live in `shared`, alive here.
                    let (_, timed_out) = unsafe { condvar.wait(mutex, Some(deadline)) }.unwrap();
                    notified = !timed_out;
                }
                // SAFETY: held again after the wait.
                unsafe { mutex.unlock() };
                notified
            }
        });
        without_futex_wake_op({
            let shared = Arc::clone(&shared);
            move || {
                let (mutex, condvar, ready) = &*shared;
                mutex.lock().unwrap();
                ready.store(true, Ordering::Relaxed);
                // SAFETY: held just above.
                unsafe { mutex.unlock() };
                condvar.notify_one();
                // The wake reached the sleeper (its count taken back), not its recheck later.
                let after = format!("{condvar:?}");
                assert!(after.contains("sleepers: 0"), "{after}");
            }
        });
        assert!(waiter.join().unwrap(), "the notify reached the sleeper");
    }

    #[test]
    fn a_barrier_round_releases_its_sleeper() {
        // SAFETY: in an Arc before its first join, never moved out.
        let barrier = Arc::new(unsafe { RawSharedBarrier::new(2) });
        let sleeper = spawn_blocked({
            let barrier = Arc::clone(&barrier);
            move || {
                let party = barrier.join().unwrap();
                // SAFETY: this thread joined as `party`; `barrier` is alive here.
                let led = unsafe { barrier.wait(party, Some(Deadline::after(HANG))) };
                // SAFETY: joined as `party`, not left.
                unsafe { barrier.leave(party) };
                led
            }
        });
        without_futex_wake_op({
            let barrier = Arc::clone(&barrier);
            move || {
                let party = barrier.join().unwrap();
                // SAFETY: as above.
                let led = unsafe { barrier.wait(party, Some(Deadline::after(HANG))) };
                assert_eq!(led, Ok(true), "the last arrival leads");
                // SAFETY: joined as `party`, not left.
                unsafe { barrier.leave(party) };
            }
        });
        assert_eq!(
            sleeper.join().unwrap(),
            Ok(false),
            "released, not timed out"
        );
    }
}

/// A reader that found every slot taken waits for the slot its thread id picks, but gets in
/// when any slot frees: here every slot but that one.
#[test]
fn a_reader_waiting_for_a_slot_takes_another_that_frees() {
    use futexkit::raw::RawSharedRwLock;
    use futexkit_support::blocked::{gettid, wait_until_blocked};
    use std::sync::mpsc::channel;

    // SAFETY: kept in this frame, which the scope's threads borrow it from, never moved.
    let lock = unsafe { RawSharedRwLock::new() };
    std::thread::scope(|s| {
        let mut holders = Vec::new();
        for _ in 0..READER_SLOTS {
            let (slot_tx, slot_rx) = channel();
            let (release_tx, release_rx) = channel::<()>();
            let lock = &lock;
            s.spawn(move || {
                let (slot, _) = lock.read().unwrap();
                slot_tx.send(slot.index()).unwrap();
                release_rx.recv().unwrap();
                // SAFETY: this thread holds that read lock.
                unsafe { lock.read_unlock(slot) };
            });
            holders.push((slot_rx.recv().unwrap(), release_tx));
        }
        let (tid_tx, tid_rx) = channel();
        let lock = &lock;
        let late = s.spawn(move || {
            tid_tx.send(gettid()).unwrap();
            let got = lock.try_read_until(futexkit::futex::Deadline::after(HANG));
            got.map(|(slot, _)| {
                // SAFETY: this thread holds that read lock.
                unsafe { lock.read_unlock(slot) };
            })
        });
        let tid = tid_rx.recv().unwrap();
        wait_until_blocked(tid);
        // The slot the late reader waits for, which its thread id picks.
        let its_first = tid as usize % READER_SLOTS;
        let mut kept = None;
        for (slot, release) in holders {
            if slot == its_first {
                kept = Some(release);
            } else {
                release.send(()).unwrap();
            }
        }
        assert_eq!(late.join().unwrap(), Ok(()), "the late reader got a slot");
        kept.expect("every slot was held").send(()).unwrap();
    });
}

/// A thread that holds a read lock and asks for another is refused, whichever slot it holds:
/// here not the one its thread id picks, which is free when it asks again.
#[test]
fn a_second_read_by_one_thread_is_refused_whichever_slot_it_holds() {
    use futexkit::raw::{RawLockError, RawSharedRwLock};
    use futexkit_support::blocked::gettid;
    use std::sync::mpsc::channel;

    // SAFETY: kept in this frame, which the scope's threads borrow it from, never moved.
    let lock = unsafe { RawSharedRwLock::new() };
    let first = gettid() as usize % READER_SLOTS;
    std::thread::scope(|s| {
        let mut holders = std::collections::HashMap::new();
        for _ in 0..READER_SLOTS {
            let (slot_tx, slot_rx) = channel();
            let (release_tx, release_rx) = channel::<()>();
            let lock = &lock;
            let handle = s.spawn(move || {
                let (slot, _) = lock.read().unwrap();
                slot_tx.send(slot.index()).unwrap();
                release_rx.recv().unwrap();
                // SAFETY: this thread holds that read lock.
                unsafe { lock.read_unlock(slot) };
            });
            holders.insert(slot_rx.recv().unwrap(), (release_tx, handle));
        }
        // Frees `slot` and returns once it is free.
        let mut release = |slot: usize| {
            let (tx, handle) = holders.remove(&slot).unwrap();
            tx.send(()).unwrap();
            handle.join().unwrap();
        };
        let next = (first + 1) % READER_SLOTS;
        release(next);
        let (slot, _) = lock
            .try_read_until(futexkit::futex::Deadline::after(HANG))
            .unwrap();
        assert_eq!(slot.index(), next, "the first free slot after its own");
        release(first);
        assert_eq!(lock.try_read(), Err(RawLockError::WouldDeadlock));
        assert_eq!(lock.read(), Err(RawLockError::WouldDeadlock));
        // SAFETY: this thread holds that read lock.
        unsafe { lock.read_unlock(slot) };
        for (tx, _) in holders.values() {
            tx.send(()).unwrap();
        }
    });
}

/// The shared Condvar's waits when a wake cannot be acted on: a woken waiter whose relock
/// fails passes the wake on, and every sleep ends by a recheck, so that a waiter killed with a
/// notify in hand strands nobody for good.
mod condvar_wakes {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use futexkit::futex::Deadline;
    use futexkit::raw::{RawLockError, RawSharedCondvar, RawSharedMutex};
    use futexkit_support::blocked::spawn_blocked_on;

    use super::HANG;

    type Shared = Arc<(RawSharedMutex, RawSharedCondvar, AtomicBool)>;

    fn shared() -> Shared {
        Arc::new((
            // SAFETY: in an Arc before its first lock, never moved out.
            unsafe { RawSharedMutex::new() },
            RawSharedCondvar::new(),
            AtomicBool::new(false),
        ))
    }

    fn sleepers(condvar: &RawSharedCondvar) -> String {
        format!("{condvar:?}")
    }

    /// One round: a timed waiter sleeps first, so `notify_one` wakes it, and its relock times
    /// out under the notifier's hold; an untimed one sleeps behind it. Whether the timed
    /// waiter's pass-on woke the other (`Some(true)`), or `None` where the round did not come
    /// about (the timed waiter's deadline, nearer than a recheck so that only the wake ends its
    /// sleep, passed before the notify: a slow machine).
    fn pass_on_round() -> Option<bool> {
        let shared = shared();
        // A notify with nobody waiting moves the sequence off 0: a `FUTEX_WAKE_OP` whose word
        // was 0 also wakes one waiter more (its second wake), which would hide what is tested.
        shared.1.notify_one();
        let timed = spawn_blocked_on(&shared.1, {
            let shared = Arc::clone(&shared);
            move || {
                let (mutex, condvar, _) = &*shared;
                mutex.lock().unwrap();
                let deadline = Deadline::after(Duration::from_millis(90));
                // SAFETY: this thread holds `mutex`; both live in `shared`.
                let result = unsafe { condvar.wait(mutex, Some(deadline)) };
                if result.is_ok() {
                    // SAFETY: held again after the wait.
                    unsafe { mutex.unlock() };
                }
                result
            }
        });
        let untimed = spawn_blocked_on(&shared.1, {
            let shared = Arc::clone(&shared);
            move || {
                let (mutex, condvar, ready) = &*shared;
                mutex.lock().unwrap();
                while !ready.load(Ordering::Relaxed) {
                    // SAFETY: this thread holds `mutex`; both live in `shared`.
                    unsafe { condvar.wait(mutex, None) }.unwrap();
                }
                // SAFETY: held again after the wait.
                unsafe { mutex.unlock() };
            }
        });
        let (mutex, condvar, ready) = &*shared;
        // Notified under the mutex, which is held until the timed waiter has given up.
        mutex.lock().unwrap();
        ready.store(true, Ordering::Relaxed);
        condvar.notify_one();
        let timed = timed.join().unwrap();
        // Without the pass-on, the untimed waiter would sleep on, still counted, until its
        // recheck.
        let passed_on = sleepers(condvar).contains("sleepers: 0");
        if !passed_on {
            // Let the untimed waiter go, so that the round ends.
            condvar.notify_all();
        }
        // SAFETY: locked above by this thread.
        unsafe { mutex.unlock() };
        untimed.join().unwrap();
        (timed == Err(RawLockError::TimedOut)).then_some(passed_on)
    }

    #[test]
    fn a_woken_waiter_whose_relock_times_out_passes_the_notify_on() {
        let decided = (0..20).find_map(|_| pass_on_round());
        assert_eq!(decided, Some(true), "None: no round came about in 20");
    }

    #[test]
    fn an_untimed_wait_nobody_notifies_returns_at_a_recheck() {
        let shared = shared();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn({
            let shared = Arc::clone(&shared);
            move || {
                let (mutex, condvar, _) = &*shared;
                mutex.lock().unwrap();
                // SAFETY: this thread holds `mutex`; both live in `shared`.
                let (_, timed_out) = unsafe { condvar.wait(mutex, None) }.unwrap();
                // SAFETY: held again after the wait.
                unsafe { mutex.unlock() };
                done_tx.send(timed_out).unwrap();
            }
        });
        assert_eq!(
            done_rx.recv_timeout(HANG),
            Ok(false),
            "a spurious wakeup, not a timeout"
        );
        assert!(sleepers(&shared.1).contains("sleepers: 0"));
    }
}
