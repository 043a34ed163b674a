//! Absolute deadlines for futex waits.
//!
//! A [`Deadline`] is a point on `CLOCK_MONOTONIC` or `CLOCK_REALTIME`, stored as the kernel's
//! `timespec`. Waits pass it to the kernel as an absolute time (`FUTEX_WAIT_BITSET`, futex2),
//! so retrying after `EINTR` or a spurious wakeup never stretches the total wait.

use std::time::{Duration, Instant, SystemTime};

use super::sys;

const NANOS_PER_SEC: u32 = 1_000_000_000;

/// The clock a [`Deadline`] is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Clock {
    /// `CLOCK_MONOTONIC`, the clock of [`Instant`]: unaffected by changes to the wall clock.
    Monotonic,
    /// `CLOCK_REALTIME`, the clock of [`SystemTime`]: follows changes to the wall clock.
    Realtime,
}

impl Clock {
    pub(crate) fn id(self) -> libc::clockid_t {
        match self {
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::Realtime => libc::CLOCK_REALTIME,
        }
    }
}

/// An absolute point in time on a [`Clock`], after which a wait gives up.
///
/// ```
/// use std::time::Duration;
/// use futexkit::futex::{Deadline, Error, Futex};
///
/// let word = Futex::new(0);
/// // Nobody wakes us: the wait ends at the deadline.
/// let deadline = Deadline::after(Duration::from_millis(5));
/// assert_eq!(word.wait(0, Some(deadline)), Err(Error::TimedOut));
/// assert!(deadline.has_passed());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deadline {
    clock: Clock,
    secs: i64,
    nanos: u32,
}

impl Deadline {
    /// The deadline `timeout` from now on `CLOCK_MONOTONIC` (saturating far in the future).
    pub fn after(timeout: Duration) -> Deadline {
        Deadline::from_timespec(
            Clock::Monotonic,
            sys::thread::clock_now(libc::CLOCK_MONOTONIC),
        )
        .saturating_add(timeout)
    }

    /// The deadline at `instant` ([`Instant`] is `CLOCK_MONOTONIC` on Linux).
    pub fn at(instant: Instant) -> Deadline {
        let now_instant = Instant::now();
        let now = Deadline::from_timespec(
            Clock::Monotonic,
            sys::thread::clock_now(libc::CLOCK_MONOTONIC),
        );
        match instant.checked_duration_since(now_instant) {
            Some(ahead) => now.saturating_add(ahead),
            None => now.saturating_sub(now_instant - instant),
        }
    }

    /// The deadline at wall-clock time `time`, on `CLOCK_REALTIME`.
    pub fn at_system_time(time: SystemTime) -> Deadline {
        let zero = Deadline {
            clock: Clock::Realtime,
            secs: 0,
            nanos: 0,
        };
        match time.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => zero.saturating_add(since),
            Err(_) => zero,
        }
    }

    /// The clock this deadline is measured against.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Whether the deadline is now or in the past.
    pub fn has_passed(&self) -> bool {
        self.remaining().is_zero()
    }

    /// Time left until the deadline, zero once it has passed.
    pub fn remaining(&self) -> Duration {
        let now = Deadline::from_timespec(self.clock, sys::thread::clock_now(self.clock.id()));
        let (secs, nanos) = if self.nanos >= now.nanos {
            (self.secs - now.secs, self.nanos - now.nanos)
        } else {
            (
                self.secs - now.secs - 1,
                self.nanos + NANOS_PER_SEC - now.nanos,
            )
        };
        if secs < 0 {
            Duration::ZERO
        } else {
            Duration::new(secs as u64, nanos)
        }
    }

    /// The same instant expressed on the other clock, using the current offset between the two.
    pub fn on_clock(self, clock: Clock) -> Deadline {
        if clock == self.clock {
            return self;
        }
        let remaining = self.remaining();
        Deadline::from_timespec(clock, sys::thread::clock_now(clock.id())).saturating_add(remaining)
    }

    pub(crate) fn timespec(&self) -> libc::timespec {
        libc::timespec {
            tv_sec: self.secs as libc::time_t,
            tv_nsec: self.nanos as _,
        }
    }

    fn from_timespec(clock: Clock, ts: libc::timespec) -> Deadline {
        Deadline {
            clock,
            // time_t is i32 on some 32-bit targets.
            #[allow(clippy::useless_conversion)]
            secs: i64::from(ts.tv_sec),
            nanos: ts.tv_nsec as u32,
        }
    }

    fn saturating_add(self, d: Duration) -> Deadline {
        let mut nanos = self.nanos + d.subsec_nanos();
        let mut carry = 0;
        if nanos >= NANOS_PER_SEC {
            nanos -= NANOS_PER_SEC;
            carry = 1;
        }
        let secs = i64::try_from(d.as_secs())
            .ok()
            .and_then(|s| self.secs.checked_add(s))
            .and_then(|s| s.checked_add(carry));
        match secs {
            Some(secs) => Deadline {
                secs,
                nanos,
                ..self
            },
            None => Deadline {
                secs: i64::MAX,
                nanos: NANOS_PER_SEC - 1,
                ..self
            },
        }
    }

    fn saturating_sub(self, d: Duration) -> Deadline {
        let (mut secs, mut nanos) = (self.secs, self.nanos);
        if nanos < d.subsec_nanos() {
            nanos += NANOS_PER_SEC;
            secs -= 1;
        }
        nanos -= d.subsec_nanos();
        let secs = i64::try_from(d.as_secs())
            .ok()
            .and_then(|s| secs.checked_sub(s))
            .unwrap_or(0);
        if secs < 0 {
            Deadline {
                secs: 0,
                nanos: 0,
                ..self
            }
        } else {
            Deadline {
                secs,
                nanos,
                ..self
            }
        }
    }
}
