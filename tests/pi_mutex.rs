//! `sync::PiMutex` and `raw::RawPiMutex`: std's Mutex semantics on the kernel's PI word, the
//! `Unsupported` answer, the thread-id cache across `fork`, and the priority inversion it
//! prevents (on one CPU, with `SCHED_FIFO` threads).
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::TryLockError;
use std::time::{Duration, Instant};

use futexkit::raw::{PiUnsupported, RawPiMutex};
use futexkit::sync::PiMutex;
use futexkit::Capability;
use futexkit_support::blocked::{gettid, wait_until_blocked};
use futexkit_support::pi::inversion;

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
    let payload = relock.unwrap_err();
    // The kernel's refusal panics with a literal; the `deadlock` feature's check, which comes
    // first, with a formatted message.
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or_default();
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

/// Runs the timed-lock test again with `FUTEXKIT_DISABLE=lock_pi2`: timed locks then take the
/// path of kernels before 5.14 (`FUTEX_LOCK_PI`, a realtime deadline), which a newer host
/// would otherwise never run.
#[test]
fn timed_locks_without_lock_pi2() {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "try_lock_and_timeouts_see_the_holder",
            "--test-threads=1",
        ])
        .env("FUTEXKIT_DISABLE", "lock_pi2")
        .status()
        .unwrap();
    assert!(status.success());
}

/// A fork child inherits its parent thread's cached id; it must use its own, or the kernel
/// would take the child's lock for the parent.
#[test]
fn a_fork_child_uses_its_own_thread_id() {
    // Twice: the first call may only register the fork handler; the second fills this
    // thread's cache, which the child inherits.
    let parent = futexkit::futex::current_tid();
    assert_eq!(futexkit::futex::current_tid(), parent);
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

/// The inversion on CPU 0 with `SCHED_FIFO` threads (`futexkit_support::pi::inversion`): with
/// std's Mutex the high-priority waiter gets the lock only after the medium thread's busy
/// spell; with `PiMutex` the holder inherits its priority and lets it in first. Skipped (with
/// a message) where real-time scheduling is refused or one CPU is usable.
#[test]
fn priority_inheritance_prevents_the_inversion() {
    let Some(pi) = pi_mutex(()) else { return };
    let (busy, critical) = (Duration::from_millis(200), Duration::from_millis(5));
    let Some(with_std) = inversion(&std::sync::Mutex::new(()), busy, critical) else {
        eprintln!("SCHED_FIFO refused or one CPU: the inversion scenario was not run");
        return;
    };
    assert!(
        with_std.medium_finished_first,
        "with std's Mutex the high-priority thread waits for the medium one"
    );
    let with_pi = inversion(&pi, busy, critical).unwrap();
    assert!(
        !with_pi.medium_finished_first,
        "with PiMutex the holder runs at the waiter's priority and lets it in first"
    );
}
