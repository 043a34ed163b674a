//! A small multi-threaded TCP key-value server on loopback, shared by `examples/kvserver`,
//! `examples/kvcompare` and `tests/kvserver.rs`. It runs on std's, futexkit's or parking_lot's
//! `Mutex`, `Condvar` and `RwLock`, named through `futexkit::sync`, `std::sync` or parking_lot
//! and chosen at start-up; [`crate::locks`] is the only file that names them.
//!
//! Protocol, one request per line (`\n`, an optional `\r` before it is ignored):
//!
//! | request | reply |
//! |---|---|
//! | `GET key` | `VALUE value` or `NOT_FOUND` |
//! | `SET key value` | `OK` (the value is the rest of the line and may hold spaces) |
//! | `DEL key` | `DELETED` or `NOT_FOUND` |
//! | anything else | `ERROR reason`, and the connection stays open |
//! | a line over [`MAX_LINE`] bytes | `ERROR line too long`, then the server closes |
//!
//! Keys are 1 to [`MAX_KEY`] printable ASCII bytes without spaces; values are 1 or more bytes
//! with no ASCII control characters. Requests on one connection are answered in order.
//!
//! Threads: one accept thread; one reader thread per connection, which parses a line, pushes
//! the request onto a bounded job queue (`Mutex<VecDeque>` + two `Condvar`s), waits for the
//! reply in the connection's reply slot (`Mutex<Option<Reply>>` + `Condvar`) and writes it;
//! a fixed pool of workers that pop jobs, run them against a store of [`SHARDS`]
//! `RwLock<HashMap>`s and put the reply in the slot. [`Server::shutdown`] stops the accept loop,
//! shuts every open connection down, and joins every thread it ever started.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub use crate::locks::Backend;
use crate::locks::{Locks, Split};

/// The longest request line accepted, not counting its `\n`.
pub const MAX_LINE: usize = 4096;
/// The longest key accepted.
pub const MAX_KEY: usize = 250;
/// How many ways the store is split, each part behind its own mutex.
pub const SHARDS: usize = 8;
/// Jobs the queue holds before readers wait for room.
pub const QUEUE_CAPACITY: usize = 256;
/// Open connections beyond this get `ERROR too many connections` and are closed.
pub const MAX_CONNECTIONS: usize = 1024;

/// A parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Get(Vec<u8>),
    Set(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

/// A reply to a well-formed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Value(Vec<u8>),
    NotFound,
    Stored,
    Deleted,
}

impl Reply {
    /// Appends the reply's line to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Value(v) => {
                out.extend_from_slice(b"VALUE ");
                out.extend_from_slice(v);
                out.push(b'\n');
            }
            Reply::NotFound => out.extend_from_slice(b"NOT_FOUND\n"),
            Reply::Stored => out.extend_from_slice(b"OK\n"),
            Reply::Deleted => out.extend_from_slice(b"DELETED\n"),
        }
    }
}

/// Parses one request line (without its `\n`). The error is the reason sent after `ERROR `.
pub fn parse(line: &[u8]) -> Result<Request, &'static str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err("empty request");
    }
    let (command, rest) = split_at_space(line);
    match command {
        b"GET" | b"DEL" => {
            let key = key(rest.ok_or("missing key")?)?;
            Ok(if command == b"GET" {
                Request::Get(key)
            } else {
                Request::Del(key)
            })
        }
        b"SET" => {
            let (k, value) = split_at_space(rest.ok_or("missing key")?);
            let key = key(k)?;
            let value = value.filter(|v| !v.is_empty()).ok_or("missing value")?;
            if value.iter().any(|&b| b < 0x20 || b == 0x7f) {
                return Err("bad value");
            }
            Ok(Request::Set(key, value.to_vec()))
        }
        _ => Err("unknown command"),
    }
}

fn split_at_space(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&b| b == b' ') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    }
}

fn key(k: &[u8]) -> Result<Vec<u8>, &'static str> {
    if k.is_empty() || k.len() > MAX_KEY || !k.iter().all(|b| b.is_ascii_graphic()) {
        return Err("bad key");
    }
    Ok(k.to_vec())
}

/// The running server. Dropping it shuts it down as [`Server::shutdown`] does.
pub struct Server {
    addr: SocketAddr,
    backend: Backend,
    running: Option<Box<dyn Running>>,
    threads: Arc<ThreadCount>,
}

/// What [`Server::shutdown`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threads {
    /// Threads the server started over its life (workers, the accept thread, readers).
    pub spawned: usize,
    /// Threads it joined.
    pub joined: usize,
    /// Threads whose body had not returned after the last join (0 unless one leaked).
    pub still_running: usize,
}

impl Server {
    /// Binds `addr` (a loopback address; port 0 picks a free one) and starts `workers`
    /// workers on `backend`'s locks. Refuses addresses other than loopback.
    pub fn start(addr: SocketAddr, backend: Backend, workers: usize) -> io::Result<Server> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing to listen on {addr}: loopback only"),
            ));
        }
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let threads = Arc::new(ThreadCount::default());
        let workers = workers.max(1);
        let running: Box<dyn Running> = match backend {
            Backend::Std => Box::new(Started::<crate::locks::Std>::start(
                listener, workers, &threads,
            )?),
            Backend::Futexkit => Box::new(Started::<crate::locks::Futexkit>::start(
                listener, workers, &threads,
            )?),
            Backend::ParkingLot => Box::new(Started::<crate::locks::ParkingLot>::start(
                listener, workers, &threads,
            )?),
            Backend::FutexkitWithStdRwLock => Box::new(Started::<
                Split<crate::locks::Futexkit, crate::locks::Std>,
            >::start(
                listener, workers, &threads
            )?),
            Backend::StdWithFutexkitRwLock => Box::new(Started::<
                Split<crate::locks::Std, crate::locks::Futexkit>,
            >::start(
                listener, workers, &threads
            )?),
        };
        Ok(Server {
            addr,
            backend,
            running: Some(running),
            threads,
        })
    }

    /// The address the server listens on (with the port picked when started with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The backend it runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Stops accepting, closes every connection, lets the workers finish the queued jobs,
    /// and joins every thread. Panics if a server thread panicked.
    pub fn shutdown(mut self) -> Threads {
        self.stop()
    }

    fn stop(&mut self) -> Threads {
        if let Some(running) = self.running.take() {
            running.stop(self.addr);
        }
        Threads {
            spawned: self.threads.spawned.load(Ordering::SeqCst),
            joined: self.threads.joined.load(Ordering::SeqCst),
            still_running: self.threads.running.load(Ordering::SeqCst),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !thread::panicking() {
            self.stop();
        }
    }
}

#[derive(Default)]
struct ThreadCount {
    spawned: AtomicUsize,
    joined: AtomicUsize,
    running: AtomicUsize,
}

impl ThreadCount {
    fn spawn<T: Send + 'static>(
        self: &Arc<Self>,
        name: String,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        struct Exit(Arc<ThreadCount>);
        impl Drop for Exit {
            fn drop(&mut self) {
                self.0.running.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.running.fetch_add(1, Ordering::SeqCst);
        let exit = Exit(Arc::clone(self));
        let handle = thread::Builder::new().name(name).spawn(move || {
            let _exit = exit;
            body()
        });
        if handle.is_ok() {
            self.spawned.fetch_add(1, Ordering::SeqCst);
        }
        // On failure the closure, and `exit` with it, was dropped: `running` is back.
        handle
    }

    fn join<T>(&self, handle: JoinHandle<T>) -> T {
        let result = handle.join();
        self.joined.fetch_add(1, Ordering::SeqCst);
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// A started server, with its backend erased.
trait Running: Send {
    fn stop(self: Box<Self>, addr: SocketAddr);
}

struct Started<L: Locks> {
    shared: Arc<Shared<L>>,
    accept: JoinHandle<Vec<JoinHandle<()>>>,
    workers: Vec<JoinHandle<()>>,
    threads: Arc<ThreadCount>,
}

struct Shared<L: Locks> {
    store: Store<L>,
    queue: Queue<L>,
    /// A clone of every open connection, so shutdown can close them.
    connections: L::Mutex<HashMap<u64, TcpStream>>,
    stopping: AtomicBool,
}

impl<L: Locks> Started<L> {
    fn start(
        listener: TcpListener,
        workers: usize,
        threads: &Arc<ThreadCount>,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            store: Store::new(),
            queue: Queue::new(),
            connections: L::mutex(HashMap::new()),
            stopping: AtomicBool::new(false),
        });
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let shared_ = Arc::clone(&shared);
            let spawned = threads.spawn(format!("kv-worker-{i}"), move || {
                while let Some(job) = shared_.queue.pop() {
                    let reply = shared_.store.execute(job.request);
                    job.reply_to.put(reply);
                }
            });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    shared.queue.close();
                    handles.into_iter().for_each(|h| threads.join(h));
                    return Err(e);
                }
            }
        }
        let accept = {
            let shared = Arc::clone(&shared);
            let threads_ = Arc::clone(threads);
            threads.spawn("kv-accept".into(), move || {
                accept_loop(listener, &shared, &threads_)
            })
        };
        let accept = match accept {
            Ok(accept) => accept,
            Err(e) => {
                shared.queue.close();
                handles.into_iter().for_each(|h| threads.join(h));
                return Err(e);
            }
        };
        Ok(Started {
            shared,
            accept,
            workers: handles,
            threads: Arc::clone(threads),
        })
    }
}

impl<L: Locks> Running for Started<L> {
    fn stop(self: Box<Self>, addr: SocketAddr) {
        let Started {
            shared,
            accept,
            workers,
            threads,
        } = *self;
        // 1. Stop accepting: set the flag, then wake the blocked accept() with a connection.
        shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
        let readers = threads.join(accept);
        // 2. Close every open connection: readers blocked in read() see end of file, one
        //    blocked in write() an error; one waiting for a reply gets it from a worker.
        L::with(&shared.connections, |open| {
            for stream in open.values() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        });
        for reader in readers {
            threads.join(reader);
        }
        // 3. No reader is left to push a job: the workers drain the queue and return.
        shared.queue.close();
        for worker in workers {
            threads.join(worker);
        }
    }
}

fn accept_loop<L: Locks>(
    listener: TcpListener,
    shared: &Arc<Shared<L>>,
    threads: &Arc<ThreadCount>,
) -> Vec<JoinHandle<()>> {
    let mut readers: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id = 0u64;
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return readers;
        }
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors, or a connection reset before accept: back off.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // Join readers whose connection has ended, so a long-running server keeps no handles.
        let (done, open): (Vec<_>, Vec<_>) = readers.into_iter().partition(|h| h.is_finished());
        done.into_iter().for_each(|h| threads.join(h));
        readers = open;
        if readers.len() >= MAX_CONNECTIONS {
            let _ = (&stream).write_all(b"ERROR too many connections\n");
            continue;
        }
        let _ = stream.set_nodelay(true);
        let id = next_id;
        next_id += 1;
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        L::with(&shared.connections, |open| open.insert(id, clone));
        let shared_ = Arc::clone(shared);
        let spawned = threads.spawn(format!("kv-conn-{id}"), move || {
            let _ = serve_connection(stream, &shared_.queue);
            L::with(&shared_.connections, |open| open.remove(&id));
        });
        match spawned {
            Ok(handle) => readers.push(handle),
            Err(_) => {
                // The stream went with the closure; forget its clone too.
                L::with(&shared.connections, |open| open.remove(&id));
            }
        }
    }
}

/// Reads requests from one connection until it ends, answering each in order.
fn serve_connection<L: Locks>(stream: TcpStream, queue: &Queue<L>) -> io::Result<()> {
    let slot = Arc::new(ReplySlot::<L> {
        reply: L::mutex(None),
        ready: L::condvar(),
    });
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = Vec::with_capacity(256);
    let mut out = Vec::with_capacity(256);
    loop {
        line.clear();
        // At most MAX_LINE bytes and the newline: an endless line cannot grow `line`.
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if line.last() != Some(&b'\n') {
            if n > MAX_LINE {
                writer.write_all(b"ERROR line too long\n")?;
                linger_close(&mut reader, &writer);
            }
            // Otherwise end of file, at a line boundary or mid-request: nothing to answer.
            return Ok(());
        }
        line.pop();
        out.clear();
        match parse(&line) {
            Ok(request) => {
                let job = Job {
                    request,
                    reply_to: Arc::clone(&slot),
                };
                if !queue.push(job) {
                    return Ok(()); // shutting down
                }
                slot.take().write_to(&mut out);
            }
            Err(reason) => {
                out.extend_from_slice(b"ERROR ");
                out.extend_from_slice(reason.as_bytes());
                out.push(b'\n');
            }
        }
        writer.write_all(&out)?;
    }
}

/// Closes our side after an error reply so the client reads the reply, not a reset: a close
/// with unread input would send RST and could discard the reply in the client's buffer. Reads
/// and drops what the client still sends, for at most 1 s and 1 MiB.
fn linger_close(reader: &mut BufReader<TcpStream>, writer: &TcpStream) {
    let _ = writer.shutdown(Shutdown::Write);
    let _ = writer.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = io::copy(&mut reader.take(1 << 20), &mut io::sink());
}

struct Job<L: Locks> {
    request: Request,
    reply_to: Arc<ReplySlot<L>>,
}

/// Where a worker leaves the reply for the connection's reader.
struct ReplySlot<L: Locks> {
    reply: L::Mutex<Option<Reply>>,
    ready: L::Condvar,
}

impl<L: Locks> ReplySlot<L> {
    fn put(&self, reply: Reply) {
        L::with(&self.reply, |slot| *slot = Some(reply));
        L::notify_one(&self.ready);
    }

    fn take(&self) -> Reply {
        L::wait_while(
            &self.reply,
            &self.ready,
            |slot| slot.is_none(),
            |slot| slot.take().expect("woken with a reply"),
        )
    }
}

/// The bounded job queue between readers and workers.
struct Queue<L: Locks> {
    state: L::Mutex<QueueState<L>>,
    not_empty: L::Condvar,
    not_full: L::Condvar,
}

struct QueueState<L: Locks> {
    jobs: VecDeque<Job<L>>,
    closed: bool,
}

impl<L: Locks> Queue<L> {
    fn new() -> Self {
        Queue {
            state: L::mutex(QueueState {
                jobs: VecDeque::with_capacity(QUEUE_CAPACITY),
                closed: false,
            }),
            not_empty: L::condvar(),
            not_full: L::condvar(),
        }
    }

    /// Waits for room, then queues `job`; false if the queue was closed.
    fn push(&self, job: Job<L>) -> bool {
        let pushed = L::wait_while(
            &self.state,
            &self.not_full,
            |s| s.jobs.len() >= QUEUE_CAPACITY && !s.closed,
            |s| {
                if s.closed {
                    return false;
                }
                s.jobs.push_back(job);
                true
            },
        );
        if pushed {
            L::notify_one(&self.not_empty);
        }
        pushed
    }

    /// Waits for a job; None once the queue is closed and empty.
    fn pop(&self) -> Option<Job<L>> {
        let (job, was_full) = L::wait_while(
            &self.state,
            &self.not_empty,
            |s| s.jobs.is_empty() && !s.closed,
            |s| {
                let was_full = s.jobs.len() >= QUEUE_CAPACITY;
                (s.jobs.pop_front(), was_full)
            },
        );
        // Readers wait only while the queue is full, and nothing but a pop changes a full
        // queue, so the pop that takes it below full wakes every reader waiting for room.
        if was_full {
            L::notify_all(&self.not_full);
        }
        job
    }

    fn close(&self) {
        L::with(&self.state, |s| s.closed = true);
        L::notify_all(&self.not_empty);
        L::notify_all(&self.not_full);
    }
}

type Map = HashMap<Vec<u8>, Vec<u8>>;

/// The key-value store: a map split over [`SHARDS`] reader-writer locks by key hash (reads
/// dominate the load).
struct Store<L: Locks> {
    shards: Vec<L::RwLock<Map>>,
    hasher: RandomState,
}

impl<L: Locks> Store<L> {
    fn new() -> Self {
        Store {
            shards: (0..SHARDS).map(|_| L::rwlock(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, key: &[u8]) -> &L::RwLock<Map> {
        &self.shards[(self.hasher.hash_one(key) % SHARDS as u64) as usize]
    }

    fn execute(&self, request: Request) -> Reply {
        match request {
            Request::Get(key) => L::read(self.shard(&key), |map| match map.get(&key) {
                Some(value) => Reply::Value(value.clone()),
                None => Reply::NotFound,
            }),
            Request::Set(key, value) => L::write(self.shard(&key), |map| {
                map.insert(key, value);
                Reply::Stored
            }),
            Request::Del(key) => L::write(self.shard(&key), |map| match map.remove(&key) {
                Some(_) => Reply::Deleted,
                None => Reply::NotFound,
            }),
        }
    }
}
