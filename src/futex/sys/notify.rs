//! seccomp user notifications used as a directed wake-up: a filter on one thread that sends one
//! call of its (and no other) to a listener descriptor, the listener's `poll`, `RECV` and
//! `SEND`, and its synchronous-wake-up flag (Linux 6.6), which makes each side's wake-up run the
//! woken thread on the waker's CPU.
//!
//! The intercepted call is `futex(NULL, INTERCEPTED_OP, 0, ...)`: no kernel defines a futex
//! operation with this number (its command bits are beyond every operation's), so without the
//! filter it fails at once with `ENOSYS`, touching no memory, and no other code makes it.
//!
//! `notify_model.rs` has the same items under a model checker.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::Errno;

/// The intercepted call's futex operation.
const INTERCEPTED_OP: u32 = 0x4655_0000;
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6, include/uapi/linux/seccomp.h).
const SYNC_WAKE_UP: u64 = 1;
/// `AUDIT_ARCH_X86_64` (include/uapi/linux/audit.h).
#[cfg(target_arch = "x86_64")]
const THIS_ARCH: Option<u32> = Some(0xc000_003e);
/// `AUDIT_ARCH_AARCH64`.
#[cfg(target_arch = "aarch64")]
const THIS_ARCH: Option<u32> = Some(0xc000_00b7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const THIS_ARCH: Option<u32> = None;

/// A listener: answers the calls of the threads carrying its filter. Closing the last copy
/// fails their calls, pending and future, with `ENOSYS`.
#[derive(Debug)]
pub(crate) struct Listener(OwnedFd);

impl Listener {
    /// A descriptor that claims to be a listener (from another process). Not checked here:
    /// [`set_sync_wake_up`] on anything else fails.
    pub(crate) fn from_fd(fd: OwnedFd) -> Listener {
        Listener(fd)
    }

    /// The descriptor, to pass to another process.
    pub(crate) fn into_fd(self) -> OwnedFd {
        self.0
    }

    fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Why a filter could not be installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilterError {
    /// No audit architecture number is known for this CPU.
    UnknownArchitecture,
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    NoNewPrivs(Errno),
    /// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)` failed.
    Seccomp(Errno),
}

/// Sets `no_new_privs` on the calling thread and installs, on it alone, a filter that sends the
/// intercepted call to a new listener and lets every other system call through; returns the
/// listener. Both are for the thread's life, and pass to threads and processes it creates.
pub(crate) fn install_filter() -> Result<Listener, FilterError> {
    let arch = THIS_ARCH.ok_or(FilterError::UnknownArchitecture)?;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump_if_equal = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = |offset: u32| stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset);
    let ret = |k: u32| stmt(libc::BPF_RET | libc::BPF_K, k);
    // struct seccomp_data: nr at 0, arch at 4, the instruction pointer at 8, the arguments from
    // 16, eight bytes each; the low half first on these little-endian architectures.
    let op_low = 16 + 8;
    let program = [
        load(4),
        jump_if_equal(arch, 0, 6),
        load(0),
        jump_if_equal(libc::SYS_futex as u32, 0, 4),
        load(op_low),
        jump_if_equal(INTERCEPTED_OP, 0, 2),
        load(op_low + 4),
        jump_if_equal(0, 1, 0),
        ret(libc::SECCOMP_RET_ALLOW),
        ret(libc::SECCOMP_RET_USER_NOTIF),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers and only removes privileges from
    // future execs of this thread.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(FilterError::NoNewPrivs(super::last_errno()));
    }
    // SAFETY: `fprog` points to `program`, a classic BPF program that lives across the call
    // (the kernel copies it); the call returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            core::ptr::addr_of!(fprog),
        )
    };
    if fd < 0 {
        return Err(FilterError::Seccomp(super::last_errno()));
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(Listener(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

/// Why [`probe`] found the directed wake-ups unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeError {
    /// The filter could not be installed.
    Filter(FilterError),
    /// The synchronous wake-ups were refused (`EINVAL` before Linux 6.6).
    SyncWakeUp(Errno),
    /// No thread could be spawned to probe on.
    NoThread,
}

/// Whether a thread of this process can install the filter and turn the synchronous wake-ups
/// on: tried on a thread spawned for it, which takes the filter with it when it ends.
pub(crate) fn probe() -> Result<(), ProbeError> {
    std::thread::Builder::new()
        .name("futexkit-probe".into())
        .spawn(|| {
            let listener = install_filter().map_err(ProbeError::Filter)?;
            set_sync_wake_up(&listener, true).map_err(ProbeError::SyncWakeUp)
        })
        .map_or(Err(ProbeError::NoThread), |probe| {
            probe.join().unwrap_or(Err(ProbeError::NoThread))
        })
}

/// Turns the synchronous wake-ups on or off (`EINVAL` before Linux 6.6; `ENOTTY` or `EINVAL`
/// on a descriptor that is not a listener). The kernel takes the listener's lock
/// interruptibly: a signal makes it fail with `EINTR`, and it is asked again.
pub(crate) fn set_sync_wake_up(listener: &Listener, on: bool) -> Result<(), Errno> {
    let flags = if on { SYNC_WAKE_UP } else { 0 };
    retrying_on_eintr(|| {
        // SAFETY: this ioctl reads its flags from the integer argument and touches no memory;
        // on another kind of descriptor the request number is refused or means nothing that
        // writes memory through an integer.
        unsafe { libc::ioctl(listener.raw(), libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) }
    })
}

/// Makes the listener call `ioctl` until a signal does not interrupt it: each of these fails
/// with `EINTR` before it has done anything.
fn retrying_on_eintr(mut ioctl: impl FnMut() -> libc::c_int) -> Result<(), Errno> {
    loop {
        match super::check(ioctl() as libc::c_long) {
            Err(libc::EINTR) => continue,
            result => return result.map(drop),
        }
    }
}

/// Makes the intercepted call and waits for its answer: `Ok` once answered, `ENOSYS` if the
/// calling thread carries no filter or its listener is closed, `EINTR` if a signal whose handler
/// lacks `SA_RESTART` interrupted it (with `SA_RESTART` the kernel makes the call again). A
/// signal withdraws the call even when an answer raced it: `SEND` may then have succeeded.
pub(crate) fn intercepted_call() -> Result<(), Errno> {
    // SAFETY: a futex call with a null address and an operation no kernel defines: answered
    // through the listener or refused with ENOSYS; it touches no memory either way.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_futex,
            0usize,
            INTERCEPTED_OP,
            0u32,
            0usize,
            0usize,
            0u32,
        )
    };
    super::check(ret).map(drop)
}

/// What a wait on a listener found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// A call waits to be received.
    Call,
    /// No thread carries the filter any more (none will call).
    Hangup,
    /// Neither, when the timeout (or a signal) ended the wait.
    Nothing,
}

/// Waits until a call is waiting on `listener`, or no thread carries its filter, for
/// `timeout` at most. A signal, or the kernel failing to take the listener's lock at once
/// (`POLLERR`), count as nothing ready: the caller looks again.
pub(crate) fn wait_for_call(listener: &Listener, timeout: Duration) -> Result<Readiness, Errno> {
    let mut ready = libc::pollfd {
        fd: listener.raw(),
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // SAFETY: ppoll reads `timeout` and reads and writes the one `pollfd`, both valid here;
    // a null signal mask leaves the mask as it is.
    let ret = unsafe {
        libc::ppoll(
            core::ptr::addr_of_mut!(ready),
            1,
            core::ptr::addr_of!(timeout),
            core::ptr::null(),
        )
    };
    match super::check(ret as libc::c_long) {
        Ok(0) | Err(libc::EINTR) => Ok(Readiness::Nothing),
        Ok(_) if ready.revents & libc::POLLIN != 0 => Ok(Readiness::Call),
        Ok(_) if ready.revents & libc::POLLHUP != 0 => Ok(Readiness::Hangup),
        Ok(_) if ready.revents & libc::POLLNVAL != 0 => Err(libc::EBADF),
        Ok(_) => Ok(Readiness::Nothing),
        Err(errno) => Err(errno),
    }
}

/// Receives the oldest call waiting on `listener`; its id. `ENOENT` if none waits (its caller
/// was interrupted since the wait saw it); call only after [`wait_for_call`] saw one, as this
/// blocks while none waits.
pub(crate) fn receive_call(listener: &Listener) -> Result<u64, Errno> {
    // SAFETY: an all-zero seccomp_notif is a valid value of this plain C struct, and what RECV
    // requires.
    let mut notif: libc::seccomp_notif = unsafe { core::mem::zeroed() };
    retrying_on_eintr(|| {
        // SAFETY: RECV writes one `seccomp_notif` through the pointer, valid and ours.
        unsafe {
            libc::ioctl(
                listener.raw(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                core::ptr::addr_of_mut!(notif),
            )
        }
    })?;
    Ok(notif.id)
}

/// Answers call `id` with "returned 0": its caller returns from it. `ENOENT` if it is no longer
/// waiting (its caller was interrupted, or exited). The kernel takes the listener's lock
/// interruptibly: a signal to this thread makes it fail with `EINTR`, the call still waiting,
/// and it is answered again.
pub(crate) fn answer_call(listener: &Listener, id: u64) -> Result<(), Errno> {
    let mut response = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    retrying_on_eintr(|| {
        // SAFETY: SEND reads one `seccomp_notif_resp` through the pointer, valid and ours.
        unsafe {
            libc::ioctl(
                listener.raw(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                core::ptr::addr_of_mut!(response),
            )
        }
    })
}
