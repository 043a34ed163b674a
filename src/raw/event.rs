//! The manual-reset event protocol (set, reset, wait), on one futex word.
//! `futexkit::sync::Event` is this with `Duration` and `Instant` waits.
//!
//! ## State
//!
//! | field        | bits | meaning | set by | cleared by |
//! |--------------|------|---------|--------|------------|
//! | `SET`        | 0    | the event is set: waits return at once | `set` | `reset` |
//! | `WAITERS`    | 1    | a waiter sleeps on the word, or is about to | a waiter, by CAS, before it sleeps | `set` (which then wakes all) |
//! | generation   | 2-31 | how many times the event went from reset to set (wrapping) | `set`, adding 1 | never |
//!
//! Invariant, **no lost wakeup**: a waiter sleeps only on a value with `WAITERS` set and `SET`
//! clear, and a `set` replaces that value by a read-modify-write of the one word: if the
//! waiter's CAS came first, the `set` sees `WAITERS` and wakes every sleeper; if the `set` came
//! first, the waiter's CAS fails and it looks again.
//!
//! **A set releases every thread waiting at that moment**, even if a `reset` follows before a
//! woken waiter runs: a waiter returns once `SET` is on *or* the generation differs from the one
//! it saw when its wait began. (It misses one only if, between the look that
//! sent it to sleep and its next look after the wake, exactly a multiple of 2^30 sets came,
//! with the event reset after the last: a wake clears `WAITERS`, so the sets after the first
//! wake nobody, but they are some 2^31 atomic operations of other threads while this one waits
//! to run.) A `set` is a release and a waiter's look an acquire, so what
//! the setter did before `set` happens before the waits it ends return.
//!
//! ## Transitions
//!
//! * **set**: if `SET` is clear, one CAS to `SET` with the next generation and `WAITERS` clear,
//!   then, if `WAITERS` was set, wake every sleeper by address. A `set` of a set event writes
//!   the word back unchanged, a release like any `set`: a `reset` after it, an acquire, sees
//!   what the setter did before (else the `set` came after the `reset` and sets the event).
//! * **reset**: clear `SET` (one atomic and, an acquire).
//! * **wait**: note the generation; return once `SET` is on or the generation moved; else set
//!   `WAITERS` (CAS) and sleep on the word, giving up at the deadline.

use core::fmt;

use crate::atomic::Ordering;
use crate::futex::{Deadline, Futex, Private, Scope, Shared};

const SET: u32 = 1;
const WAITERS: u32 = 1 << 1;
const GENERATION_ONE: u32 = 1 << 2;
const GENERATION: u32 = !(SET | WAITERS);

/// A manual-reset event: one futex word. Its protocol and state table are at the top of
/// `src/raw/event.rs`.
///
/// ```
/// use futexkit::raw::RawEvent;
///
/// let ready = RawEvent::new(false);
/// std::thread::scope(|s| {
///     s.spawn(|| ready.set());
///     ready.wait(None);
/// });
/// assert!(ready.is_set());
/// ```
pub struct RawEvent<S: Scope = Private> {
    word: Futex<S>,
}

impl<S: Scope> fmt::Debug for RawEvent<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawEvent")
            .field("set", &self.is_set())
            .finish()
    }
}

impl RawEvent {
    crate::futex::sys::const_fn! {
        /// An event, set or not as `set` says.
        #[must_use]
        pub const fn new(set: bool) -> RawEvent {
            RawEvent {
                word: Futex::new(if set { SET } else { 0 }),
            }
        }
    }
}

impl RawEvent<Shared> {
    crate::futex::sys::const_fn! {
        /// An event for memory shared between processes (its futex calls are not private),
        /// set or not as `set` says.
        #[must_use]
        pub const fn shared(set: bool) -> RawEvent<Shared> {
            RawEvent {
                word: Futex::shared(if set { SET } else { 0 }),
            }
        }
    }
}

impl<S: Scope> RawEvent<S> {
    /// Sets the event: every thread waiting now returns, and later waits return at once until
    /// a [`reset`](RawEvent::reset).
    pub fn set(&self) {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            // A set of a set event writes the word unchanged, with release ordering, so that
            // a reset after it (an acquire) sees what this thread wrote before, or else this
            // set comes after the reset and sets the event again.
            let next = if word & SET != 0 {
                word
            } else {
                (word & GENERATION).wrapping_add(GENERATION_ONE) | SET
            };
            match self
                .word
                .compare_exchange_weak(word, next, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) if next == word => return,
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        if word & WAITERS != 0 {
            let _ = Futex::wake_at(self.word.as_ptr(), i32::MAX as u32);
        }
    }

    /// Resets the event: later waits block until the next [`set`](RawEvent::set).
    pub fn reset(&self) {
        // Acquire: a set that came before this reset is seen with what its thread wrote first
        // (see `set`).
        self.word.fetch_and(!SET, Ordering::Acquire);
    }

    /// Blocks until the event is set (or was set since this wait began) or `deadline`
    /// passes; returns whether it was set.
    pub fn wait(&self, deadline: Option<Deadline>) -> bool {
        let began = self.word.load(Ordering::Acquire);
        if began & SET != 0 {
            return true;
        }
        let generation = began & GENERATION;
        super::sleep_until(&self.word, WAITERS, deadline, |word| {
            word & SET != 0 || word & GENERATION != generation
        })
    }

    /// Whether the event is set now.
    pub fn is_set(&self) -> bool {
        self.word.load(Ordering::Acquire) & SET != 0
    }
}
