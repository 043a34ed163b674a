//! FlipCall: bytes both ways at every size, shutdown at every blocking point, timeouts, roles,
//! a lying peer, and peers in other processes (fork, exec with a passed fd, SIGKILL).

#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::blocked;
use futexkit_support::flipcall::child;

use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use futexkit::flipcall::{self, Endpoint, Error, PacketWindow, Violation};
use futexkit::futex::Scope;

/// A bound on every wait in these tests: reaching it means a hang, which is a failure.
const HANG: Duration = Duration::from_secs(20);

/// Serves until shutdown: replies with the request's bytes reversed, plus one byte (the request
/// length mod 251) when there is room.
fn serve_reversing<S: Scope>(server: &mut Endpoint<S>) -> Result<(), Error> {
    let mut len = server.recv_first()?;
    let mut data = vec![0; server.capacity()];
    loop {
        let capacity = server.capacity();
        server.read_into(0, &mut data[..len]);
        data[..len].reverse();
        let reply = if len < capacity {
            data[len] = (len % 251) as u8;
            len + 1
        } else {
            len
        };
        server.write_from(0, &data[..reply]);
        len = match server.send_recv(reply) {
            Ok(len) => len,
            Err(Error::Shutdown) => return Ok(()),
            Err(err) => return Err(err),
        };
    }
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + seed * 7 + 1) as u8).collect()
}

/// One call from `client`, checking the reversed reply byte for byte.
fn checked_call<S: Scope>(client: &mut Endpoint<S>, len: usize, seed: usize) {
    let sent = pattern(len, seed);
    client.write_from(0, &sent);
    let reply_len = client.send_recv(len).unwrap();
    let capacity = client.capacity();
    assert_eq!(reply_len, if len < capacity { len + 1 } else { len });
    let mut reply = vec![0; reply_len];
    client.read_into(0, &mut reply);
    let mut expected = sent;
    expected.reverse();
    assert_eq!(&reply[..len], &expected[..], "payload of {len} bytes");
    if len < capacity {
        assert_eq!(reply[len], (len % 251) as u8);
    }
}

fn exercise_every_size<S: Scope>(mut client: Endpoint<S>, mut server: Endpoint<S>) {
    let server = thread::spawn(move || serve_reversing(&mut server));
    client.connect().unwrap();
    let capacity = client.capacity();
    for len in 0..=capacity {
        checked_call(&mut client, len, len);
    }
    assert!(matches!(
        client.send_recv(capacity + 1),
        Err(Error::TooLong { len, capacity: c }) if len == capacity + 1 && c == capacity
    ));
    // TooLong sent nothing: the channel still works.
    checked_call(&mut client, capacity / 2, 3);
    drop(client);
    server.join().unwrap().unwrap();
}

#[test]
fn in_process_pair_carries_every_size() {
    let (client, server) = flipcall::pair(300).unwrap();
    exercise_every_size(client, server);
}

#[test]
fn shared_window_carries_every_size() {
    let window = PacketWindow::new(300).unwrap();
    let adopted = PacketWindow::from_fd(window.fd().try_clone_to_owned().unwrap()).unwrap();
    exercise_every_size(
        Endpoint::client(&window).unwrap(),
        Endpoint::server(&adopted).unwrap(),
    );
}

#[test]
fn large_payloads_and_zero_capacity() {
    let (mut client, mut server) = flipcall::pair(64 * 1024).unwrap();
    let server = thread::spawn(move || serve_reversing(&mut server));
    client.connect().unwrap();
    for len in [0, 1, 64, 4095, 4096, 4097, 65535, 65536] {
        checked_call(&mut client, len, 11);
    }
    drop(client);
    server.join().unwrap().unwrap();

    let (mut client, mut server) = flipcall::pair(0).unwrap();
    let server = thread::spawn(move || serve_reversing(&mut server));
    client.connect().unwrap();
    for _ in 0..100 {
        assert_eq!(client.send_recv(0).unwrap(), 0);
    }
    assert!(matches!(client.send_recv(1), Err(Error::TooLong { .. })));
    drop(client);
    server.join().unwrap().unwrap();
}

#[test]
fn many_round_trips_lose_nothing() {
    // Fewer in the kernel matrix's emulated guests.
    let round_trips = futexkit_support::kernel_path::hand_offs(200_000);
    let (mut client, mut server) = flipcall::pair(8).unwrap();
    let server = thread::spawn(move || -> Result<u64, Error> {
        let mut len = server.recv_first()?;
        let mut calls = 0u64;
        loop {
            assert_eq!(len, 8);
            let n = u64::from_le_bytes(server.data()[..8].try_into().unwrap());
            server.data_mut()[..8].copy_from_slice(&(n + 1).to_le_bytes());
            calls += 1;
            len = match server.send_recv(8) {
                Ok(len) => len,
                Err(Error::Shutdown) => return Ok(calls),
                Err(err) => return Err(err),
            };
        }
    });
    client.connect().unwrap();
    let mut n = 0u64;
    for _ in 0..round_trips {
        client.data_mut()[..8].copy_from_slice(&n.to_le_bytes());
        assert_eq!(client.send_recv(8).unwrap(), 8);
        let next = u64::from_le_bytes(client.data()[..8].try_into().unwrap());
        assert_eq!(next, n + 1);
        n = next + 1;
    }
    drop(client);
    assert_eq!(server.join().unwrap().unwrap(), round_trips);
}

#[test]
fn roles_are_claimed_once_and_calls_out_of_turn_are_refused() {
    let window = PacketWindow::new(16).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut server = Endpoint::server(&window).unwrap();
    assert!(matches!(Endpoint::client(&window), Err(Error::RoleTaken)));
    assert!(matches!(Endpoint::server(&window), Err(Error::RoleTaken)));
    assert!(matches!(client.send_recv(0), Err(Error::WrongTurn)));
    assert!(matches!(client.recv_first(), Err(Error::WrongTurn)));
    assert!(matches!(server.connect(), Err(Error::WrongTurn)));
    assert!(matches!(server.send_recv(0), Err(Error::WrongTurn)));
    assert!(matches!(server.recv(), Err(Error::WrongTurn)));
    assert!(!client.holds_turn());
    let mut buf = [0u8; 1];
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.read_into(0, &mut buf);
    }));
    assert!(result.is_err(), "read_into() out of turn must panic");

    let (mut client, _server) = flipcall::pair(16).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| client.data().len()));
    assert!(result.is_err(), "data() out of turn must panic");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.write_from(0, &[1]);
    }));
    assert!(result.is_err(), "write_from() out of turn must panic");
}

#[test]
fn timeouts_expire_and_the_call_can_be_resumed() {
    let (mut client, mut server) = flipcall::pair(16).unwrap();
    assert!(matches!(
        client.connect_timeout(Duration::from_millis(20)),
        Err(Error::TimedOut)
    ));
    assert!(matches!(
        server.recv_first_timeout(Duration::from_millis(20)),
        Err(Error::TimedOut)
    ));
    // The server is ready now: connect succeeds, and the server resumes with recv().
    client.connect_timeout(HANG).unwrap();
    client.data_mut()[0] = 42;
    let (tx, rx) = mpsc::channel();
    let server = thread::spawn(move || {
        let len = server.recv_timeout(HANG).unwrap();
        assert_eq!((len, server.data()[0]), (1, 42));
        rx.recv().unwrap(); // reply only after the client's first wait timed out
        server.data_mut()[0] = 43;
        server.send_last(1).unwrap();
        server
    });
    assert!(matches!(
        client.send_recv_timeout(1, Duration::from_millis(20)),
        Err(Error::TimedOut)
    ));
    assert!(!client.holds_turn());
    tx.send(()).unwrap();
    assert_eq!(client.recv_timeout(HANG).unwrap(), 1);
    assert_eq!(client.data()[0], 43);
    let _server = server.join().unwrap();
}

/// Runs `blocked` on a thread until it sleeps, shuts the channel down with `stop`, and checks
/// that the blocked call returned `Shutdown`.
fn shut_down_while_blocked<T: Send + 'static>(
    blocked: impl FnOnce() -> Result<T, Error> + Send + 'static,
    stop: flipcall::ShutdownHandle,
) {
    let (tid_tx, tid_rx) = mpsc::channel();
    let thread = thread::spawn(move || {
        tid_tx.send(blocked::gettid()).unwrap();
        blocked().map(drop)
    });
    blocked::wait_until_blocked(tid_rx.recv().unwrap());
    stop.shutdown();
    assert!(matches!(thread.join().unwrap(), Err(Error::Shutdown)));
    assert!(stop.is_shutdown());
}

#[test]
fn shutdown_before_connect() {
    let (mut client, mut server) = flipcall::pair(16).unwrap();
    client.shutdown_handle().shutdown();
    assert!(matches!(client.connect(), Err(Error::Shutdown)));
    assert!(matches!(server.recv_first(), Err(Error::Shutdown)));
}

#[test]
fn shutdown_during_connect_from_either_side() {
    for stop_from_client in [true, false] {
        let (mut client, server) = flipcall::pair(16).unwrap();
        let stop = if stop_from_client {
            client.shutdown_handle()
        } else {
            server.shutdown_handle()
        };
        shut_down_while_blocked(move || client.connect(), stop);
        drop(server);
    }
}

#[test]
fn shutdown_during_recv_first() {
    let (client, mut server) = flipcall::pair(16).unwrap();
    let stop = client.shutdown_handle();
    shut_down_while_blocked(move || server.recv_first(), stop);
}

#[test]
fn shutdown_during_a_clients_call() {
    let (mut client, mut server) = flipcall::pair(16).unwrap();
    let stop = server.shutdown_handle();
    let (got_call_tx, got_call_rx) = mpsc::channel();
    let server = thread::spawn(move || {
        server.recv_first().unwrap();
        got_call_tx.send(()).unwrap();
        server // holds the turn and never answers
    });
    client.connect().unwrap();
    let (tid_tx, tid_rx) = mpsc::channel();
    let caller = thread::spawn(move || {
        tid_tx.send(blocked::gettid()).unwrap();
        client.send_recv(1)
    });
    got_call_rx.recv().unwrap();
    blocked::wait_until_blocked(tid_rx.recv().unwrap());
    stop.shutdown();
    assert!(matches!(caller.join().unwrap(), Err(Error::Shutdown)));
    let mut server = server.join().unwrap();
    assert!(matches!(server.send_recv(0), Err(Error::Shutdown)));
}

#[test]
fn shutdown_during_a_servers_call() {
    let (mut client, mut server) = flipcall::pair(16).unwrap();
    let stop = client.shutdown_handle();
    client.connect_timeout(Duration::ZERO).unwrap_err(); // server not ready yet
    let mut blocked = move || {
        server.recv_first()?;
        server.send_recv(0) // the client never calls again
    };
    let (tid_tx, tid_rx) = mpsc::channel();
    let thread = thread::spawn(move || {
        tid_tx.send(blocked::gettid()).unwrap();
        blocked()
    });
    let tid = tid_rx.recv().unwrap();
    client.connect_timeout(HANG).unwrap();
    client.send_last(0).unwrap(); // the first call, no waiting for its answer
    blocked::wait_until_blocked(tid);
    // Now the server sleeps in send_recv or still in recv_first: wait until it answered.
    let deadline = Instant::now() + HANG;
    while client.recv_timeout(Duration::from_millis(1)).is_err() {
        assert!(Instant::now() < deadline, "server never answered");
    }
    blocked::wait_until_blocked(tid);
    stop.shutdown();
    assert!(matches!(thread.join().unwrap(), Err(Error::Shutdown)));
    assert!(matches!(client.send_recv(0), Err(Error::Shutdown)));
}

#[test]
fn a_last_reply_survives_the_senders_shutdown() {
    let (mut client, mut server) = flipcall::pair(16).unwrap();
    let server = thread::spawn(move || {
        let len = server.recv_first().unwrap();
        server.data_mut()[..len].reverse();
        server.send_last(len).unwrap();
        // Dropping shuts the channel down right after the hand-over.
    });
    client.connect().unwrap();
    client.data_mut()[..3].copy_from_slice(b"abc");
    client.send_last(3).unwrap();
    server.join().unwrap(); // replied and shut the channel down before we look
    assert_eq!(client.recv().unwrap(), 3);
    assert_eq!(&client.data()[..3], b"cba");
    assert!(matches!(client.send_recv(0), Err(Error::Shutdown)));
}

#[test]
fn dropping_or_unwinding_an_endpoint_shuts_the_channel() {
    let (mut client, server) = flipcall::pair(16).unwrap();
    let stop = client.shutdown_handle();
    let unwinder = thread::spawn(move || {
        let _server = server;
        panic!("server thread unwinds");
    });
    assert!(unwinder.join().is_err());
    assert!(matches!(client.connect(), Err(Error::Shutdown)));
    assert!(stop.is_shutdown());
}

// ---------------------------------------------------------------------------------------------
// A lying peer: the test plays the peer by writing into the window's header directly.

const STATE_OFFSET: usize = 64;
const LEN_OFFSET: usize = 68;

/// A second, raw mapping of the window, to scribble on as a malicious peer would.
struct Scribbler {
    base: *mut u8,
    len: usize,
}

impl Scribbler {
    fn new(window: &PacketWindow) -> Scribbler {
        let len = 128 + window.capacity();
        // SAFETY: a fresh shared mapping of the window's memfd; this test only touches it
        // through atomics and unmaps it in Drop.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                window.fd(),
                0,
            )
            .unwrap()
        };
        Scribbler {
            base: base.cast(),
            len,
        }
    }

    fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(offset + 4 <= self.len && offset % 4 == 0);
        // SAFETY: in bounds and aligned (checked above), the mapping outlives the borrow, and
        // everyone accesses header words atomically.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(self.base.add(offset).cast()) }
    }

    fn write(&self, offset: usize, value: u32) {
        self.word(offset)
            .store(value, std::sync::atomic::Ordering::SeqCst);
    }
}

// SAFETY: the mapping is process-wide memory accessed only through atomics; moving the pointer
// to another thread changes nothing about that.
unsafe impl Send for Scribbler {}

impl Drop for Scribbler {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer borrowed.
        unsafe { rustix::mm::munmap(self.base.cast(), self.len).unwrap() };
    }
}

#[test]
fn a_lying_peer_gets_protocol_errors() {
    let window = PacketWindow::new(64).unwrap();
    let peer = Scribbler::new(&window);
    let mut client = Endpoint::client(&window).unwrap();

    // The "server" announces readiness by hand, then answers with an impossible length.
    peer.write(STATE_OFFSET, 1); // CLIENT's turn
    client.connect_timeout(HANG).unwrap();
    let liar = thread::spawn(move || {
        // Wait until the client handed the turn over (SERVER, perhaps with SLEEPING).
        while peer
            .word(STATE_OFFSET)
            .load(std::sync::atomic::Ordering::SeqCst)
            & 3
            != 2
        {
            thread::yield_now();
        }
        peer.write(LEN_OFFSET, 65);
        peer.write(STATE_OFFSET, 1);
        wake(&peer);
        peer
    });
    match client.send_recv_timeout(0, HANG) {
        Err(Error::Protocol(Violation::LengthOutOfRange {
            len: 65,
            capacity: 64,
        })) => {}
        other => panic!("expected LengthOutOfRange, got {other:?}"),
    }
    assert!(client.holds_turn());
    let peer = liar.join().unwrap();

    // A state no endpoint writes.
    peer.write(STATE_OFFSET, 0xdead_beef);
    assert!(matches!(
        client.send_recv(0),
        Err(Error::Protocol(Violation::UnknownState(0xdead_beef)))
    ));
    // The turn taken away while the client holds it.
    peer.write(STATE_OFFSET, 2);
    assert!(matches!(
        client.send_recv(0),
        Err(Error::Protocol(Violation::TurnTaken(2)))
    ));
    // An impossible turn value while the client waits.
    peer.write(STATE_OFFSET, 1);
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        tx.send(blocked::gettid()).unwrap();
        client.send_recv(0)
    });
    blocked::wait_until_blocked(rx.recv().unwrap());
    peer.write(STATE_OFFSET, 3 | 4);
    wake(&peer);
    assert!(matches!(
        waiter.join().unwrap(),
        Err(Error::Protocol(Violation::UnknownState(7)))
    ));
}

fn wake(peer: &Scribbler) {
    let futex: &futexkit::futex::Futex<futexkit::futex::Shared> =
        futexkit::futex::Futex::from_atomic(peer.word(STATE_OFFSET));
    futex.wake(u32::MAX).unwrap();
}

#[test]
fn a_scribbling_peer_never_crashes_or_hangs_a_caller() {
    let window = PacketWindow::new(32).unwrap();
    let peer = Scribbler::new(&window);
    let adopted = PacketWindow::from_fd(window.fd().try_clone_to_owned().unwrap()).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut server = Endpoint::server(&adopted).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scribbler = {
        let stop = std::sync::Arc::clone(&stop);
        thread::spawn(move || {
            let mut x: u32 = 0x9e37_79b9;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let offset = if x & 1 == 0 { STATE_OFFSET } else { LEN_OFFSET };
                // Mostly plausible values, so the protocol gets deep before it breaks.
                let value = if x & 2 == 0 { x >> 28 } else { x };
                peer.write(offset, value);
                if x & 4 == 0 {
                    wake(&peer);
                }
                thread::yield_now();
            }
        })
    };
    let short = Duration::from_millis(5);
    let server_thread = thread::spawn(move || {
        for _ in 0..300 {
            let _ = server.recv_first_timeout(short);
            let _ = server.recv_timeout(short);
            if server.holds_turn() {
                let n = server.capacity();
                server.write_from(0, &vec![0xaa; n]);
                let _ = server.send_recv_timeout(n, short);
            }
        }
    });
    for _ in 0..300 {
        let _ = client.connect_timeout(short);
        let _ = client.recv_timeout(short);
        if client.holds_turn() {
            match client.send_recv_timeout(7, short) {
                Ok(len) => assert!(len <= client.capacity()),
                Err(Error::Protocol(_) | Error::TimedOut | Error::Shutdown) => {}
                Err(err) => panic!("unexpected error {err}"),
            }
        }
    }
    server_thread.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    scribbler.join().unwrap();
}

#[test]
fn adopting_a_window_checks_seals_and_header() {
    // A memfd without seals: its owner could shrink it under our mapping.
    let unsealed = rustix::fs::memfd_create("unsealed", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&unsealed, 4096).unwrap();
    assert!(matches!(
        PacketWindow::from_fd(unsealed),
        Err(Error::Protocol(Violation::NotSealed))
    ));
    // Not a memfd at all.
    let file = std::fs::File::open("/dev/null").unwrap();
    assert!(matches!(
        PacketWindow::from_fd(OwnedFd::from(file)),
        Err(Error::Protocol(Violation::NotSealed))
    ));
    // Sealed, but with a header that lies about its capacity, or a wrong magic.
    let window = PacketWindow::new(64).unwrap();
    let peer = Scribbler::new(&window);
    peer.write(8, 65);
    assert!(matches!(
        PacketWindow::from_fd(window.fd().try_clone_to_owned().unwrap()),
        Err(Error::Protocol(Violation::BadHeader(_)))
    ));
    peer.write(8, 64);
    PacketWindow::from_fd(window.fd().try_clone_to_owned().unwrap()).unwrap();
    peer.write(0, 0);
    assert!(matches!(
        PacketWindow::from_fd(window.fd().try_clone_to_owned().unwrap()),
        Err(Error::Protocol(Violation::BadHeader(_)))
    ));
    // The seal holds: the file cannot be shrunk.
    assert!(rustix::fs::ftruncate(window.fd(), 0).is_err());
    assert!(matches!(
        PacketWindow::new(flipcall::MAX_CAPACITY + 1),
        Err(Error::TooLong { .. })
    ));
}

#[test]
fn copies_check_their_bounds() {
    let (mut client, server) = flipcall::pair(16).unwrap();
    let _server = thread::spawn(move || {
        let mut server = server;
        let _ = server.recv_first();
        server
    });
    client.connect_timeout(HANG).unwrap();
    client.write_from(16, &[]);
    client.write_from(10, &[1; 6]);
    let mut six = [0; 6];
    client.read_into(10, &mut six);
    assert_eq!(six, [1; 6]);
    for (offset, len) in [(11, 6), (17, 0), (usize::MAX, 2)] {
        let mut buf = vec![0; len];
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            client.read_into(offset, &mut buf);
        }));
        assert!(read.is_err(), "read_into({offset}, {len} bytes) must panic");
        let write = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            client.write_from(offset, &buf);
        }));
        assert!(
            write.is_err(),
            "write_from({offset}, {len} bytes) must panic"
        );
    }
}

#[test]
fn copies_of_every_alignment_and_length_are_exact() {
    // The shared window's copies go word by word where aligned and byte by byte at the edges,
    // and long ones (from 1 KiB on x86-64) as one string copy.
    const CAP: usize = 3000;
    let window = PacketWindow::new(CAP).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut server = Endpoint::server(&window).unwrap();
    server.recv_first_timeout(Duration::ZERO).unwrap_err();
    client.connect_timeout(HANG).unwrap();
    let long = [1023, 1024, 1025, 2047, 2900];
    for offset in 0..24 {
        for len in (0..=40).chain(long).filter(|&len| offset + len <= CAP) {
            let fill = vec![0xee; CAP];
            client.write_from(0, &fill);
            let sent = pattern(len, offset);
            client.write_from(offset, &sent);
            let mut all = vec![0; CAP];
            client.read_into(0, &mut all);
            assert_eq!(&all[offset..offset + len], &sent[..], "at {offset}+{len}");
            assert!(
                all[..offset].iter().all(|&b| b == 0xee),
                "before {offset}+{len}"
            );
            assert!(
                all[offset + len..].iter().all(|&b| b == 0xee),
                "after {offset}+{len}"
            );
            let mut back = vec![0; len];
            client.read_into(offset, &mut back);
            assert_eq!(back, sent);
        }
    }
}

#[test]
fn a_peer_rewriting_the_payload_during_a_copy_yields_only_bytes_it_wrote() {
    const CAP: usize = 64 * 1024;
    let window = PacketWindow::new(CAP).unwrap();
    let peer = Scribbler::new(&window);
    let mut client = Endpoint::client(&window).unwrap();
    peer.write(STATE_OFFSET, 1); // the client's turn, as a server's recv_first would leave it
    client.connect_timeout(HANG).unwrap();
    client.write_from(0, &[0x55; CAP]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rewriter = {
        let stop = std::sync::Arc::clone(&stop);
        thread::spawn(move || {
            let mut rounds = 0u64;
            // Out of turn, the peer flips the whole area between two patterns, with stores of
            // every width and alignment.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 2 {
                let byte = if rounds % 2 == 0 { 0xaa } else { 0x55 };
                let word = u32::from_ne_bytes([byte; 4]);
                for offset in (0..CAP).step_by(4) {
                    peer.write(128 + offset, word);
                }
                rounds += 1;
            }
            rounds
        })
    };
    let mut torn = 0;
    let mut buf = vec![0u8; CAP];
    for round in 0..200 {
        let offset = round % 13;
        client.read_into(offset, &mut buf[..CAP - offset]);
        assert!(
            buf[..CAP - offset].iter().all(|&b| b == 0xaa || b == 0x55),
            "a byte the peer never wrote"
        );
        torn += usize::from(buf[..CAP - offset].windows(2).any(|w| w[0] != w[1]));
        client.write_from(offset, &buf[..CAP - offset]);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = rewriter.join().unwrap();
    println!("{rounds} rewrites, {torn} of 200 copies saw two patterns");
}

#[test]
fn a_peer_punching_holes_gets_protocol_errors_never_a_crash() {
    // The peer frees pages of the window's file (the header's, the data's) while calls run:
    // they read back as zeros, which the protocol reports, and a futex call on a page that is
    // gone at that instant reports PageRemoved rather than an I/O error.
    const CAP: usize = 3 * 4096;
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let started = Instant::now();
    let mut windows: u64 = 0;
    while windows < 20 || (windows < 2000 && started.elapsed() < Duration::from_secs(2)) {
        windows += 1;
        let window = PacketWindow::new(CAP).unwrap();
        let adopted = PacketWindow::from_fd(window.fd().try_clone_to_owned().unwrap()).unwrap();
        let hole_fd = window.fd().try_clone_to_owned().unwrap();
        let mut client = Endpoint::client(&window).unwrap();
        let mut server = Endpoint::server(&adopted).unwrap();
        let short = Duration::from_millis(20);
        let server_thread = thread::spawn(move || -> Result<(), Error> {
            let mut buf = vec![0u8; CAP];
            let mut len = server.recv_first_timeout(short)?;
            loop {
                server.read_into(0, &mut buf[..len]);
                server.write_from(0, &buf[..len]);
                len = server.send_recv_timeout(len, short)?;
            }
        });
        let calls_running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let puncher = thread::spawn({
            let calls_running = std::sync::Arc::clone(&calls_running);
            move || {
                // Once calls flow, punch one page (the window number picks which), then the rest.
                while !calls_running.load(std::sync::atomic::Ordering::Acquire) {
                    thread::yield_now();
                }
                thread::sleep(Duration::from_micros(50 * (windows % 7)));
                let page = (windows % 4) * 4096;
                for (offset, len) in [(page, 4096), (0, (CAP + 128) as u64)] {
                    rustix::fs::fallocate(
                        &hole_fd,
                        rustix::fs::FallocateFlags::PUNCH_HOLE
                            | rustix::fs::FallocateFlags::KEEP_SIZE,
                        offset,
                        len,
                    )
                    .unwrap();
                    thread::sleep(Duration::from_micros(200));
                }
            }
        });
        client.connect_timeout(HANG).unwrap();
        // Calls until one fails, or until a few after the punching ended (a page punched out
        // at a quiet moment can leave nothing the protocol notices).
        let mut calls_after_punching = 0;
        let outcome = loop {
            client.write_from(0, &[0x5a; CAP]);
            match client.send_recv_timeout(CAP, short) {
                Ok(len) => assert!(len <= CAP),
                Err(err) => break Some(err),
            }
            calls_running.store(true, std::sync::atomic::Ordering::Release);
            if puncher.is_finished() {
                calls_after_punching += 1;
                if calls_after_punching == 3 {
                    break None;
                }
            }
        };
        // The first call may fail before the puncher was told to start (the server's short
        // first wait can expire in a slow guest): release it, or its join waits forever.
        calls_running.store(true, std::sync::atomic::Ordering::Release);
        puncher.join().unwrap();
        drop(client);
        let server_outcome = server_thread.join().unwrap().err();
        for err in [outcome, server_outcome] {
            let Some(err) = err else {
                *outcomes.entry("survived".to_string()).or_default() += 1;
                continue;
            };
            match err {
                Error::Protocol(_) | Error::TimedOut | Error::Shutdown => {}
                other => panic!("a punched window gave {other:?}"),
            }
            let name = format!("{err:?}");
            let name = name.split('(').take(2).collect::<Vec<_>>().join("(");
            *outcomes.entry(name).or_default() += 1;
        }
    }
    println!("{windows} windows punched; outcomes: {outcomes:?}");
}

#[test]
fn a_futex_fault_on_a_window_is_a_protocol_error() {
    assert!(matches!(
        Error::from(futexkit::futex::Error::Fault),
        Error::Protocol(Violation::PageRemoved)
    ));
    assert!(matches!(
        Error::from(futexkit::futex::Error::OutOfMemory),
        Error::Io(_)
    ));
}

#[test]
fn a_hugetlb_window_is_refused() {
    use rustix::fs::{MemfdFlags, SealFlags};
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING | MemfdFlags::HUGETLB;
    let fd = match rustix::fs::memfd_create("hugetlb-window", flags) {
        Ok(fd) => fd,
        Err(err) => {
            // A kernel built without hugetlbfs cannot make one: nothing to refuse.
            println!("no hugetlb memfd on this kernel ({err}); skipping");
            return;
        }
    };
    // Sized to one huge page when the pool allows it; refused before any mapping either way.
    let _ = rustix::fs::ftruncate(&fd, 2 << 20);
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW).unwrap();
    assert!(matches!(
        PacketWindow::from_fd(fd),
        Err(Error::Protocol(Violation::NotShmem))
    ));
}

// ---------------------------------------------------------------------------------------------
// Other processes. Children (`futexkit_support::flipcall::child`) are this test binary started
// again running only `child_entry`, which plays the role it was given on the window it inherited.

/// What a child prints once it is where the test wants it.
const READY: &str = "flipcall-child-ready";

#[test]
fn child_entry() {
    let Some((role, window)) = child::role_and_window() else {
        return; // an ordinary test run
    };
    match role.as_str() {
        "echo-server" => {
            let mut server = Endpoint::server(&window).unwrap();
            serve_reversing(&mut server).unwrap();
        }
        "stuck-server" => {
            let mut server = Endpoint::server(&window).unwrap();
            server.recv_first().unwrap();
            thread::sleep(HANG * 10); // holds the turn until killed
        }
        "stuck-client" => {
            let mut client = Endpoint::client(&window).unwrap();
            client.connect().unwrap();
            println!("{READY}");
            thread::sleep(HANG * 10); // never calls; killed by the parent
        }
        other => panic!("unknown child role {other}"),
    }
}

fn spawn_child(role: &str, window: &PacketWindow) -> std::process::Child {
    child::spawn(role, window, std::process::Stdio::piped())
}

#[test]
fn exec_child_serves_over_a_passed_fd() {
    let window = PacketWindow::new(4096).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut child = spawn_child("echo-server", &window);
    client.connect_timeout(HANG).unwrap();
    for len in [0, 1, 100, 4095, 4096] {
        checked_call(&mut client, len, 5);
    }
    drop(client);
    assert!(child.wait().unwrap().success());
}

#[test]
fn sigkill_of_the_server_mid_call_gives_peer_died() {
    let window = PacketWindow::new(64).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut child = spawn_child("stuck-server", &window);
    client.connect_timeout(HANG).unwrap();
    let (tx, rx) = mpsc::channel();
    let caller = thread::spawn(move || {
        tx.send(blocked::gettid()).unwrap();
        client.send_recv_timeout(1, HANG)
    });
    blocked::wait_until_blocked(rx.recv().unwrap());
    child.kill().unwrap();
    assert!(matches!(caller.join().unwrap(), Err(Error::PeerDied)));
    child.wait().unwrap();
}

/// A fork child that uses the client endpoint its parent made (a copy, with the parent's pid
/// in the window) announces itself at its first call: the server, in the parent, then
/// watches the child, and its kill ends the server's wait with `PeerDied` (the parent's pid
/// being the server's own, nothing was watched before).
#[test]
fn a_fork_child_using_its_parents_endpoint_is_watched_as_the_peer() {
    // A round trip on a throwaway window first: what the child's calls set up once (the spin
    // policy's machine facts, the kernel's capabilities) is then in place before the fork, so
    // the child never waits for a setup another thread of the parent was in at the fork.
    let warm_up = PacketWindow::new(64).unwrap();
    let (mut warm_client, mut warm_server) = (
        Endpoint::client(&warm_up).unwrap(),
        Endpoint::server(&warm_up).unwrap(),
    );
    let warm = thread::spawn(move || {
        warm_server.recv_first_timeout(HANG).unwrap();
        warm_server.send_last(0).unwrap();
    });
    warm_client.connect_timeout(HANG).unwrap();
    warm_client.send_recv_timeout(0, HANG).unwrap();
    warm.join().unwrap();

    let window = PacketWindow::new(64).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut server = Endpoint::server(&window).unwrap();
    // The server's first error: its wait, for the child's call or for the one after its
    // reply, must end when the child is killed.
    let server = thread::spawn(move || {
        server
            .recv_first_timeout(HANG)
            .and_then(|_| server.send_recv_timeout(0, HANG))
    });
    let mut pipe = [0; 2];
    // SAFETY: `pipe` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let [read_end, write_end] = pipe;
    // SAFETY: the child only makes FlipCall calls (their one-time setup done above) and
    // system calls, then waits to be killed; it never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // The child's first call announces it; whatever the calls return, it then tells the
        // parent and waits for the kill. A panic must not run the parent's harness here.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = client.connect_timeout(HANG);
            // SAFETY: writes one byte from a live local to the pipe's write end.
            unsafe { libc::write(write_end, [1u8].as_ptr().cast(), 1) };
            let _ = client.send_recv_timeout(0, HANG);
        }));
        // SAFETY: ends the child without running anything of the parent's.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the parent's copy of the write end, not used here.
    unsafe { libc::close(write_end) };
    let mut ready = libc::pollfd {
        fd: read_end,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd; bounded by HANG.
    unsafe { libc::poll(&mut ready, 1, HANG.as_millis() as i32) };
    let mut byte = [0u8];
    // SAFETY: reads at most one byte into a live local; the poll above says one is there (or
    // the child is gone: then 0 or -1, without blocking, as the write end is closed).
    let got = if ready.revents == 0 {
        0
    } else {
        unsafe { libc::read(read_end, byte.as_mut_ptr().cast(), 1) }
    };
    // SAFETY: `pid` is this test's child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let mut status = 0;
    // SAFETY: reaps that child; `status` is a live local.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    // SAFETY: the read end, not used after.
    unsafe { libc::close(read_end) };
    assert_eq!(got, 1, "the child made its first call");
    assert!(matches!(server.join().unwrap(), Err(Error::PeerDied)));
    drop(client);
}

#[test]
fn sigkill_of_the_client_while_the_server_waits_gives_peer_died() {
    let window = PacketWindow::new(64).unwrap();
    let mut server = Endpoint::server(&window).unwrap();
    let mut child = spawn_child("stuck-client", &window);
    let killer = thread::spawn(move || {
        // Kill only once the child has connected (its pid is in the window by then).
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        use std::io::BufRead;
        let ready = stdout
            .lines()
            .any(|line| line.is_ok_and(|l| l.contains(READY)));
        assert!(ready, "child exited before connecting");
        child.kill().unwrap();
        child.wait().unwrap();
    });
    assert!(matches!(
        server.recv_first_timeout(HANG),
        Err(Error::PeerDied)
    ));
    // Later calls say the same.
    assert!(matches!(server.recv(), Err(Error::PeerDied)));
    killer.join().unwrap();
}

/// Initialises the process-wide state a flipcall call may touch, so a forked child never finds
/// it half-initialised by a thread that does not exist in the child.
fn warm_up_before_fork() {
    let _ = futexkit::capabilities();
    futexkit::spin::Spinner::new().spin_until(|| false);
}

#[test]
fn forked_child_serves_and_parent_sees_it_exit() {
    let window = PacketWindow::new(256).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    warm_up_before_fork();
    // SAFETY: the child runs only flipcall calls on the already-mapped window, then leaves with
    // _exit. The process-wide state they touch (capabilities, the spin calibration) was
    // initialised above, so no OnceLock can be caught mid-initialisation by the fork (glibc's
    // fork also holds the malloc locks, so the child may allocate).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match Endpoint::server(&window) {
            Ok(mut server) => {
                let code = i32::from(serve_reversing(&mut server).is_err());
                std::mem::forget(server);
                code
            }
            Err(_) => 2,
        };
        // SAFETY: ends the child without running the parent's destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    client.connect_timeout(HANG).unwrap();
    for len in [0, 17, 255, 256] {
        checked_call(&mut client, len, 9);
    }
    drop(client);
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
}
