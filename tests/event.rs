//! futexkit::sync::Event: set releases every sleeping waiter and later waits, reset closes it,
//! a set followed at once by a reset still releases the threads that were waiting, timed waits
//! give up while it is reset; `AutoResetEvent` lets one wait through per set.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futexkit::sync::Event;
use futexkit_support::blocked::spawn_blocked;

/// `n` threads in `event.wait()`, returned once each is asleep in it.
fn asleep_in_wait(event: &Arc<Event>, n: usize) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let event = Arc::clone(event);
            spawn_blocked(move || event.wait())
        })
        .collect()
}

#[test]
fn set_releases_every_sleeping_waiter_and_later_waits() {
    let event = Arc::new(Event::new(false));
    let waiters = asleep_in_wait(&event, 3);
    event.set();
    for waiter in waiters {
        waiter.join().unwrap();
    }
    event.wait(); // still set
    assert!(event.is_set());
    assert_eq!(format!("{event:?}"), "Event { set: true }");
}

#[test]
fn a_set_then_reset_still_releases_the_threads_waiting_then() {
    let event = Arc::new(Event::new(false));
    let waiters = asleep_in_wait(&event, 3);
    event.set();
    event.reset(); // before the woken waiters run, most likely
    for waiter in waiters {
        waiter.join().unwrap();
    }
    assert!(!event.is_set());
}

#[test]
fn timed_waits_give_up_while_reset() {
    let event = Event::default();
    assert!(!event.wait_timeout(Duration::from_millis(10)));
    assert!(!event.wait_until(Instant::now() + Duration::from_millis(10)));
    event.set();
    event.set(); // a set of a set event changes nothing
    assert!(event.wait_timeout(Duration::ZERO));
    event.reset();
    assert!(!event.wait_timeout(Duration::from_millis(1)));
}

/// Each set of an `AutoResetEvent` lets exactly one of the sleeping waiters through and
/// resets: the other stays asleep until the next set.
#[test]
fn auto_reset_event_releases_one_waiter_per_set() {
    use futexkit::sync::AutoResetEvent;
    let event = Arc::new(AutoResetEvent::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let waiters: Vec<_> = (0..2)
        .map(|id| {
            let (event, tx) = (Arc::clone(&event), tx.clone());
            spawn_blocked(move || {
                event.wait();
                tx.send(id).unwrap();
            })
        })
        .collect();
    event.set();
    let first = rx.recv().unwrap();
    assert!(!event.is_set(), "the wait that returned reset it");
    assert!(rx.try_recv().is_err(), "a second waiter passed one set");
    event.set();
    let second = rx.recv().unwrap();
    assert_ne!(first, second);
    for waiter in waiters {
        waiter.join().unwrap();
    }
    assert_eq!(format!("{event:?}"), "AutoResetEvent { set: false }");
}

#[test]
fn auto_reset_event_sets_do_not_add_up() {
    use futexkit::sync::AutoResetEvent;
    let event = AutoResetEvent::default();
    assert!(!event.wait_timeout(Duration::from_millis(5)));
    event.set();
    event.set();
    assert!(event.is_set());
    assert!(event.wait_until(Instant::now() + Duration::from_millis(5)));
    assert!(
        !event.wait_timeout(Duration::ZERO),
        "two sets let one wait through"
    );
    event.set();
    assert!(event.reset(), "reset reports the set it undid");
    assert!(!event.reset());
    let set = AutoResetEvent::new(true);
    set.wait();
    assert!(!set.is_set());
}
