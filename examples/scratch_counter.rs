use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let lib = args[1].clone();
    let threads: usize = args[2].parse().unwrap();
    let long = args.get(3).is_some_and(|a| a == "long");
    let stop = AtomicBool::new(false);
    let fk = futexkit::Mutex::new(0u64);
    let pl = parking_lot::Mutex::new(0u64);
    let st = std::sync::Mutex::new(0u64);
    let before = futexkit::spin::decisions();
    let start = Instant::now();
    let work = |x: &mut u64| {
        if long {
            let mut v = *x;
            for _ in 0..100 { v = std::hint::black_box(v.wrapping_mul(3).wrapping_add(1)); }
            *x = v;
        }
        *x += 1;
    };
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        match lib.as_str() {
                            "fk" => work(&mut fk.lock().unwrap()),
                            "pl" => work(&mut pl.lock()),
                            _ => work(&mut st.lock().unwrap()),
                        }
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1000));
        stop.store(true, Ordering::Relaxed);
    });
    let el = start.elapsed().as_secs_f64();
    let n = *fk.lock().unwrap() + *pl.lock() + *st.lock().unwrap();
    let d = futexkit::spin::decisions();
    println!("{lib} {threads}: {:.1} Mops  lock spins won {} lost {}", n as f64 / el / 1e6, d.lock.won - before.lock.won, d.lock.lost - before.lock.lost);
}
