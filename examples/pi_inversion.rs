//! Priority inversion, measured: on CPU 0, a low-priority `SCHED_FIFO` thread holds a lock, a
//! high-priority one blocks on it, and a medium-priority one spins for `busy`. How long the
//! high-priority thread waits once the holder could go on, with std's Mutex, futexkit's Mutex,
//! futexkit's PiMutex and glibc's `PTHREAD_PRIO_INHERIT` mutex (run as root: real-time
//! scheduling needs the privilege).
//! `cargo run --release --example pi_inversion [-- --quick]`.

use std::time::Duration;

use futexkit_support::pi::{inversion, GlibcPiMutex, Lock};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 1 } else { 5 };
    let busy = Duration::from_millis(if quick { 20 } else { 100 });
    let critical = Duration::from_millis(1);
    println!("{}", futexkit::capabilities());
    let Ok(pi) = futexkit::sync::PiMutex::new(()) else {
        println!("this kernel has no PI futexes");
        return;
    };
    let locks: [(&str, Box<dyn Lock>); 4] = [
        ("std Mutex", Box::new(std::sync::Mutex::new(()))),
        ("futexkit Mutex", Box::new(futexkit::sync::Mutex::new(()))),
        ("futexkit PiMutex", Box::new(pi)),
        ("glibc PI mutex", Box::new(GlibcPiMutex::new())),
    ];
    println!(
        "\npriority inversion on CPU 0: the high-priority waiter's wait once the holder may go on ({critical:?} of its critical section left; the medium thread spins {busy:?}); median and shortest of {rounds} runs, and how many runs inverted"
    );
    println!("| lock | high-priority wait, median (ms) | shortest (ms) | inverted runs |");
    println!("|---|---|---|---|");
    for (name, lock) in &locks {
        let mut waits = Vec::new();
        let mut inverted = 0;
        for _ in 0..rounds {
            let Some(run) = inversion(lock.as_ref(), busy, critical) else {
                println!("real-time scheduling was refused (run as root) or one CPU is usable");
                return;
            };
            waits.push(run.high_waited);
            inverted += usize::from(run.medium_finished_first);
            // The kernel lets real-time threads use at most 95% of each second by default
            // (sched_rt_runtime_us) and then stops them for the rest of it, which would add to
            // a run's wait: a pause keeps the runs well under the limit (the shortest run
            // shows a wait without any such stop).
            std::thread::sleep(busy * 4);
        }
        waits.sort();
        println!(
            "| {name} | {:.1} | {:.1} | {inverted} of {rounds} |",
            waits[waits.len() / 2].as_secs_f64() * 1e3,
            waits[0].as_secs_f64() * 1e3
        );
    }
}
