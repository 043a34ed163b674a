//! `sync::PiMutex` and `raw::RawPiMutex`: std's Mutex semantics on the kernel's PI word, the
//! `Unsupported` answer, the thread-id cache across `fork`, and the priority inversion it
//! prevents (on one CPU, with `SCHED_FIFO` threads).
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::TryLockError;
use std::time::{Duration, Instant};

use futexkit::raw::{PiUnsupported, RawPiMutex};
use futexkit::sync::{Event, PiMutex};
use futexkit::Capability;
use futexkit_support::blocked::{gettid, wait_until_blocked};

/// A PiMutex, or `None` (after checking the refusal) where the kernel has no PI futexes.
fn pi_mutex<T>(value: T) -> Option<PiMutex<T>> {
    if futexkit::capabilities().has(Capability::Pi) {
        Some(PiMutex::new(value).expect("PI futexes were probed present"))
    } else {
        assert_eq!(PiMutex::new(value).err(), Some(PiUnsupported));
        eprintln!("this kernel has no PI futexes: PiMutex::new refused, as it should");
        None
    }
}

#[test]
fn counts_under_contention() {
    let Some(counter) = pi_mutex(0u64) else {
        return;
    };
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..5_000 {
                    *counter.lock().unwrap() += 1;
                }
            });
        }
    });
    assert_eq!(counter.into_inner().unwrap(), 40_000);
}

#[test]
fn try_lock_and_timeouts_see_the_holder() {
    let Some(lock) = pi_mutex(5) else { return };
    let held = lock.lock().unwrap();
    assert!(
        matches!(lock.try_lock(), Err(TryLockError::WouldBlock)),
        "the holder's own try_lock"
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(lock.try_lock(), Err(TryLockError::WouldBlock)));
            let timed = lock.try_lock_for(Duration::from_millis(20));
            assert!(matches!(timed, Err(TryLockError::WouldBlock)));
            let until = lock.try_lock_until(Instant::now() + Duration::from_millis(20));
            assert!(matches!(until, Err(TryLockError::WouldBlock)));
        });
    });
    drop(held);
    // A timed lock that the holder's unlock lets in (through the kernel when it queued).
    let held = lock.lock().unwrap();
    let waiter_tid = AtomicU32::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            waiter_tid.store(gettid(), Ordering::SeqCst);
            let got = lock.try_lock_for(Duration::from_secs(60)).unwrap();
            assert_eq!(*got, 6);
        });
        while waiter_tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        wait_until_blocked(waiter_tid.load(Ordering::SeqCst));
        let mut held = held;
        *held += 1;
    });
    assert!(lock.try_lock().is_ok());
}

#[test]
fn relocking_panics_and_poisons() {
    let Some(lock) = pi_mutex(Vec::<u32>::new()) else {
        return;
    };
    let relock = catch_unwind(AssertUnwindSafe(|| {
        let _held = lock.lock().unwrap();
        let _again = lock.lock();
    }));
    let message = relock.unwrap_err();
    let message = message.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(message.contains("already holds"), "{message}");
    // The guard dropped while unwinding: unlocked, and poisoned as std's would be.
    assert!(lock.is_poisoned());
    let mut guard = lock.lock().unwrap_err().into_inner();
    guard.push(1);
    drop(guard);
    lock.clear_poison();
    assert_eq!(lock.lock().unwrap().len(), 1);
    assert_eq!(
        format!("{lock:?}"),
        "PiMutex { data: [1], poisoned: false, .. }"
    );
}

#[test]
fn raw_lock_unlocks_to_a_queued_waiter() {
    if !futexkit::capabilities().has(Capability::Pi) {
        assert_eq!(RawPiMutex::new().err(), Some(PiUnsupported));
        return;
    }
    let lock = RawPiMutex::new().unwrap();
    let inside = AtomicU32::new(0);
    lock.lock();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..3 {
            let (tx, lock, inside) = (tx.clone(), &lock, &inside);
            s.spawn(move || {
                tx.send(gettid()).unwrap();
                lock.lock();
                assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0);
                inside.fetch_sub(1, Ordering::Relaxed);
                // SAFETY: this thread holds the lock.
                unsafe { lock.unlock() };
            });
        }
        // All three queue in the kernel, so the unlock goes through FUTEX_UNLOCK_PI.
        for tid in rx.iter().take(3) {
            wait_until_blocked(tid);
        }
        assert!(lock.is_locked());
        // SAFETY: this thread holds the lock.
        unsafe { lock.unlock() };
    });
    assert!(!lock.is_locked());
}

/// Runs this test binary again with `FUTEXKIT_DISABLE=pi`: both constructors refuse.
#[test]
fn disabled_pi_is_refused() {
    if std::env::var_os("FUTEXKIT_TEST_PI_DISABLED").is_some() {
        assert_eq!(PiMutex::new(()).err(), Some(PiUnsupported));
        assert_eq!(RawPiMutex::new().err(), Some(PiUnsupported));
        assert!(PiUnsupported.to_string().contains("CONFIG_FUTEX_PI"));
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "disabled_pi_is_refused", "--test-threads=1"])
        .env("FUTEXKIT_DISABLE", "pi")
        .env("FUTEXKIT_TEST_PI_DISABLED", "1")
        .status()
        .unwrap();
    assert!(status.success());
}

/// A fork child inherits its parent thread's cached id; it must use its own, or the kernel
/// would take the child's lock for the parent.
#[test]
fn a_fork_child_uses_its_own_thread_id() {
    let parent = futexkit::futex::current_tid();
    // SAFETY: the child calls only async-signal-safe code (an atomic, a const thread-local,
    // raw system calls) before `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let cached = futexkit::futex::current_tid();
        // SAFETY: gettid has no arguments.
        let real = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        let code = if cached == real && cached != parent {
            0
        } else {
            1
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    assert_eq!(futexkit::futex::current_tid(), parent);
}

/// The lock under test in [`inversion`]: std's or futexkit's PI mutex.
trait Lock: Sync {
    fn hold(&self, body: &mut dyn FnMut());
}

impl Lock for std::sync::Mutex<()> {
    fn hold(&self, body: &mut dyn FnMut()) {
        let _guard = self.lock().unwrap();
        body();
    }
}

impl Lock for PiMutex<()> {
    fn hold(&self, body: &mut dyn FnMut()) {
        let _guard = self.lock().unwrap();
        body();
    }
}

/// Puts the calling thread on CPU 0 under `SCHED_FIFO` at `priority`; false where the system
/// refuses (no privilege).
fn real_time_on_cpu0(priority: i32) -> bool {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and the two calls take pointers to locals.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            return false;
        }
        let param = libc::sched_param {
            sched_priority: priority,
        };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
    }
}

/// The classic inversion on CPU 0: a low-priority thread holds `lock`; a high-priority thread
/// blocks on it; a medium-priority thread becomes runnable and busy for `busy`. Returns
/// whether the medium thread had finished when the high one got the lock, or `None` where
/// real-time scheduling is refused or only one CPU is usable (this thread, not real-time,
/// coordinates from another CPU).
fn inversion(lock: &dyn Lock, busy: Duration) -> Option<bool> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let held = Event::new(false);
    let release_holder = AtomicBool::new(false);
    let medium_parked = Event::new(false);
    let medium_go = Event::new(false);
    let medium_done = AtomicBool::new(false);
    let high_tid = AtomicU32::new(0);
    let refused = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        let low = s.spawn(|| {
            if !real_time_on_cpu0(10) {
                refused.store(true, Ordering::SeqCst);
                held.set();
                return;
            }
            lock.hold(&mut || {
                held.set();
                while !release_holder.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                // The critical section: a little work on CPU 0.
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(5) {
                    std::hint::spin_loop();
                }
            });
        });
        held.wait();
        if refused.load(Ordering::SeqCst) {
            low.join().unwrap();
            return None;
        }
        let medium = s.spawn(|| {
            assert!(real_time_on_cpu0(20));
            medium_parked.set();
            medium_go.wait();
            let start = Instant::now();
            while start.elapsed() < busy {
                std::hint::spin_loop();
            }
            medium_done.store(true, Ordering::SeqCst);
        });
        medium_parked.wait();
        let high = s.spawn(|| {
            assert!(real_time_on_cpu0(30));
            high_tid.store(futexkit::futex::current_tid(), Ordering::SeqCst);
            let mut medium_finished_first = false;
            lock.hold(&mut || medium_finished_first = medium_done.load(Ordering::SeqCst));
            medium_finished_first
        });
        // Wait until the high thread sleeps on the lock, then let the medium one loose and
        // the holder go on: CPU 0 now has the boosted (or not) holder and the medium thread.
        while high_tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        wait_until_blocked(high_tid.load(Ordering::SeqCst));
        medium_go.set();
        release_holder.store(true, Ordering::SeqCst);
        let outcome = high.join().unwrap();
        medium.join().unwrap();
        low.join().unwrap();
        Some(outcome)
    });
    if outcome.is_none() {
        eprintln!("SCHED_FIFO refused or one CPU: the inversion scenario was not run");
    }
    outcome
}

#[test]
fn priority_inheritance_prevents_the_inversion() {
    let Some(pi) = pi_mutex(()) else { return };
    let busy = Duration::from_millis(200);
    let Some(std_inverted) = inversion(&std::sync::Mutex::new(()), busy) else {
        return;
    };
    assert!(
        std_inverted,
        "with std's Mutex the high-priority thread waits for the medium one"
    );
    let pi_inverted = inversion(&pi, busy).unwrap();
    assert!(
        !pi_inverted,
        "with PiMutex the holder runs at the waiter's priority and lets it in first"
    );
}
