//! futexkit's main job: this machine's ping-pong table.
//!
//! Two threads hand a turn back and forth with each mechanism, idle, then with a busy thread on
//! every CPU (oversubscribed), then with two. Prints the mean round trip over several batches
//! (each a fresh pair of threads: total time over total round trips, so a slow batch counts),
//! the fastest and slowest batch, and the mean's ratio to raw futex wake + wait. `cargo run --release --example pingpong [-- --quick]`.

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
    let twice_loaded = {
        let _load = BackgroundLoad::per_cpu(2);
        run_all(batches, batch_time)
    };

    let columns = ["idle", "oversubscribed", "two busy per CPU"];
    print!("| {:<28} |", "mechanism");
    for column in columns {
        print!(" {column:>27} | {:>12} |", "vs wake+wait");
    }
    println!();
    print!("|{:-<30}|", "");
    for _ in columns {
        print!("{:->29}|{:->14}|", "", "");
    }
    println!();
    let runs = [&idle, &loaded, &twice_loaded];
    for (row, (mechanism, _)) in idle.iter().enumerate() {
        print!("| {:<28} |", mechanism.name());
        for (column, run) in runs.iter().enumerate() {
            match run[row].1 {
                Some(r) => {
                    let versus = if row == 0 {
                        "baseline".to_string()
                    } else {
                        ratio(r.mean, run[0].1.map(|base| base.mean))
                    };
                    print!(" {:>27} | {:>12} |", spread(&r), versus);
                }
                // Why, once, in the last column.
                None if column + 1 == runs.len() => print!(
                    " {:>27} | {:>12} |",
                    "skipped",
                    mechanism.available().err().unwrap_or("")
                ),
                None => print!(" {:>27} | {:>12} |", "skipped", ""),
            }
        }
        println!();
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
