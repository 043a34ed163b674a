//! Contended-counter workloads shared by `benches/mutex.rs` and `examples/contention.rs`:
//! futexkit's Mutex, std's, parking_lot's (0.12 and 0.13) and glibc's `pthread_mutex_t` in the
//! same run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The mutexes compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Futexkit,
    Std,
    /// parking_lot 0.12, the release most dependents still have.
    ParkingLot,
    /// parking_lot 0.13, the current release.
    ParkingLot013,
    /// glibc's default `pthread_mutex_t` (no spin: a waiter sleeps at once).
    Glibc,
}

impl Impl {
    pub const ALL: [Impl; 5] = [
        Impl::Futexkit,
        Impl::Std,
        Impl::ParkingLot,
        Impl::ParkingLot013,
        Impl::Glibc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Impl::Futexkit => "futexkit",
            Impl::Std => "std",
            Impl::ParkingLot => "parking_lot",
            Impl::ParkingLot013 => "parking_lot_0.13",
            Impl::Glibc => "glibc",
        }
    }
}

/// glibc's default mutex around a value, with just what the workloads need.
pub struct GlibcMutex<T> {
    mutex: std::cell::UnsafeCell<libc::pthread_mutex_t>,
    value: std::cell::UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, which holds the pthread mutex.
unsafe impl<T: Send> Sync for GlibcMutex<T> {}
// SAFETY: a default pthread mutex that nothing holds may move between threads (and does not
// move while held: a guard borrows it).
unsafe impl<T: Send> Send for GlibcMutex<T> {}

impl<T> GlibcMutex<T> {
    pub fn new(value: T) -> GlibcMutex<T> {
        GlibcMutex {
            mutex: std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            value: std::cell::UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> GlibcGuard<'_, T> {
        // SAFETY: an initialized mutex this thread does not hold (the guard is not reentrant).
        let rc = unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        assert_eq!(rc, 0);
        GlibcGuard { lock: self }
    }
}

impl<T> Drop for GlibcMutex<T> {
    fn drop(&mut self) {
        // SAFETY: nothing holds it (a guard would borrow self).
        unsafe { libc::pthread_mutex_destroy(self.mutex.get()) };
    }
}

/// Holds a [`GlibcMutex`].
pub struct GlibcGuard<'a, T> {
    lock: &'a GlibcMutex<T>,
}

impl<T> std::ops::Deref for GlibcGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the mutex.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for GlibcGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the mutex, and borrows itself mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for GlibcGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread locked it in `lock`.
        unsafe { libc::pthread_mutex_unlock(self.lock.mutex.get()) };
    }
}

/// Critical section length, and the work between two sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// One increment, nothing between sections.
    Short,
    /// About 100 dependent arithmetic steps on the protected data, nothing between sections.
    Long,
    /// 10 dependent steps inside and 10 outside: parking_lot's benchmark loop at work 10/10,
    /// where the holder does not take the lock back at once.
    Work10,
}

impl Section {
    pub const ALL: [Section; 3] = [Section::Short, Section::Long, Section::Work10];

    pub fn name(self) -> &'static str {
        match self {
            Section::Short => "short critical section",
            Section::Long => "long critical section",
            Section::Work10 => {
                "10 steps inside the lock, 10 outside (parking_lot's loop, work 10/10)"
            }
        }
    }
}

/// `n` dependent arithmetic steps starting from `x`.
#[inline(always)]
fn steps(x: u64, n: u32) -> u64 {
    let mut x = x | 1;
    for _ in 0..n {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
    x
}

/// The work a thread does between two critical sections.
#[inline(always)]
fn work_outside(section: Section) {
    if section == Section::Work10 {
        std::hint::black_box(steps(1, 10));
    }
}

/// What a counter's lock guards: the count, and the thread that added last, so that a run also
/// counts how often the lock changed hands.
#[derive(Default)]
struct Count {
    value: u64,
    /// The adding thread's number, from 1 (0: none yet).
    last_thread: usize,
    handovers: u64,
}

trait Counter: Send + Sync {
    /// Adds one under the lock, as thread number `thread` (from 1).
    fn add(&self, section: Section, thread: usize);
    fn value(&self) -> u64;
    /// How often an add came from another thread than the add before it.
    fn handovers(&self) -> u64;
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

/// Every `Counter` method, on a lock of `Count` that `$lock` takes: the same code for each
/// library, so that only the lock differs.
macro_rules! counter_methods {
    ($lock:ident) => {
        fn add(&self, section: Section, thread: usize) {
            work(&mut $lock(self), section, thread);
        }

        fn value(&self) -> u64 {
            $lock(self).value
        }

        fn handovers(&self) -> u64 {
            $lock(self).handovers
        }

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
            guard.value += 1;
        }
    };
}

// Each library's lock for `counter_methods!`, `#[inline]` so that every library's `add` has its
// lock's fast path in line, as a user's loop would (`locks::Locks` says why it matters).
#[inline]
fn lock_futexkit(m: &futexkit::Mutex<Count>) -> futexkit::MutexGuard<'_, Count> {
    m.lock().unwrap()
}
#[inline]
fn lock_std(m: &std::sync::Mutex<Count>) -> std::sync::MutexGuard<'_, Count> {
    m.lock().unwrap()
}
#[inline]
fn lock_parking_lot(m: &parking_lot::Mutex<Count>) -> parking_lot::MutexGuard<'_, Count> {
    m.lock()
}
#[inline]
fn lock_parking_lot_013(
    m: &parking_lot_013::Mutex<Count>,
) -> parking_lot_013::MutexGuard<'_, Count> {
    m.lock()
}
#[inline]
fn lock_glibc(m: &GlibcMutex<Count>) -> GlibcGuard<'_, Count> {
    m.lock()
}

#[inline(always)]
fn work(count: &mut Count, section: Section, thread: usize) {
    match section {
        Section::Short => count.value += 1,
        Section::Long | Section::Work10 => {
            std::hint::black_box(steps(
                count.value,
                if section == Section::Long { 100 } else { 10 },
            ));
            count.value += 1;
        }
    }
    if count.last_thread != thread {
        count.last_thread = thread;
        count.handovers += 1;
    }
}

impl Counter for futexkit::Mutex<Count> {
    counter_methods!(lock_futexkit);
}

impl Counter for std::sync::Mutex<Count> {
    counter_methods!(lock_std);
}

impl Counter for parking_lot::Mutex<Count> {
    counter_methods!(lock_parking_lot);
}

impl Counter for parking_lot_013::Mutex<Count> {
    counter_methods!(lock_parking_lot_013);
}

impl Counter for GlibcMutex<Count> {
    counter_methods!(lock_glibc);
}

fn counter(which: Impl) -> Arc<dyn Counter> {
    match which {
        Impl::Futexkit => Arc::new(futexkit::Mutex::new(Count::default())),
        Impl::Std => Arc::new(std::sync::Mutex::new(Count::default())),
        Impl::ParkingLot => Arc::new(parking_lot::Mutex::new(Count::default())),
        Impl::ParkingLot013 => Arc::new(parking_lot_013::Mutex::new(Count::default())),
        Impl::Glibc => Arc::new(GlibcMutex::new(Count::default())),
    }
}

/// Runs `body(i)` on threads `i` = 0..`threads`, started together; returns the wall time from
/// the common start until the last one ends.
fn run_threads(threads: usize, body: impl Fn(usize) + Send + Sync + 'static) -> Duration {
    let body = Arc::new(body);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (body, barrier) = (Arc::clone(&body), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                body(i);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
}

/// `threads` threads each add `per_thread` times; returns the wall time from a common start.
pub fn fixed_ops(which: Impl, threads: usize, per_thread: u64, section: Section) -> Duration {
    let c = counter(which);
    let elapsed = run_threads(threads, {
        let c = Arc::clone(&c);
        move |i| {
            for _ in 0..per_thread {
                c.add(section, i + 1);
                work_outside(section);
            }
        }
    });
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
    /// The median thread's count of increments over the average thread's (1 = even; near 0:
    /// most threads starve while a few take the lock).
    pub median_share: f64,
    /// Increments per change of hands: how many lock + unlock pairs, on average, one thread did
    /// in a row before another took the lock. A lock that changes hands moves its cache line
    /// (and, to a sleeper, costs a wake-up), so the fewer, the faster.
    pub ops_per_handover: f64,
}

/// `threads` threads add for `duration`; then a second pass of the same length times every
/// acquisition (which slows every implementation alike) for the worst-case wait.
pub fn timed(which: Impl, threads: usize, section: Section, duration: Duration) -> Throughput {
    let run = run_for(which, threads, section, duration, false);
    let max_wait = run_for(which, threads, section, duration, true).worst;
    let average = run.ops as f64 / threads as f64;
    Throughput {
        mops: run.ops as f64 / duration.as_secs_f64() / 1e6,
        max_wait,
        median_share: if average > 0.0 {
            run.median as f64 / average
        } else {
            0.0
        },
        ops_per_handover: run.ops as f64 / run.handovers.max(1) as f64,
    }
}

/// What one pass of [`run_for`] counted.
struct Run {
    /// Increments, all threads together.
    ops: u64,
    /// The longest single `lock()` (0 unless each was timed).
    worst: Duration,
    /// The median thread's increments.
    median: u64,
    /// Changes of hands ([`Counter::handovers`]).
    handovers: u64,
}

fn run_for(
    which: Impl,
    threads: usize,
    section: Section,
    duration: Duration,
    time_each: bool,
) -> Run {
    let c = counter(which);
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let worst = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
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
                        c.add(section, i + 1);
                        my_worst = my_worst.max(t.elapsed().as_nanos() as u64);
                    } else {
                        c.add(section, i + 1);
                    }
                    work_outside(section);
                    n += 1;
                }
                total.fetch_add(n, Ordering::Relaxed);
                worst.fetch_max(my_worst, Ordering::Relaxed);
                n
            })
        })
        .collect();
    barrier.wait();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut per_thread: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(c.value(), total.load(Ordering::Relaxed), "lost update");
    per_thread.sort_unstable();
    Run {
        ops: total.load(Ordering::Relaxed),
        worst: Duration::from_nanos(worst.load(Ordering::Relaxed)),
        median: per_thread[per_thread.len() / 2],
        handovers: c.handovers(),
    }
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

/// Locks picked at random (matklad's lock-bench shape: a hash table's locking): `threads`
/// threads each make `ops` lock, increment, unlock rounds, each on one of `locks` mutexes
/// picked by a per-thread xorshift; returns the wall time from a common start.
pub fn random_locks(which: Impl, threads: usize, locks: usize, ops: u64) -> Duration {
    let counters: Arc<Vec<Arc<dyn Counter>>> =
        Arc::new((0..locks).map(|_| counter(which)).collect());
    let elapsed = run_threads(threads, {
        let counters = Arc::clone(&counters);
        move |i| {
            let mut x =
                0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            for _ in 0..ops {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                counters[(x % counters.len() as u64) as usize].add(Section::Short, i + 1);
            }
        }
    });
    let total: u64 = counters.iter().map(|c| c.value()).sum();
    assert_eq!(total, threads as u64 * ops, "lost update");
    elapsed
}
