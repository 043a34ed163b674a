//! A pre-fork server's shared state under futexkit::shared: the parent builds a region with a
//! table of counters, forks worker processes that update it under a `SharedMutex`, kills one
//! of them in the middle of an update, and starts a replacement. The next worker to lock the
//! table is told that its last holder died; it repairs the table (the total is recomputed from
//! the counters) and marks it consistent, and every worker carries on.
//!
//! `cargo run --release --example prefork`
//!
//! The update is written in two steps on purpose (the counter, then the total), so that a
//! worker killed between them leaves the table inconsistent for the next one to repair.

use std::time::{Duration, Instant};

use futexkit::shared::{LockError, Plain, Region, SharedMutex, SharedMutexGuard};

/// The shared table: requests counted per route, and their total.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Table {
    per_route: [u64; 8],
    total: u64,
}

// SAFETY: a `#[repr(C)]` struct of nine u64s: no padding, and every bit pattern is a table.
unsafe impl Plain for Table {}

/// What the workers report: repairs made, requests served.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Stats {
    repairs: u64,
    served: u64,
    stop: u64,
}

// SAFETY: three u64s, as above.
unsafe impl Plain for Stats {}

const WORKERS: usize = 4;

fn main() {
    let region = Region::builder()
        .mutex("table", Table::default())
        .mutex("stats", Stats::default())
        .build()
        .expect("making the shared region");
    let table = region.mutex::<Table>("table").unwrap();
    let stats = region.mutex::<Stats>("stats").unwrap();

    let mut workers: Vec<libc::pid_t> = (0..WORKERS)
        .map(|n| spawn_worker(n, table, stats))
        .collect();
    std::thread::sleep(Duration::from_millis(200));

    // Kill a worker in the middle of an update: stop it at random moments until it is caught
    // holding the table (as a crash would catch it), then SIGKILL it.
    let victim = workers.remove(0);
    loop {
        // SAFETY: signals and waitpid on our own child.
        unsafe {
            libc::kill(victim, libc::SIGSTOP);
            libc::waitpid(victim, core::ptr::null_mut(), libc::WUNTRACED);
        }
        if table.raw().holder() == Some(victim as u32) {
            break;
        }
        // SAFETY: as above.
        unsafe { libc::kill(victim, libc::SIGCONT) };
        std::thread::sleep(Duration::from_micros(50));
    }
    println!("killing worker {victim}, which holds the table");
    // SAFETY: as above.
    unsafe {
        libc::kill(victim, libc::SIGKILL);
        libc::waitpid(victim, core::ptr::null_mut(), 0);
    }
    workers.push(spawn_worker(WORKERS, table, stats));
    std::thread::sleep(Duration::from_millis(200));

    stats
        .lock()
        .map_err(LockError::without_guard)
        .unwrap()
        .update(|s| s.stop = 1);
    for pid in workers {
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(pid, core::ptr::null_mut(), 0) };
    }
    let table = lock_or_repair(table, None);
    let stats = stats
        .lock()
        .map_err(LockError::without_guard)
        .unwrap()
        .get();
    let t = table.get();
    println!(
        "{} requests served, {} repairs after a death; total {} = sum of the routes {}",
        stats.served,
        stats.repairs,
        t.total,
        t.per_route.iter().sum::<u64>()
    );
    assert_eq!(t.total, t.per_route.iter().sum::<u64>());
}

/// Forks a worker that serves requests until told to stop.
fn spawn_worker(n: usize, table: &SharedMutex<Table>, stats: &SharedMutex<Stats>) -> libc::pid_t {
    // SAFETY: the parent is single-threaded here; the child uses the inherited mapping and
    // leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid != 0 {
        return pid;
    }
    let start = Instant::now();
    let mut served = 0u64;
    let mut route = n;
    loop {
        {
            let mut guard = lock_or_repair(table, Some(stats));
            // Step 1: count the request on its route...
            let mut t = guard.get();
            t.per_route[route % 8] += 1;
            guard.set(t);
            // ...(a worker killed here leaves `total` behind: the next one repairs it)...
            busy_work(start);
            // Step 2: ...and in the total.
            t.total += 1;
            guard.set(t);
        }
        served += 1;
        route += 1;
        if served % 256 == 0 {
            let stop = stats
                .lock()
                .map_err(LockError::without_guard)
                .map(|mut s| {
                    s.update(|s| s.served += 256);
                    s.get().stop != 0
                })
                .unwrap_or(true);
            if stop {
                break;
            }
        }
    }
    // SAFETY: leaves the child without running the parent's destructors.
    unsafe { libc::_exit(0) }
}

/// A few microseconds of work (building a response, say).
fn busy_work(start: Instant) {
    for _ in 0..200 {
        std::hint::black_box(start.elapsed());
    }
}

/// Locks the table; if its last holder died, repairs it (the total is recomputed from the
/// routes, which the dead holder may have counted without the total) and marks it consistent.
fn lock_or_repair<'a>(
    table: &'a SharedMutex<Table>,
    stats: Option<&SharedMutex<Stats>>,
) -> SharedMutexGuard<'a, Table> {
    match table.lock() {
        Ok(guard) => guard,
        Err(LockError::OwnerDied(mut guard)) => {
            guard.update(|t| t.total = t.per_route.iter().sum());
            guard.mark_consistent();
            if let Some(stats) = stats {
                if let Ok(mut s) = stats.lock() {
                    s.update(|s| s.repairs += 1);
                }
            }
            println!(
                "process {}: the table's last holder died; repaired",
                std::process::id()
            );
            guard
        }
        Err(other) => panic!("locking the table: {other}"),
    }
}
