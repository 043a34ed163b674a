//! RwLock and Barrier, futexkit vs std vs parking_lot, interleaved in one run: read-only
//! scaling, read/write mixes, writers among readers (each side's throughput), a writer's wait
//! under a continuous stream of readers, and barrier rounds per second.
//! `cargo run --release --example rwlock [-- --quick]`.

use std::time::Duration;

use futexkit_support::locks::{Futexkit, Locks, ParkingLot, Std};
use futexkit_support::report::{interleaved, on, ratio_to_best};
use futexkit_support::rwlock::{
    barrier_rounds, mixed, writer_wait_under_readers, writers_among_readers,
};

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

/// Each side's total of per-thread rates.
fn sums((writes, reads): (Vec<f64>, Vec<f64>)) -> (f64, f64) {
    (writes.iter().sum(), reads.iter().sum())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, duration) = if quick {
        (1, Duration::from_millis(100))
    } else {
        (3, Duration::from_millis(300))
    };
    println!("{}", futexkit::capabilities());
    println!(
        "RwLock, median of {rounds} interleaved rounds of {duration:?}; futexkit / best: futexkit against the better of std and parking_lot (above 1: ahead)"
    );

    println!("\nRead-only: million read locks per second");
    println!("| threads | futexkit | std | parking_lot | futexkit / best |");
    println!("|---|---|---|---|---|");
    for threads in [1, 2, 4, 8, 16, 32] {
        let r = interleaved(rounds, f64::total_cmp, |b| {
            on(
                b,
                || mixed::<Futexkit>(threads, 0, duration),
                || mixed::<Std>(threads, 0, duration),
                || mixed::<ParkingLot>(threads, 0, duration),
            )
        });
        println!(
            "| {threads} | {:.1} | {:.1} | {:.1} | {:.2} |",
            r[0],
            r[1],
            r[2],
            ratio_to_best(r)
        );
    }

    println!("\nRead/write mixes: million lock operations per second");
    println!("| threads | reads/writes | futexkit | std | parking_lot | futexkit / best |");
    println!("|---|---|---|---|---|---|");
    for threads in [4, 16] {
        for (label, per_mille) in [("99/1", 10), ("90/10", 100), ("50/50", 500)] {
            let r = interleaved(rounds, f64::total_cmp, |b| {
                on(
                    b,
                    || mixed::<Futexkit>(threads, per_mille, duration),
                    || mixed::<Std>(threads, per_mille, duration),
                    || mixed::<ParkingLot>(threads, per_mille, duration),
                )
            });
            println!(
                "| {threads} | {label} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r[0],
                r[1],
                r[2],
                ratio_to_best(r)
            );
        }
    }

    println!(
        "\nWriters among readers: write and read throughput, million operations per second (median round by write throughput)"
    );
    println!("| writers | readers | writes fk | writes std | writes pl | reads fk | reads std | reads pl | writes fk / best | reads fk / best |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for writers in [1, 4] {
        for readers in [0, 4, 16] {
            let r = interleaved(
                rounds,
                |a: &(f64, f64), b| a.0.total_cmp(&b.0),
                |b| {
                    on(
                        b,
                        || {
                            sums(writers_among_readers::<Futexkit>(
                                writers, readers, duration,
                            ))
                        },
                        || sums(writers_among_readers::<Std>(writers, readers, duration)),
                        || {
                            sums(writers_among_readers::<ParkingLot>(
                                writers, readers, duration,
                            ))
                        },
                    )
                },
            );
            let reads = if readers == 0 {
                [
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                ]
            } else {
                [
                    format!("{:.2}", r[0].1),
                    format!("{:.2}", r[1].1),
                    format!("{:.2}", r[2].1),
                    format!("{:.2}", ratio_to_best([r[0].1, r[1].1, r[2].1])),
                ]
            };
            println!(
                "| {writers} | {readers} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {:.2} | {} |",
                r[0].0,
                r[1].0,
                r[2].0,
                reads[0],
                reads[1],
                reads[2],
                ratio_to_best([r[0].0, r[1].0, r[2].0]),
                reads[3]
            );
        }
    }

    let (readers, hold, writes) = (4, Duration::from_micros(100), if quick { 50 } else { 200 });
    println!(
        "\nA writer's wait while {readers} readers read in a loop, each holding {hold:?} (they overlap): p99 / longest of {writes} writes"
    );
    println!("| futexkit | std | parking_lot |");
    println!("|---|---|---|");
    let r = interleaved(
        rounds,
        |a: &(Duration, Duration), b| a.1.cmp(&b.1),
        |b| {
            on(
                b,
                || writer_wait_under_readers::<Futexkit>(readers, hold, writes),
                || writer_wait_under_readers::<Std>(readers, hold, writes),
                || writer_wait_under_readers::<ParkingLot>(readers, hold, writes),
            )
        },
    );
    println!(
        "| {} / {} | {} / {} | {} / {} |",
        us(r[0].0),
        us(r[0].1),
        us(r[1].0),
        us(r[1].1),
        us(r[2].0),
        us(r[2].1)
    );

    println!("\nBarrier: rounds per second (parking_lot has no barrier: std's algorithm on its Mutex and Condvar)");
    println!("| threads | futexkit | std | parking_lot | futexkit / best |");
    println!("|---|---|---|---|---|");
    for threads in [2, 4, 8, 32] {
        // Enough rounds to fill the time budget at the fastest backend's pace, so that thread
        // start-up does not dominate.
        let pace = [
            barrier_rounds::<Futexkit>(threads, 200),
            barrier_rounds::<Std>(threads, 200),
            barrier_rounds::<ParkingLot>(threads, 200),
        ]
        .into_iter()
        .fold(0.0, f64::max);
        let n = ((pace * duration.as_secs_f64()) as usize).max(200);
        let r = interleaved(rounds, f64::total_cmp, |b| {
            on(
                b,
                || barrier_rounds::<Futexkit>(threads, n),
                || barrier_rounds::<Std>(threads, n),
                || barrier_rounds::<ParkingLot>(threads, n),
            )
        });
        println!(
            "| {threads} | {:.0} | {:.0} | {:.0} | {:.2} |",
            r[0],
            r[1],
            r[2],
            ratio_to_best(r)
        );
    }
    let _ = <Futexkit as Locks>::NAME;
}
