//! Runs one scenario under the model checker this build is for: loom (`--cfg futexkit_loom`: every
//! interleaving within a preemption bound; keep scenarios to 2-3 threads) or shuttle
//! (`--cfg futexkit_shuttle`: randomized PCT schedules; 4-8 threads are fine). The scenarios use
//! `thread` and `Arc` from here, so each is written once for both.
//!
//! A timed wait's outcome is the checker's choice (the emulated futex explores both a timeout
//! and a wake), so scenarios give timed calls [`FAR`] as their timeout: a deadline read from
//! the real clock must not pass during a run, or the run would depend on time.
#![allow(dead_code, unused_imports)]

#[cfg(futexkit_loom)]
pub use loom::{sync::atomic, sync::Arc, thread};
#[cfg(futexkit_shuttle)]
pub use shuttle::{sync::atomic, sync::Arc, thread};

/// The timeout of timed calls in scenarios: long enough never to pass during a run.
pub const FAR: std::time::Duration = std::time::Duration::from_secs(3600);

/// Sizes of a scenario (threads, and operations each): `loom`'s under loom, which explores
/// every interleaving and so takes small ones, `shuttle`'s under shuttle.
pub fn sized(loom: (usize, usize), shuttle: (usize, usize)) -> (usize, usize) {
    if cfg!(futexkit_loom) {
        loom
    } else {
        shuttle
    }
}

/// Explores `f`: with loom, every interleaving within `preemptions` preemptions (or fewer if
/// `LOOM_MAX_PREEMPTIONS` says so); with shuttle, `SHUTTLE_ITERATIONS` (default 2000) PCT
/// schedules of depth 3.
pub fn check(preemptions: usize, f: impl Fn() + Send + Sync + 'static) {
    check_scaled(preemptions, 1, f);
}

/// As [`check`], with `scale` times as many shuttle schedules: for a scenario whose failing
/// interleavings are rare among PCT's schedules.
pub fn check_scaled(preemptions: usize, scale: usize, f: impl Fn() + Send + Sync + 'static) {
    #[cfg(futexkit_loom)]
    {
        let _ = scale;
        let mut builder = loom::model::Builder::new();
        let cap = builder.preemption_bound.unwrap_or(preemptions);
        builder.preemption_bound = Some(preemptions.min(cap));
        builder.check(f);
    }
    #[cfg(futexkit_shuttle)]
    {
        let _ = preemptions;
        let iterations = std::env::var("SHUTTLE_ITERATIONS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(2000)
            * scale;
        let mut config = shuttle::Config::new();
        config.silence_warnings = true;
        let scheduler = shuttle::scheduler::PctScheduler::new(3, iterations);
        let runs = shuttle::Runner::new(scheduler, config).run(f);
        eprintln!("shuttle: {runs} schedules");
    }
}

/// One model thread's work on the state its threads share.
pub type Job<T> = Box<dyn FnOnce(&T) + Send>;

/// Spawns one thread per entry of `work` (the caller runs the first entry itself, after
/// spawning the others) and joins them.
pub fn in_threads<T: Send + Sync + 'static>(shared: &Arc<T>, work: Vec<Job<T>>) {
    let mut work = work.into_iter();
    let first = work.next().expect("at least one thread");
    let handles: Vec<_> = work
        .map(|job| {
            let shared = Arc::clone(shared);
            thread::spawn(move || job(&shared))
        })
        .collect();
    first(shared);
    for h in handles {
        h.join().unwrap();
    }
}
