//! Does the one directed wake-up in mainline Linux pay for a hand-off? Measures it.
//!
//! Linux 6.6 added a synchronous mode to seccomp user notifications
//! (`SECCOMP_IOCTL_NOTIF_SET_FLAGS` with `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`): the supervisor
//! is woken on the CPU of the thread whose call it intercepts, and that thread on the
//! supervisor's CPU when the answer comes, the half of FUTEX_SWAP that matters when every CPU is
//! busy. Here a client thread carries a seccomp filter that sends one call (a `futex` call with
//! an operation number the kernel does not define, nothing else) to a supervisor, a thread of
//! this process or a forked child holding the listener descriptor, and the supervisor answers
//! at once: one round trip per call. The supervisor waits for each call in
//! `SECCOMP_IOCTL_NOTIF_RECV`, which has no timeout, or (the "supervisor polls" rows) first in
//! `poll` with a timeout, as a supervisor that must keep a deadline would. Beside it, in the
//! same interleaved run, the same round trip by futex wake + wait (free and pinned to one CPU),
//! by futexkit's hand-offs on this kernel (`swap`, `Parker::swap_to`, FlipCall) and by a pipe
//! pair; idle, then with a busy thread on every CPU, then with two busy threads on every CPU.
//! futexkit's hand-offs do not use this mechanism: docs/kernel.md (seccomp user notifications)
//! says why, with the figures.
//!
//! Every batch is a fresh pair (a new client thread, filter and supervisor for the seccomp
//! rows). The table gives the median batch's round trip, the mean (total time over total round
//! trips, so a slow batch counts) and the slowest batch.
//!
//! `cargo run --release --example seccomp_handoff [-- --quick | --batches N] [--flipcall-only]`
//! (`--flipcall-only`: only the FlipCall rows and their wake+wait baselines)

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futexkit_support::flipcall::{Client, Mechanism as FlipMechanism, Placement};
use futexkit_support::pingpong::{self, BackgroundLoad, Mechanism};
use futexkit_support::report::turns;

/// The intercepted call: `futex(NULL, MAGIC_OP, ...)`. The kernel defines no futex operation
/// with this number (its command bits are out of range), so without the filter the call fails
/// at once with `ENOSYS`, and no other code issues it.
const MAGIC_OP: u32 = 0x4655_0000;
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6, include/uapi/linux/seccomp.h).
const SYNC_WAKE_UP: u64 = 1;
/// `AUDIT_ARCH_X86_64` (include/uapi/linux/audit.h).
#[cfg(target_arch = "x86_64")]
const THIS_ARCH: u32 = 0xc000_003e;
/// `AUDIT_ARCH_AARCH64`.
#[cfg(target_arch = "aarch64")]
const THIS_ARCH: u32 = 0xc000_00b7;
/// Another architecture: the seccomp rows are skipped.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const THIS_ARCH: u32 = 0;

/// Where the supervisor runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Thread,
    Process,
}

/// How the supervisor waits for the next notification.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SupervisorWait {
    /// In `SECCOMP_IOCTL_NOTIF_RECV`, which has no timeout.
    Recv,
    /// In `poll` on the listener with a timeout, then `SECCOMP_IOCTL_NOTIF_RECV`, which no
    /// longer waits: the wait a supervisor that must keep a deadline would make.
    PollThenRecv,
}

/// One row of the table.
#[derive(Clone, Copy)]
enum Row {
    Seccomp {
        sync: bool,
        side: Side,
        wait: SupervisorWait,
    },
    PingPong(Mechanism),
    FlipCall(Placement),
    FutexCrossProcess,
}

impl Row {
    fn name(self) -> String {
        match self {
            Row::Seccomp { sync, side, wait } => format!(
                "seccomp notify{}{}, {}",
                if sync { " + SYNC_WAKE_UP" } else { "" },
                match wait {
                    SupervisorWait::Recv => "",
                    SupervisorWait::PollThenRecv => ", supervisor polls",
                },
                match side {
                    Side::Thread => "threads",
                    Side::Process => "processes",
                }
            ),
            Row::PingPong(m) => format!("{}, threads", m.name()),
            Row::FlipCall(Placement::Thread) => "futexkit FlipCall, threads".into(),
            Row::FlipCall(Placement::Process) => "futexkit FlipCall, processes".into(),
            Row::FutexCrossProcess => "futex wake+wait, processes".into(),
        }
    }

    /// Whether the two sides are threads of one process or two processes.
    fn side(self) -> Side {
        match self {
            Row::Seccomp { side, .. } => side,
            Row::PingPong(_) | Row::FlipCall(Placement::Thread) => Side::Thread,
            Row::FlipCall(Placement::Process) | Row::FutexCrossProcess => Side::Process,
        }
    }

    /// The row this one is compared with: futex wake+wait with the same placement.
    fn is_baseline(self) -> bool {
        matches!(
            self,
            Row::PingPong(Mechanism::FutexWakeWait) | Row::FutexCrossProcess
        )
    }

    /// Runs `n` round trips on a fresh pair; the time they took.
    fn run(self, n: u64) -> Duration {
        match self {
            Row::Seccomp { sync, side, wait } => seccomp_round_trips(sync, side, wait, n),
            Row::PingPong(m) => pingpong::measure(m, n),
            Row::FlipCall(placement) => {
                Client::start(FlipMechanism::FlipCall, placement).round_trips(0, n)
            }
            Row::FutexCrossProcess => {
                Client::start(FlipMechanism::FutexWakeWait, Placement::Process).round_trips(0, n)
            }
        }
    }
}

const ROWS: [Row; 14] = [
    Row::PingPong(Mechanism::FutexWakeWait),
    Row::PingPong(Mechanism::FutexWakeWaitOneCpu),
    Row::Seccomp {
        sync: true,
        side: Side::Thread,
        wait: SupervisorWait::Recv,
    },
    Row::Seccomp {
        sync: true,
        side: Side::Thread,
        wait: SupervisorWait::PollThenRecv,
    },
    Row::Seccomp {
        sync: false,
        side: Side::Thread,
        wait: SupervisorWait::Recv,
    },
    Row::PingPong(Mechanism::SwapEmulated),
    Row::PingPong(Mechanism::Parker),
    Row::FlipCall(Placement::Thread),
    Row::PingPong(Mechanism::Pipe),
    Row::FutexCrossProcess,
    Row::Seccomp {
        sync: true,
        side: Side::Process,
        wait: SupervisorWait::Recv,
    },
    Row::Seccomp {
        sync: true,
        side: Side::Process,
        wait: SupervisorWait::PollThenRecv,
    },
    Row::Seccomp {
        sync: false,
        side: Side::Process,
        wait: SupervisorWait::Recv,
    },
    Row::FlipCall(Placement::Process),
];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (mut batches, batch_time) = if quick {
        (5, Duration::from_millis(20))
    } else {
        (21, Duration::from_millis(60))
    };
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--batches") {
        batches = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .filter(|&n| n > 0)
            .expect("--batches takes a positive number");
    }
    // Process-wide state a forked child may touch is initialised before any fork.
    println!("{}", futexkit::capabilities());
    println!("swap mode: {:?}", futexkit::swap::mode());
    let flipcall_only = args.iter().any(|a| a == "--flipcall-only");
    let seccomp_works = probe().map_err(|why| println!("seccomp rows skipped: {why}"));
    let rows: Vec<Row> = ROWS
        .into_iter()
        .filter(|r| seccomp_works.is_ok() || !matches!(r, Row::Seccomp { .. }))
        .filter(|r| !flipcall_only || r.is_baseline() || matches!(r, Row::FlipCall(_)))
        .collect();
    println!(
        "one round trip = a call handed to the partner and answered; {batches} interleaved batches of ~{batch_time:?}, each a fresh pair\n"
    );
    let loads = [
        (0, "idle"),
        (1, "a busy thread per CPU"),
        (2, "two busy threads per CPU"),
    ];
    let mut results = Vec::new();
    for (per_cpu, _) in loads {
        let _load: Vec<BackgroundLoad> = (0..per_cpu).map(|_| BackgroundLoad::start()).collect();
        results.push(measure(&rows, batches, batch_time));
    }
    print!("| mechanism |");
    for (_, name) in loads {
        print!(" {name}: median (mean, slowest) | vs wake+wait |");
    }
    println!();
    println!("|---|{}", "---|---|".repeat(loads.len()));
    let baseline = |side: Side| {
        rows.iter()
            .position(|r| r.is_baseline() && r.side() == side)
            .expect("both baselines are measured")
    };
    for (i, row) in rows.iter().enumerate() {
        print!("| {} |", row.name());
        for result in &results {
            let base = result[baseline(row.side())].mean;
            let r = result[i];
            print!(
                " {} ({}, {}) | {:.2}x |",
                us(r.median),
                us(r.mean),
                us(r.slowest),
                base.as_secs_f64() / r.mean.as_secs_f64()
            );
        }
        println!();
    }
    println!("\n\"vs wake+wait\": the mean of futex wake+wait with the same placement (threads or processes) over this row's mean (above 1: faster).");
}

#[derive(Clone, Copy)]
struct Stats {
    median: Duration,
    mean: Duration,
    slowest: Duration,
}

/// Each row's batches, interleaved (the order rotating) so drift in load hits all alike.
fn measure(rows: &[Row], batches: usize, batch_time: Duration) -> Vec<Stats> {
    let sizes: Vec<u64> = rows.iter().map(|&r| batch_size(r, batch_time)).collect();
    let mut samples = vec![Vec::new(); rows.len()];
    for round in 0..batches {
        for i in turns(round, rows.len()) {
            samples[i].push(rows[i].run(sizes[i]));
        }
    }
    samples
        .into_iter()
        .zip(sizes)
        .map(|(mut times, n)| {
            let total: Duration = times.iter().sum();
            times.sort();
            let per = |t: Duration| t / n as u32;
            Stats {
                median: per(times[times.len() / 2]),
                mean: total / (n as usize * times.len()) as u32,
                slowest: per(times[times.len() - 1]),
            }
        })
        .collect()
}

/// Round trips that take about `batch_time` (after a warm-up).
fn batch_size(row: Row, batch_time: Duration) -> u64 {
    let mut n = 64u64;
    loop {
        let t = row.run(n);
        if t >= batch_time / 4 || n >= 1 << 22 {
            let per = (t.as_nanos() / u128::from(n)).max(1);
            return ((batch_time.as_nanos() / per) as u64).clamp(16, 1 << 22);
        }
        n *= 4;
    }
}

fn us(d: Duration) -> String {
    format!("{:.2} us", d.as_secs_f64() * 1e6)
}

// ---- seccomp user notification ----

/// Whether this kernel and sandbox let a thread install the filter and set the sync flag.
fn probe() -> Result<(), String> {
    if THIS_ARCH == 0 {
        return Err("this example knows no audit architecture number for this CPU".into());
    }
    std::thread::spawn(|| {
        let listener = install_filter()?;
        set_sync(&listener)
    })
    .join()
    .unwrap()
}

/// Installs the filter on the calling thread (only: no TSYNC) and returns its listener.
/// The thread keeps the filter, and its `no_new_privs`, until it exits.
fn install_filter() -> Result<OwnedFd, String> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = |offset: u32| stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset);
    let ret = |k: u32| stmt(libc::BPF_RET | libc::BPF_K, k);
    // struct seccomp_data: nr at 0, arch at 4, instruction pointer at 8, args from 16, eight
    // bytes each (the low half first on a little-endian machine).
    let op_low = 16 + 8;
    let program = [
        load(4),
        jump(THIS_ARCH, 0, 6),
        load(0),
        jump(libc::SYS_futex as u32, 0, 4),
        load(op_low),
        jump(MAGIC_OP, 0, 2),
        load(op_low + 4),
        jump(0, 1, 0),
        ret(libc::SECCOMP_RET_ALLOW),
        ret(libc::SECCOMP_RET_USER_NOTIF),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers and changes only this thread's
    // credentials' future (no privilege gain on exec).
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fprog` points to `program`, a valid classic BPF program that lives across the
    // call (the kernel copies it); the result is a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &raw const fprog,
        )
    };
    if fd < 0 {
        return Err(format!(
            "seccomp filter with a listener: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Asks for the synchronous wake-ups on this listener.
fn set_sync(listener: &OwnedFd) -> Result<(), String> {
    set_flags(listener, SYNC_WAKE_UP)
}

/// Sets the listener's flags: `SYNC_WAKE_UP` or none.
fn set_flags(listener: &OwnedFd, flags: u64) -> Result<(), String> {
    // SAFETY: the ioctl reads the flags from its integer argument; `listener` is open.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            flags,
        )
    };
    if r != 0 {
        return Err(format!(
            "SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6+): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The intercepted call: returns when the supervisor has answered it.
fn intercepted_call() {
    assert!(
        call_answered(),
        "the intercepted call was not answered by the supervisor"
    );
}

/// Makes the intercepted call: true once the supervisor answered it, false if the listener
/// was closed (the kernel then fails the call with `ENOSYS`).
fn call_answered() -> bool {
    // SAFETY: a futex call with a null address and an operation the kernel does not define:
    // intercepted by the filter, or refused with ENOSYS; it touches no memory either way.
    let r = unsafe { libc::syscall(libc::SYS_futex, 0usize, MAGIC_OP, 0, 0, 0, 0) };
    if r == 0 {
        return true;
    }
    let e = std::io::Error::last_os_error();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::ENOSYS),
        "intercepted call: {e}"
    );
    false
}

/// How long a polling supervisor waits for a notification before it gives up on its partner.
const POLL_TIMEOUT_MS: libc::c_int = 10_000;

/// Answers `n` notifications on `listener` with "returned 0", each as it comes, waiting for
/// each as `wait` says.
fn supervise(listener: RawFd, wait: SupervisorWait, n: u64) {
    for _ in 0..n {
        let id = receive(listener, wait);
        answer(listener, id);
    }
}

/// Waits for the next notification on `listener` as `wait` says and reads it; its id.
fn receive(listener: RawFd, wait: SupervisorWait) -> u64 {
    if wait == SupervisorWait::PollThenRecv {
        let mut ready = libc::pollfd {
            fd: listener,
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: poll reads and writes the one `pollfd` it is given, valid here.
            let r = unsafe { libc::poll(&raw mut ready, 1, POLL_TIMEOUT_MS) };
            if r == 1 {
                break;
            }
            let e = std::io::Error::last_os_error();
            assert!(
                r < 0 && e.raw_os_error() == Some(libc::EINTR),
                "poll on the listener: {}",
                if r == 0 {
                    "timed out".to_string()
                } else {
                    e.to_string()
                }
            );
        }
    }
    // SAFETY: an all-zero seccomp_notif is what RECV expects (it refuses a non-zeroed one).
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: RECV writes one `seccomp_notif` through the pointer, valid here.
        let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &raw mut notif) };
        if r == 0 {
            return notif.id;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EINTR), "NOTIF_RECV: {e}");
    }
}

/// Answers notification `id` with "returned 0": its caller returns from the call.
fn answer(listener: RawFd, id: u64) {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    // SAFETY: SEND reads one `seccomp_notif_resp` through the pointer, valid here.
    let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &raw mut resp) };
    assert_eq!(r, 0, "NOTIF_SEND: {}", std::io::Error::last_os_error());
}

/// `n` intercepted calls from a fresh filtered thread to a fresh supervisor.
fn seccomp_round_trips(sync: bool, side: Side, wait: SupervisorWait, n: u64) -> Duration {
    let (fd_tx, fd_rx) = mpsc::channel::<RawFd>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let listener = install_filter().expect("probed");
        if sync {
            set_sync(&listener).expect("probed");
        }
        fd_tx.send(listener.as_raw_fd()).unwrap();
        go_rx.recv().unwrap();
        let start = Instant::now();
        for _ in 0..n {
            intercepted_call();
        }
        let elapsed = start.elapsed();
        drop(listener);
        elapsed
    });
    // The listener stays open in the client thread until after its last call.
    let listener = fd_rx.recv().unwrap();
    let supervisor = match side {
        Side::Thread => {
            let handle = std::thread::spawn(move || supervise(listener, wait, n));
            Supervisor::Thread(handle)
        }
        Side::Process => {
            // SAFETY: the child runs `supervise` (ioctls on a descriptor it inherited, no
            // allocation, no locks) and leaves with `_exit`, never returning into our code.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
            if pid == 0 {
                supervise(listener, wait, n);
                // SAFETY: ends the child without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            Supervisor::Process(pid)
        }
    };
    go_tx.send(()).unwrap();
    let elapsed = client.join().unwrap();
    match supervisor {
        Supervisor::Thread(handle) => handle.join().unwrap(),
        Supervisor::Process(pid) => {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is a valid out-pointer.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0, "the supervisor process failed");
        }
    }
    elapsed
}

enum Supervisor {
    Thread(std::thread::JoinHandle<()>),
    Process(libc::pid_t),
}
