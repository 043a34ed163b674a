//! futexkit's main job: this machine's ping-pong table.
//!
//! Two threads hand a turn back and forth with each mechanism, idle and then with a busy thread
//! on every CPU (oversubscribed). Prints the mean round trip over several batches (each a fresh
//! pair of threads: total time over total round trips, so a slow batch counts), the fastest and
//! slowest batch, and the mean's ratio to raw futex wake + wait. `cargo run --release --example pingpong [-- --quick]`.

use futexkit_support::pingpong;

use std::time::Duration;

use pingpong::{round_trips, BackgroundLoad, Mechanism, RoundTrips};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (batches, batch_time) = if quick {
        (5, Duration::from_millis(20))
    } else {
        (9, Duration::from_millis(60))
    };
    println!("futexkit ping-pong: one round trip = hand the turn over and get it back");
    println!("{}", futexkit::capabilities());
    println!("swap mode: {:?}", futexkit::swap::mode());
    println!("mean of {batches} batches of ~{batch_time:?} (fastest - slowest batch)\n");

    let idle = run_all(batches, batch_time);
    let loaded = {
        let _load = BackgroundLoad::start();
        run_all(batches, batch_time)
    };

    println!(
        "| {:<28} | {:>27} | {:>12} | {:>27} | {:>12} |",
        "mechanism", "idle", "vs wake+wait", "oversubscribed", "vs wake+wait"
    );
    println!(
        "|{:-<30}|{:->29}|{:->14}|{:->29}|{:->14}|",
        "", "", "", "", ""
    );
    let base_idle = idle[0].1.map(|r| r.mean);
    let base_loaded = loaded[0].1.map(|r| r.mean);
    for (row, ((mechanism, idle), (_, loaded))) in idle.iter().zip(&loaded).enumerate() {
        match (idle, loaded) {
            (Some(i), Some(l)) => println!(
                "| {:<28} | {:>27} | {:>12} | {:>27} | {:>12} |",
                mechanism.name(),
                spread(i),
                if row == 0 {
                    "baseline".to_string()
                } else {
                    ratio(i.mean, base_idle)
                },
                spread(l),
                if row == 0 {
                    "baseline".to_string()
                } else {
                    ratio(l.mean, base_loaded)
                },
            ),
            _ => println!(
                "| {:<28} | {:>27} | {:>12} | {:>27} | {:>12} |",
                mechanism.name(),
                "skipped",
                "",
                "skipped",
                mechanism.available().err().unwrap_or("")
            ),
        }
    }
}

fn spread(r: &RoundTrips) -> String {
    format!("{} ({} - {})", fmt(r.mean), fmt(r.fastest), fmt(r.slowest))
}

fn run_all(batches: usize, batch_time: Duration) -> Vec<(Mechanism, Option<RoundTrips>)> {
    let runnable: Vec<Mechanism> = Mechanism::ALL
        .into_iter()
        .filter(|m| m.available().is_ok())
        .collect();
    let stats = round_trips(&runnable, batches, batch_time);
    Mechanism::ALL
        .iter()
        .map(|&m| {
            let stat = runnable.iter().position(|&r| r == m).map(|i| stats[i]);
            (m, stat)
        })
        .collect()
}

fn fmt(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns >= 10_000 {
        format!("{:.1} us", ns as f64 / 1000.0)
    } else {
        format!("{:.2} us", ns as f64 / 1000.0)
    }
}

fn ratio(d: Duration, base: Option<Duration>) -> String {
    match base {
        Some(b) if !d.is_zero() => {
            let r = b.as_secs_f64() / d.as_secs_f64();
            if r >= 1.0 {
                format!("{r:.1}x faster")
            } else {
                format!("{:.2}x slower", 1.0 / r)
            }
        }
        _ => String::new(),
    }
}
