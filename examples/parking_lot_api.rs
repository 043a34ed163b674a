//! parking_lot's API on two engines: `parking_lot` 0.12 itself against `futexkit::parking_lot`
//! (lock_api 0.5 over futexkit's raw locks), the same code written once with only the import
//! path changed, interleaved in one run, idle and with a busy thread on every CPU.
//! `cargo run --release --features lock_api_05 --example parking_lot_api [-- --quick]`.
//!
//! Rows: a contended counter (`*mutex.lock() += 1`), and a read-mostly table with upgrades:
//! 90 % plain reads; 10 % upgradable reads, half of which upgrade and write, the pattern
//! upgradable reads exist for (look, then change only if needed, with no writer in between).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use futexkit_support::pingpong::BackgroundLoad;

/// The workloads, written once against parking_lot's API; `$path` is the library.
macro_rules! workloads {
    ($name:ident, $path:path) => {
        mod $name {
            use super::*;
            use $path as pl;

            /// Million `lock(); += 1; unlock()` per second, over `threads` threads.
            pub fn counter(threads: usize, duration: Duration) -> f64 {
                let lock = Arc::new(pl::Mutex::new(0u64));
                run(threads, duration, move |_, stop| {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        *lock.lock() += 1;
                        n += 1;
                    }
                    n
                })
            }

            /// Million table operations per second: 90 % reads, 5 % upgradable reads that
            /// stay reads, 5 % that upgrade and write.
            pub fn upgrades(threads: usize, duration: Duration) -> f64 {
                let table = Arc::new(pl::RwLock::new(vec![0u64; 64]));
                run(threads, duration, move |id, stop| {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (id as u64 + 1);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let slot = (x >> 8) as usize % 64;
                        match x % 100 {
                            0..=89 => {
                                std::hint::black_box(table.read()[slot]);
                            }
                            roll => {
                                let read = table.upgradable_read();
                                if roll >= 95 && read[slot] % 2 == 0 {
                                    let mut write = pl::RwLockUpgradableReadGuard::upgrade(read);
                                    write[slot] += 1;
                                } else {
                                    std::hint::black_box(read[slot]);
                                }
                            }
                        }
                        n += 1;
                    }
                    n
                })
            }
        }
    };
}

workloads!(on_futexkit, futexkit::parking_lot);
workloads!(on_parking_lot, parking_lot);

/// Runs `work(thread index, stop)` on `threads` threads for `duration`; returns million
/// operations per second (the sum of what `work` returns).
fn run(
    threads: usize,
    duration: Duration,
    work: impl Fn(usize, &AtomicBool) -> u64 + Send + Sync + 'static,
) -> f64 {
    let work = Arc::new(work);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let (work, stop, start) = (Arc::clone(&work), Arc::clone(&stop), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                work(id, &stop)
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    ops as f64 / began.elapsed().as_secs_f64() / 1e6
}

/// Median of `rounds` paired runs, alternating which library goes first.
fn paired(rounds: usize, futexkit: impl Fn() -> f64, parking_lot: impl Fn() -> f64) -> (f64, f64) {
    let (mut fk, mut pl) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            fk.push(futexkit());
            pl.push(parking_lot());
        } else {
            pl.push(parking_lot());
            fk.push(futexkit());
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(fk), median(pl))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, duration) = if quick {
        (1, Duration::from_millis(100))
    } else {
        (5, Duration::from_millis(300))
    };
    let cpus = futexkit::capabilities().usable_cpus();
    let mut counts: Vec<usize> = vec![1, 2, 4, 8, 16, cpus, 2 * cpus];
    counts.sort_unstable();
    counts.dedup();
    println!("{}", futexkit::capabilities());
    println!(
        "parking_lot's API: futexkit::parking_lot against parking_lot 0.12, million operations per second, median of {rounds} paired rounds of {duration:?}; futexkit / best: against parking_lot, the only other library with this API (above 1: futexkit ahead)"
    );
    for busy in [false, true] {
        let _load = busy.then(BackgroundLoad::start);
        let load = if busy {
            ", a busy thread on every CPU"
        } else {
            ", idle"
        };
        for (title, futexkit, parking_lot) in [
            (
                "Mutex, contended counter",
                on_futexkit::counter as fn(usize, Duration) -> f64,
                on_parking_lot::counter as fn(usize, Duration) -> f64,
            ),
            (
                "RwLock, read-mostly with upgrades (90 % reads, 5 % upgradable reads, 5 % upgrades)",
                on_futexkit::upgrades,
                on_parking_lot::upgrades,
            ),
        ] {
            println!("\n{title}{load}");
            println!("| threads | futexkit | parking_lot | futexkit / best |");
            println!("|---|---|---|---|");
            for &threads in &counts {
                let (fk, pl) = paired(
                    rounds,
                    || futexkit(threads, duration),
                    || parking_lot(threads, duration),
                );
                println!("| {threads} | {fk:.2} | {pl:.2} | {:.2} |", fk / pl);
            }
        }
    }
}
