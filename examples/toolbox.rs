//! The rest of the toolbox against what people use instead, interleaved in one run: the
//! Semaphore against glibc's `sem_t` and a Mutex+Condvar semaphore (std's, parking_lot's); the
//! Latch against crossbeam-utils' `WaitGroup` and a Mutex+Condvar count; the events against a
//! Mutex+Condvar flag and an `eventfd`; the PiMutex against glibc's `PTHREAD_PRIO_INHERIT`
//! mutex, with futexkit's and glibc's plain mutexes beside it for scale.
//! `cargo run --release --example toolbox [-- --quick] [-- --oversubscribed]
//! [-- --only semaphore,latch,event,pi]`.

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use futexkit_support::contention::GlibcMutex;
use futexkit_support::pi::GlibcPiMutex;
use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::interleaved_medians;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let oversubscribed = std::env::args().any(|a| a == "--oversubscribed");
    let rounds = if quick { 1 } else { 5 };
    let busy = if oversubscribed {
        ", a busy thread on every CPU"
    } else {
        ""
    };
    println!("{}", futexkit::capabilities());
    let _load = oversubscribed.then(BackgroundLoad::start);
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map_or("semaphore,latch,event,pi", String::as_str);
    let wanted = |name: &str| only.split(',').any(|n| n == name);
    if wanted("semaphore") {
        semaphores(rounds, quick, busy);
    }
    if wanted("latch") {
        latches(rounds, quick, busy);
    }
    if wanted("event") {
        events(rounds, quick, busy);
    }
    if wanted("pi") {
        pi_mutexes(rounds, quick, busy);
    }
}

/// [`interleaved_medians`] of `N` implementations, as an array.
fn medians<const N: usize>(rounds: usize, measure: impl FnMut(usize) -> f64) -> [f64; N] {
    let m = interleaved_medians(N, rounds, f64::total_cmp, measure);
    std::array::from_fn(|i| m[i])
}

/// `value` on cache lines of its own, so that what the threads under test share is only what
/// the implementation itself puts together.
fn padded<T>(value: T) -> Box<CachePadded<T>> {
    Box::new(CachePadded::new(value))
}

/// About `units` steps of dependent arithmetic.
fn work(units: u32) {
    let mut x = 1u64;
    for _ in 0..units {
        x = black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    black_box(x);
}

/// Runs `body` on `threads` threads until `duration` passes; returns the operations per
/// microsecond (Mops/s) that they reported together.
fn throughput(threads: usize, duration: Duration, body: impl Fn(&AtomicBool) -> u64 + Sync) -> f64 {
    // On a cache line of its own: every thread reads it every iteration.
    let stop = CachePadded::new(AtomicBool::new(false));
    let start = Instant::now();
    let ops: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| body(&stop))).collect();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    ops as f64 / start.elapsed().as_secs_f64() / 1e6
}

// ---- Semaphore -------------------------------------------------------------------------

trait Semaphore: Sync {
    fn acquire(&self);
    fn release(&self);
}

impl Semaphore for futexkit::sync::Semaphore {
    fn acquire(&self) {
        self.acquire().forget();
    }
    fn release(&self) {
        self.add_permits(1);
    }
}

/// glibc's `sem_t`, private to the process.
struct GlibcSemaphore(Box<UnsafeCell<libc::sem_t>>);

// SAFETY: a sem_t is made to be used from many threads at once, through its address.
unsafe impl Sync for GlibcSemaphore {}

impl GlibcSemaphore {
    /// Initialized in place: a sem_t must not move once initialized, so it is boxed.
    fn new(permits: u32) -> GlibcSemaphore {
        let sem = GlibcSemaphore(Box::new(UnsafeCell::new(
            // SAFETY: sem_init below initializes the zeroed sem_t in place.
            unsafe { std::mem::zeroed() },
        )));
        // SAFETY: as above; the box keeps its address.
        assert_eq!(unsafe { libc::sem_init(sem.0.get(), 0, permits) }, 0);
        sem
    }
}

impl Drop for GlibcSemaphore {
    fn drop(&mut self) {
        // SAFETY: initialized in `new`, and no thread waits on it any more.
        unsafe { libc::sem_destroy(self.0.get()) };
    }
}

impl Semaphore for GlibcSemaphore {
    fn acquire(&self) {
        // SAFETY: an initialized sem_t; EINTR is retried.
        while unsafe { libc::sem_wait(self.0.get()) } != 0 {}
    }
    fn release(&self) {
        // SAFETY: an initialized sem_t.
        unsafe { libc::sem_post(self.0.get()) };
    }
}

/// What a std user writes: a count under a Mutex, a Condvar to wait for it.
struct StdSemaphore {
    permits: std::sync::Mutex<u32>,
    freed: std::sync::Condvar,
}

impl Semaphore for StdSemaphore {
    fn acquire(&self) {
        let mut permits = self.permits.lock().unwrap();
        while *permits == 0 {
            permits = self.freed.wait(permits).unwrap();
        }
        *permits -= 1;
    }
    fn release(&self) {
        *self.permits.lock().unwrap() += 1;
        self.freed.notify_one();
    }
}

/// The same on parking_lot.
struct ParkingLotSemaphore {
    permits: parking_lot::Mutex<u32>,
    freed: parking_lot::Condvar,
}

impl Semaphore for ParkingLotSemaphore {
    fn acquire(&self) {
        let mut permits = self.permits.lock();
        while *permits == 0 {
            self.freed.wait(&mut permits);
        }
        *permits -= 1;
    }
    fn release(&self) {
        *self.permits.lock() += 1;
        self.freed.notify_one();
    }
}

fn semaphore_mops(sem: &dyn Semaphore, threads: usize, duration: Duration) -> f64 {
    throughput(threads, duration, |stop| {
        let mut ops = 0;
        while !stop.load(Ordering::Relaxed) {
            sem.acquire();
            work(10);
            sem.release();
            work(10);
            ops += 1;
        }
        ops
    })
}

fn semaphores(rounds: usize, quick: bool, busy: &str) {
    const PERMITS: u32 = 2;
    let duration = Duration::from_millis(if quick { 50 } else { 200 });
    println!(
        "\nSemaphore of {PERMITS} permits{busy}: acquire, 10 steps, release, 10 steps; Mops/s, median of {rounds} interleaved runs of {duration:?}"
    );
    println!("| threads | futexkit | glibc sem_t | std Mutex+Condvar | parking_lot Mutex+Condvar | futexkit / best |");
    println!("|---|---|---|---|---|---|");
    for threads in [1, 2, 4, 8, 16, 32] {
        // Each on cache lines of its own, as the glibc one (boxed) is.
        let m: [f64; 4] = medians(rounds, |k| match k {
            0 => semaphore_mops(
                &**padded(futexkit::sync::Semaphore::new(PERMITS)),
                threads,
                duration,
            ),
            1 => semaphore_mops(&**padded(GlibcSemaphore::new(PERMITS)), threads, duration),
            2 => semaphore_mops(
                &**padded(StdSemaphore {
                    permits: std::sync::Mutex::new(PERMITS),
                    freed: std::sync::Condvar::new(),
                }),
                threads,
                duration,
            ),
            _ => semaphore_mops(
                &**padded(ParkingLotSemaphore {
                    permits: parking_lot::Mutex::new(PERMITS),
                    freed: parking_lot::Condvar::new(),
                }),
                threads,
                duration,
            ),
        });
        let best = m[1..].iter().copied().fold(0.0, f64::max);
        println!(
            "| {threads} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            m[0],
            m[1],
            m[2],
            m[3],
            m[0] / best
        );
    }
}

// ---- Latch -----------------------------------------------------------------------------

/// What a std user writes: a count under a Mutex, a Condvar to wait for zero.
struct StdLatch {
    left: std::sync::Mutex<usize>,
    zero: std::sync::Condvar,
}

impl StdLatch {
    fn count_down(&self) {
        let mut left = self.left.lock().unwrap();
        *left -= 1;
        if *left == 0 {
            self.zero.notify_all();
        }
    }
    fn wait(&self) {
        let mut left = self.left.lock().unwrap();
        while *left > 0 {
            left = self.zero.wait(left).unwrap();
        }
    }
}

/// Waits (spinning, then yielding) until `round` reaches `r`.
fn await_round(round: &AtomicUsize, r: usize) {
    let mut spins = 0u32;
    while round.load(Ordering::Acquire) < r {
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Fork-join rounds: `workers` threads wait for round `r` to start, do a little work each and
/// count down round `r`'s latch (one of `latches`, made beforehand); the main thread starts
/// each round and waits on its latch. Returns microseconds per round.
fn fork_join_us<L: Sync>(
    workers: usize,
    latches: &[L],
    count_down: impl Fn(&L) + Sync,
    wait: impl Fn(&L),
) -> f64 {
    let round = CachePadded::new(AtomicUsize::new(0));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                for (r, latch) in latches.iter().enumerate() {
                    await_round(&round, r + 1);
                    work(50);
                    count_down(latch);
                }
            });
        }
        let start = Instant::now();
        for (r, latch) in latches.iter().enumerate() {
            round.store(r + 1, Ordering::Release);
            wait(latch);
        }
        start.elapsed().as_secs_f64() * 1e6 / latches.len() as f64
    })
}

/// The same with crossbeam-utils' `WaitGroup`: each worker drops its clone of round `r`'s
/// group, the main thread waits on the group.
fn fork_join_wait_group_us(workers: usize, rounds: usize) -> f64 {
    use crossbeam_utils::sync::WaitGroup;
    let round = CachePadded::new(AtomicUsize::new(0));
    let groups: Vec<WaitGroup> = (0..rounds).map(|_| WaitGroup::new()).collect();
    let clones: Vec<Vec<WaitGroup>> = (0..workers)
        .map(|_| groups.iter().map(Clone::clone).collect())
        .collect();
    std::thread::scope(|s| {
        for mine in clones {
            let round = &round;
            s.spawn(move || {
                for (r, clone) in mine.into_iter().enumerate() {
                    await_round(round, r + 1);
                    work(50);
                    drop(clone);
                }
            });
        }
        let start = Instant::now();
        for (r, group) in groups.into_iter().enumerate() {
            round.store(r + 1, Ordering::Release);
            group.wait();
        }
        start.elapsed().as_secs_f64() * 1e6 / rounds as f64
    })
}

fn fork_join_by(which: usize, workers: usize, rounds: usize) -> f64 {
    match which {
        0 => {
            let latches: Vec<_> = (0..rounds)
                .map(|_| CachePadded::new(futexkit::sync::Latch::new(workers as u32)))
                .collect();
            fork_join_us(workers, &latches, |l| l.count_down(), |l| l.wait())
        }
        1 => fork_join_wait_group_us(workers, rounds),
        _ => {
            let latches: Vec<_> = (0..rounds)
                .map(|_| {
                    CachePadded::new(StdLatch {
                        left: std::sync::Mutex::new(workers),
                        zero: std::sync::Condvar::new(),
                    })
                })
                .collect();
            fork_join_us(workers, &latches, |l| l.count_down(), |l| l.wait())
        }
    }
}

fn latches(rounds: usize, quick: bool, busy: &str) {
    let joins = if quick { 200 } else { 2000 };
    println!(
        "\nLatch: fork-join rounds{busy} (workers start each round, work 50 steps, count down; the main thread waits); us per round, median of {rounds} interleaved runs of {joins} rounds"
    );
    println!(
        "| workers | futexkit Latch | crossbeam WaitGroup | std Mutex+Condvar | futexkit / best |"
    );
    println!("|---|---|---|---|---|");
    for workers in [1, 2, 4, 8, 16] {
        let m: [f64; 3] = medians(rounds, |k| fork_join_by(k, workers, joins));
        let best = m[1].min(m[2]);
        println!(
            "| {workers} | {:.2} | {:.2} | {:.2} | {:.2} |",
            m[0],
            m[1],
            m[2],
            best / m[0]
        );
    }
}

// ---- Event -----------------------------------------------------------------------------

/// An auto-reset signal: `set` lets one `wait` through.
trait Signal: Sync {
    fn set(&self);
    fn wait(&self);
}

impl Signal for futexkit::sync::AutoResetEvent {
    fn set(&self) {
        self.set();
    }
    fn wait(&self) {
        self.wait();
    }
}

/// futexkit's manual-reset Event used as a signal: wait, then reset.
struct ManualEvent(futexkit::sync::Event);

impl Signal for ManualEvent {
    fn set(&self) {
        self.0.set();
    }
    fn wait(&self) {
        self.0.wait();
        self.0.reset();
    }
}

/// What a std user writes: a flag under a Mutex, a Condvar to wait for it.
struct StdFlag {
    set: std::sync::Mutex<bool>,
    changed: std::sync::Condvar,
}

impl Signal for StdFlag {
    fn set(&self) {
        *self.set.lock().unwrap() = true;
        self.changed.notify_one();
    }
    fn wait(&self) {
        let mut set = self.set.lock().unwrap();
        while !*set {
            set = self.changed.wait(set).unwrap();
        }
        *set = false;
    }
}

/// An eventfd (not in semaphore mode): a write adds 1, a read waits for a non-zero count and
/// takes it all.
struct EventFd(libc::c_int);

impl EventFd {
    fn new() -> EventFd {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd failed");
        EventFd(fd)
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

impl Signal for EventFd {
    fn set(&self) {
        let one = 1u64;
        // SAFETY: writes the 8 bytes of `one` to our descriptor.
        let n = unsafe { libc::write(self.0, (&one as *const u64).cast(), 8) };
        assert_eq!(n, 8);
    }
    fn wait(&self) {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into `count`; EINTR is retried.
        while unsafe { libc::read(self.0, (&mut count as *mut u64).cast(), 8) } != 8 {}
    }
}

/// Two threads signal each other in turn `turns` times; nanoseconds per round trip.
fn ping_pong_ns(ping: &dyn Signal, pong: &dyn Signal, turns: u32) -> f64 {
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..turns {
                ping.wait();
                pong.set();
            }
        });
        let start = Instant::now();
        for _ in 0..turns {
            ping.set();
            pong.wait();
        }
        start.elapsed().as_secs_f64() * 1e9 / f64::from(turns)
    })
}

fn events(rounds: usize, quick: bool, busy: &str) {
    let turns = if quick { 2_000 } else { 20_000 };
    println!(
        "\nEvents{busy}: two threads signal each other in turn; ns per round trip, median of {rounds} interleaved runs of {turns}"
    );
    println!("| futexkit AutoResetEvent | futexkit Event (wait, reset) | eventfd | std Mutex+Condvar flag | AutoResetEvent / best |");
    println!("|---|---|---|---|---|");
    let std_flag = || StdFlag {
        set: std::sync::Mutex::new(false),
        changed: std::sync::Condvar::new(),
    };
    let m: [f64; 4] = medians(rounds, |k| match k {
        0 => ping_pong_ns(
            &**padded(futexkit::sync::AutoResetEvent::new(false)),
            &**padded(futexkit::sync::AutoResetEvent::new(false)),
            turns,
        ),
        1 => ping_pong_ns(
            &**padded(ManualEvent(futexkit::sync::Event::new(false))),
            &**padded(ManualEvent(futexkit::sync::Event::new(false))),
            turns,
        ),
        2 => ping_pong_ns(&EventFd::new(), &EventFd::new(), turns),
        _ => ping_pong_ns(&**padded(std_flag()), &**padded(std_flag()), turns),
    });
    let best = m[2].min(m[3]);
    println!(
        "| {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
        m[0],
        m[1],
        m[2],
        m[3],
        best / m[0]
    );
}

// ---- PiMutex ---------------------------------------------------------------------------

/// One counter under each kind of lock: `add_one` locks, adds, unlocks.
fn add_one(which: usize, locks: &Locks) {
    match which {
        0 => *locks.pi.lock().unwrap() += 1,
        1 => locks.glibc_pi.add_one(),
        2 => *locks.futexkit.lock().unwrap() += 1,
        _ => *locks.glibc.lock() += 1,
    }
}

/// Each on cache lines of its own.
struct Locks {
    pi: CachePadded<futexkit::sync::PiMutex<u64>>,
    glibc_pi: CachePadded<GlibcPiMutex>,
    futexkit: CachePadded<futexkit::sync::Mutex<u64>>,
    glibc: CachePadded<GlibcMutex<u64>>,
}

fn pi_mutexes(rounds: usize, quick: bool, busy: &str) {
    let Ok(pi) = futexkit::sync::PiMutex::new(0u64) else {
        println!("\nPiMutex: this kernel has no PI futexes");
        return;
    };
    let locks = Locks {
        pi: CachePadded::new(pi),
        glibc_pi: CachePadded::new(GlibcPiMutex::new()),
        futexkit: CachePadded::new(futexkit::sync::Mutex::new(0)),
        glibc: CachePadded::new(GlibcMutex::new(0)),
    };
    let names =
        "| futexkit PiMutex | glibc PI mutex | futexkit Mutex | glibc mutex | PiMutex / glibc PI |";
    let iterations = if quick { 200_000 } else { 2_000_000 };
    println!(
        "\nPiMutex, uncontended{busy}: ns per lock + add + unlock, median of {rounds} interleaved runs of {iterations}"
    );
    println!("{names}");
    println!("|---|---|---|---|---|");
    let m: [f64; 4] = medians(rounds, |k| {
        let start = Instant::now();
        for _ in 0..iterations {
            add_one(k, black_box(&locks));
        }
        start.elapsed().as_secs_f64() * 1e9 / f64::from(iterations)
    });
    println!(
        "| {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
        m[0],
        m[1],
        m[2],
        m[3],
        m[1] / m[0]
    );
    let duration = Duration::from_millis(if quick { 50 } else { 200 });
    println!(
        "\nPiMutex, contended counter{busy}: Mops/s, median of {rounds} interleaved runs of {duration:?}"
    );
    println!("| threads {names}");
    println!("|---|---|---|---|---|---|");
    for threads in [2, 4, 8, 16] {
        let m: [f64; 4] = medians(rounds, |k| {
            throughput(threads, duration, |stop| {
                let mut ops = 0;
                while !stop.load(Ordering::Relaxed) {
                    add_one(k, &locks);
                    ops += 1;
                }
                ops
            })
        });
        println!(
            "| {threads} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            m[0],
            m[1],
            m[2],
            m[3],
            m[0] / m[1]
        );
    }
}
