//! What the comparison examples share: each measurement taken on every library in rotating
//! order, round after round, and the median kept.

use std::cmp::Ordering;

/// The three backends, in the order tables print them.
pub const BACKENDS: [&str; 3] = ["futexkit", "std", "parking_lot"];

/// The order in which `count` measurements (numbered from 0) take their turns in round
/// `round`: each round starts one later than the last, so that none always runs first.
pub fn turns(round: usize, count: usize) -> impl Iterator<Item = usize> {
    (0..count).map(move |k| (round + k) % count)
}

/// Median of `rounds` results of `measure(i)` for each of `count` measurements (numbered from
/// 0), taking their turns round after round in the order [`turns`] gives; `by` orders the
/// results. One median per measurement, in their numbering's order.
pub fn interleaved_medians<T: Copy>(
    count: usize,
    rounds: usize,
    by: impl Fn(&T, &T) -> Ordering,
    mut measure: impl FnMut(usize) -> T,
) -> Vec<T> {
    let mut results: Vec<Vec<T>> = vec![Vec::new(); count];
    for round in 0..rounds.max(1) {
        for i in turns(round, count) {
            results[i].push(measure(i));
        }
    }
    results
        .into_iter()
        .map(|mut r| {
            r.sort_by(&by);
            r[r.len() / 2]
        })
        .collect()
}

/// [`interleaved_medians`] of the three backends (0: futexkit, 1: std, 2: parking_lot).
pub fn interleaved<T: Copy>(
    rounds: usize,
    by: impl Fn(&T, &T) -> Ordering,
    measure: impl FnMut(usize) -> T,
) -> [T; 3] {
    let m = interleaved_medians(3, rounds, by, measure);
    [m[0], m[1], m[2]]
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
