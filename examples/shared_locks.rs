//! futexkit::shared between processes against glibc's robust, process-shared pthread mutex and
//! condition variable, interleaved in one run, idle and with a busy thread on every CPU:
//! contended locking by 2, 4 and 8 processes, a condvar hand-off between two processes, and the
//! time from a holder's death to the next locker's return; futexkit's in-process locks between
//! threads beside them for reference.
//!
//! `cargo run --release --example shared_locks [-- --quick]`; for instruction counts,
//! `valgrind --tool=callgrind target/release/examples/shared_locks uncontended IMPL N` with IMPL
//! `futexkit-shared`, `pthread-robust` or `futexkit`.

use std::time::Duration;

use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::interleaved;
use futexkit_support::shared::{contended, death_to_next_locker, handoff, uncontended, warm_up};

fn us(d: Duration) -> String {
    format!("{:.2} us", d.as_secs_f64() * 1e6)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("uncontended") {
        let n = args
            .get(3)
            .and_then(|n| n.parse().ok())
            .unwrap_or(1_000_000);
        uncontended(args.get(2).map_or("futexkit-shared", String::as_str), n);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 7 };
    let time = Duration::from_millis(if quick { 100 } else { 300 });
    let trips = if quick { 2_000 } else { 20_000 };
    let deaths = if quick { 5 } else { 21 };
    warm_up();
    println!("{}", futexkit::capabilities());
    println!("median of {rounds} interleaved rounds; futexkit / best: futexkit's shared lock against glibc's robust process-shared one (above 1: futexkit ahead); in-process: futexkit::sync between threads, for reference");

    for busy in [false, true] {
        let _load = busy.then(BackgroundLoad::start);
        let load = if busy {
            ", a busy thread on every CPU"
        } else {
            ""
        };
        println!("\ncontended counter: N processes (threads, in-process) lock, add 1, unlock for {} ms{load}: million locked increments per second", time.as_millis());
        println!("| processes | futexkit shared | pthread robust | futexkit / best | in-process |");
        println!("|---|---|---|---|---|");
        for workers in [2, 4, 8] {
            let r = interleaved(rounds, f64::total_cmp, |imp| contended(imp, workers, time));
            println!(
                "| {workers} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r[0],
                r[1],
                r[0] / r[1],
                r[2]
            );
        }
        let r = interleaved(rounds, Duration::cmp, |imp| handoff(imp, trips));
        println!("\nMutex + Condvar hand-off between two processes (threads, in-process){load}: round trip ({trips} per round)");
        println!("| futexkit shared | pthread robust | futexkit / best | in-process |");
        println!("|---|---|---|---|");
        println!(
            "| {} | {} | {:.2} | {} |",
            us(r[0]),
            us(r[1]),
            r[1].as_secs_f64() / r[0].as_secs_f64(),
            us(r[2])
        );
    }

    let r = interleaved(1, Duration::cmp, |imp| {
        death_to_next_locker(imp, deaths).unwrap_or_default()
    });
    println!("\nA holder process SIGKILLed while another process's thread sleeps in lock: time from the kill to that lock's return, which reports the death (median of {deaths})");
    println!("| futexkit shared | pthread robust | futexkit / best |");
    println!("|---|---|---|");
    println!(
        "| {} | {} | {:.2} |",
        us(r[0]),
        us(r[1]),
        r[1].as_secs_f64() / r[0].as_secs_f64()
    );
}
