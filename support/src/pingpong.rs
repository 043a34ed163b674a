//! Ping-pong mechanisms shared by `benches/pingpong.rs` and `examples/pingpong.rs`: two threads
//! hand a turn back and forth; one round trip is side 0 passing the turn and getting it back.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use futexkit::futex::Futex;
use futexkit::swap::{self, Parker, SwapMode};

/// A way for two threads to take turns.
pub trait Turns: Send + Sync {
    /// Blocks until it is `side`'s turn.
    fn wait_turn(&self, side: usize);
    /// Gives the turn to the other side.
    fn pass_turn(&self, side: usize);
    /// Gives the turn away and waits for it to come back.
    fn pass_and_wait(&self, side: usize) {
        self.pass_turn(side);
        self.wait_turn(side);
    }
}

/// The mechanisms measured, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    FutexWakeWait,
    FutexWakeWaitOneCpu,
    SwapEmulated,
    SwapKernel,
    Parker,
    ParkerOneCpu,
    SpinOnly,
    FutexkitMutexCondvar,
    StdMutexCondvar,
    ParkingLotMutexCondvar,
    Pipe,
    UnixSocket,
}

impl Mechanism {
    pub const ALL: [Mechanism; 12] = [
        Mechanism::FutexWakeWait,
        Mechanism::FutexWakeWaitOneCpu,
        Mechanism::SwapEmulated,
        Mechanism::SwapKernel,
        Mechanism::Parker,
        Mechanism::ParkerOneCpu,
        Mechanism::SpinOnly,
        Mechanism::FutexkitMutexCondvar,
        Mechanism::StdMutexCondvar,
        Mechanism::ParkingLotMutexCondvar,
        Mechanism::Pipe,
        Mechanism::UnixSocket,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::FutexWakeWait => "futex wake+wait",
            Mechanism::FutexWakeWaitOneCpu => "futex wake+wait, one CPU",
            Mechanism::SwapEmulated => "futexkit swap (emulated)",
            Mechanism::SwapKernel => "futexkit swap (kernel)",
            Mechanism::Parker => "futexkit Parker::swap_to",
            Mechanism::ParkerOneCpu => "futexkit Parker::swap_to, one CPU",
            Mechanism::SpinOnly => "spin only (floor)",
            Mechanism::FutexkitMutexCondvar => "futexkit Mutex+Condvar",
            Mechanism::StdMutexCondvar => "std Mutex+Condvar",
            Mechanism::ParkingLotMutexCondvar => "parking_lot Mutex+Condvar",
            Mechanism::Pipe => "pipe pair",
            Mechanism::UnixSocket => "unix socket pair",
        }
    }

    /// A short identifier for criterion.
    pub fn id(self) -> &'static str {
        match self {
            Mechanism::FutexWakeWait => "futex_wake_wait",
            Mechanism::FutexWakeWaitOneCpu => "futex_wake_wait_one_cpu",
            Mechanism::SwapEmulated => "swap_emulated",
            Mechanism::SwapKernel => "swap_kernel",
            Mechanism::Parker => "parker_swap_to",
            Mechanism::ParkerOneCpu => "parker_swap_to_one_cpu",
            Mechanism::SpinOnly => "spin_only",
            Mechanism::FutexkitMutexCondvar => "futexkit_mutex_condvar",
            Mechanism::StdMutexCondvar => "std_mutex_condvar",
            Mechanism::ParkingLotMutexCondvar => "parking_lot_mutex_condvar",
            Mechanism::Pipe => "pipe",
            Mechanism::UnixSocket => "unix_socket",
        }
    }

    /// `Err(why)` where this mechanism cannot run here.
    pub fn available(self) -> Result<(), &'static str> {
        match self {
            Mechanism::SwapKernel if !SwapMode::Kernel.is_available() => {
                Err("no FUTEX_SWAP in this kernel (never merged upstream)")
            }
            _ => Ok(()),
        }
    }

    fn build(self) -> Arc<dyn Turns> {
        match self {
            Mechanism::FutexWakeWait | Mechanism::FutexWakeWaitOneCpu => {
                Arc::new(FutexTurns::default())
            }
            Mechanism::SwapEmulated => Arc::new(SwapTurns {
                turn: Futex::new(0),
                mode: SwapMode::Emulated,
            }),
            Mechanism::SwapKernel => Arc::new(SwapTurns {
                turn: Futex::new(0),
                mode: SwapMode::Kernel,
            }),
            Mechanism::Parker | Mechanism::ParkerOneCpu => Arc::new(ParkerTurns::default()),
            Mechanism::SpinOnly => Arc::new(SpinTurns::default()),
            Mechanism::FutexkitMutexCondvar => Arc::new(FutexkitTurns::default()),
            Mechanism::StdMutexCondvar => Arc::new(StdTurns::default()),
            Mechanism::ParkingLotMutexCondvar => Arc::new(ParkingLotTurns::default()),
            Mechanism::Pipe => Arc::new(PipeTurns::new()),
            Mechanism::UnixSocket => Arc::new(SocketTurns::new()),
        }
    }
}

/// Times `round_trips` round trips of `mechanism` (side 0 measured, side 1 on a second thread).
pub fn measure(mechanism: Mechanism, round_trips: u64) -> Duration {
    let pin = matches!(
        mechanism,
        Mechanism::FutexWakeWaitOneCpu | Mechanism::ParkerOneCpu
    );
    if mechanism == Mechanism::ParkerOneCpu {
        // The spin policy counts the CPUs at a process's first spin: let that happen unpinned,
        // as in a process whose two threads merely land on one CPU.
        measure(Mechanism::Parker, 2);
    }
    let turns = mechanism.build();
    let cpu = if pin { Some(first_usable_cpu()) } else { None };
    let partner = {
        let turns = Arc::clone(&turns);
        std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                pin_to(cpu);
            }
            if round_trips == 0 {
                return;
            }
            turns.wait_turn(1);
            for _ in 1..round_trips {
                turns.pass_and_wait(1);
            }
            turns.pass_turn(1);
        })
    };
    let saved = cpu.map(|cpu| {
        let saved = rustix::thread::sched_getaffinity(None).unwrap();
        pin_to(cpu);
        saved
    });
    let start = Instant::now();
    for _ in 0..round_trips {
        turns.pass_and_wait(0);
    }
    let elapsed = start.elapsed();
    partner.join().unwrap();
    if let Some(saved) = saved {
        let _ = rustix::thread::sched_setaffinity(None, &saved);
    }
    elapsed
}

/// The first CPU this thread may run on.
pub fn first_usable_cpu() -> usize {
    let set = rustix::thread::sched_getaffinity(None).unwrap();
    (0..rustix::thread::CpuSet::MAX_CPU)
        .find(|&cpu| set.is_set(cpu))
        .unwrap_or(0)
}

/// Pins this thread to `cpu` (best effort: an affinity the system refuses is left as it was).
pub fn pin_to(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// Busy threads on every usable CPU until dropped: the oversubscribed condition.
pub struct BackgroundLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BackgroundLoad {
    /// One busy thread per usable CPU.
    pub fn start() -> BackgroundLoad {
        BackgroundLoad::per_cpu(1)
    }

    /// `threads_per_cpu` busy threads per usable CPU.
    pub fn per_cpu(threads_per_cpu: usize) -> BackgroundLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..futexkit::capabilities().usable_cpus() * threads_per_cpu)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                    }
                })
            })
            .collect();
        BackgroundLoad { stop, threads }
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// How many round trips of `mechanism` take about `batch_time` (after a warm-up).
pub fn batch_size(mechanism: Mechanism, batch_time: Duration) -> u64 {
    let mut n = 64u64;
    loop {
        let t = measure(mechanism, n);
        if t >= batch_time / 4 || n >= 1 << 24 {
            let per = (t.as_nanos() / u128::from(n)).max(1);
            return ((batch_time.as_nanos() / per) as u64).clamp(16, 1 << 24);
        }
        n *= 4;
    }
}

/// Round trips of one mechanism over several batches, each batch a fresh pair of threads.
#[derive(Debug, Clone, Copy)]
pub struct RoundTrips {
    /// Total time over total round trips: what a user gets, slow batches included.
    pub mean: Duration,
    /// The fastest batch's round trip.
    pub fastest: Duration,
    /// The slowest batch's round trip.
    pub slowest: Duration,
}

/// Round trips of each mechanism over `batches` batches of about `batch_time`, interleaved
/// (one batch of each mechanism per pass, each pass starting with the next mechanism) so drift
/// in machine load hits all alike.
pub fn round_trips(
    mechanisms: &[Mechanism],
    batches: usize,
    batch_time: Duration,
) -> Vec<RoundTrips> {
    let sizes: Vec<u64> = mechanisms
        .iter()
        .map(|&m| batch_size(m, batch_time))
        .collect();
    let mut samples = vec![Vec::with_capacity(batches); mechanisms.len()];
    for batch in 0..batches {
        for i in crate::report::turns(batch, mechanisms.len()) {
            samples[i].push(measure(mechanisms[i], sizes[i]));
        }
    }
    samples
        .into_iter()
        .zip(sizes)
        .map(|(times, size)| {
            let total: Duration = times.iter().sum();
            let per = |t: Duration| t / size as u32;
            RoundTrips {
                mean: total / (size as usize * times.len()) as u32,
                fastest: per(*times.iter().min().unwrap()),
                slowest: per(*times.iter().max().unwrap()),
            }
        })
        .collect()
}

// ---- mechanisms ----

/// One turn word: 0 = side 0's turn, 1 = side 1's. Raw FUTEX_WAKE + FUTEX_WAIT.
#[derive(Default)]
struct FutexTurns {
    turn: CachePadded<Futex>,
}

/// Waits on a turn word until it is `side`'s turn (raw FUTEX_WAIT).
fn wait_turn_on(turn: &Futex, side: usize) {
    let other = 1 - side as u32;
    while turn.load(Ordering::Acquire) == other {
        let _ = turn.wait(other, None);
    }
}

/// Gives a turn word to the other side and wakes it (raw FUTEX_WAKE).
fn pass_turn_on(turn: &Futex, side: usize) {
    turn.store(1 - side as u32, Ordering::Release);
    let _ = turn.wake(1);
}

impl Turns for FutexTurns {
    fn wait_turn(&self, side: usize) {
        wait_turn_on(&self.turn, side);
    }
    fn pass_turn(&self, side: usize) {
        pass_turn_on(&self.turn, side);
    }
}

/// The same turn word, handed over with `swap()`.
struct SwapTurns {
    turn: Futex,
    mode: SwapMode,
}

impl Turns for SwapTurns {
    fn wait_turn(&self, side: usize) {
        wait_turn_on(&self.turn, side);
    }
    fn pass_turn(&self, side: usize) {
        pass_turn_on(&self.turn, side);
    }
    fn pass_and_wait(&self, side: usize) {
        let other = 1 - side as u32;
        self.turn.store(other, Ordering::Release);
        while self.turn.load(Ordering::Acquire) == other {
            let _ = swap::swap_in(self.mode, &self.turn, other, &self.turn, None);
        }
    }
}

/// One Parker per side.
#[derive(Default)]
struct ParkerTurns {
    sides: [CachePadded<Parker>; 2],
}

impl Turns for ParkerTurns {
    fn wait_turn(&self, side: usize) {
        self.sides[side].park(None).unwrap();
    }
    fn pass_turn(&self, side: usize) {
        self.sides[1 - side].unpark();
    }
    fn pass_and_wait(&self, side: usize) {
        self.sides[side]
            .swap_to(&self.sides[1 - side], None)
            .unwrap();
    }
}

#[derive(Default)]
struct SpinTurns {
    turn: CachePadded<AtomicU32>,
}

impl Turns for SpinTurns {
    fn wait_turn(&self, side: usize) {
        while self.turn.load(Ordering::Acquire) != side as u32 {
            std::hint::spin_loop();
        }
    }
    fn pass_turn(&self, side: usize) {
        self.turn.store(1 - side as u32, Ordering::Release);
    }
}

/// A Mutex<usize> + Condvar turn, the same code over std's types and futexkit's
/// std-compatible ones.
macro_rules! condvar_turns {
    ($name:ident, $mutex:ty, $condvar:ty) => {
        #[derive(Default)]
        struct $name {
            turn: $mutex,
            changed: $condvar,
        }
        impl Turns for $name {
            fn wait_turn(&self, side: usize) {
                let mut turn = self.turn.lock().unwrap();
                while *turn != side {
                    turn = self.changed.wait(turn).unwrap();
                }
            }
            fn pass_turn(&self, side: usize) {
                *self.turn.lock().unwrap() = 1 - side;
                self.changed.notify_one();
            }
            fn pass_and_wait(&self, side: usize) {
                let mut turn = self.turn.lock().unwrap();
                *turn = 1 - side;
                self.changed.notify_one();
                while *turn != side {
                    turn = self.changed.wait(turn).unwrap();
                }
            }
        }
    };
}
condvar_turns!(
    FutexkitTurns,
    futexkit::sync::Mutex<usize>,
    futexkit::sync::Condvar
);
condvar_turns!(StdTurns, std::sync::Mutex<usize>, std::sync::Condvar);

#[derive(Default)]
struct ParkingLotTurns {
    turn: parking_lot::Mutex<usize>,
    changed: parking_lot::Condvar,
}

impl Turns for ParkingLotTurns {
    fn wait_turn(&self, side: usize) {
        let mut turn = self.turn.lock();
        while *turn != side {
            self.changed.wait(&mut turn);
        }
    }
    fn pass_turn(&self, side: usize) {
        *self.turn.lock() = 1 - side;
        self.changed.notify_one();
    }
    fn pass_and_wait(&self, side: usize) {
        let mut turn = self.turn.lock();
        *turn = 1 - side;
        self.changed.notify_one();
        while *turn != side {
            self.changed.wait(&mut turn);
        }
    }
}

/// `inbox[side]`: the pipe `side` reads its turn from.
struct PipeTurns {
    inbox: [(std::fs::File, std::fs::File); 2],
}

impl PipeTurns {
    fn new() -> PipeTurns {
        let make = || {
            let (r, w) = rustix::pipe::pipe().unwrap();
            (std::fs::File::from(r), std::fs::File::from(w))
        };
        PipeTurns {
            inbox: [make(), make()],
        }
    }
}

impl Turns for PipeTurns {
    fn wait_turn(&self, side: usize) {
        let mut byte = [0u8; 1];
        (&self.inbox[side].0).read_exact(&mut byte).unwrap();
    }
    fn pass_turn(&self, side: usize) {
        (&self.inbox[1 - side].1).write_all(&[1]).unwrap();
    }
}

struct SocketTurns {
    ends: [UnixStream; 2],
}

impl SocketTurns {
    fn new() -> SocketTurns {
        let (a, b) = UnixStream::pair().unwrap();
        SocketTurns { ends: [a, b] }
    }
}

impl Turns for SocketTurns {
    fn wait_turn(&self, side: usize) {
        let mut byte = [0u8; 1];
        (&self.ends[side]).read_exact(&mut byte).unwrap();
    }
    fn pass_turn(&self, side: usize) {
        (&self.ends[side]).write_all(&[1]).unwrap();
    }
}
