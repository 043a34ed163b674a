//! Every system call futexkit makes, by subject, and the one seam a model checker plugs into.
//!
//! | module       | what                                                                  |
//! |--------------|-----------------------------------------------------------------------|
//! | `linux.rs`   | the futex calls (`futex(2)`, futex2, `futex_waitv`), the robust list calls, and the atomics and thread operations the primitives use |
//! | `model.rs`   | the same items with the same signatures, under a model checker: the futex calls emulated on the checker's atomics |
//! | `thread.rs`  | the calling thread and the system: its kernel id, the CPU it runs on, usable CPUs, runnable threads, clocks, kernel release, rseq |
//! | `memory.rs`  | shared memory: memfds, seals, shared mappings, inheritable descriptors |
//! | `process.rs` | processes: this one's id and pid namespace, watching a peer's exit, the child of a `fork` |
//!
//! ## The model-checker seam
//!
//! Under `--cfg futexkit_loom` or `--cfg futexkit_shuttle` (each with its feature, which
//! `build.rs` checks), and only here, the futex backend is `model.rs` instead of `linux.rs`: every primitive
//! above runs unchanged on the checker's atomics ([`AtomicU32`]; their constructors cannot be
//! `const`, so the primitives' constructors are written once with [`const_fn!`], `const` in a real
//! build), its threads ([`yield_now`], [`thread_local!`]) and an emulated futex whose waits and
//! wakes the checker schedules. No file outside this directory names a model checker, except where
//! a bound must shrink for a model to stay finite: the spin policy reads [`MODEL_CHECKED`] (every
//! spin is one look). The thread, memory and process calls are the real ones in both builds, as
//! they take no part in any protocol a model checks, with one exception: a checker's atomics are
//! objects of their own, not words that could overlay shared memory, so under one
//! `memory::map_shared` refuses (FlipCall then has only in-process windows).

#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
#[path = "linux.rs"]
mod backend;
#[cfg(any(futexkit_loom, futexkit_shuttle))]
#[path = "model.rs"]
mod backend;

pub(crate) mod memory;
pub(crate) mod process;
pub(crate) mod thread;

pub(crate) use backend::*;

/// Writes a constructor once: a `const fn` in a real build, a plain `fn` under a model checker,
/// whose atomics can only be made while a model runs.
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $($rest:tt)*) => {
        #[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
        $(#[$attr])*
        $vis const fn $($rest)*

        #[cfg(any(futexkit_loom, futexkit_shuttle))]
        $(#[$attr])*
        $vis fn $($rest)*
    };
    ($(#[$attr:meta])* $vis:vis const unsafe fn $($rest:tt)*) => {
        #[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
        $(#[$attr])*
        $vis const unsafe fn $($rest)*

        #[cfg(any(futexkit_loom, futexkit_shuttle))]
        $(#[$attr])*
        $vis unsafe fn $($rest)*
    };
}
pub(crate) use const_fn;

/// An errno value as the kernel returned it.
pub(crate) type Errno = i32;

/// `struct futex_waitv` from the uapi headers (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FutexWaitv {
    pub val: u64,
    pub uaddr: u64,
    pub flags: u32,
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<FutexWaitv>() == 24);

/// `struct robust_list_head` from the uapi headers: where the kernel starts its walk of a
/// thread's robust list when the thread dies (`docs/kernel.md`, "Robust lists").
#[repr(C)]
#[derive(Debug)]
pub(crate) struct RobustListHead {
    /// The first entry's address (the address of its `next` field; bit 0 set for a PI lock), or
    /// this head's own address when the list is empty.
    pub list_next: core::sync::atomic::AtomicUsize,
    /// Where an entry's lock word lies, relative to the entry.
    pub futex_offset: isize,
    /// The entry of a lock or unlock in progress, which the kernel also looks at (0 if none).
    pub list_op_pending: core::sync::atomic::AtomicUsize,
}

const _: () = assert!(core::mem::size_of::<RobustListHead>() == 3 * core::mem::size_of::<usize>());

fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// A raw syscall return value as a count, or the errno it left.
fn check(ret: libc::c_long) -> Result<usize, Errno> {
    if ret < 0 {
        Err(last_errno())
    } else {
        Ok(ret as usize)
    }
}
