//! Process-shared locks between processes: futexkit::shared against glibc's robust,
//! process-shared pthread mutex and condition variable (through libc), with futexkit's
//! in-process locks between threads as a reference. Each workload is written once per
//! implementation; processes are forked (the children run lock calls and atomics only, and
//! leave with `_exit`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futexkit::shared::{LockError, Region};

/// The implementations compared, in the order tables print them.
pub const IMPLS: [&str; 3] = ["futexkit shared", "pthread robust", "futexkit in-process"];

/// Control words and the pthread objects, in an anonymous shared mapping every forked child
/// inherits.
#[repr(C)]
struct Shared {
    mutex: libc::pthread_mutex_t,
    cond: libc::pthread_cond_t,
    value: u64,
    start: AtomicU32,
    stop: AtomicU32,
    ready: AtomicU32,
    counts: [AtomicU64; 64],
    stamp_ns: AtomicU64,
}

/// An anonymous shared mapping holding a [`Shared`], unmapped on drop.
struct Mapping(*mut Shared);

// SAFETY: the mapping is shared memory meant for concurrent use: its atomics are accessed
// atomically, and the pthread objects are process-shared ones, made for use from any thread of
// any process (by pointer, through pthread calls).
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps a zeroed `Shared` and initializes its pthread objects as process-shared (the mutex
    /// robust too).
    fn new() -> Mapping {
        let len = core::mem::size_of::<Shared>();
        // SAFETY: a fresh anonymous shared mapping, zeroed by the kernel, of `len` bytes; the
        // pthread objects in it are initialized by their init calls before use.
        unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let shared = p.cast::<Shared>();
            init_robust_pthread_mutex(&raw mut (*shared).mutex);
            let mut cattr: libc::pthread_condattr_t = core::mem::zeroed();
            libc::pthread_condattr_init(&mut cattr);
            libc::pthread_condattr_setpshared(&mut cattr, libc::PTHREAD_PROCESS_SHARED);
            assert_eq!(libc::pthread_cond_init(&mut (*shared).cond, &cattr), 0);
            Mapping(shared)
        }
    }

    fn get(&self) -> &Shared {
        // SAFETY: mapped and initialized in `new`, alive until drop; the atomics are accessed
        // atomically and the pthread objects only through pthread calls (by raw pointer).
        unsafe { &*self.0 }
    }

    fn mutex(&self) -> *mut libc::pthread_mutex_t {
        // SAFETY: a field of the live mapping; pthread calls take it by pointer.
        unsafe { &raw mut (*self.0).mutex }
    }

    fn cond(&self) -> *mut libc::pthread_cond_t {
        // SAFETY: as in `mutex`.
        unsafe { &raw mut (*self.0).cond }
    }

    fn value(&self) -> *mut u64 {
        // SAFETY: as in `mutex`; read and written only under the pthread mutex.
        unsafe { &raw mut (*self.0).value }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `new`; its children have exited.
        unsafe { libc::munmap(self.0.cast(), core::mem::size_of::<Shared>()) };
    }
}

/// A fresh page of memory shared with every child forked after this, zeroed; never unmapped
/// (the tests that use it hand its address to children and keep it for their whole run).
pub fn shared_page() -> *mut u8 {
    // SAFETY: a fresh anonymous shared mapping, chosen by the kernel, aliasing nothing.
    let page = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    page.cast()
}

/// Initializes a process-shared, robust pthread mutex at `mutex` (glibc's robust mutex, which
/// futexkit::shared is compared with and must coexist with).
///
/// # Safety
///
/// `mutex` must be valid for writes of a `pthread_mutex_t` that nothing uses yet.
pub unsafe fn init_robust_pthread_mutex(mutex: *mut libc::pthread_mutex_t) {
    // SAFETY: an attribute object on our stack, initialized before use; the caller vouches for
    // `mutex`.
    unsafe {
        let mut attr: libc::pthread_mutexattr_t = core::mem::zeroed();
        libc::pthread_mutexattr_init(&mut attr);
        libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
        libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
        assert_eq!(libc::pthread_mutex_init(mutex, &attr), 0);
    }
}

/// Forks a child that runs `f` and leaves with `_exit(0)`.
fn fork(f: impl FnOnce()) -> libc::pid_t {
    // SAFETY: the child runs `f`, which uses only lock calls and atomics on memory mapped
    // before the fork, and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        f();
        // SAFETY: as above.
        unsafe { libc::_exit(0) };
    }
    pid
}

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: our child; a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// Initializes what a forked child's first lock would otherwise initialize half-way (the spin
/// policy's measurement, this thread's robust list).
pub fn warm_up() {
    futexkit::spin::SpinWait::new().spin();
    // SAFETY: a temporary, locked and unlocked within this statement, never moved while held.
    drop(unsafe { futexkit::shared::SharedMutex::new(0u8) }.lock());
}

/// `workers` processes (threads, in-process) take one lock in a loop for `time`, adding 1 to
/// the value it guards each time: million locked increments per second.
pub fn contended(imp: usize, workers: usize, time: Duration) -> f64 {
    let map = Mapping::new();
    let ctl = map.get();
    let region = Region::builder().mutex("n", 0u64).build().unwrap();
    let n = region.mutex::<u64>("n").unwrap();
    let in_process = futexkit::sync::Mutex::new(0u64);
    let body = |i: usize| {
        while ctl.start.load(Ordering::Acquire) == 0 {
            std::hint::spin_loop();
        }
        let mut count = 0u64;
        while ctl.stop.load(Ordering::Relaxed) == 0 {
            match imp {
                0 => match n.lock() {
                    Ok(mut guard) => guard.update(|v| *v += 1),
                    Err(LockError::OwnerDied(mut guard)) => guard.mark_consistent(),
                    Err(_) => break,
                },
                1 => {
                    // SAFETY: the process-shared mutex and the value it guards, in the mapping.
                    unsafe {
                        libc::pthread_mutex_lock(map.mutex());
                        *map.value() += 1;
                        libc::pthread_mutex_unlock(map.mutex());
                    }
                }
                _ => *in_process.lock().unwrap() += 1,
            }
            count += 1;
        }
        ctl.counts[i].store(count, Ordering::Relaxed);
    };
    let elapsed = if imp == 2 {
        std::thread::scope(|s| {
            for i in 0..workers {
                s.spawn(move || body(i));
            }
            run_for(ctl, time)
        })
    } else {
        let children: Vec<_> = (0..workers).map(|i| fork(|| body(i))).collect();
        let elapsed = run_for(ctl, time);
        children.into_iter().for_each(reap);
        elapsed
    };
    let total: u64 = ctl.counts[..workers]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum();
    total as f64 / elapsed.as_secs_f64() / 1e6
}

fn run_for(ctl: &Shared, time: Duration) -> Duration {
    let start = Instant::now();
    ctl.start.store(1, Ordering::Release);
    std::thread::sleep(time);
    ctl.stop.store(1, Ordering::Relaxed);
    start.elapsed()
}

/// Two processes (threads, in-process) hand a turn back and forth under a mutex and a
/// condition variable: time per round trip (two hand-offs), over `trips` round trips.
pub fn handoff(imp: usize, trips: u64) -> Duration {
    let map = Mapping::new();
    let region = Region::builder()
        .mutex("turn", 0u64)
        .condvar("turned")
        .build()
        .unwrap();
    let turn = region.mutex::<u64>("turn").unwrap();
    let turned = region.condvar("turned").unwrap();
    let in_process = (
        futexkit::sync::Mutex::new(0u64),
        futexkit::sync::Condvar::new(),
    );
    let last = 2 * trips;
    let side = |mine: u64| match imp {
        0 => {
            let mut guard = turn.lock().unwrap();
            loop {
                let t = guard.get();
                if t >= last {
                    return;
                }
                if t % 2 == mine {
                    guard.set(t + 1);
                    turned.notify_one();
                } else {
                    guard = turned.wait(guard).unwrap();
                }
            }
        }
        // SAFETY: the process-shared mutex, condition variable and value, in the mapping; the
        // value is read and written under the mutex.
        1 => unsafe {
            libc::pthread_mutex_lock(map.mutex());
            loop {
                let t = *map.value();
                if t >= last {
                    break;
                }
                if t % 2 == mine {
                    *map.value() = t + 1;
                    libc::pthread_cond_signal(map.cond());
                } else {
                    libc::pthread_cond_wait(map.cond(), map.mutex());
                }
            }
            libc::pthread_mutex_unlock(map.mutex());
        },
        _ => {
            let (m, cv) = &in_process;
            let mut guard = m.lock().unwrap();
            while *guard < last {
                if *guard % 2 == mine {
                    *guard += 1;
                    cv.notify_one();
                } else {
                    guard = cv.wait(guard).unwrap();
                }
            }
        }
    };
    let start = Instant::now();
    if imp == 2 {
        std::thread::scope(|s| {
            s.spawn(|| side(1));
            side(0);
        });
    } else {
        let child = fork(|| side(1));
        side(0);
        reap(child);
    }
    start.elapsed() / trips as u32
}

/// A child process takes the lock and is killed while a thread of this process sleeps in a lock
/// call: the time from the kill to that call's return (with the owner's death reported),
/// median of `runs`. In-process locks are not robust: no figure.
pub fn death_to_next_locker(imp: usize, runs: usize) -> Option<Duration> {
    if imp == 2 {
        return None;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let map = Mapping::new();
        let ctl = map.get();
        let region = Region::builder().mutex("m", 0u64).build().unwrap();
        let m = region.mutex::<u64>("m").unwrap();
        let child = fork(|| {
            match imp {
                0 => std::mem::forget(m.lock()),
                // SAFETY: the process-shared robust mutex in the mapping.
                _ => unsafe {
                    libc::pthread_mutex_lock(map.mutex());
                },
            }
            ctl.ready.store(1, Ordering::Release);
            loop {
                // SAFETY: waits for the signal that kills this process.
                unsafe { libc::pause() };
            }
        });
        while ctl.ready.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        let killed_at = std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let reported = match imp {
                    0 => match m.lock() {
                        Err(LockError::OwnerDied(mut guard)) => {
                            guard.mark_consistent();
                            true
                        }
                        _ => false,
                    },
                    // SAFETY: the process-shared robust mutex in the mapping.
                    _ => unsafe {
                        let reported = libc::pthread_mutex_lock(map.mutex()) == libc::EOWNERDEAD;
                        libc::pthread_mutex_consistent(map.mutex());
                        libc::pthread_mutex_unlock(map.mutex());
                        reported
                    },
                };
                assert!(reported, "the owner's death went unreported");
                Instant::now()
            });
            // Let the waiter fall asleep in its lock call.
            std::thread::sleep(Duration::from_millis(20));
            let killed_at = Instant::now();
            // SAFETY: our own child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            waiter.join().unwrap() - killed_at
        });
        reap(child);
        times.push(killed_at);
    }
    times.sort();
    Some(times[times.len() / 2])
}

/// `n` uncontended lock + unlock pairs (each adding 1 to the guarded value), for counting
/// instructions.
pub fn uncontended(imp: &str, n: u64) {
    match imp {
        "futexkit-shared" => {
            // SAFETY: boxed before its first lock, and never moved out.
            let m = Box::new(unsafe { futexkit::shared::SharedMutex::new(0u64) });
            for _ in 0..n {
                std::hint::black_box(&*m)
                    .lock()
                    .unwrap()
                    .update(|v| *v += 1);
            }
        }
        "pthread-robust" => {
            let map = Mapping::new();
            for _ in 0..n {
                // SAFETY: the process-shared robust mutex and its value, in the mapping.
                unsafe {
                    libc::pthread_mutex_lock(std::hint::black_box(map.mutex()));
                    *std::hint::black_box(map.value()) += 1;
                    libc::pthread_mutex_unlock(map.mutex());
                }
            }
        }
        "futexkit" => {
            let m = futexkit::sync::Mutex::new(0u64);
            for _ in 0..n {
                *std::hint::black_box(&m).lock().unwrap() += 1;
            }
        }
        other => {
            eprintln!("unknown implementation {other}: futexkit-shared, pthread-robust or futexkit")
        }
    }
}
