//! Soak test for the Mutex: many threads hammer one lock for a while, and a watchdog reports a
//! hang (no progress for 5 s) instead of waiting forever. Tests on a 2-core CI machine cannot
//! reach the interleavings that 16 cores reach in seconds; run this on the big machine.
//!
//! `cargo run --release --example soak [-- SECONDS [THREADS...]]` (default: 10 s per count,
//! 2 4 8 16 32 64 threads). Exits 1 on a hang or a lost update.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futexkit::RawMutex;

const STALL: Duration = Duration::from_secs(5);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(10);
    let counts: Vec<usize> = if args.len() > 1 {
        args[1..].iter().filter_map(|s| s.parse().ok()).collect()
    } else {
        vec![2, 4, 8, 16, 32, 64]
    };
    println!("{}", futexkit::capabilities());
    for threads in counts {
        let ops = soak(threads, Duration::from_secs(seconds));
        println!(
            "{threads:>3} threads: {ops} lock/unlock pairs in {seconds} s, no hang, no lost update"
        );
    }
}

fn soak(threads: usize, duration: Duration) -> u64 {
    let mutex = Arc::new(RawMutex::new());
    // Updated with a separate load and store: only mutual exclusion keeps it exact.
    let counter = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (mutex, counter, done, stop) = (
                Arc::clone(&mutex),
                Arc::clone(&counter),
                Arc::clone(&done),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                // Mixed hold times, some sleeps inside and outside, some timed locks: the
                // uncontended, spinning, sleeping, hand-off and timeout paths all run.
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ i as u64;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let timed = rng % 16 == 0;
                    let locked = if timed {
                        mutex.try_lock_for(Duration::from_micros(rng % 200))
                    } else {
                        mutex.lock();
                        true
                    };
                    if locked {
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                        n += 1;
                        if n % 1024 == 0 {
                            done.fetch_add(1024, Ordering::Relaxed);
                        }
                        if rng % 1024 == 1 {
                            std::thread::sleep(Duration::from_micros(50));
                        } else {
                            for _ in 0..rng % 64 {
                                std::hint::spin_loop();
                            }
                        }
                        // SAFETY: locked above.
                        unsafe { mutex.unlock() };
                    }
                    if rng % 512 == 3 {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
                n
            })
        })
        .collect();
    let start = Instant::now();
    let mut last = (0, Instant::now());
    // Watches the stop and the joins too: a thread stranded asleep shows up as a stall.
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() >= duration {
            stop.store(true, Ordering::Relaxed);
        }
        let finished = handles.iter().filter(|h| h.is_finished()).count() as u64;
        let progress = done.load(Ordering::Relaxed) + finished;
        if progress != last.0 {
            last = (progress, Instant::now());
        } else if last.1.elapsed() > STALL {
            eprintln!("HANG: {threads} threads made no progress for {STALL:?}; mutex: {mutex:?}");
            std::process::exit(1);
        }
    }
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let counted = counter.load(Ordering::Relaxed);
    if counted != total {
        eprintln!("LOST UPDATE: counter {counted}, acquisitions {total}");
        std::process::exit(1);
    }
    total
}
