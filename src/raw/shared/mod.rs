//! The process-shared, robust protocols: each on robust futex words, the words the kernel marks
//! `OWNER_DIED` when their owner dies (`src/futex/robust.rs`). [`futexkit::shared`](crate::shared)
//! builds the typed locks over them, in regions of shared memory.
//!
//! | file         | type                 | words                                                       | bytes, alignment |
//! |--------------|----------------------|-------------------------------------------------------------|------------------|
//! | `mutex.rs`   | [`RawSharedMutex`]   | one robust word: the owner's id, `WAITERS`, `OWNER_DIED`    | 40, 8 |
//! | `condvar.rs` | [`RawSharedCondvar`] | a notify sequence and a count of sleepers                   | 8, 4 |
//! | `rwlock.rs`  | [`RawSharedRwLock`]  | a writer's robust word and one robust word per reader slot, a cache line each | 2112, 64 |
//! | `barrier.rs` | [`RawSharedBarrier`] | arrivals, a generation word, one robust word per party      | 2624, 64 |
//! | `semaphore.rs` | [`RawSharedSemaphore`] | one robust word per permit, a release sequence, a count of sleepers | 2624, 64 |
//!
//! All are `#[repr(C)]`, so every process that maps them agrees on the layout
//! (`tests/shared.rs` checks the sizes).
//!
//! Every word lives in memory several processes map, so every access is atomic and nothing
//! read from it is trusted: a value no protocol writes makes a call fail or wait (never past
//! its deadline), never misbehave.

mod barrier;
mod condvar;
mod mutex;
mod rwlock;
mod semaphore;

pub use barrier::{BarrierError, Party, RawSharedBarrier, BARRIER_MAX_PARTIES};
pub use condvar::RawSharedCondvar;
pub use mutex::{Acquired, RawLockError, RawSharedMutex};
pub use rwlock::{RawSharedRwLock, ReaderSlot, READER_SLOTS};
pub use semaphore::{Permit, RawSharedSemaphore, SemaphoreError, SEMAPHORE_MAX_PERMITS};
