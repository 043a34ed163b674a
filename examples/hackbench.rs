//! hackbench-style macro benchmark: groups of 20 senders and 20 receivers exchanging messages
//! through Mutex + Condvar queues (one bounded queue per receiver), as hackbench exercises the
//! scheduler with pipes. Total time for 1 to 10 groups, futexkit vs std vs parking_lot,
//! interleaved; with `--oversubscribed`, beside a busy thread on every CPU.
//! `cargo run --release --example hackbench [-- --quick] [--oversubscribed]`.

use futexkit_support::condvar;
use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::{interleaved, on};

use std::time::Duration;

use condvar::{hackbench, Futexkit, ParkingLot, Std};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let oversubscribed = std::env::args().any(|a| a == "--oversubscribed");
    let loops = if quick { 10 } else { 50 };
    let runs = if quick { 1 } else { 7 };
    println!("{}", futexkit::capabilities());
    println!(
        "\nhackbench-style: each of 20 senders sends {loops} messages to each of 20 receivers per group; total time, median of {runs}{}",
        if oversubscribed { "; a busy thread on every CPU" } else { "" }
    );
    let _load = oversubscribed.then(BackgroundLoad::start);
    println!("| groups | threads | futexkit | std | parking_lot | futexkit / best |");
    println!("|---|---|---|---|---|---|");
    for groups in [1, 2, 4, 6, 8, 10] {
        let t = interleaved(runs, Duration::cmp, |backend| {
            on(
                backend,
                || hackbench::<Futexkit>(groups, loops),
                || hackbench::<Std>(groups, loops),
                || hackbench::<ParkingLot>(groups, loops),
            )
        });
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "| {groups} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} |",
            groups * 40,
            ms(t[0]),
            ms(t[1]),
            ms(t[2]),
            t[1].min(t[2]).as_secs_f64() / t[0].as_secs_f64()
        );
    }
}
