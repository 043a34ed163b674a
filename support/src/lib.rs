//! Code that futexkit's tests, benches and examples share (not published): the workloads the
//! benches and `docs/benchmarks.md` measure, each written once over futexkit, std and
//! parking_lot; the key-value server and its load generator; helpers for tests.
//!
//! Empty under a model checker (`--cfg futexkit_loom` or `--cfg futexkit_shuttle`): futexkit is
//! then built on the checker's emulated futex, without its syscall-only parts, and the model tests
//! use none of this.

#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod blocked;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod condvar;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod contention;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod flipcall;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod flipcall_server;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod kernel_path;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod kv;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod locks;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod pi;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod pingpong;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod report;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod rwlock;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod seccomp;
#[cfg(not(any(futexkit_loom, futexkit_shuttle)))]
pub mod shared;
