//! What the contention profile and the deadlock checks cost a contended counter (futexkit's
//! Mutex, the `contention` example's short critical section): Mops/s at 4 and 16 threads,
//! median of interleaved rounds. Built without either feature it prints the one row it can
//! ("compiled out"); with `profile`, three rows: sampling off (rate 0), 1 in 100, and every
//! contended acquisition; with `deadlock`, two: the checks turned off, and on.
//! `scripts/benchmarks.sh` runs the builds alternately and prints them together.
//! `cargo run --release --example checks_cost [--features profile|deadlock] [-- --quick]`

use std::time::Duration;

use futexkit_support::contention::{timed, Impl, Section};
use futexkit_support::report::turns;

/// A row: its label, and what sets it up (and, given `false`, back to the default).
type Setting = (&'static str, fn(bool));

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 1 } else { 5 };
    let duration = Duration::from_millis(if quick { 100 } else { 300 });
    let mut settings: Vec<Setting> = Vec::new();
    if !cfg!(feature = "profile") && !cfg!(feature = "deadlock") {
        settings.push(("compiled out", |_| {}));
    }
    settings.extend(profile_settings());
    settings.extend(deadlock_settings());
    let threads = [4, 16];
    // runs[setting][threads]: the settings interleaved round by round, each round starting with
    // the next.
    let mut runs = vec![vec![Vec::new(); threads.len()]; settings.len()];
    for round in 0..rounds {
        for s in turns(round, settings.len()) {
            let set = settings[s].1;
            for (t, &n) in threads.iter().enumerate() {
                set(true);
                runs[s][t].push(timed(Impl::Futexkit, n, Section::Short, duration).mops);
                set(false);
            }
        }
    }
    for (s, &(label, _)) in settings.iter().enumerate() {
        let mut row = format!("| {label} |");
        for samples in &mut runs[s] {
            samples.sort_by(f64::total_cmp);
            row.push_str(&format!(" {:.2} |", samples[samples.len() / 2]));
        }
        println!("{row}");
    }
}

#[cfg(feature = "profile")]
fn profile_settings() -> Vec<Setting> {
    fn rate(rate: u32, on: bool) {
        futexkit::profile::set_rate(if on { rate } else { 0 });
        futexkit::profile::reset();
    }
    vec![
        ("profile compiled in, rate 0", |on| rate(0, on)),
        ("profile rate 100", |on| rate(100, on)),
        ("profile rate 1", |on| rate(1, on)),
    ]
}

#[cfg(not(feature = "profile"))]
fn profile_settings() -> Vec<Setting> {
    Vec::new()
}

#[cfg(feature = "deadlock")]
fn deadlock_settings() -> Vec<Setting> {
    vec![
        ("deadlock checks compiled in, off", |_| {
            futexkit::deadlock::set_enabled(false)
        }),
        ("deadlock checks on", |on| {
            futexkit::deadlock::set_enabled(on)
        }),
    ]
}

#[cfg(not(feature = "deadlock"))]
fn deadlock_settings() -> Vec<Setting> {
    Vec::new()
}
