//! FlipCall in one process and across two: starts itself again as a server process, passes it
//! the packet window's fd, and measures round trips for 0 B to 64 KiB beside the same calls to
//! a server thread, and beside raw futex wake + wait flipping a turn word over the same kind of
//! memory, idle and with a busy thread on every CPU. Then what copying a message costs, and
//! finally it kills the server mid-call to show the client's `PeerDied`. Prints markdown.
//!
//! `cargo run --release --example flipcall_ipc [-- --quick]`

use futexkit_support::flipcall;
use futexkit_support::pingpong;
use futexkit_support::report::turns;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use flipcall::{AnyEndpoint, Client, Mechanism, Placement, MAX_PAYLOAD, PAYLOADS};
use futexkit::flipcall::{Endpoint, Error, PacketWindow};
use pingpong::{BackgroundLoad, RoundTrips};

/// A request whose first byte is this makes the server hold the turn forever (until killed).
const HANG: u8 = 0xff;

/// The four clients measured, in table order.
const COLUMNS: [&str; 4] = [
    "FlipCall in-process",
    "FlipCall cross-process",
    "wake+wait in-process",
    "wake+wait cross-process",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(fd) = args
        .iter()
        .position(|a| a == "--server")
        .map(|i| &args[i + 1])
    {
        serve(fd.parse().expect("--server takes a descriptor number"));
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let (batches, batch_time) = if quick {
        (5, Duration::from_millis(20))
    } else {
        (9, Duration::from_millis(50))
    };
    println!("{}", futexkit::capabilities());
    println!(
        "swap mode: {:?}; one round trip = a request of N bytes and a reply of N bytes, each copied in and out; {batches} interleaved batches of ~{batch_time:?}",
        futexkit::swap::mode()
    );
    println!();

    // Every server starts before any load thread exists (the cross-process baseline forks).
    let window = PacketWindow::new(MAX_PAYLOAD).expect("packet window");
    let mut server_process = spawn_server(&window);
    let exec_client =
        Client::with_endpoint(AnyEndpoint::Shared(Endpoint::client(&window).unwrap()))
            .expect("connect");
    let mut clients = [
        Client::start(Mechanism::FlipCall, Placement::Thread),
        exec_client,
        Client::start(Mechanism::FutexWakeWait, Placement::Thread),
        Client::start(Mechanism::FutexWakeWait, Placement::Process),
    ];

    for loaded in [false, true] {
        let _load = loaded.then(BackgroundLoad::start);
        println!(
            "### Round trip, {} (µs; lower is better)",
            if loaded {
                "oversubscribed: a busy thread on every CPU"
            } else {
                "idle"
            }
        );
        println!();
        print!("| payload (B) |");
        for column in COLUMNS {
            print!(" {column} |");
        }
        println!(" in-process / cross-process | wake+wait / FlipCall, in-process | wake+wait / FlipCall, cross-process |");
        println!("|---|---|---|---|---|---|---|---|");
        for len in PAYLOADS {
            let stats = interleaved(&mut clients, len, batches, batch_time);
            let us = stats.map(|s| s.mean.as_secs_f64() * 1e6);
            println!(
                "| {len} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                cell(stats[0]),
                cell(stats[1]),
                cell(stats[2]),
                cell(stats[3]),
                us[0] / us[1],
                us[2] / us[0],
                us[3] / us[1],
            );
        }
        println!();
    }
    println!("Each cell: the mean round trip (total time over total round trips, so a slow batch counts), then the fastest and slowest batch. Ratios of the means: in-process / cross-process above 1 means one process is slower than two; wake+wait / FlipCall above 1 means FlipCall is faster.");
    println!();

    copy_costs(batches, batch_time);

    let [_, exec_client, ..] = clients;
    demonstrate_peer_death(exec_client, &mut server_process);
}

/// A table cell: the mean round trip in µs, then the fastest and slowest batch's.
fn cell(r: RoundTrips) -> String {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    format!(
        "{:.2} ({:.2} - {:.2})",
        us(r.mean),
        us(r.fastest),
        us(r.slowest)
    )
}

/// Round trips of each client, batches interleaved (the order rotating) so drift in machine
/// load hits all alike.
fn interleaved(
    clients: &mut [Client; 4],
    len: usize,
    batches: usize,
    batch_time: Duration,
) -> [RoundTrips; 4] {
    let sizes: Vec<u64> = clients
        .iter_mut()
        .map(|client| batch_size(client, len, batch_time))
        .collect();
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for round in 0..batches {
        for i in turns(round, clients.len()) {
            let n = sizes[i];
            samples[i].push(clients[i].round_trips(len, n) / n as u32);
        }
    }
    // A client's batches all have the same number of round trips, so the mean of their
    // per-round-trip times is total time over total round trips.
    samples.map(|s| RoundTrips {
        mean: s.iter().sum::<Duration>() / s.len() as u32,
        fastest: *s.iter().min().expect("at least one batch"),
        slowest: *s.iter().max().expect("at least one batch"),
    })
}

/// Round trips that take about `batch_time` (after a warm-up).
fn batch_size(client: &mut Client, len: usize, batch_time: Duration) -> u64 {
    let mut n = 16u64;
    loop {
        let t = client.round_trips(len, n);
        if t >= batch_time / 4 || n >= 1 << 22 {
            let per = (t.as_nanos() / u128::from(n)).max(1);
            return ((batch_time.as_nanos() / per) as u64).clamp(8, 1 << 22);
        }
        n *= 4;
    }
}

/// `write_from` + `read_into` of N bytes while holding the turn: plain copies (in-process),
/// atomic copies (a shared window), and `memcpy` into the shared window through the unchecked
/// slices (what the atomic copies give up).
fn copy_costs(batches: usize, batch_time: Duration) {
    let (mut private, _private_server) = flipcall::holding_pair(MAX_PAYLOAD);
    let (mut shared, _shared_server) = flipcall::holding_shared(MAX_PAYLOAD);
    let mut buffer = vec![7u8; MAX_PAYLOAD];
    println!("### Copying a message in and out (`write_from` + `read_into`, ns, median of {batches} batches; lower is better)");
    println!();
    println!("| payload (B) | in-process (plain copies) | shared window (atomic copies) | shared window, `memcpy` (unsafe) | atomic / memcpy |");
    println!("|---|---|---|---|---|");
    for len in [64, 4096, 64 * 1024] {
        let ns = [0, 1, 2].map(|way| {
            let mut n = 64u64;
            let per_batch = loop {
                let start = Instant::now();
                copy_n(way, n, &mut private, &mut shared, &mut buffer[..len]);
                if start.elapsed() >= batch_time / 4 {
                    break n;
                }
                n *= 4;
            };
            let mut samples: Vec<f64> = (0..batches)
                .map(|_| {
                    let start = Instant::now();
                    copy_n(
                        way,
                        per_batch,
                        &mut private,
                        &mut shared,
                        &mut buffer[..len],
                    );
                    start.elapsed().as_secs_f64() * 1e9 / per_batch as f64
                })
                .collect();
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        });
        println!(
            "| {len} | {:.1} | {:.1} | {:.1} | {:.2} |",
            ns[0],
            ns[1],
            ns[2],
            ns[1] / ns[2]
        );
    }
    println!();
}

/// `n` times a message of `buffer.len()` bytes in and out: way 0 in-process, 1 atomic copies
/// into a shared window, 2 `memcpy` into the same window.
fn copy_n(
    way: usize,
    n: u64,
    private: &mut Endpoint<futexkit::futex::Private>,
    shared: &mut Endpoint<futexkit::futex::Shared>,
    buffer: &mut [u8],
) {
    for _ in 0..n {
        match way {
            0 => {
                private.write_from(0, buffer);
                private.read_into(0, buffer);
            }
            1 => {
                shared.write_from(0, buffer);
                shared.read_into(0, buffer);
            }
            _ => {
                // SAFETY: both endpoints of this window belong to the caller and its server
                // side never runs: nothing else touches the data area.
                let area = unsafe { shared.data_mut_unchecked() };
                area[..buffer.len()].copy_from_slice(buffer);
                std::hint::black_box(&mut *area);
                buffer.copy_from_slice(&area[..buffer.len()]);
            }
        }
        std::hint::black_box(&mut *buffer);
    }
}

fn spawn_server(window: &PacketWindow) -> Child {
    let inheritable = window.inheritable_fd().expect("dup window fd");
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--server", &inheritable.as_raw_fd().to_string()])
        .spawn()
        .expect("start server process");
    drop(inheritable);
    child
}

/// The server process: echoes requests until the channel stops; a request starting with
/// [`HANG`] is never answered.
fn serve(fd: i32) {
    // SAFETY: the parent passed this inherited descriptor's number for us to own; nothing else
    // in this process uses it.
    let window = PacketWindow::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }).expect("window");
    let mut server = Endpoint::server(&window).expect("server endpoint");
    let mut buffer = vec![0u8; window.capacity()];
    let hang_on_request = |request: &[u8]| {
        if request.first() == Some(&HANG) {
            std::thread::sleep(Duration::from_secs(3600));
        }
    };
    match flipcall::serve_echo(&mut server, &mut buffer, hang_on_request) {
        Ok(()) | Err(Error::Shutdown) => {}
        Err(err) => {
            eprintln!("server: {err}");
            std::process::exit(1);
        }
    }
}

fn demonstrate_peer_death(mut client: Client, server_process: &mut Child) {
    let endpoint = client.shared_endpoint().expect("flipcall client");
    println!("### Peer death");
    println!();
    println!(
        "The server process holds a call; the example SIGKILLs it 55 ms in (peers are checked every 10 ms)."
    );
    let pid = server_process.id();
    let killed_at = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
    let killer = {
        let killed_at = std::sync::Arc::clone(&killed_at);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(55));
            *killed_at.lock().unwrap() = Some(Instant::now());
            // SAFETY: kill(2) takes no pointers; `pid` is our own child, not yet reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        })
    };
    endpoint.write_from(0, &[HANG]);
    let result = endpoint.send_recv_timeout(1, Duration::from_secs(10));
    let noticed = Instant::now();
    killer.join().unwrap();
    let latency = noticed - killed_at.lock().unwrap().expect("kill time");
    match result {
        Err(Error::PeerDied) => println!(
            "The client's `send_recv` returned `PeerDied` {:.1} ms after the SIGKILL.",
            latency.as_secs_f64() * 1e3
        ),
        other => println!("unexpected result: {other:?}"),
    }
    server_process.wait().unwrap();
}
