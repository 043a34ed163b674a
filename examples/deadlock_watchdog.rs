//! The deadlock checks on a program that deadlocks: two threads move money between two
//! accounts, each locking the account it takes from first, so one locks A then B and the
//! other B then A. The first transfers run one after the other: no deadlock, but the order
//! report comes at once. Then both run together and stick; a watchdog thread finds them with
//! `check_deadlock`, prints the cycle and ends the process.
//! `cargo run --example deadlock_watchdog --features deadlock`

use std::sync::Arc;
use std::time::Duration;

use futexkit::sync::{Barrier, Mutex};

fn transfer(from: &Mutex<i64>, to: &Mutex<i64>, amount: i64, together: Option<&Barrier>) {
    let mut from = from.lock().unwrap();
    if let Some(barrier) = together {
        // Both threads hold their first account before either asks for its second.
        barrier.wait();
    }
    let mut to = to.lock().unwrap();
    *from -= amount;
    *to += amount;
}

fn main() {
    let a = Arc::new(Mutex::new(100));
    let b = Arc::new(Mutex::new(100));
    // One after the other: these never deadlock, yet the second order contradicts the first.
    transfer(&a, &b, 10, None);
    transfer(&b, &a, 5, None);
    for violation in futexkit::deadlock::order_violations() {
        println!("{violation}\n");
    }

    std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(|| loop {
            std::thread::sleep(Duration::from_millis(100));
            let deadlocks = futexkit::deadlock::check_deadlock();
            if !deadlocks.is_empty() {
                for deadlock in deadlocks {
                    println!("{deadlock}");
                }
                std::process::exit(0);
            }
        })
        .unwrap();
    let together = Arc::new(Barrier::new(2));
    let threads: Vec<_> = [("a-to-b", &a, &b), ("b-to-a", &b, &a)]
        .into_iter()
        .map(|(name, from, to)| {
            let (from, to, together) = (Arc::clone(from), Arc::clone(to), Arc::clone(&together));
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || transfer(&from, &to, 1, Some(&together)))
                .unwrap()
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    unreachable!("the transfers deadlocked; the watchdog ends the process");
}
