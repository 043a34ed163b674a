//! Load generator for the `kvserver` example: N connections on loopback sending a mixed
//! GET/SET/DEL load for a bounded time and count, every reply checked; prints throughput and
//! p50/p99/p99.9 latency.
//!
//! `cargo run --release --example kvload -- [--addr 127.0.0.1:7878] [--connections 16]
//! [--seconds 5] [--max-ops 10000000] [--keys 256] [--get 80] [--del 2] [--value-len 32]`
//!
//! Refuses any address that is not loopback. Exits with status 1 if a reply was wrong.

use futexkit_support::kv::load;

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    const FLAGS: [&str; 8] = [
        "--addr",
        "--connections",
        "--seconds",
        "--max-ops",
        "--keys",
        "--get",
        "--del",
        "--value-len",
    ];
    if let Some(unknown) = args
        .iter()
        .step_by(2)
        .find(|a| !FLAGS.contains(&a.as_str()))
    {
        fail(&format!("unknown argument {unknown:?}"));
    }
    let flag = |name: &str| {
        args.iter().position(|a| a == name).map(|i| {
            args.get(i + 1)
                .cloned()
                .unwrap_or_else(|| fail(&format!("{name} needs a value")))
        })
    };
    fn number<T: std::str::FromStr>(name: &str, value: Option<String>, default: T) -> T
    where
        T::Err: std::fmt::Display,
    {
        value.map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|e| fail(&format!("{name} {v:?}: {e}")))
        })
    }
    let addr = load::loopback_addr(&flag("--addr").unwrap_or_else(|| "127.0.0.1:7878".into()))
        .unwrap_or_else(|e| fail(&e));
    let connections = number("--connections", flag("--connections"), 16usize);
    let seconds = number("--seconds", flag("--seconds"), 5.0f64);
    let max_ops = number("--max-ops", flag("--max-ops"), 10_000_000u64);
    let mut config =
        load::Config::new(addr, connections, Duration::from_secs_f64(seconds), max_ops);
    config.keys = number("--keys", flag("--keys"), config.keys);
    config.get_percent = number("--get", flag("--get"), config.get_percent);
    config.del_percent = number("--del", flag("--del"), config.del_percent);
    config.value_len = number("--value-len", flag("--value-len"), config.value_len);
    if config.get_percent + config.del_percent > 100 {
        fail("--get plus --del is over 100");
    }

    println!(
        "{connections} connections to {addr}, {seconds} s or {max_ops} requests: \
         {}% GET, {}% DEL, {}% SET, {} keys per connection, {}-byte values",
        config.get_percent,
        config.del_percent,
        100 - config.get_percent - config.del_percent,
        config.keys,
        config.value_len,
    );
    let report = load::run(&config).unwrap_or_else(|e| fail(&e.to_string()));
    println!(
        "{} requests in {:.2} s: {:.0} ops/s; latency p50 {} p99 {} p99.9 {} max {}",
        report.ops,
        report.elapsed.as_secs_f64(),
        report.ops_per_sec(),
        us(report.quantile(0.5)),
        us(report.quantile(0.99)),
        us(report.quantile(0.999)),
        us(Duration::from_nanos(report.latency.max())),
    );
    if report.errors > 0 {
        println!("{} connections stopped on an error:", report.errors);
        for e in &report.first_errors {
            println!("  {e}");
        }
        std::process::exit(1);
    }
    println!("every reply checked: all correct");
}

fn us(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

fn fail(message: &str) -> ! {
    eprintln!("kvload: {message}");
    std::process::exit(2);
}
