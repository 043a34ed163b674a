//! loom models of the emulated futex itself: run with `RUSTFLAGS="--cfg futexkit_loom"`.
#![cfg(futexkit_loom)]

use loom::sync::atomic::Ordering;
use loom::sync::Arc;

use futexkit::futex::{Deadline, Error, Futex};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn store_then_wake_is_never_lost() {
    model(|| {
        let word = Arc::new(Futex::new(0));
        let waiter = {
            let word = Arc::clone(&word);
            loom::thread::spawn(move || {
                while word.load(Ordering::Acquire) == 0 {
                    let _ = word.wait(0, None);
                }
            })
        };
        word.store(1, Ordering::Release);
        word.wake(1).unwrap();
        waiter.join().unwrap();
    });
}

#[test]
fn requeue_moves_a_waiter_to_the_target() {
    model(|| {
        let from = Arc::new(Futex::new(0));
        let to = Arc::new(Futex::new(0));
        let waiter = {
            let (from, to) = (Arc::clone(&from), Arc::clone(&to));
            loom::thread::spawn(move || {
                while to.load(Ordering::Acquire) == 0 {
                    // Sleep on `from` until it changes, then on `to`.
                    if from.load(Ordering::Acquire) == 0 {
                        let _ = from.wait(0, None);
                    } else {
                        let _ = to.wait(0, None);
                    }
                }
            })
        };
        // A waiter asleep on `from` is moved to `to` and woken there; one that has not slept
        // yet sees `from` changed and sleeps on `to` (or sees `to` set).
        from.store(1, Ordering::Release);
        let _ = from.cmp_requeue(1, 0, &to, 1);
        to.store(1, Ordering::Release);
        to.wake(1).unwrap();
        waiter.join().unwrap();
    });
}

#[test]
fn timed_wait_either_times_out_or_is_woken() {
    model(|| {
        let word = Arc::new(Futex::new(0));
        let waiter = {
            let word = Arc::clone(&word);
            loom::thread::spawn(move || {
                let deadline = Deadline::after(std::time::Duration::from_millis(1));
                word.wait(0, Some(deadline))
            })
        };
        word.wake(1).unwrap();
        let r = waiter.join().unwrap();
        assert!(matches!(
            r,
            Ok(()) | Err(Error::TimedOut) | Err(Error::ValueChanged)
        ));
    });
}
