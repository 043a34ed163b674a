//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// The calling thread's kernel thread id.
pub fn gettid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

#[path = "blocked.rs"]
mod blocked;
pub use blocked::wait_until_blocked;

/// Spawns a thread that reports its tid, then runs `f`; returns the handle once the thread is
/// asleep in a futex call (see [`wait_until_blocked`]).
pub fn spawn_blocked<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        f()
    });
    let tid = rx.recv().unwrap();
    wait_until_blocked(tid);
    handle
}

/// Kernel version `(major, minor)` from `uname -r`.
pub fn kernel_version() -> (u32, u32) {
    let release = futexkit::capabilities().kernel_release().to_owned();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}
