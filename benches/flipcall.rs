//! FlipCall round trip for 0 B, 64 B, 4 KiB and 64 KiB payloads, with the server in a thread and
//! in a forked process, against raw futex wake + wait flipping a turn word over the same shared
//! memory; idle and oversubscribed (a busy thread on every CPU).

use futexkit_support::flipcall;
use futexkit_support::pingpong;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use flipcall::{Client, Mechanism, Placement, PAYLOADS};
use pingpong::BackgroundLoad;

fn bench_group(c: &mut Criterion, name: &str, loaded: bool) {
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    for placement in Placement::ALL {
        for mechanism in Mechanism::ALL {
            // Fork (cross-process server) before the load threads exist; they only start after.
            let mut client = Client::start(mechanism, placement);
            let _load = loaded.then(BackgroundLoad::start);
            for len in PAYLOADS {
                let id = format!("{}/{}", placement.id(), mechanism.id());
                group.bench_with_input(BenchmarkId::new(id, len), &len, |b, &len| {
                    b.iter_custom(|iters| client.round_trips(len, iters))
                });
            }
        }
    }
    group.finish();
}

fn flipcall_benches(c: &mut Criterion) {
    bench_group(c, "flipcall_idle", false);
    bench_group(c, "flipcall_oversubscribed", true);
}

criterion_group!(benches, flipcall_benches);
criterion_main!(benches);
