//! The RwLock's and the Barrier's protocols under a model checker (`--cfg futexkit_loom` or `--cfg
//! futexkit_shuttle`; see `tests/model/mod.rs`): a writer excludes readers and writers (a value
//! written in two relaxed halves is never seen torn, and an increment split into a load and a store
//! loses nothing), no lost wakeup between readers and writers (the checker reports a deadlock),
//! timed readers and writers beside untimed ones, downgrade, upgradable reads (one at a time; an
//! upgrade lets no writer in and is not stranded by the readers it waits for; timed upgrades;
//! downgrades between the three modes), fair write unlocks, and a barrier reused across rounds with
//! one leader each. The code checked is the shipped code.
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::raw::RawRwLock;
use futexkit::sync::{Barrier, RwLock, RwLockWriteGuard};
use model::atomic::{AtomicUsize, Ordering};
#[cfg(futexkit_shuttle)]
use model::check_scaled;
use model::{check, in_threads, Arc, FAR};

/// Data a writer updates in two relaxed halves: a reader that ever sees them differ saw a
/// writer alongside it.
struct Halves {
    lock: RwLock<()>,
    a: AtomicUsize,
    b: AtomicUsize,
}

impl Halves {
    fn new() -> Halves {
        Halves {
            lock: RwLock::new(()),
            a: AtomicUsize::new(0),
            b: AtomicUsize::new(0),
        }
    }

    fn write(&self) {
        let _g = self.lock.write().unwrap();
        let v = self.a.load(Ordering::Relaxed);
        self.a.store(v + 1, Ordering::Relaxed);
        model::thread::yield_now();
        self.b.store(v + 1, Ordering::Relaxed);
    }

    fn read(&self) -> usize {
        let _g = self.lock.read().unwrap();
        let a = self.a.load(Ordering::Relaxed);
        model::thread::yield_now();
        let b = self.b.load(Ordering::Relaxed);
        assert_eq!(a, b, "a reader saw a writer's half-done update");
        a
    }
}

type Job = Box<dyn FnOnce(&Halves) + Send>;

fn run(jobs: Vec<Job>, writes: usize) {
    let shared = Arc::new(Halves::new());
    in_threads(&shared, jobs);
    assert_eq!(shared.read(), writes, "no write lost");
    assert!(shared.lock.try_write().is_ok(), "the lock ends free");
}

#[test]
fn two_readers_and_a_writer() {
    let (readers, writers) = if cfg!(futexkit_loom) { (2, 1) } else { (4, 3) };
    check(2, move || {
        let mut jobs: Vec<Job> = Vec::new();
        for _ in 0..writers {
            jobs.push(Box::new(|h| h.write()));
        }
        for _ in 0..readers {
            jobs.push(Box::new(|h| {
                h.read();
            }));
        }
        run(jobs, writers);
    });
}

/// A reader that then writes, racing a writer that then reads.
#[test]
fn read_then_write_races_write_then_read() {
    check(3, || {
        run(
            vec![
                Box::new(|h| {
                    h.read();
                    h.write();
                }),
                Box::new(|h| {
                    h.write();
                    h.read();
                }),
            ],
            2,
        );
    });
}

/// Timed readers and writers beside untimed ones: each gets the lock or times out, and the
/// untimed ones always get through (a timed writer giving up leaves no bit behind that keeps
/// them out).
#[test]
fn timed_readers_and_writers() {
    let timed = if cfg!(futexkit_loom) { 1 } else { 2 };
    check(2, move || {
        let shared = Arc::new(Halves::new());
        let timed_writes = Arc::new(AtomicUsize::new(0));
        let mut jobs: Vec<Job> = vec![
            Box::new(|h| h.write()),
            Box::new(|h| {
                h.read();
            }),
        ];
        for _ in 0..timed {
            let timed_writes = Arc::clone(&timed_writes);
            jobs.push(Box::new(move |h| {
                if let Ok(_g) = h.lock.try_write_for(FAR) {
                    let v = h.a.load(Ordering::Relaxed);
                    h.a.store(v + 1, Ordering::Relaxed);
                    h.b.store(v + 1, Ordering::Relaxed);
                    timed_writes.fetch_add(1, Ordering::Relaxed);
                }
                if let Ok(_g) = h.lock.try_read_for(FAR) {
                    assert_eq!(h.a.load(Ordering::Relaxed), h.b.load(Ordering::Relaxed));
                }
            }));
        }
        in_threads(&shared, jobs);
        assert_eq!(shared.read(), 1 + timed_writes.load(Ordering::Relaxed));
        assert!(shared.lock.try_write().is_ok(), "the lock ends free");
    });
}

/// Attempts whose deadline has passed, beside a writer and a reader: each takes the lock at
/// once or leaves without touching the word, and the others get through.
#[test]
fn attempts_whose_deadline_has_passed() {
    check(2, move || {
        let shared = Arc::new(Halves::new());
        let timed_writes = Arc::new(AtomicUsize::new(0));
        let passed_writes = Arc::clone(&timed_writes);
        let jobs: Vec<Job> = vec![
            Box::new(|h| h.write()),
            Box::new(|h| {
                h.read();
            }),
            Box::new(move |h| {
                if let Ok(_g) = h.lock.try_write_for(std::time::Duration::ZERO) {
                    let v = h.a.load(Ordering::Relaxed);
                    h.a.store(v + 1, Ordering::Relaxed);
                    h.b.store(v + 1, Ordering::Relaxed);
                    passed_writes.fetch_add(1, Ordering::Relaxed);
                }
                if let Ok(_g) = h.lock.try_read_for(std::time::Duration::ZERO) {
                    assert_eq!(h.a.load(Ordering::Relaxed), h.b.load(Ordering::Relaxed));
                }
            }),
        ];
        in_threads(&shared, jobs);
        assert_eq!(shared.read(), 1 + timed_writes.load(Ordering::Relaxed));
        assert!(shared.lock.try_write().is_ok(), "the lock ends free");
    });
}

/// A writer downgrades while a reader and a writer wait: the reader may share, the writer
/// waits for both, and nobody is left asleep.
#[test]
fn downgrade_with_a_reader_and_a_writer_waiting() {
    check(2, || {
        run(
            vec![
                Box::new(|h| {
                    let g = h.lock.write().unwrap();
                    let v = h.a.load(Ordering::Relaxed);
                    h.a.store(v + 1, Ordering::Relaxed);
                    h.b.store(v + 1, Ordering::Relaxed);
                    let r = RwLockWriteGuard::downgrade(g);
                    assert_eq!(h.a.load(Ordering::Relaxed), h.b.load(Ordering::Relaxed));
                    drop(r);
                }),
                Box::new(|h| {
                    h.read();
                }),
                Box::new(|h| h.write()),
            ],
            2,
        );
    });
}

/// The raw lock with data a writer updates in two relaxed halves, for the upgradable read,
/// which `futexkit::sync` does not offer (lock_api's guards call these same methods).
struct RawHalves {
    lock: RawRwLock,
    a: AtomicUsize,
    b: AtomicUsize,
}

impl RawHalves {
    fn new() -> RawHalves {
        RawHalves {
            lock: RawRwLock::new(),
            a: AtomicUsize::new(0),
            b: AtomicUsize::new(0),
        }
    }

    /// Increments both halves, one at a time; the caller holds the write lock.
    fn bump(&self) {
        let v = self.a.load(Ordering::Relaxed);
        self.a.store(v + 1, Ordering::Relaxed);
        model::thread::yield_now();
        self.b.store(v + 1, Ordering::Relaxed);
    }

    /// Checks that no writer is halfway; the caller holds a read lock of some kind.
    fn check(&self) -> usize {
        let a = self.a.load(Ordering::Relaxed);
        model::thread::yield_now();
        assert_eq!(
            a,
            self.b.load(Ordering::Relaxed),
            "a reader saw a writer's half-done update"
        );
        a
    }

    fn write(&self) {
        self.lock.write();
        self.bump();
        // SAFETY: taken just above.
        unsafe { self.lock.write_unlock() };
    }

    fn read(&self) {
        self.lock.read();
        self.check();
        // SAFETY: taken just above.
        unsafe { self.lock.read_unlock() };
    }

    /// Takes the upgradable read, reads, upgrades and writes: what it read is still there
    /// once upgraded (no writer came in between, no other upgradable reader read it too).
    fn upgrade_and_write(&self) {
        self.lock.upgradable_read();
        let seen = self.check();
        // SAFETY: this thread holds the upgradable read; then the write lock.
        unsafe {
            self.lock.upgrade();
            assert_eq!(
                self.a.load(Ordering::Relaxed),
                seen,
                "a write came in during an upgrade"
            );
            self.bump();
            self.lock.write_unlock();
        }
    }
}

type RawJob = Box<dyn FnOnce(&RawHalves) + Send>;

fn run_raw(jobs: Vec<RawJob>, writes: usize) {
    let shared = Arc::new(RawHalves::new());
    in_threads(&shared, jobs);
    assert_eq!(shared.a.load(Ordering::Relaxed), writes, "no write lost");
    assert!(shared.lock.try_write(), "the lock ends free");
}

/// An upgrade while a reader holds the lock and a writer waits: the reader's leaving wakes the
/// upgrader, no write comes in between the upgradable read and the upgrade, and the writer,
/// asleep meanwhile, is not stranded.
#[test]
fn an_upgrade_beside_a_reader_and_a_writer() {
    let (readers, writers) = if cfg!(futexkit_loom) { (1, 1) } else { (3, 2) };
    check(2, move || {
        let mut jobs: Vec<RawJob> = vec![Box::new(|h| h.upgrade_and_write())];
        for _ in 0..readers {
            jobs.push(Box::new(|h| h.read()));
        }
        for _ in 0..writers {
            jobs.push(Box::new(|h| h.write()));
        }
        run_raw(jobs, 1 + writers);
    });
}

/// Two threads take the upgradable read and upgrade: one at a time, so neither loses the
/// other's write and neither waits for the other's read forever.
#[test]
fn upgradable_reads_exclude_each_other() {
    let upgraders = if cfg!(futexkit_loom) { 2 } else { 4 };
    check(2, move || {
        let mut jobs: Vec<RawJob> = Vec::new();
        for _ in 0..upgraders {
            jobs.push(Box::new(|h| h.upgrade_and_write()));
        }
        if cfg!(futexkit_shuttle) {
            jobs.push(Box::new(|h| h.read()));
            jobs.push(Box::new(|h| h.write()));
        }
        let writes = upgraders + usize::from(cfg!(futexkit_shuttle));
        run_raw(jobs, writes);
    });
}

/// Two threads take the upgradable read without upgrading: one releases it by unlocking, the
/// other by downgrading to a plain read; either way the one waiting for it is woken.
#[test]
fn releasing_an_upgradable_read_wakes_the_next() {
    check(3, || {
        let mut jobs: Vec<RawJob> = vec![
            Box::new(|h| {
                h.lock.upgradable_read();
                h.check();
                // SAFETY: this thread holds the upgradable read.
                unsafe { h.lock.upgradable_unlock() };
            }),
            Box::new(|h| {
                h.lock.upgradable_read();
                h.check();
                // SAFETY: this thread holds the upgradable read, then a plain one.
                unsafe {
                    h.lock.downgrade_upgradable();
                    h.check();
                    h.lock.read_unlock();
                }
            }),
        ];
        if cfg!(futexkit_shuttle) {
            jobs.push(Box::new(|h| h.upgrade_and_write()));
            jobs.push(Box::new(|h| h.write()));
        }
        run_raw(jobs, 2 * usize::from(cfg!(futexkit_shuttle)));
    });
}

/// A fair write unlock opens a read phase for a reader and the upgradable reader asleep, with
/// a writer asleep too: the reader's unlock, the last but for the upgrader, wakes the upgrader
/// however the upgrader's entry and its upgrade interleave with it. (Four threads: shuttle
/// only, as loom's exhaustive search of them does not end in CI's time; with 15 times the
/// schedules, as the interleaving that strands the upgrader is rare.)
#[test]
#[cfg(futexkit_shuttle)]
fn an_upgrade_inside_a_read_phase() {
    check_scaled(2, 15, || {
        run_raw(
            vec![
                Box::new(|h| {
                    h.lock.write();
                    h.bump();
                    // SAFETY: taken just above.
                    unsafe { h.lock.write_unlock_fair() };
                }),
                Box::new(|h| h.read()),
                Box::new(|h| h.upgrade_and_write()),
                Box::new(|h| h.write()),
            ],
            3,
        );
    });
}

/// A timed upgrade beside a reader and a writer, then the downgrades: write lock to upgradable
/// read to plain read. The upgrade either happens or gives up leaving nothing that keeps the
/// others out; a thread waiting for the upgradable read is woken when it is downgraded.
#[test]
fn timed_upgrade_and_downgrades() {
    check(2, || {
        let shared = Arc::new(RawHalves::new());
        let upgraded = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&upgraded);
        let mut jobs: Vec<RawJob> = vec![
            Box::new(move |h| {
                h.lock.upgradable_read();
                h.check();
                // SAFETY: this thread holds the upgradable read, and the lock of each mode
                // it downgrades from.
                unsafe {
                    if h.lock.try_upgrade_for(FAR) {
                        h.bump();
                        counted.fetch_add(1, Ordering::Relaxed);
                        h.lock.downgrade_to_upgradable();
                    }
                    h.check();
                    h.lock.downgrade_upgradable();
                    h.check();
                    h.lock.read_unlock();
                }
            }),
            Box::new(|h| h.write()),
        ];
        jobs.push(if cfg!(futexkit_loom) {
            Box::new(|h| h.read())
        } else {
            Box::new(|h| h.upgrade_and_write())
        });
        in_threads(&shared, jobs);
        let writes = 1 + upgraded.load(Ordering::Relaxed) + usize::from(cfg!(futexkit_shuttle));
        assert_eq!(shared.a.load(Ordering::Relaxed), writes, "no write lost");
        assert!(shared.lock.try_write(), "the lock ends free");
    });
}

/// Fair write unlocks (which open a read phase whenever readers sleep) beside a reader and a
/// writer: nobody is left asleep, and no phase is left open with nobody to close it.
#[test]
fn fair_write_unlocks_beside_a_reader_and_a_writer() {
    let unlocks = if cfg!(futexkit_loom) { 1 } else { 3 };
    check(2, move || {
        run_raw(
            vec![
                Box::new(move |h| {
                    for _ in 0..unlocks {
                        h.lock.write();
                        h.bump();
                        // SAFETY: taken just above.
                        unsafe { h.lock.write_unlock_fair() };
                    }
                }),
                Box::new(|h| h.read()),
                Box::new(|h| h.write()),
            ],
            unlocks + 1,
        );
    });
}

/// A barrier of three, used for two rounds: one leader per round, nobody leaves early.
#[test]
fn barrier_rounds_have_one_leader_each() {
    let (parties, rounds) = if cfg!(futexkit_loom) { (3, 2) } else { (6, 3) };
    check(2, move || {
        let shared = Arc::new((
            Barrier::new(parties),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        ));
        let jobs: Vec<model::Job<(Barrier, AtomicUsize, AtomicUsize)>> = (0..parties)
            .map(|_| {
                Box::new(
                    move |(barrier, arrived, leaders): &(Barrier, AtomicUsize, AtomicUsize)| {
                        for round in 0..rounds {
                            arrived.fetch_add(1, Ordering::Relaxed);
                            let leader = barrier.wait().is_leader();
                            assert!(arrived.load(Ordering::Relaxed) >= (round + 1) * parties);
                            if leader {
                                leaders.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    },
                ) as Box<dyn FnOnce(&(Barrier, AtomicUsize, AtomicUsize)) + Send>
            })
            .collect();
        in_threads(&shared, jobs);
        assert_eq!(shared.2.load(Ordering::Relaxed), rounds);
    });
}

/// Four threads on a barrier of two, as std allows: two generations, each with one leader, and
/// every thread released (an arrival racing the leader belongs to the next generation).
#[test]
fn a_barrier_with_more_threads_than_parties_releases_them_in_pairs() {
    check(2, || {
        let shared = Arc::new((Barrier::new(2), AtomicUsize::new(0)));
        let jobs: Vec<model::Job<(Barrier, AtomicUsize)>> = (0..4)
            .map(|_| {
                Box::new(|(barrier, leaders): &(Barrier, AtomicUsize)| {
                    if barrier.wait().is_leader() {
                        leaders.fetch_add(1, Ordering::Relaxed);
                    }
                }) as Box<dyn FnOnce(&(Barrier, AtomicUsize)) + Send>
            })
            .collect();
        in_threads(&shared, jobs);
        assert_eq!(shared.1.load(Ordering::Relaxed), 2);
    });
}
