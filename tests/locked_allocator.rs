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

#[test]
fn checks_and_allocations_beside_a_watchdog_never_hang() {
    #[cfg(feature = "profile")]
    futexkit::profile::set_rate(1);
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
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
        done_tx.send(()).unwrap();
    });
    if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
        // The checks and the allocator hung: a panic could not even format its message, as
        // that allocates. Abort, which allocates nothing.
        std::process::abort();
    }
}
