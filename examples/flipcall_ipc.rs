//! FlipCall across processes: starts itself again as a server process, passes it the packet
//! window's fd, measures round trips for 0 B to 64 KiB (against raw futex wake + wait over the
//! same kind of shared memory, and against the same calls within one process), idle and with a
//! busy thread on every CPU; then kills the server mid-call and shows the client's `PeerDied`.
//!
//! `cargo run --release --example flipcall_ipc [-- --quick]`

use futexkit_support::flipcall;
use futexkit_support::pingpong;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use flipcall::{AnyEndpoint, Client, Mechanism, Placement, MAX_PAYLOAD, PAYLOADS};
use futexkit::flipcall::{Endpoint, Error, PacketWindow};
use pingpong::BackgroundLoad;

/// A request whose first byte is this makes the server hold the turn forever (until killed).
const HANG: u8 = 0xff;

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
    println!("futexkit FlipCall: one round trip = request of N bytes, reply of N bytes");
    println!("{}", futexkit::capabilities());
    println!("swap mode: {:?}", futexkit::swap::mode());
    println!("median of {batches} batches of ~{batch_time:?}\n");

    let window = PacketWindow::new(MAX_PAYLOAD).expect("packet window");
    let mut server_process = spawn_server(&window);
    let mut exec_client =
        Client::with_endpoint(AnyEndpoint::Shared(Endpoint::client(&window).unwrap()))
            .expect("connect");
    println!(
        "server process {} started with the window's fd; connected\n",
        server_process.id()
    );

    for loaded in [false, true] {
        let _load = loaded.then(BackgroundLoad::start);
        println!(
            "{}",
            if loaded {
                "oversubscribed (a busy thread on every CPU):"
            } else {
                "idle:"
            }
        );
        println!(
            "{:<14} {:>8} {:>14} {:>17} {:>8}",
            "server", "payload", "flipcall (us)", "wake+wait (us)", "ratio"
        );
        for placement in Placement::ALL {
            let mut baseline = if loaded {
                // Fork only while no load threads run: start the baseline before them.
                None
            } else {
                Some(Client::start(Mechanism::FutexWakeWait, placement))
            };
            let mut in_process = (placement == Placement::Thread)
                .then(|| Client::start(Mechanism::FlipCall, Placement::Thread));
            for len in PAYLOADS {
                let flip = match in_process.as_mut() {
                    Some(client) => flipcall::median_round_trip(client, len, batches, batch_time),
                    None => flipcall::median_round_trip(&mut exec_client, len, batches, batch_time),
                };
                let base = match baseline.as_mut() {
                    Some(client) => Some(flipcall::median_round_trip(
                        client, len, batches, batch_time,
                    )),
                    None if placement == Placement::Thread => {
                        let mut client = Client::start(Mechanism::FutexWakeWait, placement);
                        Some(flipcall::median_round_trip(
                            &mut client,
                            len,
                            batches,
                            batch_time,
                        ))
                    }
                    None => None,
                };
                let place = match placement {
                    Placement::Thread => "thread",
                    Placement::Process => "process (exec)",
                };
                match base {
                    Some(base) => println!(
                        "{:<14} {:>8} {:>14.2} {:>17.2} {:>7.2}x",
                        place,
                        len,
                        micros(flip),
                        micros(base),
                        base.as_secs_f64() / flip.as_secs_f64()
                    ),
                    None => println!(
                        "{:<14} {:>8} {:>14.2} {:>17} {:>8}",
                        place,
                        len,
                        micros(flip),
                        "(see below)",
                        ""
                    ),
                }
            }
        }
        if loaded {
            println!("(cross-process wake+wait under load needs a fork while load threads run,");
            println!(" which this example avoids; `cargo bench --bench flipcall` measures it)");
        }
        println!();
    }

    demonstrate_peer_death(exec_client, &mut server_process);
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
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
    println!(
        "peer death: the server holds a call; SIGKILL it 55 ms in (peers are checked every 10 ms)"
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
            "client's send_recv returned PeerDied {:.1} ms after the SIGKILL",
            latency.as_secs_f64() * 1e3
        ),
        other => println!("unexpected result: {other:?}"),
    }
    server_process.wait().unwrap();
}
