//! The hand-off waiter's rule ([`Spinner`]: `swap`, [`Parker`](crate::swap::Parker), FlipCall
//! and its server): spin twice the moving average of its sleeps (`learned += (sample -
//! learned) / 8`), at most `MAX_SPIN_NS`, which must outlast a wake-up, and only while its spins
//! have been paying (`credit.rs`): a partner that waits for the spinner's own CPU, or for one
//! busy threads hold, answers no spin, however long its sleeps. Each side of a hand-off has a
//! spinner of its own, so there is no limit on spinners (threads that share one all spin, and a
//! race on its average costs a sample). A FlipCall or Parker waiter on the CPU its partner last
//! handed over from does not spin (`partner_may_be_running`). A clock is read only around a sleep.
//!
//! [`wait_on_owner`] is the one wait on an owner-TID word: where the kernel has `FUTEX2_SPIN`
//! (probed, and opted in with `FUTEXKIT_ENABLE=spin`, as it has no stable ABI) the kernel spins
//! while the owner is on a CPU, which user space cannot see; elsewhere a [`Spinner`] spins,
//! then the thread sleeps on the word.
//!
//! ## State
//!
//! | state | kept | meaning | changed by |
//! |-------|------|---------|------------|
//! | `Spinner::learned_ns` | per hand-off primitive (or thread, for raw `swap`) | moving average of its waits, 0 = do not spin | every sleep and every won spin of a hand-off wait |
//! | `Spinner::credit` | beside it | whether its spins have been paying ([`Credit`]) | every spin; every wait without credit |
//! | a CPU word (`record_hand_over_cpu`) | in the primitive (a Parker, a FlipCall header) | the CPU its giver last handed a turn over from | a hand-over, when it changes |

use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use super::credit::Credit;
use super::decisions::{count, Tally};
use super::{machine, spinning_can_pay, SpinWait};
use crate::futex::sys::MODEL_CHECKED;
use crate::futex::{Deadline, Error, Futex, Scope};

/// The longest a hand-off waiter ([`Spinner`]) spins before it sleeps.
pub(crate) const MAX_SPIN_NS: u32 = 100_000;

/// Where a new spinner's learned average starts: a budget of 10 us, until its waits say more.
const INITIAL_LEARNED_NS: u32 = 5_000;

/// The shortest spin worth starting: a smaller budget means the waiter sleeps at once. (A
/// spinner that does not spin still learns from how long its sleeps last, so it finds out when
/// spinning would pay.)
const MIN_SPIN_NS: u32 = 200;

/// Adaptive spin state for one side of a hand-off (8 bytes): it spins twice the moving average
/// of its waits' sleeps, at most 100 us, and only while its spins have been paying: after a run
/// of lost spins, once in 16 waits. Nothing spins with one usable CPU. Meant for one waiting thread
/// at a time (each side of a hand-off its own); threads that share one all spin.
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
    /// Whether its spins have been paying: a [`Credit`]'s byte.
    credit: AtomicU8,
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
            credit: AtomicU8::new(Credit::FIRST_SPINS.to_byte()),
        }
    }

    /// Spins until `done` returns true or this spinner's budget runs out; returns whether
    /// `done` held. Calls `done` at least once, and does not spin at all when spinning cannot
    /// pay (one usable CPU, or what this spinner learned).
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

    /// Tells the spinner how long (`slept`) a wait slept after it spun out its budget: a sleep
    /// within the cap teaches it to spin longer, one beyond the cap to spin less. (A spin that
    /// kept the partner from running lost, which its credit counts.)
    pub(crate) fn record_sleep(&self, slept: Duration) {
        let ns = slept.as_nanos();
        self.learn(if ns <= u128::from(MAX_SPIN_NS) {
            ns as u32
        } else {
            0
        });
    }

    /// Tells the spinner that a wait that had to sleep timed out after `waited`. Only a wait
    /// that outlasted the cap teaches anything (to spin less): a shorter one ended at the
    /// caller's deadline, which says nothing about when the partner would have answered.
    pub(crate) fn record_timeout(&self, waited: Duration) {
        if waited.as_nanos() > u128::from(MAX_SPIN_NS) {
            self.learn(0);
        }
    }

    /// The spin budget in nanoseconds for a wait that ends at `deadline`: twice the learned
    /// average, at most `MAX_SPIN_NS` and at most the time left; 0 (sleep at once) below
    /// `MIN_SPIN_NS`, or where spinning cannot pay.
    pub(crate) fn budget_ns_before(&self, deadline: Option<Deadline>) -> u32 {
        let budget = self.learned_ns.load(Ordering::Relaxed).saturating_mul(2);
        if !spinning_can_pay() || budget < MIN_SPIN_NS {
            return 0;
        }
        let left = deadline.map_or(u128::MAX, |d| d.remaining().as_nanos());
        budget
            .min(MAX_SPIN_NS)
            .min(u32::try_from(left).unwrap_or(u32::MAX))
    }

    /// The spin itself, with credit or as the probe of one wait in 16 without: `done` after
    /// each run of hints, as a [`SpinWait`] makes them, until it holds or the budget, cut at
    /// `deadline`, runs out. A win teaches how long it took; either way the credit learns.
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
        let before = Credit::from_byte(self.credit.load(Ordering::Relaxed));
        let (spins, credit) = before.spins();
        if credit != before {
            self.credit.store(credit.to_byte(), Ordering::Relaxed);
        }
        if !spins {
            count(Tally::HandOffSkipped);
            return false;
        }
        let ns_per_hint = machine().ns_per_hint;
        let hints = (budget / ns_per_hint).max(1);
        let mut spin = SpinWait::with_hints(hints);
        let won = spin.spin_until(deadline, done);
        if won {
            // A spin that won says spinning pays, however quickly it won: it teaches at least
            // the shortest budget worth spinning, never to stop spinning.
            let spun = hints - spin.hints_left;
            self.learn(spun.saturating_mul(ns_per_hint).max(MIN_SPIN_NS));
        }
        // Read again: a thread sharing this spinner may have changed it meanwhile.
        let credit = Credit::from_byte(self.credit.load(Ordering::Relaxed));
        self.credit
            .store(credit.after_spin(won).to_byte(), Ordering::Relaxed);
        count(if won {
            Tally::HandOffWon
        } else {
            Tally::HandOffLost
        });
        won
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

/// What [`record_hand_over_cpu`] returns, and a CPU word holds, where no CPU is known.
pub(crate) const NO_CPU: u32 = u32::MAX;

/// Records in `word` the CPU this thread hands a turn over from, for the partner's
/// [`partner_may_be_running`], and returns it. The word is written only when it changes: the
/// partner reads it at every wait, and a line written at every hand-over would move between
/// the CPUs with the turn. Under a model checker it returns [`NO_CPU`] and leaves the word
/// alone: a model's executions must not depend on where its threads really run.
pub(crate) fn record_hand_over_cpu(word: &crate::atomic::AtomicU32) -> u32 {
    use crate::atomic::Ordering::Relaxed;
    let cpu = hand_off_cpu();
    if !MODEL_CHECKED && word.load(Relaxed) != cpu {
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
    if my_cpu == NO_CPU || partner_cpu.load(crate::atomic::Ordering::Relaxed) != my_cpu {
        return true;
    }
    count(Tally::HandOffSkipped);
    false
}

/// Waits while `word` holds `owner_tid` (the TID of the thread that owns what the word guards):
/// with kernel `FUTEX2_SPIN` where probed and enabled (the kernel spins while the owner runs,
/// then sleeps), otherwise `spinner`'s bounded spin and then a futex wait. `Ok(())` once the
/// word changed or a wake arrived (possibly spuriously: re-check).
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
        match crate::futex::futex2::wait_spinning_on_owner(word, owner_tid, deadline) {
            Err(Error::ValueChanged) => return Ok(()),
            // The probe said yes but the call disagrees: use the user-space policy.
            Err(Error::Unsupported | Error::InvalidArgument) => {}
            other => return other,
        }
    }
    spinner.wait_on(word, owner_tid, deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
    fn a_hand_over_records_the_cpu_it_runs_on() {
        let word = crate::atomic::AtomicU32::new(NO_CPU);
        let cpu = record_hand_over_cpu(&word);
        assert_eq!(word.load(Ordering::Relaxed), cpu);
        assert_ne!(cpu, NO_CPU, "sched_getcpu failed");
    }

    #[test]
    fn sleeps_teach_the_budget() {
        let s = Spinner::new();
        let learned = || s.learned_ns.load(Ordering::Relaxed);
        assert!(s.budget_ns_before(None) <= MAX_SPIN_NS);
        // Sleeps beyond the cap teach it not to spin: an eighth of the way to 0 each.
        s.record_sleep(Duration::from_secs(1));
        assert_eq!(learned(), INITIAL_LEARNED_NS - INITIAL_LEARNED_NS / 8);
        for _ in 0..100 {
            s.record_sleep(Duration::from_secs(1));
        }
        assert!(learned() < 8, "learned {}", learned());
        assert_eq!(s.budget_ns_before(None), 0);
        // A sleep within the cap: an eighth of the way to it.
        let before = learned();
        s.record_sleep(Duration::from_micros(20));
        assert_eq!(learned(), before + (20_000 - before) / 8);
        for _ in 0..100 {
            s.record_sleep(Duration::from_micros(20));
        }
        assert!(
            (19_990..=20_000).contains(&learned()),
            "learned {}",
            learned()
        );
        if spinning_can_pay() {
            // Twice the average, never beyond the cap.
            assert_eq!(s.budget_ns_before(None), 2 * learned());
            for _ in 0..100 {
                s.record_sleep(Duration::from_micros(90));
            }
            assert_eq!(s.budget_ns_before(None), MAX_SPIN_NS);
        } else {
            assert_eq!(s.budget_ns_before(None), 0);
        }
    }

    #[test]
    fn a_deadline_cuts_the_spin() {
        let s = Spinner::learning_from(MAX_SPIN_NS);
        let near = Deadline::after(Duration::from_micros(3));
        assert!(s.budget_ns_before(Some(near)) <= 3_000);
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
}
