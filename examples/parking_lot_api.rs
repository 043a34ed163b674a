//! parking_lot's API on three engines: `futexkit::parking_lot` (lock_api 0.5 over futexkit's raw
//! locks) against parking_lot 0.13, whose API it follows, and parking_lot 0.12, which most users
//! still run; the same code written once with only the import path changed, interleaved in one
//! run, idle and with a busy thread on every CPU.
//! `cargo run --release --features lock_api_05 --example parking_lot_api [-- --quick]`.
//!
//! Rows: a contended counter (`*mutex.lock() += 1`), and a read-mostly table with upgrades:
//! 90 % plain reads; 10 % upgradable reads, half of which upgrade and write, the pattern
//! upgradable reads exist for (look, then change only if needed, with no writer in between).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::interleaved_medians;

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
workloads!(on_parking_lot_013, parking_lot_013);

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
        "parking_lot's API: futexkit::parking_lot against parking_lot 0.13 and 0.12, million operations per second, median of {rounds} interleaved rounds of {duration:?}; futexkit / best: against the better parking_lot, the only other library with this API (above 1: futexkit ahead)"
    );
    for busy in [false, true] {
        let _load = busy.then(BackgroundLoad::start);
        let load = if busy {
            ", a busy thread on every CPU"
        } else {
            ", idle"
        };
        type Workload = fn(usize, Duration) -> f64;
        let tables: [(&str, [Workload; 3]); 2] = [
            (
                "Mutex, contended counter",
                [
                    on_futexkit::counter,
                    on_parking_lot_013::counter,
                    on_parking_lot::counter,
                ],
            ),
            (
                "RwLock, read-mostly with upgrades (90 % reads, 5 % upgradable reads, 5 % upgrades)",
                [
                    on_futexkit::upgrades,
                    on_parking_lot_013::upgrades,
                    on_parking_lot::upgrades,
                ],
            ),
        ];
        for (title, [futexkit, pl13, pl12]) in tables {
            println!("\n{title}{load}");
            println!(
                "| threads | futexkit | parking_lot 0.13 | parking_lot 0.12 | futexkit / best |"
            );
            println!("|---|---|---|---|---|");
            for &threads in &counts {
                let runs = [futexkit, pl13, pl12];
                let medians = interleaved_medians(runs.len(), rounds, f64::total_cmp, |i| {
                    runs[i](threads, duration)
                });
                let [fk, pl13, pl12] = medians[..] else {
                    unreachable!("one median per library")
                };
                println!(
                    "| {threads} | {fk:.2} | {pl13:.2} | {pl12:.2} | {:.2} |",
                    fk / pl13.max(pl12)
                );
            }
        }
    }
}
