//! Soak test: first every primitive at once (Mutex, RwLock, Condvar queue, Barrier, Parker
//! pair, FlipCall pair, each checking its own invariant), with four runnable threads per usable
//! CPU; then many threads hammering one Mutex, at each thread count. A watchdog reports a hang
//! (no progress for 5 s) instead of waiting forever. At the end it prints the spin policy's
//! decisions (`futexkit::spin::decisions`): how often each kind of waiter spun, how often the
//! spin paid, how often it slept at once. Tests on a 2-core CI machine cannot reach the
//! interleavings that 16 cores reach in seconds; run this on the big machine.
//!
//! `cargo run --release --example soak [-- SECONDS [THREADS...]]` (default: 10 s for each part,
//! 2 4 8 16 32 64 threads). Exits 1 on a hang, a lost item or a broken invariant.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futexkit::{Barrier, Condvar, Mutex, RawMutex, RwLock};
use futexkit_support::flipcall::{Client, Mechanism, Placement};

const STALL: Duration = Duration::from_secs(5);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(10);
    let counts: Vec<usize> = if args.len() > 1 {
        args[1..].iter().filter_map(|s| s.parse().ok()).collect()
    } else {
        vec![2, 4, 8, 16, 32, 64]
    };
    println!("{}", futexkit::capabilities());
    let cpus = futexkit::capabilities().usable_cpus();
    let (threads, items) = soak_all(Duration::from_secs(seconds));
    println!(
        "every primitive at once: {threads} threads on {cpus} CPUs, {items} items through \
         them in {seconds} s, no hang, no lost item"
    );
    for threads in counts {
        let ops = soak(threads, Duration::from_secs(seconds));
        println!(
            "{threads:>3} threads: {ops} lock/unlock pairs in {seconds} s, no hang, no lost update"
        );
    }
    let d = futexkit::spin::decisions();
    println!("spin policy decisions over the whole run (it never yields):");
    for (kind, o) in [
        ("lock", d.lock),
        ("notify", d.notify),
        ("hand-off", d.hand_off),
    ] {
        let spun = o.won + o.lost;
        let paid = if spun > 0 {
            format!("{:.0}%", 100.0 * o.won as f64 / spun as f64)
        } else {
            "-".to_string()
        };
        println!(
            "  {kind:<9} spun {spun:>10} (paid {paid:>4}), slept after a spin {:>10}, slept at once {:>10}",
            o.lost, o.skipped
        );
    }
}

/// Runs every primitive at once until `duration` has passed, four runnable threads per usable
/// CPU in all, each workload checking its own invariant; exits the process on a hang (no item
/// for `STALL`) or a broken invariant. Returns the threads and the items that went through.
fn soak_all(duration: Duration) -> (usize, u64) {
    let cpus = futexkit::capabilities().usable_cpus();
    // Each workload below takes this many threads: six workloads of `per` threads, four per CPU.
    let per = (4 * cpus).div_ceil(6).max(2);
    let stop = Arc::new(AtomicBool::new(false));
    let items = Arc::new(AtomicU64::new(0));
    let mut handles: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let fail = |what: String| -> ! {
        eprintln!("BROKEN: {what}");
        std::process::exit(1);
    };

    // Mutex: an increment made of a separate load and store.
    let counter = Arc::new(Mutex::new(0u64));
    let taken = Arc::new(AtomicU64::new(0));
    for _ in 0..per {
        let (counter, taken, stop, items) =
            (counter.clone(), taken.clone(), stop.clone(), items.clone());
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut c = counter.lock().unwrap();
                let v = *c;
                std::hint::black_box(());
                *c = v + 1;
                drop(c);
                taken.fetch_add(1, Ordering::Relaxed);
                items.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    // RwLock: writers keep both halves equal; readers check that they are.
    let pair = Arc::new(RwLock::new((0u64, 0u64)));
    for i in 0..per {
        let (pair, stop, items) = (pair.clone(), stop.clone(), items.clone());
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if i % 2 == 0 {
                    let mut p = pair.write().unwrap();
                    p.0 += 1;
                    std::hint::black_box(&mut *p);
                    p.1 += 1;
                } else {
                    let p = pair.read().unwrap();
                    if p.0 != p.1 {
                        fail(format!("a reader saw {p:?}"));
                    }
                }
                items.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    // Condvar: a bounded queue; every item pushed is popped once (sums compared at the end).
    type Queue = (
        Mutex<(std::collections::VecDeque<u64>, bool)>,
        Condvar,
        Condvar,
    );
    let queue: Arc<Queue> = Arc::new(Default::default());
    let pushed = Arc::new(AtomicU64::new(0));
    let popped = Arc::new(AtomicU64::new(0));
    let producers = per.div_ceil(2);
    let mut consumers = Vec::new();
    for i in 0..per {
        let (queue, stop, items) = (queue.clone(), stop.clone(), items.clone());
        let (pushed, popped) = (pushed.clone(), popped.clone());
        let handle = std::thread::spawn(move || {
            let (m, not_empty, not_full) = &*queue;
            if i < producers {
                let mut n = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut q = not_full
                        .wait_while(m.lock().unwrap(), |q| q.0.len() >= 16)
                        .unwrap();
                    q.0.push_back(n);
                    drop(q);
                    not_empty.notify_one();
                    pushed.fetch_add(n, Ordering::Relaxed);
                    n += 1;
                }
            } else {
                loop {
                    let mut q = not_empty
                        .wait_while(m.lock().unwrap(), |q| q.0.is_empty() && !q.1)
                        .unwrap();
                    let Some(n) = q.0.pop_front() else { break };
                    drop(q);
                    not_full.notify_one();
                    popped.fetch_add(n, Ordering::Relaxed);
                    items.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        if i < producers {
            handles.push(handle);
        } else {
            consumers.push(handle);
        }
    }

    // Barrier: every party sees the same phase count; the leader decides when all stop.
    let barrier = Arc::new(Barrier::new(per));
    let phase = Arc::new(AtomicU64::new(0));
    let quit = Arc::new(AtomicBool::new(false));
    for _ in 0..per {
        let (barrier, phase, quit, stop, items) = (
            barrier.clone(),
            phase.clone(),
            quit.clone(),
            stop.clone(),
            items.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let mut mine = 0u64;
            loop {
                if barrier.wait().is_leader() {
                    phase.fetch_add(1, Ordering::Relaxed);
                    quit.store(stop.load(Ordering::Relaxed), Ordering::Relaxed);
                }
                barrier.wait();
                mine += 1;
                if phase.load(Ordering::Relaxed) != mine {
                    fail(format!(
                        "a party in phase {mine} saw {}",
                        phase.load(Ordering::Relaxed)
                    ));
                }
                items.fetch_add(1, Ordering::Relaxed);
                // Read before the next phase's first wait, which its leader does not pass
                // before everyone arrived: all parties see the same value.
                if quit.load(Ordering::Relaxed) {
                    break;
                }
            }
        }));
    }

    // Parker pairs: turns handed back and forth; the turn count must match on both sides.
    for _ in 0..per / 2 {
        let parkers = Arc::new((futexkit::swap::Parker::new(), futexkit::swap::Parker::new()));
        let turns = Arc::new(AtomicU64::new(0));
        let quit = Arc::new(AtomicBool::new(false));
        let answerer = {
            let (parkers, turns, quit) = (parkers.clone(), turns.clone(), quit.clone());
            std::thread::spawn(move || loop {
                parkers.1.park(None).unwrap();
                if quit.load(Ordering::Acquire) {
                    break;
                }
                turns.fetch_add(1, Ordering::Relaxed);
                parkers.0.unpark();
            })
        };
        let (stop, items) = (stop.clone(), items.clone());
        handles.push(std::thread::spawn(move || {
            let mut mine = 0u64;
            while !stop.load(Ordering::Relaxed) {
                parkers.0.swap_to(&parkers.1, None).unwrap();
                mine += 1;
                if turns.load(Ordering::Relaxed) != mine {
                    fail(format!(
                        "a Parker pair lost a turn: {mine} against {turns:?}"
                    ));
                }
                items.fetch_add(1, Ordering::Relaxed);
            }
            quit.store(true, Ordering::Release);
            parkers.1.unpark();
            answerer.join().unwrap();
        }));
    }

    // FlipCall pairs: an echo server thread each.
    for _ in 0..per / 2 {
        let (stop, items) = (stop.clone(), items.clone());
        handles.push(std::thread::spawn(move || {
            let mut client = Client::start(Mechanism::FlipCall, Placement::Thread);
            while !stop.load(Ordering::Relaxed) {
                client.round_trips(64, 64);
                items.fetch_add(64, Ordering::Relaxed);
            }
        }));
    }
    let threads = handles.len() + consumers.len() + 2 * (per / 2);

    watch(&handles, &stop, &items, duration, || {
        "every primitive at once".to_string()
    });
    for h in handles {
        h.join().unwrap();
    }
    // Producers are done: let the consumers drain the queue and leave.
    queue.0.lock().unwrap().1 = true;
    queue.1.notify_all();
    for h in consumers {
        h.join().unwrap();
    }
    let (pushed, popped) = (
        pushed.load(Ordering::Relaxed),
        popped.load(Ordering::Relaxed),
    );
    if pushed != popped {
        fail(format!(
            "the queue took items summing to {pushed} and gave {popped}"
        ));
    }
    let total = *counter.lock().unwrap();
    if total != taken.load(Ordering::Relaxed) {
        fail(format!(
            "the Mutex counter is {total} after {taken:?} increments"
        ));
    }
    (threads, items.load(Ordering::Relaxed))
}

fn soak(threads: usize, duration: Duration) -> u64 {
    let mutex = Arc::new(RawMutex::new());
    // Updated with a separate load and store: only mutual exclusion keeps it exact.
    let counter = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (mutex, counter, done, stop) = (
                Arc::clone(&mutex),
                Arc::clone(&counter),
                Arc::clone(&done),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                // Mixed hold times, some sleeps inside and outside, some timed locks: the
                // uncontended, spinning, sleeping, hand-off and timeout paths all run.
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ i as u64;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let timed = rng % 16 == 0;
                    let locked = if timed {
                        mutex.try_lock_for(Duration::from_micros(rng % 200))
                    } else {
                        mutex.lock();
                        true
                    };
                    if locked {
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                        n += 1;
                        if n % 1024 == 0 {
                            done.fetch_add(1024, Ordering::Relaxed);
                        }
                        if rng % 1024 == 1 {
                            std::thread::sleep(Duration::from_micros(50));
                        } else {
                            for _ in 0..rng % 64 {
                                std::hint::spin_loop();
                            }
                        }
                        // SAFETY: locked above.
                        unsafe { mutex.unlock() };
                    }
                    if rng % 512 == 3 {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
                n
            })
        })
        .collect();
    watch(&handles, &stop, &done, duration, || {
        format!("{threads} threads on one mutex ({mutex:?})")
    });
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let counted = counter.load(Ordering::Relaxed);
    if counted != total {
        eprintln!("LOST UPDATE: counter {counted}, acquisitions {total}");
        std::process::exit(1);
    }
    total
}

/// Waits for `handles` to finish, raising `stop` once `duration` has passed; exits the process
/// if `progress` (plus the threads finished) stands still for `STALL`. Watching the joins too
/// means a thread stranded asleep after the stop shows up as a stall.
fn watch<T>(
    handles: &[std::thread::JoinHandle<T>],
    stop: &AtomicBool,
    progress: &AtomicU64,
    duration: Duration,
    what: impl Fn() -> String,
) {
    let start = Instant::now();
    let mut last = (0, Instant::now());
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() >= duration {
            stop.store(true, Ordering::Relaxed);
        }
        let now = progress.load(Ordering::Relaxed)
            + handles.iter().filter(|h| h.is_finished()).count() as u64;
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > STALL {
            eprintln!("HANG: {}: no progress for {STALL:?}", what());
            std::process::exit(1);
        }
    }
}
