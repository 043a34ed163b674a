//! Processes killed while they use futexkit::shared locks: at every instruction of a lock and
//! an unlock (the child is single-stepped with ptrace, then SIGKILLed), at random points (the
//! child is stopped with SIGSTOP at a random moment, looked at, then SIGKILLed), and while
//! asleep. After each kill: no hang, no lost wakeup, and the death is reported to exactly one
//! next locker if and only if the child held the lock when it died. Semaphore permits of killed
//! holders come back; latches and events work across processes and survive scribbling.
//!
//! Children are forked (the test binary is multithreaded, so each child only runs shared-lock
//! calls and atomics, and leaves with `_exit`). Every wait for a child has a deadline far
//! beyond any honest delay: reaching it is a hang, and fails the test.
//!
//! `FUTEXKIT_TEST_KILLS` scales the random-point runs (default 500 each).
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futexkit::raw::{BarrierError, LatchOpen, SemaphoreError};
use futexkit::shared::{LockError, Region, SharedEvent, SharedLatch, SharedMutex};

/// Long enough that reaching it means a hang, not a slow machine (a TCG guest included).
const HANG: Duration = Duration::from_secs(120);

/// Counters the parent and its children share, in an anonymous shared mapping.
#[repr(C)]
struct Control {
    /// Loops a child completed.
    iterations: AtomicU64,
    /// Deaths reported to the children that contend (OwnerDied they saw).
    reported: AtomicU32,
    /// Set by the parent: contending children stop.
    stop: AtomicU32,
    /// Children that reached their wait.
    ready: AtomicU32,
}

fn control() -> &'static Control {
    // SAFETY: a fresh shared page, never unmapped, so the 'static reference stays valid; a
    // zeroed Control is a valid one (all atomics).
    unsafe { &*futexkit_support::shared::shared_page().cast::<Control>() }
}

/// Forks a child that runs `f` and leaves with its exit code.
fn fork_child(f: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child runs `f`, which only uses shared locks, atomics and raw syscalls on
    // state initialized before the fork (see `warm_up`), then leaves with _exit, running none
    // of the parent's destructors or atexit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = f();
        // SAFETY: as above.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Initializes the process-wide state a lock call may touch (the spin policy's measurement,
/// the probe, this thread's robust list), so that no forked child finds it half-initialized by
/// a thread it does not have.
fn warm_up() {
    futexkit::spin::SpinWait::new().spin();
    let _ = futexkit::capabilities();
    // SAFETY: a temporary, locked and unlocked within this statement, never moved while held.
    drop(unsafe { SharedMutex::new(0u8) }.lock());
}

/// Waits for `pid` to exit (or be killed); panics at `HANG`.
fn reap(pid: libc::pid_t, what: &str) -> i32 {
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: our own child; a valid out-pointer.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if ret == pid && (libc::WIFEXITED(status) || libc::WIFSIGNALED(status)) {
            return status;
        }
        if start.elapsed() > HANG {
            // SAFETY: kills our own child, which hangs.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what}: child {pid} hung");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn exited_with(status: i32, code: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == code
}

/// Waits until `pid` has stopped (SIGSTOP, or a ptrace stop).
fn wait_stopped(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: our own child; a valid out-pointer.
    let ret = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
    assert_eq!(ret, pid);
    assert!(
        libc::WIFSTOPPED(status),
        "child {pid} did not stop: {status:#x}"
    );
}

/// Kills a stopped (or running) child and reaps it.
fn kill(pid: libc::pid_t) {
    // SAFETY: our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let status = reap(pid, "kill");
    assert!(
        libc::WIFSIGNALED(status),
        "child {pid} was not killed: {status:#x}"
    );
}

/// Makes this (child) process traced by its parent and stops it: the parent steps it from here.
/// The child takes and releases `m` once first, so that its robust list is ready (a forked
/// child starts its own) and the steps that follow are the loop's.
fn stop_for_tracing(m: &SharedMutex<u64>) {
    drop(m.lock());
    // SAFETY: PTRACE_TRACEME takes no pointers; raise stops this process for the parent.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0), 0);
        libc::raise(libc::SIGSTOP);
    }
}

/// Single-steps the traced, stopped child `steps` instructions. A step over a system call
/// completes when the call returns; one that sleeps for ever would be a hang.
fn single_step(pid: libc::pid_t, steps: u64) {
    for _ in 0..steps {
        // SAFETY: our traced, stopped child; no pointers.
        assert_eq!(
            unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0, 0) },
            0
        );
        wait_stopped(pid);
    }
}

/// The child's loop: take the lock, add 1, release, count; for ever. With `report`, a death met
/// is counted, repaired and marked consistent (the contending child); without, it is a failure.
fn lock_loop(m: &SharedMutex<u64>, control: &Control, report: bool) -> i32 {
    loop {
        let mut guard = match m.lock() {
            Ok(guard) => guard,
            Err(LockError::OwnerDied(mut guard)) if report => {
                control.reported.fetch_add(1, Ordering::SeqCst);
                guard.mark_consistent();
                guard
            }
            Err(_) => return 3,
        };
        guard.update(|n| *n += 1);
        drop(guard);
        control.iterations.fetch_add(1, Ordering::SeqCst);
        if report && control.stop.load(Ordering::SeqCst) != 0 {
            return 0;
        }
    }
}

/// After a child died holding `m` or not: the next lockers see the death exactly once (counting
/// what contending children saw), and the lock works after.
fn check_after_death(m: &SharedMutex<u64>, held: bool, reported_by_others: u32, what: &str) {
    let mine = match m.try_lock_for(HANG) {
        Ok(_) => 0,
        Err(LockError::OwnerDied(mut guard)) => {
            guard.mark_consistent();
            1
        }
        Err(other) => panic!("{what}: lock after the kill failed: {other}"),
    };
    assert_eq!(
        mine + reported_by_others,
        u32::from(held),
        "{what}: the death was reported {} times; the child {} the lock",
        mine + reported_by_others,
        if held { "held" } else { "did not hold" }
    );
    assert!(m.try_lock().is_ok(), "{what}: the lock is not free after");
}

/// Steps per iteration of `lock_loop` in a child alone: what "every instruction" covers.
fn steps_per_iteration(m: &SharedMutex<u64>, control: &'static Control) -> u64 {
    control.iterations.store(0, Ordering::SeqCst);
    let child = fork_child(|| {
        stop_for_tracing(m);
        lock_loop(m, control, false)
    });
    wait_stopped(child);
    let mut steps = 0;
    let mut marks = Vec::new();
    while marks.len() < 3 {
        single_step(child, 1);
        steps += 1;
        let done = control.iterations.load(Ordering::SeqCst);
        if done as usize > marks.len() {
            marks.push(steps);
        }
        assert!(steps < 1_000_000, "the child never finished an iteration");
    }
    kill(child);
    marks[2] - marks[1]
}

#[test]
fn a_holder_killed_at_every_instruction_of_lock_and_unlock_is_reported_exactly_once() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let control = control();
    warm_up();
    let per_iteration = steps_per_iteration(m, control);
    let mut held_kills = 0;
    // Every offset over two iterations' worth of steps from the stop (the first steps return
    // from the stop itself), so that every instruction of a whole iteration, from the lock's
    // first to past the unlock's last, is the last one some child ran: a fresh child each.
    let offsets = 2 * per_iteration;
    for offset in 0..offsets {
        let child = fork_child(|| {
            stop_for_tracing(m);
            lock_loop(m, control, false)
        });
        wait_stopped(child);
        single_step(child, offset);
        let held = m.raw().holder() == Some(child as u32);
        held_kills += u32::from(held);
        kill(child);
        check_after_death(m, held, 0, &format!("step {offset} of {offsets}"));
    }
    println!("{per_iteration} instructions per iteration; {offsets} kills, one after each step, {held_kills} while holding");
    assert!(held_kills > 0 && u64::from(held_kills) < offsets);
}

#[test]
fn a_holder_killed_at_any_instruction_beside_a_contending_process_strands_nobody() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let control = control();
    warm_up();
    let per_iteration = steps_per_iteration(m, control);
    // Contended, an iteration takes the slow paths too (spins, WAITERS, sleeps, wakes):
    // offsets over three uncontended iterations, in steps of 2.
    let mut held_kills = 0;
    for offset in (0..3 * per_iteration).step_by(2) {
        control.reported.store(0, Ordering::SeqCst);
        control.stop.store(0, Ordering::SeqCst);
        let contender = fork_child(|| lock_loop(m, control, true));
        let child = fork_child(|| {
            stop_for_tracing(m);
            lock_loop(m, control, false)
        });
        wait_stopped(child);
        single_step(child, offset);
        let held = m.raw().holder() == Some(child as u32);
        held_kills += u32::from(held);
        kill(child);
        // The contender must get through: a wake lost with the child would hang it here.
        control.stop.store(1, Ordering::SeqCst);
        let status = reap(contender, &format!("contender at step {offset}"));
        assert!(
            exited_with(status, 0),
            "contender failed at step {offset}: {status:#x}"
        );
        let reported = control.reported.load(Ordering::SeqCst);
        check_after_death(m, held, reported, &format!("contended step {offset}"));
    }
    println!(
        "{} kills, {held_kills} while holding",
        (3 * per_iteration).div_ceil(2)
    );
}

fn kills() -> u32 {
    std::env::var("FUTEXKIT_TEST_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// A small pseudo-random sequence (xorshift), seeded from the clock: which point a child is
/// stopped at differs run to run.
struct Random(u64);

impl Random {
    fn new() -> Random {
        let seed = Instant::now().elapsed().as_nanos() as u64
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
        println!("seed {seed:#x}");
        Random(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn holders_stopped_and_killed_at_random_points_are_reported_exactly_once() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let control = control();
    warm_up();
    let mut random = Random::new();
    let mut held_kills = 0;
    let runs = kills();
    for run in 0..runs {
        control.reported.store(0, Ordering::SeqCst);
        control.stop.store(0, Ordering::SeqCst);
        control.iterations.store(0, Ordering::SeqCst);
        // Half the runs with a contending process, half alone.
        let contender = (run % 2 == 0).then(|| fork_child(|| lock_loop(m, control, true)));
        let child = fork_child(|| lock_loop(m, control, false));
        // Let it run a while (it may not have started yet), then stop it where it is.
        let wait = random.below(2_000);
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(wait) {
            std::hint::spin_loop();
        }
        // SAFETY: our own child.
        unsafe { libc::kill(child, libc::SIGSTOP) };
        wait_stopped(child);
        let held = m.raw().holder() == Some(child as u32);
        held_kills += u32::from(held);
        kill(child);
        control.stop.store(1, Ordering::SeqCst);
        let reported = match contender {
            Some(contender) => {
                let status = reap(contender, &format!("contender of run {run}"));
                assert!(
                    exited_with(status, 0),
                    "contender failed in run {run}: {status:#x}"
                );
                control.reported.load(Ordering::SeqCst)
            }
            None => 0,
        };
        check_after_death(m, held, reported, &format!("random run {run}"));
    }
    println!("{runs} kills at random points, {held_kills} while holding");
}

#[test]
fn sleepers_killed_in_lock_strand_none_of_the_others() {
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let control = control();
    warm_up();
    let mut random = Random::new();
    const SLEEPERS: usize = 6;
    for round in 0..20 {
        control.ready.store(0, Ordering::SeqCst);
        let guard = m.lock().unwrap();
        // Forked one at a time, each asleep before the next: they sleep in this order, which is
        // the order the kernel wakes them in.
        let children: Vec<_> = (0..SLEEPERS)
            .map(|_| {
                let child = fork_child(|| {
                    control.ready.fetch_add(1, Ordering::SeqCst);
                    let mut guard = match m.try_lock_for(HANG) {
                        Ok(guard) => guard,
                        // A sleeper killed after it took the lock: repair and go on.
                        Err(LockError::OwnerDied(mut guard)) => {
                            guard.mark_consistent();
                            guard
                        }
                        Err(_) => return 3,
                    };
                    guard.update(|n| *n += 1);
                    0
                });
                futexkit_support::blocked::wait_until_process_blocked(child as u32);
                child
            })
            .collect();
        // Kill some while they sleep: the first sleeper (whom the unlock would wake) in even
        // rounds, others at random; in odd rounds, the first survivor just after the unlock,
        // which is the one woken (maybe not yet holding the lock, maybe holding it).
        let mut killed = vec![false; SLEEPERS];
        killed[0] = round % 2 == 0;
        for slot in killed.iter_mut().skip(1) {
            *slot = random.below(3) == 0;
        }
        let killed_asleep = killed.clone();
        for (i, &child) in children.iter().enumerate() {
            if killed[i] {
                kill(child);
            }
        }
        let before = guard.get();
        drop(guard);
        if round % 2 == 1 {
            if let Some(i) = (0..SLEEPERS).find(|&i| !killed[i]) {
                // SAFETY: our own child.
                unsafe { libc::kill(children[i], libc::SIGKILL) };
                killed[i] = true;
            }
        }
        let mut finished = 0;
        for (i, &child) in children.iter().enumerate() {
            if killed_asleep[i] {
                continue; // reaped by `kill`
            }
            let status = reap(child, &format!("sleeper {i} of round {round}"));
            if !killed[i] {
                assert!(
                    exited_with(status, 0),
                    "sleeper {i} failed in round {round}: {status:#x}"
                );
                finished += 1;
            } else if exited_with(status, 0) {
                finished += 1; // killed too late: it had finished
            }
        }
        // Those killed after taking the lock left a death: repair it. Every one that finished
        // added 1.
        let mut guard = match m.try_lock_for(HANG) {
            Ok(guard) => guard,
            Err(LockError::OwnerDied(mut guard)) => {
                guard.mark_consistent();
                guard
            }
            Err(other) => panic!("round {round}: {other}"),
        };
        let after = guard.get();
        assert!(
            after >= before + finished,
            "round {round}: {before} + {finished} > {after}"
        );
        guard.set(after);
    }
}

#[test]
fn condvar_waiters_killed_asleep_cost_the_others_nothing() {
    let region = Region::builder()
        .mutex("m", 0u64)
        .condvar("cv")
        .build()
        .unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let cv = region.condvar("cv").unwrap();
    warm_up();
    const WAITERS: usize = 6;
    for round in 0..10u64 {
        let children: Vec<_> = (0..WAITERS)
            .map(|_| {
                fork_child(|| {
                    let Ok(mut guard) = m.lock() else { return 3 };
                    while guard.get() <= round {
                        guard = match cv.wait_timeout(guard, HANG) {
                            Ok((guard, _)) => guard,
                            // A waiter killed while it held the mutex at a recheck (a spurious
                            // wakeup every 100 ms): nothing to repair.
                            Err(LockError::OwnerDied((mut guard, _))) => {
                                guard.mark_consistent();
                                guard
                            }
                            Err(_) => return 4,
                        };
                    }
                    0
                })
            })
            .collect();
        for &child in &children {
            futexkit_support::blocked::wait_until_process_blocked(child as u32);
        }
        for &child in children.iter().step_by(2) {
            kill(child);
        }
        // A waiter may have been killed holding the mutex, at a recheck: nothing to repair.
        let mut guard = match m.lock() {
            Ok(guard) => guard,
            Err(LockError::OwnerDied(mut guard)) => {
                guard.mark_consistent();
                guard
            }
            Err(other) => panic!("round {round}: {other}"),
        };
        guard.set(round + 1);
        drop(guard);
        // One notify_one per survivor, then their exits: none may miss its wake-up because a
        // dead waiter had been counted.
        for _ in 0..WAITERS / 2 {
            cv.notify_one();
        }
        for &child in children.iter().skip(1).step_by(2) {
            let status = reap(child, &format!("condvar waiter in round {round}"));
            assert!(
                exited_with(status, 0),
                "condvar waiter, round {round}: {status:#x}"
            );
        }
    }
}

#[test]
fn a_barrier_party_killed_breaks_the_barrier_for_the_others() {
    let control = control();
    warm_up();
    let mut random = Random::new();
    for round in 0..10 {
        let region = Region::builder().barrier("b", 4).build().unwrap();
        let b = region.barrier("b").unwrap();
        control.ready.store(0, Ordering::SeqCst);
        let children: Vec<_> = (0..4)
            .map(|_| {
                fork_child(|| {
                    let Ok(me) = b.join() else { return 2 };
                    control.ready.fetch_add(1, Ordering::SeqCst);
                    // Rounds until the barrier breaks.
                    loop {
                        match me.wait_timeout(HANG) {
                            Ok(_) => {}
                            Err(BarrierError::Broken) => return 0,
                            Err(_) => return 4,
                        }
                    }
                })
            })
            .collect();
        let start = Instant::now();
        while control.ready.load(Ordering::SeqCst) < 4 {
            assert!(start.elapsed() < HANG, "parties never joined");
            std::thread::yield_now();
        }
        let victim = random.below(4) as usize;
        std::thread::sleep(Duration::from_micros(random.below(3_000)));
        kill(children[victim]);
        for (i, &child) in children.iter().enumerate() {
            if i != victim {
                let status = reap(child, &format!("party {i} of round {round}"));
                assert!(
                    exited_with(status, 0),
                    "party {i}, round {round}: {status:#x}"
                );
            }
        }
        assert!(b.is_broken());
    }
}

#[test]
fn rwlock_readers_and_writers_killed_holding_it_are_handled() {
    let region = Region::builder().rwlock("v", 0u64).build().unwrap();
    let v = region.rwlock::<u64>("v").unwrap();
    let control = control();
    warm_up();
    drop(v.read());
    let mut random = Random::new();
    for run in 0..100 {
        control.stop.store(0, Ordering::SeqCst);
        let writer = run % 2 == 0;
        let child = fork_child(|| loop {
            if writer {
                match v.write() {
                    Ok(mut guard) => guard.update(|n| *n += 1),
                    Err(LockError::OwnerDied(mut guard)) => guard.mark_consistent(),
                    Err(_) => return 3,
                }
            } else {
                match v.read() {
                    Ok(_) | Err(LockError::OwnerDied(_)) => {}
                    Err(_) => return 3,
                }
            }
        });
        std::thread::sleep(Duration::from_micros(random.below(2_000)));
        // SAFETY: our own child.
        unsafe { libc::kill(child, libc::SIGSTOP) };
        wait_stopped(child);
        let write_held = v.raw().is_write_locked();
        kill(child);
        // A dead reader leaves nothing behind; a dead writer is reported, once, to the next
        // writer (readers before it are told too).
        match v.try_write_for(HANG) {
            Ok(_) => assert!(
                !write_held || !writer,
                "run {run}: a writer's death went unreported"
            ),
            Err(LockError::OwnerDied(mut guard)) => {
                assert!(
                    writer && write_held,
                    "run {run}: a death reported that did not happen"
                );
                guard.mark_consistent();
            }
            Err(other) => panic!("run {run}: {other}"),
        }
        assert!(v.try_read().is_ok(), "run {run}: readers not let back in");
    }
}

#[test]
fn glibc_robust_mutexes_stay_robust_beside_futexkits_in_one_thread() {
    // A process-shared robust pthread mutex and a futexkit one, both held by a child that also
    // locks and unlocks a private robust pthread mutex around them (glibc's list operations
    // next to futexkit's anchors), then is killed: both deaths are reported.
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    warm_up();
    let shared = glibc_robust_mutex();
    let shared_addr = shared as usize;
    let child = fork_child(move || {
        let shared = shared_addr as *mut libc::pthread_mutex_t;
        // SAFETY: pthread calls on mutexes initialized above (the private one here).
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = core::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
            let mut private: libc::pthread_mutex_t = core::mem::zeroed();
            libc::pthread_mutex_init(&mut private, &attr);
            libc::pthread_mutex_lock(&mut private);
            libc::pthread_mutex_lock(shared);
            let guard = m.lock();
            libc::pthread_mutex_unlock(&mut private);
            libc::pthread_mutex_lock(&mut private);
            std::mem::forget(guard);
            libc::raise(libc::SIGKILL);
        }
        0
    });
    let status = reap(child, "glibc beside futexkit");
    assert!(libc::WIFSIGNALED(status));
    // SAFETY: the mutex initialized above, in our mapping.
    assert_eq!(
        unsafe { libc::pthread_mutex_lock(shared) },
        libc::EOWNERDEAD
    );
    let mut guard = m
        .lock()
        .err()
        .and_then(LockError::into_guard)
        .expect("OwnerDied");
    guard.mark_consistent();
}

#[test]
fn contention_beyond_the_cpus_loses_no_wakeup() {
    // Four contending processes per CPU, and a busy thread on every CPU: releases, wakes and
    // takes are preempted at every point, which is where a wakeup gets lost if one can be (a
    // release that cleared WAITERS after a wake that found nobody hung here within seconds).
    let control = control();
    warm_up();
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let busy_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..cpus)
        .map(|_| {
            let done = std::sync::Arc::clone(&busy_done);
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for round in 0..50 {
        let region = Region::builder().mutex("m", 0u64).build().unwrap();
        let m = region.mutex::<u64>("m").unwrap();
        control.stop.store(0, Ordering::SeqCst);
        let children: Vec<_> = (0..4 * cpus)
            .map(|_| {
                fork_child(|| {
                    while control.stop.load(Ordering::Relaxed) == 0 {
                        match m.lock() {
                            Ok(mut guard) => guard.update(|n| *n += 1),
                            Err(_) => return 3,
                        }
                    }
                    0
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(30));
        control.stop.store(1, Ordering::SeqCst);
        for child in children {
            let status = reap(child, &format!("contender in round {round}"));
            assert!(exited_with(status, 0), "round {round}: {status:#x}");
        }
    }
    busy_done.store(true, Ordering::Relaxed);
    for thread in busy {
        thread.join().unwrap();
    }
}

/// Makes this (child) process traced by its parent and stops it, holding whatever it holds.
fn trace_me() {
    // SAFETY: PTRACE_TRACEME takes no pointers; raise stops this process for the parent.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0), 0);
        libc::raise(libc::SIGSTOP);
    }
}

/// Steps a traced child until it exits: how many instructions it ran from its stop.
fn steps_to_exit(pid: libc::pid_t) -> u64 {
    let mut steps = 0;
    loop {
        // SAFETY: our traced, stopped child; no pointers.
        assert_eq!(
            unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0, 0) },
            0
        );
        let mut status = 0;
        // SAFETY: our child; a valid out-pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return steps;
        }
        steps += 1;
        assert!(steps < 1_000_000, "the child never exited");
    }
}

/// Kills `make_child()`'s child after each instruction from its stop to its exit, with
/// `sleepers` processes asleep in `sleep()` (each exits 0 when its call returns as it may);
/// every sleeper must come back.
fn kill_at_every_step(
    what: &str,
    sleepers: usize,
    mut make_child: impl FnMut() -> (libc::pid_t, Box<dyn Fn() -> i32>),
) {
    let (probe, _) = make_child();
    wait_stopped(probe);
    let steps = steps_to_exit(probe);
    for offset in 0..steps {
        let (child, sleep) = make_child();
        wait_stopped(child);
        let sleepers: Vec<_> = (0..sleepers)
            .map(|_| {
                let sleeper = fork_child(&*sleep);
                futexkit_support::blocked::wait_until_process_blocked(sleeper as u32);
                sleeper
            })
            .collect();
        single_step(child, offset);
        kill(child);
        for sleeper in sleepers {
            let status = reap(
                sleeper,
                &format!("{what}: a sleeper, step {offset} of {steps}"),
            );
            assert!(exited_with(status, 0), "{what}, step {offset}: {status:#x}");
        }
    }
    println!("{what}: {steps} kills, one after each step");
}

#[test]
fn a_release_as_not_recoverable_killed_at_every_step_strands_no_sleeper() {
    warm_up();
    kill_at_every_step("not-recoverable release", 2, || {
        let region = Box::leak(Box::new(
            Region::builder().mutex("m", 0u64).build().unwrap(),
        ));
        let m = region.mutex::<u64>("m").unwrap();
        // A holder that dies: the lock is OWNER_DIED.
        let dead = fork_child(|| {
            std::mem::forget(m.lock());
            0
        });
        reap(dead, "the first holder");
        // The next one takes it, and is stepped through dropping it unrepaired.
        let child = fork_child(|| {
            let Err(LockError::OwnerDied(guard)) = m.lock() else {
                return 3;
            };
            trace_me();
            drop(guard);
            0
        });
        let sleep = Box::new(|| match m.try_lock_for(HANG) {
            Err(LockError::NotRecoverable | LockError::OwnerDied(_)) => 0,
            _ => 3,
        });
        (child, sleep as Box<dyn Fn() -> i32>)
    });
}

#[test]
fn a_writer_killed_at_every_step_of_its_unlock_strands_no_reader() {
    warm_up();
    kill_at_every_step("write unlock", 3, || {
        let region = Box::leak(Box::new(
            Region::builder().rwlock("v", 0u64).build().unwrap(),
        ));
        let v = region.rwlock::<u64>("v").unwrap();
        let child = fork_child(|| {
            let Ok(guard) = v.write() else { return 3 };
            trace_me();
            drop(guard);
            0
        });
        let sleep = Box::new(|| match v.try_read_for(HANG) {
            Ok(_) | Err(LockError::OwnerDied(_)) => 0,
            _ => 3,
        });
        (child, sleep as Box<dyn Fn() -> i32>)
    });
}

/// A process-shared robust pthread mutex in a fresh shared page.
fn glibc_robust_mutex() -> *mut libc::pthread_mutex_t {
    let mutex = futexkit_support::shared::shared_page().cast::<libc::pthread_mutex_t>();
    // SAFETY: a fresh page, which nothing uses yet.
    unsafe { futexkit_support::shared::init_robust_pthread_mutex(mutex) };
    mutex
}

/// Whether the glibc mutex reports its holder's death (rather than staying held).
fn glibc_reports_death(mutex: *mut libc::pthread_mutex_t) -> bool {
    let mut deadline: libc::timespec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; then a timed lock of the mutex made above.
    unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut deadline);
        deadline.tv_sec += 10;
        libc::pthread_mutex_timedlock(mutex, &deadline) == libc::EOWNERDEAD
    }
}

#[test]
fn a_word_zeroed_under_its_holder_is_not_linked_twice() {
    // A peer writes 0 into a word this thread holds, and the thread locks it again: its robust
    // list must not become a cycle, which would keep the kernel's walk from glibc's mutex.
    warm_up();
    let glibc = glibc_robust_mutex();
    let glibc_addr = glibc as usize;
    let region = Region::builder().mutex("m", 0u64).build().unwrap();
    let m = region.mutex::<u64>("m").unwrap();
    let child = fork_child(|| {
        // SAFETY: the mutex made above, in a shared page.
        unsafe { libc::pthread_mutex_lock(glibc_addr as *mut libc::pthread_mutex_t) };
        std::mem::forget(m.lock());
        // The peer's write, into the lock word (the first 4 bytes of the raw mutex).
        // SAFETY: the word is an atomic in the mapping, which a peer may write.
        unsafe {
            (*(m.raw() as *const _ as *const std::sync::atomic::AtomicU32))
                .store(0, Ordering::SeqCst)
        };
        std::mem::forget(m.lock());
        // SAFETY: dies holding both.
        unsafe { libc::raise(libc::SIGKILL) };
        0
    });
    reap(child, "the child");
    assert!(
        glibc_reports_death(glibc),
        "the kernel's walk never reached glibc's mutex"
    );
}

#[test]
fn a_region_dropped_with_a_leaked_guard_keeps_the_robust_list_whole() {
    // A guard leaked, then its region dropped: the region must stay mapped, or the kernel's
    // walk of the thread's list would end at the unmapped entry, before glibc's mutex.
    warm_up();
    let glibc = glibc_robust_mutex();
    let glibc_addr = glibc as usize;
    let child = fork_child(move || {
        // SAFETY: the mutex made above, in a shared page.
        unsafe { libc::pthread_mutex_lock(glibc_addr as *mut libc::pthread_mutex_t) };
        let region = Region::builder().mutex("m", 0u64).build().unwrap();
        std::mem::forget(region.mutex::<u64>("m").unwrap().lock());
        drop(region);
        // SAFETY: dies holding both.
        unsafe { libc::raise(libc::SIGKILL) };
        0
    });
    reap(child, "the child");
    assert!(
        glibc_reports_death(glibc),
        "the kernel's walk never reached glibc's mutex"
    );
}

/// A semaphore permit's holder killed: its permit comes back, to a new acquirer at once and to
/// a thread already asleep in `acquire` (within its slice), and the next holder of that slot
/// is told; a permit given back by a live release is not reported as a death; a waiter killed
/// asleep costs the others nothing.
#[test]
fn semaphore_permits_of_killed_holders_come_back() {
    let control = control();
    warm_up();
    let region = Region::builder().semaphore("s", 2).build().unwrap();
    let s = region.semaphore("s").unwrap();
    for round in 0..5 {
        control.ready.store(0, Ordering::SeqCst);
        control.stop.store(0, Ordering::SeqCst);
        // Two holders: one is killed holding its permit, one gives it back when told.
        let hold = |release_when_told: bool| {
            fork_child(move || {
                let Ok(permit) = s.acquire() else { return 2 };
                control.ready.fetch_add(1, Ordering::SeqCst);
                while control.stop.load(Ordering::SeqCst) == 0 || !release_when_told {
                    std::thread::yield_now();
                }
                drop(permit);
                0
            })
        };
        let victim = hold(false);
        let releaser = hold(true);
        let start = Instant::now();
        while control.ready.load(Ordering::SeqCst) < 2 {
            assert!(start.elapsed() < HANG, "holders never took their permits");
            std::thread::yield_now();
        }
        assert!(matches!(s.try_acquire(), Err(SemaphoreError::WouldBlock)));
        // A waiter from another process, killed asleep: it may stay counted as a sleeper.
        let sleeper = fork_child(|| match s.acquire() {
            Ok(_) => 0,
            Err(_) => 2,
        });
        futexkit_support::blocked::wait_until_process_blocked(sleeper as u32);
        kill(sleeper);
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            let asleep = scope.spawn(move || {
                tx.send(futexkit_support::blocked::gettid()).unwrap();
                let permit = s.try_acquire_for(HANG).expect("the dead holder's permit");
                assert!(permit.previous_holder_died(), "round {round}");
            });
            futexkit_support::blocked::wait_until_blocked(rx.recv().unwrap());
            kill(victim);
            asleep.join().unwrap();
        });
        // The permit of the dead holder is free again, and its death was reported once.
        let again = s.try_acquire().expect("a free permit");
        assert!(
            !again.previous_holder_died(),
            "reported twice, round {round}"
        );
        control.stop.store(1, Ordering::SeqCst);
        let released = s.try_acquire_for(HANG).expect("the live holder's permit");
        assert!(!released.previous_holder_died(), "round {round}");
        assert!(exited_with(reap(releaser, "releaser"), 0));
        drop((again, released));
        assert_eq!(s.available_permits(), 2);
    }
}

/// A thread that exits holding a permit (its guard forgotten) gives it back too.
#[test]
fn a_semaphore_permit_forgotten_by_an_exiting_thread_comes_back() {
    let region = Region::builder().semaphore("s", 1).build().unwrap();
    let s = region.semaphore("s").unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| std::mem::forget(s.acquire().unwrap()));
    });
    let permit = s
        .try_acquire_for(HANG)
        .expect("given back at the thread's exit");
    assert!(permit.previous_holder_died());
}

/// A latch counted down by three processes opens for a waiter in a fourth (this one), and an
/// event set in one process releases waiters in others.
#[test]
fn latches_and_events_work_across_processes() {
    warm_up();
    let region = Region::builder()
        .latch("done", 3)
        .event("go", false)
        .build()
        .unwrap();
    let (done, go) = (region.latch("done").unwrap(), region.event("go").unwrap());
    let children: Vec<_> = (0..3)
        .map(|_| {
            fork_child(|| {
                if !go.wait_timeout(HANG) {
                    return 2;
                }
                match done.count_down() {
                    Ok(()) => 0,
                    Err(_) => 3,
                }
            })
        })
        .collect();
    assert!(
        !done.wait_timeout(Duration::from_millis(5)),
        "nobody counted down yet"
    );
    go.set();
    assert!(done.wait_timeout(HANG), "three count-downs open it");
    assert_eq!(done.count(), 0);
    assert_eq!(done.count_down(), Err(LatchOpen));
    for child in children {
        assert!(exited_with(reap(child, "count-down"), 0));
    }
}

/// A peer that scribbles a latch's or an event's word can open or close it, but a timed wait
/// still returns by its deadline and a count-down never panics.
#[test]
fn scribbled_latches_and_events_never_hang_a_timed_wait() {
    let region = Region::builder()
        .latch("l", 1)
        .event("e", false)
        .build()
        .unwrap();
    let (latch, event) = (region.latch("l").unwrap(), region.event("e").unwrap());
    // SAFETY: each object is one futex word (`#[repr(C)]` over a repr(transparent) atomic);
    // writing it atomically is what a scribbling peer can do.
    let (latch_word, event_word) = unsafe {
        (
            &*(latch as *const SharedLatch).cast::<AtomicU32>(),
            &*(event as *const SharedEvent).cast::<AtomicU32>(),
        )
    };
    let mut random = Random::new();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        // The waits run in their own thread, so that a hang fails here instead of stalling.
        scope.spawn(move || {
            for _ in 0..20 {
                let _ = latch.wait_timeout(Duration::from_millis(2));
                let _ = event.wait_timeout(Duration::from_millis(2));
                tx.send(()).unwrap();
            }
        });
        for round in 0..20 {
            let junk = random.below(u64::from(u32::MAX)) as u32;
            latch_word.store(junk, Ordering::SeqCst);
            event_word.store(junk, Ordering::SeqCst);
            rx.recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("a timed wait hung on {junk:#x}, round {round}"));
        }
    });
    // A count-down on a zeroed count reports the open latch instead of panicking.
    latch_word.store(0, Ordering::SeqCst);
    assert_eq!(latch.count_down(), Err(LatchOpen));
}
