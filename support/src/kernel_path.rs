//! For tests of code that runs only on a kernel with a capability no packaged kernel has
//! (FUTEX_SWAP, FUTEX2_SPIN, the rseq slice extension): [`expected`] says whether the kernel
//! matrix booted a kernel known to have it, and [`ran`] leaves a line the matrix counts, so a
//! kernel path that silently fell back shows as missing.

use std::io::Write;

/// Whether `FUTEXKIT_TEST_EXPECT_CAPS` (set by `scripts/kernel-matrix.sh` from what the booted
/// kernel is known to have) names `+capability`.
pub fn expected(capability: &str) -> bool {
    std::env::var("FUTEXKIT_TEST_EXPECT_CAPS").is_ok_and(|caps| {
        caps.split([',', ' '])
            .any(|word| word.strip_prefix('+') == Some(capability))
    })
}

/// Reports that a kernel path ran: one `KM-KERNEL-PATH <path>: <detail>` line on the process's
/// standard error, written past the test harness's output capture so the matrix sees it for
/// passing tests too.
pub fn ran(path: &str, detail: &str) {
    let line = format!("KM-KERNEL-PATH {path}: {detail}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
