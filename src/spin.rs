//! The spin policy every futexkit primitive uses: how long to spin before sleeping, and when
//! not to spin at all.
//!
//! On the project's VMs a futex wake that must rouse an idle CPU costs 14-73 us, while a hand-off
//! between two spinning threads costs 0.2-0.4 us (`DESIGN.md`). Spinning briefly therefore wins
//! big when the partner is running, and loses when it is not: it burns the CPU the partner may
//! need. So the spin is:
//!
//! * **bounded**: never longer than [`MAX_SPIN_NS`];
//! * **adaptive**: each [`Spinner`] (one per primitive) keeps a moving average of how long its
//!   recent waits lasted, glibc-style (`learned += (sample - learned) / 8`), and spins for about
//!   twice that. A wait that outlasted the cap pulls the average down, so a primitive whose
//!   waits are long stops spinning; one whose partner answers quickly keeps spinning just long
//!   enough;
//! * **skipped** when it cannot pay: one usable CPU, or more runnable threads than CPUs
//!   (`/proc/loadavg`, sampled at most every 10 ms), or already [`max_spinners`] threads
//!   spinning on the same primitive, or [`max_spinners_in_process`] on any (the rest sleep:
//!   spinning crowds do not make progress, and take the CPUs of the threads they wait for);
//! * made of `spin_loop` hints only, checking the condition after 1, 2, 4, ... 32 hints
//!   (exponential backoff: each check steals the watched cache line from its writer), or every
//!   32 from the start for a contended lock ([`Spinner::spin_until_patiently`]); no
//!   `sched_yield`: on a busy machine a yield puts the waiter behind all the other runnable
//!   work (a key-value server's p99 was 1.5-2x worse with even one yield per contended lock,
//!   though a contended counter ran 2x faster), where a sleeper is woken at once by the unlock;
//! * one step under loom, so models stay small.
//!
//! [`wait_on_owner`] is the one wait on an owner-TID word: where the kernel has `FUTEX2_SPIN`
//! (probed, and opted in with `FUTEXKIT_ENABLE=spin`, as it has no stable ABI) the kernel spins
//! while the owner is on a CPU, which user space cannot see; elsewhere this policy spins, then
//! the thread sleeps on the word.
//!
//! State: each [`Spinner`] holds the learned average (an `AtomicU32` of nanoseconds) and the
//! number of threads spinning on it now; the cost of one `spin_loop` iteration is calibrated
//! once per process.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest a single spin may last.
pub const MAX_SPIN_NS: u32 = 20_000;
/// The shortest budget a spinning primitive gets, so it can discover that spinning pays again.
const MIN_SPIN_NS: u32 = 200;
/// The longest run of `spin_loop` hints between two checks of the condition.
const MAX_PAUSES_BETWEEN_CHECKS: u32 = 32;
/// How often the oversubscription check re-reads `/proc/loadavg`.
const LOAD_SAMPLE_PERIOD: Duration = Duration::from_millis(10);

/// Adaptive spin state for one primitive (or one side of a hand-off).
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use futexkit::spin::Spinner;
///
/// static SPINNER: Spinner = Spinner::new();
/// let ready = AtomicBool::new(true);
/// // Spins (briefly, adaptively) until the condition holds or the budget runs out.
/// assert!(SPINNER.spin_until(|| ready.load(Ordering::Acquire)));
/// ```
#[derive(Debug)]
pub struct Spinner {
    /// Moving average of recent wait durations in nanoseconds (0 = spinning does not pay).
    learned_ns: AtomicU32,
    /// Threads spinning on this spinner now.
    spinning: AtomicU32,
}

impl Default for Spinner {
    fn default() -> Spinner {
        Spinner::new()
    }
}

impl Spinner {
    /// A spinner that starts by spinning a moderate amount.
    pub const fn new() -> Spinner {
        Spinner {
            learned_ns: AtomicU32::new(MAX_SPIN_NS / 4),
            spinning: AtomicU32::new(0),
        }
    }

    /// Spins until `done` returns true or this spinner's budget runs out; returns whether
    /// `done` held. Calls `done` at least once, and does not spin at all when spinning cannot
    /// pay (see the module documentation).
    #[inline]
    pub fn spin_until(&self, mut done: impl FnMut() -> bool) -> bool {
        if done() {
            return true;
        }
        self.spin_slow(&mut done, 1)
    }

    /// Like [`spin_until`](Spinner::spin_until), but after the first look (before any hint)
    /// looks at the condition only every `MAX_PAUSES_BETWEEN_CHECKS` hints (or once at the end
    /// of a budget shorter than that): for a contended lock, where each early look pulls the
    /// cache line away from an owner about to relock, and the lock changing hands at every
    /// release costs more than it gives (a waiter that backs off lets the running owner do many
    /// critical sections in a row, as parking_lot's yielding waiter does).
    #[inline]
    pub fn spin_until_patiently(&self, mut done: impl FnMut() -> bool) -> bool {
        if done() {
            return true;
        }
        self.spin_slow(&mut done, MAX_PAUSES_BETWEEN_CHECKS)
    }

    /// Spins while `word` holds `expected`, then sleeps on it; learns from the sleep. `Ok(())`
    /// once the word changed or a wake arrived (possibly spuriously: re-check).
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`](crate::futex::Error::TimedOut) at the deadline.
    pub fn wait_on<S: crate::futex::Scope>(
        &self,
        word: &crate::futex::Futex<S>,
        expected: u32,
        deadline: Option<crate::futex::Deadline>,
    ) -> Result<(), crate::futex::Error> {
        if self.spin_until(|| word.load(Ordering::Acquire) != expected) {
            return Ok(());
        }
        let start = Instant::now();
        let result = match word.wait(expected, deadline) {
            // It changed between the spin and the sleep: that is what we waited for.
            Err(crate::futex::Error::ValueChanged) => Ok(()),
            other => other,
        };
        self.record_sleep(start.elapsed());
        result
    }

    /// Tells the spinner how a wait that had to sleep turned out: `waited` is the whole wait,
    /// spinning included. A short wait teaches it to spin longer next time; one beyond the cap
    /// teaches it to spin less.
    pub fn record_sleep(&self, waited: Duration) {
        let ns = waited.as_nanos();
        if ns <= u128::from(MAX_SPIN_NS) {
            self.learn(ns as u32);
        } else {
            self.learn(0);
        }
    }

    /// The current spin budget in nanoseconds (0 when spinning cannot pay now).
    pub fn budget_ns(&self) -> u32 {
        if !spinning_can_pay() {
            return 0;
        }
        let learned = self.learned_ns.load(Ordering::Relaxed);
        learned.saturating_mul(2).clamp(MIN_SPIN_NS, MAX_SPIN_NS)
    }

    #[cold]
    fn spin_slow(&self, done: &mut dyn FnMut() -> bool, first_pause: u32) -> bool {
        if cfg!(loom) {
            return done();
        }
        let budget = self.budget_ns();
        if budget == 0 {
            return false;
        }
        // Spinners across all primitives share the CPUs too: at most half of them spin at
        // once, or a lock holder and a notifier find their CPUs taken by waiters.
        if SPINNING_IN_PROCESS.fetch_add(1, Ordering::Relaxed) >= max_spinners_in_process() {
            SPINNING_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        if self.spinning.fetch_add(1, Ordering::Relaxed) >= max_spinners() {
            self.spinning.fetch_sub(1, Ordering::Relaxed);
            SPINNING_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        let ns_per_iter = ns_per_spin_iteration();
        let max_iters = (budget / ns_per_iter).max(1);
        let mut iters = 0;
        let mut held = false;
        // Exponential backoff between checks: every check pulls the watched cache line away
        // from the thread that is about to change it.
        let mut pause = first_pause.min(max_iters);
        while iters < max_iters {
            for _ in 0..pause {
                core::hint::spin_loop();
            }
            iters += pause;
            pause = (pause * 2).min(MAX_PAUSES_BETWEEN_CHECKS);
            if done() {
                self.learn(iters.saturating_mul(ns_per_iter));
                held = true;
                break;
            }
        }
        self.spinning.fetch_sub(1, Ordering::Relaxed);
        SPINNING_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
        held
    }

    fn learn(&self, sample_ns: u32) {
        let learned = self.learned_ns.load(Ordering::Relaxed);
        let next = if sample_ns >= learned {
            learned + (sample_ns - learned) / 8
        } else {
            learned - (learned - sample_ns) / 8
        };
        self.learned_ns.store(next, Ordering::Relaxed);
    }
}

/// Threads spinning now in this process, on any primitive.
static SPINNING_IN_PROCESS: AtomicU32 = AtomicU32::new(0);

/// How many threads may spin on one primitive at once: half the usable CPUs, 1 to 4.
pub fn max_spinners() -> u32 {
    (crate::capabilities().usable_cpus() / 2).clamp(1, 4) as u32
}

/// How many threads may spin at once in the whole process: half the usable CPUs, at least 1.
pub fn max_spinners_in_process() -> u32 {
    (crate::capabilities().usable_cpus() / 2).max(1) as u32
}

/// False when spinning cannot pay: one usable CPU, or more runnable threads than CPUs.
pub fn spinning_can_pay() -> bool {
    let cpus = crate::capabilities().usable_cpus();
    cpus > 1 && !oversubscribed(cpus)
}

/// Whether more threads are runnable system-wide than this process has CPUs (with a little
/// slack for the reader itself), from the fourth field of `/proc/loadavg`, sampled at most every
/// [`LOAD_SAMPLE_PERIOD`].
fn oversubscribed(cpus: usize) -> bool {
    // Packed: (time of the sample in ms since START) << 1 | oversubscribed bit.
    static SAMPLE: AtomicU64 = AtomicU64::new(u64::MAX);
    static START: OnceLock<Instant> = OnceLock::new();
    let now_ms = START.get_or_init(Instant::now).elapsed().as_millis() as u64;
    let sample = SAMPLE.load(Ordering::Relaxed);
    if sample != u64::MAX
        && now_ms.saturating_sub(sample >> 1) < LOAD_SAMPLE_PERIOD.as_millis() as u64
    {
        return sample & 1 == 1;
    }
    let over = runnable_threads().is_some_and(|running| running > cpus + cpus / 4);
    SAMPLE.store(now_ms << 1 | u64::from(over), Ordering::Relaxed);
    over
}

fn runnable_threads() -> Option<usize> {
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
    let field = loadavg.split_whitespace().nth(3)?;
    field.split('/').next()?.parse().ok()
}

/// The cost of one `spin_loop` iteration in nanoseconds, measured once (PAUSE costs about 10
/// cycles on older x86 and about 140 on newer).
fn ns_per_spin_iteration() -> u32 {
    static NS: OnceLock<u32> = OnceLock::new();
    *NS.get_or_init(|| {
        const ITERS: u32 = 2_000;
        let mut best = u128::MAX;
        for _ in 0..3 {
            let start = Instant::now();
            for _ in 0..ITERS {
                core::hint::spin_loop();
            }
            best = best.min(start.elapsed().as_nanos());
        }
        ((best / u128::from(ITERS)) as u32).clamp(1, 1_000)
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn budget_is_bounded() {
        let s = Spinner::new();
        assert!(s.budget_ns() <= MAX_SPIN_NS);
        for _ in 0..100 {
            s.record_sleep(Duration::from_secs(1));
        }
        // Long waits teach it to spin only the minimum.
        assert!(s.budget_ns() <= MIN_SPIN_NS);
        for _ in 0..100 {
            s.record_sleep(Duration::from_micros(8));
        }
        if spinning_can_pay() {
            assert!(s.budget_ns() > MIN_SPIN_NS);
        }
    }

    #[test]
    fn spin_until_reports_the_condition() {
        let s = Spinner::new();
        assert!(s.spin_until(|| true));
        assert!(!s.spin_until(|| false));
        let mut n = 0;
        // Holds on the third check, well within any budget; when spinning cannot pay the
        // condition is checked once.
        let held = s.spin_until(|| {
            n += 1;
            n >= 3
        });
        if held {
            assert_eq!(n, 3);
        } else {
            assert_eq!(n, 1);
        }
    }
}

/// Waits while `word` holds `owner_tid` (the TID of the thread that owns what the word guards):
/// with kernel `FUTEX2_SPIN` where probed and enabled (the kernel spins while the owner runs,
/// then sleeps), otherwise `spinner`'s bounded spin and then a futex wait. `Ok(())` once the word
/// changed or a wake arrived (possibly spuriously: re-check).
///
/// ```
/// use std::sync::atomic::Ordering;
/// use std::sync::Arc;
/// use futexkit::futex::Futex;
/// use futexkit::spin::{wait_on_owner, Spinner};
///
/// let owner_tid = 4242; // in real use: the owner's gettid()
/// let word = Arc::new(Futex::new(owner_tid));
/// let owner = {
///     let word = Arc::clone(&word);
///     std::thread::spawn(move || {
///         word.store(0, Ordering::Release); // the owner lets go...
///         word.wake(1).unwrap();            // ...and wakes a sleeping waiter
///     })
/// };
/// let spinner = Spinner::new();
/// while word.load(Ordering::Acquire) == owner_tid {
///     wait_on_owner(&word, owner_tid, &spinner, None).unwrap();
/// }
/// owner.join().unwrap();
/// ```
///
/// # Errors
///
/// [`Error::TimedOut`](crate::futex::Error::TimedOut) at the deadline; with `FUTEX2_SPIN`,
/// [`Error::PermissionDenied`](crate::futex::Error::PermissionDenied) if the owner is a kernel
/// thread.
pub fn wait_on_owner<S: crate::futex::Scope>(
    word: &crate::futex::Futex<S>,
    owner_tid: u32,
    spinner: &Spinner,
    deadline: Option<crate::futex::Deadline>,
) -> Result<(), crate::futex::Error> {
    #[cfg(not(loom))]
    if crate::capabilities().has(crate::futex::Capability::Spin) {
        use crate::futex::Error;
        match crate::futex::futex2::wait_spinning_on_owner(word, owner_tid, deadline) {
            Err(Error::ValueChanged) => return Ok(()),
            // The probe said yes but the call disagrees: use the user-space policy.
            Err(Error::Unsupported | Error::InvalidArgument) => {}
            other => return other,
        }
    }
    spinner.wait_on(word, owner_tid, deadline)
}
