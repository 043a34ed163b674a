//! futexkit::sync::Barrier against std::sync::Barrier's contract: one leader per round,
//! reusable, every thread released.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use futexkit::sync::Barrier;

fn rounds(parties: usize, rounds: usize) {
    let barrier = Arc::new(Barrier::new(parties));
    let leaders = Arc::new(AtomicUsize::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..parties)
        .map(|_| {
            let (barrier, leaders, arrived) = (
                Arc::clone(&barrier),
                Arc::clone(&leaders),
                Arc::clone(&arrived),
            );
            thread::spawn(move || {
                for round in 0..rounds {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    let result = barrier.wait();
                    // Nobody leaves a round before everyone has arrived in it.
                    assert!(arrived.load(Ordering::SeqCst) >= (round + 1) * parties);
                    if result.is_leader() {
                        leaders.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        leaders.load(Ordering::SeqCst),
        rounds,
        "one leader per round"
    );
}

#[test]
fn one_leader_per_round_and_reuse_across_rounds() {
    rounds(2, 2000);
    rounds(3, 500);
    rounds(8, 200);
}

#[test]
fn many_threads_few_rounds() {
    rounds(32, 20);
}

/// More threads than parties, as std allows: every 2 arrivals on a barrier of 2 make a
/// generation, so 8 threads each waiting once all pass, 4 of them as leaders. Batches reuse one
/// barrier, so its generations count on across them.
#[test]
fn more_threads_than_parties_all_pass_in_pairs() {
    const THREADS: usize = 8;
    let barrier = Arc::new(Barrier::new(2));
    for _ in 0..1000 {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                thread::spawn(move || barrier.wait().is_leader())
            })
            .collect();
        let leaders = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&leader| leader)
            .count();
        assert_eq!(leaders, THREADS / 2);
    }
}

#[test]
fn zero_and_one_party_barriers_release_at_once_as_leaders() {
    assert!(Barrier::new(0).wait().is_leader());
    let one = Barrier::new(1);
    assert!(one.wait().is_leader());
    assert!(one.wait().is_leader());
}

#[test]
fn debug_matches_std_and_new_is_const() {
    static BARRIER: Barrier = Barrier::new(1);
    assert!(BARRIER.wait().is_leader());
    assert_eq!(
        format!("{:?}", Barrier::new(2)),
        format!("{:?}", std::sync::Barrier::new(2))
    );
    assert_eq!(
        format!("{:?}", Barrier::new(1).wait()),
        format!("{:?}", std::sync::Barrier::new(1).wait())
    );
}
