//! RwLock and Barrier workloads, each written once over [`Locks`] and run on futexkit, std
//! and parking_lot: read-only scaling, read/write mixes, writers among readers, a writer's wait
//! under a continuous stream of readers, and barrier rounds per second.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::locks::Locks;

/// The data behind the lock: a small table a reader sums and a writer updates.
const SLOTS: usize = 8;

/// Lock operations per second (millions) with `threads` threads, each taking the lock for a
/// write `write_per_mille` times in 1000 (0: read-only) and a read otherwise.
pub fn mixed<B: Locks>(threads: usize, write_per_mille: u32, duration: Duration) -> f64 {
    let rates = operation_rates::<B, _>(threads, duration, |t| {
        // A cheap per-thread sequence decides read or write, the same on every backend.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
        move |lock: &B::RwLock<Table>| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if (seed % 1000) < u64::from(write_per_mille) {
                B::write(lock, |slots| slots[(seed as usize) % SLOTS] += 1);
                0
            } else {
                B::read(lock, |slots| slots.iter().sum())
            }
        }
    });
    rates.iter().sum()
}

/// Each thread's throughput (millions of lock operations per second, writers' then readers')
/// with `writers` threads writing in a loop and `readers` threads reading in a loop, one unit
/// of work under each lock (a writer updates a slot, a reader sums the table): a protocol that
/// starves one side, or some threads of a side, shows it here.
pub fn writers_among_readers<B: Locks>(
    writers: usize,
    readers: usize,
    duration: Duration,
) -> (Vec<f64>, Vec<f64>) {
    let mut rates = operation_rates::<B, _>(writers + readers, duration, |t| {
        let mut slot = 0;
        move |lock: &B::RwLock<Table>| {
            if t < writers {
                slot = (slot + 1) % SLOTS;
                B::write(lock, |slots| slots[slot] += 1);
                0
            } else {
                B::read(lock, |slots| slots.iter().sum())
            }
        }
    });
    let reads = rates.split_off(writers);
    (rates, reads)
}

/// The data behind the lock.
type Table = [u64; SLOTS];

/// Each of `threads` threads runs the operation `operation(thread)` makes on one lock, in a
/// loop, publishing its count as it goes; returns each thread's rate (millions per second):
/// its count's growth over `duration` as this thread measures it, so threads still starting or
/// stopping (late on an oversubscribed machine) do not count. An operation returns a value the
/// loop keeps, so that the compiler cannot drop a read.
fn operation_rates<B: Locks, F>(
    threads: usize,
    duration: Duration,
    operation: impl Fn(usize) -> F,
) -> Vec<f64>
where
    F: FnMut(&B::RwLock<Table>) -> u64 + Send + 'static,
{
    let lock = Arc::new(B::rwlock([0u64; SLOTS]));
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<Vec<CachePadded<AtomicU64>>> = Arc::new(
        (0..threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, stop, counts) = (Arc::clone(&lock), Arc::clone(&stop), Arc::clone(&counts));
            let mut operation = operation(t);
            std::thread::spawn(move || {
                let mut sink = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..32 {
                        sink = sink.wrapping_add(operation(&lock));
                    }
                    counts[t].fetch_add(32, Ordering::Relaxed);
                }
                std::hint::black_box(sink);
            })
        })
        .collect();
    let snapshot = || -> Vec<u64> { counts.iter().map(|c| c.load(Ordering::Relaxed)).collect() };
    std::thread::sleep(Duration::from_millis(20));
    let (begin, before) = (Instant::now(), snapshot());
    std::thread::sleep(duration);
    let (elapsed, after) = (begin.elapsed(), snapshot());
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    after
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b) as f64 / elapsed.as_secs_f64() / 1e6)
        .collect()
}

/// A writer's wait for the lock while `readers` threads read in a loop, each holding its read
/// lock for `hold` so that they overlap: `writes` measured writes; returns the p99 and the
/// longest wait.
pub fn writer_wait_under_readers<B: Locks>(
    readers: usize,
    hold: Duration,
    writes: usize,
) -> (Duration, Duration) {
    let lock = Arc::new(B::rwlock(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..readers)
        .map(|_| {
            let (lock, stop) = (Arc::clone(&lock), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    B::read(&lock, |_| {
                        let start = Instant::now();
                        while start.elapsed() < hold {
                            std::hint::spin_loop();
                        }
                    });
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(5));
    let mut waits = Vec::with_capacity(writes);
    for _ in 0..writes {
        let start = Instant::now();
        B::write(&lock, |v| *v += 1);
        waits.push(start.elapsed());
        std::thread::sleep(hold);
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    waits.sort();
    (waits[waits.len() * 99 / 100], waits[waits.len() - 1])
}

/// Barrier rounds per second with `threads` threads, over `rounds` rounds (a fixed count:
/// every thread must stop after the same round).
pub fn barrier_rounds<B: Locks>(threads: usize, rounds: usize) -> f64 {
    let barrier = Arc::new(B::barrier(threads));
    let start = Arc::new(B::barrier(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (barrier, start) = (Arc::clone(&barrier), Arc::clone(&start));
            std::thread::spawn(move || {
                B::barrier_wait(&start);
                for _ in 0..rounds {
                    B::barrier_wait(&barrier);
                }
            })
        })
        .collect();
    B::barrier_wait(&start);
    let begin = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    rounds as f64 / begin.elapsed().as_secs_f64()
}
