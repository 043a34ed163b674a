//! RwLock and Barrier, futexkit vs std vs parking_lot, interleaved in one run: read-only
//! scaling, read/write mixes, writers among readers (each side's throughput), a writer's wait
//! under a continuous stream of readers, and barrier rounds per second.
//! `cargo run --release --example rwlock [-- --quick] [--oversubscribed] [--writers 1,4]
//! [--readers 0,4,16]` (the last two: the rows of the writers-among-readers table; with
//! `--oversubscribed`, everything runs beside a busy thread on every CPU).

use std::time::Duration;

use futexkit_support::locks::{Futexkit, Locks, ParkingLot, Std};
use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::{interleaved, on, ratio_to_best};
use futexkit_support::rwlock::{
    barrier_rounds, mixed, writer_wait_under_readers, writers_among_readers,
};

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

/// One run of writers among readers, as the table shows it: each side's total, and its
/// slowest and median threads' rates against the side's average (a side with no threads: 0,
/// and 1 for both).
#[derive(Clone, Copy)]
struct Sides {
    writes: f64,
    reads: f64,
    writers: Spread,
    readers: Spread,
}

/// The slowest and the median thread of one side, each over the side's average.
#[derive(Clone, Copy)]
struct Spread {
    slowest: f64,
    median: f64,
}

fn spread(rates: &[f64]) -> Spread {
    if rates.is_empty() {
        return Spread {
            slowest: 1.0,
            median: 1.0,
        };
    }
    let average = (rates.iter().sum::<f64>() / rates.len() as f64).max(f64::MIN_POSITIVE);
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    Spread {
        slowest: sorted[0].min(average) / average,
        median: sorted[sorted.len() / 2] / average,
    }
}

fn sides((writes, reads): (Vec<f64>, Vec<f64>)) -> Sides {
    Sides {
        writes: writes.iter().sum(),
        reads: reads.iter().sum(),
        writers: spread(&writes),
        readers: spread(&reads),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let oversubscribed = args.iter().any(|a| a == "--oversubscribed");
    let list = |name: &str, default: &[usize]| -> Vec<usize> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default.to_vec(), |l| {
                l.split(',')
                    .map(|n| n.parse().unwrap_or_else(|_| panic!("{name} 1,4,16")))
                    .collect()
            })
    };
    let (writer_rows, reader_rows) = (list("--writers", &[1, 4]), list("--readers", &[0, 4, 16]));
    let (rounds, duration) = if quick {
        (1, Duration::from_millis(100))
    } else {
        (3, Duration::from_millis(300))
    };
    println!("{}", futexkit::capabilities());
    println!(
        "RwLock, median of {rounds} interleaved rounds of {duration:?}{}; futexkit / best: futexkit against the better of std and parking_lot (above 1: ahead)",
        if oversubscribed { ", a busy thread on every CPU" } else { "" }
    );
    let _load = oversubscribed.then(BackgroundLoad::start);

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
        "\nWriters among readers: write and read throughput, million operations per second (median round by write throughput); slowest, median: the slowest and the median thread's rate over its side's average"
    );
    println!("| writers | readers | writes fk | writes std | writes pl | reads fk | reads std | reads pl | writes fk / best | reads fk / best | total fk / best | slowest, median writer fk / std / pl | slowest, median reader fk / std / pl |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &writers in &writer_rows {
        for &readers in &reader_rows {
            let r = interleaved(
                rounds,
                |a: &Sides, b| a.writes.total_cmp(&b.writes),
                |b| {
                    on(
                        b,
                        || {
                            sides(writers_among_readers::<Futexkit>(
                                writers, readers, duration,
                            ))
                        },
                        || sides(writers_among_readers::<Std>(writers, readers, duration)),
                        || {
                            sides(writers_among_readers::<ParkingLot>(
                                writers, readers, duration,
                            ))
                        },
                    )
                },
            );
            let per_side = |f: fn(&Sides) -> f64| r.map(|s| f(&s));
            let [writes, reads, totals] = [
                per_side(|s| s.writes),
                per_side(|s| s.reads),
                per_side(|s| s.writes + s.reads),
            ];
            let spreads = |f: fn(&Sides) -> Spread| {
                r.iter()
                    .map(|s| format!("{:.2}, {:.2}", f(s).slowest, f(s).median))
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let (reads_shown, read_ratio, reader_spreads) = if readers == 0 {
                (
                    ["-".to_string(), "-".to_string(), "-".to_string()],
                    "-".to_string(),
                    "-".to_string(),
                )
            } else {
                (
                    reads.map(|x| format!("{x:.2}")),
                    format!("{:.2}", ratio_to_best(reads)),
                    spreads(|s| s.readers),
                )
            };
            println!(
                "| {writers} | {readers} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {:.2} | {} | {:.2} | {} | {} |",
                writes[0],
                writes[1],
                writes[2],
                reads_shown[0],
                reads_shown[1],
                reads_shown[2],
                ratio_to_best(writes),
                read_ratio,
                ratio_to_best(totals),
                spreads(|s| s.writers),
                reader_spreads,
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
        // Each backend runs enough rounds to fill the time budget at its own pace, so that
        // thread start-up does not dominate, and a slow one is not held to a fast one's count
        // (spinning barriers far outpace sleeping ones, and a short pace sample can outpace
        // both).
        let rounds_for = |pace: f64| ((pace * duration.as_secs_f64()) as usize).max(200);
        let n = [
            rounds_for(barrier_rounds::<Futexkit>(threads, 200)),
            rounds_for(barrier_rounds::<Std>(threads, 200)),
            rounds_for(barrier_rounds::<ParkingLot>(threads, 200)),
        ];
        let r = interleaved(rounds, f64::total_cmp, |b| {
            on(
                b,
                || barrier_rounds::<Futexkit>(threads, n[0]),
                || barrier_rounds::<Std>(threads, n[1]),
                || barrier_rounds::<ParkingLot>(threads, n[2]),
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
