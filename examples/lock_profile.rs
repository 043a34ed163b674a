//! The contention profile of a real run: the key-value server of `kvserver` on futexkit's
//! locks, loaded by `kvload`'s generator over loopback in this process, with
//! `futexkit::profile` sampling 1 in `--rate` contended acquisitions. Prints the sites that
//! waited longest; `--folded FILE` writes folded stacks for `inferno-flamegraph`.
//!
//! `cargo run --release --features profile --example lock_profile -- [--rate 10]
//! [--clients 32] [--seconds 2] [--workers 4] [--folded waits.folded]`

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use futexkit_support::kv::load;
use futexkit_support::kv::server::{Backend, Server};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let number = |name: &str, default: f64| {
        flag(name).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| panic!("{name} N"))
        })
    };
    let rate = number("--rate", 10.0) as u32;
    let clients = number("--clients", 32.0) as usize;
    let seconds = number("--seconds", 2.0);
    let workers = number("--workers", 4.0) as usize;

    let server = Server::start(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        Backend::Futexkit,
        workers,
    )
    .expect("start the server");
    futexkit::profile::set_rate(rate);
    let config = load::Config::new(
        server.addr(),
        clients,
        Duration::from_secs_f64(seconds),
        u64::MAX,
    );
    let report = load::run(&config).expect("load the server");
    futexkit::profile::set_rate(0);
    let _ = server.shutdown();
    let profile = futexkit::profile::snapshot();
    println!(
        "kvserver, {workers} workers, {clients} clients for {seconds} s: {:.0} ops/s, p99 {:?}\n",
        report.ops_per_sec(),
        report.quantile(0.99)
    );
    print!("{profile}");
    if let Some(path) = flag("--folded") {
        std::fs::write(&path, profile.folded()).expect("write the folded stacks");
        eprintln!("wrote {path}: inferno-flamegraph < {path} > waits.svg");
    }
}
