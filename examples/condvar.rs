//! Condvar workloads, futexkit vs std vs parking_lot, interleaved in one run: Mutex + Condvar
//! ping-pong, `notify_all` to N sleeping waiters, and a bounded queue (with the context
//! switches each item cost). With `--oversubscribed`, all of it beside a busy thread on every
//! CPU. `cargo run --release --example condvar [-- --quick] [--oversubscribed]`.

use std::time::Duration;

use futexkit_support::condvar::{
    bounded_queue, broadcast, ping_pong, voluntary_switches, Futexkit, ParkingLot, Std,
};
use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::{interleaved, on, ratio_to_best, time_ratio_to_best};

fn us(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let oversubscribed = std::env::args().any(|a| a == "--oversubscribed");
    let rounds = if quick { 3 } else { 7 };
    println!("{}", futexkit::capabilities());
    println!(
        "median of {rounds} interleaved rounds{}; futexkit / best: against the better of std and parking_lot (above 1: futexkit ahead)",
        if oversubscribed { ", a busy thread on every CPU" } else { "" }
    );
    let _load = oversubscribed.then(BackgroundLoad::start);

    let trips = if quick { 2_000 } else { 20_000 };
    let pp = interleaved(rounds, Duration::cmp, |b| {
        on(
            b,
            || ping_pong::<Futexkit>(trips),
            || ping_pong::<Std>(trips),
            || ping_pong::<ParkingLot>(trips),
        ) / trips as u32
    });
    println!("\nMutex + Condvar ping-pong: round trip ({trips} per round)");
    println!("| futexkit | std | parking_lot | futexkit / best |");
    println!("|---|---|---|---|");
    println!(
        "| {} | {} | {} | {:.2} |",
        us(pp[0]),
        us(pp[1]),
        us(pp[2]),
        time_ratio_to_best(pp.map(|d| d.as_secs_f64()))
    );

    let broadcasts = if quick { 20 } else { 100 };
    println!("\nnotify_all to N sleeping waiters: time until all ran (median of {broadcasts} broadcasts per round), voluntary context switches per broadcast");
    println!(
        "| waiters | futexkit | std | parking_lot | futexkit / best | switches fk / std / pl |"
    );
    println!("|---|---|---|---|---|---|");
    for waiters in [2, 8, 32] {
        let r = interleaved(
            rounds,
            |a: &(Duration, f64), b| a.0.cmp(&b.0),
            |b| {
                let r = on(
                    b,
                    || broadcast::<Futexkit>(waiters, broadcasts),
                    || broadcast::<Std>(waiters, broadcasts),
                    || broadcast::<ParkingLot>(waiters, broadcasts),
                );
                (r.all_ran, r.switches)
            },
        );
        println!(
            "| {waiters} | {} | {} | {} | {:.2} | {:.1} / {:.1} / {:.1} |",
            us(r[0].0),
            us(r[1].0),
            us(r[2].0),
            time_ratio_to_best(r.map(|x| x.0.as_secs_f64())),
            r[0].1,
            r[1].1,
            r[2].1
        );
    }

    let items = if quick { 20_000 } else { 200_000 };
    println!("\nbounded queue (capacity 16), N producers + N consumers, {items} items: million items per second; voluntary context switches per item");
    println!("| N | futexkit | std | parking_lot | futexkit / best | switches fk / std / pl |");
    println!("|---|---|---|---|---|---|");
    for pairs in [1, 4, 16] {
        let r = interleaved(
            rounds,
            |a: &(f64, f64), b| a.0.total_cmp(&b.0),
            |b| {
                let switches = voluntary_switches();
                let t = on(
                    b,
                    || bounded_queue::<Futexkit>(pairs, items, 16),
                    || bounded_queue::<Std>(pairs, items, 16),
                    || bounded_queue::<ParkingLot>(pairs, items, 16),
                );
                let per_item = (voluntary_switches() - switches) as f64 / items as f64;
                (items as f64 / t.as_secs_f64() / 1e6, per_item)
            },
        );
        println!(
            "| {pairs} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} / {:.2} |",
            r[0].0,
            r[1].0,
            r[2].0,
            ratio_to_best(r.map(|x| x.0)),
            r[0].1,
            r[1].1,
            r[2].1
        );
    }
}
