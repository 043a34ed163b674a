//! Condvar benches (criterion), futexkit vs std vs parking_lot in the same run: Mutex + Condvar
//! ping-pong, `notify_all` to 2/8/32 sleeping waiters (time until all ran), a bounded queue
//! with N producers and N consumers. `examples/condvar.rs` prints the same as one table, with
//! context switches; `examples/hackbench.rs` is the macro benchmark.

use futexkit_support::condvar;

use std::time::Duration;

use condvar::{bounded_queue, broadcast, ping_pong, Backend, Futexkit, ParkingLot, Std};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn ping_pong_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("condvar_ping_pong");
    fn one<B: Backend>(
        group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    ) {
        group.bench_function(B::NAME, |b| b.iter_custom(|iters| ping_pong::<B>(iters)));
    }
    one::<Futexkit>(&mut group);
    one::<Std>(&mut group);
    one::<ParkingLot>(&mut group);
    group.finish();
}

fn broadcast_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("condvar_notify_all");
    group.sample_size(10);
    for waiters in [2usize, 8, 32] {
        fn one<B: Backend>(
            group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
            waiters: usize,
        ) {
            group.bench_with_input(BenchmarkId::new(B::NAME, waiters), &waiters, |b, &n| {
                // One broadcast per iteration, measured from notify_all to the last waiter.
                b.iter_custom(|iters| {
                    let rounds = iters.clamp(1, 200) as usize;
                    broadcast::<B>(n, rounds).all_ran * iters as u32
                })
            });
        }
        one::<Futexkit>(&mut group, waiters);
        one::<Std>(&mut group, waiters);
        one::<ParkingLot>(&mut group, waiters);
    }
    group.finish();
}

fn bounded_queue_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("condvar_bounded_queue_10k_items");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    for pairs in [1usize, 4, 16] {
        fn one<B: Backend>(
            group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
            pairs: usize,
        ) {
            group.bench_with_input(BenchmarkId::new(B::NAME, pairs), &pairs, |b, &n| {
                b.iter_custom(|iters| (0..iters).map(|_| bounded_queue::<B>(n, 10_000, 16)).sum())
            });
        }
        one::<Futexkit>(&mut group, pairs);
        one::<Std>(&mut group, pairs);
        one::<ParkingLot>(&mut group, pairs);
    }
    group.finish();
}

criterion_group!(
    benches,
    ping_pong_bench,
    broadcast_bench,
    bounded_queue_bench
);
criterion_main!(benches);
