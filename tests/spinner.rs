//! The spin primitives as a user drives them: a [`SpinWait`]'s budget is bounded and stays
//! spent; a [`Spinner`] reports its condition, keeps spinning while its spins win and stops
//! after a run of losses, probing once in 16 waits. Spinning needs a second usable CPU; with one,
//! every spin is a single look.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit::spin::{SpinWait, Spinner};

fn spinning_can_pay() -> bool {
    futexkit::capabilities().usable_cpus() > 1
}

/// A condition that holds from its `n`th check on.
fn holds_from_check(n: usize) -> impl FnMut() -> bool {
    let mut checks = 0;
    move || {
        checks += 1;
        checks >= n
    }
}

#[test]
fn a_spin_wait_is_bounded_and_stays_spent() {
    let mut spin = SpinWait::new();
    let mut looks = 0;
    while spin.spin() {
        looks += 1;
        assert!(looks < 1_000, "the budget never ran out");
    }
    if spinning_can_pay() {
        assert!(looks > 0);
    } else {
        assert_eq!(looks, 0);
    }
    assert!(!spin.spin(), "spent stays spent");
}

#[test]
fn spin_until_reports_the_condition() {
    let s = Spinner::new();
    assert!(s.spin_until(|| true));
    assert!(!s.spin_until(|| false));
    let mut n = 0;
    // Holds on the third check, well within any budget; when spinning cannot pay the condition
    // is checked once.
    let held = s.spin_until(|| {
        n += 1;
        n >= 3
    });
    if spinning_can_pay() {
        assert!(held);
        assert_eq!(n, 3);
    } else {
        assert!(!held);
        assert_eq!(n, 1);
    }
}

#[test]
fn spins_that_win_at_once_keep_the_spinner_spinning() {
    if !spinning_can_pay() {
        return;
    }
    // A partner that always answers by the first look: every spin wins after one run of
    // hints, far quicker than the shortest budget. Winning must not teach it to stop.
    let s = Spinner::new();
    // A wait that did not spin would check its condition once, and fail.
    for wait in 0..1_000 {
        assert!(
            s.spin_until(holds_from_check(2)),
            "wait {wait} did not spin"
        );
    }
}

#[test]
fn spins_that_keep_losing_stop_and_probe_once_in_sixteen_waits() {
    if !spinning_can_pay() {
        return;
    }
    // Losses teach the budget nothing (only sleeps do), so it stays what a new spinner starts
    // with; its credit lets its first two waits spin.
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
    let mut waits = 0;
    while !s.spin_until(holds_from_check(2)) {
        waits += 1;
        assert!(waits < 16, "no probe in 16 waits");
    }
    assert!(s.spin_until(holds_from_check(2)));
}
