//! A seccomp filter for tests that check a fallback: [`refuse_futex_op`] makes the kernel
//! refuse one futex operation to the calling thread, as a sandbox's policy would, and
//! [`refuse_syscall`] one system call;
//! [`without_futex_wake_op`] runs code on a thread refused `FUTEX_WAKE_OP`.

use futexkit::futex::{Error, Futex, WakeOpKind};

/// `FUTEX_WAKE_OP`'s command number.
pub const FUTEX_WAKE_OP: u32 = 5;

/// Runs `f` on a new thread that the kernel refuses `FUTEX_WAKE_OP` (after checking that it
/// does), and returns what `f` returns.
pub fn without_futex_wake_op<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            refuse_futex_op(FUTEX_WAKE_OP);
            assert_eq!(
                Futex::new(0).update_and_wake(WakeOpKind::Add, 1, 1),
                Err(Error::PermissionDenied),
                "the filter refuses FUTEX_WAKE_OP"
            );
            f()
        })
        .join()
        .unwrap()
    })
}

const LOAD_WORD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JUMP_IF_EQUAL: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const REFUSE: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
// `struct seccomp_data`: the syscall number at 0, the arguments (u64 each) from 16.
const NR: u32 = 0;

fn step(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Installs, on the calling thread only (and threads it spawns later), a seccomp filter under
/// which `futex(2)` calls whose operation (the command, without the private and clock flags) is
/// `op` fail with `EPERM`; every other call is allowed. Sets the thread's `no_new_privs`, which
/// an unprivileged filter needs. Panics if the kernel refuses the filter.
pub fn refuse_futex_op(op: u32) {
    // The operation is the second argument's low 32 bits.
    const OP: u32 = if cfg!(target_endian = "little") {
        24
    } else {
        28
    };
    // FUTEX_CMD_MASK: the command without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME.
    const COMMAND: u32 = 0x7f;
    install(&[
        step(LOAD_WORD, 0, 0, NR),
        step(JUMP_IF_EQUAL, 0, 4, libc::SYS_futex as u32),
        step(LOAD_WORD, 0, 0, OP),
        step(AND, 0, 0, COMMAND),
        step(JUMP_IF_EQUAL, 0, 1, op),
        step(RETURN, 0, 0, REFUSE),
        step(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]);
}

/// As [`refuse_futex_op`], for every call of the system call numbered `nr` (a sandbox whose
/// policy predates `futex_waitv` refuses it so).
pub fn refuse_syscall(nr: libc::c_long) {
    install(&[
        step(LOAD_WORD, 0, 0, NR),
        step(JUMP_IF_EQUAL, 0, 1, nr as u32),
        step(RETURN, 0, 0, REFUSE),
        step(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]);
}

fn install(program: &[libc::sock_filter]) {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let no_new_privs = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(
        no_new_privs,
        0,
        "PR_SET_NO_NEW_PRIVS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `prog` points at `program`, both live across the call, which copies them.
    let installed = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const libc::sock_fprog,
        )
    };
    assert_eq!(
        installed,
        0,
        "PR_SET_SECCOMP: {}",
        std::io::Error::last_os_error()
    );
}
