//! Condvar workloads, futexkit vs std vs parking_lot, interleaved in one run:
//! `cargo run --release --example condvar [-- --quick]`.

use futexkit_support::condvar;

use std::time::Duration;

use condvar::{bounded_queue, broadcast, ping_pong, Backend, Futexkit, ParkingLot, Std};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 7 };
    println!("{}", futexkit::capabilities());

    let rounds = if quick { 2_000 } else { 20_000 };
    let mut pp: [Vec<Duration>; 3] = Default::default();
    for _ in 0..runs {
        pp[0].push(ping_pong::<Futexkit>(rounds) / rounds as u32);
        pp[1].push(ping_pong::<Std>(rounds) / rounds as u32);
        pp[2].push(ping_pong::<ParkingLot>(rounds) / rounds as u32);
    }
    let pp = pp.map(median);
    println!("\nMutex + Condvar ping-pong round trip (median of {runs} runs of {rounds})");
    println!("| futexkit | std | parking_lot | futexkit / std |");
    println!("|---|---|---|---|");
    println!(
        "| {} | {} | {} | {:.2} |",
        us(pp[0]),
        us(pp[1]),
        us(pp[2]),
        pp[0].as_secs_f64() / pp[1].as_secs_f64()
    );

    let rounds = if quick { 20 } else { 100 };
    println!("\nnotify_all to N sleeping waiters: time until all ran (median of {rounds}), voluntary context switches per broadcast");
    println!("| waiters | futexkit | std | parking_lot | switches fk / std / pl |");
    println!("|---|---|---|---|---|");
    for waiters in [2, 8, 32] {
        let f = broadcast::<Futexkit>(waiters, rounds);
        let s = broadcast::<Std>(waiters, rounds);
        let p = broadcast::<ParkingLot>(waiters, rounds);
        println!(
            "| {waiters} | {} | {} | {} | {:.1} / {:.1} / {:.1} |",
            us(f.all_ran),
            us(s.all_ran),
            us(p.all_ran),
            f.switches,
            s.switches,
            p.switches
        );
    }

    let items = if quick { 20_000 } else { 200_000 };
    println!("\nbounded queue (capacity 16), N producers + N consumers, {items} items: million items/s (median of {runs})");
    println!("| N | futexkit | std | parking_lot |");
    println!("|---|---|---|---|");
    for pairs in [1, 4, 16] {
        let rate = |d: Duration| items as f64 / d.as_secs_f64() / 1e6;
        let mut t: [Vec<Duration>; 3] = Default::default();
        for _ in 0..runs {
            t[0].push(bounded_queue::<Futexkit>(pairs, items, 16));
            t[1].push(bounded_queue::<Std>(pairs, items, 16));
            t[2].push(bounded_queue::<ParkingLot>(pairs, items, 16));
        }
        let t = t.map(median);
        println!(
            "| {pairs} | {:.2} | {:.2} | {:.2} |",
            rate(t[0]),
            rate(t[1]),
            rate(t[2])
        );
    }
    let _ = <Futexkit as Backend>::NAME;
}
