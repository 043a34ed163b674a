//! Ping-pong round trip: raw futex wake + wait, futexkit swap (emulated, kernel), Parker,
//! spin-only (the floor), std and parking_lot Mutex + Condvar, pipes, Unix sockets; idle and
//! oversubscribed (a busy thread on every CPU).

use futexkit_support::pingpong;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use pingpong::{measure, BackgroundLoad, Mechanism};

fn bench_group(c: &mut Criterion, name: &str, loaded: bool) {
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    let _load = loaded.then(BackgroundLoad::start);
    for mechanism in Mechanism::ALL {
        if let Err(why) = mechanism.available() {
            eprintln!("{name}/{}: skipped: {why}", mechanism.id());
            continue;
        }
        group.bench_function(mechanism.id(), |b| {
            b.iter_custom(|iters| measure(mechanism, iters))
        });
    }
    group.finish();
}

fn pingpong(c: &mut Criterion) {
    bench_group(c, "pingpong_idle", false);
    bench_group(c, "pingpong_oversubscribed", true);
}

criterion_group!(benches, pingpong);
criterion_main!(benches);
