//! The wait policy every futexkit waiter shares: whether to spin before it sleeps, and how long.
//!
//! A spin pays when the thread waited for runs and is about to act (a wake-up costs far more than
//! a hand-off between running threads), and loses when it does not: the spinner holds a CPU that
//! thread may need. No waiter yields its CPU in place of a sleep: user space cannot tell whether
//! the thread a yield runs is the one it waits for. `docs/design.md`, "Spinning", has the reasons
//! and the measurements behind every rule. None of it is protocol state: a policy mistake costs
//! time, never a wake-up.
//!
//! | waiter | rule | where |
//! |--------|------|-------|
//! | a lock (the Mutex, the RwLock, the shared Mutex) | [`SpinWait`]: a fixed budget, then sleep | this file |
//! | a compare-and-swap that lost to other threads | `back_off`: `2^losses` hints, no budget | this file |
//! | a notify (Condvar, Barrier) | `spin_for_notify`: none while threads wait for a CPU; else a lock's budget while its thread's spins pay, or a probe | `notify.rs` |
//! | a partner's answer (`swap`, `Parker`, FlipCall) | [`Spinner`]: twice the moving average of its sleeps, capped, while its spins pay | `hand_off.rs` |
//!
//! Whether a notify or hand-off waiter's spins pay is one rule for both (`credit.rs`); what the
//! policy decided is counted in `decisions.rs` ([`decisions()`]).
//!
//! ## The lock waiter's rule
//!
//! A lock asks [`SpinWait::spin`] only while its word shows no sleepers (a spinner would take the
//! lock from them with a CPU they may need), with a fresh `SpinWait` after each wake; a Mutex
//! waiter that asked for the lock also spins for its hand-off, which no other thread may take.
//! It spins `SPIN_WAIT_NS` in runs of hints that double from `FIRST_RUN` up to
//! `MAX_PAUSES_BETWEEN_LOOKS`, looking at the lock between runs, then sleeps. Nothing is learned
//! per lock (a lock is one word), so a waiter behind a blocked holder wastes at most the budget.
//!
//! ## State
//!
//! | state | kept | meaning | changed by |
//! |-------|------|---------|------------|
//! | `SpinWait` | per spin between two sleeps | hints left in the budget, the next run's length | each look |
//! | `Machine` | once per process | usable CPUs, CPUs online, a spin hint's cost, a lock spin's hints | measured at the first spin, never again |
//!
//! With one usable CPU, or under a model checker (where a spin is one look, so that models stay
//! small), `Machine` holds a lock budget of 0.

mod credit;
mod decisions;
mod hand_off;
mod notify;

use decisions::{count, Tally};
pub use decisions::{decisions, Decisions, Outcomes};
pub(crate) use hand_off::{
    hand_off_cpu, partner_may_be_running, record_hand_over_cpu, with_thread_spinner, MAX_SPIN_NS,
    NO_CPU,
};
pub use hand_off::{wait_on_owner, Spinner};
pub(crate) use notify::{notified, spin_for_arrivals, spin_for_notify};

use std::sync::OnceLock;
use std::time::Instant;

use crate::futex::sys::MODEL_CHECKED;
use crate::futex::Deadline;

/// How long a [`SpinWait`] spins before it sleeps: long enough to see a short critical section
/// end, or a partner answer, on another CPU; short enough that a waiter behind a blocked
/// holder wastes little.
const SPIN_WAIT_NS: u32 = 4_000;

/// The longest run of spin hints between two looks.
const MAX_PAUSES_BETWEEN_LOOKS: u32 = 64;

/// The spin hints before a lock waiter's first look, and so the shortest run between two: each
/// look pulls the lock's cache line from its holder, and a holder that releases and retakes the
/// lock at once loses it to a look that comes too soon, which moves the lock to another CPU.
/// A later first look keeps a lock with one thread longer, but where work needs the lock to
/// change hands (a queue's producers and consumers) it leaves the lock idle longer.
const FIRST_RUN: u32 = 8;

/// A waiter's spin for a lock: `SPIN_WAIT_NS` of spin hints in exponentially growing runs,
/// or none where spinning cannot pay.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use futexkit::spin::SpinWait;
///
/// let locked = AtomicBool::new(false);
/// let mut spin = SpinWait::new();
/// let taken = loop {
///     if locked
///         .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
///         .is_ok()
///     {
///         break true;
///     }
///     if !spin.spin() {
///         break false; // budget spent: time to sleep
///     }
/// };
/// assert!(taken);
/// ```
#[derive(Debug)]
pub struct SpinWait {
    /// Spin hints left in the budget.
    hints_left: u32,
    /// Hints in the next run.
    run: u32,
}

impl Default for SpinWait {
    fn default() -> SpinWait {
        SpinWait::new()
    }
}

impl SpinWait {
    /// A full budget, or none where spinning cannot pay.
    #[inline]
    pub fn new() -> SpinWait {
        SpinWait {
            hints_left: machine().spin_wait_hints,
            run: FIRST_RUN,
        }
    }

    /// A spin of `hints` spin hints in all (a hand-off's learned budget, say).
    #[inline]
    fn with_hints(hints: u32) -> SpinWait {
        SpinWait {
            hints_left: hints,
            run: 1,
        }
    }

    /// Spins one run of hints (twice as long as the last) and returns true, so that the caller
    /// looks at its lock again, while the `SPIN_WAIT_NS` budget lasts; false once it is spent,
    /// so that the caller sleeps.
    #[inline]
    pub fn spin(&mut self) -> bool {
        if self.run == FIRST_RUN && self.hints_left > 0 {
            count(Tally::LockStarted);
        }
        let spun = self.spin_run();
        if !spun && self.run > FIRST_RUN {
            // The budget ran out after a spin: count it once.
            self.run = FIRST_RUN;
            count(Tally::LockSpent);
        }
        spun
    }

    /// Runs of [`spin_run`](SpinWait::spin_run) until `done` holds (true), or the budget is
    /// spent or `deadline` has passed (false; the clock is read once per longest run).
    #[inline]
    fn spin_until(&mut self, deadline: Option<Deadline>, done: &mut dyn FnMut() -> bool) -> bool {
        while self.spin_run() {
            if done() {
                return true;
            }
            if self.run == MAX_PAUSES_BETWEEN_LOOKS && deadline.is_some_and(|d| d.has_passed()) {
                return false;
            }
        }
        false
    }

    /// The hints of [`spin`](SpinWait::spin), counted as nothing: one run, twice as long as
    /// the last, or false once the budget is spent.
    #[inline]
    fn spin_run(&mut self) -> bool {
        if self.hints_left == 0 {
            return false;
        }
        let run = self.run.min(self.hints_left);
        for _ in 0..run {
            core::hint::spin_loop();
        }
        self.hints_left -= run;
        self.run = (self.run * 2).min(MAX_PAUSES_BETWEEN_LOOKS);
        true
    }
}

/// A pause between two attempts of a compare-and-swap that other threads keep changing
/// under it (readers adding themselves to a count): `2^failures` spin hints, at most
/// `MAX_PAUSES_BETWEEN_LOOKS`, and none where spinning cannot pay. It is not a wait (a
/// failure means the word changed: another thread got through, or a waiter marked itself),
/// so it has no budget and counts nothing: it spreads the attempts out so that they stop
/// taking the cache line from one another.
#[inline]
pub(crate) fn back_off(failures: u32) {
    if !spinning_can_pay() {
        return;
    }
    let hints = 1u32 << failures.min(MAX_PAUSES_BETWEEN_LOOKS.ilog2());
    for _ in 0..hints {
        core::hint::spin_loop();
    }
}

/// What spinning needs to know about the machine, measured once by [`machine`].
struct Machine {
    /// The CPUs this process may run on (its affinity mask when measured), at least 1.
    usable_cpus: usize,
    /// The CPUs the system has online, at least 1: what `/proc/loadavg`'s count of runnable
    /// threads, which is the whole system's, is compared with.
    online_cpus: usize,
    /// The cost of one spin hint (`core::hint::spin_loop`) in nanoseconds, at least 1.
    ns_per_hint: u32,
    /// Spin hints in a [`SpinWait`]'s budget: `SPIN_WAIT_NS` of them, 0 where spinning
    /// cannot pay (one usable CPU, or a model checker).
    spin_wait_hints: u32,
}

/// The machine's facts, measured at the first call: the affinity mask (one system call), the CPUs
/// online (a file in sysfs, read by the C library) and the cost of a spin hint (x86's PAUSE
/// costs several times more on some cores than on others, so it is timed, not assumed).
fn machine() -> &'static Machine {
    static MACHINE: OnceLock<Machine> = OnceLock::new();
    MACHINE.get_or_init(|| {
        let usable_cpus = crate::futex::sys::thread::usable_cpus();
        let online_cpus = crate::futex::sys::thread::online_cpus().unwrap_or(usable_cpus);
        let ns_per_hint = time_spin_hint();
        let spin_wait_hints = if MODEL_CHECKED || usable_cpus <= 1 {
            0
        } else {
            (SPIN_WAIT_NS / ns_per_hint).max(1)
        };
        Machine {
            usable_cpus,
            online_cpus,
            ns_per_hint,
            spin_wait_hints,
        }
    })
}

/// Whether spinning can pay: more than one usable CPU, and no model checker.
#[inline]
fn spinning_can_pay() -> bool {
    machine().spin_wait_hints > 0
}

/// The cost of one spin hint in nanoseconds: the best of three timed runs of 256 hints.
fn time_spin_hint() -> u32 {
    const HINTS: u32 = 256;
    let mut best = u128::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..HINTS {
            core::hint::spin_loop();
        }
        best = best.min(start.elapsed().as_nanos());
    }
    ((best / u128::from(HINTS)) as u32).clamp(1, 1_000)
}
