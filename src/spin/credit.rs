//! Whether a waiter's spins have been paying: the one rule that stops a waiter from spinning
//! where its spins keep losing, shared by the notify waiter (`notify.rs`) and the hand-off
//! waiter (`hand_off.rs`). A won spin earns `WIN_CREDIT`, a lost one costs 1, up to `MAX_CREDIT`:
//! spinning goes on while at least one spin in three wins (a win saves a sleep and a wake, which
//! cost more than a lost spin wastes). A waiter without credit sleeps at once, and spins once in
//! `PROBE_EVERY` waits to find out whether spinning pays again.
//!
//! | bits of the byte | meaning | changed by |
//! |------------------|---------|------------|
//! | 0-3 | credit, 0 to `MAX_CREDIT` (0: sleep at once) | +`WIN_CREDIT` per won spin, -1 per lost one |
//! | 4-7 | waits without credit since the last probe, 0 to `PROBE_EVERY` - 1 | each wait without credit; 0 again at a probe |
//!
//! The byte is a hint, never protocol state: any value (a peer process may write one where the
//! waiter lives in shared memory) only decides whether a wait spins.

/// The most credit a run of winning spins builds up: that many losing spins in a row stop it.
const MAX_CREDIT: u8 = 8;
/// A spin that won earns this much credit, one that lost costs 1.
const WIN_CREDIT: u8 = 2;
/// A waiter whose spins stopped paying still spins once in this many waits.
const PROBE_EVERY: u8 = 16;

/// The credit bits of the byte.
const CREDIT: u8 = 0x0f;
/// Where the count of waits without credit starts.
const SKIPPED_SHIFT: u32 = 4;
const _: () = assert!(MAX_CREDIT <= CREDIT && PROBE_EVERY == 1 << SKIPPED_SHIFT);

/// A waiter's credit and its count of waits without credit, in one byte (the state table at the
/// top of `src/spin/credit.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Credit(u8);

impl Credit {
    /// A waiter that has not spun yet: no credit, so its first wait without other reason to spin
    /// counts towards a probe.
    pub(crate) const NONE: Credit = Credit(0);
    /// A waiter that spins from its first wait, until `WIN_CREDIT` losses in a row say otherwise.
    pub(crate) const FIRST_SPINS: Credit = Credit(WIN_CREDIT);

    /// The credit a byte holds; any byte is a valid one.
    pub(crate) fn from_byte(byte: u8) -> Credit {
        Credit(byte)
    }

    /// The byte to keep.
    pub(crate) const fn to_byte(self) -> u8 {
        self.0
    }

    /// Whether the waiter's spins have been paying.
    pub(crate) fn has_credit(self) -> bool {
        self.0 & CREDIT != 0
    }

    /// Counts a wait without credit; returns whether it is the one in `PROBE_EVERY` that spins
    /// all the same, and the credit to keep.
    pub(crate) fn probe_due(self) -> (bool, Credit) {
        let skipped = ((self.0 >> SKIPPED_SHIFT) + 1) % PROBE_EVERY;
        (
            skipped == 0,
            Credit(skipped << SKIPPED_SHIFT | self.0 & CREDIT),
        )
    }

    /// Whether a wait spins: with credit, or as the probe of one wait in `PROBE_EVERY`
    /// without; and the credit to keep.
    pub(crate) fn spins(self) -> (bool, Credit) {
        if self.has_credit() {
            (true, self)
        } else {
            self.probe_due()
        }
    }

    /// The credit after a spin that `won` or lost.
    pub(crate) fn after_spin(self, won: bool) -> Credit {
        let credit = self.0 & CREDIT;
        let credit = if won {
            (credit + WIN_CREDIT).min(MAX_CREDIT)
        } else {
            credit.saturating_sub(1)
        };
        Credit(self.0 & !CREDIT | credit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_in_a_row_stop_the_spin_and_a_probe_comes_once_in_sixteen_waits() {
        let mut credit = Credit::NONE;
        for _ in 0..10 {
            credit = credit.after_spin(true);
        }
        assert!(credit.has_credit());
        for _ in 0..MAX_CREDIT {
            assert!(credit.has_credit());
            credit = credit.after_spin(false);
        }
        assert!(!credit.has_credit(), "{MAX_CREDIT} losses in a row stop it");
        let mut probes = 0;
        for _ in 0..PROBE_EVERY * 4 {
            let (probe, next) = credit.probe_due();
            credit = next;
            probes += usize::from(probe);
            assert!(!credit.has_credit());
        }
        assert_eq!(probes, 4);
    }

    #[test]
    fn one_win_in_three_keeps_it_spinning() {
        let mut credit = Credit::FIRST_SPINS;
        for _ in 0..100 {
            credit = credit.after_spin(true).after_spin(false);
            assert!(credit.has_credit());
            credit = credit.after_spin(false);
        }
        assert!(credit.has_credit());
        // One in four is too few.
        for _ in 0..100 {
            credit = credit
                .after_spin(true)
                .after_spin(false)
                .after_spin(false)
                .after_spin(false);
        }
        assert!(!credit.has_credit());
    }

    #[test]
    fn any_byte_is_a_credit_that_stays_in_range() {
        for byte in 0..=u8::MAX {
            let credit = Credit::from_byte(byte);
            let won = credit.after_spin(true);
            assert!(won.has_credit() && won.to_byte() & CREDIT <= MAX_CREDIT);
            let _ = credit.after_spin(false).probe_due();
        }
    }
}
