//! swap: make a partner runnable and wait, as one operation, the directed hand-off of
//! FUTEX_SWAP and Google's SwitchTo.
//!
//! Two forms:
//!
//! * [`swap`]`(wait_on, expected, wake, deadline)`: wakes one waiter of `wake`, then waits on
//!   `wait_on` while it holds `expected`. In [`SwapMode::Kernel`] that is one `FUTEX_SWAP`
//!   call (only on kernels carrying the never-merged patch, detected by
//!   [`Capability::Swap`]). In [`SwapMode::Emulated`], on every other
//!   kernel, it is a wake, then a bounded adaptive spin ([`crate::spin`]) while the partner is
//!   likely to answer soon, then a futex wait. The wake is always a syscall, because a raw word
//!   does not say whether anyone sleeps on it.
//! * [`Parker`]: a one-token event per side of a hand-off whose state word records whether its
//!   owner is asleep, so [`Parker::swap_to`] makes the wake syscall only when the partner
//!   really sleeps. When both sides are running, a round trip costs a few cache-line
//!   transfers and no syscall at all: this is the fast path for ping-pong and
//!   [`FlipCall`](crate).
//!
//! ## Parker state encoding
//!
//! One 32-bit futex word: `EMPTY` (0), `NOTIFIED` (1: a token is waiting to be consumed),
//! `PARKED` (2: the owner sleeps, or is about to, on this word). Only the owner moves
//! `EMPTY -> PARKED`, `PARKED -> EMPTY` and `NOTIFIED -> EMPTY`; the partner only stores
//! `NOTIFIED` and wakes if it replaced `PARKED`. Any other value means the word was corrupted
//! (for example by a peer process in shared memory) and is reported, never waited on.
//!
//! Beside the word, `token_from_cpu` is a hint, not state: the CPU the last giver of a token
//! (`unpark`, `swap_to`) ran on, written by the giver only when it changes and read by the
//! owner only to decide whether to spin (`spin::partner_may_be_running`: not on the giver's
//! own CPU). No value of it can lose or delay a token beyond a spin skipped or made.
//!
//! ## Co-location
//!
//! Pinning both partners to one CPU makes every hand-off a same-CPU context switch instead of a
//! cross-CPU wake, but it loses to spinning whenever a second CPU is free, and it takes a CPU
//! away from the scheduler for the pair's lifetime. futexkit does not offer it; the `pingpong`
//! example measures it ("futex wake+wait, one CPU", `docs/benchmarks.md`) so the trade-off is
//! visible on each machine.

use std::time::Instant;

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::{Capability, Deadline, Error, Futex, Private, Scope, Shared};
use crate::spin::{Spinner, NO_CPU};

/// How [`swap`] hands control to the partner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwapMode {
    /// `FUTEX_SWAP`: the kernel wakes the partner on this CPU and puts the caller to sleep.
    Kernel,
    /// Wake, bounded adaptive spin, then futex wait: the fastest hand-off mainline allows.
    Emulated,
}

impl SwapMode {
    /// Whether this mode can run on this kernel (Emulated always can).
    pub fn is_available(self) -> bool {
        match self {
            SwapMode::Kernel => crate::futex::capabilities().has(Capability::Swap),
            SwapMode::Emulated => true,
        }
    }

    /// The modes this kernel can run, best first.
    pub fn available() -> Vec<SwapMode> {
        [SwapMode::Kernel, SwapMode::Emulated]
            .into_iter()
            .filter(|m| m.is_available())
            .collect()
    }
}

/// The mode [`swap`] and [`Parker::swap_to`] use: Kernel where probed (and not disabled with
/// `FUTEXKIT_DISABLE=swap`), else Emulated. [`swap_in`] picks one per call.
pub fn mode() -> SwapMode {
    if SwapMode::Kernel.is_available() {
        SwapMode::Kernel
    } else {
        SwapMode::Emulated
    }
}

/// Wakes one waiter of `wake`, then waits on `wait_on` while it holds `expected`, until woken
/// or `deadline`, in the current [`mode`].
///
/// As with [`Futex::wait`], `Ok(())` may be spurious: re-check the condition. Store whatever
/// the partner waits for into its word *before* calling, so it cannot miss the hand-off.
///
/// ```
/// use std::sync::atomic::Ordering;
/// use std::sync::Arc;
/// use futexkit::futex::Futex;
///
/// // Ping-pong on one turn word: 0 = main's turn, 1 = the partner's.
/// let turn = Arc::new(Futex::new(0));
/// let partner = {
///     let turn = Arc::clone(&turn);
///     std::thread::spawn(move || {
///         for _ in 0..100 {
///             while turn.load(Ordering::Acquire) != 1 {
///                 let _ = turn.wait(0, None);
///             }
///             turn.store(0, Ordering::Release);
///             let _ = turn.wake(1);
///         }
///     })
/// };
/// for _ in 0..100 {
///     turn.store(1, Ordering::Release);
///     while turn.load(Ordering::Acquire) == 1 {
///         let _ = futexkit::swap::swap(&turn, 1, &turn, None);
///     }
/// }
/// partner.join().unwrap();
/// ```
///
/// # Errors
///
/// [`Error::ValueChanged`] if `wait_on` did not hold `expected` (the partner was still woken,
/// as the kernel operation does); [`Error::TimedOut`] at the deadline.
pub fn swap<S: Scope>(
    wait_on: &Futex<S>,
    expected: u32,
    wake: &Futex<S>,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    swap_in(mode(), wait_on, expected, wake, deadline)
}

/// [`swap`] in an explicit mode.
///
/// # Errors
///
/// As [`swap`]; [`Error::Unsupported`] for [`SwapMode::Kernel`] where it is absent.
pub fn swap_in<S: Scope>(
    mode: SwapMode,
    wait_on: &Futex<S>,
    expected: u32,
    wake: &Futex<S>,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    match mode {
        SwapMode::Kernel => kernel_swap(wait_on, expected, wake, deadline),
        SwapMode::Emulated => {
            let _ = wake.wake(1);
            if wait_on.load(Ordering::Acquire) != expected {
                return Err(Error::ValueChanged);
            }
            // A raw word has nowhere to keep a spinner: learn per thread.
            crate::spin::with_thread_spinner(|spinner| spinner.wait_on(wait_on, expected, deadline))
        }
    }
}

fn kernel_swap<S: Scope>(
    wait_on: &Futex<S>,
    expected: u32,
    wake: &Futex<S>,
    deadline: Option<Deadline>,
) -> Result<(), Error> {
    if !SwapMode::Kernel.is_available() {
        return Err(Error::Unsupported);
    }
    match crate::futex::swap_syscall(wait_on, expected, wake, deadline) {
        // The wake already happened; finish the wait without waking again.
        Err(Error::Interrupted) => match wait_on.wait(expected, deadline) {
            Err(Error::ValueChanged) => Ok(()),
            other => other,
        },
        other => other,
    }
}

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = 2;

/// One side of a hand-off: a one-token event that knows whether its owner sleeps.
///
/// The owning thread calls [`park`](Parker::park) (or [`swap_to`](Parker::swap_to)); any thread
/// calls [`unpark`](Parker::unpark). Tokens do not accumulate: several unparks before a park
/// release one park. Each parker learns its own spin budget. See the
/// [module documentation](self) for the state encoding.
///
/// ```
/// use std::sync::Arc;
/// use futexkit::swap::Parker;
///
/// let sides = Arc::new([Parker::new(), Parker::new()]);
/// let partner = {
///     let sides = Arc::clone(&sides);
///     std::thread::spawn(move || {
///         for _ in 0..1000 {
///             sides[1].park(None).unwrap();     // wait for the turn...
///             sides[0].unpark();                // ...and hand it back
///         }
///     })
/// };
/// for _ in 0..1000 {
///     sides[0].swap_to(&sides[1], None).unwrap(); // hand over, wait for the reply
/// }
/// partner.join().unwrap();
/// ```
#[derive(Debug)]
pub struct Parker<S: Scope = Private> {
    state: Futex<S>,
    spinner: Spinner,
    /// The CPU the thread that last handed this parker a token ran on then (`NO_CPU` if none
    /// is known): the owner does not spin for a token while it runs on that very CPU
    /// (`spin::partner_may_be_running`). It only decides whether to spin, so any value a peer
    /// process writes is harmless.
    token_from_cpu: AtomicU32,
}

impl Parker<Private> {
    crate::futex::sys::const_fn! {
        /// A parker with no token, for threads of one process.
        pub const fn new() -> Parker<Private> {
            Parker {
                state: Futex::new(EMPTY),
                spinner: Spinner::new(),
                token_from_cpu: AtomicU32::new(NO_CPU),
            }
        }
    }
}

impl Default for Parker<Private> {
    fn default() -> Parker<Private> {
        Parker::new()
    }
}

impl Parker<Shared> {
    crate::futex::sys::const_fn! {
        /// A parker with no token whose word lives in memory shared between processes.
        pub const fn shared() -> Parker<Shared> {
            Parker {
                state: Futex::shared(EMPTY),
                spinner: Spinner::new(),
                token_from_cpu: AtomicU32::new(NO_CPU),
            }
        }
    }
}

impl<S: Scope> Parker<S> {
    /// Hands a token to the owner, waking it if it sleeps. Never blocks.
    #[inline]
    pub fn unpark(&self) {
        crate::spin::record_hand_over_cpu(&self.token_from_cpu);
        if self.state.swap(NOTIFIED, Ordering::Release) == PARKED {
            self.wake_owner();
        }
    }

    /// Waits for a token (consuming it), spinning briefly first, until `deadline`.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] at the deadline; [`Error::InvalidArgument`] if the state word holds a
    /// value no parker writes (corrupted shared memory).
    #[inline]
    pub fn park(&self, deadline: Option<Deadline>) -> Result<(), Error> {
        if self.take_token() {
            return Ok(());
        }
        self.park_slow(deadline, crate::spin::hand_off_cpu())
    }

    /// Hands a token to `partner` and waits for one back: the wake syscall is made only if the
    /// partner sleeps, and with [`SwapMode::Kernel`] the wake and the sleep are one call.
    ///
    /// # Errors
    ///
    /// As [`park`](Parker::park).
    #[inline]
    pub fn swap_to(&self, partner: &Parker<S>, deadline: Option<Deadline>) -> Result<(), Error> {
        let my_cpu = crate::spin::record_hand_over_cpu(&partner.token_from_cpu);
        if partner.state.swap(NOTIFIED, Ordering::Release) == PARKED {
            return self.swap_to_sleeping(partner, deadline, my_cpu);
        }
        self.park_on(deadline, my_cpu)
    }

    /// [`park`](Parker::park) by a thread on `my_cpu` (as `spin::hand_off_cpu` gives it).
    #[inline]
    fn park_on(&self, deadline: Option<Deadline>, my_cpu: u32) -> Result<(), Error> {
        if self.take_token() {
            return Ok(());
        }
        self.park_slow(deadline, my_cpu)
    }

    /// Consumes a waiting token, if there is one; returns whether it did.
    #[inline]
    fn take_token(&self) -> bool {
        self.state
            .compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn swap_to_sleeping(
        &self,
        partner: &Parker<S>,
        deadline: Option<Deadline>,
        my_cpu: u32,
    ) -> Result<(), Error> {
        if mode() == SwapMode::Kernel
            && self
                .state
                .compare_exchange(EMPTY, PARKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            let start = Instant::now();
            let first = kernel_swap(&self.state, PARKED, &partner.state, deadline);
            if !matches!(first, Ok(()) | Err(Error::ValueChanged | Error::TimedOut)) {
                // Refused (a seccomp policy, a fault), perhaps before its wake: wake the
                // partner here, once more at worst, and sleep as a park does.
                partner.wake_owner();
            }
            return self.sleep_parked(start, Some(first), deadline, true);
        }
        partner.wake_owner();
        self.park_on(deadline, my_cpu)
    }

    #[cold]
    fn wake_owner(&self) {
        let _ = Futex::wake_at(self.state.as_ptr(), 1);
    }

    /// The wait for a token of a thread on `my_cpu`: a spin, unless the token's giver last
    /// handed one over from this very CPU (then it waits for the CPU a spin would keep), then a
    /// sleep.
    #[cold]
    fn park_slow(&self, deadline: Option<Deadline>, my_cpu: u32) -> Result<(), Error> {
        let spun = crate::spin::partner_may_be_running(&self.token_from_cpu, my_cpu);
        if spun
            && self
                .spinner
                .spin_until_before(deadline, || self.state.load(Ordering::Relaxed) == NOTIFIED)
        {
            return self.consume();
        }
        let start = Instant::now();
        match self
            .state
            .compare_exchange(EMPTY, PARKED, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => self.sleep_parked(start, None, deadline, spun),
            Err(NOTIFIED) => self.consume(),
            Err(_) => Err(Error::InvalidArgument),
        }
    }

    /// The owner has set PARKED: sleep until a token arrives or the deadline passes. `first` is
    /// the outcome of a sleep already made (the kernel swap). The sleep teaches the spinner
    /// (`teach`) unless the spin before it was skipped because the token's giver was on this
    /// CPU: such a sleep is as long as the giver's wait for this CPU, not how long a spin would
    /// have had to last.
    fn sleep_parked(
        &self,
        start: Instant,
        mut first: Option<Result<(), Error>>,
        deadline: Option<Deadline>,
        teach: bool,
    ) -> Result<(), Error> {
        loop {
            let slept = match first.take() {
                Some(result) => result,
                None => self.state.wait(PARKED, deadline),
            };
            match self.state.load(Ordering::Acquire) {
                NOTIFIED => {
                    if teach {
                        self.spinner.record_sleep(start.elapsed());
                    }
                    return self.consume();
                }
                PARKED => {}
                _ => return Err(Error::InvalidArgument),
            }
            if slept == Err(Error::TimedOut) {
                return match self.state.compare_exchange(
                    PARKED,
                    EMPTY,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        if teach {
                            self.spinner.record_timeout(start.elapsed());
                        }
                        Err(Error::TimedOut)
                    }
                    Err(NOTIFIED) => self.consume(),
                    Err(_) => Err(Error::InvalidArgument),
                };
            }
        }
    }

    fn consume(&self) -> Result<(), Error> {
        match self.state.swap(EMPTY, Ordering::Acquire) {
            NOTIFIED => Ok(()),
            _ => Err(Error::InvalidArgument),
        }
    }
}
