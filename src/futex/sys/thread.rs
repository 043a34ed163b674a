//! System calls about the calling thread and the system it runs on: its kernel id, the CPUs it
//! may use, how many threads are runnable, the clocks, the kernel release, the rseq slice
//! extension. None of them reads or writes memory the caller passes, so all are safe.

use super::{check, Errno};

// prctl(PR_RSEQ_SLICE_EXTENSION, PR_RSEQ_SLICE_EXTENSION_GET): merged in Linux 7.0.
const PR_RSEQ_SLICE_EXTENSION: libc::c_int = 79;
const PR_RSEQ_SLICE_EXTENSION_GET: libc::c_ulong = 1;

/// The calling thread's kernel thread id.
pub(crate) fn gettid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// Reads `clock` (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`).
pub(crate) fn clock_now(clock: libc::clockid_t) -> libc::timespec {
    let id = if clock == libc::CLOCK_REALTIME {
        rustix::time::ClockId::Realtime
    } else {
        rustix::time::ClockId::Monotonic
    };
    let ts = rustix::time::clock_gettime(id);
    libc::timespec {
        tv_sec: ts.tv_sec as libc::time_t,
        tv_nsec: ts.tv_nsec as _,
    }
}

/// The CPU the calling thread runs on now (by the time the caller looks, maybe another), or
/// `u32::MAX` if the C library cannot tell; it reads it without a system call where the kernel
/// offers rseq or a vDSO.
pub(crate) fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments and reads only this thread's state.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).unwrap_or(u32::MAX)
}

/// How many CPUs this process may run on (its affinity mask), at least 1.
pub(crate) fn usable_cpus() -> usize {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => set.count().max(1) as usize,
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The CPUs the system has online (`sysconf(_SC_NPROCESSORS_ONLN)`), the scope of
/// `/proc/loadavg`'s count of runnable threads; `None` where it cannot be had.
pub(crate) fn online_cpus() -> Option<usize> {
    // SAFETY: sysconf takes a plain name and returns a number or -1; it touches no memory of
    // ours.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

/// How many threads the whole system has runnable (running or waiting for a CPU) right now,
/// the caller included: the numerator of `/proc/loadavg`'s fourth field. `None` where procfs
/// cannot be read (a sandbox without `/proc`). Three system calls (open, read, close): no
/// descriptor outlives the call, so none can be closed or inherited under it.
pub(crate) fn runnable_threads() -> Option<u32> {
    use std::io::Read;
    // "0.52 0.58 0.59 2/345 6789\n": five fields of a few digits each.
    let mut text = [0u8; 128];
    let len = std::fs::File::open("/proc/loadavg")
        .ok()?
        .read(&mut text)
        .ok()?;
    let fields = core::str::from_utf8(&text[..len]).ok()?;
    let (runnable, _all) = fields.split_ascii_whitespace().nth(3)?.split_once('/')?;
    runnable.parse().ok()
}

/// The running kernel's release string (`uname -r`).
pub(crate) fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// `prctl(PR_RSEQ_SLICE_EXTENSION, PR_RSEQ_SLICE_EXTENSION_GET)`: non-negative where the rseq
/// time-slice extension exists (Linux 7.0+).
pub(crate) fn rseq_slice_extension_get() -> Result<usize, Errno> {
    // SAFETY: this prctl takes no pointers; unknown options return EINVAL.
    let ret = unsafe {
        libc::prctl(
            PR_RSEQ_SLICE_EXTENSION,
            PR_RSEQ_SLICE_EXTENSION_GET,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    check(ret as libc::c_long)
}
