//! The many-channel FlipCall server: round-robin order, 128 channels at once, clients that
//! flood, fall silent, die, lie or leave, channels attached while it runs, shutdown; in both
//! wait modes the kernel offers.

#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::flipcall::child;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use futexkit::flipcall::{
    self, ChannelId, Endpoint, Error, Event, PacketWindow, Server, Violation, WaitMode,
    MAX_CHANNELS,
};
use futexkit::futex::{Private, Scope, Shared};

/// A bound on every wait in these tests: reaching it means a hang, which is a failure.
const HANG: Duration = Duration::from_secs(20);

/// The wait modes this kernel can run.
fn modes() -> Vec<WaitMode> {
    match WaitMode::probed() {
        WaitMode::Waitv => vec![WaitMode::Waitv, WaitMode::Poll],
        WaitMode::Poll => vec![WaitMode::Poll],
    }
}

fn next<S: Scope>(server: &mut Server<S>) -> Event {
    server.next_event_timeout(HANG).expect("server event")
}

fn expect_call<S: Scope>(server: &mut Server<S>) -> (ChannelId, usize) {
    match next(server) {
        Event::Call { channel, len } => (channel, len),
        Event::Closed { channel, reason } => panic!("{channel} closed: {reason}"),
    }
}

/// Answers every call with its bytes plus one each, until `stop` is set and no channel is
/// left, or the server is shut down; returns the calls answered. With no `stop`, waits for
/// events without a timeout (so a wake that never comes is a hang).
fn serve_incrementing<S: Scope>(server: &mut Server<S>, stop: Option<&AtomicBool>) -> u64 {
    let mut calls = 0;
    let mut buf = vec![0u8; 4096];
    loop {
        let event = match stop {
            Some(stop) if stop.load(Ordering::Acquire) && server.is_empty() => return calls,
            Some(_) => server.next_event_timeout(Duration::from_millis(50)),
            None => server.next_event(),
        };
        match event {
            Ok(Event::Call { channel, len }) => {
                let mut call = server.channel(channel).unwrap();
                call.read_into(0, &mut buf[..len]);
                for byte in &mut buf[..len] {
                    *byte = byte.wrapping_add(1);
                }
                call.write_from(0, &buf[..len]);
                match server.reply(channel, len) {
                    Ok(()) | Err(Error::Shutdown) => {}
                    Err(err) => panic!("reply: {err}"),
                }
                calls += 1;
            }
            Ok(Event::Closed { .. }) | Err(Error::TimedOut) => {}
            Err(Error::Shutdown) => return calls,
            Err(err) => panic!("server: {err}"),
        }
    }
}

/// One checked call: `len` bytes of `seed`, answered with each byte plus one.
fn checked_call<S: Scope>(client: &mut Endpoint<S>, len: usize, seed: u8) {
    let sent: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
    client.write_from(0, &sent);
    let got = client.send_recv_timeout(len, HANG).unwrap();
    assert_eq!(got, len);
    let mut reply = vec![0; len];
    client.read_into(0, &mut reply);
    let expected: Vec<u8> = sent.iter().map(|b| b.wrapping_add(1)).collect();
    assert_eq!(reply, expected);
}

#[test]
fn calls_are_served_round_robin_and_a_flooding_client_waits_its_turn() {
    for mode in modes() {
        let mut server = Server::with_wait_mode(mode).unwrap();
        let mut clients = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..3 {
            let (client, endpoint) = flipcall::pair(8).unwrap();
            ids.push(server.attach(endpoint).unwrap());
            clients.push(client);
        }
        // Everyone calls at once (send_last: no waiting, so one thread plays every client).
        for client in &mut clients {
            client.connect_timeout(HANG).unwrap();
            client.send_last(0).unwrap();
        }
        let order: Vec<ChannelId> = (0..3).map(|_| expect_call(&mut server).0).collect();
        assert_eq!(order, ids, "{mode:?}: first round in attach order");
        for &id in &ids {
            server.reply(id, 0).unwrap();
        }
        for client in &mut clients {
            client.recv_timeout(HANG).unwrap();
            client.send_last(0).unwrap();
        }
        // Round two: the first client floods, calling again as soon as it is answered; the
        // others still come first.
        let mut served = Vec::new();
        for _ in 0..5 {
            let (id, _) = expect_call(&mut server);
            served.push(id);
            server.reply(id, 0).unwrap();
            if id == ids[0] {
                clients[0].recv_timeout(HANG).unwrap();
                clients[0].send_last(0).unwrap();
            }
        }
        assert_eq!(
            served,
            [ids[0], ids[1], ids[2], ids[0], ids[0]],
            "{mode:?}: round robin"
        );
    }
}

#[test]
fn one_thread_serves_the_maximum_number_of_channels() {
    for mode in modes() {
        let mut server: Server<Private> = Server::with_wait_mode(mode).unwrap();
        let mut clients = Vec::new();
        for _ in 0..MAX_CHANNELS {
            let (client, endpoint) = flipcall::pair(64).unwrap();
            server.attach(endpoint).unwrap();
            clients.push(client);
        }
        let (_, extra) = flipcall::pair(64).unwrap();
        assert!(matches!(
            server.attach(extra),
            Err(Error::ServerFull { max: MAX_CHANNELS })
        ));
        assert!(matches!(
            server.handle().attach(flipcall::pair(64).unwrap().1),
            Err(Error::ServerFull { .. })
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let serving = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || serve_incrementing(&mut server, Some(&stop)))
        };
        // 128 clients on 16 threads, 8 each, taking turns so most channels sit idle (asleep in
        // the server's wait) while a few call.
        let mut groups: Vec<Vec<Endpoint<Private>>> = Vec::new();
        for (i, client) in clients.into_iter().enumerate() {
            if i % 8 == 0 {
                groups.push(Vec::new());
            }
            groups.last_mut().unwrap().push(client);
        }
        let threads: Vec<_> = groups
            .into_iter()
            .enumerate()
            .map(|(t, mut group)| {
                thread::spawn(move || {
                    for client in &mut group {
                        client.connect_timeout(HANG).unwrap();
                    }
                    for round in 0..20 {
                        for (i, client) in group.iter_mut().enumerate() {
                            checked_call(client, (round * 7 + i) % 64, (t + i + round) as u8);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // The clients are gone: every channel closes, and the server loop ends.
        stop.store(true, Ordering::Release);
        assert_eq!(serving.join().unwrap(), 128 * 20, "{mode:?}");
    }
}

#[test]
fn a_flooding_client_does_not_starve_the_others() {
    for mode in modes() {
        let mut server = Server::with_wait_mode(mode).unwrap();
        let (mut flooder, endpoint) = flipcall::pair(64).unwrap();
        server.attach(endpoint).unwrap();
        let mut polite = Vec::new();
        for _ in 0..3 {
            let (client, endpoint) = flipcall::pair(64).unwrap();
            server.attach(endpoint).unwrap();
            polite.push(client);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let serving = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || serve_incrementing(&mut server, Some(&stop)))
        };
        let polite_done = Arc::new(AtomicBool::new(false));
        let flooding = {
            let polite_done = Arc::clone(&polite_done);
            thread::spawn(move || {
                flooder.connect_timeout(HANG).unwrap();
                let mut calls = 0u64;
                while !polite_done.load(Ordering::Acquire) {
                    checked_call(&mut flooder, 32, calls as u8);
                    calls += 1;
                }
                calls
            })
        };
        let polite: Vec<_> = polite
            .into_iter()
            .enumerate()
            .map(|(i, mut client)| {
                thread::spawn(move || {
                    client.connect_timeout(HANG).unwrap();
                    for round in 0..300 {
                        checked_call(&mut client, 8, (i * 31 + round) as u8);
                    }
                })
            })
            .collect();
        // Without round robin these would wait behind the flooder for as long as it calls,
        // which is until they finish: a hang, cut off by HANG in their calls.
        for client in polite {
            client.join().unwrap();
        }
        polite_done.store(true, Ordering::Release);
        let flood_calls = flooding.join().unwrap();
        stop.store(true, Ordering::Release);
        let total = serving.join().unwrap();
        assert_eq!(total, 900 + flood_calls, "{mode:?}");
    }
}

#[test]
fn a_silent_client_is_closed_by_its_idle_timeout_and_the_others_go_on() {
    for mode in modes() {
        let mut server = Server::with_wait_mode(mode).unwrap();
        let (mut silent, endpoint) = flipcall::pair(16).unwrap();
        let silent_id = server
            .attach_with_idle_timeout(endpoint, Duration::from_millis(30))
            .unwrap();
        let (mut talker, endpoint) = flipcall::pair(16).unwrap();
        let talker_id = server
            .attach_with_idle_timeout(endpoint, Duration::from_secs(3600))
            .unwrap();
        silent.connect_timeout(HANG).unwrap();
        talker.connect_timeout(HANG).unwrap();
        // The silent client makes one call, then never another.
        silent.send_last(0).unwrap();
        let (id, _) = expect_call(&mut server);
        assert_eq!(id, silent_id);
        server.reply(id, 0).unwrap();
        let calling = thread::spawn(move || {
            for round in 0..50 {
                checked_call(&mut talker, 4, round);
                thread::sleep(Duration::from_millis(2));
            }
            talker
        });
        let mut talker_calls = 0;
        let mut silent_closed = false;
        while talker_calls < 50 {
            match next(&mut server) {
                Event::Call { channel, len } => {
                    assert_eq!(channel, talker_id);
                    let mut call = server.channel(channel).unwrap();
                    let mut buf = [0u8; 4];
                    call.read_into(0, &mut buf[..len]);
                    for byte in &mut buf {
                        *byte = byte.wrapping_add(1);
                    }
                    call.data_mut()[..len].copy_from_slice(&buf[..len]);
                    server.reply(channel, len).unwrap();
                    talker_calls += 1;
                }
                Event::Closed { channel, reason } => {
                    assert_eq!(channel, silent_id, "{mode:?}");
                    assert!(matches!(reason, Error::TimedOut), "{mode:?}: {reason}");
                    silent_closed = true;
                }
            }
        }
        let _talker = calling.join().unwrap();
        if !silent_closed {
            // The talker finished within 30 ms of the silent client's last reply: wait for it.
            match next(&mut server) {
                Event::Closed { channel, reason } => {
                    assert_eq!(channel, silent_id);
                    assert!(matches!(reason, Error::TimedOut));
                }
                other => panic!("{other:?}"),
            }
        }
        // The silent client's channel is shut down: its next call says so.
        silent.recv_timeout(HANG).unwrap();
        assert!(matches!(silent.send_recv(0), Err(Error::Shutdown)));
        assert_eq!(server.len(), 1);
    }
}

#[test]
fn a_client_that_never_collects_its_reply_costs_the_server_nothing() {
    let mut server = Server::new();
    let (mut deaf, endpoint) = flipcall::pair(16).unwrap();
    server.attach(endpoint).unwrap();
    let (mut other, endpoint) = flipcall::pair(16).unwrap();
    server.attach(endpoint).unwrap();
    deaf.connect_timeout(HANG).unwrap();
    other.connect_timeout(HANG).unwrap();
    deaf.send_last(0).unwrap();
    let (id, _) = expect_call(&mut server);
    server.reply(id, 0).unwrap(); // never received
    for _ in 0..10 {
        other.send_last(0).unwrap();
        let (id, _) = expect_call(&mut server);
        server.reply(id, 0).unwrap();
        other.recv_timeout(HANG).unwrap();
    }
    assert!(matches!(
        server.next_event_timeout(Duration::from_millis(20)),
        Err(Error::TimedOut)
    ));
}

#[test]
fn channels_attach_while_the_server_waits_and_shutdown_ends_everything() {
    for mode in modes() {
        let mut server = Server::with_wait_mode(mode).unwrap();
        let handle = server.handle();
        let serving = thread::spawn(move || {
            let calls = serve_incrementing(&mut server, None);
            (calls, server)
        });
        // The server is asleep with no channel; each attach wakes it.
        let mut clients = Vec::new();
        for i in 0..5u8 {
            thread::sleep(Duration::from_millis(5));
            let (mut client, endpoint) = flipcall::pair(16).unwrap();
            handle.attach(endpoint).unwrap();
            client.connect_timeout(HANG).unwrap();
            checked_call(&mut client, 16, i);
            clients.push(client);
        }
        handle.shutdown();
        assert!(handle.is_shutdown());
        let (calls, server) = serving.join().unwrap();
        assert_eq!(calls, 5, "{mode:?}");
        for client in &mut clients {
            assert!(matches!(client.send_recv(0), Err(Error::Shutdown)));
        }
        // Attaching fails from now on, and the rejected channel is shut down too.
        let (mut late, endpoint) = flipcall::pair(16).unwrap();
        assert!(matches!(handle.attach(endpoint), Err(Error::Shutdown)));
        assert!(matches!(late.connect(), Err(Error::Shutdown)));
        drop(server);
    }
}

#[test]
fn dropping_the_server_shuts_its_channels_down() {
    let mut server = Server::new();
    let handle = server.handle();
    let (mut client, endpoint) = flipcall::pair(16).unwrap();
    server.attach(endpoint).unwrap();
    client.connect_timeout(HANG).unwrap();
    let waiter = thread::spawn(move || client.send_recv_timeout(0, HANG));
    thread::sleep(Duration::from_millis(10));
    drop(server);
    assert!(matches!(waiter.join().unwrap(), Err(Error::Shutdown)));
    assert!(handle.is_shutdown());
    assert!(matches!(
        handle.attach(flipcall::pair(16).unwrap().1),
        Err(Error::Shutdown)
    ));
}

#[test]
fn replies_and_closes_are_checked() {
    let mut server = Server::new();
    let (mut client, endpoint) = flipcall::pair(16).unwrap();
    let id = server.attach(endpoint).unwrap();
    // Not a fresh server endpoint.
    let (client_side, _) = flipcall::pair(16).unwrap();
    assert!(matches!(server.attach(client_side), Err(Error::WrongTurn)));
    assert!(matches!(server.reply(id, 0), Err(Error::WrongTurn)));
    client.connect_timeout(HANG).unwrap();
    client.send_last(3).unwrap();
    assert_eq!(expect_call(&mut server), (id, 3));
    assert!(matches!(server.reply(id, 17), Err(Error::TooLong { .. })));
    server.reply(id, 16).unwrap();
    assert_eq!(client.recv_timeout(HANG).unwrap(), 16);
    assert!(server.close(id));
    assert!(!server.close(id));
    assert!(server.channel(id).is_none());
    assert!(matches!(client.send_recv(0), Err(Error::Shutdown)));
    // A client that leaves while its call is held: the reply reports it and detaches.
    let (mut client, endpoint) = flipcall::pair(16).unwrap();
    let id = server.attach(endpoint).unwrap();
    client.connect_timeout(HANG).unwrap();
    client.send_last(0).unwrap();
    assert_eq!(expect_call(&mut server), (id, 0));
    drop(client);
    assert!(matches!(server.reply(id, 0), Err(Error::Shutdown)));
    assert!(server.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Cross-process channels: clients in child processes (`futexkit_support::flipcall::child`: this
// test binary started again running only `child_entry`), on windows whose fds they inherit.

#[test]
fn child_entry() {
    let Some((role, window)) = child::role_and_window() else {
        return; // an ordinary test run
    };
    let mut client = Endpoint::client(&window).unwrap();
    client.connect_timeout(HANG).unwrap();
    match role.as_str() {
        "caller" => {
            for round in 0..100 {
                checked_call(&mut client, 100, round);
            }
        }
        "dies-after-a-call" => {
            checked_call(&mut client, 8, 1);
            // Exits without dropping the endpoint: to the server, a death.
            std::process::exit(0);
        }
        other => panic!("unknown child role {other}"),
    }
}

fn spawn_child(role: &str, window: &PacketWindow) -> std::process::Child {
    child::spawn(role, window, std::process::Stdio::null())
}

#[test]
fn clients_in_other_processes_are_served_and_their_deaths_noticed() {
    for mode in modes() {
        let mut server: Server<Shared> = Server::with_wait_mode(mode).unwrap();
        let mut children = Vec::new();
        let mut callers = Vec::new();
        let mut dying = None;
        for role in ["caller", "caller", "dies-after-a-call", "caller"] {
            let window = PacketWindow::new(256).unwrap();
            let id = server.attach(Endpoint::server(&window).unwrap()).unwrap();
            if role == "caller" {
                callers.push(id);
            } else {
                dying = Some(id);
            }
            children.push(spawn_child(role, &window));
        }
        let mut calls = std::collections::HashMap::<ChannelId, u32>::new();
        let mut died = false;
        let mut closed_callers = 0;
        let mut buf = [0u8; 256];
        while closed_callers < callers.len() || !died {
            match next(&mut server) {
                Event::Call { channel, len } => {
                    *calls.entry(channel).or_default() += 1;
                    let mut call = server.channel(channel).unwrap();
                    call.read_into(0, &mut buf[..len]);
                    for byte in &mut buf[..len] {
                        *byte = byte.wrapping_add(1);
                    }
                    call.write_from(0, &buf[..len]);
                    let _ = server.reply(channel, len);
                }
                Event::Closed { channel, reason } if Some(channel) == dying => {
                    assert!(matches!(reason, Error::PeerDied), "{mode:?}: {reason}");
                    died = true;
                }
                Event::Closed { channel, reason } => {
                    // A caller's process exits after its calls, without dropping its endpoint
                    // (the test harness exits the process): also a death.
                    assert!(callers.contains(&channel));
                    assert!(
                        matches!(reason, Error::PeerDied | Error::Shutdown),
                        "{mode:?}: {reason}"
                    );
                    closed_callers += 1;
                }
            }
        }
        for id in &callers {
            assert_eq!(calls[id], 100, "{mode:?}");
        }
        assert_eq!(calls[&dying.unwrap()], 1);
        for mut child in children {
            assert!(child.wait().unwrap().success());
        }
        assert!(server.is_empty());
    }
}

#[test]
fn a_lying_client_is_closed_with_a_protocol_error() {
    let mut server: Server<Shared> = Server::new();
    let window = PacketWindow::new(64).unwrap();
    let id = server.attach(Endpoint::server(&window).unwrap()).unwrap();
    let (_, honest) = {
        let other = PacketWindow::new(64).unwrap();
        let id = server.attach(Endpoint::server(&other).unwrap()).unwrap();
        (other, id)
    };
    // The "client" writes a state no endpoint writes, through its own mapping of the window.
    let state = map_state_word(&window);
    let liar = state.as_ptr();
    // SAFETY: a live, aligned word of the mapping made above, written atomically only.
    unsafe { AtomicU32::from_ptr(liar) }.store(0xdead_beef, Ordering::SeqCst);
    let futex: &futexkit::futex::Futex<Shared> =
        // SAFETY: as above.
        futexkit::futex::Futex::from_atomic(unsafe { AtomicU32::from_ptr(liar) });
    futex.wake(u32::MAX).unwrap();
    match next(&mut server) {
        Event::Closed { channel, reason } => {
            assert_eq!(channel, id);
            assert!(matches!(
                reason,
                Error::Protocol(Violation::UnknownState(0xdead_beef))
            ));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.len(), 1);
    assert!(server.channel(honest).is_some());
    state.unmap();
}

/// A second mapping of a window's first page, standing in for a peer process's.
struct StateMapping(*mut u8);

impl StateMapping {
    fn as_ptr(&self) -> *mut u32 {
        // SAFETY: offset 64 (the state word) lies within the mapped page.
        unsafe { self.0.add(64).cast() }
    }

    fn unmap(self) {
        // SAFETY: the one-page mapping made in `map_state_word`, no longer used.
        unsafe { rustix::mm::munmap(self.0.cast(), 4096).unwrap() };
    }
}

fn map_state_word(window: &PacketWindow) -> StateMapping {
    // SAFETY: a fresh shared mapping of the window's memfd, used only through atomics.
    let base = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            4096,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            window.fd(),
            0,
        )
        .unwrap()
    };
    StateMapping(base.cast())
}

#[test]
fn a_call_waiting_behind_others_is_served_even_past_its_idle_timeout() {
    // 99 busy channels ahead of one with a short idle timeout, all with a call waiting: the
    // server's periodic housekeeping comes around before the round robin reaches the last
    // channel, and must not time out a channel whose call is already there.
    let mut server = Server::new();
    let mut clients = Vec::new();
    for i in 0..100 {
        let (client, endpoint) = flipcall::pair(8).unwrap();
        if i < 99 {
            server.attach(endpoint).unwrap();
        } else {
            server
                .attach_with_idle_timeout(endpoint, Duration::from_millis(10))
                .unwrap();
        }
        clients.push(client);
    }
    for client in &mut clients {
        client.connect_timeout(HANG).unwrap();
    }
    thread::sleep(Duration::from_millis(30)); // the last channel's idle time is up
    for client in &mut clients {
        client.send_last(0).unwrap();
    }
    for _ in 0..100 {
        let (id, _) = expect_call(&mut server);
        server.reply(id, 0).unwrap();
    }
    assert_eq!(server.len(), 100);
}

#[test]
fn timeouts_too_long_for_the_clock_mean_no_timeout() {
    let mut server = Server::new();
    let (mut client, endpoint) = flipcall::pair(8).unwrap();
    server
        .attach_with_idle_timeout(endpoint, Duration::MAX)
        .unwrap();
    client.connect_timeout(HANG).unwrap();
    client.send_last(0).unwrap();
    match server.next_event_timeout(Duration::MAX).unwrap() {
        Event::Call { channel, .. } => server.reply(channel, 0).unwrap(),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        server.next_event_timeout(Duration::from_millis(10)),
        Err(Error::TimedOut)
    ));
}
