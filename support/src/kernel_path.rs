//! For tests of code that runs only on a kernel with a capability no packaged kernel has
//! (FUTEX_SWAP, FUTEX2_SPIN, the rseq slice extension): [`expected`] says whether the kernel
//! matrix booted a kernel known to have it, and [`ran`] leaves a line the matrix counts, so a
//! kernel path that silently fell back shows as missing. [`hand_offs`] sizes the hand-off tests
//! the matrix runs on emulated CPUs.

use std::io::Write;

/// Whether `FUTEXKIT_TEST_EXPECT_CAPS` (set by `scripts/kernel-matrix.sh` from what the booted
/// kernel is known to have) names `+capability`.
pub fn expected(capability: &str) -> bool {
    std::env::var("FUTEXKIT_TEST_EXPECT_CAPS").is_ok_and(|caps| {
        caps.split([',', ' '])
            .any(|word| word.strip_prefix('+') == Some(capability))
    })
}

/// How many hand-offs a hand-off test runs: `default`, or `FUTEXKIT_TEST_HAND_OFFS`, which the
/// kernel matrix sets lower for its emulated guests (each turn is still a whole hand-off).
pub fn hand_offs(default: u64) -> u64 {
    std::env::var("FUTEXKIT_TEST_HAND_OFFS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Reports that a kernel path ran: one `KM-KERNEL-PATH <path>: <detail>` line on the process's
/// standard error, written past the test harness's output capture so the matrix sees it for
/// passing tests too.
pub fn ran(path: &str, detail: &str) {
    let line = format!("KM-KERNEL-PATH {path}: {detail}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
