//! Runs the `kvserver` example's server on each lock library in turn, loads it with the
//! `kvload` example's generator at several client counts, and prints one table: backend,
//! ops/s, p50, p99, p99.9; then futexkit against the better of std and parking_lot, from the
//! table and paired round by round (a drifting shared machine moves all backends of a round
//! together, so the paired ratio is the steadier one).
//!
//! `cargo run --release --example kvcompare -- [--clients 4,16,64] [--seconds 1.5]
//! [--rounds 3] [--workers 4] [--backends futexkit,std,parking_lot] [--oversubscribed]`
//!
//! `--oversubscribed` runs a busy thread on every CPU (in this process, beside the load
//! generator) throughout, as on a server whose CPUs are all taken.
//!
//! `--backends` also takes `futexkit+std_rwlock` and `std+futexkit_rwlock` (one library's
//! Mutex and Condvar, the other's RwLock), to find which lock a difference comes from; the
//! comparison with the best leaves them out.
//!
//! Each measurement starts a fresh server in a child process (this program, re-run with
//! `--serve BACKEND`), so server and load generator do not share an allocator or a process;
//! both run on this machine, over loopback. Rounds interleave the backends, each round starting
//! with the next one; ops/s is the median over rounds, latency quantiles come from the rounds'
//! histograms merged.

use futexkit_support::kv::load;
use futexkit_support::kv::server;
use futexkit_support::pingpong::BackgroundLoad;
use futexkit_support::report::turns;

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use server::{Backend, Server};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let workers: usize = flag("--workers").map_or(4, |w| w.parse().expect("--workers N"));
    if let Some(backend) = flag("--serve") {
        serve(
            backend.parse().unwrap_or_else(|e: String| panic!("{e}")),
            workers,
        );
        return;
    }
    let clients: Vec<usize> = flag("--clients").map_or(vec![4, 16, 64], |list| {
        list.split(',')
            .map(|n| n.parse().expect("--clients 4,16,64"))
            .collect()
    });
    let seconds: f64 = flag("--seconds").map_or(1.5, |s| s.parse().expect("--seconds S"));
    let rounds: usize = flag("--rounds").map_or(3, |r| r.parse().expect("--rounds N"));
    let backends: Vec<Backend> = flag("--backends").map_or(Backend::ALL.to_vec(), |list| {
        list.split(',')
            .map(|b| b.parse().unwrap_or_else(|e: String| panic!("{e}")))
            .collect()
    });

    let oversubscribed = args.iter().any(|a| a == "--oversubscribed");

    println!("{}", futexkit::capabilities());
    println!(
        "kvserver, {workers} workers, {} shards; load: 80% GET / 18% SET / 2% DEL, 256 keys per \
         connection, 32-byte values; {seconds} s per run, {rounds} rounds interleaved{}",
        server::SHARDS,
        if oversubscribed {
            "; a busy thread on every CPU"
        } else {
            ""
        }
    );
    let _load = oversubscribed.then(BackgroundLoad::start);
    // results[client index][backend index]
    let mut results: Vec<Vec<Runs>> = clients
        .iter()
        .map(|_| backends.iter().map(|_| Runs::default()).collect())
        .collect();
    for round in 0..rounds {
        for (ci, &n) in clients.iter().enumerate() {
            for bi in turns(round, backends.len()) {
                let backend = backends[bi];
                let report = measure(backend, workers, n, Duration::from_secs_f64(seconds));
                eprintln!(
                    "round {} clients {n:>3} {backend:<11} {:>8.0} ops/s p99 {}{}",
                    round + 1,
                    report.ops_per_sec(),
                    us(report.quantile(0.99)),
                    if report.errors > 0 { "  ERRORS" } else { "" }
                );
                for e in &report.first_errors {
                    eprintln!("    {e}");
                }
                let runs = &mut results[ci][bi];
                runs.ops_per_sec.push(report.ops_per_sec());
                runs.p99.push(report.latency.value_at_quantile(0.99) as f64);
                runs.latency.add(&report.latency).expect("same bounds");
                runs.errors += report.errors;
            }
        }
    }

    println!();
    println!("| clients | backend | ops/s | p50 | p99 | p99.9 |");
    println!("|---|---|---|---|---|---|");
    let mut wrong = 0;
    for (ci, &n) in clients.iter().enumerate() {
        for (bi, &backend) in backends.iter().enumerate() {
            let runs = &results[ci][bi];
            wrong += runs.errors;
            let q = |q: f64| Duration::from_nanos(runs.latency.value_at_quantile(q));
            println!(
                "| {n} | {backend} | {:.0} | {} | {} | {} |",
                median(runs.ops_per_sec.clone()),
                us(q(0.5)),
                us(q(0.99)),
                us(q(0.999))
            );
        }
    }
    let Some(fk) = backends.iter().position(|&b| b == Backend::Futexkit) else {
        return finish(wrong);
    };
    if backends.len() < 2 {
        return finish(wrong);
    }
    println!();
    println!(
        "futexkit against the best of std and parking_lot (above 1.00: futexkit ahead); from the \
         table, and paired within each round (median [lowest, highest] over rounds)"
    );
    println!();
    println!("| clients | ops/s fk / best | p99 best / fk | per round: ops/s | per round: p99 |");
    println!("|---|---|---|---|---|");
    for (ci, &n) in clients.iter().enumerate() {
        let row = &results[ci];
        let others = || {
            (0..backends.len())
                .filter(|&bi| bi != fk && Backend::ALL.contains(&backends[bi]))
                .map(|bi| &row[bi])
        };
        let best_ops = others()
            .map(|r| median(r.ops_per_sec.clone()))
            .fold(0.0, f64::max);
        let q99 = |r: &Runs| r.latency.value_at_quantile(0.99) as f64;
        let best_p99 = others().map(q99).fold(f64::INFINITY, f64::min);
        let per_round = |f: &dyn Fn(usize) -> f64| -> String {
            let mut v: Vec<f64> = (0..rounds).map(f).collect();
            v.sort_by(f64::total_cmp);
            format!("{:.2} [{:.2}, {:.2}]", v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let ops_rounds = per_round(&|r| {
            row[fk].ops_per_sec[r] / others().map(|o| o.ops_per_sec[r]).fold(0.0, f64::max)
        });
        let p99_rounds = per_round(&|r| {
            others().map(|o| o.p99[r]).fold(f64::INFINITY, f64::min) / row[fk].p99[r]
        });
        println!(
            "| {n} | {:.2} | {:.2} | {ops_rounds} | {p99_rounds} |",
            median(row[fk].ops_per_sec.clone()) / best_ops,
            best_p99 / q99(&row[fk]),
        );
    }
    finish(wrong);
}

fn finish(wrong: u64) {
    if wrong > 0 {
        println!("\n{wrong} connections saw a wrong reply or an I/O error (see above)");
        std::process::exit(1);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One backend at one client count, over the rounds.
struct Runs {
    ops_per_sec: Vec<f64>,
    /// Each round's p99, in nanoseconds.
    p99: Vec<f64>,
    latency: load::Histogram<u64>,
    errors: u64,
}

impl Default for Runs {
    fn default() -> Self {
        Runs {
            ops_per_sec: Vec::new(),
            p99: Vec::new(),
            latency: load::histogram(),
            errors: 0,
        }
    }
}

/// Starts a server child on `backend`, runs the load against it, and stops it.
fn measure(backend: Backend, workers: usize, clients: usize, duration: Duration) -> load::Report {
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .args(["--serve", backend.name(), "--workers", &workers.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("read the server's port");
    let port: u16 = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("server child said {line:?}"));
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let config = load::Config::new(addr, clients, duration, u64::MAX);
    let report = load::run(&config).expect("loopback address");
    drop(child.stdin.take()); // end of input: the child shuts its server down
    let status = child.wait().expect("wait for the server process");
    assert!(
        status.success(),
        "server process ({backend}) failed: {status}"
    );
    report
}

/// The child's side: serve on an ephemeral loopback port until stdin ends.
fn serve(backend: Backend, workers: usize) {
    let server = Server::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), backend, workers)
        .expect("start the server");
    let mut stdout = std::io::stdout();
    writeln!(stdout, "PORT {}", server.addr().port()).expect("write the port");
    stdout.flush().expect("flush");
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    let threads = server.shutdown();
    assert_eq!(threads.joined, threads.spawned, "{threads:?}");
}

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}
