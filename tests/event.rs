//! futexkit::sync::Event: set releases every sleeping waiter and later waits, reset closes it,
//! a set followed at once by a reset still releases the threads that were waiting, timed waits
//! give up while it is reset.
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
