//! Contended-counter throughput, worst-case wait, the median thread's share and the increments
//! one thread makes before the lock changes hands: futexkit's Mutex vs std's vs parking_lot's
//! (0.12 and 0.13) vs glibc's `pthread_mutex_t`, interleaved in one run; then locks picked at
//! random out of 2, 64 and 1,000 by 32 threads (a hash table's locking).
//! `cargo run --release --example contention [-- --quick] [-- --oversubscribed]
//! [-- --threads 4,8]`.

use futexkit_support::contention;
use futexkit_support::pingpong;
use futexkit_support::report::interleaved_medians;

use std::time::Duration;

use contention::{hand_off, random_locks, timed, Impl, Section, Throughput};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let oversubscribed = std::env::args().any(|a| a == "--oversubscribed");
    let args: Vec<String> = std::env::args().collect();
    let thread_counts: Vec<usize> = match args.iter().position(|a| a == "--threads") {
        Some(i) => args
            .get(i + 1)
            .map(|list| list.split(',').filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_default(),
        None => vec![1, 2, 4, 8, 16, 32, 64],
    };
    let duration = Duration::from_millis(if quick { 100 } else { 300 });
    let rounds = if quick { 1 } else { 3 };
    println!("{}", futexkit::capabilities());
    println!(
        "contended counter{}: Mops/s (median of {rounds} interleaved runs of {duration:?}), max wait",
        if oversubscribed { ", a busy thread on every CPU" } else { "" }
    );
    let _load = oversubscribed.then(pingpong::BackgroundLoad::start);
    let rounds_hand_off = if quick { 50 } else { 300 };
    print!("\nlock hand-off to a sleeping waiter (mean of {rounds_hand_off}):");
    for which in Impl::ALL {
        let t = hand_off(which, rounds_hand_off) / rounds_hand_off as u32;
        print!("  {} {:.1} us", which.name(), t.as_secs_f64() * 1e6);
    }
    println!();
    for section in Section::ALL {
        println!("\n{}", section.name());
        println!(
            "| threads | {} | futexkit / best | max wait {SHORT} | median thread / average {SHORT} | increments per handover {SHORT} |",
            names()
        );
        println!("|---|{}---|---|---|---|", "---|".repeat(Impl::ALL.len()));
        for &threads in &thread_counts {
            let med = interleaved_medians(
                Impl::ALL.len(),
                rounds,
                |a: &Throughput, b| a.mops.total_cmp(&b.mops),
                |i| timed(Impl::ALL[i], threads, section, duration),
            );
            let best_other = med[1..].iter().map(|t| t.mops).fold(0.0, f64::max);
            let waits: Vec<String> = med.iter().map(|t| fmt(t.max_wait)).collect();
            let shares: Vec<String> = med
                .iter()
                .map(|t| format!("{:.2}", t.median_share))
                .collect();
            let per_handover: Vec<String> = med
                .iter()
                .map(|t| format!("{:.0}", t.ops_per_handover))
                .collect();
            println!(
                "| {threads:>7} | {} | {:>15.2} | {} | {} | {} |",
                cells(med.iter().map(|t| t.mops)),
                med[0].mops / best_other,
                waits.join(" / "),
                shares.join(" / "),
                per_handover.join(" / "),
            );
        }
    }
    random_locks_table(
        if quick { 1 } else { 15 },
        if quick { 2_000 } else { 10_000 },
    );
}

/// 32 threads, each `ops` rounds on a lock picked at random out of `locks`: the median time of
/// `rounds` interleaved runs per library.
fn random_locks_table(rounds: usize, ops: u64) {
    const THREADS: usize = 32;
    println!(
        "\nrandom locks: {THREADS} threads, {ops} lock + increment + unlock each, on a lock picked at random: ms (median of {rounds} interleaved runs; lower is better)"
    );
    println!("| locks | {} | futexkit / best |", names());
    println!("|---|{}---|", "---|".repeat(Impl::ALL.len()));
    for locks in [2usize, 64, 1000] {
        let med: Vec<f64> = interleaved_medians(Impl::ALL.len(), rounds, Duration::cmp, |i| {
            random_locks(Impl::ALL[i], THREADS, locks, ops)
        })
        .into_iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
        let best_other = med[1..].iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "| {locks:>5} | {} | {:>15.2} |",
            cells(med.iter().copied()),
            best_other / med[0],
        );
    }
}

/// The libraries' short names in the max-wait and median-thread columns, in `Impl::ALL`'s order.
const SHORT: &str = "fk / std / pl / pl 0.13 / glibc";

/// The libraries' names as column headers, in `Impl::ALL`'s order.
fn names() -> String {
    let names: Vec<String> = Impl::ALL
        .iter()
        .map(|which| format!("{:>10}", which.name()))
        .collect();
    names.join(" | ")
}

/// One cell per library, in `Impl::ALL`'s order.
fn cells(values: impl Iterator<Item = f64>) -> String {
    let cells: Vec<String> = values.map(|v| format!("{v:>10.2}")).collect();
    cells.join(" | ")
}

fn fmt(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{} us", d.as_micros())
    }
}
