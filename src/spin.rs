//! The wait policy every futexkit waiter shares: whether to spin before it sleeps, and how long.
//!
//! Sleeping costs a wake-up: a futex wake that must rouse an idle CPU takes tens of
//! microseconds on a virtual machine, a hand-off between two running threads a fraction of one
//! (`docs/design.md`, "Spinning", has the reasons and the measurements behind every rule).
//! Spinning briefly therefore wins when the thread being waited for is running and about to
//! act, and loses when it is not: the spinner burns a CPU that thread may need.
//!
//! ## State
//!
//! | state | kept | meaning | changed by |
//! |-------|------|---------|------------|
//! | `Machine` | once per process | usable CPUs, a spin hint's cost, a lock spin's hints | measured at the first spin, never again |
//! | `Spinner::learned_ns` | per hand-off primitive (or thread, for raw `swap`) | moving average of its waits, 0 = do not spin | every sleep and every won spin of a hand-off wait |
//! | `Spinner::spinning` | per hand-off primitive | threads spinning on it now, at most `max_spinners` | a `SpinnerSlot` taken and dropped |
//! | `NOTIFY_HISTORY.credit` | per thread, 0 to `MAX_NOTIFY_CREDIT` | how well its notify spins have been paying; 0 = do not spin | +2 per won spin, -1 per lost one, 0 after a spin that was preempted |
//! | `NOTIFY_HISTORY.skipped` | per thread | waits since its last notify spin, for the probe | each wait without credit |
//! | `NOTIFY_HISTORY.last_notify` | per thread | what its latest notify found since its last wait's decision: nothing yet, its waiters awake (it woke nobody), or a sleeper it woke | set by each notify (`notified`); reset by its next wait that reaches the decision |
//! | `NOTIFY_HISTORY.preempted` | per thread | its last notify spin was preempted | every notify spin |
//! | `LATEST_RUNNABLE_LOOK` | per process | whether every runnable thread had a CPU at the latest look, and that look's millisecond (from `FIRST_RUNNABLE_LOOK`) | about once a millisecond, by a wait that a notify finding its waiters awake would make spin |
//! | `SWITCHES_AT_LAST_SLEEP` | per thread | its involuntary context switches at its last hand-off sleep | each hand-off sleep |
//! | `TALLIES`, `TOTALS` | per thread, per process | what the policy decided ([`decisions`]) | every decision; added to the process's every `FLUSH_EVERY` |
//!
//! None of it is protocol state: a policy mistake costs time, never a wake-up. Each waiter's
//! protocol reads its own words and asks the policy only how long to keep looking.
//!
//! ## Rules, one place per decision
//!
//! * **Can spinning pay at all?** Not with one usable CPU, nor under a model checker (a spin is
//!   one look there, so that models stay small: the seam's `MODEL_CHECKED`): `Machine`.
//! * **A waiter for a lock** (the Mutex, the RwLock, the shared Mutex): the whole rule is
//!   [`SpinWait::spin`], with `SPIN_WAIT_NS` above it, asked by the lock only while nobody
//!   sleeps on it (a waiter that spins past sleepers takes the lock from them with a CPU they
//!   may need). It spins a fixed budget with exponential backoff between looks (each look
//!   pulls the lock's cache line from the thread about to release it), then the lock sleeps.
//!   Nothing is learned per lock (a lock is one word), and a waiter behind a blocked holder
//!   wastes at most the budget.
//! * **No waiter yields its CPU in place of a sleep**: a yield queues the waiter behind
//!   whatever else is runnable, which costs a server's tail latency, and user space cannot
//!   tell whether the thread a yield hands the CPU to is the one it waits for.
//! * **A compare-and-swap that lost to other threads** (`back_off`: readers adding themselves
//!   to a RwLock's count) pauses `2^losses` hints, at most `MAX_PAUSES_BETWEEN_LOOKS`: the word
//!   changed, so it is not a wait and has no budget.
//! * **A waiter for a notify** (`spin_for_notify`: Condvar and Barrier waits) spins a lock's
//!   budget only while its thread's spins have been paying (credit: +2 a won spin, -1 a lost
//!   one, 0 after a preempted one), or after a notify of its own found its waiters awake while
//!   every runnable thread has a CPU; without either it probes once in `NOTIFY_PROBE_EVERY`
//!   waits, a probe right after a notify that woke a sleeper going on up to `MAX_SPIN_NS` while
//!   every runnable thread has a CPU (`/proc/loadavg`). Credit is per thread, so a Condvar
//!   keeps std's size. A barrier's waiter spins only where all parties can run at once.
//! * **A waiter for a partner's answer** ([`Spinner`]: `swap`, [`Parker`](crate::swap::Parker),
//!   FlipCall) spins twice the moving average of its sleeps (`learned += (sample - learned) /
//!   8`), at most `MAX_SPIN_NS`, which must outlast a wake-up; it forgets what it learned when
//!   its thread was preempted or a sleep was shorter than the spin before it (the spin kept the
//!   partner from running). At most `max_spinners` threads spin on one primitive. A FlipCall
//!   or Parker waiter on the CPU its partner last handed over from does not spin
//!   (`partner_may_be_running`).
//! * **Nothing feeds on itself.** Lock and notify budgets are fixed and a probe is capped; a
//!   hand-off's budget follows its waits, and a spin that delays its partner resets it.
//!
//! The machine's facts (usable CPUs, a spin hint's cost) are measured once, at the first spin:
//! no kernel probe, no environment. A lock waiter's spin reads one cached value; a notify
//! waiter's reads the clock around each budget, and `/proc/loadavg` at most once a millisecond
//! per process (a long probe: between budgets; open, read, close); a hand-off waiter reads a
//! clock and its thread's preemption count only around a sleep.
//!
//! [`wait_on_owner`] is the one wait on an owner-TID word: where the kernel has `FUTEX2_SPIN`
//! (probed, and opted in with `FUTEXKIT_ENABLE=spin`, as it has no stable ABI) the kernel spins
//! while the owner is on a CPU, which user space cannot see; elsewhere a [`Spinner`] spins,
//! then the thread sleeps on the word.

use core::fmt;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::futex::sys::MODEL_CHECKED;
use crate::futex::{Deadline, Error, Futex, Scope};

/// The longest a hand-off waiter ([`Spinner`]) spins before it sleeps.
pub(crate) const MAX_SPIN_NS: u32 = 100_000;
/// How long a [`SpinWait`] spins before it sleeps: long enough to see a short critical section
/// end, or a partner answer, on another CPU; short enough that a waiter behind a blocked
/// holder wastes little.
pub(crate) const SPIN_WAIT_NS: u32 = 4_000;
/// Where a new spinner's learned average starts: a budget of 10 us, until its waits say more.
const INITIAL_LEARNED_NS: u32 = 5_000;
/// The shortest spin worth starting: a smaller budget means the waiter sleeps at once. (A
/// spinner that does not spin still learns from how long its sleeps last, so it finds out when
/// spinning would pay.)
const MIN_SPIN_NS: u32 = 200;
/// The longest run of spin hints between two looks.
const MAX_PAUSES_BETWEEN_LOOKS: u32 = 64;

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
/// online (a file in sysfs, read by the C library) and the cost of a spin hint (x86's PAUSE costs
/// about 10 cycles on older cores and about 140 on newer ones, so it is timed, not assumed).
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

/// The CPUs this process may use, as the spin policy measured them at its first spin.
pub(crate) fn usable_cpus() -> usize {
    machine().usable_cpus
}

/// Whether spinning can pay on this machine: more than one usable CPU.
#[inline]
fn spinning_can_pay() -> bool {
    usable_cpus() > 1
}

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
            run: 1,
        }
    }

    /// The lock waiter's rule: spins one run of hints (twice as long as the last) and returns
    /// true, so that the caller looks at its lock again, while the `SPIN_WAIT_NS` budget
    /// lasts; returns false once it is spent, so that the caller sleeps. The caller asks only
    /// while nobody sleeps on its lock. A waiter behind a holder blocked for long (in I/O, say)
    /// wastes at most the budget, then sleeps; it never yields its CPU instead.
    #[inline]
    pub fn spin(&mut self) -> bool {
        if self.hints_left == 0 {
            if self.run > 1 {
                // The budget ran out: count it once.
                self.run = 1;
                count(Tally::LockSpent);
            }
            return false;
        }
        if self.run == 1 {
            count(Tally::LockStarted);
        }
        self.spin_run()
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
    if MODEL_CHECKED || !spinning_can_pay() {
        return;
    }
    let hints = 1u32 << failures.min(MAX_PAUSES_BETWEEN_LOOKS.ilog2());
    for _ in 0..hints {
        core::hint::spin_loop();
    }
}

/// Adaptive spin state for one side of a hand-off (8 bytes).
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
    /// Threads spinning on this spinner now (at most `max_spinners`).
    spinning: AtomicU16,
}

impl Default for Spinner {
    fn default() -> Spinner {
        Spinner::new()
    }
}

impl Spinner {
    /// A spinner that starts by spinning a moderate amount.
    pub const fn new() -> Spinner {
        Spinner::learning_from(INITIAL_LEARNED_NS)
    }

    /// A spinner whose learned average starts at `learned_ns`.
    const fn learning_from(learned_ns: u32) -> Spinner {
        Spinner {
            learned_ns: AtomicU32::new(learned_ns),
            spinning: AtomicU16::new(0),
        }
    }

    /// Spins until `done` returns true or this spinner's budget runs out; returns whether
    /// `done` held. Calls `done` at least once, and does not spin at all when spinning cannot
    /// pay (see the module documentation).
    #[inline]
    pub fn spin_until(&self, done: impl FnMut() -> bool) -> bool {
        self.spin_until_before(None, done)
    }

    /// [`spin_until`](Spinner::spin_until) for a timed wait: the spin also ends at `deadline`,
    /// and does not start once it has passed (`done` is still called once).
    ///
    /// ```
    /// use std::time::Duration;
    /// use futexkit::futex::Deadline;
    /// use futexkit::spin::Spinner;
    ///
    /// let spinner = Spinner::new();
    /// let passed = Deadline::after(Duration::ZERO);
    /// // The deadline has passed: one check, no spin.
    /// let mut checks = 0;
    /// assert!(!spinner.spin_until_before(Some(passed), || {
    ///     checks += 1;
    ///     false
    /// }));
    /// assert_eq!(checks, 1);
    /// ```
    #[inline]
    pub fn spin_until_before(
        &self,
        deadline: Option<Deadline>,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        done() || self.spin_slow(&mut done, deadline)
    }

    /// Spins while `word` holds `expected`, then sleeps on it; learns from the sleep. `Ok(())`
    /// once the word changed or a wake arrived (possibly spuriously: re-check).
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] at the deadline.
    pub fn wait_on<S: Scope>(
        &self,
        word: &Futex<S>,
        expected: u32,
        deadline: Option<Deadline>,
    ) -> Result<(), Error> {
        if self.spin_until_before(deadline, || word.load(Ordering::Acquire) != expected) {
            return Ok(());
        }
        let start = Instant::now();
        let result = match word.wait(expected, deadline) {
            // It changed between the spin and the sleep: that is what we waited for.
            Err(Error::ValueChanged) => Ok(()),
            other => other,
        };
        if result == Err(Error::TimedOut) {
            self.record_timeout(start.elapsed());
        } else {
            self.record_sleep(start.elapsed());
        }
        result
    }

    /// Tells the spinner how a wait that spun out its budget and then slept turned out:
    /// `slept` is the sleep. The spinner forgets what it learned, and sleeps at once next time,
    /// when spinning takes a CPU some other thread wants: when this thread was preempted since
    /// its last sleep, or when the sleep was shorter than the spin before it (the answer came
    /// just after the spin gave up: the spin most likely kept the partner from running, woken
    /// onto this CPU or waiting for it). Otherwise a sleep within the cap teaches it to spin
    /// longer, one beyond the cap to spin less.
    pub(crate) fn record_sleep(&self, slept: Duration) {
        self.learn_from_sleep(slept, preempted_since_last_sleep());
    }

    /// [`record_sleep`](Spinner::record_sleep)'s rule, `preempted` saying whether the thread
    /// was preempted since its last sleep.
    fn learn_from_sleep(&self, slept: Duration, preempted: bool) {
        let ns = slept.as_nanos();
        if preempted || ns < u128::from(self.budget_ns()) {
            self.learned_ns.store(0, Ordering::Relaxed);
        } else if ns <= u128::from(MAX_SPIN_NS) {
            self.learn(ns as u32);
        } else {
            self.learn(0);
        }
    }

    /// Tells the spinner that a wait that had to sleep timed out after `waited`. Only a wait
    /// that outlasted the cap teaches anything (to spin less): a shorter one ended at the
    /// caller's deadline, which says nothing about when the partner would have answered.
    pub(crate) fn record_timeout(&self, waited: Duration) {
        if waited.as_nanos() > u128::from(MAX_SPIN_NS) {
            self.learn(0);
        }
    }

    /// The current spin budget in nanoseconds (0 when spinning cannot pay).
    pub(crate) fn budget_ns(&self) -> u32 {
        if !spinning_can_pay() {
            return 0;
        }
        let budget = self.learned_ns.load(Ordering::Relaxed).saturating_mul(2);
        if budget < MIN_SPIN_NS {
            0
        } else {
            budget.min(MAX_SPIN_NS)
        }
    }

    /// The spin budget for a wait that ends at `deadline`: [`budget_ns`](Spinner::budget_ns),
    /// cut to the time left (0 once it has passed).
    pub(crate) fn budget_ns_before(&self, deadline: Option<Deadline>) -> u32 {
        match deadline {
            Some(deadline) => clamp_to_remaining(self.budget_ns(), deadline.remaining()),
            None => self.budget_ns(),
        }
    }

    /// The spin itself: `done` after each run of hints (doubling up to
    /// `MAX_PAUSES_BETWEEN_LOOKS`) until it holds or the budget, cut at `deadline`, runs out.
    #[cold]
    fn spin_slow(&self, done: &mut dyn FnMut() -> bool, deadline: Option<Deadline>) -> bool {
        if MODEL_CHECKED {
            return done();
        }
        let budget = self.budget_ns_before(deadline);
        if budget == 0 {
            count(Tally::HandOffSkipped);
            return false;
        }
        let Some(_slot) = SpinnerSlot::take(self) else {
            count(Tally::HandOffSkipped);
            return false;
        };
        let ns_per_hint = machine().ns_per_hint;
        let max_hints = (budget / ns_per_hint).max(1);
        let mut hints = 0;
        let mut run = 1;
        while hints < max_hints {
            for _ in 0..run {
                core::hint::spin_loop();
            }
            hints += run;
            if done() {
                // A spin that won says spinning pays, however quickly it won: it teaches at
                // least the shortest budget worth spinning, never to stop spinning.
                self.learn(hints.saturating_mul(ns_per_hint).max(MIN_SPIN_NS));
                count(Tally::HandOffWon);
                return true;
            }
            run = (run * 2).min(MAX_PAUSES_BETWEEN_LOOKS);
            // The budget counts hints, not the looks' own cost: a timed wait re-checks its
            // clock once per longest run.
            if run == MAX_PAUSES_BETWEEN_LOOKS && deadline.is_some_and(|d| d.has_passed()) {
                break;
            }
        }
        count(Tally::HandOffLost);
        false
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

std::thread_local! {
    /// The spinner of hand-off waits that have no state of their own to learn in (a raw
    /// [`swap`](crate::swap::swap)): a thread in a request/response loop sees consistent
    /// partner latencies. It starts by not spinning: a thread spins only once its own sleeps
    /// have been short.
    static THREAD_SPINNER: Spinner = const { Spinner::learning_from(0) };
}

/// Runs `f` with this thread's own [`Spinner`].
pub(crate) fn with_thread_spinner<R>(f: impl FnOnce(&Spinner) -> R) -> R {
    THREAD_SPINNER.with(f)
}

/// What a thread's recent waits for a notify ([`spin_for_notify`]) taught: `credit` says how
/// well its spins have been paying (0: not at all; spinning stops), `skipped` counts waits
/// since its last spin, so that a thread that stopped still probes once in
/// `NOTIFY_PROBE_EVERY` waits and finds out when spinning would pay again; `last_notify` says
/// what its latest notify since its last decision found ([`notified`]), and `preempted` that
/// its last spin was preempted (which a notify that found its waiters awake does not override).
struct NotifyHistory {
    credit: core::cell::Cell<u8>,
    skipped: core::cell::Cell<u8>,
    last_notify: core::cell::Cell<LastNotify>,
    preempted: core::cell::Cell<bool>,
}

/// What a thread's latest notify found, until its next wait for a notify decides.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LastNotify {
    /// No notify since the last decision.
    None,
    /// It woke nobody from a sleep: its waiters, if any, are running.
    FoundAwake,
    /// It woke a sleeping thread, which is likely the one to answer this thread's next wait.
    WokeSleeper,
}

/// The most credit a run of winning spins builds up: that many losing spins in a row stop it.
const MAX_NOTIFY_CREDIT: u8 = 8;
/// A spin that won earns this much credit, one that lost costs 1: spinning goes on while at
/// least one spin in three wins (a win saves a sleep and a wake, which cost more than the
/// spin's budget; a loss wastes the budget).
const NOTIFY_WIN_CREDIT: u8 = 2;
/// A budget of a notify spin that lasted this long was preempted: its hints take
/// `SPIN_WAIT_NS`, and a few times that leaves room for the looks themselves and a slow clock
/// read, not for a time slice given to another thread. Measured with two clock reads, so no
/// system call.
const PREEMPTED_SPIN_NS: u64 = 4 * SPIN_WAIT_NS as u64;
/// A thread whose spins stopped paying still probes once in this many waits.
const NOTIFY_PROBE_EVERY: u8 = 16;

/// Whether no thread on the system waits for a CPU: runnable threads, this one included, at
/// most the CPUs the system has online (`/proc/loadavg` counts the whole system's threads, so
/// a process confined to some CPUs learns whether the machine has one to spare, not whether
/// its own do). Then a spin takes no CPU that another thread wants. False where the count
/// cannot be read. Three system calls, so asked only by a long probe, between its budgets, and
/// through `every_runnable_thread_had_a_cpu_lately`, about once a millisecond.
fn every_runnable_thread_has_a_cpu() -> bool {
    crate::futex::sys::thread::runnable_threads()
        .is_some_and(|n| n as usize <= machine().online_cpus)
}

/// `every_runnable_thread_has_a_cpu` as seen at most a millisecond ago, asked again once the
/// latest look is older: `LATEST_RUNNABLE_LOOK` holds that look's millisecond (counted from 1
/// at the policy's first look, `FIRST_RUNNABLE_LOOK`) and its answer (`runnable_look`). Threads
/// that ask within one millisecond share one answer (two that race may both look), so a
/// thread that waits often pays a clock read for the question, and the file read about once a
/// millisecond per process.
fn every_runnable_thread_had_a_cpu_lately() -> bool {
    static LATEST_RUNNABLE_LOOK: AtomicU64 = AtomicU64::new(0);
    static FIRST_RUNNABLE_LOOK: OnceLock<Instant> = OnceLock::new();
    let millisecond = FIRST_RUNNABLE_LOOK
        .get_or_init(Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1;
    if let Some(answer) = answer_of_look(LATEST_RUNNABLE_LOOK.load(Ordering::Relaxed), millisecond)
    {
        return answer;
    }
    let answer = every_runnable_thread_has_a_cpu();
    LATEST_RUNNABLE_LOOK.store(runnable_look(millisecond, answer), Ordering::Relaxed);
    answer
}

/// What [`record_hand_over_cpu`] returns, and a CPU word holds, where no CPU is known.
pub(crate) const NO_CPU: u32 = u32::MAX;

/// Records in `word` the CPU this thread hands a turn over from, for the partner's
/// [`partner_may_be_running`], and returns it. The word is written only when it changes: the
/// partner reads it at every wait, and a line written at every hand-over would move between
/// the CPUs with the turn. Under a model checker it returns [`NO_CPU`] and leaves the word
/// alone: a model's executions must not depend on where its threads really run.
pub(crate) fn record_hand_over_cpu(word: &crate::atomic::AtomicU32) -> u32 {
    use crate::atomic::Ordering::Relaxed;
    if MODEL_CHECKED {
        return NO_CPU;
    }
    let cpu = crate::futex::sys::thread::current_cpu();
    if word.load(Relaxed) != cpu {
        word.store(cpu, Relaxed);
    }
    cpu
}

/// The CPU this thread runs on, as the hand-off rule compares it ([`partner_may_be_running`]):
/// [`NO_CPU`] under a model checker.
pub(crate) fn hand_off_cpu() -> u32 {
    if MODEL_CHECKED {
        NO_CPU
    } else {
        crate::futex::sys::thread::current_cpu()
    }
}

/// Whether a hand-off's waiter, which last handed the turn over from `my_cpu`, should spin
/// for a partner that last handed it over from the CPU in `partner_cpu` (its
/// [`record_hand_over_cpu`] word): not when both are the same CPU. The partner, woken onto
/// that CPU or preempted there, then waits for the very CPU the spin would keep. Either CPU
/// unknown ([`NO_CPU`], which is also what a model checker's waiter has, so the word is not
/// read there): spin as ever. The word may be in memory a peer process writes: any value only
/// decides whether to spin.
pub(crate) fn partner_may_be_running(partner_cpu: &crate::atomic::AtomicU32, my_cpu: u32) -> bool {
    if my_cpu == NO_CPU
        || !on_one_known_cpu(partner_cpu.load(crate::atomic::Ordering::Relaxed), my_cpu)
    {
        return true;
    }
    count(Tally::HandOffSkipped);
    false
}

/// Whether two recorded CPUs are the same known one.
fn on_one_known_cpu(a: u32, b: u32) -> bool {
    a == b && a != NO_CPU
}

/// A look at the runnable threads as one word: its millisecond (from 1) shifted left by one,
/// its answer in bit 0. The word 0 is no look.
fn runnable_look(millisecond: u64, answer: bool) -> u64 {
    millisecond << 1 | u64::from(answer)
}

/// The answer of the look `look` if it was made in `millisecond`, else `None`.
fn answer_of_look(look: u64, millisecond: u64) -> Option<bool> {
    (look >> 1 == millisecond).then_some(look & 1 == 1)
}

std::thread_local! {
    static NOTIFY_HISTORY: NotifyHistory = const {
        NotifyHistory {
            credit: core::cell::Cell::new(0),
            skipped: core::cell::Cell::new(0),
            last_notify: core::cell::Cell::new(LastNotify::None),
            preempted: core::cell::Cell::new(false),
        }
    };
}

/// The spin of a wait for another thread's notify (a Condvar's wait, a Barrier's): spins a
/// lock waiter's budget (`SPIN_WAIT_NS`; a probe after a hand-off, several) until `done`
/// holds, and returns whether it did; or does not spin at all (calling `done` once) where
/// spinning has not been paying.
///
/// The notifier is some other thread, maybe not running (blocked in I/O, say), so the spin is the
/// short, fixed one of a lock waiter, never learned longer. Whether to spin at all is learned per
/// thread (a thread's waits tend to be of one kind: a worker waiting for jobs, one side of a
/// ping-pong): spins that win earn credit and spins that lose cost it, and a spin one of whose
/// budgets lasted `PREEMPTED_SPIN_NS` or more loses it all: its thread was preempted while
/// spinning, so its spinning takes a CPU that other threads want. Without credit, a wait spins
/// anyway when a notify of its thread found its waiters awake since its last decision (unless its
/// last spin was preempted, or threads wait for CPUs: where they do, a notify that woke nobody more
/// often means nobody waits), and one wait in `NOTIFY_PROBE_EVERY` spins as a probe: one budget,
/// or, right after a notify of its thread woke a sleeper (a hand-off: the woken thread is likely
/// the one to answer), budget after budget up to `MAX_SPIN_NS` in all, each after the first only
/// while every runnable thread has a CPU, none was preempted and the deadline has not passed. Only
/// such a probe outlasts a wake-up, so only it can find that two threads taking turns would answer
/// each other while spinning. No budget grows with what a wait took.
pub(crate) fn spin_for_notify(deadline: Option<Deadline>, mut done: impl FnMut() -> bool) -> bool {
    if done() {
        return true;
    }
    if machine().spin_wait_hints == 0 || deadline.is_some_and(|d| d.has_passed()) {
        count(Tally::NotifySkipped);
        return false;
    }
    // None: sleep at once; Some(long): spin one budget of `SPIN_WAIT_NS`, or, if `long`,
    // budget after budget while the probe's conditions hold.
    let spin = NOTIFY_HISTORY.with(|h| {
        let last_notify = h.last_notify.replace(LastNotify::None);
        if h.credit.get() > 0
            || (last_notify == LastNotify::FoundAwake
                && !h.preempted.get()
                && every_runnable_thread_had_a_cpu_lately())
        {
            return Some(false);
        }
        let skipped = h.skipped.get() + 1;
        h.skipped.set(skipped % NOTIFY_PROBE_EVERY);
        (skipped == NOTIFY_PROBE_EVERY).then_some(last_notify == LastNotify::WokeSleeper)
    });
    let Some(long) = spin else {
        count(Tally::NotifySkipped);
        return false;
    };
    let started = Instant::now();
    let (won, preempted) = loop {
        let budget_started = Instant::now();
        let mut spin = SpinWait::new();
        let won = loop {
            if !spin.spin_run() {
                break false;
            }
            if done() {
                break true;
            }
        };
        let preempted = budget_started.elapsed() >= Duration::from_nanos(PREEMPTED_SPIN_NS);
        if won
            || preempted
            || !long
            || started.elapsed() >= Duration::from_nanos(MAX_SPIN_NS.into())
            || deadline.is_some_and(|d| d.has_passed())
            || !every_runnable_thread_has_a_cpu()
        {
            break (won, preempted);
        }
    };
    NOTIFY_HISTORY.with(|h| {
        h.preempted.set(preempted);
        let credit = h.credit.get();
        h.credit.set(if preempted {
            0
        } else if won {
            (credit + NOTIFY_WIN_CREDIT).min(MAX_NOTIFY_CREDIT)
        } else {
            credit.saturating_sub(1)
        });
    });
    count(if won {
        Tally::NotifyWon
    } else {
        Tally::NotifyLost
    });
    won
}

/// Tells the policy what a notify of this thread's (a Condvar's notify, a barrier leader's release)
/// did: `woken` sleepers it woke. None: its waiters, if any, are running, so this thread's next
/// wait for a notify spins, credit or not, while every runnable thread has a CPU. Some: the next
/// wait is likely for the answer of a thread it woke, so if that wait probes, the probe may outlast
/// the wake-up ([`spin_for_notify`]). A policy input only: the notify itself is complete. It
/// measures nothing (a notify never starts the policy's one-time measurement of the machine) and
/// does nothing under a model checker or where the thread's locals are gone.
#[inline]
pub(crate) fn notified(woken: usize) {
    if !MODEL_CHECKED {
        let last_notify = if woken == 0 {
            LastNotify::FoundAwake
        } else {
            LastNotify::WokeSleeper
        };
        let _ = NOTIFY_HISTORY.try_with(|h| h.last_notify.set(last_notify));
    }
}

/// The spin of a barrier's waiter, waiting for the rest of `parties` to arrive:
/// [`spin_for_notify`]'s, where all parties can run at once (no more of them than usable
/// CPUs); else none, as the last arrival cannot come while the others spin on every CPU.
pub(crate) fn spin_for_arrivals(parties: usize, done: impl FnMut() -> bool) -> bool {
    parties <= usable_cpus() && spin_for_notify(None, done)
}

std::thread_local! {
    /// This thread's count of involuntary context switches at its last sleep.
    static SWITCHES_AT_LAST_SLEEP: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Whether this thread was preempted (switched out involuntarily) since it last asked: then
/// another runnable thread wanted its CPU, and spinning on it takes CPU time from someone. A
/// thread of a pair on an otherwise idle machine is not preempted; on a machine whose CPUs are
/// all wanted, a spinner is, soon. Asked after a sleep, which has already cost a system call.
fn preempted_since_last_sleep() -> bool {
    let now = crate::futex::sys::thread::involuntary_switches();
    SWITCHES_AT_LAST_SLEEP.with(|last| last.replace(now) < now)
}

/// What the spin policy decided, and how it turned out, summed over the process's threads:
/// see [`decisions`]. The policy never yields the CPU in place of a sleep, so there is no
/// count of yields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Lock waiters (Mutex, RwLock, and [`SpinWait`] users). Their spin stops early when the
    /// lock changes (it was released, or a waiter went to sleep on it), which is counted as
    /// won; one that spends its budget sleeps, and is counted as lost. When to skip the spin
    /// is the lock's own rule (not while threads sleep on it), so `skipped` stays 0.
    pub lock: Outcomes,
    /// Waits for a notify (Condvar, Barrier).
    pub notify: Outcomes,
    /// Hand-off waits ([`Spinner`]: `swap`, `Parker`, FlipCall and its server).
    pub hand_off: Outcomes,
}

/// How one kind of waiter's spins turned out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Spins that ended with what they waited for: a sleep and a wake saved.
    pub won: u64,
    /// Spins that spent their budget; the waiter then slept.
    pub lost: u64,
    /// Waits that did not spin because the policy said it would not pay.
    pub skipped: u64,
}

impl fmt::Display for Decisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds = [
            ("lock", self.lock),
            ("notify", self.notify),
            ("hand-off", self.hand_off),
        ];
        for (i, (name, o)) in kinds.into_iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(
                f,
                "{name}: {} spins won, {} lost, {} skipped",
                o.won, o.lost, o.skipped
            )?;
        }
        Ok(())
    }
}

/// The spin policy's decisions so far in this process: how often each kind of waiter spun,
/// how often the spin paid, and how often it did not spin at all. Each thread counts for
/// itself and adds its counts to the process's every `FLUSH_EVERY` decisions and when it
/// exits, so a thread still running may be missing up to that many (threads that have been
/// joined are all in).
///
/// ```
/// let before = futexkit::spin::decisions();
/// let mutex = futexkit::Mutex::new(0);
/// *mutex.lock().unwrap() += 1; // uncontended: the policy is not asked
/// assert_eq!(futexkit::spin::decisions().lock.lost, before.lock.lost);
/// println!("{}", futexkit::spin::decisions());
/// ```
pub fn decisions() -> Decisions {
    let _ = TALLIES.try_with(Tallies::flush);
    let total = |t: Tally| TOTALS[t as usize].load(Ordering::Relaxed);
    let started = total(Tally::LockStarted);
    let spent = total(Tally::LockSpent);
    Decisions {
        lock: Outcomes {
            won: started.saturating_sub(spent),
            lost: spent,
            skipped: 0,
        },
        notify: Outcomes {
            won: total(Tally::NotifyWon),
            lost: total(Tally::NotifyLost),
            skipped: total(Tally::NotifySkipped),
        },
        hand_off: Outcomes {
            won: total(Tally::HandOffWon),
            lost: total(Tally::HandOffLost),
            skipped: total(Tally::HandOffSkipped),
        },
    }
}

/// One thing the policy counts.
#[derive(Clone, Copy)]
enum Tally {
    LockStarted,
    LockSpent,
    NotifyWon,
    NotifyLost,
    NotifySkipped,
    HandOffWon,
    HandOffLost,
    HandOffSkipped,
}

const TALLY_KINDS: usize = 8;
/// A thread adds its counts to the process's after this many.
const FLUSH_EVERY: u32 = 1024;

static TOTALS: [AtomicU64; TALLY_KINDS] = [const { AtomicU64::new(0) }; TALLY_KINDS];

/// A thread's counts not yet added to `TOTALS`: counting costs no shared write.
struct Tallies {
    counts: [core::cell::Cell<u64>; TALLY_KINDS],
    unflushed: core::cell::Cell<u32>,
}

impl Tallies {
    fn flush(&self) {
        for (count, total) in self.counts.iter().zip(&TOTALS) {
            let n = count.replace(0);
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.unflushed.set(0);
    }
}

impl Drop for Tallies {
    fn drop(&mut self) {
        self.flush();
    }
}

std::thread_local! {
    static TALLIES: Tallies = const {
        Tallies {
            counts: [const { core::cell::Cell::new(0) }; TALLY_KINDS],
            unflushed: core::cell::Cell::new(0),
        }
    };
}

/// Counts one decision (not under a model checker, where spins are single looks).
#[inline]
fn count(tally: Tally) {
    if MODEL_CHECKED {
        return;
    }
    // A thread being torn down no longer counts.
    let _ = TALLIES.try_with(|t| {
        let c = &t.counts[tally as usize];
        c.set(c.get() + 1);
        let n = t.unflushed.get() + 1;
        t.unflushed.set(n);
        if n >= FLUSH_EVERY {
            t.flush();
        }
    });
}

/// A spin budget of `budget_ns` cut to `remaining`, the time left before a deadline.
fn clamp_to_remaining(budget_ns: u32, remaining: Duration) -> u32 {
    u32::try_from(remaining.as_nanos()).map_or(budget_ns, |left| budget_ns.min(left))
}

/// A place among the hand-off waiters allowed to spin on one spinner; given back when dropped,
/// also if a caller's check panics.
struct SpinnerSlot<'a> {
    spinner: &'a Spinner,
}

impl<'a> SpinnerSlot<'a> {
    /// Takes a place if there is one: at most `max_spinners` threads spin on one primitive
    /// (a crowd of spinners takes the CPUs of the thread they wait for).
    fn take(spinner: &'a Spinner) -> Option<SpinnerSlot<'a>> {
        let max_here = max_spinners() as u16;
        spinner
            .spinning
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max_here).then_some(n + 1)
            })
            .ok()?;
        Some(SpinnerSlot { spinner })
    }
}

impl Drop for SpinnerSlot<'_> {
    fn drop(&mut self) {
        self.spinner.spinning.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many hand-off waiters may spin on one primitive at once: half the usable CPUs, 1 to 4.
pub(crate) fn max_spinners() -> u32 {
    (usable_cpus() / 2).clamp(1, 4) as u32
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

/// Waits while `word` holds `owner_tid` (the TID of the thread that owns what the word guards):
/// with kernel `FUTEX2_SPIN` where probed and enabled (the kernel spins while the owner runs,
/// then sleeps; it takes one of the spinner places, `max_spinners`, for the call, and
/// without one the thread does not spin), otherwise `spinner`'s bounded spin and then a futex
/// wait. `Ok(())` once the word changed or a wake arrived (possibly spuriously: re-check).
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
/// [`Error::TimedOut`] at the deadline; with `FUTEX2_SPIN`, [`Error::PermissionDenied`] if the
/// owner is a kernel thread.
pub fn wait_on_owner<S: Scope>(
    word: &Futex<S>,
    owner_tid: u32,
    spinner: &Spinner,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    if crate::futex::capabilities().has(crate::futex::Capability::Spin) {
        // A kernel spinner counts as a spinner: it takes a place (held until the call returns),
        // and without one it waits as any waiter.
        if let Some(_place) = SpinnerSlot::take(spinner) {
            match crate::futex::futex2::wait_spinning_on_owner(word, owner_tid, deadline) {
                Err(Error::ValueChanged) => return Ok(()),
                // The probe said yes but the call disagrees: use the user-space policy.
                Err(Error::Unsupported | Error::InvalidArgument) => {}
                other => return other,
            }
        }
    }
    spinner.wait_on(word, owner_tid, deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_off_waiter_skips_its_spin_only_for_a_partner_on_its_own_known_cpu() {
        assert!(on_one_known_cpu(3, 3));
        assert!(!on_one_known_cpu(3, 4));
        // An unknown CPU on either side (none recorded yet, or sched_getcpu failed): spin.
        assert!(!on_one_known_cpu(NO_CPU, 3));
        assert!(!on_one_known_cpu(3, NO_CPU));
        assert!(!on_one_known_cpu(NO_CPU, NO_CPU));
    }

    #[test]
    #[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
    fn a_hand_over_records_the_cpu_it_runs_on() {
        let word = crate::atomic::AtomicU32::new(NO_CPU);
        let cpu = record_hand_over_cpu(&word);
        assert_eq!(word.load(Ordering::Relaxed), cpu);
        assert_ne!(cpu, NO_CPU, "sched_getcpu failed");
    }

    #[test]
    fn a_spin_wait_is_bounded_and_backs_off() {
        let mut spin = SpinWait::new();
        let mut looks = 0;
        while spin.spin() {
            looks += 1;
            assert!(looks < 1_000, "the budget never ran out");
        }
        if machine().spin_wait_hints > 0 {
            assert!(looks > 0);
            // Doubling runs: far fewer looks than hints.
            assert!(looks <= SPIN_WAIT_NS);
        } else {
            assert_eq!(looks, 0);
        }
        assert!(!spin.spin(), "spent stays spent");
    }

    #[test]
    fn sleeps_teach_the_budget() {
        let s = Spinner::new();
        assert!(s.budget_ns() <= MAX_SPIN_NS);
        // Sleeps beyond the cap teach it not to spin.
        for _ in 0..100 {
            s.learn_from_sleep(Duration::from_secs(1), false);
        }
        assert_eq!(s.budget_ns(), 0);
        if !spinning_can_pay() {
            return;
        }
        // Sleeps within the cap, and longer than the spin before them, teach it to spin.
        s.learn_from_sleep(Duration::from_micros(60), false);
        s.learn_from_sleep(Duration::from_micros(60), false);
        let budget = s.budget_ns();
        assert!(budget > 0 && budget <= MAX_SPIN_NS);
        // A sleep shorter than the spin before it: the spin kept the partner from running.
        s.learn_from_sleep(Duration::from_nanos(u64::from(budget) / 2), false);
        assert_eq!(s.budget_ns(), 0, "forgotten");
        // Preemption since the last sleep: other threads want the CPU.
        s.learn_from_sleep(Duration::from_micros(60), false);
        assert!(s.budget_ns() > 0);
        s.learn_from_sleep(Duration::from_micros(60), true);
        assert_eq!(s.budget_ns(), 0, "forgotten after a preemption");
    }

    #[test]
    fn spins_that_win_at_once_keep_the_spinner_spinning() {
        if machine().spin_wait_hints == 0 {
            return;
        }
        // A partner that always answers by the first look: every spin wins after one hint,
        // which takes far less than the shortest budget. Winning must not teach to stop.
        let s = Spinner::new();
        for _ in 0..1_000 {
            let mut looks = 0;
            assert!(s.spin_until(|| {
                looks += 1;
                looks >= 2
            }));
        }
        assert!(s.budget_ns() >= MIN_SPIN_NS, "budget {}", s.budget_ns());
    }

    #[test]
    fn a_look_at_the_runnable_threads_answers_within_its_millisecond_only() {
        assert_eq!(answer_of_look(0, 1), None, "no look yet");
        for answer in [false, true] {
            let look = runnable_look(7, answer);
            assert_ne!(look, 0);
            assert_eq!(answer_of_look(look, 7), Some(answer));
            assert_eq!(
                answer_of_look(look, 8),
                None,
                "a later millisecond asks again"
            );
            assert_eq!(answer_of_look(look, 6), None);
        }
    }

    #[test]
    fn a_deadline_cuts_the_spin() {
        assert_eq!(clamp_to_remaining(100_000, Duration::from_micros(3)), 3_000);
        assert_eq!(clamp_to_remaining(100_000, Duration::from_secs(1)), 100_000);
        assert_eq!(
            clamp_to_remaining(100_000, Duration::from_secs(3600)),
            100_000
        );
        assert_eq!(clamp_to_remaining(100_000, Duration::ZERO), 0);
        let s = Spinner::new();
        let passed = Deadline::after(Duration::ZERO);
        assert_eq!(s.budget_ns_before(Some(passed)), 0);
        let far = Deadline::after(Duration::from_secs(3600));
        assert!(s.budget_ns_before(Some(far)) <= MAX_SPIN_NS);
    }

    #[test]
    fn only_a_timeout_beyond_the_cap_teaches() {
        let s = Spinner::new();
        s.record_timeout(Duration::from_micros(1));
        assert_eq!(s.learned_ns.load(Ordering::Relaxed), INITIAL_LEARNED_NS);
        s.record_timeout(Duration::from_millis(5));
        assert!(s.learned_ns.load(Ordering::Relaxed) < INITIAL_LEARNED_NS);
    }

    #[test]
    fn spin_until_reports_the_condition() {
        let s = Spinner::new();
        assert!(s.spin_until(|| true));
        assert!(!s.spin_until(|| false));
        let mut n = 0;
        // Holds on the third check, well within any budget; when spinning cannot pay the
        // condition is checked once, and under a model checker a spin is one more look.
        let held = s.spin_until(|| {
            n += 1;
            n >= 3
        });
        if held {
            assert_eq!(n, 3);
        } else {
            assert!(n <= 2, "{n} checks without spinning");
        }
    }
}
