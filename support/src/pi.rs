//! Priority inversion on one CPU, for `tests/pi_mutex.rs` and `examples/pi_inversion.rs`: a
//! low-priority thread holds a lock, a high-priority thread blocks on it, and a medium-priority
//! thread becomes runnable and busy. With a priority-inheritance lock the holder runs at the
//! waiter's priority and lets it in first; with any other lock the medium thread keeps both
//! off the CPU. Also glibc's `PTHREAD_PRIO_INHERIT` mutex, to compare with.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futexkit::sync::{Event, PiMutex};

use crate::blocked::{gettid, wait_until_blocked};

/// A lock the scenario can hold: runs `body` with it held.
pub trait Lock: Sync {
    /// Takes the lock, runs `body`, releases it.
    fn hold(&self, body: &mut dyn FnMut());
}

impl Lock for std::sync::Mutex<()> {
    fn hold(&self, body: &mut dyn FnMut()) {
        let _guard = self.lock().unwrap();
        body();
    }
}

impl Lock for futexkit::sync::Mutex<()> {
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

/// glibc's mutex with `PTHREAD_PRIO_INHERIT`, private to the process, guarding a counter.
pub struct GlibcPiMutex {
    mutex: Box<UnsafeCell<libc::pthread_mutex_t>>,
    count: UnsafeCell<u64>,
}

// SAFETY: the counter is touched only under the pthread mutex, which is made for threads; the
// boxed mutex never moves.
unsafe impl Sync for GlibcPiMutex {}
// SAFETY: an unheld pthread mutex may move between threads with its box.
unsafe impl Send for GlibcPiMutex {}

impl GlibcPiMutex {
    /// A free PI mutex; panics if glibc refuses one (a kernel without PI futexes).
    pub fn new() -> GlibcPiMutex {
        // SAFETY: the attribute and the mutex are initialized in place before use; the mutex
        // lives in a box, so its address does not change.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            assert_eq!(libc::pthread_mutexattr_init(&mut attr), 0);
            assert_eq!(
                libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT),
                0
            );
            let mutex = Box::new(UnsafeCell::new(std::mem::zeroed()));
            assert_eq!(libc::pthread_mutex_init(mutex.get(), &attr), 0);
            libc::pthread_mutexattr_destroy(&mut attr);
            GlibcPiMutex {
                mutex,
                count: UnsafeCell::new(0),
            }
        }
    }

    /// Locks, adds 1 to the counter, unlocks.
    pub fn add_one(&self) {
        self.hold(&mut || {
            // SAFETY: the counter is touched only while the mutex is held (here).
            unsafe { *self.count.get() += 1 };
        });
    }
}

impl Default for GlibcPiMutex {
    fn default() -> GlibcPiMutex {
        GlibcPiMutex::new()
    }
}

impl Lock for GlibcPiMutex {
    fn hold(&self, body: &mut dyn FnMut()) {
        // SAFETY: an initialized mutex, locked and unlocked by this thread.
        unsafe { assert_eq!(libc::pthread_mutex_lock(self.mutex.get()), 0) };
        body();
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
    }
}

impl Drop for GlibcPiMutex {
    fn drop(&mut self) {
        // SAFETY: nobody holds it any more.
        unsafe { libc::pthread_mutex_destroy(self.mutex.get()) };
    }
}

/// Restricts the calling thread to `cpus`, returning the set it had; `None` where refused.
fn pin(cpus: &[usize]) -> Option<libc::cpu_set_t> {
    // SAFETY: zeroed cpu_set_t values are empty sets; the calls take pointers to locals.
    unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&before), &mut before) != 0 {
            return None;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        (libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0).then_some(before)
    }
}

/// Puts the calling thread on CPU 0 under `SCHED_FIFO` at `priority`; false where the system
/// refuses (no privilege).
pub fn real_time_on_cpu0(priority: i32) -> bool {
    if pin(&[0]).is_none() {
        return false;
    }
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param on this stack for the call.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// What one run of [`inversion`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Inversion {
    /// Whether the medium thread had finished its busy spell when the high one got the lock:
    /// the inversion happened.
    pub medium_finished_first: bool,
    /// How long the high thread waited once the holder could go on (its critical section
    /// left to run, and whatever kept the holder off the CPU).
    pub high_waited: Duration,
}

/// The inversion on CPU 0: a low-priority (`SCHED_FIFO` 10) thread holds `lock`; a
/// high-priority (30) thread blocks on it; then a medium-priority (20) thread wakes and spins
/// for `busy` while the holder finishes a `critical` section of spinning. `None` where
/// real-time scheduling is refused or only one CPU is usable (this thread, not real-time,
/// coordinates from another CPU).
pub fn inversion(lock: &dyn Lock, busy: Duration, critical: Duration) -> Option<Inversion> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    // The coordinating thread (this one, not real-time) keeps off CPU 0: the kernel lets a
    // runnable ordinary thread there take up to 5% of each second from the real-time ones
    // (its fair server, or RT throttling), which would stop the scenario for up to 50 ms.
    let before = pin(&[1]);
    let outcome = run_inversion(lock, busy, critical);
    if let Some(before) = before {
        // SAFETY: restores the set read above, a valid cpu_set_t.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&before), &before) };
    }
    outcome
}

fn run_inversion(lock: &dyn Lock, busy: Duration, critical: Duration) -> Option<Inversion> {
    let held = Event::new(false);
    let release_holder = AtomicBool::new(false);
    let medium_parked = Event::new(false);
    let medium_go = Event::new(false);
    let medium_done = AtomicBool::new(false);
    let high_tid = AtomicU32::new(0);
    let refused = AtomicBool::new(false);
    let spin_for = |time: Duration| {
        let start = Instant::now();
        while start.elapsed() < time {
            std::hint::spin_loop();
        }
    };
    std::thread::scope(|s| {
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
                spin_for(critical);
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
            spin_for(busy);
            medium_done.store(true, Ordering::SeqCst);
        });
        medium_parked.wait();
        let released_at = std::sync::OnceLock::new();
        let high = s.spawn(|| {
            assert!(real_time_on_cpu0(30));
            high_tid.store(gettid(), Ordering::SeqCst);
            let mut seen = None;
            lock.hold(&mut || seen = Some((medium_done.load(Ordering::SeqCst), Instant::now())));
            seen.unwrap()
        });
        // Once the high thread sleeps on the lock, let the medium one loose and the holder go
        // on: CPU 0 now has the holder (boosted or not) and the medium thread.
        while high_tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        wait_until_blocked(high_tid.load(Ordering::SeqCst));
        medium_go.set();
        released_at.get_or_init(Instant::now);
        release_holder.store(true, Ordering::SeqCst);
        let (medium_finished_first, got_lock) = high.join().unwrap();
        medium.join().unwrap();
        low.join().unwrap();
        Some(Inversion {
            medium_finished_first,
            high_waited: got_lock.saturating_duration_since(*released_at.get().unwrap()),
        })
    })
}
