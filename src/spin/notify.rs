//! The rule of a waiter for a notify (`spin_for_notify`: Condvar and Barrier waits), in the
//! order it is applied:
//!
//! 1. No spin while threads on the machine wait for a CPU (`/proc/loadavg`'s runnable threads
//!    above the CPUs online, looked at about once a millisecond per process): a spin would hold
//!    a CPU one of them wants. This is the one signal that CPUs are wanted: a spin preempted
//!    between two looks is seen at the next.
//! 2. One budget of a lock's spin (`SPIN_WAIT_NS`) while the thread's spins have been paying
//!    (its credit, `credit.rs`), or after a notify of its own found its waiters awake (they run,
//!    and in a hand-off one of them answers next).
//! 3. Else a probe, once in 16 waits (`credit.rs`): one budget, or, right after a notify of
//!    its own woke a sleeper, budget after budget up to `MAX_SPIN_NS` while every runnable
//!    thread has a CPU and the deadline has not passed. Only such a probe outlasts a wake-up,
//!    so only it finds that two threads taking turns would answer each other while spinning.
//! 4. Else sleep at once.
//!
//! No budget grows with what a wait took: the notifier may be blocked (in I/O, say). Credit is
//! per thread (a thread's waits tend to be of one kind), so a Condvar keeps std's size. A
//! barrier's waiter spins only where all parties can run at once.
//!
//! ## State
//!
//! | state | kept | meaning | changed by |
//! |-------|------|---------|------------|
//! | `NOTIFY_HISTORY.credit` | per thread | how well its notify spins have been paying, and its waits without credit since its last probe ([`Credit`]) | each spin; each wait without credit while every runnable thread has a CPU |
//! | `NOTIFY_HISTORY.last_notify` | per thread | what its latest notify found since its last wait's decision: nothing yet, its waiters awake (it woke nobody), or a sleeper it woke | set by each notify (`notified`); reset by its next wait that reaches the decision |
//! | `LATEST_RUNNABLE_LOOK` | per process | whether every runnable thread had a CPU at the latest look, and that look's millisecond (from `FIRST_RUNNABLE_LOOK`) | about once a millisecond, by a wait for a notify that reaches the decision |

use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::credit::Credit;
use super::decisions::{count, Tally};
use super::{machine, spinning_can_pay, SpinWait, MAX_SPIN_NS};
use crate::futex::sys::MODEL_CHECKED;
use crate::futex::Deadline;

/// What a thread's recent waits for a notify taught, and what its latest notify found (the
/// state table at the top of this file).
struct NotifyHistory {
    credit: core::cell::Cell<Credit>,
    last_notify: core::cell::Cell<LastNotify>,
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

/// Whether no thread on the system waits for a CPU, as seen at most a millisecond ago: runnable
/// threads, this one included, at most the CPUs online (the count is the whole system's, so a
/// process confined to some CPUs learns whether the machine has one to spare); false where the
/// count cannot be read. `LATEST_RUNNABLE_LOOK` holds the latest look's millisecond (from 1 at
/// `FIRST_RUNNABLE_LOOK`) and its answer, shared by every thread that asks
/// within it (two that race may both look). A look is three system calls.
fn every_runnable_thread_had_a_cpu_lately() -> bool {
    static LATEST_RUNNABLE_LOOK: AtomicU64 = AtomicU64::new(0);
    static FIRST_RUNNABLE_LOOK: OnceLock<Instant> = OnceLock::new();
    let millisecond = FIRST_RUNNABLE_LOOK
        .get_or_init(Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1;
    // The look's millisecond (from 1, so that 0 is no look) above its answer in bit 0.
    let latest = LATEST_RUNNABLE_LOOK.load(Ordering::Relaxed);
    if latest >> 1 == millisecond {
        return latest & 1 == 1;
    }
    let answer = crate::futex::sys::thread::runnable_threads()
        .is_some_and(|n| n as usize <= machine().online_cpus);
    LATEST_RUNNABLE_LOOK.store(millisecond << 1 | u64::from(answer), Ordering::Relaxed);
    answer
}

std::thread_local! {
    static NOTIFY_HISTORY: NotifyHistory = const {
        NotifyHistory {
            credit: core::cell::Cell::new(Credit::NONE),
            last_notify: core::cell::Cell::new(LastNotify::None),
        }
    };
}

/// The spin of a wait for another thread's notify (a Condvar's wait, a Barrier's), by the rule
/// at the top of this file: spins until `done` holds and returns whether it did, or does not
/// spin at all (calling `done` once).
pub(crate) fn spin_for_notify(deadline: Option<Deadline>, mut done: impl FnMut() -> bool) -> bool {
    if done() {
        return true;
    }
    if !spinning_can_pay() || deadline.is_some_and(|d| d.has_passed()) {
        count(Tally::NotifySkipped);
        return false;
    }
    // None: sleep at once; Some(long): spin one budget of `SPIN_WAIT_NS`, or, if `long`,
    // budget after budget while the probe's conditions hold.
    let spin = NOTIFY_HISTORY.with(|h| {
        let last_notify = h.last_notify.replace(LastNotify::None);
        // A spin holds a CPU: where threads wait for one, it is taken from them (a server's
        // workers, its connections' threads), whatever this thread's spins have earned.
        if !every_runnable_thread_had_a_cpu_lately() {
            return None;
        }
        if h.credit.get().has_credit() || last_notify == LastNotify::FoundAwake {
            return Some(false);
        }
        let (probe, credit) = h.credit.get().probe_due();
        h.credit.set(credit);
        probe.then_some(last_notify == LastNotify::WokeSleeper)
    });
    let Some(long) = spin else {
        count(Tally::NotifySkipped);
        return false;
    };
    let started = Instant::now();
    let won = loop {
        let won = SpinWait::new().spin_until(deadline, &mut done);
        if won
            || !long
            || started.elapsed() >= Duration::from_nanos(MAX_SPIN_NS.into())
            || deadline.is_some_and(|d| d.has_passed())
            || !every_runnable_thread_had_a_cpu_lately()
        {
            break won;
        }
    };
    NOTIFY_HISTORY.with(|h| h.credit.set(h.credit.get().after_spin(won)));
    count(if won {
        Tally::NotifyWon
    } else {
        Tally::NotifyLost
    });
    won
}

/// Tells the policy what a notify of this thread's (a Condvar's notify, a barrier leader's release)
/// did: `woken` sleepers it woke. None: its waiters, if any, are running, so this thread's next
/// wait for a notify spins, credit or not (where every runnable thread has a CPU). Some: the next
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
pub(crate) fn spin_for_arrivals(
    parties: usize,
    deadline: Option<Deadline>,
    done: impl FnMut() -> bool,
) -> bool {
    parties <= machine().usable_cpus && spin_for_notify(deadline, done)
}
