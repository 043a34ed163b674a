//! loom models of the hand-off: two threads ping-pong over `swap` and over `Parker`, with no
//! lost wakeup (loom reports a deadlock) and no double turn (the owner counter).
#![cfg(futexkit_loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;

use futexkit::futex::Futex;
use futexkit::swap::{self, Parker, SwapMode};

const ROUNDS: u32 = 2;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(f);
}

/// Takes the turn: the count of current holders must go from 0 to 1.
fn enter(holders: &AtomicU32) {
    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "double turn");
}

fn leave(holders: &AtomicU32) {
    holders.fetch_sub(1, Ordering::SeqCst);
}

#[test]
fn swap_ping_pong() {
    model(|| {
        let turn = Arc::new(Futex::new(0));
        let holders = Arc::new(AtomicU32::new(0));
        let side = |me: u32, turn: Arc<Futex>, holders: Arc<AtomicU32>| {
            move || {
                let other = 1 - me;
                for round in 0..ROUNDS {
                    while turn.load(Ordering::Acquire) != me {
                        let _ = turn.wait(other, None);
                    }
                    enter(&holders);
                    leave(&holders);
                    turn.store(other, Ordering::Release);
                    if me == 1 && round + 1 == ROUNDS {
                        turn.wake(1).unwrap();
                    } else {
                        let _ = swap::swap_in(SwapMode::Emulated, &turn, other, &turn, None);
                    }
                }
            }
        };
        let b = loom::thread::spawn(side(1, Arc::clone(&turn), Arc::clone(&holders)));
        side(0, turn, holders)();
        b.join().unwrap();
    });
}

#[test]
fn parker_ping_pong() {
    model(|| {
        let sides = Arc::new([Parker::new(), Parker::new()]);
        let holders = Arc::new(AtomicU32::new(0));
        let b = {
            let (sides, holders) = (Arc::clone(&sides), Arc::clone(&holders));
            loom::thread::spawn(move || {
                sides[1].park(None).unwrap();
                for round in 0..ROUNDS {
                    enter(&holders);
                    leave(&holders);
                    if round + 1 < ROUNDS {
                        sides[1].swap_to(&sides[0], None).unwrap();
                    } else {
                        sides[0].unpark();
                    }
                }
            })
        };
        for _ in 0..ROUNDS {
            enter(&holders);
            leave(&holders);
            sides[0].swap_to(&sides[1], None).unwrap();
        }
        b.join().unwrap();
    });
}
