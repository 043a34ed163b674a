//! FlipCall round trip for 0 B, 64 B, 4 KiB and 64 KiB payloads, with the server in a thread and
//! in a forked process, against raw futex wake + wait flipping a turn word over the same shared
//! memory; idle and oversubscribed (a busy thread on every CPU). And what copying a message in
//! and out costs: a shared window's atomic copies against plain `memcpy` into the same memory.

use futexkit_support::flipcall;
use futexkit_support::pingpong;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use flipcall::{Client, Mechanism, Placement, MAX_PAYLOAD, PAYLOADS};
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

/// `write_from` then `read_into` of `len` bytes, holding the turn: in-process (plain copies), a
/// shared window (atomic copies), and the shared window through the unchecked slices (`memcpy`).
fn copy_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("flipcall_copy");
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    let (mut private, _private_server) = flipcall::holding_pair(MAX_PAYLOAD);
    let (mut shared, _shared_window) = flipcall::holding_shared(MAX_PAYLOAD);
    let mut buffer = vec![7u8; MAX_PAYLOAD];
    for len in [64, 4096, 64 * 1024] {
        group.bench_with_input(BenchmarkId::new("in_process", len), &len, |b, &len| {
            b.iter(|| {
                private.write_from(0, &buffer[..len]);
                private.read_into(0, &mut buffer[..len]);
            })
        });
        group.bench_with_input(BenchmarkId::new("shared_atomic", len), &len, |b, &len| {
            b.iter(|| {
                shared.write_from(0, &buffer[..len]);
                shared.read_into(0, &mut buffer[..len]);
            })
        });
        group.bench_with_input(BenchmarkId::new("shared_memcpy", len), &len, |b, &len| {
            b.iter(|| {
                // SAFETY: both endpoints of this window are ours and the server never runs: no
                // one else touches the data area.
                let area = unsafe { shared.data_mut_unchecked() };
                area[..len].copy_from_slice(&buffer[..len]);
                buffer[..len].copy_from_slice(&area[..len]);
            })
        });
    }
    group.finish();
}

fn flipcall_benches(c: &mut Criterion) {
    copy_group(c);
    bench_group(c, "flipcall_idle", false);
    bench_group(c, "flipcall_oversubscribed", true);
}

criterion_group!(benches, flipcall_benches);
criterion_main!(benches);
