//! Many clients, one service: each client thread makes calls of a fixed size on its own channel
//! as fast as it can, against three servers:
//!
//! - one thread serving every channel ([`futexkit::flipcall::Server`] on shared windows);
//! - one thread per channel (a FlipCall server endpoint each);
//! - one thread serving every client over Unix sockets (`SOCK_SEQPACKET` pairs) with epoll.
//!
//! Every server copies each request out and the reply in, as the others do.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futexkit::flipcall::{Endpoint, Error, Event, PacketWindow, Server};
use futexkit::futex::Shared;

/// The servers compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// One thread, `flipcall::Server`, all channels.
    OneThread,
    /// One FlipCall server thread per channel.
    ThreadPerChannel,
    /// One thread, epoll over Unix seqpacket sockets.
    UnixEpoll,
}

impl ServerKind {
    pub const ALL: [ServerKind; 3] = [
        ServerKind::OneThread,
        ServerKind::ThreadPerChannel,
        ServerKind::UnixEpoll,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ServerKind::OneThread => "flipcall::Server (1 thread)",
            ServerKind::ThreadPerChannel => "thread per channel",
            ServerKind::UnixEpoll => "Unix socket + epoll (1 thread)",
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct RunResult {
    /// Calls completed by all clients together per second.
    pub calls_per_sec: f64,
    /// The median over clients of each client's mean round trip.
    pub round_trip: Duration,
    /// Calls of the client that made fewest, over calls of the one that made most.
    pub fairness: f64,
}

/// Runs `clients` clients against a server of `kind` for `duration`, each call carrying
/// `payload` bytes each way.
pub fn run(kind: ServerKind, clients: usize, payload: usize, duration: Duration) -> RunResult {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(clients + 1));
    let (client_threads, server) = match kind {
        ServerKind::OneThread | ServerKind::ThreadPerChannel => {
            let windows: Vec<PacketWindow> = (0..clients)
                .map(|_| PacketWindow::new(payload).unwrap())
                .collect();
            let server = if kind == ServerKind::OneThread {
                one_thread(&windows, payload)
            } else {
                thread_per_channel(&windows, payload)
            };
            let client_threads = windows
                .iter()
                .map(|window| {
                    let endpoint = Endpoint::client(window).unwrap();
                    spawn_flipcall_client(endpoint, payload, &start, &stop)
                })
                .collect::<Vec<_>>();
            (client_threads, server)
        }
        ServerKind::UnixEpoll => {
            let (client_ends, server) = unix_epoll(clients, payload);
            let client_threads = client_ends
                .into_iter()
                .map(|socket| spawn_socket_client(socket, payload, &start, &stop))
                .collect::<Vec<_>>();
            (client_threads, server)
        }
    };
    start.wait();
    let began = Instant::now();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let per_client: Vec<(u64, Duration)> = client_threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let elapsed = began.elapsed();
    server.stop();
    let total: u64 = per_client.iter().map(|(calls, _)| calls).sum();
    let mut round_trips: Vec<Duration> = per_client
        .iter()
        .map(|&(calls, time)| time / calls.max(1) as u32)
        .collect();
    round_trips.sort();
    let fewest = per_client.iter().map(|c| c.0).min().unwrap_or(0);
    let most = per_client.iter().map(|c| c.0).max().unwrap_or(1).max(1);
    RunResult {
        calls_per_sec: total as f64 / elapsed.as_secs_f64(),
        round_trip: round_trips[round_trips.len() / 2],
        fairness: fewest as f64 / most as f64,
    }
}

/// Client threads return (calls, time spent calling).
type ClientThread = JoinHandle<(u64, Duration)>;

fn spawn_flipcall_client(
    mut endpoint: Endpoint<Shared>,
    payload: usize,
    start: &Arc<Barrier>,
    stop: &Arc<AtomicBool>,
) -> ClientThread {
    spawn_client(payload, start, stop, move || {
        endpoint.connect().unwrap();
        move |buffer: &mut [u8]| {
            endpoint.write_from(0, buffer);
            let len = endpoint.send_recv(payload).expect("flipcall call");
            endpoint.read_into(0, &mut buffer[..len]);
        }
    })
}

fn spawn_socket_client(
    socket: OwnedFd,
    payload: usize,
    start: &Arc<Barrier>,
    stop: &Arc<AtomicBool>,
) -> ClientThread {
    spawn_client(payload, start, stop, move || {
        move |buffer: &mut [u8]| {
            rustix::net::send(&socket, buffer, rustix::net::SendFlags::empty()).unwrap();
            let (got, _) =
                rustix::net::recv(&socket, &mut buffer[..], rustix::net::RecvFlags::empty())
                    .unwrap();
            assert_eq!(got, payload);
        }
    })
}

/// A client thread: `connect` runs first (in the thread) and gives the call, which then runs
/// from `start` until `stop`, sending the payload from `buffer` and receiving the reply into it.
fn spawn_client<C: FnMut(&mut [u8])>(
    payload: usize,
    start: &Arc<Barrier>,
    stop: &Arc<AtomicBool>,
    connect: impl FnOnce() -> C + Send + 'static,
) -> ClientThread {
    let (start, stop) = (Arc::clone(start), Arc::clone(stop));
    std::thread::spawn(move || {
        let mut buffer = vec![7u8; payload];
        let mut call = connect();
        start.wait();
        let began = Instant::now();
        let mut calls = 0;
        while !stop.load(Ordering::Relaxed) {
            call(&mut buffer);
            calls += 1;
        }
        (calls, began.elapsed())
    })
}

/// A running server, stopped (and joined) by [`ServerThreads::stop`].
struct ServerThreads {
    threads: Vec<JoinHandle<()>>,
    stop: Box<dyn FnOnce()>,
}

impl ServerThreads {
    fn stop(self) {
        (self.stop)();
        for thread in self.threads {
            thread.join().unwrap();
        }
    }
}

fn one_thread(windows: &[PacketWindow], payload: usize) -> ServerThreads {
    let mut server: Server<Shared> = Server::new();
    for window in windows {
        server.attach(Endpoint::server(window).unwrap()).unwrap();
    }
    let handle = server.handle();
    let thread = std::thread::spawn(move || {
        let mut buffer = vec![0u8; payload];
        loop {
            match server.next_event() {
                Ok(Event::Call { channel, len }) => {
                    let mut call = server.channel(channel).unwrap();
                    call.read_into(0, &mut buffer[..len]);
                    call.write_from(0, &buffer[..len]);
                    let _ = server.reply(channel, len);
                }
                Ok(Event::Closed { .. }) => {}
                Err(Error::Shutdown) => return,
                Err(err) => panic!("server: {err}"),
            }
        }
    });
    ServerThreads {
        threads: vec![thread],
        stop: Box::new(move || handle.shutdown()),
    }
}

fn thread_per_channel(windows: &[PacketWindow], payload: usize) -> ServerThreads {
    let mut handles = Vec::new();
    let threads = windows
        .iter()
        .map(|window| {
            let mut endpoint = Endpoint::server(window).unwrap();
            handles.push(endpoint.shutdown_handle());
            std::thread::spawn(move || {
                let mut buffer = vec![0u8; payload];
                let _ = crate::flipcall::serve_echo(&mut endpoint, &mut buffer, |_| {});
            })
        })
        .collect();
    ServerThreads {
        threads,
        stop: Box::new(move || handles.iter().for_each(|h| h.shutdown())),
    }
}

/// `clients` seqpacket socket pairs; the server thread polls its ends with epoll and echoes.
fn unix_epoll(clients: usize, payload: usize) -> (Vec<OwnedFd>, ServerThreads) {
    use rustix::event::epoll;
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let mut client_ends = Vec::new();
    let mut server_ends = Vec::new();
    for _ in 0..clients {
        let (a, b) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        client_ends.push(a);
        server_ends.push(b);
    }
    let epoll_fd = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    for (i, socket) in server_ends.iter().enumerate() {
        epoll::add(
            &epoll_fd,
            socket,
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )
        .unwrap();
    }
    // Stopping: an eventfd in the same set.
    let stop_fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap();
    epoll::add(
        &epoll_fd,
        &stop_fd,
        epoll::EventData::new_u64(u64::MAX),
        epoll::EventFlags::IN,
    )
    .unwrap();
    let stop_writer = stop_fd.try_clone().unwrap();
    let thread = std::thread::spawn(move || {
        // The server keeps its own descriptor of the eventfd: closing the last one would take
        // it out of the epoll set before the wait saw it.
        let _stop_fd = stop_fd;
        let mut buffer = vec![0u8; payload];
        let mut events = Vec::with_capacity(server_ends.len() + 1);
        loop {
            events.clear();
            match epoll::wait(&epoll_fd, rustix::buffer::spare_capacity(&mut events), None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(err) => panic!("epoll_wait: {err}"),
            }
            for event in &events {
                let i = event.data.u64();
                if i == u64::MAX {
                    return;
                }
                let socket = server_ends[i as usize].as_fd();
                match rustix::net::recv(socket, &mut buffer[..], rustix::net::RecvFlags::DONTWAIT) {
                    Ok((0, _)) => {
                        let _ = epoll::delete(&epoll_fd, socket);
                    }
                    Ok((got, _)) => {
                        let _ = rustix::net::send(
                            socket,
                            &buffer[..got],
                            rustix::net::SendFlags::empty(),
                        );
                    }
                    Err(_) => {}
                }
            }
        }
    });
    (
        client_ends,
        ServerThreads {
            threads: vec![thread],
            stop: Box::new(move || {
                let _ = rustix::io::write(&stop_writer, &1u64.to_ne_bytes());
            }),
        },
    )
}
