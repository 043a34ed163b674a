//! What the comparison examples share: each measurement taken on futexkit, std and
//! parking_lot in rotating order, round after round, and the median kept.

use std::cmp::Ordering;

/// The three backends, in the order tables print them.
pub const BACKENDS: [&str; 3] = ["futexkit", "std", "parking_lot"];

/// Median of `rounds` results of `measure(backend)` for each of the three backends (0:
/// futexkit, 1: std, 2: parking_lot), the order rotating each round so that none always runs
/// first; `by` orders the results.
pub fn interleaved<T: Copy>(
    rounds: usize,
    by: impl Fn(&T, &T) -> Ordering,
    mut measure: impl FnMut(usize) -> T,
) -> [T; 3] {
    let mut results: [Vec<T>; 3] = Default::default();
    for round in 0..rounds.max(1) {
        for k in 0..3 {
            let backend = (round + k) % 3;
            results[backend].push(measure(backend));
        }
    }
    results.map(|mut r| {
        r.sort_by(&by);
        r[r.len() / 2]
    })
}

/// Runs the closure for `backend` (as numbered by [`interleaved`]): the same workload written
/// once per library.
pub fn on<R>(
    backend: usize,
    futexkit: impl FnOnce() -> R,
    std: impl FnOnce() -> R,
    parking_lot: impl FnOnce() -> R,
) -> R {
    match backend {
        0 => futexkit(),
        1 => std(),
        _ => parking_lot(),
    }
}

/// `futexkit / best`: futexkit's figure against the better of std's and parking_lot's, where
/// higher is better (above 1: futexkit ahead).
pub fn ratio_to_best(r: [f64; 3]) -> f64 {
    r[0] / r[1].max(r[2])
}

/// The same where lower is better (times): above 1 still means futexkit ahead.
pub fn time_ratio_to_best(r: [f64; 3]) -> f64 {
    r[1].min(r[2]) / r[0]
}
