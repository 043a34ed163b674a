//! What the contention profile costs a contended counter (futexkit's Mutex, the `contention`
//! example's short critical section): Mops/s at 4 and 16 threads, median of interleaved
//! rounds. Built without the `profile` feature it prints the one row it can ("compiled out");
//! built with it, three rows: sampling off (rate 0), 1 in 100, and every contended
//! acquisition. `scripts/benchmarks.sh` runs both builds alternately and prints them together.
//! `cargo run --release --example profile_cost [--features profile] [-- --quick]`

use std::time::Duration;

use futexkit_support::contention::{timed, Impl, Section};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 1 } else { 5 };
    let duration = Duration::from_millis(if quick { 100 } else { 300 });
    let rates: &[(u32, &str)] = if cfg!(feature = "profile") {
        &[(0, "compiled in, rate 0"), (100, "rate 100"), (1, "rate 1")]
    } else {
        &[(0, "compiled out")]
    };
    let threads = [4, 16];
    // runs[rate][threads]: the rates interleaved round by round.
    let mut runs = vec![vec![Vec::new(); threads.len()]; rates.len()];
    for _ in 0..rounds {
        for (r, &(rate, _)) in rates.iter().enumerate() {
            for (t, &n) in threads.iter().enumerate() {
                set_rate(rate);
                runs[r][t].push(timed(Impl::Futexkit, n, Section::Short, duration).mops);
                set_rate(0);
            }
        }
    }
    for (r, &(_, label)) in rates.iter().enumerate() {
        let mut row = format!("| {label} |");
        for samples in &mut runs[r] {
            samples.sort_by(f64::total_cmp);
            row.push_str(&format!(" {:.2} |", samples[samples.len() / 2]));
        }
        println!("{row}");
    }
}

#[cfg(feature = "profile")]
fn set_rate(rate: u32) {
    futexkit::profile::set_rate(rate);
    futexkit::profile::reset();
}

#[cfg(not(feature = "profile"))]
fn set_rate(_rate: u32) {}
