//! swap and Parker: wake exactly one, wait correctly, time out, and never lose or double a turn.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::{blocked, kernel_path};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use blocked::spawn_blocked;
use futexkit::futex::{Deadline, Error, Futex};
use futexkit::swap::{self, Parker, SwapMode};

#[test]
fn swap_wakes_exactly_one_waiter_and_then_waits() {
    for mode in SwapMode::available() {
        let partner_word = Arc::new(Futex::new(0));
        let own = Arc::new(Futex::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let w = Arc::clone(&partner_word);
                spawn_blocked(move || w.wait(0, None))
            })
            .collect();
        let swapper = {
            let (own, partner_word) = (Arc::clone(&own), Arc::clone(&partner_word));
            spawn_blocked(move || swap::swap_in(mode, &own, 0, &partner_word, None))
        };
        // The swap woke one of the two waiters; exactly one is left.
        assert_eq!(partner_word.wake(10), Ok(1), "{mode:?}");
        for w in waiters {
            assert_eq!(w.join().unwrap(), Ok(()));
        }
        // The swapper sleeps on its own word until woken there.
        own.store(1, Ordering::Release);
        own.wake(1).unwrap();
        assert_eq!(swapper.join().unwrap(), Ok(()), "{mode:?}");
        if mode == SwapMode::Kernel {
            kernel_path::ran("swap", "swap_wakes_exactly_one_waiter_and_then_waits");
        }
    }
}

#[test]
fn swap_with_a_changed_value_still_wakes_the_partner() {
    for mode in SwapMode::available() {
        let partner_word = Arc::new(Futex::new(0));
        let waiter = {
            let w = Arc::clone(&partner_word);
            spawn_blocked(move || w.wait(0, None))
        };
        let own = Futex::new(5);
        assert_eq!(
            swap::swap_in(mode, &own, 4, &partner_word, None),
            Err(Error::ValueChanged)
        );
        assert_eq!(waiter.join().unwrap(), Ok(()), "the partner was woken");
        if mode == SwapMode::Kernel {
            kernel_path::ran("swap", "swap_with_a_changed_value_still_wakes_the_partner");
        }
    }
}

#[test]
fn swap_deadline_expires() {
    for mode in SwapMode::available() {
        let own = Futex::new(0);
        let nobody = Futex::new(0);
        let deadline = Deadline::after(Duration::from_millis(20));
        assert_eq!(
            swap::swap_in(mode, &own, 0, &nobody, Some(deadline)),
            Err(Error::TimedOut)
        );
        assert!(deadline.has_passed());
        if mode == SwapMode::Kernel {
            kernel_path::ran("swap", "swap_deadline_expires");
        }
    }
}

#[test]
fn kernel_mode_is_refused_where_absent() {
    if !SwapMode::Kernel.is_available() {
        let w = Futex::new(0);
        assert_eq!(
            swap::swap_in(SwapMode::Kernel, &w, 1, &w, None),
            Err(Error::Unsupported)
        );
    }
    assert!(SwapMode::Emulated.is_available());
}

/// Hand-offs per test: a million, fewer in the kernel matrix's emulated guests.
fn rounds() -> u64 {
    kernel_path::hand_offs(1_000_000)
}

/// Two threads take turns on one word with `swap`; the counter proves strict alternation.
#[test]
fn a_million_swaps_lose_no_turn() {
    let rounds = rounds();
    for mode in SwapMode::available() {
        let turn = Arc::new(Futex::new(0));
        let counter = Arc::new(AtomicU64::new(0));
        let side = |me: u32, turn: Arc<Futex>, counter: Arc<AtomicU64>| {
            move || {
                let other = 1 - me;
                for round in 0..rounds {
                    while turn.load(Ordering::Acquire) != me {
                        let _ = turn.wait(other, None);
                    }
                    let c = counter.load(Ordering::Relaxed);
                    assert_eq!(c % 2, u64::from(me), "double turn");
                    counter.store(c + 1, Ordering::Relaxed);
                    turn.store(other, Ordering::Release);
                    if me == 1 && round + 1 == rounds {
                        // Side 1's last hand-off: nobody will pass the turn back.
                        turn.wake(1).unwrap();
                    } else {
                        let _ = swap::swap_in(mode, &turn, other, &turn, None);
                    }
                }
            }
        };
        let b = std::thread::spawn(side(1, Arc::clone(&turn), Arc::clone(&counter)));
        side(0, Arc::clone(&turn), Arc::clone(&counter))();
        b.join().unwrap();
        assert_eq!(counter.load(Ordering::Relaxed), 2 * rounds, "{mode:?}");
        if mode == SwapMode::Kernel {
            kernel_path::ran("swap", "a_million_swaps_lose_no_turn");
        }
    }
}

/// The same with Parker::swap_to.
#[test]
fn a_million_parker_hand_offs_lose_no_turn() {
    let rounds = rounds();
    let sides = Arc::new([Parker::new(), Parker::new()]);
    let counter = Arc::new(AtomicU64::new(0));
    let b = {
        let (sides, counter) = (Arc::clone(&sides), Arc::clone(&counter));
        std::thread::spawn(move || {
            sides[1].park(None).unwrap();
            for round in 0..rounds {
                let c = counter.load(Ordering::Relaxed);
                assert_eq!(c % 2, 1, "double turn");
                counter.store(c + 1, Ordering::Relaxed);
                if round + 1 < rounds {
                    sides[1].swap_to(&sides[0], None).unwrap();
                } else {
                    sides[0].unpark();
                }
            }
        })
    };
    for _ in 0..rounds {
        let c = counter.load(Ordering::Relaxed);
        assert_eq!(c % 2, 0, "double turn");
        counter.store(c + 1, Ordering::Relaxed);
        sides[0].swap_to(&sides[1], None).unwrap();
    }
    b.join().unwrap();
    assert_eq!(counter.load(Ordering::Relaxed), 2 * rounds);
}

#[test]
fn parker_tokens_do_not_accumulate_and_park_times_out() {
    let p = Parker::new();
    p.unpark();
    p.unpark();
    assert_eq!(p.park(None), Ok(()));
    let deadline = Deadline::after(Duration::from_millis(20));
    assert_eq!(p.park(Some(deadline)), Err(Error::TimedOut));
    assert!(deadline.has_passed());
    // After a timeout the parker works again.
    p.unpark();
    assert_eq!(
        p.park(Some(Deadline::after(Duration::from_secs(60)))),
        Ok(())
    );
}

#[test]
fn parker_wakes_a_sleeping_owner() {
    let p = Arc::new(Parker::new());
    let sleeper = {
        let p = Arc::clone(&p);
        spawn_blocked(move || p.park(None))
    };
    p.unpark();
    assert_eq!(sleeper.join().unwrap(), Ok(()));
}

#[test]
fn the_mode_is_kernel_exactly_where_probed() {
    let expected = if SwapMode::Kernel.is_available() {
        SwapMode::Kernel
    } else {
        SwapMode::Emulated
    };
    assert_eq!(swap::mode(), expected);
    assert_eq!(
        SwapMode::available().first(),
        Some(&expected),
        "the mode used is the best available"
    );
}

#[test]
fn wait_on_owner_returns_when_the_owner_lets_go_and_times_out_otherwise() {
    use futexkit::futex::{Deadline, Error, Futex};
    use futexkit::spin::{wait_on_owner, Spinner};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let spinner = Spinner::new();
    let owner_tid = blocked::gettid();
    // Not holding the TID: returns at once.
    let free = Futex::new(0);
    assert_eq!(wait_on_owner(&free, owner_tid, &spinner, None), Ok(()));
    // Held, and nobody lets go: the deadline ends the wait.
    let held = Futex::new(owner_tid);
    let deadline = Deadline::after(std::time::Duration::from_millis(20));
    assert_eq!(
        wait_on_owner(&held, owner_tid, &spinner, Some(deadline)),
        Err(Error::TimedOut)
    );
    // A waiter asleep on the word returns once the owner stores 0 and wakes.
    let word = Arc::new(Futex::new(owner_tid));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let waiter = {
        let word = Arc::clone(&word);
        std::thread::spawn(move || {
            tid_tx.send(blocked::gettid()).unwrap();
            let spinner = Spinner::new();
            while word.load(Ordering::Acquire) == owner_tid {
                wait_on_owner(&*word, owner_tid, &spinner, None).unwrap();
            }
        })
    };
    blocked::wait_until_blocked(tid_rx.recv().unwrap());
    word.store(0, Ordering::Release);
    word.wake(1).unwrap();
    waiter.join().unwrap();
}

/// Where the kernel has `FUTEX_SWAP` but refuses it to one thread (a seccomp policy), that
/// thread's `swap_to` a sleeping partner still wakes the partner. (Elsewhere `swap_to` wakes
/// and parks without it, and this checks that path.)
#[test]
fn a_swap_the_kernel_refuses_still_wakes_the_partner() {
    let kernel_swap = SwapMode::Kernel.is_available(); // probed before the filter
    let sides = Arc::new([Parker::new(), Parker::new()]);
    let partner = spawn_blocked({
        let sides = Arc::clone(&sides);
        move || sides[1].park(Some(Deadline::after(Duration::from_secs(60))))
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            // FUTEX_SWAP's operation number on the kernels that have it.
            futexkit_support::seccomp::refuse_futex_op(13);
            // Nobody hands the turn back: this side times out.
            let back =
                sides[0].swap_to(&sides[1], Some(Deadline::after(Duration::from_millis(50))));
            assert_eq!(back, Err(Error::TimedOut));
        });
    });
    assert_eq!(
        partner.join().unwrap(),
        Ok(()),
        "kernel swap: {kernel_swap}"
    );
}
