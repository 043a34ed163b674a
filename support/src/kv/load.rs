//! The load generator behind `examples/kvload`, `examples/kvcompare` and `tests/kvserver.rs`:
//! N client connections on loopback, each a thread sending one request at a time (a mixed
//! GET/SET/DEL load over keys of its own), for a bounded time and a bounded count of
//! requests. Every reply is checked against the connection's own model of its keys, so a
//! lost or wrong value is counted, not just timed. Latency goes into an `hdrhistogram`.
//!
//! It only ever connects to loopback: [`loopback_addr`] and [`run`] refuse anything else.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

pub use hdrhistogram::Histogram;

/// The longest reply line read (the server's values are shorter than its 4096-byte lines).
const MAX_REPLY: u64 = 8192;
/// A reply slower than this is an error, so a stuck server cannot hang the load generator.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// What load to send.
#[derive(Clone, Debug)]
pub struct Config {
    /// The server; must be a loopback address.
    pub addr: SocketAddr,
    /// Client connections, one thread each.
    pub connections: usize,
    /// Stop sending after this long...
    pub duration: Duration,
    /// ...or after this many requests in all, whichever comes first.
    pub max_ops: u64,
    /// Keys per connection; each connection sets all of them before the clock starts.
    pub keys: usize,
    /// Percent of requests that are GETs...
    pub get_percent: u32,
    /// ...and DELs; the rest are SETs.
    pub del_percent: u32,
    /// Bytes per value.
    pub value_len: usize,
    /// Seed for the request mix and key choice.
    pub seed: u64,
}

impl Config {
    /// 80% GET, 18% SET, 2% DEL over 256 keys per connection, 32-byte values.
    pub fn new(addr: SocketAddr, connections: usize, duration: Duration, max_ops: u64) -> Self {
        Config {
            addr,
            connections,
            duration,
            max_ops,
            keys: 256,
            get_percent: 80,
            del_percent: 2,
            value_len: 32,
            seed: 0x5eed,
        }
    }
}

/// What a run measured.
pub struct Report {
    /// Requests answered in the timed phase, all connections together.
    pub ops: u64,
    /// From the common start to the last connection's end.
    pub elapsed: Duration,
    /// Request latency, send to reply, in nanoseconds.
    pub latency: Histogram<u64>,
    /// Wrong replies and I/O errors; a connection stops at its first.
    pub errors: u64,
    /// The first few errors, described.
    pub first_errors: Vec<String>,
}

impl Report {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at quantile `q` (0.5 for p50, 0.999 for p99.9).
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.latency.value_at_quantile(q))
    }
}

/// A new, empty latency histogram: 1 ns to 100 s at 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Parses `IP:PORT` or `localhost:PORT` and refuses anything but a loopback address.
pub fn loopback_addr(s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = match s.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}").parse(),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?} is not IP:PORT ({e})"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "refusing {addr}: the load generator targets loopback only"
        ));
    }
    Ok(addr)
}

/// Runs the load and waits for every connection to finish. Err only if the address is not
/// loopback; a failed connection counts as an error in the report.
pub fn run(config: &Config) -> io::Result<Report> {
    if !config.addr.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing {}: loopback only", config.addr),
        ));
    }
    let connections = config.connections.max(1);
    let start = Arc::new(Barrier::new(connections + 1));
    let clients: Vec<_> = (0..connections)
        .map(|conn| {
            let config = config.clone();
            let start = Arc::clone(&start);
            let budget = config.max_ops / connections as u64
                + u64::from((conn as u64) < config.max_ops % connections as u64);
            thread::Builder::new()
                .name(format!("kvload-{conn}"))
                .spawn(move || client(conn, &config, budget, &start))
                .expect("spawn a client thread")
        })
        .collect();
    start.wait();
    let began = Instant::now();
    let mut report = Report {
        ops: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        errors: 0,
        first_errors: Vec::new(),
    };
    for client in clients {
        let result = client.join().expect("client thread panicked");
        report.ops += result.ops;
        report
            .latency
            .add(&result.latency)
            .expect("histograms with the same bounds");
        if let Some(error) = result.error {
            report.errors += 1;
            if report.first_errors.len() < 8 {
                report.first_errors.push(error);
            }
        }
    }
    report.elapsed = began.elapsed();
    Ok(report)
}

struct ClientResult {
    ops: u64,
    latency: Histogram<u64>,
    error: Option<String>,
}

/// One connection: connect and set every key, wait for the others, then send requests until
/// the time or the budget runs out, checking each reply.
fn client(conn: usize, config: &Config, budget: u64, start: &Barrier) -> ClientResult {
    let mut result = ClientResult {
        ops: 0,
        latency: histogram(),
        error: None,
    };
    let mut rng = Rng::new(config.seed ^ (conn as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let keys: Vec<Vec<u8>> = (0..config.keys.max(1))
        .map(|k| format!("c{conn}-k{k}").into_bytes())
        .collect();
    let mut model: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
    let mut version = 0u64;
    let mut request = Vec::with_capacity(64 + config.value_len);
    let mut reply = Vec::with_capacity(64 + config.value_len);

    // Connect and preload before the barrier; reach the barrier whatever happens.
    let prepared = (|| -> Result<Connection, String> {
        let mut c = Connection::open(config.addr).map_err(|e| format!("connect: {e}"))?;
        for (k, key) in keys.iter().enumerate() {
            let value = make_value(conn, k, version, config.value_len);
            version += 1;
            c.exchange(set(&mut request, key, &value), &mut reply)?;
            expect(&reply, b"OK", || format!("preload SET {}", show(key)))?;
            model[k] = Some(value);
        }
        Ok(c)
    })();
    start.wait();
    let mut c = match prepared {
        Ok(c) => c,
        Err(e) => {
            result.error = Some(format!("connection {conn}: {e}"));
            return result;
        }
    };

    let deadline = Instant::now() + config.duration;
    let get = config.get_percent;
    let del = get + config.del_percent;
    while result.ops < budget && Instant::now() < deadline {
        let k = rng.below(keys.len() as u64) as usize;
        let key = &keys[k];
        let roll = rng.below(100) as u32;
        // What to send, the reply the model predicts, and the key's value afterwards.
        let (sent, expected, after) = if roll < get {
            let expected = match &model[k] {
                Some(v) => [b"VALUE ".as_slice(), v].concat(),
                None => b"NOT_FOUND".to_vec(),
            };
            (one(&mut request, b"GET ", key), expected, model[k].clone())
        } else if roll < del {
            let expected = if model[k].is_some() {
                b"DELETED".to_vec()
            } else {
                b"NOT_FOUND".to_vec()
            };
            (one(&mut request, b"DEL ", key), expected, None)
        } else {
            let value = make_value(conn, k, version, config.value_len);
            version += 1;
            (set(&mut request, key, &value), b"OK".to_vec(), Some(value))
        };
        let began = Instant::now();
        let exchanged = c.exchange(sent, &mut reply);
        let took = began.elapsed();
        let checked = exchanged.and_then(|()| {
            expect(&reply, &expected, || {
                show(sent.strip_suffix(b"\n").unwrap_or(sent))
            })
        });
        if let Err(e) = checked {
            result.error = Some(format!("connection {conn}: {e}"));
            return result;
        }
        result
            .latency
            .saturating_record(took.as_nanos().max(1) as u64);
        result.ops += 1;
        model[k] = after;
    }
    result
}

/// A client connection: requests go out with one write, replies come back a line at a time.
pub struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    /// Connects to a loopback address (panics on any other).
    pub fn open(addr: SocketAddr) -> io::Result<Self> {
        assert!(addr.ip().is_loopback(), "loopback only");
        let stream = TcpStream::connect_timeout(&addr, REPLY_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
        Ok(Connection {
            reader: BufReader::new(stream),
        })
    }

    /// Sends `request` (whole lines) and reads one reply line into `reply`, without its `\n`.
    pub fn exchange(&mut self, request: &[u8], reply: &mut Vec<u8>) -> Result<(), String> {
        let mut stream: &TcpStream = self.reader.get_ref();
        stream
            .write_all(request)
            .map_err(|e| format!("send: {e}"))?;
        self.read_line(reply)
    }

    /// Reads one reply line into `reply`, without its `\n`.
    pub fn read_line(&mut self, reply: &mut Vec<u8>) -> Result<(), String> {
        reply.clear();
        (&mut self.reader)
            .take(MAX_REPLY)
            .read_until(b'\n', reply)
            .map_err(|e| format!("receive: {e}"))?;
        if reply.pop() != Some(b'\n') {
            return Err(format!("reply cut short: {}", show(reply)));
        }
        Ok(())
    }
}

fn expect(reply: &[u8], expected: &[u8], what: impl FnOnce() -> String) -> Result<(), String> {
    if reply == expected {
        Ok(())
    } else {
        Err(format!(
            "{}: got {}, expected {}",
            what(),
            show(reply),
            show(expected)
        ))
    }
}

fn one<'a>(buf: &'a mut Vec<u8>, command: &[u8], key: &[u8]) -> &'a [u8] {
    buf.clear();
    buf.extend_from_slice(command);
    buf.extend_from_slice(key);
    buf.push(b'\n');
    buf
}

fn set<'a>(buf: &'a mut Vec<u8>, key: &[u8], value: &[u8]) -> &'a [u8] {
    buf.clear();
    buf.extend_from_slice(b"SET ");
    buf.extend_from_slice(key);
    buf.push(b' ');
    buf.extend_from_slice(value);
    buf.push(b'\n');
    buf
}

/// A value that names its connection, key and version, padded to `len` bytes.
fn make_value(conn: usize, key: usize, version: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{conn}.{key}.{version}.").into_bytes();
    v.resize(v.len().max(len), b'x');
    v
}

/// Bytes shown for an error message: at most 80, escaped.
pub fn show(bytes: &[u8]) -> String {
    let shown: String = bytes[..bytes.len().min(80)].escape_ascii().to_string();
    if bytes.len() > 80 {
        format!("\"{shown}...\" ({} bytes)", bytes.len())
    } else {
        format!("\"{shown}\"")
    }
}

/// xorshift64*: enough to pick keys and operations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % n
    }
}
