//! The hand-off waiter's rule ([`Spinner`]: `swap`, [`Parker`](crate::swap::Parker), FlipCall
//! and its server), by where the partner last handed a turn over from (`where_is_partner`):
//!
//! 1. From this very CPU: no spin. Woken onto it or preempted there, the partner waits for the
//!    CPU a spin would keep.
//! 2. From another CPU, or from where nobody knows while every runnable thread has a CPU: up to
//!    `MAX_SPIN_NS`, which must outlast a wake-up (else a partner that slept is still waking
//!    when the spin for its answer ends).
//! 3. From where nobody knows (raw `swap` has no place to record it) while threads wait for a
//!    CPU: a lock's `SPIN_WAIT_NS`, as the partner may be waiting for this one.
//!
//! Rules 2 and 3 spin only while the waiter's spins have been paying, the notify waiter's credit
//! (`credit.rs`): a partner that answers later than the budget, or that waits for a CPU busy
//! threads hold, stops the spin. A spin that wins ends as soon as the partner answers, so the
//! budget bounds only what a lost spin wastes, and the credit how often that happens. There is
//! no limit on spinners: futexkit gives each side of a hand-off a spinner of its own (a
//! Parker's owner, a FlipCall endpoint, a thread for raw `swap`), so one thread spins on each;
//! threads that share one all spin, and share its credit.
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
//! | `Spinner::credit` | per hand-off primitive (or thread, for raw `swap`) | whether its spins have been paying ([`Credit`]) | every spin; every wait without credit |
//! | a CPU word (`record_hand_over_cpu`) | in the primitive (a Parker, a FlipCall header) | the CPU its giver last handed a turn over from | a hand-over, when it changes |

use core::sync::atomic::{AtomicU8, Ordering};

use super::credit::Credit;
use super::decisions::{count, Tally};
use super::{
    every_runnable_thread_had_a_cpu_lately, machine, spinning_can_pay, SpinWait,
    MAX_PAUSES_BETWEEN_LOOKS, SPIN_WAIT_NS,
};
use crate::futex::sys::MODEL_CHECKED;
use crate::futex::{Deadline, Error, Futex, Scope};

/// How long a hand-off waiter ([`Spinner`]) spins before it sleeps: longer than a wake-up
/// on a virtual machine, where one takes tens of microseconds.
pub(crate) const MAX_SPIN_NS: u32 = 100_000;

/// Spin state for one side of a hand-off (1 byte): it spins up to 100 us (4 us while threads
/// wait for a CPU), and only while its spins have been paying: after a run of lost spins, once
/// in 16 waits. Nothing spins with one usable CPU. Meant for one waiting thread at a time (each side of a hand-off its own);
/// threads that share one all spin.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use futexkit::spin::Spinner;
///
/// static SPINNER: Spinner = Spinner::new();
/// let ready = AtomicBool::new(true);
/// // Spins (briefly) until the condition holds or the budget runs out.
/// assert!(SPINNER.spin_until(|| ready.load(Ordering::Acquire)));
/// ```
#[derive(Debug)]
pub struct Spinner {
    /// Whether its spins have been paying: a [`Credit`]'s byte.
    credit: AtomicU8,
}

impl Default for Spinner {
    fn default() -> Spinner {
        Spinner::new()
    }
}

impl Spinner {
    /// A spinner whose first waits spin.
    pub const fn new() -> Spinner {
        Spinner {
            credit: AtomicU8::new(Credit::FIRST_SPINS.to_byte()),
        }
    }

    /// Spins until `done` returns true or this spinner's budget runs out; returns whether
    /// `done` held. Calls `done` at least once, and does not spin at all when spinning cannot
    /// pay (one usable CPU, or spins that kept losing).
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
        done: impl FnMut() -> bool,
    ) -> bool {
        self.spin_for_partner(Partner::Unknown, deadline, done)
    }

    /// [`spin_until_before`](Spinner::spin_until_before) for a partner `partner` (as
    /// [`where_is_partner`] sees it): no spin for one on this CPU.
    #[inline]
    pub(crate) fn spin_for_partner(
        &self,
        partner: Partner,
        deadline: Option<Deadline>,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        done() || self.spin_slow(partner, &mut done, deadline)
    }

    /// Spins while `word` holds `expected`, then sleeps on it. `Ok(())` once the word changed
    /// or a wake arrived (possibly spuriously: re-check).
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
        match word.wait(expected, deadline) {
            // It changed between the spin and the sleep: that is what we waited for.
            Err(Error::ValueChanged) => Ok(()),
            other => other,
        }
    }

    /// The spin itself: `done` after each run of hints, as a [`SpinWait`] makes them, until it
    /// holds or the budget, cut at `deadline`, runs out; none without credit, except a probe.
    #[cold]
    fn spin_slow(
        &self,
        partner: Partner,
        done: &mut dyn FnMut() -> bool,
        deadline: Option<Deadline>,
    ) -> bool {
        if MODEL_CHECKED {
            return done();
        }
        let budget = budget_ns_before(deadline, partner);
        if budget == 0 || !self.spin_pays() {
            count(Tally::HandOffSkipped);
            return false;
        }
        let won = spin_for(budget, done, deadline);
        let credit = Credit::from_byte(self.credit.load(Ordering::Relaxed));
        self.credit
            .store(credit.after_spin(won).to_byte(), Ordering::Relaxed);
        won
    }

    /// Whether this wait spins: with credit, or as the probe of one wait in 16 without.
    fn spin_pays(&self) -> bool {
        let credit = Credit::from_byte(self.credit.load(Ordering::Relaxed));
        if credit.has_credit() {
            return true;
        }
        let (probe, credit) = credit.probe_due();
        self.credit.store(credit.to_byte(), Ordering::Relaxed);
        probe
    }
}

/// The spin budget for a wait for `partner` that ends at `deadline`, cut to the time left (0
/// once it has passed): none for a partner on this CPU, or where spinning cannot pay;
/// `MAX_SPIN_NS` for a partner on another CPU, or where every runnable thread has a CPU; else
/// a lock's `SPIN_WAIT_NS`, as the spin may then keep the very CPU the partner waits for.
fn budget_ns_before(deadline: Option<Deadline>, partner: Partner) -> u32 {
    if !spinning_can_pay() || partner == Partner::OnMyCpu {
        return 0;
    }
    let budget = if partner == Partner::Elsewhere || every_runnable_thread_had_a_cpu_lately() {
        MAX_SPIN_NS
    } else {
        SPIN_WAIT_NS
    };
    let left = deadline.map_or(u128::MAX, |d| d.remaining().as_nanos());
    u32::try_from(left).map_or(budget, |left| budget.min(left))
}

/// Spins `budget` nanoseconds of hints for `done`, cut at `deadline`.
fn spin_for(budget: u32, done: &mut dyn FnMut() -> bool, deadline: Option<Deadline>) -> bool {
    let mut spin = SpinWait::with_hints((budget / machine().ns_per_hint).max(1));
    while spin.spin_run() {
        if done() {
            count(Tally::HandOffWon);
            return true;
        }
        // The budget counts hints, not the looks' own cost: a timed wait re-checks its clock
        // once per longest run.
        if spin.run == MAX_PAUSES_BETWEEN_LOOKS && deadline.is_some_and(|d| d.has_passed()) {
            break;
        }
    }
    count(Tally::HandOffLost);
    false
}

std::thread_local! {
    /// The spinner of hand-off waits that have no state of their own to keep one in (a raw
    /// [`swap`](crate::swap::swap)): a thread in a request/response loop sees consistent
    /// partners.
    static THREAD_SPINNER: Spinner = const { Spinner::new() };
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

/// Where a hand-off's partner last handed a turn over from, as its waiter sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Partner {
    /// From the waiter's own CPU: woken onto it or preempted there, the partner waits for the
    /// very CPU a spin would keep, so the waiter does not spin.
    OnMyCpu,
    /// From another CPU: a spin keeps no CPU the partner needs.
    Elsewhere,
    /// Not known: no hand-over yet, no place to record one (raw `swap`), or a model checker.
    Unknown,
}

/// Where the partner of a waiter that last handed the turn over from `my_cpu` is, by the CPU in
/// `partner_cpu` (its [`record_hand_over_cpu`] word; either [`NO_CPU`]: not known, which is
/// also what a model checker's waiter has, so the word is not read there). The word may be in
/// memory a peer process writes: any value only decides how long to spin.
pub(crate) fn where_is_partner(partner_cpu: &crate::atomic::AtomicU32, my_cpu: u32) -> Partner {
    if my_cpu == NO_CPU {
        return Partner::Unknown;
    }
    match partner_cpu.load(crate::atomic::Ordering::Relaxed) {
        NO_CPU => Partner::Unknown,
        cpu if cpu == my_cpu => Partner::OnMyCpu,
        _ => Partner::Elsewhere,
    }
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
    use std::time::Duration;

    #[test]
    fn a_partner_is_on_my_cpu_only_if_both_cpus_are_known_and_equal() {
        let on = |cpu| crate::atomic::AtomicU32::new(cpu);
        assert_eq!(where_is_partner(&on(3), 3), Partner::OnMyCpu);
        assert_eq!(where_is_partner(&on(3), 4), Partner::Elsewhere);
        // An unknown CPU on either side (none recorded yet, or sched_getcpu failed).
        assert_eq!(where_is_partner(&on(NO_CPU), 3), Partner::Unknown);
        assert_eq!(where_is_partner(&on(3), NO_CPU), Partner::Unknown);
        assert_eq!(where_is_partner(&on(NO_CPU), NO_CPU), Partner::Unknown);
        assert_eq!(budget_ns_before(None, Partner::OnMyCpu), 0);
        if spinning_can_pay() {
            assert_eq!(budget_ns_before(None, Partner::Elsewhere), MAX_SPIN_NS);
        }
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
    fn spins_that_keep_losing_stop_and_probe_once_in_sixteen_waits() {
        if !spinning_can_pay() {
            return;
        }
        // A new spinner's credit lets its first two waits spin.
        let s = Spinner::new();
        let mut spun = 0;
        for _ in 0..2 + 16 * 4 {
            let mut looks = 0;
            assert!(!s.spin_until(|| {
                looks += 1;
                false
            }));
            spun += usize::from(looks > 1);
        }
        assert_eq!(
            spun,
            2 + 4,
            "two spins on credit, then one probe in 16 waits"
        );
        // A probe that wins earns credit back: the wait after it spins again.
        let wins_if_it_spins = || {
            let mut looks = 0;
            move || {
                looks += 1;
                looks > 1
            }
        };
        let mut waits = 0;
        while !s.spin_until(wins_if_it_spins()) {
            waits += 1;
            assert!(waits < 16, "no probe in 16 waits");
        }
        assert!(s.spin_until(wins_if_it_spins()));
    }

    #[test]
    fn a_deadline_cuts_the_spin() {
        if spinning_can_pay() {
            let near = Some(Deadline::after(Duration::from_micros(3)));
            let near = budget_ns_before(near, Partner::Elsewhere);
            assert!(near <= 3_000, "budget {near}");
        }
        let passed = Deadline::after(Duration::ZERO);
        assert_eq!(budget_ns_before(Some(passed), Partner::Elsewhere), 0);
        // A far deadline cuts nothing: the budget is a full one, long or short by whether every
        // runnable thread has a CPU.
        let far = Deadline::after(Duration::from_secs(3600));
        let full = [SPIN_WAIT_NS, MAX_SPIN_NS];
        for budget in [
            budget_ns_before(Some(far), Partner::Unknown),
            budget_ns_before(None, Partner::Unknown),
        ] {
            if spinning_can_pay() {
                assert!(full.contains(&budget), "budget {budget}");
            } else {
                assert_eq!(budget, 0);
            }
        }
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
