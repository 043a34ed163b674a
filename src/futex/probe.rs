//! Runtime probing: what the running kernel offers, detected once and cached.
//!
//! Each probe is one function that makes one harmless call and reads the errno, by the rules in
//! `docs/kernel.md`. Two op values are overloaded between mainline and never-merged patches, so
//! their probes are built never to take a lock or block:
//!
//! * op 13 is `FUTEX_LOCK_PI2` on mainline (5.14+) and `FUTEX_SWAP` on the SWAP patches: it is
//!   called on a word that already holds our own TID, so LOCK_PI2 answers `EDEADLK` and SWAP
//!   (nothing to wake, value mismatch) answers `EAGAIN`;
//! * futex2 flag `0x08` is `FUTEX2_MPOL` on 6.16+ and `FUTEX2_SPIN` on the SPIN patches: it is
//!   told apart by whether `FUTEX2_NUMA` (also 6.16+) exists. A kernel with both MPOL and SPIN
//!   (futexkit's test kernel) puts SPIN at `0x10`, which mainline rejects with EINVAL.
//!
//! `FUTEXKIT_DISABLE=swap,spin,...` (or `all`) forces capabilities off so every fallback can be
//! tested on any kernel. `FUTEXKIT_ENABLE=spin` opts in to FUTEX2_SPIN, which has no stable ABI.

use std::fmt;
use std::sync::OnceLock;

/// A kernel feature futexkit can use when present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// futex2 `futex_wait` / `futex_wake` / `futex_requeue` (6.7+).
    Futex2,
    /// `futex_waitv` (5.16+).
    Waitv,
    /// `FUTEX2_NUMA` (6.16+).
    Numa,
    /// `FUTEX2_MPOL` (6.16+).
    Mpol,
    /// Priority-inheritance futexes (`CONFIG_FUTEX_PI`).
    Pi,
    /// `FUTEX_LOCK_PI2` (5.14+).
    LockPi2,
    /// `FUTEX_WAIT_REQUEUE_PI` / `FUTEX_CMP_REQUEUE_PI`.
    RequeuePi,
    /// `FUTEX_SWAP` (never merged): wake a partner and wait, handing it this CPU.
    Swap,
    /// `FUTEX2_SPIN` (never merged; opt-in with `FUTEXKIT_ENABLE=spin`).
    Spin,
    /// rseq time-slice extension (7.0+).
    RseqSlice,
}

impl Capability {
    /// Every capability, in the order [`Capabilities`] reports them. Only a capability listed here
    /// is probed and reported.
    pub const ALL: [Capability; 10] = [
        Capability::Futex2,
        Capability::Waitv,
        Capability::Numa,
        Capability::Mpol,
        Capability::Pi,
        Capability::LockPi2,
        Capability::RequeuePi,
        Capability::Swap,
        Capability::Spin,
        Capability::RseqSlice,
    ];

    /// The name used in `FUTEXKIT_DISABLE` and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::Futex2 => "futex2",
            Capability::Waitv => "waitv",
            Capability::Numa => "numa",
            Capability::Mpol => "mpol",
            Capability::Pi => "pi",
            Capability::LockPi2 => "lock_pi2",
            Capability::RequeuePi => "requeue_pi",
            Capability::Swap => "swap",
            Capability::Spin => "spin",
            Capability::RseqSlice => "rseq_slice",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one capability was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    detected: bool,
    disabled: bool,
    evidence: String,
}

impl Detection {
    /// What the kernel answered says the feature is there.
    pub fn detected(&self) -> bool {
        self.detected
    }

    /// `FUTEXKIT_DISABLE` named it (or, for spin, `FUTEXKIT_ENABLE` did not).
    pub fn disabled(&self) -> bool {
        self.disabled
    }

    /// The call made and what it answered.
    pub fn evidence(&self) -> &str {
        &self.evidence
    }

    /// Detected and not disabled: futexkit will use it.
    pub fn available(&self) -> bool {
        self.detected && !self.disabled
    }
}

/// What the running kernel offers, as probed (see [`capabilities`](crate::capabilities)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    kernel_release: String,
    usable_cpus: usize,
    /// Each capability of [`Capability::ALL`], in that order, with the detection its own probe
    /// made; looked up by the capability.
    detections: Vec<(Capability, Detection)>,
    spin_flag: Option<u32>,
    ignored_names: Vec<String>,
}

/// Which capabilities the user forced off or opted in to, and the names that meant nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    disabled: Vec<Capability>,
    enabled: Vec<Capability>,
    ignored_names: Vec<String>,
}

impl Overrides {
    /// Parses `FUTEXKIT_DISABLE` and `FUTEXKIT_ENABLE` style lists: names separated by commas
    /// or spaces, `all` for every capability. Unknown names are ignored, and kept to be
    /// reported ([`Capabilities::ignored_names`]).
    pub(crate) fn parse(disable: &str, enable: &str) -> Overrides {
        let mut ignored_names = unknown_names(disable);
        ignored_names.extend(unknown_names(enable));
        Overrides {
            disabled: parse_list(disable),
            enabled: parse_list(enable),
            ignored_names,
        }
    }

    /// The overrides in this process's environment.
    fn from_env() -> Overrides {
        let disable = std::env::var("FUTEXKIT_DISABLE").unwrap_or_default();
        let enable = std::env::var("FUTEXKIT_ENABLE").unwrap_or_default();
        Overrides::parse(&disable, &enable)
    }

    fn disables(&self, cap: Capability) -> bool {
        let base_disabled = match cap {
            // These are flags or ops of a base capability: without it they cannot be used.
            Capability::Numa | Capability::Mpol | Capability::Spin => {
                self.disabled.contains(&Capability::Futex2)
            }
            Capability::LockPi2 | Capability::RequeuePi => self.disabled.contains(&Capability::Pi),
            _ => false,
        };
        let opt_in_missing = cap == Capability::Spin && !self.enabled.contains(&cap);
        base_disabled || opt_in_missing || self.disabled.contains(&cap)
    }
}

/// Names in `list` that are neither a capability nor `all`.
fn unknown_names(list: &str) -> Vec<String> {
    split_list(list)
        .filter(|name| *name != "all" && !Capability::ALL.iter().any(|c| c.name() == *name))
        .map(str::to_owned)
        .collect()
}

fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn parse_list(list: &str) -> Vec<Capability> {
    let mut caps = Vec::new();
    for name in split_list(list) {
        if name == "all" {
            return Capability::ALL.to_vec();
        }
        if let Some(&cap) = Capability::ALL.iter().find(|c| c.name() == name) {
            caps.push(cap);
        }
    }
    caps
}

/// What the running kernel offers, probed once (at the first call) and cached. Re-exported as
/// [`futexkit::capabilities`](crate::capabilities).
///
/// ```
/// use futexkit::Capability;
///
/// let caps = futexkit::capabilities();
/// if !caps.has(Capability::Swap) {
///     // Every mainline kernel: swap() runs its emulation.
/// }
/// println!("{caps}");
/// ```
pub fn capabilities() -> &'static Capabilities {
    static CAPABILITIES: OnceLock<Capabilities> = OnceLock::new();
    CAPABILITIES.get_or_init(Capabilities::detect)
}

impl Capabilities {
    /// Runs every probe now, with the overrides from the environment.
    pub fn detect() -> Capabilities {
        Capabilities::detect_with(&Overrides::from_env())
    }

    /// Runs every probe now, with the given overrides.
    pub(crate) fn detect_with(overrides: &Overrides) -> Capabilities {
        let (mut detections, spin_flag) = probes::run_all();
        for (cap, detection) in &mut detections {
            detection.disabled = overrides.disables(*cap);
        }
        Capabilities {
            kernel_release: probes::kernel_release(),
            usable_cpus: probes::usable_cpus(),
            detections,
            spin_flag,
            ignored_names: overrides.ignored_names.clone(),
        }
    }

    /// Names in `FUTEXKIT_DISABLE` or `FUTEXKIT_ENABLE` that are no capability (nor `all`), and
    /// so were ignored: a typo there would otherwise go unnoticed.
    pub fn ignored_names(&self) -> &[String] {
        &self.ignored_names
    }

    /// Whether futexkit will use `cap`: detected, and not disabled.
    pub fn has(&self, cap: Capability) -> bool {
        self.detection(cap).available()
    }

    /// How `cap` was decided.
    pub fn detection(&self, cap: Capability) -> &Detection {
        // Every capability of `Capability::ALL` has its entry; one left out of that list was
        // never probed, and reads as absent rather than as another capability's answer.
        static NOT_PROBED: Detection = Detection {
            detected: false,
            disabled: false,
            evidence: String::new(),
        };
        self.detections
            .iter()
            .find(|(c, _)| *c == cap)
            .map_or(&NOT_PROBED, |(_, detection)| detection)
    }

    /// The futex2 flag that means `FUTEX2_SPIN` on this kernel, where it was detected:
    /// [`FUTEX2_SPIN`](super::futex2::FUTEX2_SPIN) (`0x08`, the RFC's value, on a kernel without
    /// `FUTEX2_MPOL`) or [`FUTEX2_SPIN_BESIDE_MPOL`](super::futex2::FUTEX2_SPIN_BESIDE_MPOL)
    /// (`0x10`). `None` where there is no SPIN, opted in or not.
    pub fn spin_flag(&self) -> Option<u32> {
        self.spin_flag
    }

    /// The CPUs this process may run on (its affinity mask) when probed.
    pub fn usable_cpus(&self) -> usize {
        self.usable_cpus
    }

    /// The kernel release (`uname -r`).
    pub fn kernel_release(&self) -> &str {
        &self.kernel_release
    }
}

impl fmt::Display for Capabilities {
    /// One line: kernel, CPUs, and each capability as `+name` (used), `-name` (absent) or
    /// `!name` (detected but disabled).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel {} cpus {}",
            self.kernel_release, self.usable_cpus
        )?;
        for cap in Capability::ALL {
            let d = self.detection(cap);
            let sign = match (d.detected, d.disabled) {
                (true, false) => '+',
                (true, true) => '!',
                (false, _) => '-',
            };
            write!(f, " {sign}{cap}")?;
        }
        Ok(())
    }
}

mod probes {
    use core::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::{Capability, Detection};
    use crate::futex::futex2::{
        FUTEX2_MPOL, FUTEX2_NUMA, FUTEX2_PRIVATE, FUTEX2_SIZE_U32, FUTEX2_SPIN,
        FUTEX2_SPIN_BESIDE_MPOL,
    };
    use crate::futex::{op, sys};

    pub(super) use sys::thread::{kernel_release, usable_cpus};

    fn errno_name(result: Result<usize, i32>) -> String {
        match result {
            Ok(n) => format!("returned {n}"),
            Err(libc::EAGAIN) => "EAGAIN".into(),
            Err(libc::EINVAL) => "EINVAL".into(),
            Err(libc::ENOSYS) => "ENOSYS".into(),
            Err(libc::EDEADLK) => "EDEADLK".into(),
            Err(libc::EPERM) => "EPERM".into(),
            Err(libc::ESRCH) => "ESRCH".into(),
            Err(e) => format!("errno {e}"),
        }
    }

    fn detection(detected: bool, evidence: String) -> Detection {
        Detection {
            detected,
            disabled: false,
            evidence,
        }
    }

    /// The answers that more than one capability is decided from, each asked once.
    struct Shared {
        /// `futex_wait` with `FUTEX2_NUMA` (see `numa_flag`).
        numa: Result<usize, i32>,
        /// `futex_wait` with flag `0x08`: `FUTEX2_MPOL` or `FUTEX2_SPIN`.
        flag_08: Result<usize, i32>,
        /// `futex_wait` with flag `0x10`: `FUTEX2_SPIN` beside `FUTEX2_MPOL`.
        flag_10: Result<usize, i32>,
        /// Op 13: `FUTEX_LOCK_PI2` or `FUTEX_SWAP` (see `op13`).
        op13: Result<usize, i32>,
        /// The flag that means `FUTEX2_SPIN` on this kernel, if any.
        spin_flag: Option<u32>,
    }

    impl Shared {
        fn ask() -> Shared {
            let numa = numa_flag();
            let flag_08 = futex2_flag_on_mismatch(FUTEX2_MPOL);
            let flag_10 = futex2_flag_on_mismatch(FUTEX2_SPIN_BESIDE_MPOL);
            // docs/kernel.md: 0x08 is SPIN only if it is accepted and NUMA is rejected; 0x10,
            // which mainline rejects, is SPIN wherever it is accepted.
            let spin_flag = if flag_08 == Err(libc::EAGAIN) && numa == Err(libc::EINVAL) {
                Some(FUTEX2_SPIN)
            } else if flag_10 == Err(libc::EAGAIN) {
                Some(FUTEX2_SPIN_BESIDE_MPOL)
            } else {
                None
            };
            Shared {
                numa,
                flag_08,
                flag_10,
                op13: op13(),
                spin_flag,
            }
        }

        fn numa_present(&self) -> bool {
            self.numa == Err(libc::EAGAIN)
        }
    }

    /// Each capability of `Capability::ALL`, in that order, with its detection, and the flag
    /// SPIN has (if any).
    pub(super) fn run_all() -> (Vec<(Capability, Detection)>, Option<u32>) {
        let shared = Shared::ask();
        let detections = Capability::ALL
            .iter()
            .map(|&cap| (cap, probe(cap, &shared)))
            .collect();
        (detections, shared.spin_flag)
    }

    /// Decides `cap`: by its own call, or from the shared answers it depends on.
    fn probe(cap: Capability, shared: &Shared) -> Detection {
        match cap {
            Capability::Futex2 => futex2(),
            Capability::Waitv => waitv(),
            Capability::Numa => detection(
                shared.numa_present(),
                format!(
                    "futex_wait(U32|PRIVATE|NUMA) on {{1, -1}}: {}",
                    errno_name(shared.numa)
                ),
            ),
            // docs/kernel.md: 0x08 is MPOL where NUMA exists too (6.16+).
            Capability::Mpol => detection(
                shared.flag_08 == Err(libc::EAGAIN) && shared.numa_present(),
                format!(
                    "futex_wait(U32|PRIVATE|0x08): {}; with NUMA {}",
                    errno_name(shared.flag_08),
                    if shared.numa_present() {
                        "present: 0x08 is MPOL"
                    } else {
                        "absent: 0x08 is not MPOL"
                    }
                ),
            ),
            Capability::Pi => pi(),
            Capability::LockPi2 => detection(
                shared.op13 == Err(libc::EDEADLK),
                format!(
                    "op 13 on own-TID word: {} (EDEADLK means LOCK_PI2)",
                    errno_name(shared.op13)
                ),
            ),
            Capability::RequeuePi => requeue_pi(),
            Capability::Swap => swap(shared.op13),
            Capability::Spin => detection(
                shared.spin_flag.is_some(),
                format!(
                    "futex_wait(0x08): {}, NUMA: {} (SPIN at 0x08 needs EAGAIN and EINVAL); \
                     futex_wait(0x10): {} (SPIN at 0x10 needs EAGAIN)",
                    errno_name(shared.flag_08),
                    errno_name(shared.numa),
                    errno_name(shared.flag_10)
                ),
            ),
            Capability::RseqSlice => rseq_slice(),
        }
    }

    /// docs/kernel.md: `futex_wake` with nr 0 wakes nobody; ENOSYS before 6.7.
    fn futex2() -> Detection {
        let word = AtomicU32::new(0);
        let r = sys::futex2_wake(
            word.as_ptr().cast(),
            0xffff_ffff,
            0,
            FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
        );
        detection(r.is_ok(), format!("futex_wake(nr 0): {}", errno_name(r)))
    }

    /// docs/kernel.md: `futex_waitv` on one word whose value mismatches returns EAGAIN at once;
    /// ENOSYS before 5.16.
    fn waitv() -> Detection {
        let word = AtomicU32::new(0);
        let entry = [sys::FutexWaitv {
            val: 1,
            uaddr: word.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
            reserved: 0,
        }];
        // SAFETY: the entry names `word`, live for the call; no timeout.
        let r = unsafe { sys::futex_waitv(&entry, core::ptr::null(), libc::CLOCK_MONOTONIC) };
        detection(
            r == Err(libc::EAGAIN),
            format!("futex_waitv on a mismatched word: {}", errno_name(r)),
        )
    }

    /// docs/kernel.md: `futex_wait` on an 8-byte-aligned `{1, 0xffff_ffff}` pair with
    /// `U32|PRIVATE|NUMA` and value 0: 6.16+ EAGAIN (mismatch), earlier EINVAL or ENOSYS.
    fn numa_flag() -> Result<usize, i32> {
        #[repr(C, align(8))]
        struct Pair([AtomicU32; 2]);
        let pair = Pair([AtomicU32::new(1), AtomicU32::new(u32::MAX)]);
        // SAFETY: `pair` is live and 8-byte aligned for the call; value 0 mismatches, so the
        // kernel returns at once; no timeout.
        unsafe {
            sys::futex2_wait(
                pair.0.as_ptr().cast(),
                0,
                0xffff_ffff,
                FUTEX2_SIZE_U32 | FUTEX2_PRIVATE | FUTEX2_NUMA,
                core::ptr::null(),
                libc::CLOCK_MONOTONIC,
            )
        }
    }

    /// docs/kernel.md: `futex_wait(&W=1, val 0, mask 0xffff_ffff, U32|PRIVATE|flag)`. For 0x08:
    /// <6.7 ENOSYS, 6.7-6.15 EINVAL, 6.16+ EAGAIN (MPOL), SPIN kernel EAGAIN; for 0x10: EINVAL
    /// (or ENOSYS) on mainline, EAGAIN where SPIN lives there. The word holds 1, not an owner
    /// TID that could be missing, so the SPIN RFC's bucket-lock leak cannot trigger.
    fn futex2_flag_on_mismatch(flag: u32) -> Result<usize, i32> {
        let word = AtomicU32::new(1);
        // SAFETY: `word` is live and aligned; value 0 mismatches, so no blocking.
        unsafe {
            sys::futex2_wait(
                word.as_ptr().cast(),
                0,
                0xffff_ffff,
                FUTEX2_SIZE_U32 | FUTEX2_PRIVATE | flag,
                core::ptr::null(),
                libc::CLOCK_MONOTONIC,
            )
        }
    }

    /// `FUTEX_TRYLOCK_PI` on a word that already holds our TID: EDEADLK where PI futexes exist
    /// (the kernel sees we own it; nothing is taken), ENOSYS without `CONFIG_FUTEX_PI`.
    fn pi() -> Detection {
        // The model checkers' futex emulates the PI calls for the model threads only; a probe
        // runs outside any model, so there it finds what every other probe finds: nothing.
        if sys::MODEL_CHECKED {
            return detection(
                false,
                "TRYLOCK_PI not called under a model checker".to_owned(),
            );
        }
        let word = AtomicU32::new(sys::thread::gettid());
        // SAFETY: `word` is live and aligned; we "own" it, so no lock changes hands.
        let r = unsafe {
            sys::futex(
                word.as_ptr(),
                op::TRYLOCK_PI | op::PRIVATE_FLAG,
                0,
                0,
                core::ptr::null(),
                0,
            )
        };
        detection(
            r == Err(libc::EDEADLK),
            format!("TRYLOCK_PI on own-TID word: {}", errno_name(r)),
        )
    }

    /// docs/kernel.md's safe op 13 probe: `W = gettid()`, `D = 0`,
    /// `futex(&W, 13|PRIVATE, tid ^ 1, NULL, &D, 0)`. Mainline 5.14+: EDEADLK (we own W);
    /// FUTEX_SWAP kernel: EAGAIN (nothing to wake, value mismatch); older: ENOSYS. Never with
    /// W == 0 (would take the lock) or a foreign TID (would block).
    fn op13() -> Result<usize, i32> {
        let tid = sys::thread::gettid();
        let word = AtomicU32::new(tid);
        let dummy = AtomicU32::new(0);
        // SAFETY: both words are live and aligned for the call. W holds our own TID, so
        // LOCK_PI2 returns EDEADLK without taking anything, and SWAP's wait mismatches.
        let r = unsafe {
            sys::futex(
                word.as_ptr(),
                op::OP_13 | op::PRIVATE_FLAG,
                tid ^ 1,
                0,
                dummy.as_ptr(),
                0,
            )
        };
        debug_assert_eq!(
            word.load(Ordering::Relaxed),
            tid,
            "op 13 probe changed its word"
        );
        r
    }

    /// FUTEX_SWAP: op 13 answered EAGAIN, confirmed by a two-thread check (docs/kernel.md: "After
    /// EAGAIN, confirm with a two-thread functional check before trusting it").
    fn swap(op13: Result<usize, i32>) -> Detection {
        if op13 != Err(libc::EAGAIN) {
            return detection(
                false,
                format!(
                    "op 13 on own-TID word: {} (SWAP needs EAGAIN)",
                    errno_name(op13)
                ),
            );
        }
        let confirmed = swap_functional_check();
        detection(
            confirmed,
            format!(
                "op 13: EAGAIN; two-thread swap check {}",
                if confirmed {
                    "woke the partner"
                } else {
                    "failed"
                }
            ),
        )
    }

    /// A partner waits on `partner_word` (with a timeout); we FUTEX_SWAP to it, waiting on
    /// `own_word` with a relative timeout. The partner must be woken by the swap (its wait
    /// returns 0 with its word unchanged) and then wake us. Every wait is bounded, so a kernel
    /// that does something else cannot hang the probe.
    fn swap_functional_check() -> bool {
        static PARTNER: AtomicU32 = AtomicU32::new(0);
        static OWN: AtomicU32 = AtomicU32::new(0);
        let limit = libc::timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        PARTNER.store(0, Ordering::SeqCst);
        OWN.store(0, Ordering::SeqCst);
        let partner = std::thread::spawn(move || {
            // SAFETY: PARTNER is a live static; `limit` outlives the call (relative timeout).
            let woken = unsafe {
                sys::futex(
                    PARTNER.as_ptr(),
                    op::WAIT | op::PRIVATE_FLAG,
                    0,
                    &limit as *const libc::timespec as usize,
                    core::ptr::null(),
                    0,
                )
            };
            OWN.store(1, Ordering::SeqCst);
            let _ = sys::futex_wake(OWN.as_ptr(), op::WAKE | op::PRIVATE_FLAG, 1, 0);
            woken.is_ok()
        });
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: both statics are live and aligned; the SWAP timeout is relative and bounded.
        let swapped = unsafe {
            sys::futex(
                OWN.as_ptr(),
                op::OP_13 | op::PRIVATE_FLAG,
                0,
                &limit as *const libc::timespec as usize,
                PARTNER.as_ptr(),
                0,
            )
        };
        let partner_woken = partner.join().unwrap_or(false);
        partner_woken && matches!(swapped, Ok(_) | Err(libc::EAGAIN))
    }

    /// docs/kernel.md: `FUTEX_CMP_REQUEUE_PI` with a mismatched compare value returns EAGAIN before
    /// touching any lock where requeue-PI exists; ENOSYS without `CONFIG_FUTEX_PI`.
    fn requeue_pi() -> Detection {
        let from = AtomicU32::new(0);
        let to = AtomicU32::new(0);
        // SAFETY: both words are live and aligned; compare value 1 mismatches `from`.
        let r = unsafe {
            sys::futex(
                from.as_ptr(),
                op::CMP_REQUEUE_PI | op::PRIVATE_FLAG,
                1,
                0,
                to.as_ptr(),
                1,
            )
        };
        detection(
            r == Err(libc::EAGAIN),
            format!(
                "CMP_REQUEUE_PI with a stale compare value: {}",
                errno_name(r)
            ),
        )
    }

    /// docs/kernel.md: `prctl(PR_RSEQ_SLICE_EXTENSION 79, GET 1)`: EINVAL before 7.0.
    fn rseq_slice() -> Detection {
        let r = sys::thread::rseq_slice_extension_get();
        detection(
            r.is_ok(),
            format!("prctl(PR_RSEQ_SLICE_EXTENSION, GET): {}", errno_name(r)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{probes, Capabilities, Capability, Overrides};

    /// What `cap`'s probe asks the kernel, as its evidence names it (compared without case).
    fn probed_for(cap: Capability) -> &'static str {
        match cap {
            Capability::Futex2 => "futex_wake(nr 0)",
            Capability::Waitv => "futex_waitv",
            Capability::Numa => "futex_wait(U32|PRIVATE|NUMA)",
            Capability::Mpol => "futex_wait(U32|PRIVATE|0x08)",
            Capability::Pi => "TRYLOCK_PI",
            Capability::LockPi2 => "LOCK_PI2",
            Capability::RequeuePi => "CMP_REQUEUE_PI",
            Capability::Swap => "swap",
            Capability::Spin => "SPIN",
            Capability::RseqSlice => "PR_RSEQ_SLICE_EXTENSION",
        }
    }

    #[test]
    fn each_capability_gets_its_own_probe() {
        let (detections, _) = probes::run_all();
        let keys: Vec<Capability> = detections.iter().map(|(cap, _)| *cap).collect();
        assert_eq!(
            keys,
            Capability::ALL,
            "one detection per capability, in ALL order"
        );
        for (i, (a, first)) in detections.iter().enumerate() {
            for (b, second) in &detections[i + 1..] {
                assert_ne!(
                    first.evidence, second.evidence,
                    "{a} and {b} share evidence"
                );
            }
        }
        let caps = Capabilities::detect_with(&Overrides::default());
        for probed in Capability::ALL {
            let wanted = probed_for(probed).to_lowercase();
            for cap in Capability::ALL {
                let evidence = &caps.detection(cap).evidence;
                assert_eq!(
                    evidence.to_lowercase().contains(&wanted),
                    cap == probed,
                    "{cap}'s evidence {evidence:?} and {probed}'s call {wanted:?}"
                );
            }
        }
    }

    #[test]
    fn detection_is_the_one_made_for_the_capability() {
        let caps = Capabilities::detect_with(&Overrides::default());
        for (cap, made) in &caps.detections {
            assert!(std::ptr::eq(caps.detection(*cap), made), "{cap}");
        }
    }

    #[test]
    fn overrides_force_capabilities_off() {
        let overrides = Overrides::parse("swap, futex2,bogus", "");
        let caps = Capabilities::detect_with(&overrides);
        assert!(!caps.has(Capability::Swap));
        assert!(!caps.has(Capability::Futex2));
        assert!(caps.detection(Capability::Futex2).disabled());
        // Flags of futex2 go with it.
        assert!(!caps.has(Capability::Numa) && !caps.has(Capability::Mpol));
        assert_eq!(caps.ignored_names(), ["bogus".to_owned()]);

        let none = Capabilities::detect_with(&Overrides::parse("all", ""));
        assert!(Capability::ALL.iter().all(|&c| !none.has(c)));
        assert!(none.ignored_names().is_empty());

        let spin_opt_in = Capabilities::detect_with(&Overrides::parse("", "spin"));
        let spin = spin_opt_in.detection(Capability::Spin);
        assert_eq!(spin_opt_in.has(Capability::Spin), spin.detected());
        // Without the opt-in, a detected SPIN stays unused.
        let no_opt_in = Capabilities::detect_with(&Overrides::parse("", ""));
        assert!(!no_opt_in.has(Capability::Spin));
    }
}
