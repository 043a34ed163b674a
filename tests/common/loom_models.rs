// loom model pieces shared by tests/loom_mutex.rs, tests/loom_condvar.rs and the crate's own
// owner-watch models in src/mutex.rs, which run them with FUTEX2_SPIN's protocol forced on and
// check the mutex's private words afterwards. `include!`d: the includer brings `Arc`,
// `AtomicU32`, `Ordering` (loom's), `RawMutex`, `Mutex` and `Condvar` into scope.

/// Explores `f` with loom, at most `preemptions` preemptions per execution.
#[allow(dead_code)]
fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = ::loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// Increments `counter` with a separate load and store: only mutual exclusion keeps it exact.
#[allow(dead_code)]
fn locked_increment(raw: &RawMutex, counter: &AtomicU32) {
    raw.lock();
    let v = counter.load(Ordering::Relaxed);
    counter.store(v + 1, Ordering::Relaxed);
    // SAFETY: locked just above.
    unsafe { raw.unlock() };
}

/// One thread per entry of `locks` (the caller's is the first, the others spawned before it
/// starts), each making that many locked increments of one counter; returns the mutex and the
/// count once all have joined.
#[allow(dead_code)]
fn increments_in_threads(locks: &[usize]) -> (Arc<RawMutex>, u32) {
    let raw = Arc::new(RawMutex::new());
    let counter = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = locks[1..]
        .iter()
        .map(|&n| {
            let (raw, counter) = (Arc::clone(&raw), Arc::clone(&counter));
            ::loom::thread::spawn(move || {
                for _ in 0..n {
                    locked_increment(&raw, &counter);
                }
            })
        })
        .collect();
    for _ in 0..locks[0] {
        locked_increment(&raw, &counter);
    }
    for t in threads {
        t.join().unwrap();
    }
    let count = counter.load(Ordering::Relaxed);
    (raw, count)
}

/// Two threads wait for a flag on a Condvar; the caller sets it and broadcasts. Returns the
/// pair once both waiters are through.
#[allow(dead_code)]
fn broadcast_to_two_waiters() -> Arc<(Mutex<bool>, Condvar)> {
    let state = Arc::new((Mutex::new(false), Condvar::new()));
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let state = Arc::clone(&state);
            ::loom::thread::spawn(move || {
                let (lock, cv) = &*state;
                let ready = cv
                    .wait_while(lock.lock().unwrap(), |ready| !*ready)
                    .unwrap();
                assert!(*ready);
            })
        })
        .collect();
    *state.0.lock().unwrap() = true;
    state.1.notify_all();
    for w in waiters {
        w.join().unwrap();
    }
    state
}
