//! N uncontended lock+unlock pairs on one implementation, for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/uncontended futexkit 1000000` minus the
//! same with 0 gives the cost of N pairs (see README). An implementation's name with `-read` or
//! `-write` after it (`futexkit-read`) counts its RwLock's read or write lock + unlock instead
//! of its Mutex. Built
//! with the `deadlock` feature, the checks are turned off unless a third argument, `checks-on`,
//! asks for them. An unknown name exits with status 2.

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
        "futexkit" => {
            let m = futexkit::Mutex::new(0u64);
            for _ in 0..n {
                *black_box(&m).lock().unwrap() += 1;
            }
            black_box(m.into_inner().unwrap());
        }
        "std" => {
            let m = std::sync::Mutex::new(0u64);
            for _ in 0..n {
                *black_box(&m).lock().unwrap() += 1;
            }
            black_box(m.into_inner().unwrap());
        }
        "parking_lot" => {
            let m = parking_lot::Mutex::new(0u64);
            for _ in 0..n {
                *black_box(&m).lock() += 1;
            }
            black_box(m.into_inner());
        }
        "parking_lot_0.13" => {
            let m = parking_lot_013::Mutex::new(0u64);
            for _ in 0..n {
                *black_box(&m).lock() += 1;
            }
            black_box(m.into_inner());
        }
        "futexkit-read" => {
            let l = futexkit::RwLock::new(0u64);
            let mut sum = 0;
            for _ in 0..n {
                sum += *black_box(&l).read().unwrap();
            }
            black_box(sum);
        }
        "std-read" => {
            let l = std::sync::RwLock::new(0u64);
            let mut sum = 0;
            for _ in 0..n {
                sum += *black_box(&l).read().unwrap();
            }
            black_box(sum);
        }
        "parking_lot-read" => {
            let l = parking_lot::RwLock::new(0u64);
            let mut sum = 0;
            for _ in 0..n {
                sum += *black_box(&l).read();
            }
            black_box(sum);
        }
        "parking_lot_0.13-read" => {
            let l = parking_lot_013::RwLock::new(0u64);
            let mut sum = 0;
            for _ in 0..n {
                sum += *black_box(&l).read();
            }
            black_box(sum);
        }
        "futexkit-write" => {
            let l = futexkit::RwLock::new(0u64);
            for _ in 0..n {
                *black_box(&l).write().unwrap() += 1;
            }
            black_box(l.into_inner().unwrap());
        }
        "std-write" => {
            let l = std::sync::RwLock::new(0u64);
            for _ in 0..n {
                *black_box(&l).write().unwrap() += 1;
            }
            black_box(l.into_inner().unwrap());
        }
        "parking_lot-write" => {
            let l = parking_lot::RwLock::new(0u64);
            for _ in 0..n {
                *black_box(&l).write() += 1;
            }
            black_box(l.into_inner());
        }
        "parking_lot_0.13-write" => {
            let l = parking_lot_013::RwLock::new(0u64);
            for _ in 0..n {
                *black_box(&l).write() += 1;
            }
            black_box(l.into_inner());
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
