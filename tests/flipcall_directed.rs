//! FlipCall's directed hand-offs (the opt-in seccomp mode): calls carry data in one process and
//! across two, the server is seen asleep in its intercepted call, a filtered thread's other
//! system calls answer as before, a dead peer is `PeerDied` on either side, misuse is refused,
//! and on kernels without the synchronous wake-ups the probe says so and the channel hands off
//! as before.
//!
//! Under the kernel matrix (`FUTEXKIT_TEST_EXPECT_CAPS` set) the mode must be available on 6.6
//! and later, where each test reports `KM-KERNEL-PATH flipcall-directed`, and must report
//! `KernelTooOld` before, where each reports `flipcall-directed-fallback`; the matrix counts
//! both. Elsewhere a machine that refuses the filter (a sandbox) runs the fallback only.
#![cfg(not(model))]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futexkit::flipcall::{
    self, directed_wakeups_available, DirectedWakeups, Endpoint, Error, Misuse, PacketWindow,
    Unavailable,
};
use futexkit_support::{blocked, kernel_path};

/// The futex operation of the intercepted call (`src/futex/sys/notify.rs`): how a test sees,
/// from outside, that the server sleeps in it.
const INTERCEPTED_OP: u64 = 0x4655_0000;

/// Longer than any honest step takes: a test that waits this long has hung.
const HANG: Duration = Duration::from_secs(60);

/// Whether this kernel is known to have the synchronous wake-ups (mainline 6.6).
fn kernel_has_sync_wakeups() -> bool {
    blocked::kernel_version() >= (6, 6)
}

fn under_matrix() -> bool {
    std::env::var_os("FUTEXKIT_TEST_EXPECT_CAPS").is_some()
}

/// Whether this test runs the mode (true) or the fallback (false), checking the probe's answer
/// against the kernel under the matrix, and leaving the line the matrix counts.
fn mode_runs(test: &str) -> bool {
    match directed_wakeups_available() {
        Ok(()) => {
            assert!(
                kernel_has_sync_wakeups(),
                "directed hand-offs probed available on a kernel before 6.6"
            );
            kernel_path::ran("flipcall-directed", test);
            true
        }
        Err(why) => {
            if under_matrix() {
                assert!(
                    !kernel_has_sync_wakeups(),
                    "directed hand-offs unavailable on a 6.6+ kernel under the matrix: {why}"
                );
                assert_eq!(why, Unavailable::KernelTooOld, "{why}");
            }
            eprintln!("{test}: directed hand-offs unavailable ({why}); the fallback runs");
            kernel_path::ran("flipcall-directed-fallback", test);
            false
        }
    }
}

/// The calling thread's system call, if it is blocked in one: its number and arguments
/// (`/proc/.../syscall`).
fn blocked_syscall(task: &str) -> Option<Vec<u64>> {
    let line = std::fs::read_to_string(format!("{task}/syscall")).ok()?;
    let mut fields = line.split_whitespace();
    let nr: u64 = fields.next()?.parse().ok()?;
    let mut call = vec![nr];
    for field in fields.take(6) {
        call.push(u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()?);
    }
    Some(call)
}

/// Waits until the task at `task` (a `/proc` directory) is blocked in the intercepted call.
fn wait_until_in_intercepted_call(task: &str) {
    let start = Instant::now();
    loop {
        if blocked_syscall(task).is_some_and(|call| {
            call.len() >= 3 && call[0] == libc::SYS_futex as u64 && call[2] == INTERCEPTED_OP
        }) {
            return;
        }
        assert!(
            start.elapsed() < HANG,
            "{task} never blocked in the intercepted call"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Serves `server` (opting in first when `directed`) until the channel shuts down: each reply
/// is the request reversed, with the request's first byte added to each byte.
fn serve(server: &mut Endpoint, wakeups: &mpsc::Sender<Option<DirectedWakeups>>, directed: bool) {
    let opted = if directed {
        Some(server.direct_wakeups().expect("probed available"))
    } else {
        assert!(matches!(
            server.direct_wakeups(),
            Err(Error::DirectedUnavailable(_))
        ));
        assert!(!server.is_directed());
        None
    };
    wakeups.send(opted).unwrap();
    let mut len = match server.recv_first() {
        Ok(len) => len,
        Err(Error::Shutdown) => return,
        Err(err) => panic!("server: {err}"),
    };
    loop {
        let data = server.data_mut();
        let add = data.first().copied().unwrap_or(0);
        data[..len].reverse();
        data[..len]
            .iter_mut()
            .for_each(|b| *b = b.wrapping_add(add));
        len = match server.send_recv(len) {
            Ok(len) => len,
            Err(Error::Shutdown) => return,
            Err(err) => panic!("server: {err}"),
        };
    }
}

/// One call of `client`, checked against `serve`'s answer.
fn checked_call(client: &mut Endpoint, len: usize, seed: u8) {
    let request: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
    client.data_mut()[..len].copy_from_slice(&request);
    let got = client.send_recv(len).expect("call");
    assert_eq!(got, len);
    let add = request.first().copied().unwrap_or(0);
    let want: Vec<u8> = request.iter().rev().map(|b| b.wrapping_add(add)).collect();
    assert_eq!(client.data()[..len], want[..]);
}

#[test]
fn calls_carry_data_and_the_server_sleeps_in_its_call() {
    let directed = mode_runs("calls_carry_data_and_the_server_sleeps_in_its_call");
    let (mut client, mut server) = flipcall::pair(4096).unwrap();
    let (wakeups_tx, wakeups_rx) = mpsc::channel();
    let (tid_tx, tid_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        tid_tx.send(blocked::gettid()).unwrap();
        serve(&mut server, &wakeups_tx, directed);
    });
    let server_tid = tid_rx.recv().unwrap();
    if let Some(wakeups) = wakeups_rx.recv().unwrap() {
        client.accept_directed_wakeups(wakeups).unwrap();
        assert!(client.is_directed());
    }
    client.connect_timeout(HANG).unwrap();
    for round in 0..20_000u32 {
        checked_call(&mut client, (round % 4097) as usize, round as u8);
        if directed && round % 5_000 == 0 {
            // The server, its spin long over, sleeps in the intercepted call; the next call
            // wakes it by answering that call.
            wait_until_in_intercepted_call(&format!("/proc/self/task/{server_tid}"));
        }
    }
    drop(client);
    server.join().unwrap();
}

#[test]
fn a_client_that_sleeps_is_woken_by_the_servers_call() {
    let directed = mode_runs("a_client_that_sleeps_is_woken_by_the_servers_call");
    let (mut client, mut server) = flipcall::pair(64).unwrap();
    let (wakeups_tx, wakeups_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let wakeups = directed.then(|| server.direct_wakeups().unwrap());
        wakeups_tx.send(wakeups).unwrap();
        let mut len = server.recv_first().unwrap();
        for _ in 0..50 {
            // Answer late, so that the client has gone to sleep on the listener.
            go_rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(2));
            server.data_mut()[0] = server.data()[0].wrapping_mul(3);
            len = match server.send_recv(len) {
                Ok(len) => len,
                Err(Error::Shutdown) => return,
                Err(err) => panic!("server: {err}"),
            };
        }
        assert!(matches!(server.recv(), Err(Error::Shutdown)));
    });
    if let Some(wakeups) = wakeups_rx.recv().unwrap() {
        client.accept_directed_wakeups(wakeups).unwrap();
    }
    client.connect_timeout(HANG).unwrap();
    for n in 0..50u8 {
        client.data_mut()[0] = n;
        go_tx.send(()).unwrap();
        assert_eq!(client.send_recv_timeout(1, HANG).unwrap(), 1);
        assert_eq!(client.data()[0], n.wrapping_mul(3));
    }
    drop(client);
    server.join().unwrap();
}

/// What a run of ordinary system calls answered: each result, or its errno.
fn workload(dir: &std::path::Path, tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let path = dir.join(format!("flipcall-directed-{tag}-{}", std::process::id()));
    let kind = |e: std::io::Error| e.kind();
    out.push(format!(
        "{:?}",
        std::fs::write(&path, b"seccomp").map_err(kind)
    ));
    out.push(format!("{:?}", std::fs::read(&path).map_err(kind)));
    out.push(format!("{:?}", std::fs::remove_file(&path).map_err(kind)));
    out.push(format!("{:?}", std::fs::read(&path).map_err(kind)));
    let word = std::sync::atomic::AtomicU32::new(0);
    let futex = |op: i32| {
        // SAFETY: futex calls on a live word of ours; an unknown operation touches nothing.
        let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, 1, 0, 0, 0) };
        let errno = (r < 0).then(|| std::io::Error::last_os_error().raw_os_error());
        (r, errno)
    };
    out.push(format!("{:?}", futex(libc::FUTEX_WAKE)));
    // A wait on a word that does not hold the value: EAGAIN.
    // SAFETY: a futex wait on our live word with an expected value it does not hold.
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, 7, 0, 0, 0) };
    out.push(format!(
        "{r} {:?}",
        std::io::Error::last_os_error().raw_os_error()
    ));
    // Operations next to the intercepted one, and the intercepted number with another
    // command bit, go to the kernel (and fail with ENOSYS there).
    out.push(format!("{:?}", futex(0x4655_0001)));
    out.push(format!("{:?}", futex(0x4654_0000)));
    // SAFETY: getppid and getuid take no arguments.
    out.push(format!("{} {}", unsafe { libc::getppid() }, unsafe {
        libc::getuid()
    }));
    // SAFETY: close on a descriptor number nobody uses: EBADF.
    let r = unsafe { libc::close(1 << 20) };
    out.push(format!(
        "{r} {:?}",
        std::io::Error::last_os_error().raw_os_error()
    ));
    let child = std::process::Command::new("true").status();
    out.push(format!(
        "{:?}",
        child.map(|s| s.success()).map_err(|e| e.kind())
    ));
    out
}

#[test]
fn a_filtered_threads_other_system_calls_answer_as_before() {
    let directed = mode_runs("a_filtered_threads_other_system_calls_answer_as_before");
    let dir = std::env::temp_dir();
    let unfiltered = workload(&dir, "plain");
    let filtered = std::thread::spawn(move || {
        let (_client, mut server) = flipcall::pair(8).unwrap();
        let wakeups = server.direct_wakeups();
        assert_eq!(wakeups.is_ok(), directed);
        let result = workload(&dir, "filtered");
        drop(wakeups);
        result
    })
    .join()
    .unwrap();
    assert_eq!(filtered, unfiltered);
}

#[test]
fn dropping_the_client_ends_the_servers_call() {
    if !mode_runs("dropping_the_client_ends_the_servers_call") {
        return;
    }
    let (mut client, mut server) = flipcall::pair(8).unwrap();
    let (tid_tx, tid_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        tid_tx
            .send((blocked::gettid(), server.direct_wakeups().unwrap()))
            .unwrap();
        server.recv_first()
    });
    let (tid, wakeups) = tid_rx.recv().unwrap();
    client.accept_directed_wakeups(wakeups).unwrap();
    client.connect_timeout(HANG).unwrap();
    wait_until_in_intercepted_call(&format!("/proc/self/task/{tid}"));
    drop(client);
    assert!(matches!(server.join().unwrap(), Err(Error::Shutdown)));
}

#[test]
fn a_shutdown_reaches_a_sleeping_client_within_a_slice() {
    if !mode_runs("a_shutdown_reaches_a_sleeping_client_within_a_slice") {
        return;
    }
    let (mut client, mut server) = flipcall::pair(8).unwrap();
    let stop = client.shutdown_handle();
    let (wakeups_tx, wakeups_rx) = mpsc::channel();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        wakeups_tx.send(server.direct_wakeups().unwrap()).unwrap();
        server.recv_first().unwrap();
        // Hold the turn until the client sleeps; then the shutdown comes from a third thread.
        held_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        stop.shutdown();
        // The turn is still this side's: the next call reports the shutdown.
        assert!(matches!(server.send_recv(0), Err(Error::Shutdown)));
    });
    client
        .accept_directed_wakeups(wakeups_rx.recv().unwrap())
        .unwrap();
    client.connect_timeout(HANG).unwrap();
    assert!(matches!(client.send_recv(0), Err(Error::Shutdown)));
    held_rx.recv().unwrap();
    server.join().unwrap();
}

/// The misuse a call was refused for.
fn misuse<T>(result: Result<T, Error>) -> Misuse {
    match result {
        Err(Error::DirectedMisuse(m)) => m,
        Err(err) => panic!("{err}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn misuse_is_refused() {
    if !mode_runs("misuse_is_refused") {
        return;
    }
    let (mut client, mut server) = flipcall::pair(8).unwrap();
    assert_eq!(misuse(client.direct_wakeups()), Misuse::NotAtStart);
    let (moved_tx, moved_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let wakeups = server.direct_wakeups().unwrap();
        assert_eq!(misuse(server.direct_wakeups()), Misuse::NotAtStart);
        assert_eq!(
            misuse(server.recv_first_timeout(Duration::from_millis(1))),
            Misuse::Timeout
        );
        assert_eq!(
            misuse(flipcall::Server::new().attach(server).map(drop)),
            Misuse::ManyChannelServer
        );
        moved_tx.send(wakeups).unwrap();
    })
    .join()
    .unwrap();
    let wakeups = moved_rx.recv().unwrap();
    client.accept_directed_wakeups(wakeups).unwrap();
    // A second listener for a client that has one.
    let (_other_client, mut other_server) = flipcall::pair(8).unwrap();
    let other = std::thread::spawn(move || other_server.direct_wakeups().unwrap())
        .join()
        .unwrap();
    assert_eq!(
        misuse(client.accept_directed_wakeups(other)),
        Misuse::NotAtStart
    );
    // A server endpoint moved off the thread that opted in.
    let (mut client2, mut server2) = flipcall::pair(8).unwrap();
    let (server2, wakeups2) = std::thread::spawn(move || {
        let wakeups = server2.direct_wakeups().unwrap();
        (server2, wakeups)
    })
    .join()
    .unwrap();
    let mut server2 = server2;
    client2.accept_directed_wakeups(wakeups2).unwrap();
    assert_eq!(misuse(server2.recv_first()), Misuse::WrongThread);
    assert!(!server2.holds_turn());
}

#[test]
fn a_descriptor_that_is_not_a_listener_is_refused() {
    let file = std::fs::File::open("/dev/null").unwrap();
    assert!(matches!(
        DirectedWakeups::from_fd(OwnedFd::from(file)),
        Err(Error::DirectedUnavailable(Unavailable::NotAListener))
    ));
}

/// Initialises the process-wide state a flipcall call and the probe may touch, so a forked
/// child never finds it half-initialised by a thread that does not exist in the child.
fn warm_up_before_fork() {
    let _ = futexkit::capabilities();
    futexkit::spin::Spinner::new().spin_until(|| false);
    let _ = directed_wakeups_available();
}

/// Forks; the child runs `child` and leaves with `_exit` (its result as the status).
fn fork_child(child: impl FnOnce() -> i32) -> libc::pid_t {
    warm_up_before_fork();
    // SAFETY: the child runs only flipcall calls on memory mapped before the fork and plain
    // system calls, then leaves with _exit. The process-wide state they touch was initialised
    // above (glibc's fork also holds the malloc locks, so the child may allocate).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child();
        // SAFETY: ends the child without running the parent's destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    pid
}

fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: signals and reaps our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
    }
}

/// A pipe: (read end, write end).
fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are new and ours.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

#[test]
fn a_server_process_serves_and_its_death_is_peer_died() {
    use std::io::{Read, Write};
    if !mode_runs("a_server_process_serves_and_its_death_is_peer_died") {
        return;
    }
    let window = PacketWindow::new(256).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let (mut fd_rx, mut fd_tx) = pipe();
    let (mut ack_rx, mut ack_tx) = pipe();
    let pid = fork_child(|| {
        let Ok(mut server) = Endpoint::server(&window) else {
            return 2;
        };
        let Ok(wakeups) = server.direct_wakeups() else {
            return 3;
        };
        let listener = wakeups.into_fd();
        let _ = fd_tx.write_all(&listener.as_raw_fd().to_le_bytes());
        let _ = ack_rx.read_exact(&mut [0]);
        // The parent holds its copy now: this one goes, so the client holds the only one.
        drop(listener);
        let Ok(mut len) = server.recv_first() else {
            return 4;
        };
        for _ in 0..1_000 {
            let mut request = [0u8; 256];
            server.read_into(0, &mut request[..len]);
            request[..len].reverse();
            server.write_from(0, &request[..len]);
            len = match server.send_recv(len) {
                Ok(len) => len,
                Err(_) => return 5,
            };
        }
        // Never answer the last call: the parent kills this process.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let mut fd = [0u8; 4];
    fd_rx.read_exact(&mut fd).unwrap();
    let listener = futexkit_support::flipcall::fd_of_child(pid, i32::from_le_bytes(fd));
    client
        .accept_directed_wakeups(DirectedWakeups::from_fd(listener).unwrap())
        .unwrap();
    ack_tx.write_all(&[1]).unwrap();
    client.connect_timeout(HANG).unwrap();
    // The server process, its spin long over, sleeps in the intercepted call.
    wait_until_in_intercepted_call(&format!("/proc/{pid}"));
    for round in 0..1_000u32 {
        let len = (round % 257) as usize;
        let request: Vec<u8> = (0..len).map(|i| (i as u32 + round) as u8).collect();
        client.write_from(0, &request);
        assert_eq!(client.send_recv_timeout(len, HANG).unwrap(), len);
        let mut reply = vec![0; len];
        client.read_into(0, &mut reply);
        assert!(reply.iter().eq(request.iter().rev()));
    }
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        kill_and_reap(pid);
    });
    assert!(matches!(
        client.send_recv_timeout(0, HANG),
        Err(Error::PeerDied)
    ));
    killer.join().unwrap();
}

#[test]
fn a_client_process_death_is_peer_died_for_the_server() {
    use std::io::{Read, Write};
    if !mode_runs("a_client_process_death_is_peer_died_for_the_server") {
        return;
    }
    let window = PacketWindow::new(64).unwrap();
    let mut server = Endpoint::server(&window).unwrap();
    let (opted_tx, opted_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        opted_tx
            .send((blocked::gettid(), server.direct_wakeups().unwrap()))
            .unwrap();
        go_rx.recv().unwrap();
        let len = server.recv_first()?;
        // The client makes one call, then stops: this answer puts the server to sleep in its
        // call, which only the client's death ends.
        server.send_recv(len)
    });
    let (tid, wakeups) = opted_rx.recv().unwrap();
    let (mut called_rx, mut called_tx) = pipe();
    let pid = fork_child(|| {
        let Ok(mut client) = Endpoint::client(&window) else {
            return 2;
        };
        if client.accept_directed_wakeups(wakeups).is_err() {
            return 3;
        }
        if client.connect().is_err() || client.send_recv(0).is_err() {
            return 4;
        }
        let _ = called_tx.write_all(&[1]);
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    // The child holds the only copy of the listener now.
    go_tx.send(()).unwrap();
    // Once the client's call has returned, the server's next sleep in the intercepted call is
    // the one only the client's death ends (an earlier sighting may be `recv_first`'s).
    called_rx.read_exact(&mut [0]).unwrap();
    wait_until_in_intercepted_call(&format!("/proc/self/task/{tid}"));
    kill_and_reap(pid);
    assert!(matches!(server.join().unwrap(), Err(Error::PeerDied)));
}

#[test]
fn a_client_that_sees_a_shutdown_releases_the_sleeping_server() {
    if !mode_runs("a_client_that_sees_a_shutdown_releases_the_sleeping_server") {
        return;
    }
    let (mut client, mut server) = flipcall::pair(8).unwrap();
    let stop = client.shutdown_handle();
    let (opted_tx, opted_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        opted_tx
            .send((blocked::gettid(), server.direct_wakeups().unwrap()))
            .unwrap();
        server.recv_first()
    });
    let (tid, wakeups) = opted_rx.recv().unwrap();
    client.accept_directed_wakeups(wakeups).unwrap();
    client.connect_timeout(HANG).unwrap();
    wait_until_in_intercepted_call(&format!("/proc/self/task/{tid}"));
    // A shutdown from a third party does not reach the server in its call; the client's next
    // call sees it and closes the listener, which does, while the client endpoint lives on.
    stop.shutdown();
    assert!(matches!(client.send_recv(0), Err(Error::Shutdown)));
    assert!(matches!(server.join().unwrap(), Err(Error::Shutdown)));
    drop(client);
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Installs a handler for SIGUSR1 (`restart`: with `SA_RESTART`, so the kernel restarts an
/// interrupted call; else the call fails with `EINTR`), for `signals_interrupt_the_servers_call`.
fn handle_sigusr1(restart: bool) {
    // SAFETY: an all-zero sigaction is a valid value of this plain C struct; the handler only
    // returns, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = ignore_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, core::ptr::null_mut()),
            0
        );
    }
}

#[test]
fn signals_that_interrupt_the_servers_call_lose_no_hand_off() {
    if !mode_runs("signals_that_interrupt_the_servers_call_lose_no_hand_off") {
        return;
    }
    for restart in [false, true] {
        handle_sigusr1(restart);
        let (mut client, mut server) = flipcall::pair(64).unwrap();
        let (wakeups_tx, wakeups_rx) = mpsc::channel();
        let (tid_tx, tid_rx) = mpsc::channel();
        let server = std::thread::spawn(move || {
            tid_tx.send(blocked::gettid()).unwrap();
            serve(&mut server, &wakeups_tx, true);
        });
        let tid = tid_rx.recv().unwrap();
        client
            .accept_directed_wakeups(wakeups_rx.recv().unwrap().unwrap())
            .unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let signaller = {
            let done = std::sync::Arc::clone(&done);
            std::thread::spawn(move || {
                let mut sent = 0u32;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    // SAFETY: signals a live thread of this process, whose handler only returns.
                    unsafe {
                        libc::syscall(
                            libc::SYS_tgkill,
                            libc::getpid(),
                            tid as libc::c_int,
                            libc::SIGUSR1,
                        )
                    };
                    sent += 1;
                    std::thread::sleep(Duration::from_micros(20 + u64::from(sent % 7) * 30));
                }
                sent
            })
        };
        client.connect_timeout(HANG).unwrap();
        for round in 0..3_000u32 {
            checked_call(&mut client, (round % 65) as usize, round as u8);
            if round % 3 == 0 {
                // Let the server fall asleep in its call, where the signals find it.
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let sent = signaller.join().unwrap();
        assert!(sent > 0);
        drop(client);
        server.join().unwrap();
    }
}

#[test]
fn a_directed_clients_send_last_is_refused() {
    if !mode_runs("a_directed_clients_send_last_is_refused") {
        return;
    }
    let (mut client, mut server) = flipcall::pair(8).unwrap();
    let server = std::thread::spawn(move || {
        let wakeups = server.direct_wakeups().unwrap();
        (server, wakeups)
    });
    let (_server, wakeups) = server.join().unwrap();
    client.accept_directed_wakeups(wakeups).unwrap();
    // Refused before anything moves, turn or no turn.
    assert_eq!(misuse(client.send_last(0)), Misuse::ClientSendLast);
}

#[test]
fn a_client_without_the_listener_is_refused_at_connect() {
    if !mode_runs("a_client_without_the_listener_is_refused_at_connect") {
        return;
    }
    // The server opted in before the client connects, and while it waits.
    for client_waits_first in [false, true] {
        let (mut client, mut server) = flipcall::pair(8).unwrap();
        let (tid_tx, tid_rx) = mpsc::channel();
        let client = std::thread::spawn(move || {
            tid_tx.send(blocked::gettid()).unwrap();
            let result = client.connect_timeout(HANG);
            (result, client)
        });
        let client_tid = tid_rx.recv().unwrap();
        if client_waits_first {
            blocked::wait_until_blocked(client_tid);
        }
        let (wakeups_tx, wakeups_rx) = mpsc::channel();
        let server = std::thread::spawn(move || {
            wakeups_tx.send(server.direct_wakeups().unwrap()).unwrap();
            server.recv_first()
        });
        let wakeups = wakeups_rx.recv().unwrap();
        let (result, client) = client.join().unwrap();
        assert_eq!(misuse(result), Misuse::NotAccepted);
        // The listener goes unused: closing it, and the client, ends the server's call.
        drop(wakeups);
        drop(client);
        assert!(matches!(
            server.join().unwrap(),
            Err(Error::Shutdown | Error::PeerDied)
        ));
    }
}
