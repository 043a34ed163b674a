//! The event's protocol under a model checker (`--cfg futexkit_loom` or `--cfg futexkit_shuttle`;
//! see `tests/model/mod.rs`): a set releases every waiter (a lost wakeup shows as the checker's
//! deadlock report) and publishes what the setter wrote before it, with timed waiters too. That
//! a set followed at once by a reset still releases the threads asleep at the set is tested with
//! real threads known to be asleep (`tests/event.rs`): a model cannot hold a thread inside its
//! wait while another sets.
#![cfg(any(futexkit_loom, futexkit_shuttle))]

mod model;

use futexkit::raw::RawEvent;
use model::atomic::{AtomicUsize, Ordering};
use model::{check, in_threads, Arc, Job, FAR};

/// One setter, which writes a value and sets, and `waiters` waiters, the last of them timed if
/// `timed`: every waiter returns and sees the value.
fn setter_and_waiters(waiters: usize, timed: bool) {
    let shared = Arc::new((RawEvent::new(false), AtomicUsize::new(0)));
    let mut work: Vec<Job<(RawEvent, AtomicUsize)>> =
        vec![Box::new(|(event, value): &(RawEvent, AtomicUsize)| {
            value.store(7, Ordering::Relaxed);
            event.set();
        })];
    for i in 0..waiters {
        let timed = timed && i + 1 == waiters;
        work.push(Box::new(move |(event, value): &(RawEvent, AtomicUsize)| {
            let deadline = timed.then(|| futexkit::futex::Deadline::after(FAR));
            assert!(event.wait(deadline), "set before FAR");
            assert_eq!(value.load(Ordering::Relaxed), 7);
        }));
    }
    in_threads(&shared, work);
}

#[test]
fn a_set_releases_every_waiter() {
    let waiters = if cfg!(futexkit_loom) { 2 } else { 5 };
    check(3, move || setter_and_waiters(waiters, false));
}

#[test]
fn a_timed_wait_races_the_set() {
    check(3, || setter_and_waiters(2, true));
}

/// A set of an event that is already set still publishes what its thread wrote before it: a
/// thread that resets the event, finds nothing written and waits, is woken by that set or sees
/// what it wrote.
#[test]
fn a_set_of_a_set_event_publishes_too() {
    check(3, || {
        let shared = Arc::new((RawEvent::new(true), AtomicUsize::new(0)));
        in_threads(
            &shared,
            vec![
                Box::new(|(event, written): &(RawEvent, AtomicUsize)| {
                    written.store(1, Ordering::Relaxed);
                    event.set();
                }),
                Box::new(|(event, written): &(RawEvent, AtomicUsize)| {
                    event.reset();
                    if written.load(Ordering::Relaxed) == 0 {
                        assert!(event.wait(None));
                        assert_eq!(written.load(Ordering::Relaxed), 1);
                    }
                }),
            ],
        );
    });
}

/// The same for the auto-reset event: a set that finds it set already adds nothing, but what
/// its thread wrote before is seen by the wait that consumes the set, or a later wait gets its
/// own set.
#[test]
fn a_set_of_a_set_auto_reset_event_publishes_too() {
    use futexkit::sync::AutoResetEvent;
    check(3, || {
        let shared = Arc::new((AutoResetEvent::new(false), AtomicUsize::new(0)));
        in_threads(
            &shared,
            vec![
                Box::new(|(event, written): &(AutoResetEvent, AtomicUsize)| {
                    event.wait();
                    if written.load(Ordering::Relaxed) == 0 {
                        event.wait();
                        assert_eq!(written.load(Ordering::Relaxed), 1);
                    }
                }),
                Box::new(|(event, _): &(AutoResetEvent, AtomicUsize)| event.set()),
                Box::new(|(event, written): &(AutoResetEvent, AtomicUsize)| {
                    written.store(1, Ordering::Relaxed);
                    event.set();
                }),
            ],
        );
    });
}
