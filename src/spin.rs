//! The spin policy every futexkit primitive uses: how long to spin before sleeping, and when
//! not to spin at all.
//!
//! On the project's VMs a futex wake that must rouse an idle CPU costs 14-73 us, while a hand-off
//! between two spinning threads costs 0.2-0.4 us (`DESIGN.md`). Spinning briefly therefore wins
//! big when the partner is running, and loses when it is not: it burns the CPU the partner may
//! need. So the spin is:
//!
//! * **bounded**: never longer than [`MAX_SPIN_NS`] (100 us). The cap must exceed what a
//!   wake-up costs on the machine at hand, or a ping-pong whose partner sleeps can never find
//!   out that spinning pays: each side's wait is then the partner's wake-up, longer than the
//!   cap, so both keep sleeping. With a 20 us cap that is what happened on a 2-vCPU VM whose
//!   wake-ups took 25-50 us (Mutex + Condvar ping-pong 75 us, emulated swap 27 us; 8 and 0.4 us
//!   with this cap). The cap is fixed, not measured: on a machine whose wake-ups take 10 us a
//!   waiter may now spin through waits of 20-100 us that would cost it less asleep (a wake-up
//!   per wait); waits longer than the cap still teach the spinner to spin less. A timed
//!   wait's spin ends at its deadline, to within one look at the longest pace
//!   ([`Spinner::spin_until_before`]), and a wait that timed out teaches nothing unless it
//!   outlasted the cap;
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
//!   (exponential backoff: each check steals the watched cache line from its writer), or, for
//!   a contended lock whose owner keeps winning it back, every 32 from the start (patience
//!   learned per spinner from lost races, [`Spinner::spin_for_lock`]);
//! * for a lock, **yields instead** where spinning cannot pay (one CPU, or oversubscribed),
//!   on machines of at most 4 CPUs, and only while the runnable threads are no more than one
//!   per CPU besides this process's lock waiters ([`LockWaiter`]): up to 8
//!   `sched_yield`s, looking after each, before sleeping. parking_lot's waiters always yield
//!   so; on 16 vCPUs they collapse, every yielder pulling the lock's cache line. Under this
//!   condition a yield hands the CPU to another waiter or to the lock's owner, perhaps
//!   preempted on this very CPU, where a sleep costs a wake-up per hand-over (a contended
//!   counter on 2 vCPUs ran 1.3-2.3x faster at 4-32 threads). Where other work is runnable,
//!   a yield queues the waiter behind it (a key-value server's p99 was 1.5-2x worse when
//!   every contended lock yielded), so there the waiter sleeps at once;
//! * one step under loom, so models stay small (the loom models cover neither the yield
//!   phase's repeated looks nor the deadline cut).
//!
//! [`wait_on_owner`] is the one wait on an owner-TID word: where the kernel has `FUTEX2_SPIN`
//! (probed, and opted in with `FUTEXKIT_ENABLE=spin`, as it has no stable ABI) the kernel spins
//! while the owner is on a CPU, which user space cannot see; elsewhere this policy spins, then
//! the thread sleeps on the word. The Mutex's waiters use it on the owner word that contended
//! owners fill there ([`crate::mutex`]).
//!
//! State: each [`Spinner`] holds the learned average (an `AtomicU32` of nanoseconds), the
//! number of threads spinning on it now (`AtomicU16`, never above [`max_spinners`]) and a lock
//! spinner's patience (`AtomicU8`, 0 = eager; 8 bytes in all); the cost of one `spin_loop`
//! iteration is calibrated once per process.

use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::futex::Deadline;

/// The longest a single spin may last.
pub const MAX_SPIN_NS: u32 = 100_000;
/// Where a new spinner's learned average starts: a budget of 10 us, until its waits say more.
const INITIAL_LEARNED_NS: u32 = 5_000;
/// The shortest budget a spinning primitive gets, so it can discover that spinning pays again.
const MIN_SPIN_NS: u32 = 200;
/// The longest run of `spin_loop` hints between two checks of the condition.
const MAX_PAUSES_BETWEEN_CHECKS: u32 = 32;
/// How many spins for a lock a lost race makes patient (worn off by one per spin that takes
/// the lock without a lost race), and the most that lost races can add up to.
const PATIENCE_PER_LOST_RACE: u8 = 4;
const MAX_PATIENCE: u8 = 16;
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
    /// Threads spinning on this spinner now (at most [`max_spinners`]).
    spinning: AtomicU16,
    /// How patiently a lock's spinner paces its looks ([`Spinner::spin_for_lock`]): raised by
    /// races lost for a free lock, lowered by spins that take the lock without one; 0 = eager.
    patience: AtomicU8,
}

/// How [`Spinner::spin_slow`] paces its looks.
#[derive(Clone, Copy)]
enum Pace {
    /// Back off exponentially from one hint.
    Backoff,
    /// For a lock: by this spinner's patience ([`Spinner::spin_for_lock`]); `lost_race` if
    /// the look before the spin lost one, `sleepers` if it saw sleepers (then only a yield
    /// phase may follow, no spin).
    Lock { lost_race: bool, sleepers: bool },
}

/// What one look at a contended lock found, for [`Spinner::spin_for_lock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockLook {
    /// This thread took the lock: stop spinning.
    Done,
    /// Stop spinning without the lock (the caller has a reason of its own): the spin neither
    /// learns from this wait nor changes its patience.
    GiveUp,
    /// The lock is held by another thread.
    Held,
    /// The lock is held by another thread and others sleep waiting for it: a spin stops
    /// (spinning past sleepers takes the lock from them with a CPU they may need), but the
    /// oversubscribed yield phase goes on (module documentation).
    HeldWithSleepers,
    /// The lock was seen free, but another thread took it first.
    LostRace,
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
            learned_ns: AtomicU32::new(INITIAL_LEARNED_NS),
            spinning: AtomicU16::new(0),
            patience: AtomicU8::new(0),
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
        if done() {
            return true;
        }
        self.spin_slow(
            &mut || {
                if done() {
                    LockLook::Done
                } else {
                    LockLook::Held
                }
            },
            Pace::Backoff,
            deadline,
        )
    }

    /// Spins for a contended lock: `look` tries to take it and says what it found. Returns
    /// whether a look returned [`LockLook::Done`]. Calls `look` at least once.
    ///
    /// How often to look is learned per spinner. Each early look pulls the lock's cache line
    /// away from an owner about to relock; when the owner keeps winning the lock back (a look
    /// sees it free but loses the race), looking eagerly only makes the lock change hands more
    /// (a waiter that backs off lets the running owner do many critical sections in a row, as
    /// parking_lot's yielding waiter does). So a lost race makes this spinner patient for a
    /// while: it looks only every `MAX_PAUSES_BETWEEN_CHECKS` hints (0.1-1.5 us). Spins that
    /// take the lock after at least one pause, without a lost race, wear the patience off (a
    /// spin that runs out of budget, or finds the lock free at once, changes nothing): where
    /// the lock is simply handed back and forth (a Mutex + Condvar ping-pong), the eager look
    /// takes it within a few hundred nanoseconds of its release instead of up to a microsecond
    /// later.
    ///
    /// Where spinning cannot pay, this may instead make up to 8 `sched_yield`s, looking after
    /// each (the yield phase, module documentation); it counts the caller's threads as lock
    /// waiters only while they hold a [`LockWaiter`].
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use futexkit::spin::{LockLook, Spinner};
    ///
    /// let spinner = Spinner::new();
    /// let locked = AtomicBool::new(false);
    /// let taken = spinner.spin_for_lock(|| {
    ///     match locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed) {
    ///         Ok(_) => LockLook::Done,
    ///         Err(_) => LockLook::Held,
    ///     }
    /// });
    /// assert!(taken);
    /// ```
    #[inline]
    pub fn spin_for_lock(&self, look: impl FnMut() -> LockLook) -> bool {
        self.spin_for_lock_before(None, look)
    }

    /// [`spin_for_lock`](Spinner::spin_for_lock) for a timed lock: the spin also ends at
    /// `deadline`, and does not start once it has passed (`look` is still called once).
    #[inline]
    pub fn spin_for_lock_before(
        &self,
        deadline: Option<Deadline>,
        mut look: impl FnMut() -> LockLook,
    ) -> bool {
        let (lost_race, sleepers) = match look() {
            LockLook::Done => return true,
            LockLook::GiveUp => return false,
            LockLook::Held => (false, false),
            LockLook::HeldWithSleepers => (false, true),
            LockLook::LostRace => {
                self.note_lost_race();
                (true, false)
            }
        };
        self.spin_slow(
            &mut look,
            Pace::Lock {
                lost_race,
                sleepers,
            },
            deadline,
        )
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
        deadline: Option<Deadline>,
    ) -> Result<(), crate::futex::Error> {
        if self.spin_until_before(deadline, || word.load(Ordering::Acquire) != expected) {
            return Ok(());
        }
        let start = Instant::now();
        let result = match word.wait(expected, deadline) {
            // It changed between the spin and the sleep: that is what we waited for.
            Err(crate::futex::Error::ValueChanged) => Ok(()),
            other => other,
        };
        if result == Err(crate::futex::Error::TimedOut) {
            self.record_timeout(start.elapsed());
        } else {
            self.record_sleep(start.elapsed());
        }
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

    /// Tells the spinner that a wait that had to sleep timed out after `waited`. Only a wait
    /// that outlasted the cap teaches anything (to spin less): a shorter one ended at the
    /// caller's deadline, which says nothing about when the condition would have held.
    pub fn record_timeout(&self, waited: Duration) {
        if waited.as_nanos() > u128::from(MAX_SPIN_NS) {
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

    /// The spin budget for a wait that ends at `deadline`: [`budget_ns`](Spinner::budget_ns),
    /// cut to the time left (0 once it has passed).
    pub fn budget_ns_before(&self, deadline: Option<Deadline>) -> u32 {
        match deadline {
            Some(deadline) => {
                let remaining = deadline.remaining();
                if remaining.is_zero() {
                    0
                } else {
                    clamp_to_remaining(self.budget_ns(), remaining)
                }
            }
            None => self.budget_ns(),
        }
    }

    /// The spin itself: `look` after each run of hints until it returns [`LockLook::Done`] or
    /// the budget (cut at `deadline`) runs out, paced as `pace` says. Where spinning cannot
    /// pay, a wait for a lock may yield instead ([`yield_for_lock`]).
    #[cold]
    fn spin_slow(
        &self,
        look: &mut dyn FnMut() -> LockLook,
        pace: Pace,
        deadline: Option<Deadline>,
    ) -> bool {
        if cfg!(loom) {
            return look() == LockLook::Done;
        }
        if deadline.is_some_and(|d| d.has_passed()) {
            return false;
        }
        let budget = self.budget_ns_before(deadline);
        if budget == 0 {
            // The deadline has not passed, so spinning cannot pay.
            return matches!(pace, Pace::Lock { .. })
                && yielding_can_pay()
                && yield_for_lock(look, deadline);
        }
        if matches!(pace, Pace::Lock { sleepers: true, .. }) {
            return false;
        }
        let Some(_counted) = SpinnerSlot::take(self) else {
            return false;
        };
        let ns_per_iter = ns_per_spin_iteration();
        let max_iters = (budget / ns_per_iter).max(1);
        let mut iters = 0;
        let mut held = false;
        let (paced_for_lock, mut lost_race) = match pace {
            Pace::Backoff => (false, false),
            Pace::Lock { lost_race, .. } => (true, lost_race),
        };
        let patient = |lost_race: bool| {
            paced_for_lock && (lost_race || self.patience.load(Ordering::Relaxed) > 0)
        };
        // Exponential backoff between eager looks: every look pulls the watched cache line
        // away from the thread that is about to change it.
        let mut pause = if patient(lost_race) {
            MAX_PAUSES_BETWEEN_CHECKS
        } else {
            1
        }
        .min(max_iters);
        while iters < max_iters {
            for _ in 0..pause {
                core::hint::spin_loop();
            }
            iters += pause;
            pause = match look() {
                LockLook::Done => {
                    self.learn(iters.saturating_mul(ns_per_iter));
                    held = true;
                    break;
                }
                LockLook::GiveUp | LockLook::HeldWithSleepers => break,
                LockLook::LostRace => {
                    if !lost_race {
                        self.note_lost_race();
                    }
                    lost_race = true;
                    MAX_PAUSES_BETWEEN_CHECKS
                }
                LockLook::Held if patient(lost_race) => MAX_PAUSES_BETWEEN_CHECKS,
                LockLook::Held => (pause * 2).min(MAX_PAUSES_BETWEEN_CHECKS),
            };
            // The budget was cut to the deadline in hints, which do not count the looks' own
            // cost: re-check a timed wait's clock once per look at the longest pace.
            if pause == MAX_PAUSES_BETWEEN_CHECKS && deadline.is_some_and(|d| d.has_passed()) {
                break;
            }
        }
        if paced_for_lock && held && !lost_race {
            self.wear_patience();
        }
        held
    }

    /// A look for a free lock lost the race: be patient for the next few spins.
    fn note_lost_race(&self) {
        let patience = self.patience.load(Ordering::Relaxed);
        self.patience.store(
            patience
                .saturating_add(PATIENCE_PER_LOST_RACE)
                .min(MAX_PATIENCE),
            Ordering::Relaxed,
        );
    }

    /// A spin for a lock took it without a lost race: a little less patience next time.
    fn wear_patience(&self) {
        let patience = self.patience.load(Ordering::Relaxed);
        if patience > 0 {
            self.patience.store(patience - 1, Ordering::Relaxed);
        }
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

/// The most usable CPUs on which the yield phase runs. Every yielding waiter looks at the lock's
/// word after each yield; with many CPUs that is many CPUs pulling the owner's cache line, which
/// is how parking_lot's yielding waiters fall to 0.66 Mops/s at 32 threads on 16 vCPUs (std:
/// 6.3). It won on 2 vCPUs; on bigger machines waiters sleep until it is measured there.
const MAX_CPUS_FOR_YIELDING: usize = 4;

/// The most `sched_yield`s a waiter for a lock makes before it sleeps (as parking_lot's).
const MAX_YIELDS_FOR_LOCK: u32 = 8;

/// A counter alone on its cache line, so that lock waiters counting themselves do not slow
/// the spinner counters (or anything else) next to it.
#[repr(align(128))]
struct PaddedCounter(AtomicU32);

/// Threads of this process now in a contended lock's slow path, asleep or not
/// ([`LockWaiter`]); kept only on machines where the yield phase can run.
static LOCK_WAITERS: PaddedCounter = PaddedCounter(AtomicU32::new(0));

/// Counts this thread among the process's lock waiters while it lives, so that the yield
/// phase of [`Spinner::spin_for_lock`] can tell whether the runnable threads are lock
/// waiters. A lock built on `spin_for_lock` holds one from its slow path's first look to its
/// return, sleeps included; one that does not (or that leaks one) only skews that decision.
/// Counts nothing on machines where the phase never runs.
///
/// Sleepers count too, though they are not runnable: compared with a runnable count that can
/// be 10 ms old, counting only awake waiters switched the phase off in the very case it is
/// for (a contended counter at 32 threads on 2 vCPUs: 46-48 Mops/s against 162-164). The cost:
/// a process with many threads asleep on locks and more other runnable work than one thread
/// per CPU may yield behind that work, up to 8 times per contended lock.
///
/// ```
/// use futexkit::spin::LockWaiter;
///
/// let _waiter = LockWaiter::enter();
/// // ... spin_for_lock, then sleep on the lock's word, until the lock is taken ...
/// ```
#[derive(Debug)]
#[must_use = "a LockWaiter counts the thread only while it lives"]
pub struct LockWaiter {
    counted: bool,
}

impl LockWaiter {
    /// Counts this thread as a lock waiter until the returned value is dropped.
    pub fn enter() -> LockWaiter {
        let counted = crate::capabilities().usable_cpus() <= MAX_CPUS_FOR_YIELDING;
        if counted {
            LOCK_WAITERS.0.fetch_add(1, Ordering::Relaxed);
        }
        LockWaiter { counted }
    }
}

impl Drop for LockWaiter {
    fn drop(&mut self) {
        if self.counted {
            LOCK_WAITERS.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Whether a waiter for a lock, where spinning cannot pay (one CPU, or more runnable threads
/// than CPUs), should yield rather than sleep at once: the machine is small enough
/// ([`MAX_CPUS_FOR_YIELDING`]), and the runnable threads are no more than one per CPU besides
/// this process's lock waiters ([`LockWaiter`], sleepers included). Then the threads a yield
/// gives the CPU to are (nearly) all waiters that look and yield back, or the lock's owner,
/// perhaps preempted on this very CPU; a sleep instead costs some later unlock a wake. Where
/// other work is runnable, a yield queues the waiter behind it, which a server's p99 showed
/// (1.5-2x worse), so it sleeps at once.
fn yielding_can_pay() -> bool {
    runnable_are_mostly_lock_waiters(
        runnable_threads_sampled(),
        crate::capabilities().usable_cpus(),
        LOCK_WAITERS.0.load(Ordering::Relaxed) as usize,
    )
}

/// Whether `runnable` threads (system-wide; 0 = unknown) are at most one per CPU besides
/// `lock_waiters`, on a machine of at most [`MAX_CPUS_FOR_YIELDING`] CPUs.
fn runnable_are_mostly_lock_waiters(runnable: usize, cpus: usize, lock_waiters: usize) -> bool {
    cpus <= MAX_CPUS_FOR_YIELDING && runnable > 0 && runnable <= cpus + lock_waiters
}

/// The yield phase itself: up to [`MAX_YIELDS_FOR_LOCK`] yields, looking after each, until
/// `look` takes the lock, gives up or `deadline` passes. Sleepers do not stop it (unlike a
/// spin): every thread that could take the lock is on a run queue or about to be, so taking it
/// ahead of a sleeper costs nobody a CPU, and a sleeper that waits too long has the lock
/// handed to it.
#[cold]
fn yield_for_lock(look: &mut dyn FnMut() -> LockLook, deadline: Option<Deadline>) -> bool {
    for _ in 0..MAX_YIELDS_FOR_LOCK {
        if deadline.is_some_and(|d| d.has_passed()) {
            return false;
        }
        crate::thread::yield_now();
        match look() {
            LockLook::Done => return true,
            LockLook::GiveUp => return false,
            LockLook::Held | LockLook::HeldWithSleepers | LockLook::LostRace => {}
        }
    }
    false
}

/// A spin budget of `budget_ns` cut to `remaining`, the time left before a deadline.
fn clamp_to_remaining(budget_ns: u32, remaining: Duration) -> u32 {
    u32::try_from(remaining.as_nanos()).map_or(budget_ns, |left| budget_ns.min(left))
}

/// A place among the threads allowed to spin, in the process and on one spinner; given back
/// when dropped, also if a caller's look panics.
struct SpinnerSlot<'a> {
    spinner: &'a Spinner,
}

impl<'a> SpinnerSlot<'a> {
    /// Takes a place if there is one: spinners across all primitives share the CPUs too, so at
    /// most half of them spin at once, or a lock holder and a notifier find their CPUs taken
    /// by waiters; and at most [`max_spinners`] on one primitive.
    fn take(spinner: &'a Spinner) -> Option<SpinnerSlot<'a>> {
        if SPINNING_IN_PROCESS.fetch_add(1, Ordering::Relaxed) >= max_spinners_in_process() {
            SPINNING_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let max_here = max_spinners() as u16;
        if spinner
            .spinning
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max_here).then_some(n + 1)
            })
            .is_err()
        {
            SPINNING_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(SpinnerSlot { spinner })
    }
}

impl Drop for SpinnerSlot<'_> {
    fn drop(&mut self) {
        self.spinner.spinning.fetch_sub(1, Ordering::Relaxed);
        SPINNING_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
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
/// slack for the reader itself).
fn oversubscribed(cpus: usize) -> bool {
    runnable_threads_sampled() > cpus + cpus / 4
}

/// Threads runnable system-wide, from the fourth field of `/proc/loadavg`, sampled at most
/// every [`LOAD_SAMPLE_PERIOD`]; 0 if it cannot be read.
fn runnable_threads_sampled() -> usize {
    // Packed: (time of the sample in ms since START) << 16 | runnable threads (saturated).
    static SAMPLE: AtomicU64 = AtomicU64::new(u64::MAX);
    static START: OnceLock<Instant> = OnceLock::new();
    let now_ms = START.get_or_init(Instant::now).elapsed().as_millis() as u64;
    let sample = SAMPLE.load(Ordering::Relaxed);
    if sample != u64::MAX
        && now_ms.saturating_sub(sample >> 16) < LOAD_SAMPLE_PERIOD.as_millis() as u64
    {
        return (sample & 0xffff) as usize;
    }
    let runnable = runnable_threads().unwrap_or(0).min(0xffff);
    SAMPLE.store(now_ms << 16 | runnable as u64, Ordering::Relaxed);
    runnable
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
    fn lost_races_make_a_lock_spinner_patient_and_clean_spins_wear_it_off() {
        let s = Spinner::new();
        assert_eq!(
            s.patience.load(Ordering::Relaxed),
            0,
            "a new spinner is eager"
        );
        // The first look loses the race, the next takes the lock (if spinning can pay now;
        // else the spin gives up at once). Either way the lost race was counted, and a spin
        // with a lost race in it wears nothing off.
        let mut looks = 0;
        s.spin_for_lock(|| {
            looks += 1;
            if looks == 1 {
                LockLook::LostRace
            } else {
                LockLook::Done
            }
        });
        assert_eq!(s.patience.load(Ordering::Relaxed), PATIENCE_PER_LOST_RACE);
        for _ in 0..10 {
            s.note_lost_race();
        }
        assert_eq!(s.patience.load(Ordering::Relaxed), MAX_PATIENCE, "bounded");
        for _ in 0..MAX_PATIENCE - 1 {
            s.wear_patience();
        }
        assert_eq!(s.patience.load(Ordering::Relaxed), 1);
        s.wear_patience();
        s.wear_patience();
        assert_eq!(
            s.patience.load(Ordering::Relaxed),
            0,
            "eager again, and no wrap"
        );
        // A first look that takes the lock changes nothing, nor does giving up.
        assert!(s.spin_for_lock(|| LockLook::Done));
        s.note_lost_race();
        let mut looks = 0;
        let taken = s.spin_for_lock(|| {
            looks += 1;
            if looks == 1 {
                LockLook::Held
            } else {
                LockLook::GiveUp
            }
        });
        assert!(!taken);
        assert_eq!(s.patience.load(Ordering::Relaxed), PATIENCE_PER_LOST_RACE);
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
        // Past the deadline: one look, no spin, whatever the budget.
        let mut looks = 0;
        let taken = s.spin_for_lock_before(Some(passed), || {
            looks += 1;
            LockLook::Held
        });
        assert!(!taken);
        assert_eq!(looks, 1);
    }

    #[test]
    fn yields_only_when_the_runnable_threads_are_lock_waiters() {
        // 8 threads contending on 2 CPUs: yield.
        assert!(runnable_are_mostly_lock_waiters(8, 2, 7));
        // 2 lock waiters among 20 runnable threads of a busy server: sleep.
        assert!(!runnable_are_mostly_lock_waiters(20, 2, 2));
        assert!(!runnable_are_mostly_lock_waiters(5, 2, 2));
        assert!(runnable_are_mostly_lock_waiters(4, 2, 2));
        // /proc/loadavg unreadable: never yield.
        assert!(!runnable_are_mostly_lock_waiters(0, 2, 7));
        // 32 threads contending on 16 CPUs: sleep (not measured there; parking_lot collapses).
        assert!(!runnable_are_mostly_lock_waiters(32, 16, 31));
        assert!(runnable_are_mostly_lock_waiters(6, 4, 5));
    }

    #[test]
    fn sleepers_stop_a_spin_for_a_lock() {
        let s = Spinner::new();
        let mut looks = 0;
        let taken = s.spin_for_lock(|| {
            looks += 1;
            if looks == 2 {
                LockLook::HeldWithSleepers
            } else {
                LockLook::Held
            }
        });
        assert!(!taken);
        // Depending on the load now: no spin (1 look), a spin that stops at the sleepers (2),
        // or the yield phase, which goes on past them (1 + MAX_YIELDS_FOR_LOCK). A spin that
        // went on would look until its budget ran out.
        let yielded = 1 + MAX_YIELDS_FOR_LOCK;
        assert!(
            looks <= 2 || looks == yielded,
            "a spin went on past sleepers ({looks} looks)"
        );
    }

    #[test]
    fn the_yield_phase_goes_past_sleepers_and_stops_when_told() {
        let mut looks = 0;
        let taken = yield_for_lock(
            &mut || {
                looks += 1;
                match looks {
                    1 => LockLook::HeldWithSleepers,
                    2 => LockLook::LostRace,
                    _ => LockLook::Done,
                }
            },
            None,
        );
        assert!(taken);
        assert_eq!(looks, 3);
        let mut looks = 0;
        assert!(!yield_for_lock(
            &mut || {
                looks += 1;
                LockLook::Held
            },
            None
        ));
        assert_eq!(looks, MAX_YIELDS_FOR_LOCK, "bounded");
        let mut looks = 0;
        assert!(!yield_for_lock(
            &mut || {
                looks += 1;
                LockLook::GiveUp
            },
            None
        ));
        assert_eq!(looks, 1);
        let passed = Deadline::after(Duration::ZERO);
        let mut looks = 0;
        assert!(!yield_for_lock(
            &mut || {
                looks += 1;
                LockLook::Done
            },
            Some(passed)
        ));
        assert_eq!(looks, 0, "no yield past the deadline");
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
/// then sleeps; it takes one of the spinner places, [`max_spinners`], for the call, and
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
/// [`Error::TimedOut`](crate::futex::Error::TimedOut) at the deadline; with `FUTEX2_SPIN`,
/// [`Error::PermissionDenied`](crate::futex::Error::PermissionDenied) if the owner is a kernel
/// thread.
pub fn wait_on_owner<S: crate::futex::Scope>(
    word: &crate::futex::Futex<S>,
    owner_tid: u32,
    spinner: &Spinner,
    deadline: Option<Deadline>,
) -> Result<(), crate::futex::Error> {
    #[cfg(not(loom))]
    if crate::capabilities().has(crate::futex::Capability::Spin) {
        // A kernel spinner counts as a spinner: it takes a place (held until the call returns,
        // so bound the call where places are scarce), and without one it waits as any waiter.
        if let Some(_place) = SpinnerSlot::take(spinner) {
            use crate::futex::Error;
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
