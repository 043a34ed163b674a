//! Contention profiles (feature `profile`): which locks threads waited for, from where, and for
//! how long, as Go's mutex profile tells a Go program.
//!
//! While a sampling rate is set ([`set_rate`]; 0, the default, records nothing), one contended
//! acquisition in `rate`, picked at random, records the waiting thread's stack, the lock (its
//! kind and address) and how long the thread waited, on every futexkit lock: `sync`'s
//! [`Mutex`](crate::sync::Mutex) and [`RwLock`](crate::sync::RwLock), the `futexkit::parking_lot`
//! and `lock_api` types built on [`crate::raw`], and the [`shared`](crate::shared) locks. [`snapshot`] returns what was recorded: its `Display` is
//! a table of the sites that waited longest; [`Profile::folded`] writes folded stacks, which
//! `inferno-flamegraph` (or `flamegraph.pl`) turns into an SVG flame graph of waiting.
//!
//! ```
//! # // The module is private without the feature, and rustdoc still collects this example.
//! # #[cfg(feature = "profile")]
//! # fn main() {
//! use futexkit::sync::Mutex;
//! use std::sync::Arc;
//!
//! futexkit::profile::set_rate(1); // every contended acquisition; 100 would record 1 in 100
//! let hot = Arc::new(Mutex::new(0u64));
//! let threads: Vec<_> = (0..4)
//!     .map(|_| {
//!         let hot = Arc::clone(&hot);
//!         std::thread::spawn(move || {
//!             for _ in 0..10_000 {
//!                 *hot.lock().unwrap() += 1;
//!             }
//!         })
//!     })
//!     .collect();
//! for thread in threads {
//!     thread.join().unwrap();
//! }
//! let profile = futexkit::profile::snapshot();
//! println!("{profile}"); // the sites that waited longest
//! std::fs::write("/tmp/waits.folded", profile.folded()).unwrap();
//! futexkit::profile::set_rate(0);
//! # }
//! # #[cfg(not(feature = "profile"))]
//! # fn main() {}
//! ```
//!
//! ## What it costs
//!
//! Nothing on a lock or unlock that does not wait. A contended acquisition reads the rate (one
//! relaxed load) while sampling is off, and draws a thread-local random number while it is on.
//! A sampled one captures its stack before it waits (the frames' addresses only, a few
//! microseconds spent where the thread would wait anyway) and, once it holds the lock, adds
//! its wait to a table under a mutex of its own (std's). Frames are resolved to names and
//! lines only by [`snapshot`]. `docs/benchmarks.md` has the measured costs.
//!
//! ## What it cannot tell
//!
//! * A lock is named by its kind and address, not by where it was made: `const fn new` cannot
//!   learn its caller on stable Rust.
//! * Which thread held the lock meanwhile, and where: that would cost every acquisition a
//!   store, which this profile does not charge.
//! * Waits of a Condvar, Barrier, Semaphore, Latch or Event: those are waits for an event,
//!   not for a lock someone holds.
//! * Functions the optimizer inlined, in a build without debug information: a stack names
//!   only the frames that were kept, so a thread's closure inlined into its thread's start
//!   shows as `start_thread`. Line tables bring the inlined frames back without slowing the
//!   code: `[profile.release] debug = "line-tables-only"` in the profiled program's
//!   `Cargo.toml` (or `CARGO_PROFILE_RELEASE_DEBUG=line-tables-only` for one build).

use core::fmt;

/// Which kind of lock a thread waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A mutex ([`RawMutex`](crate::raw::RawMutex) and the types on it).
    Mutex,
    /// A read (or upgradable read) lock of a [`RawRwLock`](crate::raw::RawRwLock).
    RwLockRead,
    /// A write lock (or an upgrade) of a [`RawRwLock`](crate::raw::RawRwLock).
    RwLockWrite,
    /// A process-shared lock's robust word ([`crate::shared`]: a mutex, or a rwlock's writer
    /// or reader slot).
    Shared,
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockKind::Mutex => "Mutex",
            LockKind::RwLockRead => "RwLock read",
            LockKind::RwLockWrite => "RwLock write",
            LockKind::Shared => "shared lock",
        })
    }
}

/// The waiting half of a contended acquisition of `lock`: `wait()` itself, and, where this
/// one is sampled, its stack and duration recorded around it. Without the feature (or under a
/// model checker) it is `wait()` and nothing else.
#[inline(always)]
pub(crate) fn contended<R>(kind: LockKind, lock: *const (), wait: impl FnOnce() -> R) -> R {
    #[cfg(all(feature = "profile", not(any(futexkit_loom, futexkit_shuttle))))]
    {
        recording::contended(kind, lock, wait)
    }
    #[cfg(not(all(feature = "profile", not(any(futexkit_loom, futexkit_shuttle)))))]
    {
        let _ = (kind, lock);
        wait()
    }
}

#[cfg(all(feature = "profile", not(any(futexkit_loom, futexkit_shuttle))))]
pub use recording::{rate, reset, set_rate, snapshot, Frame, Profile, Site};

#[cfg(all(feature = "profile", not(any(futexkit_loom, futexkit_shuttle))))]
mod recording {
    use core::cell::Cell;
    use core::fmt;
    use core::ptr;
    use std::collections::hash_map::Entry;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use super::LockKind;

    /// 1 in how many contended acquisitions is recorded; 0: none.
    static RATE: AtomicU32 = AtomicU32::new(0);
    /// What was recorded, by lock and stack. std's mutex: recording must not wait on the locks
    /// it records. Taken only where the thread holds no lock it sampled: before a sampled wait,
    /// and by a snapshot or a reset.
    static RECORDS: std::sync::Mutex<Option<HashMap<Key, Record>>> = std::sync::Mutex::new(None);

    /// Sampled waits not yet in `RECORDS`, a list pushed without a lock or an allocation: after
    /// its wait a thread holds the lock it waited for, which may be the allocator's own (an
    /// allocator built on futexkit locks), so it may neither allocate nor wait for a thread that
    /// allocates under `RECORDS`.
    static PENDING: AtomicPtr<Pending> = AtomicPtr::new(ptr::null_mut());

    std::thread_local! {
        /// Set while this thread records a sample: an acquisition the recording makes itself
        /// (the allocator's lock, say) is not sampled, which would recurse.
        static SAMPLING: Cell<bool> = const { Cell::new(false) };
    }

    /// A sampled wait, allocated before the wait and filled in after it.
    struct Pending {
        key: Key,
        trace: backtrace::Backtrace,
        waited: Duration,
        rate: u32,
        next: *mut Pending,
    }

    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Key {
        kind: LockKind,
        lock: usize,
        /// The stack's return addresses, innermost first.
        stack: Vec<usize>,
    }

    struct Record {
        events: u64,
        total: Duration,
        /// Each sampled wait times the rate it was sampled at: all waits, estimated.
        estimated: Duration,
        max: Duration,
        /// The first stack seen for this key, unresolved until a snapshot.
        trace: backtrace::Backtrace,
    }

    /// Records 1 in `rate` contended acquisitions, chosen at random (as Go's
    /// `SetMutexProfileFraction`); 0 stops recording (what was recorded stays until
    /// [`reset`]). Takes effect at once in every thread.
    pub fn set_rate(rate: u32) {
        RATE.store(rate, Ordering::Relaxed);
    }

    /// The rate set now (0: not recording).
    pub fn rate() -> u32 {
        RATE.load(Ordering::Relaxed)
    }

    /// Forgets everything recorded so far.
    pub fn reset() {
        with_records(|records| records.clear());
    }

    /// This thread marked as recording until the drop (`SAMPLING`); `nested` if it was already.
    struct Recording {
        nested: bool,
    }

    impl Recording {
        fn enter() -> Recording {
            Recording {
                nested: SAMPLING
                    .try_with(|sampling| sampling.replace(true))
                    .unwrap_or(true),
            }
        }
    }

    impl Drop for Recording {
        fn drop(&mut self) {
            if !self.nested {
                let _ = SAMPLING.try_with(|sampling| sampling.set(false));
            }
        }
    }

    /// Runs `f` on the records, the pending samples moved in, with this thread marked as
    /// recording: an acquisition that `f`'s allocations make is not sampled, as its sample
    /// would wait for `RECORDS`, which this thread holds.
    fn with_records<R>(f: impl FnOnce(&mut HashMap<Key, Record>) -> R) -> R {
        let _recording = Recording::enter();
        let mut records = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        let records = records.get_or_insert_with(HashMap::new);
        take_pending(records);
        f(records)
    }

    /// Moves every pending sample into `records`.
    fn take_pending(records: &mut HashMap<Key, Record>) {
        let mut node = PENDING.swap(ptr::null_mut(), Ordering::Acquire);
        while !node.is_null() {
            // SAFETY: the swap took the whole list, so no other thread reaches its nodes; each
            // was made by `Box::into_raw` and published by a Release CAS, which the Acquire
            // swap saw, with the writes that filled it in.
            let sample = unsafe { Box::from_raw(node) };
            let Pending {
                key,
                trace,
                waited,
                rate,
                next,
            } = *sample;
            node = next;
            let record = match records.entry(key) {
                Entry::Occupied(entry) => entry.into_mut(),
                Entry::Vacant(entry) => entry.insert(Record {
                    events: 0,
                    total: Duration::ZERO,
                    estimated: Duration::ZERO,
                    max: Duration::ZERO,
                    trace,
                }),
            };
            record.events += 1;
            record.total += waited;
            record.estimated += waited.saturating_mul(rate);
            record.max = record.max.max(waited);
        }
    }

    /// Publishes a filled-in sample: no lock, no allocation.
    fn push_pending(sample: Box<Pending>) {
        let node = Box::into_raw(sample);
        let mut head = PENDING.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` came from `Box::into_raw` above and is this thread's alone until
            // the CAS below publishes it.
            unsafe { (*node).next = head };
            match PENDING.compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    #[inline(always)]
    pub(super) fn contended<R>(kind: LockKind, lock: *const (), wait: impl FnOnce() -> R) -> R {
        let rate = RATE.load(Ordering::Relaxed);
        if rate == 0 || !chosen(rate) {
            return wait();
        }
        sampled(kind, lock as usize, rate, wait)
    }

    /// Whether this acquisition is one of the 1 in `rate` recorded: a thread-local xorshift.
    fn chosen(rate: u32) -> bool {
        thread_local! {
            static STATE: Cell<u64> = const { Cell::new(0) };
        }
        STATE
            .try_with(|state| {
                let mut x = state.get();
                if x == 0 {
                    // Seeded from the state's own address: distinct per thread.
                    x = (state as *const Cell<u64> as u64) | 1;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                state.set(x);
                x % u64::from(rate) == 0
            })
            .unwrap_or(false)
    }

    #[cold]
    #[inline(never)]
    fn sampled<R>(kind: LockKind, lock: usize, rate: u32, wait: impl FnOnce() -> R) -> R {
        let recording = Recording::enter();
        if recording.nested {
            return wait();
        }
        // Everything that allocates, and `RECORDS`, before the wait.
        let trace = backtrace::Backtrace::new_unresolved();
        let key = Key {
            kind,
            lock,
            stack: trace.frames().iter().map(|f| f.ip() as usize).collect(),
        };
        let mut sample = Box::new(Pending {
            key,
            trace,
            waited: Duration::ZERO,
            rate,
            next: ptr::null_mut(),
        });
        with_records(|_| ());
        let start = Instant::now();
        let acquired = wait();
        sample.waited = start.elapsed();
        push_pending(sample);
        acquired
    }

    /// One frame of a waiting thread's stack.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Frame {
        /// The function (demangled, without its hash), or `??` where the symbol is unknown.
        pub function: String,
        /// Its source file, where debug information has it.
        pub file: Option<String>,
        /// Its line.
        pub line: Option<u32>,
    }

    impl fmt::Display for Frame {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.function)?;
            if let (Some(file), Some(line)) = (&self.file, self.line) {
                write!(f, " ({file}:{line})")?;
            }
            Ok(())
        }
    }

    /// A lock and the stack that waited for it, with the waits sampled there.
    #[derive(Debug, Clone)]
    pub struct Site {
        /// The lock's kind.
        pub kind: LockKind,
        /// The lock's address.
        pub lock: usize,
        /// Sampled waits.
        pub events: u64,
        /// Their total.
        pub total_wait: Duration,
        /// Every wait at this site, estimated: each sampled wait times the rate it was sampled
        /// at.
        pub estimated_wait: Duration,
        /// The longest.
        pub max_wait: Duration,
        /// The waiting thread's stack, innermost first, starting at the frame that called into
        /// futexkit (or lock_api).
        pub frames: Vec<Frame>,
    }

    impl Site {
        /// The frame that asked for the lock: the first of [`frames`](Site::frames).
        pub fn caller(&self) -> Option<&Frame> {
            self.frames.first()
        }
    }

    /// What was recorded up to a [`snapshot`]: one site per lock and waiting stack, longest
    /// estimated wait first. Its `Display` is a table by lock and calling frame (stacks that
    /// differ further out merged).
    #[derive(Debug, Clone)]
    pub struct Profile {
        sites: Vec<Site>,
    }

    impl Profile {
        /// Every site, longest estimated wait first.
        pub fn sites(&self) -> &[Site] {
            &self.sites
        }

        /// Folded stacks (`outermost;...;innermost;lock value` lines), the input of
        /// `inferno-flamegraph` and `flamegraph.pl`; each value is the site's estimated wait in
        /// microseconds.
        pub fn folded(&self) -> String {
            let mut out = String::new();
            for site in &self.sites {
                let mut frames: Vec<String> = site
                    .frames
                    .iter()
                    .rev()
                    .map(|frame| frame.function.replace(';', ":"))
                    .collect();
                frames.push(format!("{} {:#x}", site.kind, site.lock));
                let micros = site.estimated_wait.as_micros();
                out.push_str(&format!("{} {micros}\n", frames.join(";")));
            }
            out
        }
    }

    impl fmt::Display for Profile {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            // One row per lock and calling frame, longest estimated wait first.
            let mut rows: Vec<(String, String, u64, Duration, Duration)> = Vec::new();
            for site in &self.sites {
                let lock = format!("{} {:#x}", site.kind, site.lock);
                let caller = site
                    .caller()
                    .map_or_else(|| "??".to_owned(), ToString::to_string);
                match rows.iter_mut().find(|r| r.0 == lock && r.1 == caller) {
                    Some(row) => {
                        row.2 += site.events;
                        row.3 += site.estimated_wait;
                        row.4 = row.4.max(site.max_wait);
                    }
                    None => rows.push((
                        lock,
                        caller,
                        site.events,
                        site.estimated_wait,
                        site.max_wait,
                    )),
                }
            }
            rows.sort_by_key(|row| core::cmp::Reverse(row.3));
            writeln!(
                f,
                "{:>12} {:>8} {:>10}  {:<28} caller",
                "waited", "samples", "max", "lock"
            )?;
            for (lock, caller, events, estimated, max) in rows {
                writeln!(
                    f,
                    "{estimated:>12.3?} {events:>8} {max:>10.3?}  {lock:<28} {caller}"
                )?;
            }
            Ok(())
        }
    }

    /// What was recorded so far, with every stack resolved to functions and lines.
    pub fn snapshot() -> Profile {
        // Copied out first: resolving stacks is slow, and recording must not wait for it.
        let taken: Vec<(Site, backtrace::Backtrace)> = {
            with_records(|records| {
                records
                    .iter()
                    .map(|(key, r)| {
                        let site = Site {
                            kind: key.kind,
                            lock: key.lock,
                            events: r.events,
                            total_wait: r.total,
                            estimated_wait: r.estimated,
                            max_wait: r.max,
                            frames: Vec::new(),
                        };
                        (site, r.trace.clone())
                    })
                    .collect()
            })
        };
        let mut sites: Vec<Site> = taken
            .into_iter()
            .map(|(mut site, mut trace)| {
                trace.resolve();
                site.frames = callers(&trace);
                site
            })
            .collect();
        sites.sort_by_key(|site| core::cmp::Reverse(site.estimated_wait));
        Profile { sites }
    }

    /// The frames of `trace` from the one that asked for the lock outward: the innermost frames
    /// of the profiler, the lock (futexkit, lock_api) and the standard library's glue between
    /// them are left out. A frame is known by its path or, where the debug information gives
    /// inlined frames their short names only (`debug = "line-tables-only"`), by its file.
    fn callers(trace: &backtrace::Backtrace) -> Vec<Frame> {
        let frames: Vec<Frame> = trace
            .frames()
            .iter()
            .flat_map(|frame| frame.symbols())
            .map(|symbol| Frame {
                function: symbol
                    .name()
                    .map_or_else(|| "??".to_owned(), |name| format!("{name:#}")),
                file: symbol.filename().map(|p| p.display().to_string()),
                line: symbol.lineno(),
            })
            .collect();
        let inside = |frame: &Frame| {
            let name = frame.function.trim_start_matches('<');
            [
                "futexkit::",
                "lock_api::",
                "backtrace::",
                "core::",
                "std::",
                "alloc::",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix))
                || frame.file.as_deref().is_some_and(|file| {
                    file.starts_with(concat!(env!("CARGO_MANIFEST_DIR"), "/src/"))
                        || file.starts_with("/rustc/")
                        || ["/lock_api-0.", "/backtrace-0."]
                            .iter()
                            .any(|crate_dir| file.contains(crate_dir))
                })
        };
        let start = frames.iter().position(|f| !inside(f)).unwrap_or(0);
        frames[start..].to_vec()
    }
}
