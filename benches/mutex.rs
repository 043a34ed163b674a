//! Mutex: futexkit vs std vs parking_lot (0.12 and 0.13) in the same run, and glibc's where
//! contended. Uncontended lock+unlock; a contended counter at 1-32 threads with a short and a
//! long critical section and parking_lot's 10/10 loop; the same oversubscribed (a busy thread on
//! every CPU); lock hand-off latency to a waiter that has gone to sleep.

use futexkit_support::contention;
use futexkit_support::pingpong;

use std::hint::black_box;
use std::time::Duration;

use contention::{fixed_ops, hand_off, Impl, Section};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("mutex_uncontended");
    let ours = futexkit::Mutex::new(0u64);
    let std = std::sync::Mutex::new(0u64);
    let pl = parking_lot::Mutex::new(0u64);
    let pl13 = parking_lot_013::Mutex::new(0u64);
    g.bench_function("futexkit", |b| {
        b.iter(|| *black_box(&ours).lock().unwrap() += 1)
    });
    g.bench_function("std", |b| b.iter(|| *black_box(&std).lock().unwrap() += 1));
    g.bench_function("parking_lot", |b| b.iter(|| *black_box(&pl).lock() += 1));
    g.bench_function("parking_lot_0.13", |b| {
        b.iter(|| *black_box(&pl13).lock() += 1)
    });
    g.finish();
}

fn contended(c: &mut Criterion, group: &str, oversubscribed: bool) {
    let mut g = c.benchmark_group(group);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(1));
    let _load = oversubscribed.then(pingpong::BackgroundLoad::start);
    for section in Section::ALL {
        for threads in [1usize, 2, 4, 8, 16, 32] {
            for which in Impl::ALL {
                let id = BenchmarkId::new(format!("{section:?}/{}", which.name()), threads);
                g.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let per_thread = (iters / threads as u64).max(1);
                        let t = fixed_ops(which, threads, per_thread, section);
                        // Normalise to `iters` operations.
                        t.mul_f64(iters as f64 / (per_thread * threads as u64) as f64)
                    })
                });
            }
        }
    }
    g.finish();
}

fn hand_off_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("mutex_hand_off");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(2));
    for which in Impl::ALL {
        g.bench_function(which.name(), |b| {
            b.iter_custom(|iters| hand_off(which, iters))
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    uncontended(c);
    hand_off_latency(c);
    contended(c, "mutex_contended", false);
    contended(c, "mutex_contended_oversubscribed", true);
}

criterion_group!(mutex, benches);
criterion_main!(mutex);
