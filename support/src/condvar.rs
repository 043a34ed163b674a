//! Condvar workloads shared by `benches/condvar.rs` and `examples/condvar.rs`: futexkit's
//! Mutex + Condvar, std's and parking_lot's, through one small adapter (`locks.rs`) so every
//! workload is written once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::locks::{Futexkit, Locks as Backend, ParkingLot, Std};

/// Producer/consumer ping-pong: two threads pass a turn through one Mutex + Condvar. Returns
/// the total time of `rounds` round trips.
pub fn ping_pong<B: Backend>(rounds: u64) -> Duration {
    let shared = Arc::new((B::mutex(0u64), B::condvar()));
    let partner = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            let (m, c) = &*shared;
            for i in 0..rounds {
                // Wait for the odd value 2i+1, answer with the even 2i+2.
                B::wait_while(m, c, |v| *v != 2 * i + 1, |v| *v += 1);
                B::notify_one(c);
            }
        })
    };
    let (m, c) = &*shared;
    let start = Instant::now();
    for i in 0..rounds {
        B::with(m, |v| *v += 1);
        B::notify_one(c);
        B::wait_while(m, c, |v| *v != 2 * i + 2, |_| ());
    }
    let elapsed = start.elapsed();
    partner.join().unwrap();
    elapsed
}

/// Voluntary context switches of this process so far (`getrusage`).
pub fn voluntary_switches() -> u64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_nvcsw as u64
}

/// Result of a broadcast run.
#[derive(Debug, Clone, Copy)]
pub struct Broadcast {
    /// Median time from `notify_all` until the last waiter ran.
    pub all_ran: Duration,
    /// Voluntary context switches per broadcast (the whole process).
    pub switches: f64,
}

/// `notify_all` to `waiters` sleeping threads, `rounds` times: the time until every waiter has
/// run with the lock, and the context switches it took.
pub fn broadcast<B: Backend>(waiters: usize, rounds: usize) -> Broadcast {
    let shared = Arc::new((B::mutex((0usize, 0usize)), B::condvar()));
    let base = Instant::now();
    let last_ran = Arc::new(AtomicU64::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..waiters)
        .map(|_| {
            let (shared, last_ran, arrived) = (
                Arc::clone(&shared),
                Arc::clone(&last_ran),
                Arc::clone(&arrived),
            );
            std::thread::spawn(move || {
                let (m, c) = &*shared;
                for round in 1..=rounds {
                    // (generation, waiting): count in as waiting, then wait for the round.
                    B::with(m, |s| s.1 += 1);
                    B::wait_while(m, c, |s| s.0 < round, |_| ());
                    last_ran.fetch_max(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    arrived.fetch_add(1, Ordering::Release);
                }
            })
        })
        .collect();
    let (m, c) = &*shared;
    let mut times = Vec::with_capacity(rounds);
    let mut switches = 0;
    for round in 1..=rounds {
        // Everyone waiting, and given time to fall asleep (past any spinning).
        while B::with(m, |s| s.1) < waiters * round {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(1));
        let before = voluntary_switches();
        let start = base.elapsed().as_nanos() as u64;
        B::with(m, |s| s.0 = round);
        B::notify_all(c);
        while arrived.load(Ordering::Acquire) < waiters * round {
            std::thread::yield_now();
        }
        switches += voluntary_switches() - before;
        times.push(Duration::from_nanos(
            last_ran.load(Ordering::Relaxed).saturating_sub(start),
        ));
    }
    for t in threads {
        t.join().unwrap();
    }
    times.sort();
    Broadcast {
        all_ran: times[times.len() / 2],
        switches: switches as f64 / rounds as f64,
    }
}

/// A bounded queue (Mutex + two Condvars), `pairs` producers and `pairs` consumers moving
/// `items` items in all; returns the wall time.
pub fn bounded_queue<B: Backend>(pairs: usize, items: usize, capacity: usize) -> Duration {
    struct Queue<B: Backend> {
        items: B::Mutex<VecDeque<usize>>,
        not_empty: B::Condvar,
        not_full: B::Condvar,
    }
    let q = Arc::new(Queue::<B> {
        items: B::mutex(VecDeque::with_capacity(capacity)),
        not_empty: B::condvar(),
        not_full: B::condvar(),
    });
    let per_producer = items / pairs;
    let start = Instant::now();
    let producers: Vec<_> = (0..pairs)
        .map(|_| {
            let q = Arc::clone(&q);
            std::thread::spawn(move || {
                for n in 0..per_producer {
                    B::wait_while(
                        &q.items,
                        &q.not_full,
                        |i| i.len() >= capacity,
                        |i| i.push_back(n),
                    );
                    B::notify_one(&q.not_empty);
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..pairs)
        .map(|_| {
            let q = Arc::clone(&q);
            std::thread::spawn(move || {
                for _ in 0..per_producer {
                    B::wait_while(&q.items, &q.not_empty, |i| i.is_empty(), |i| i.pop_front());
                    B::notify_one(&q.not_full);
                }
            })
        })
        .collect();
    for t in producers.into_iter().chain(consumers) {
        t.join().unwrap();
    }
    start.elapsed()
}

/// hackbench-style: `groups` groups of 20 senders and 20 receivers; every sender sends `loops`
/// messages to every receiver of its group, through one bounded queue (Mutex + two Condvars)
/// per receiver. Returns the wall time.
pub fn hackbench<B: Backend>(groups: usize, loops: usize) -> Duration {
    const FDS: usize = 20;
    const CAPACITY: usize = 64;
    struct Inbox<B: Backend> {
        queue: B::Mutex<VecDeque<u32>>,
        not_empty: B::Condvar,
        not_full: B::Condvar,
    }
    let barrier = Arc::new(std::sync::Barrier::new(groups * FDS * 2 + 1));
    let mut threads = Vec::new();
    for _ in 0..groups {
        let inboxes: Arc<Vec<Inbox<B>>> = Arc::new(
            (0..FDS)
                .map(|_| Inbox::<B> {
                    queue: B::mutex(VecDeque::with_capacity(CAPACITY)),
                    not_empty: B::condvar(),
                    not_full: B::condvar(),
                })
                .collect(),
        );
        for r in 0..FDS {
            let (inboxes, barrier) = (Arc::clone(&inboxes), Arc::clone(&barrier));
            threads.push(std::thread::spawn(move || {
                barrier.wait();
                let inbox = &inboxes[r];
                for _ in 0..FDS * loops {
                    B::wait_while(
                        &inbox.queue,
                        &inbox.not_empty,
                        |q| q.is_empty(),
                        |q| q.pop_front(),
                    );
                    B::notify_one(&inbox.not_full);
                }
            }));
        }
        for s in 0..FDS {
            let (inboxes, barrier) = (Arc::clone(&inboxes), Arc::clone(&barrier));
            threads.push(std::thread::spawn(move || {
                barrier.wait();
                for i in 0..loops {
                    for inbox in inboxes.iter() {
                        B::wait_while(
                            &inbox.queue,
                            &inbox.not_full,
                            |q| q.len() >= CAPACITY,
                            |q| q.push_back((s * loops + i) as u32),
                        );
                        B::notify_one(&inbox.not_empty);
                    }
                }
            }));
        }
    }
    barrier.wait();
    let start = Instant::now();
    for t in threads {
        t.join().unwrap();
    }
    start.elapsed()
}
