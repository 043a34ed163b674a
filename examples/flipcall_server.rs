//! One FlipCall server thread for many channels, against one thread per channel and against a
//! Unix socket server on epoll: 1, 8 and 64 client threads each calling as fast as it can with
//! 64-byte requests and replies. Prints markdown tables (medians of interleaved rounds).
//!
//! `cargo run --release --example flipcall_server [-- --quick] [--clients 1,8,64]`
//! (`--only one-thread|per-channel|epoll` runs one server kind, for profiling)

use std::time::Duration;

use futexkit_support::flipcall_server::{run, RunResult, ServerKind};
use futexkit_support::report::turns;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let client_counts: Vec<usize> = match args.iter().position(|a| a == "--clients") {
        Some(i) => args[i + 1]
            .split(',')
            .map(|n| n.parse().expect("--clients takes a list like 1,8,64"))
            .collect(),
        None => vec![1, 8, 64],
    };
    if let Some(i) = args.iter().position(|a| a == "--only") {
        let kind = match args[i + 1].as_str() {
            "one-thread" => ServerKind::OneThread,
            "per-channel" => ServerKind::ThreadPerChannel,
            "epoll" => ServerKind::UnixEpoll,
            other => panic!("--only takes one-thread, per-channel or epoll, not {other}"),
        };
        for &clients in &client_counts {
            let r = run(kind, clients, 64, Duration::from_secs(1));
            println!(
                "{} with {clients} clients: {:.0} calls/s, round trip {:.2} us, fairness {:.2}",
                kind.name(),
                r.calls_per_sec,
                micros(r.round_trip),
                r.fairness
            );
        }
        return;
    }
    let (rounds, duration) = if quick {
        (1, Duration::from_millis(200))
    } else {
        (5, Duration::from_millis(500))
    };
    const PAYLOAD: usize = 64;
    println!("{}", futexkit::capabilities());
    println!(
        "wait mode: {:?}; {PAYLOAD}-byte calls; median of {rounds} interleaved rounds of {duration:?}",
        futexkit::flipcall::WaitMode::probed()
    );
    println!();
    let mut rows = Vec::new();
    for &clients in &client_counts {
        let mut results: Vec<Vec<RunResult>> = vec![Vec::new(); ServerKind::ALL.len()];
        for round in 0..rounds {
            for which in turns(round, ServerKind::ALL.len()) {
                eprintln!("{} with {clients} clients", ServerKind::ALL[which].name());
                results[which].push(run(ServerKind::ALL[which], clients, PAYLOAD, duration));
            }
        }
        let medians: Vec<RunResult> = results.into_iter().map(median).collect();
        rows.push((clients, medians));
    }

    println!("### Total calls per second (higher is better)");
    println!();
    print!("| clients |");
    for kind in ServerKind::ALL {
        print!(" {} |", kind.name());
    }
    println!(" one thread / per channel | one thread / epoll |");
    println!("|---|---|---|---|---|---|");
    for (clients, r) in &rows {
        println!(
            "| {clients} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            r[0].calls_per_sec,
            r[1].calls_per_sec,
            r[2].calls_per_sec,
            r[0].calls_per_sec / r[1].calls_per_sec,
            r[0].calls_per_sec / r[2].calls_per_sec,
        );
    }
    println!();
    per_kind_table(
        "Round trip seen by a client, µs (median client; lower is better)",
        &rows,
        |r| micros(r.round_trip),
    );
    per_kind_table(
        "Fairness: calls of the slowest client / calls of the fastest (1 = even)",
        &rows,
        |r| r.fairness,
    );
}

/// A markdown table headed `title`: a row per client count, a column per server kind.
fn per_kind_table(
    title: &str,
    rows: &[(usize, Vec<RunResult>)],
    value: impl Fn(&RunResult) -> f64,
) {
    println!("### {title}");
    println!();
    print!("| clients |");
    for kind in ServerKind::ALL {
        print!(" {} |", kind.name());
    }
    println!();
    println!("|---|{}", "---|".repeat(ServerKind::ALL.len()));
    for (clients, results) in rows {
        print!("| {clients} |");
        for r in results {
            print!(" {:.2} |", value(r));
        }
        println!();
    }
    println!();
}

fn median(mut runs: Vec<RunResult>) -> RunResult {
    runs.sort_by(|a, b| a.calls_per_sec.total_cmp(&b.calls_per_sec));
    runs[runs.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
