//! The key-value server of `server.rs` as a program, on the lock library named by a flag.
//!
//! `cargo run --release --example kvserver -- [--backend futexkit|std|parking_lot]
//! [--addr 127.0.0.1:7878] [--workers 4] [--seconds N]`
//!
//! Serves until Enter (or end of input) on stdin, or for N seconds with `--seconds`, then
//! shuts down cleanly and says how many threads it joined. Loopback addresses only.

use futexkit_support::kv::server;

use std::time::Duration;

use server::{Backend, Server};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter().position(|a| a == name).map(|i| {
            args.get(i + 1)
                .cloned()
                .unwrap_or_else(|| fail(&format!("{name} needs a value")))
        })
    };
    if let Some(unknown) = args
        .iter()
        .step_by(2)
        .find(|a| !["--backend", "--addr", "--workers", "--seconds"].contains(&a.as_str()))
    {
        fail(&format!("unknown argument {unknown:?}"));
    }
    let backend: Backend = flag("--backend")
        .map(|b| b.parse().unwrap_or_else(|e: String| fail(&e)))
        .unwrap_or(Backend::Futexkit);
    let addr = flag("--addr").unwrap_or_else(|| "127.0.0.1:7878".into());
    let addr = addr
        .parse()
        .unwrap_or_else(|e| fail(&format!("--addr {addr:?}: {e}")));
    let workers = flag("--workers")
        .map(|w| {
            w.parse()
                .unwrap_or_else(|e| fail(&format!("--workers: {e}")))
        })
        .unwrap_or(4);
    let seconds: Option<f64> = flag("--seconds").map(|s| {
        s.parse()
            .unwrap_or_else(|e| fail(&format!("--seconds: {e}")))
    });

    let server = Server::start(addr, backend, workers).unwrap_or_else(|e| fail(&e.to_string()));
    match seconds {
        Some(s) => {
            println!(
                "kvserver on {} ({backend}, {workers} workers) for {s} s",
                server.addr()
            );
            std::thread::sleep(Duration::from_secs_f64(s));
        }
        None => {
            println!(
                "kvserver on {} ({backend}, {workers} workers); press Enter to stop",
                server.addr()
            );
            let _ = std::io::stdin().read_line(&mut String::new());
        }
    }
    let threads = server.shutdown();
    println!(
        "stopped: joined {} of {} threads",
        threads.joined, threads.spawned
    );
}

fn fail(message: &str) -> ! {
    eprintln!("kvserver: {message}");
    std::process::exit(2);
}
