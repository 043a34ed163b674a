//! The deadlock checks (feature `deadlock`) and the contention profile (feature `profile`) under
//! a global allocator built on a futexkit lock: both allocate, and their allocations take that
//! lock, which may be the very lock they are checking or sampling.
#![cfg(all(
    any(feature = "deadlock", feature = "profile"),
    not(any(futexkit_loom, futexkit_shuttle))
))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use futexkit::RawMutex;

struct LockedAllocator(RawMutex);

// SAFETY: every call is System's, under the lock.
unsafe impl GlobalAlloc for LockedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.0.lock();
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        // SAFETY: locked just above.
        unsafe { self.0.unlock() };
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.0.lock();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        // SAFETY: locked just above.
        unsafe { self.0.unlock() };
    }
}

#[global_allocator]
static ALLOCATOR: LockedAllocator = LockedAllocator(RawMutex::new());

/// The tests of this file one at a time: one of them holds the allocator's lock and switches
/// the deadlock checks. A std Mutex, as it allocates nothing.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on a thread of its own; aborts the process if it has not returned within a minute
/// (a hang in the allocator leaves a panic unable even to format its message).
fn within_a_minute(f: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        done_tx.send(()).unwrap();
    });
    if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
        std::process::abort();
    }
}

#[test]
fn checks_and_allocations_beside_a_watchdog_never_hang() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    #[cfg(feature = "profile")]
    futexkit::profile::set_rate(1);
    within_a_minute(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    #[cfg(feature = "deadlock")]
                    assert!(futexkit::deadlock::check_deadlock().is_empty());
                    #[cfg(feature = "profile")]
                    drop(futexkit::profile::snapshot());
                }
            })
        };
        let workers: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(|| {
                    let locks: Vec<_> = (0..8).map(|_| futexkit::Mutex::new(Vec::new())).collect();
                    for i in 0..200_000usize {
                        let mut guard = locks[i % 8].lock().unwrap();
                        guard.push(i);
                        if guard.len() > 64 {
                            guard.clear();
                            guard.shrink_to_fit();
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        watchdog.join().unwrap();
    });
}

/// Whether the thread `tid` of this process sleeps (state `S` in its `stat`), read without
/// allocating: the allocator's lock may be held.
#[cfg(feature = "deadlock")]
fn sleeps(tid: libc::pid_t) -> bool {
    let mut path = *b"/proc/self/task/\0\0\0\0\0\0\0\0\0\0\0\0/stat\0";
    let mut digits = [0u8; 12];
    let (mut n, mut len) = (tid, 0);
    while n > 0 || len == 0 {
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
    }
    let start = b"/proc/self/task/".len();
    for i in 0..len {
        path[start + i] = digits[len - 1 - i];
    }
    path[start + len..start + len + 6].copy_from_slice(b"/stat\0");
    let mut stat = [0u8; 512];
    // SAFETY: `path` is NUL-terminated; `stat` is writable for its length.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY);
        assert!(fd >= 0);
        let read = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        read
    };
    let stat = &stat[..usize::try_from(read).unwrap()];
    // The state follows the command name, which ends with the last ')'.
    let after_name = stat.iter().rposition(|&b| b == b')').unwrap();
    stat[after_name + 2] == b'S'
}

/// The checks turned on while a thread waits for the allocator's lock, its acquisition begun
/// with them off: nothing after that acquisition (its end, its release, the holder's release)
/// may make the thread's record, as making one allocates while the thread holds the
/// allocator's lock.
#[cfg(feature = "deadlock")]
#[test]
fn checks_turned_on_during_an_allocation_never_hang() {
    use std::sync::atomic::AtomicI32;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    futexkit::deadlock::set_enabled(false);
    within_a_minute(|| {
        // Threads meet on atomics alone: while the holder holds the allocator's lock, nothing
        // here may allocate.
        static HELD: AtomicBool = AtomicBool::new(false);
        static GO: AtomicBool = AtomicBool::new(false);
        static WAITER: AtomicI32 = AtomicI32::new(0);
        static RELEASE: AtomicBool = AtomicBool::new(false);
        let until = |flag: &AtomicBool| {
            while !flag.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        };
        // Both threads started (which allocates) before the holder takes the lock.
        let waiter = std::thread::spawn(move || {
            WAITER.store(
                // SAFETY: gettid has no preconditions.
                unsafe { libc::gettid() },
                Ordering::Release,
            );
            until(&GO);
            // Waits for the holder, the acquisition's checks begun while they were off.
            drop(std::hint::black_box(Box::new(1u64)));
        });
        let tid = loop {
            match WAITER.load(Ordering::Acquire) {
                0 => std::thread::yield_now(),
                tid => break tid,
            }
        };
        let holder = std::thread::spawn(move || {
            ALLOCATOR.0.lock();
            HELD.store(true, Ordering::Release);
            until(&RELEASE);
            // SAFETY: locked above by this thread.
            unsafe { ALLOCATOR.0.unlock() };
        });
        until(&HELD);
        GO.store(true, Ordering::Release);
        while !sleeps(tid) {
            std::thread::yield_now();
        }
        futexkit::deadlock::set_enabled(true);
        RELEASE.store(true, Ordering::Release);
        holder.join().unwrap();
        waiter.join().unwrap();
    });
}
