//! futexkit::deadlock::set_enabled, in a process of its own (the switch is process-wide): off,
//! nothing is recorded or reported; on again, every thread's record starts afresh, so a lock
//! released while the checks were off is not still taken for held.
#![cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]

use futexkit::deadlock;
use futexkit::sync::Mutex;

#[test]
fn off_records_nothing_and_on_again_starts_afresh() {
    assert!(deadlock::is_enabled(), "on from the start");
    let (a, b) = (Mutex::new(0), Mutex::new(0));

    // Taken while on, released while off: the record still lists it until the checks restart.
    let held = a.lock().unwrap();
    deadlock::set_enabled(false);
    assert!(!deadlock::is_enabled());
    drop(held);
    {
        // An inverted order while off: not seen.
        let _b = b.lock().unwrap();
        let _a = a.lock().unwrap();
    }
    {
        let _a = a.lock().unwrap();
        let _b = b.lock().unwrap();
    }
    assert!(deadlock::order_violations().is_empty());
    assert!(deadlock::check_deadlock().is_empty());

    deadlock::set_enabled(true);
    // `a` was released while off; a stale entry would make this a relock and panic.
    let _a = a.lock().unwrap();
    drop(_a);
    // On again: orders are seen again.
    {
        let _a = a.lock().unwrap();
        let _b = b.lock().unwrap();
    }
    {
        let _b = b.lock().unwrap();
        let _a = a.lock().unwrap();
    }
    assert_eq!(deadlock::order_violations().len(), 1);
}
