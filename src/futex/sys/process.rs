//! System calls about processes: this process's id, threads and pid namespace, watching a peer
//! process for its exit (FlipCall's peer-death detection), and running code in the child of a
//! `fork`.

/// This process's id.
pub(crate) fn getpid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// What [`pid_namespace`] answers on a kernel built without pid namespaces
/// (`CONFIG_PID_NS=n`): every process is in the one namespace there. Namespace inodes are
/// allocated far above it, so it names no real namespace.
const THE_ONLY_PID_NAMESPACE: u32 = 1;

/// This process's pid namespace, as its inode folded to 32 bits (0 if unknown): two processes
/// can name each other by pid only if these match. Where `/proc` is mounted but has no
/// `ns/pid`, the kernel has no pid namespaces and every process shares the one there is.
pub(crate) fn pid_namespace() -> u32 {
    match rustix::fs::stat("/proc/self/ns/pid") {
        Ok(st) => {
            let ino = st.st_ino;
            (ino ^ (ino >> 32)) as u32
        }
        Err(rustix::io::Errno::NOENT) if rustix::fs::stat("/proc/self/stat").is_ok() => {
            THE_ONLY_PID_NAMESPACE
        }
        Err(_) => 0,
    }
}

/// A handle on process `pid` that tells whether it has exited: a pidfd (Linux 5.3+), or the pid
/// itself on older kernels.
#[derive(Debug)]
pub(crate) enum ProcessWatch {
    /// Readable once the process has exited, even while it is an unreaped zombie.
    Pidfd(std::os::fd::OwnedFd),
    /// `kill(pid, 0)`: cannot tell a zombie from a live process, and may be fooled by pid reuse.
    Pid(rustix::process::Pid),
}

/// Watches process `pid`; `Ok(None)` if it no longer exists.
pub(crate) fn watch_process(pid: u32) -> std::io::Result<Option<ProcessWatch>> {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Ok(None);
    };
    match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => Ok(Some(ProcessWatch::Pidfd(fd))),
        Err(rustix::io::Errno::SRCH) => Ok(None),
        Err(rustix::io::Errno::NOSYS) => Ok(process_exists(pid).then_some(ProcessWatch::Pid(pid))),
        Err(err) => Err(err.into()),
    }
}

fn process_exists(pid: rustix::process::Pid) -> bool {
    // EPERM means it exists but belongs to someone else.
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// Whether the watched process has exited. Never blocks.
pub(crate) fn has_exited(watch: &ProcessWatch) -> bool {
    match watch {
        ProcessWatch::Pidfd(fd) => {
            use rustix::event::{PollFd, PollFlags};
            let mut fds = [PollFd::new(fd, PollFlags::IN)];
            let zero = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        }
        ProcessWatch::Pid(pid) => !process_exists(*pid),
    }
}

/// Registers `handler` to run in the child process after every `fork` made through the C
/// library (`pthread_atfork`'s child handler), in the one thread the child has.
pub(crate) fn on_fork_in_child(handler: unsafe extern "C" fn()) -> Result<(), super::Errno> {
    // SAFETY: registers function pointers only; `handler` is a plain `extern "C" fn` with no
    // arguments, as pthread_atfork expects, and lives as long as the program (it is code).
    match unsafe { libc::pthread_atfork(None, None, Some(handler)) } {
        0 => Ok(()),
        errno => Err(errno),
    }
}

/// The ids of this process's threads (`/proc/self/task`), or `None` where `/proc` cannot be
/// read.
pub(crate) fn thread_ids() -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .filter_map(|task| task.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// Writes `text` to the process's stderr (fd 2) directly, bypassing std's `Stderr` and its
/// lock; errors (a closed or full pipe) are dropped: a diagnostic must neither panic nor wait
/// for a thread that holds std's stderr lock.
#[cfg(all(feature = "deadlock", not(any(futexkit_loom, futexkit_shuttle))))]
pub(crate) fn write_to_stderr(text: &str) {
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        match rustix::io::write(rustix::stdio::stderr(), rest) {
            Ok(0) | Err(_) => return,
            Ok(written) => rest = &rest[written..],
        }
    }
}
