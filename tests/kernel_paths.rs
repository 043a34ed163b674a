//! The kernel paths, on a kernel that has them: FUTEX_SWAP under `swap` and FlipCall, and
//! FUTEX2_SPIN under the owner wait. No packaged kernel has either; `scripts/kernel-matrix.sh
//! patched` boots futexkit's test kernel (`scripts/kernel/`) and names them in
//! `FUTEXKIT_TEST_EXPECT_CAPS`. Each test does nothing unless that variable expects its
//! capability; then it fails where futexkit does not take the kernel path, and reports each path
//! it saw run (`KM-KERNEL-PATH` lines, counted by the matrix).
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::{blocked, kernel_path};

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futexkit::flipcall;
use futexkit::futex::{futex2, Deadline, Error, Futex};
use futexkit::spin::{wait_on_owner, Spinner};
use futexkit::swap::{self, SwapMode};
use futexkit::Capability;

const SWAP_ROUNDS: u64 = 20_000;

/// The tests here run one at a time: each needs the machine's CPUs for its own threads (an
/// owner that must stay on a CPU, a thread pinned beside a rival).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Two threads pass a turn back and forth with `swap_in(SwapMode::Kernel, ..)`: every call is
/// one FUTEX_SWAP, and every one must answer as the SWAP RFC says (woken, or EAGAIN when the
/// turn came back before it slept), never an error a fallback would hide. The RFC also moves
/// the woken thread to the swapping thread's CPU: a thread woken by a swap mostly runs where
/// its partner ran when it handed over.
#[test]
fn swap_hands_off_with_kernel_futex_swap() {
    if !kernel_path::expected("swap") {
        return;
    }
    let _alone = alone();
    assert_eq!(
        swap::mode(),
        SwapMode::Kernel,
        "auto mode must pick the kernel"
    );
    let turn = Arc::new(Futex::new(0));
    let counter = Arc::new(AtomicU64::new(0));
    let handing_cpu = Arc::new(AtomicU32::new(u32::MAX));
    let side = |me: u32, turn: Arc<Futex>, counter: Arc<AtomicU64>, handing_cpu: Arc<AtomicU32>| {
        move || {
            let other = 1 - me;
            let (mut woken, mut woken_on_partners_cpu) = (0u64, 0u64);
            let mut slept_in_swap = false;
            for round in 0..SWAP_ROUNDS {
                let limit = Deadline::after(Duration::from_secs(10));
                while turn.load(Ordering::Acquire) != me {
                    assert!(
                        !limit.has_passed(),
                        "the partner never handed the turn back"
                    );
                    let _ = turn.wait(other, Some(limit));
                }
                if slept_in_swap {
                    woken += 1;
                    if current_cpu() == handing_cpu.load(Ordering::Relaxed) {
                        woken_on_partners_cpu += 1;
                    }
                }
                let c = counter.load(Ordering::Relaxed);
                assert_eq!(c % 2, u64::from(me), "double turn");
                counter.store(c + 1, Ordering::Relaxed);
                handing_cpu.store(current_cpu(), Ordering::Relaxed);
                turn.store(other, Ordering::Release);
                if me == 1 && round + 1 == SWAP_ROUNDS {
                    turn.wake(1).unwrap();
                    continue;
                }
                let limit = Some(Deadline::after(Duration::from_secs(10)));
                slept_in_swap = match swap::swap_in(SwapMode::Kernel, &turn, other, &turn, limit) {
                    Ok(()) => true,
                    Err(Error::ValueChanged) => false,
                    Err(e) => panic!("FUTEX_SWAP failed: {e}"),
                };
            }
            (woken, woken_on_partners_cpu)
        }
    };
    let b = std::thread::spawn(side(
        1,
        Arc::clone(&turn),
        Arc::clone(&counter),
        Arc::clone(&handing_cpu),
    ));
    let (woken_a, moved_a) = side(0, Arc::clone(&turn), Arc::clone(&counter), handing_cpu)();
    let (woken_b, moved_b) = b.join().unwrap();
    assert_eq!(counter.load(Ordering::Relaxed), 2 * SWAP_ROUNDS);
    let (woken, moved) = (woken_a + woken_b, moved_a + moved_b);
    assert!(woken > 0, "no FUTEX_SWAP ever slept");
    assert!(
        moved * 2 >= woken,
        "only {moved} of {woken} threads woken by FUTEX_SWAP ran on the swapping thread's CPU"
    );
    kernel_path::ran(
        "swap-handoff",
        &format!(
            "{} FUTEX_SWAP calls; {woken} slept and were woken, {moved} of those on the \
             swapping thread's CPU",
            2 * SWAP_ROUNDS - 1
        ),
    );
}

/// The CPU this thread runs on.
fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).expect("sched_getcpu failed")
}

/// `/proc/self/task/TID/syscall` of a thread blocked in a syscall: its number and first
/// arguments, `None` while it runs.
fn blocked_syscall(tid: u32) -> Option<Vec<u64>> {
    let line = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 3 || fields[0] == "running" || fields[0] == "-1" {
        return None;
    }
    let number = fields[0].parse().ok()?;
    let mut out = vec![number];
    for f in &fields[1..] {
        out.push(u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()?);
    }
    Some(out)
}

const FUTEX_SYSCALL: u64 = libc::SYS_futex as u64;
/// futex2 `futex_wait` (not yet in every libc's syscall list).
const FUTEX_WAIT_SYSCALL: u64 = 455;
const FUTEX_SWAP_PRIVATE: u64 = 13 | 128;

/// A FlipCall server that answers a sleeping client hands over with FUTEX_SWAP and then waits
/// in it: seen from outside, the server thread sits in `futex(.., FUTEX_SWAP|PRIVATE, ..)`.
#[test]
fn flipcall_hands_over_with_kernel_futex_swap() {
    if !kernel_path::expected("swap") {
        return;
    }
    let _alone = alone();
    assert_eq!(swap::mode(), SwapMode::Kernel);
    const CALLS: u32 = 50;
    let (mut client, mut server) = flipcall::pair(64).unwrap();
    let server_tid = Arc::new(AtomicU32::new(0));
    let serving = {
        let server_tid = Arc::clone(&server_tid);
        std::thread::spawn(move || {
            server_tid.store(blocked::gettid(), Ordering::Release);
            let mut len = server.recv_first().unwrap();
            for _ in 0..CALLS {
                // Long enough for the client to stop spinning and sleep on the word.
                std::thread::sleep(Duration::from_millis(5));
                len = match server.send_recv(len) {
                    Ok(len) => len,
                    Err(flipcall::Error::Shutdown) => return,
                    Err(e) => panic!("server: {e}"),
                };
            }
        })
    };
    client.connect().unwrap();
    while server_tid.load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    let tid = server_tid.load(Ordering::Acquire);
    let mut seen_in_swap = 0;
    for i in 0..CALLS {
        client.data_mut()[0] = i as u8;
        assert_eq!(client.send_recv(1).unwrap(), 1);
        // The server handed the turn over to us, asleep; it now waits for the next call.
        let limit = Instant::now() + Duration::from_millis(20);
        while Instant::now() < limit {
            if let Some(call) = blocked_syscall(tid) {
                if call[0] == FUTEX_SYSCALL && call.get(2) == Some(&FUTEX_SWAP_PRIVATE) {
                    seen_in_swap += 1;
                    break;
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    client.shutdown_handle().shutdown();
    drop(client);
    serving.join().unwrap();
    assert!(
        seen_in_swap > 0,
        "the FlipCall server never waited in FUTEX_SWAP after answering a sleeping client"
    );
    kernel_path::ran(
        "flipcall-swap",
        &format!("server seen waiting in FUTEX_SWAP after {seen_in_swap} of {CALLS} replies"),
    );
}

const SPIN_ROUNDS: usize = 20;

/// FUTEX2_SPIN, as the 2024 RFC v2 defines it: the kernel spins while the owner runs (the
/// waiter then returns without having slept), and sleeps otherwise; an owner that does not exist
/// answers EAGAIN (and leaves no futex lock behind), a kernel-thread owner EPERM.
#[test]
fn owner_wait_spins_in_the_kernel() {
    if !kernel_path::expected("spin") {
        return;
    }
    let _alone = alone();
    let caps = futexkit::capabilities();
    assert!(
        caps.has(Capability::Spin),
        "FUTEX2_SPIN detected but not in use (FUTEXKIT_ENABLE=spin missing?): {}",
        caps.detection(Capability::Spin).evidence()
    );

    // An owner that runs (spins in user space) and lets go: the waiter, inside a FUTEX2_SPIN
    // call, spins in the kernel and is woken without a voluntary context switch, at least in
    // some rounds (a round whose waiter came too late to call at all does not count).
    let mut returned_without_sleeping = 0;
    let mut switches_per_round = Vec::new();
    for _ in 0..SPIN_ROUNDS {
        let word = Arc::new(Futex::new(0));
        let go = Arc::new(AtomicBool::new(false));
        let owner = {
            let (word, go) = (Arc::clone(&word), Arc::clone(&go));
            std::thread::spawn(move || {
                word.store(blocked::gettid(), Ordering::Release);
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                // Far longer than the user-space spin budget, short enough that the owner is
                // seldom preempted meanwhile.
                let until = Instant::now() + Duration::from_millis(2);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                word.store(0, Ordering::Release);
                word.wake(1).unwrap();
            })
        };
        let owner_tid = published_owner(&word);
        let switches_before = voluntary_switches();
        go.store(true, Ordering::Release);
        let woken = wait_while_owned(&word, owner_tid);
        let slept = voluntary_switches() - switches_before;
        if woken > 0 && slept == 0 {
            returned_without_sleeping += 1;
        }
        switches_per_round.push((woken, slept));
        owner.join().unwrap();
    }
    assert!(
        returned_without_sleeping > 0,
        "no FUTEX2_SPIN call was woken without sleeping ((calls woken, voluntary switches) per \
         round: {switches_per_round:?}): the kernel never spun on a running owner"
    );

    // An owner that is off CPU (asleep): the waiter sleeps until the wake. The waiter goes
    // through the policy entry point, `spin::wait_on_owner`, and the owner sees it asleep inside
    // `futex_wait` with the SPIN flag.
    let word = Arc::new(Futex::new(0));
    let waiter_tid = blocked::gettid();
    let spin_flag = caps.spin_flag().expect("SPIN detected without a flag");
    let owner = {
        let word = Arc::clone(&word);
        std::thread::spawn(move || {
            word.store(blocked::gettid(), Ordering::Release);
            let limit = Instant::now() + Duration::from_secs(5);
            let mut seen_in_spin_wait = false;
            while !seen_in_spin_wait && Instant::now() < limit {
                seen_in_spin_wait = blocked_syscall(waiter_tid).is_some_and(|call| {
                    call[0] == FUTEX_WAIT_SYSCALL
                        && call
                            .get(4)
                            .is_some_and(|flags| flags & u64::from(spin_flag) != 0)
                });
                std::thread::sleep(Duration::from_millis(1));
            }
            word.store(0, Ordering::Release);
            word.wake(1).unwrap();
            seen_in_spin_wait
        })
    };
    let owner_tid = published_owner(&word);
    let switches_before = voluntary_switches();
    let spinner = Spinner::new();
    let deadline = Deadline::after(Duration::from_secs(10));
    while word.load(Ordering::Acquire) == owner_tid {
        wait_on_owner(&*word, owner_tid, &spinner, Some(deadline)).unwrap();
    }
    let slept = voluntary_switches() - switches_before;
    assert!(
        owner.join().unwrap(),
        "spin::wait_on_owner was never seen asleep in futex_wait with FUTEX2_SPIN"
    );
    assert!(slept > 0, "a waiter on a sleeping owner never slept");

    // No such owner: EAGAIN, and the word's futex bucket is free afterwards (a leaked bucket lock
    // would hang the timed wait below). A kernel that waited instead times out: a failure, not
    // a hang.
    let nobody = 0x3fff_fff0;
    let word = Futex::new(nobody);
    let soon = || Some(Deadline::after(Duration::from_secs(1)));
    assert_eq!(
        futex2::wait_spinning_on_owner(&word, nobody, soon()),
        Err(Error::ValueChanged)
    );
    assert_eq!(
        word.wait(nobody, Some(Deadline::after(Duration::from_millis(10)))),
        Err(Error::TimedOut)
    );
    // A kernel thread (kthreadd, TID 2 in the guest's PID namespace) as the owner: EPERM.
    let kthread = Futex::new(2);
    assert_eq!(
        futex2::wait_spinning_on_owner(&kthread, 2, soon()),
        Err(Error::PermissionDenied)
    );
    kernel_path::ran(
        "spin",
        &format!(
            "FUTEX2_SPIN at {:#x}: {returned_without_sleeping} of {SPIN_ROUNDS} waits on a running owner \
             returned without sleeping; spin::wait_on_owner slept in FUTEX2_SPIN on a sleeping \
             owner; missing owner and kernel-thread owner answered as the RFC says",
            caps.spin_flag().unwrap_or_default()
        ),
    );
}

/// The TID an owner thread stores in `word` (0 until it has).
fn published_owner(word: &Futex) -> u32 {
    loop {
        match word.load(Ordering::Acquire) {
            0 => std::hint::spin_loop(),
            tid => return tid,
        }
    }
}

/// Waits with `FUTEX2_SPIN` until `word` no longer holds `owner_tid` (10 s at most); returns
/// how many of the calls were woken (rather than finding the word changed).
fn wait_while_owned(word: &Futex, owner_tid: u32) -> usize {
    let deadline = Deadline::after(Duration::from_secs(10));
    let mut woken = 0;
    while word.load(Ordering::Acquire) == owner_tid {
        match futex2::wait_spinning_on_owner(word, owner_tid, Some(deadline)) {
            Ok(()) => woken += 1,
            Err(Error::ValueChanged) => {}
            Err(e) => panic!("FUTEX2_SPIN wait failed: {e}"),
        }
    }
    woken
}

/// This thread's voluntary context switches so far.
fn voluntary_switches() -> i64 {
    // SAFETY: `usage` is a valid out-pointer for getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid pointer.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(r, 0);
    usage.ru_nvcsw
}

/// Set in the child [`rseq_slice_extension_grants_a_request`] starts.
const RSEQ_CHILD: &str = "FUTEXKIT_TEST_RSEQ_SLICE_CHILD";

/// The rseq time-slice extension: a thread that asks for more time while another thread wants
/// its CPU is granted it. futexkit only probes the extension (`prctl` GET); this checks the
/// probe's "present" the way the swap probe's two-thread check does, from a child process
/// whose threads glibc leaves unregistered (`glibc.pthread.rseq=0`): glibc registers the
/// original 32-byte area, and the extension needs the larger, current one.
#[test]
fn rseq_slice_extension_grants_a_request() {
    if std::env::var_os(RSEQ_CHILD).is_some() {
        let grants = rseq_child::request_until_granted();
        println!("{RSEQ_CHILD} grants {grants}");
        return;
    }
    if !kernel_path::expected("rseq_slice") {
        return;
    }
    let _alone = alone();
    assert!(futexkit::capabilities().has(Capability::RseqSlice));
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "rseq_slice_extension_grants_a_request",
            "--exact",
            "--nocapture",
        ])
        .env(RSEQ_CHILD, "1")
        .env("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let marker = format!("{RSEQ_CHILD} grants ");
    let grants = stdout
        .split(&marker)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the child reported no grants line");
    kernel_path::ran(
        "rseq-slice",
        &format!("{grants} slice-extension requests granted (then rseq_slice_yield)"),
    );
}

mod rseq_child {
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const RSEQ_SIG: u32 = 0x5305_3053;
    const PR_RSEQ_SLICE_EXTENSION: libc::c_int = 79;
    const PR_RSEQ_SLICE_EXTENSION_SET: libc::c_ulong = 2;
    const PR_RSEQ_SLICE_EXT_ENABLE: libc::c_ulong = 1;
    const SYS_RSEQ_SLICE_YIELD: libc::c_long = 471;
    const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
    const AT_RSEQ_ALIGN: libc::c_ulong = 28;
    /// `struct rseq`: `slice_ctrl.request` and `.granted` are bytes 28 and 29.
    const REQUEST: usize = 28;
    const GRANTED: usize = 29;

    /// A thread's rseq area, as large and aligned as any 7.x kernel asks.
    #[repr(C, align(256))]
    struct RseqArea([AtomicU8; 256]);

    /// Registers an rseq area for this thread, enables the extension, and with a busy thread
    /// pinned to the same CPU asks for extensions until some are granted (each grant answered
    /// with `rseq_slice_yield`, as the ABI requires). Returns how many were granted.
    pub(super) fn request_until_granted() -> u32 {
        // SAFETY: getauxval reads this process's auxiliary vector.
        let (size, align) = unsafe {
            (
                libc::getauxval(AT_RSEQ_FEATURE_SIZE),
                libc::getauxval(AT_RSEQ_ALIGN),
            )
        };
        assert!(
            size > 32 && size <= 256 && align <= 256,
            "feature size {size}, align {align}"
        );
        let area: &'static RseqArea = Box::leak(Box::new(RseqArea(std::array::from_fn(|_| {
            AtomicU8::new(0)
        }))));
        // SAFETY: the area is leaked (lives as long as the thread), aligned and `size` long;
        // the kernel writes into it only while this thread runs.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rseq,
                area as *const RseqArea,
                size as u32,
                0,
                RSEQ_SIG,
            )
        };
        assert_eq!(
            r,
            0,
            "rseq registration: {} (is glibc's own registration off?)",
            std::io::Error::last_os_error()
        );
        // SAFETY: prctl with integer arguments.
        let r = unsafe {
            libc::prctl(
                PR_RSEQ_SLICE_EXTENSION,
                PR_RSEQ_SLICE_EXTENSION_SET,
                PR_RSEQ_SLICE_EXT_ENABLE,
                0,
                0,
            )
        };
        assert_eq!(r, 0, "enable: {}", std::io::Error::last_os_error());

        pin_to_cpu0();
        let stop = Arc::new(AtomicBool::new(false));
        let rival = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                pin_to_cpu0();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let request = &area.0[REQUEST];
        let granted = &area.0[GRANTED];
        // The critical section makes no call at all (a syscall, even a clock read that falls
        // back to one, would end a grant): it is a counted spin of about 20 ms.
        let spins_per_section = {
            let start = Instant::now();
            let mut looks = 0u64;
            while start.elapsed() < Duration::from_millis(20) {
                for _ in 0..1_000 {
                    std::hint::black_box(granted.load(Ordering::Relaxed));
                }
                looks += 1_000;
            }
            looks
        };
        let mut grants = 0;
        let give_up = Instant::now() + Duration::from_secs(20);
        while grants < 3 && Instant::now() < give_up {
            // A request while a grant is still shown breaks the ABI (the kernel kills the
            // thread): wait until the yield's reschedule has cleared it.
            if granted.load(Ordering::Relaxed) != 0 {
                std::thread::yield_now();
                continue;
            }
            request.store(1, Ordering::Relaxed);
            let mut spins = 0;
            let mut seen_granted = false;
            while spins < spins_per_section && !seen_granted {
                seen_granted = granted.load(Ordering::Relaxed) != 0;
                std::hint::spin_loop();
                spins += 1;
            }
            request.store(0, Ordering::Relaxed);
            if seen_granted {
                grants += 1;
                // The grant is over once the section is: give the CPU back, as the ABI asks.
                // SAFETY: a syscall without arguments.
                unsafe { libc::syscall(SYS_RSEQ_SLICE_YIELD) };
            }
        }
        stop.store(true, Ordering::Relaxed);
        rival.join().unwrap();
        assert!(grants > 0, "no request was granted in 20 s");
        grants
    }

    fn pin_to_cpu0() {
        // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity get valid pointers.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
    }
}
