//! The spin policy's decisions as a user sees them (`futexkit::spin::decisions`): every wait
//! that reaches the policy is counted once, as won, lost or skipped. Which one is asserted only
//! where it does not depend on the machine and its load. The counts are the process's, so
//! everything that counts runs in one test, one step after another.
#![cfg(not(model))]

use std::time::Duration;

use futexkit::spin::{decisions, Outcomes};
use futexkit::swap::Parker;
use futexkit::{Condvar, Mutex};
use futexkit_support::condvar::{ping_pong, Futexkit};

fn total(o: Outcomes) -> u64 {
    o.won + o.lost + o.skipped
}

#[test]
fn every_wait_that_reaches_the_policy_is_counted() {
    a_condvar_wait_that_times_out_is_counted_as_lost_or_skipped();
    a_wait_after_a_notify_that_found_nobody_asleep_spins();
    a_condvar_ping_pong_counts_its_waits();
    a_park_that_times_out_is_counted_as_a_hand_off_lost_or_skipped();
}

fn a_condvar_wait_that_times_out_is_counted_as_lost_or_skipped() {
    // The wait runs on a fresh thread, whose counts are all in once it has been joined.
    let before = decisions().notify;
    std::thread::spawn(|| {
        let (mutex, condvar) = (Mutex::new(()), Condvar::new());
        let guard = mutex.lock().unwrap();
        let (_guard, timeout) = condvar
            .wait_timeout(guard, Duration::from_millis(5))
            .unwrap();
        assert!(timeout.timed_out());
    })
    .join()
    .unwrap();
    let after = decisions().notify;
    assert!(after.lost + after.skipped > before.lost + before.skipped);
}

fn a_wait_after_a_notify_that_found_nobody_asleep_spins() {
    if futexkit::capabilities().usable_cpus() < 2 {
        return; // nothing spins with one CPU
    }
    // A fresh thread has no credit: its first wait would sleep at once (counted as skipped),
    // unless its own notify just found nobody asleep. Nobody notifies it, so the spin loses.
    let before = decisions().notify;
    std::thread::spawn(|| {
        let (mutex, condvar) = (Mutex::new(()), Condvar::new());
        let guard = mutex.lock().unwrap();
        condvar.notify_one();
        // Long enough that the deadline cannot pass before the policy decides.
        let (_guard, timeout) = condvar
            .wait_timeout(guard, Duration::from_millis(200))
            .unwrap();
        assert!(timeout.timed_out());
    })
    .join()
    .unwrap();
    let after = decisions().notify;
    assert_eq!(after.lost, before.lost + 1, "{before:?} -> {after:?}");
    assert_eq!(after.skipped, before.skipped, "{before:?} -> {after:?}");
}

fn a_condvar_ping_pong_counts_its_waits() {
    const TURNS: u64 = 2_000;
    let before = total(decisions().notify);
    // The partner thread is joined inside; this thread's counts are read by `decisions`.
    ping_pong::<Futexkit>(TURNS);
    let counted = total(decisions().notify) - before;
    // A wait whose condition already held never reaches the policy, so fewer than 2 * TURNS
    // may be counted; but the side that passed the turn waits for it to come back.
    assert!(counted > 0, "no wait was counted");
}

fn a_park_that_times_out_is_counted_as_a_hand_off_lost_or_skipped() {
    let before = decisions().hand_off;
    std::thread::spawn(|| {
        let parker = Parker::new();
        let deadline = futexkit::futex::Deadline::after(Duration::from_millis(5));
        assert_eq!(
            parker.park(Some(deadline)),
            Err(futexkit::futex::Error::TimedOut)
        );
    })
    .join()
    .unwrap();
    let after = decisions().hand_off;
    assert!(after.lost + after.skipped > before.lost + before.skipped);
}

#[test]
fn decisions_print_every_kind() {
    let text = decisions().to_string();
    for kind in ["lock:", "notify:", "hand-off:"] {
        assert!(text.contains(kind), "{text}");
    }
}
