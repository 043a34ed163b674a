//! For tests that must act on a thread only once it sleeps: [`wait_until_blocked`],
//! [`spawn_blocked`], and the kernel facts they check against.

use std::time::{Duration, Instant};

/// futex2's `futex_wait`, which libc does not name yet: the same number on every architecture
/// (the generic syscall table).
const SYS_FUTEX_WAIT: libc::c_long = 455;

/// Waits until thread `tid` of this process is asleep in a futex call, so a test can wake it
/// and count it. Reads `/proc/self/task/TID/{stat,wchan}`; where the kernel hides `wchan`, the
/// system call the thread sleeps in (`/proc/self/task/TID/syscall`) must be a futex one, and
/// only where that too is unreadable is a sleeping state taken as enough (a thread asleep
/// elsewhere, on its way to the futex, would pass). Gives up (panics) after 60 s: a hang is a
/// failure.
pub fn wait_until_blocked(tid: u32) {
    wait_until_asleep_in_futex(
        &format!("/proc/self/task/{tid}"),
        &format!("thread {tid}"),
        None,
    );
}

/// [`wait_until_blocked`], and the futex word the thread sleeps on must lie inside `object`
/// (the lock it waits for), not elsewhere (an allocator's lock, say): read from the first
/// argument of its system call (`/proc/self/task/TID/syscall`). Where the kernel hides that
/// file, as [`wait_until_blocked`].
pub fn wait_until_blocked_on<O>(tid: u32, object: &O) {
    let start = object as *const O as u64;
    wait_until_asleep_in_futex(
        &format!("/proc/self/task/{tid}"),
        &format!("thread {tid}"),
        Some(start..start + std::mem::size_of::<O>() as u64),
    );
}

/// Waits until the (single-threaded) process `pid` is asleep in a futex call, as
/// [`wait_until_blocked`] does for a thread of this process.
pub fn wait_until_process_blocked(pid: u32) {
    wait_until_asleep_in_futex(&format!("/proc/{pid}"), &format!("process {pid}"), None);
}

/// `on`: the addresses the futex word must lie in, if given.
fn wait_until_asleep_in_futex(dir: &str, what: &str, on: Option<std::ops::Range<u64>>) {
    let stat_path = format!("{dir}/stat");
    let wchan_path = format!("{dir}/wchan");
    let syscall_path = format!("{dir}/syscall");
    let start = Instant::now();
    let mut last_wchan = String::new();
    loop {
        let stat = std::fs::read_to_string(&stat_path).unwrap_or_default();
        // The state follows the parenthesised command name.
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next());
        if state == Some("S") {
            let wchan = std::fs::read_to_string(&wchan_path).unwrap_or_default();
            // PI futex waiters sleep in the rt_mutex code.
            let in_futex = wchan.contains("futex") || wchan.contains("rt_mutex");
            let wchan_hidden = wchan.trim() == "0" || wchan.is_empty();
            let on_the_word = || match &on {
                Some(on) => sleeps_on(&syscall_path, on),
                None => true,
            };
            if (in_futex || (wchan_hidden && sleeps_in_a_futex_call(&syscall_path)))
                && on_the_word()
            {
                return;
            }
            last_wchan = wchan;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never blocked in a futex call{} (last wchan {last_wchan:?})",
            on.as_ref()
                .map(|on| format!(" on a word in {:#x}..{:#x}", on.start, on.end))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What a `/proc/.../syscall` file says of a thread.
enum SyscallFile {
    /// The file cannot be read (a kernel without it).
    Unreadable,
    /// No call: "running" (the kernel did not catch the thread asleep), or nothing parsable.
    NoCall,
    /// Asleep in call `nr`, whose first argument (in hex in the file) is `first_arg`.
    Call {
        nr: libc::c_long,
        first_arg: Option<u64>,
    },
}

fn read_syscall_file(syscall_path: &str) -> SyscallFile {
    let Ok(text) = std::fs::read_to_string(syscall_path) else {
        return SyscallFile::Unreadable;
    };
    let mut fields = text.split_whitespace();
    match fields.next().map(str::parse::<libc::c_long>) {
        Some(Ok(nr)) => SyscallFile::Call {
            nr,
            first_arg: fields
                .next()
                .and_then(|arg| u64::from_str_radix(arg.trim_start_matches("0x"), 16).ok()),
        },
        _ => SyscallFile::NoCall,
    }
}

/// Whether the system call named in `syscall_path` is a futex call: `futex`, `futex_waitv` or
/// futex2's `futex_wait`. True where the file cannot be read or names no call (a kernel
/// without it): then the sleeping state must do.
fn sleeps_in_a_futex_call(syscall_path: &str) -> bool {
    match read_syscall_file(syscall_path) {
        SyscallFile::Call { nr, .. } => {
            [libc::SYS_futex, libc::SYS_futex_waitv, SYS_FUTEX_WAIT].contains(&nr)
        }
        SyscallFile::Unreadable | SyscallFile::NoCall => true,
    }
}

/// Whether the system call in `syscall_path` is a futex call on a word in `on`. The kernel
/// writes the call only for a thread it caught asleep, so a match is proof. `futex_waitv`
/// names its words through an array: any such call passes. True only where the file cannot be
/// read at all (then the caller's other checks must do); false for "running" or anything else,
/// so the caller looks again.
fn sleeps_on(syscall_path: &str, on: &std::ops::Range<u64>) -> bool {
    match read_syscall_file(syscall_path) {
        SyscallFile::Unreadable => true,
        SyscallFile::Call { nr, .. } if nr == libc::SYS_futex_waitv => true,
        SyscallFile::Call { nr, first_arg } if nr == libc::SYS_futex || nr == SYS_FUTEX_WAIT => {
            first_arg.is_some_and(|word| on.contains(&word))
        }
        SyscallFile::Call { .. } | SyscallFile::NoCall => false,
    }
}

/// The calling thread's kernel thread id.
pub fn gettid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// Spawns a thread that reports its tid, then runs `f`; returns the handle once the thread is
/// asleep in a futex call (see [`wait_until_blocked`]).
pub fn spawn_blocked<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    spawn_blocked_by(std::thread::Builder::new(), f)
}

/// [`spawn_blocked`], returning once the thread sleeps on a futex word inside `object` (see
/// [`wait_until_blocked_on`]). Not for a condvar waiter that a notify may requeue onto a
/// mutex: the kernel keeps reporting the address it first slept on.
pub fn spawn_blocked_on<O, T: Send + 'static>(
    object: &O,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let (handle, tid) = spawn_reporting_tid(std::thread::Builder::new(), f);
    wait_until_blocked_on(tid, object);
    handle
}

/// [`spawn_blocked`] with the thread made by `builder` (a name, say).
pub fn spawn_blocked_by<T: Send + 'static>(
    builder: std::thread::Builder,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let (handle, tid) = spawn_reporting_tid(builder, f);
    wait_until_blocked(tid);
    handle
}

/// Spawns a thread with `builder` that runs `f`; returns its handle and kernel thread id.
fn spawn_reporting_tid<T: Send + 'static>(
    builder: std::thread::Builder,
    f: impl FnOnce() -> T + Send + 'static,
) -> (std::thread::JoinHandle<T>, u32) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = builder
        .spawn(move || {
            tx.send(gettid()).unwrap();
            f()
        })
        .expect("a thread");
    (handle, rx.recv().unwrap())
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
