//! RwLock and Barrier: futexkit vs std vs parking_lot in the same run. Read-only scaling at
//! 1-32 threads; 99/1, 90/10 and 50/50 read/write mixes; barrier rounds at 2-32 threads.
//! `examples/rwlock.rs` prints the same as tables, with a writer's wait under readers.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use futexkit_support::locks::{Futexkit, Locks, ParkingLot, Std};
use futexkit_support::rwlock::{barrier_rounds, mixed};

/// Criterion times `iters` operations: the workload's rate over a fixed slice, scaled.
fn time_for<B: Locks>(iters: u64, threads: usize, write_per_mille: u32) -> Duration {
    let mops = mixed::<B>(threads, write_per_mille, Duration::from_millis(100));
    Duration::from_secs_f64(iters as f64 / (mops * 1e6))
}

fn rwlock(c: &mut Criterion) {
    let mut g = c.benchmark_group("rwlock");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(200));
    g.measurement_time(Duration::from_secs(1));
    for (label, per_mille) in [
        ("read_only", 0),
        ("99_1", 10),
        ("90_10", 100),
        ("50_50", 500),
    ] {
        let counts: &[usize] = if per_mille == 0 {
            &[1, 2, 4, 8, 16, 32]
        } else {
            &[4, 16]
        };
        for &threads in counts {
            fn one<B: Locks>(
                g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
                label: &str,
                threads: usize,
                per_mille: u32,
            ) {
                let id = BenchmarkId::new(format!("{label}/{}", B::NAME), threads);
                g.bench_function(id, |b| {
                    b.iter_custom(|iters| time_for::<B>(iters, threads, per_mille))
                });
            }
            one::<Futexkit>(&mut g, label, threads, per_mille);
            one::<Std>(&mut g, label, threads, per_mille);
            one::<ParkingLot>(&mut g, label, threads, per_mille);
        }
    }
    g.finish();
}

fn barrier(c: &mut Criterion) {
    let mut g = c.benchmark_group("barrier_round");
    g.sample_size(10);
    for threads in [2usize, 4, 8, 32] {
        fn one<B: Locks>(
            g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
            threads: usize,
        ) {
            g.bench_with_input(BenchmarkId::new(B::NAME, threads), &threads, |b, &n| {
                b.iter_custom(|iters| {
                    let rounds = iters.max(1) as usize;
                    Duration::from_secs_f64(rounds as f64 / barrier_rounds::<B>(n, rounds))
                })
            });
        }
        one::<Futexkit>(&mut g, threads);
        one::<Std>(&mut g, threads);
        one::<ParkingLot>(&mut g, threads);
    }
    g.finish();
}

criterion_group!(benches, rwlock, barrier);
criterion_main!(benches);
