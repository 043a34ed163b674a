//! Probing: consistent with this kernel, stable across runs, and overridable.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::blocked;

use std::sync::atomic::Ordering;

use futexkit::futex::futex2::{FUTEX2_SPIN, FUTEX2_SPIN_BESIDE_MPOL};
use futexkit::futex::{Capabilities, Futex, Private};
use futexkit::Capability;

#[test]
fn results_are_consistent_with_the_kernel_version() {
    let caps = futexkit::capabilities();
    let version = blocked::kernel_version();
    assert!(caps.usable_cpus() >= 1);
    let detected = |c| caps.detection(c).detected();
    // op 13 is either LOCK_PI2 or SWAP, never both.
    assert!(!(detected(Capability::LockPi2) && detected(Capability::Swap)));
    // 0x08 is either MPOL (with NUMA) or SPIN (without), never both; beside MPOL, SPIN is 0x10.
    match caps.spin_flag() {
        Some(FUTEX2_SPIN) => assert!(!detected(Capability::Mpol) && !detected(Capability::Numa)),
        Some(FUTEX2_SPIN_BESIDE_MPOL) => assert!(detected(Capability::Mpol)),
        Some(other) => panic!("SPIN at flag {other:#x}"),
        None => assert!(!detected(Capability::Spin)),
    }
    assert_eq!(caps.spin_flag().is_some(), detected(Capability::Spin));
    if detected(Capability::Mpol) || detected(Capability::Spin) || detected(Capability::Numa) {
        assert!(detected(Capability::Futex2));
    }
    if version >= (5, 16) {
        assert!(detected(Capability::Waitv), "futex_waitv exists since 5.16");
    }
    if version >= (6, 7) {
        assert!(
            detected(Capability::Futex2),
            "futex2 wait/wake exist since 6.7"
        );
    }
    if version >= (5, 14) && detected(Capability::Pi) {
        // Op 13 is LOCK_PI2 on mainline since 5.14, FUTEX_SWAP on futexkit's test kernel.
        assert!(
            detected(Capability::LockPi2) != detected(Capability::Swap),
            "op 13 is one of LOCK_PI2 and FUTEX_SWAP since 5.14"
        );
    }
    if version >= (6, 16) {
        assert!(detected(Capability::Numa) && detected(Capability::Mpol));
    }
    // SPIN is opt-in: without FUTEXKIT_ENABLE=spin it is never used.
    if std::env::var("FUTEXKIT_ENABLE").is_err() {
        assert!(!caps.has(Capability::Spin));
    }
}

#[test]
fn probing_twice_gives_the_same_answer_and_holds_no_lock() {
    let first = Capabilities::detect();
    let second = Capabilities::detect();
    assert_eq!(first, second);
    assert_eq!(&first, futexkit::capabilities());
    if first.has(Capability::Pi) {
        // The op 13 and PI probes never leave this thread owning a PI lock: a fresh word locks
        // and unlocks, and nothing else is held (another thread can take and drop one too).
        let word = Futex::<Private>::new(0);
        word.lock_pi(None).unwrap();
        word.unlock_pi().unwrap();
        assert_eq!(word.load(Ordering::Relaxed), 0);
    }
}

/// `scripts/kernel-matrix.sh` boots Debian kernels whose features are known from their
/// version and names them in `FUTEXKIT_TEST_EXPECT_CAPS` (`+futex2 -swap ...`, the words of
/// `Capabilities`' Display): probing must find exactly that, absent features included. Unset
/// (a plain `cargo test`), there is nothing to compare with.
#[test]
fn detects_what_the_matrix_kernel_has() {
    let Ok(expect) = std::env::var("FUTEXKIT_TEST_EXPECT_CAPS") else {
        return;
    };
    let caps = futexkit::capabilities();
    for word in expect.split([',', ' ']).filter(|w| !w.is_empty()) {
        let (want, name) = match word.split_at(1) {
            ("+", name) => (true, name),
            ("-", name) => (false, name),
            _ => panic!("{word:?} in FUTEXKIT_TEST_EXPECT_CAPS is neither +name nor -name"),
        };
        let cap = Capability::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .unwrap_or_else(|| panic!("unknown capability {name:?}"));
        let detection = caps.detection(cap);
        assert_eq!(
            detection.detected(),
            want,
            "{name} on kernel {}: {}",
            caps.kernel_release(),
            detection.evidence()
        );
    }
}

/// Runs this test binary again with `FUTEXKIT_DISABLE` set and checks the child saw it.
#[test]
fn environment_override_is_honoured() {
    if let Ok(expect) = std::env::var("FUTEXKIT_TEST_EXPECT_DISABLED") {
        let caps = futexkit::capabilities();
        for name in expect.split(',') {
            let cap = Capability::ALL
                .into_iter()
                .find(|c| c.name() == name)
                .unwrap();
            assert!(!caps.has(cap), "{name} should be disabled");
            assert!(caps.detection(cap).disabled());
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args([
            "--exact",
            "environment_override_is_honoured",
            "--test-threads=1",
        ])
        .env("FUTEXKIT_DISABLE", "pi,waitv")
        .env(
            "FUTEXKIT_TEST_EXPECT_DISABLED",
            "pi,waitv,lock_pi2,requeue_pi",
        )
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn display_lists_every_capability() {
    let line = futexkit::capabilities().to_string();
    for cap in Capability::ALL {
        assert!(line.contains(cap.name()), "{line}");
    }
}
