//! FlipCall round trips and their baseline (raw futex wake + wait flipping a turn word), with
//! the server in a thread of this process or in a forked child. Shared by `benches/flipcall.rs`
//! and `examples/flipcall_ipc.rs`.
//!
//! Every round trip copies the payload in on the client, out and back in on the server, and out
//! on the client, for both mechanisms alike, so they differ only in how the turn moves.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futexkit::flipcall::{self, Endpoint, Error, PacketWindow};
use futexkit::futex::{Futex, Private, Scope, Shared};

/// Largest payload the benches use.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Payload sizes measured.
pub const PAYLOADS: [usize; 4] = [0, 64, 4096, 64 * 1024];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    FlipCall,
    FutexWakeWait,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The server is a thread of this process.
    Thread,
    /// The server is a forked child process.
    Process,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::FlipCall, Mechanism::FutexWakeWait];

    pub fn id(self) -> &'static str {
        match self {
            Mechanism::FlipCall => "flipcall",
            Mechanism::FutexWakeWait => "futex_wake_wait",
        }
    }
}

impl Placement {
    pub const ALL: [Placement; 2] = [Placement::Thread, Placement::Process];

    pub fn id(self) -> &'static str {
        match self {
            Placement::Thread => "in_process",
            Placement::Process => "cross_process",
        }
    }
}

/// A FlipCall client endpoint of either scope.
pub enum AnyEndpoint {
    InProcess(Endpoint<Private>),
    Shared(Endpoint<Shared>),
}

/// A client connected to a running echo server; dropping it stops the server.
pub enum Client {
    FlipCall {
        endpoint: AnyEndpoint,
        buffer: Vec<u8>,
        server: Server,
    },
    Futex {
        region: SharedRegion,
        buffer: Vec<u8>,
        server: Server,
        placement: Placement,
    },
}

pub enum Server {
    Thread(Option<std::thread::JoinHandle<()>>),
    Process(libc::pid_t),
    /// Started and stopped by the caller (the example's exec'd server).
    External,
}

impl Client {
    pub fn start(mechanism: Mechanism, placement: Placement) -> Client {
        // Initialise the process-wide state a call may touch before any fork, so a child never
        // finds a OnceLock half-initialised by a thread it does not have.
        let _ = futexkit::capabilities();
        futexkit::spin::Spinner::new().spin_until(|| false);
        match mechanism {
            Mechanism::FlipCall => start_flipcall(placement),
            Mechanism::FutexWakeWait => start_futex(placement),
        }
    }

    /// A client on an endpoint whose server someone else started.
    pub fn with_endpoint(mut endpoint: AnyEndpoint) -> Result<Client, Error> {
        match &mut endpoint {
            AnyEndpoint::InProcess(endpoint) => endpoint.connect()?,
            AnyEndpoint::Shared(endpoint) => endpoint.connect()?,
        }
        Ok(Client::FlipCall {
            endpoint,
            buffer: vec![7u8; MAX_PAYLOAD],
            server: Server::External,
        })
    }

    /// Time for `iters` round trips carrying `len` bytes each way.
    pub fn round_trips(&mut self, len: usize, iters: u64) -> Duration {
        let start = Instant::now();
        match self {
            Client::FlipCall {
                endpoint: AnyEndpoint::InProcess(endpoint),
                buffer,
                ..
            } => flipcall_round_trips(endpoint, buffer, len, iters),
            Client::FlipCall {
                endpoint: AnyEndpoint::Shared(endpoint),
                buffer,
                ..
            } => flipcall_round_trips(endpoint, buffer, len, iters),
            Client::Futex {
                region,
                buffer,
                placement: Placement::Thread,
                ..
            } => futex_round_trips::<Private>(region, buffer, len, iters),
            Client::Futex { region, buffer, .. } => {
                futex_round_trips::<Shared>(region, buffer, len, iters)
            }
        }
        start.elapsed()
    }

    /// The endpoint of a cross-process client, for the example's peer-death demonstration.
    pub fn shared_endpoint(&mut self) -> Option<&mut Endpoint<Shared>> {
        match self {
            Client::FlipCall {
                endpoint: AnyEndpoint::Shared(endpoint),
                ..
            } => Some(endpoint),
            _ => None,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let server = match self {
            Client::FlipCall {
                endpoint, server, ..
            } => {
                match endpoint {
                    AnyEndpoint::InProcess(endpoint) => endpoint.shutdown_handle().shutdown(),
                    AnyEndpoint::Shared(endpoint) => endpoint.shutdown_handle().shutdown(),
                }
                server
            }
            Client::Futex { region, server, .. } => {
                // The server waits with the placement's scope; wake both kinds.
                region.turn::<Shared>().store(STOP, Ordering::Release);
                let _ = region.turn::<Shared>().wake(u32::MAX);
                let _ = region.turn::<Private>().wake(u32::MAX);
                server
            }
        };
        match server {
            Server::Thread(handle) => {
                if let Some(handle) = handle.take() {
                    let _ = handle.join();
                }
            }
            Server::Process(pid) => {
                let mut status = 0;
                // SAFETY: waits for our own child; `status` is a valid out-pointer.
                unsafe { libc::waitpid(*pid, &mut status, 0) };
            }
            Server::External => {}
        }
    }
}

/// Runs `serve` in a thread or a forked child (which leaves with `_exit` when it returns).
fn spawn_server(placement: Placement, serve: impl FnOnce() + Send + 'static) -> Server {
    match placement {
        Placement::Thread => Server::Thread(Some(std::thread::spawn(serve))),
        Placement::Process => {
            // SAFETY: the child runs only `serve` (system calls and copies into memory allocated
            // before the fork; process-wide state was initialised in `Client::start`; glibc's
            // fork holds the malloc locks, so an allocation in the spin policy is safe), then
            // `_exit`; it never returns into the parent's code.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                serve();
                // SAFETY: ends the child without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            Server::Process(pid)
        }
    }
}

fn flipcall_round_trips<S: Scope>(
    endpoint: &mut Endpoint<S>,
    buffer: &mut [u8],
    len: usize,
    iters: u64,
) {
    for _ in 0..iters {
        endpoint.write_from(0, &buffer[..len]);
        let got = endpoint.send_recv(len).expect("flipcall round trip");
        endpoint.read_into(0, &mut buffer[..got]);
    }
}

/// Echoes every request back (copied out and in again) until the channel stops; `on_request`
/// sees each request first.
pub fn serve_echo<S: Scope>(
    server: &mut Endpoint<S>,
    buffer: &mut [u8],
    mut on_request: impl FnMut(&[u8]),
) -> Result<(), Error> {
    let mut len = server.recv_first()?;
    loop {
        server.read_into(0, &mut buffer[..len]);
        on_request(&buffer[..len]);
        server.write_from(0, &buffer[..len]);
        len = server.send_recv(len)?;
    }
}

fn start_flipcall(placement: Placement) -> Client {
    let mut server_buffer = vec![0u8; MAX_PAYLOAD];
    let (client, server) = match placement {
        Placement::Thread => {
            let (client, mut server) = flipcall::pair(MAX_PAYLOAD).unwrap();
            let handle = std::thread::spawn(move || {
                let _ = serve_echo(&mut server, &mut server_buffer, |_| {});
            });
            (AnyEndpoint::InProcess(client), Server::Thread(Some(handle)))
        }
        Placement::Process => {
            let window = PacketWindow::new(MAX_PAYLOAD).unwrap();
            let client = Endpoint::client(&window).unwrap();
            // The child makes its own endpoint: one moved into the closure would be dropped
            // (shutting the channel down) in the parent.
            let server = spawn_server(placement, move || {
                if let Ok(mut server) = Endpoint::server(&window) {
                    let _ = serve_echo(&mut server, &mut server_buffer, |_| {});
                    // A forked child leaves without destructors: the parent owns the channel.
                    std::mem::forget(server);
                }
                std::mem::forget(window);
            });
            (AnyEndpoint::Shared(client), server)
        }
    };
    let mut client = Client::with_endpoint(client).unwrap();
    if let Client::FlipCall { server: slot, .. } = &mut client {
        *slot = server;
    }
    client
}

// ---- the baseline: a turn word and the data in one MAP_SHARED anonymous mapping ----

const CLIENT_TURN: u32 = 0;
const SERVER_TURN: u32 = 1;
const STOP: u32 = 2;
const DATA_OFFSET: usize = 64;

/// An anonymous shared mapping (survives fork as shared memory): turn word, length, data.
pub struct SharedRegion {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; the turn protocol gives one side the data at a
// time, and the header words are accessed atomically.
unsafe impl Send for SharedRegion {}

impl SharedRegion {
    fn new() -> SharedRegion {
        let len = DATA_OFFSET + MAX_PAYLOAD;
        // SAFETY: a fresh anonymous shared mapping that nothing else aliases; unmapped in Drop.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
            )
            .unwrap()
        };
        SharedRegion {
            base: base.cast(),
            len,
        }
    }

    fn turn<S: Scope>(&self) -> &Futex<S> {
        // SAFETY: offset 0 is page-aligned, lives as long as `self`, and is only used atomically.
        unsafe { Futex::from_ptr(self.base.cast()) }
    }

    fn len(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: offset 4, aligned, inside the mapping, only used atomically.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(self.base.add(4).cast()) }
    }

    #[allow(clippy::mut_from_ref)]
    fn data(&self) -> &mut [u8] {
        // SAFETY: inside the mapping; the turn protocol lets only the side holding the turn
        // touch the data, and each side uses one such slice at a time.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(DATA_OFFSET), MAX_PAYLOAD) }
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `new`, no longer used.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

fn futex_round_trips<S: Scope>(region: &SharedRegion, buffer: &mut [u8], len: usize, iters: u64) {
    let turn = region.turn::<S>();
    for _ in 0..iters {
        region.data()[..len].copy_from_slice(&buffer[..len]);
        region.len().store(len as u32, Ordering::Relaxed);
        turn.store(SERVER_TURN, Ordering::Release);
        let _ = turn.wake(1);
        while turn.load(Ordering::Acquire) == SERVER_TURN {
            let _ = turn.wait(SERVER_TURN, None);
        }
        let got = region.len().load(Ordering::Relaxed) as usize;
        buffer[..got].copy_from_slice(&region.data()[..got]);
    }
}

fn serve_futex<S: Scope>(region: &SharedRegion, buffer: &mut [u8]) {
    let turn = region.turn::<S>();
    loop {
        let mut now = turn.load(Ordering::Acquire);
        while now == CLIENT_TURN {
            let _ = turn.wait(CLIENT_TURN, None);
            now = turn.load(Ordering::Acquire);
        }
        if now == STOP {
            return;
        }
        let len = region.len().load(Ordering::Relaxed) as usize;
        buffer[..len].copy_from_slice(&region.data()[..len]);
        region.data()[..len].copy_from_slice(&buffer[..len]);
        if turn
            .compare_exchange(
                SERVER_TURN,
                CLIENT_TURN,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return; // stopped meanwhile
        }
        let _ = turn.wake(1);
    }
}

fn start_futex(placement: Placement) -> Client {
    let region = SharedRegion::new();
    let server_view = SharedRegion {
        base: region.base,
        len: 0, // the client's region owns (and unmaps) the mapping
    };
    let mut server_buffer = vec![0u8; MAX_PAYLOAD];
    let server = spawn_server(placement, move || {
        match placement {
            Placement::Thread => serve_futex::<Private>(&server_view, &mut server_buffer),
            Placement::Process => serve_futex::<Shared>(&server_view, &mut server_buffer),
        }
        std::mem::forget(server_view);
    });
    Client::Futex {
        region,
        buffer: vec![7u8; MAX_PAYLOAD],
        server,
        placement,
    }
}

/// A connected in-process client holding the turn, and its server (which never runs).
pub fn holding_pair(capacity: usize) -> (Endpoint<Private>, Endpoint<Private>) {
    let (mut client, mut server) = flipcall::pair(capacity).unwrap();
    let _ = server.recv_first_timeout(Duration::ZERO);
    client.connect().unwrap();
    (client, server)
}

/// A connected client of a shared window holding the turn, and the window's server endpoint
/// (which never runs).
pub fn holding_shared(capacity: usize) -> (Endpoint<Shared>, Endpoint<Shared>) {
    let window = PacketWindow::new(capacity).unwrap();
    let mut client = Endpoint::client(&window).unwrap();
    let mut server = Endpoint::server(&window).unwrap();
    let _ = server.recv_first_timeout(Duration::ZERO);
    client.connect().unwrap();
    (client, server)
}

/// Median per-round-trip time over `batches` batches of about `batch_time`.
pub fn median_round_trip(
    client: &mut Client,
    len: usize,
    batches: usize,
    batch_time: Duration,
) -> Duration {
    // Warm up and size the batch.
    let mut n = 16u64;
    loop {
        let t = client.round_trips(len, n);
        if t >= batch_time / 4 || n >= 1 << 22 {
            let per = (t.as_nanos() / u128::from(n)).max(1);
            n = ((batch_time.as_nanos() / per) as u64).clamp(8, 1 << 22);
            break;
        }
        n *= 4;
    }
    let mut samples: Vec<Duration> = (0..batches)
        .map(|_| client.round_trips(len, n) / n as u32)
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// Cross-process tests' children: the test binary started again to run only its `child_entry`
/// test, which plays the role it was given on the window whose descriptor it inherited.
pub mod child {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::process::{Child, Command, Stdio};

    use futexkit::flipcall::PacketWindow;

    const ROLE: &str = "FUTEXKIT_TEST_CHILD_ROLE";
    const FD: &str = "FUTEXKIT_TEST_CHILD_FD";

    /// Starts this test binary again, running only `child_entry`, as `role` on `window`.
    pub fn spawn(role: &str, window: &PacketWindow, stdout: Stdio) -> Child {
        // Not close-on-exec: children other tests spawn meanwhile inherit it too, which costs
        // them nothing (they never look at it).
        let inheritable = window.inheritable_fd().unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["child_entry", "--exact", "--test-threads=1", "--nocapture"])
            .env(ROLE, role)
            .env(FD, inheritable.as_raw_fd().to_string())
            .stdout(stdout)
            .spawn()
            .unwrap();
        drop(inheritable);
        child
    }

    /// In `child_entry`: the role and the inherited window; `None` in an ordinary test run.
    pub fn role_and_window() -> Option<(String, PacketWindow)> {
        let role = std::env::var(ROLE).ok()?;
        let fd: i32 = std::env::var(FD).unwrap().parse().unwrap();
        // SAFETY: the parent passed this inherited descriptor's number for this process to
        // own; nothing else in it uses the descriptor.
        let window = PacketWindow::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }).unwrap();
        Some((role, window))
    }
}
