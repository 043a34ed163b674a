//! N uncontended lock+unlock pairs on one implementation, for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/uncontended futexkit 1000000` minus the
//! same with 0 gives the cost of N pairs (see README). An implementation's name with `-read` or
//! `-write` after it (`futexkit-read`) counts its RwLock's read or write lock + unlock instead
//! of its Mutex. Built with the `deadlock` feature, the checks are turned off unless a third
//! argument, `checks-on`, asks for them. An unknown name exits with status 2.

use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("futexkit", String::as_str);
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    #[cfg(feature = "deadlock")]
    futexkit::deadlock::set_enabled(args.get(3).is_some_and(|a| a == "checks-on"));
    match which {
        "futexkit" => pairs(futexkit::Mutex::new(0u64), n, |m| *m.lock().unwrap() += 1),
        "std" => pairs(std::sync::Mutex::new(0u64), n, |m| *m.lock().unwrap() += 1),
        "parking_lot" => pairs(parking_lot::Mutex::new(0u64), n, |m| *m.lock() += 1),
        "parking_lot_0.13" => pairs(parking_lot_013::Mutex::new(0u64), n, |m| *m.lock() += 1),
        "futexkit-read" => pairs(futexkit::RwLock::new(0u64), n, |l| read(*l.read().unwrap())),
        "std-read" => pairs(std::sync::RwLock::new(0u64), n, |l| {
            read(*l.read().unwrap())
        }),
        "parking_lot-read" => pairs(parking_lot::RwLock::new(0u64), n, |l| read(*l.read())),
        "parking_lot_0.13-read" => {
            pairs(parking_lot_013::RwLock::new(0u64), n, |l| read(*l.read()))
        }
        "futexkit-write" => pairs(futexkit::RwLock::new(0u64), n, |l| *l.write().unwrap() += 1),
        "std-write" => pairs(std::sync::RwLock::new(0u64), n, |l| {
            *l.write().unwrap() += 1
        }),
        "parking_lot-write" => pairs(parking_lot::RwLock::new(0u64), n, |l| *l.write() += 1),
        "parking_lot_0.13-write" => {
            pairs(parking_lot_013::RwLock::new(0u64), n, |l| *l.write() += 1)
        }
        other => {
            eprintln!(
                "unknown implementation {other}: futexkit, std, parking_lot or parking_lot_0.13, \
                 with -read or -write after it for the RwLock's read or write lock"
            );
            std::process::exit(2);
        }
    }
}

/// `n` lock + unlock pairs: `op` takes and releases `lock` once, which the loop hides from the
/// optimizer each time so that no pair is folded into another.
fn pairs<L>(lock: L, n: u64, op: impl Fn(&L)) {
    for _ in 0..n {
        op(black_box(&lock));
    }
    black_box(lock);
}

/// Keeps a value read under a read lock from being optimized away.
fn read(value: u64) {
    black_box(value);
}
