//! Contended-counter workloads shared by `benches/mutex.rs` and `examples/contention.rs`:
//! futexkit's Mutex, std's and parking_lot's in the same run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The three mutexes compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Futexkit,
    Std,
    ParkingLot,
}

impl Impl {
    pub const ALL: [Impl; 3] = [Impl::Futexkit, Impl::Std, Impl::ParkingLot];

    pub fn name(self) -> &'static str {
        match self {
            Impl::Futexkit => "futexkit",
            Impl::Std => "std",
            Impl::ParkingLot => "parking_lot",
        }
    }
}

/// Critical section length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// One increment.
    Short,
    /// About 100 dependent arithmetic steps on the protected data.
    Long,
}

impl Section {
    pub fn name(self) -> &'static str {
        match self {
            Section::Short => "short",
            Section::Long => "long",
        }
    }
}

trait Counter: Send + Sync {
    fn add(&self, section: Section);
    fn value(&self) -> u64;
    /// Holds the lock, lets the waiter start (`go`), gives it time to block, then records the
    /// release time and unlocks.
    fn hold_then_release(&self, go: &Barrier, released_at: &AtomicU64, base: Instant);
    // (The caller waits for the waiter to finish its round before holding again: relocking at
    // once could barge ahead of the waiter and then wait on `go` holding the lock.)
    /// Locks, adding the time since `released_at` to `total`.
    fn add_timed(&self, released_at: &AtomicU64, base: Instant, total: &AtomicU64);
}

/// Long enough for a waiter to spin out and go to sleep.
const BLOCK_TIME: Duration = Duration::from_micros(200);

macro_rules! hand_off_methods {
    ($lock:ident) => {
        fn hold_then_release(&self, go: &Barrier, released_at: &AtomicU64, base: Instant) {
            let guard = $lock(self);
            go.wait();
            let start = Instant::now();
            while start.elapsed() < BLOCK_TIME {
                std::hint::spin_loop();
            }
            released_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
            drop(guard);
        }

        fn add_timed(&self, released_at: &AtomicU64, base: Instant, total: &AtomicU64) {
            let mut guard = $lock(self);
            let now = base.elapsed().as_nanos() as u64;
            total.fetch_add(
                now.saturating_sub(released_at.load(Ordering::SeqCst)),
                Ordering::Relaxed,
            );
            *guard += 1;
        }
    };
}

fn lock_futexkit(m: &futexkit::Mutex<u64>) -> futexkit::MutexGuard<'_, u64> {
    m.lock().unwrap()
}
fn lock_std(m: &std::sync::Mutex<u64>) -> std::sync::MutexGuard<'_, u64> {
    m.lock().unwrap()
}
fn lock_parking_lot(m: &parking_lot::Mutex<u64>) -> parking_lot::MutexGuard<'_, u64> {
    m.lock()
}

#[inline(always)]
fn work(value: &mut u64, section: Section) {
    match section {
        Section::Short => *value += 1,
        Section::Long => {
            let mut x = *value | 1;
            for _ in 0..100 {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
            std::hint::black_box(x);
            *value += 1;
        }
    }
}

impl Counter for futexkit::Mutex<u64> {
    hand_off_methods!(lock_futexkit);
    fn add(&self, section: Section) {
        work(&mut self.lock().unwrap(), section);
    }
    fn value(&self) -> u64 {
        *self.lock().unwrap()
    }
}

impl Counter for std::sync::Mutex<u64> {
    hand_off_methods!(lock_std);
    fn add(&self, section: Section) {
        work(&mut self.lock().unwrap(), section);
    }
    fn value(&self) -> u64 {
        *self.lock().unwrap()
    }
}

impl Counter for parking_lot::Mutex<u64> {
    hand_off_methods!(lock_parking_lot);
    fn add(&self, section: Section) {
        work(&mut self.lock(), section);
    }
    fn value(&self) -> u64 {
        *self.lock()
    }
}

fn counter(which: Impl) -> Arc<dyn Counter> {
    match which {
        Impl::Futexkit => Arc::new(futexkit::Mutex::new(0u64)),
        Impl::Std => Arc::new(std::sync::Mutex::new(0u64)),
        Impl::ParkingLot => Arc::new(parking_lot::Mutex::new(0u64)),
    }
}

/// `threads` threads each add `per_thread` times; returns the wall time from a common start.
pub fn fixed_ops(which: Impl, threads: usize, per_thread: u64, section: Section) -> Duration {
    let c = counter(which);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (c, barrier) = (Arc::clone(&c), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    c.add(section);
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(c.value(), threads as u64 * per_thread, "lost update");
    elapsed
}

/// Result of a timed run.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Million lock/unlock pairs per second, all threads together.
    pub mops: f64,
    /// The longest single `lock()` any thread waited (measured in a second, timed pass).
    pub max_wait: Duration,
}

/// `threads` threads add for `duration`; then a second pass of the same length times every
/// acquisition (which slows all three implementations alike) for the worst-case wait.
pub fn timed(which: Impl, threads: usize, section: Section, duration: Duration) -> Throughput {
    let ops = run_for(which, threads, section, duration, false).0;
    let max_wait = run_for(which, threads, section, duration, true).1;
    Throughput {
        mops: ops as f64 / duration.as_secs_f64() / 1e6,
        max_wait,
    }
}

fn run_for(
    which: Impl,
    threads: usize,
    section: Section,
    duration: Duration,
    time_each: bool,
) -> (u64, Duration) {
    let c = counter(which);
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let worst = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (c, stop, total, worst, barrier) = (
                Arc::clone(&c),
                Arc::clone(&stop),
                Arc::clone(&total),
                Arc::clone(&worst),
                Arc::clone(&barrier),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let mut n = 0u64;
                let mut my_worst = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if time_each {
                        let t = Instant::now();
                        c.add(section);
                        my_worst = my_worst.max(t.elapsed().as_nanos() as u64);
                    } else {
                        c.add(section);
                    }
                    n += 1;
                }
                total.fetch_add(n, Ordering::Relaxed);
                worst.fetch_max(my_worst, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(c.value(), total.load(Ordering::Relaxed), "lost update");
    (
        total.load(Ordering::Relaxed),
        Duration::from_nanos(worst.load(Ordering::Relaxed)),
    )
}

/// Lock hand-off latency: the owner unlocks while another thread waits in `lock()` (given time
/// to spin out and sleep); returns the summed time from the unlock to the waiter holding the
/// lock, over `rounds` hand-offs.
pub fn hand_off(which: Impl, rounds: u64) -> Duration {
    let c = counter(which);
    let go = Arc::new(Barrier::new(2));
    let released_at = Arc::new(AtomicU64::new(0));
    let base = Instant::now();
    let total = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (c, go, released_at, total) = (
            Arc::clone(&c),
            Arc::clone(&go),
            Arc::clone(&released_at),
            Arc::clone(&total),
        );
        std::thread::spawn(move || {
            for _ in 0..rounds {
                go.wait();
                c.add_timed(&released_at, base, &total);
                go.wait();
            }
        })
    };
    for _ in 0..rounds {
        c.hold_then_release(&go, &released_at, base);
        go.wait();
    }
    waiter.join().unwrap();
    Duration::from_nanos(total.load(Ordering::Relaxed))
}
