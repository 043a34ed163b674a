//! One family of locks (Mutex, Condvar, RwLock, Barrier) per library (futexkit, std,
//! parking_lot) behind one small trait, so a workload is written once and run on each: the condvar workloads
//! ([`crate::condvar`]) and the key-value server ([`crate::kv`]), which picks one at run time
//! ([`Backend`]).
//!
//! futexkit is a drop-in for `std::sync`, so one macro body serves both: the two impls differ
//! only in the path the types come from, which is the one-line change a user makes. parking_lot
//! has no poisoning and a different `wait_while`, so it gets its own short impl.
use std::fmt;
use std::str::FromStr;

/// A lock library chosen at run time (the key-value server's `--backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `std::sync::{Mutex, Condvar}`.
    Std,
    /// `futexkit::{Mutex, Condvar}`.
    Futexkit,
    /// `parking_lot::{Mutex, Condvar}`.
    ParkingLot,
    /// futexkit's Mutex and Condvar with std's RwLock ([`Split`]): which of the two a
    /// difference between futexkit and std comes from.
    FutexkitWithStdRwLock,
    /// std's Mutex and Condvar with futexkit's RwLock ([`Split`]).
    StdWithFutexkitRwLock,
}

impl Backend {
    /// Every backend, in the order tables print them.
    pub const ALL: [Backend; 3] = [Backend::Futexkit, Backend::Std, Backend::ParkingLot];

    /// The libraries mixed, one for the Mutex and Condvar and another for the RwLock: not in
    /// [`ALL`](Backend::ALL), named only on request.
    pub const SPLIT: [Backend; 2] = [
        Backend::FutexkitWithStdRwLock,
        Backend::StdWithFutexkitRwLock,
    ];

    /// The name the `--backend` flag takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Std => "std",
            Backend::Futexkit => "futexkit",
            Backend::ParkingLot => "parking_lot",
            Backend::FutexkitWithStdRwLock => "futexkit+std_rwlock",
            Backend::StdWithFutexkitRwLock => "std+futexkit_rwlock",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Backend::ALL
            .into_iter()
            .chain(Backend::SPLIT)
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown backend {s:?} (expected std, futexkit, parking_lot, \
                     futexkit+std_rwlock or std+futexkit_rwlock)"
                )
            })
    }
}

/// A family of locks: Mutex, Condvar, RwLock, Barrier.
///
/// Every implementation's lock and wait methods are `#[inline]`: in a user's code the lock's
/// calls sit at the call site, and an adapter that the compiler inlines for one library and
/// calls for another (which depends on the size of the library's inlined fast path and on the
/// codegen unit the adapter lands in) would time that call, not the lock.
pub trait Locks: Send + Sync + 'static {
    /// The library's name, as tables print it.
    const NAME: &'static str;
    type Mutex<T: Send + 'static>: Send + Sync;
    type Condvar: Send + Sync;
    type RwLock<T: Send + Sync + 'static>: Send + Sync;
    type Barrier: Send + Sync;
    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T>;
    fn condvar() -> Self::Condvar;
    fn rwlock<T: Send + Sync + 'static>(value: T) -> Self::RwLock<T>;
    fn barrier(parties: usize) -> Self::Barrier;
    /// Runs `f` with a read lock held.
    fn read<T: Send + Sync + 'static, R>(l: &Self::RwLock<T>, f: impl FnOnce(&T) -> R) -> R;
    /// Runs `f` with the write lock held.
    fn write<T: Send + Sync + 'static, R>(l: &Self::RwLock<T>, f: impl FnOnce(&mut T) -> R) -> R;
    /// Waits at the barrier; returns whether this thread led the round.
    fn barrier_wait(b: &Self::Barrier) -> bool;
    /// Runs `f` with the lock held.
    fn with<T: Send + 'static, R>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R;
    /// Locks `m`, waits on `c` while `wait` holds, then runs `then` with the lock still held.
    fn wait_while<T: Send + 'static, R>(
        m: &Self::Mutex<T>,
        c: &Self::Condvar,
        wait: impl FnMut(&mut T) -> bool,
        then: impl FnOnce(&mut T) -> R,
    ) -> R;
    fn notify_one(c: &Self::Condvar);
    fn notify_all(c: &Self::Condvar);
}

pub struct Futexkit;
pub struct Std;
pub struct ParkingLot;

/// One body for every library with std's API: `lock()` and `wait_while` return a
/// `LockResult`. A poisoned lock means a thread panicked mid-update; the users of this module
/// treat that as fatal, as most std users do.
macro_rules! std_shaped {
    ($backend:ident, $name:literal, $($path:ident)::+) => {
        impl Locks for $backend {
            const NAME: &'static str = $name;
            type Mutex<T: Send + 'static> = $($path)::+::Mutex<T>;
            type Condvar = $($path)::+::Condvar;
            type RwLock<T: Send + Sync + 'static> = $($path)::+::RwLock<T>;
            type Barrier = $($path)::+::Barrier;
            fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
                Self::Mutex::new(value)
            }
            fn condvar() -> Self::Condvar {
                Self::Condvar::new()
            }
            fn rwlock<T: Send + Sync + 'static>(value: T) -> Self::RwLock<T> {
                Self::RwLock::new(value)
            }
            fn barrier(parties: usize) -> Self::Barrier {
                Self::Barrier::new(parties)
            }
            #[inline]
            fn read<T: Send + Sync + 'static, R>(l: &Self::RwLock<T>, f: impl FnOnce(&T) -> R) -> R {
                f(&l.read().unwrap())
            }
            #[inline]
            fn write<T: Send + Sync + 'static, R>(
                l: &Self::RwLock<T>,
                f: impl FnOnce(&mut T) -> R,
            ) -> R {
                f(&mut l.write().unwrap())
            }
            #[inline]
            fn barrier_wait(b: &Self::Barrier) -> bool {
                b.wait().is_leader()
            }
            #[inline]
            fn with<T: Send + 'static, R>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
                f(&mut m.lock().unwrap())
            }
            #[inline]
            fn wait_while<T: Send + 'static, R>(
                m: &Self::Mutex<T>,
                c: &Self::Condvar,
                wait: impl FnMut(&mut T) -> bool,
                then: impl FnOnce(&mut T) -> R,
            ) -> R {
                then(&mut c.wait_while(m.lock().unwrap(), wait).unwrap())
            }
            #[inline]
            fn notify_one(c: &Self::Condvar) {
                c.notify_one();
            }
            #[inline]
            fn notify_all(c: &Self::Condvar) {
                c.notify_all();
            }
        }
    };
}

std_shaped!(Futexkit, "futexkit", futexkit::sync);
std_shaped!(Std, "std", std::sync);

impl Locks for ParkingLot {
    const NAME: &'static str = "parking_lot";
    type Mutex<T: Send + 'static> = parking_lot::Mutex<T>;
    type Condvar = parking_lot::Condvar;
    type RwLock<T: Send + Sync + 'static> = parking_lot::RwLock<T>;
    type Barrier = ParkingLotBarrier;
    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
        parking_lot::Mutex::new(value)
    }
    fn condvar() -> Self::Condvar {
        parking_lot::Condvar::new()
    }
    fn rwlock<T: Send + Sync + 'static>(value: T) -> Self::RwLock<T> {
        parking_lot::RwLock::new(value)
    }
    fn barrier(parties: usize) -> Self::Barrier {
        ParkingLotBarrier::new(parties)
    }
    #[inline]
    fn read<T: Send + Sync + 'static, R>(l: &Self::RwLock<T>, f: impl FnOnce(&T) -> R) -> R {
        f(&l.read())
    }
    #[inline]
    fn write<T: Send + Sync + 'static, R>(l: &Self::RwLock<T>, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut l.write())
    }
    #[inline]
    fn barrier_wait(b: &Self::Barrier) -> bool {
        b.wait()
    }
    #[inline]
    fn with<T: Send + 'static, R>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut m.lock())
    }
    #[inline]
    fn wait_while<T: Send + 'static, R>(
        m: &Self::Mutex<T>,
        c: &Self::Condvar,
        wait: impl FnMut(&mut T) -> bool,
        then: impl FnOnce(&mut T) -> R,
    ) -> R {
        let mut guard = m.lock();
        c.wait_while(&mut guard, wait);
        then(&mut guard)
    }
    #[inline]
    fn notify_one(c: &Self::Condvar) {
        c.notify_one();
    }
    #[inline]
    fn notify_all(c: &Self::Condvar) {
        c.notify_all();
    }
}

/// One library's Mutex, Condvar and Barrier (`M`) with another's RwLock (`R`), to tell which
/// of the two a workload's difference comes from.
pub struct Split<M, R>(core::marker::PhantomData<(M, R)>);

impl<M: Locks, R: Locks> Locks for Split<M, R> {
    const NAME: &'static str = "split";
    type Mutex<T: Send + 'static> = M::Mutex<T>;
    type Condvar = M::Condvar;
    type RwLock<T: Send + Sync + 'static> = R::RwLock<T>;
    type Barrier = M::Barrier;
    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
        M::mutex(value)
    }
    fn condvar() -> Self::Condvar {
        M::condvar()
    }
    fn rwlock<T: Send + Sync + 'static>(value: T) -> Self::RwLock<T> {
        R::rwlock(value)
    }
    fn barrier(parties: usize) -> Self::Barrier {
        M::barrier(parties)
    }
    #[inline]
    fn read<T: Send + Sync + 'static, Out>(l: &Self::RwLock<T>, f: impl FnOnce(&T) -> Out) -> Out {
        R::read(l, f)
    }
    #[inline]
    fn write<T: Send + Sync + 'static, Out>(
        l: &Self::RwLock<T>,
        f: impl FnOnce(&mut T) -> Out,
    ) -> Out {
        R::write(l, f)
    }
    #[inline]
    fn barrier_wait(b: &Self::Barrier) -> bool {
        M::barrier_wait(b)
    }
    #[inline]
    fn with<T: Send + 'static, Out>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> Out) -> Out {
        M::with(m, f)
    }
    #[inline]
    fn wait_while<T: Send + 'static, Out>(
        m: &Self::Mutex<T>,
        c: &Self::Condvar,
        wait: impl FnMut(&mut T) -> bool,
        then: impl FnOnce(&mut T) -> Out,
    ) -> Out {
        M::wait_while(m, c, wait, then)
    }
    #[inline]
    fn notify_one(c: &Self::Condvar) {
        M::notify_one(c);
    }
    #[inline]
    fn notify_all(c: &Self::Condvar) {
        M::notify_all(c);
    }
}

/// parking_lot has no barrier: this is std's algorithm (a count and a generation under a
/// Mutex, a Condvar to wait on) on parking_lot's Mutex and Condvar, the barrier a parking_lot
/// user would write.
pub struct ParkingLotBarrier {
    state: parking_lot::Mutex<(usize, usize)>,
    round_over: parking_lot::Condvar,
    parties: usize,
}

impl ParkingLotBarrier {
    pub fn new(parties: usize) -> ParkingLotBarrier {
        ParkingLotBarrier {
            state: parking_lot::Mutex::new((0, 0)),
            round_over: parking_lot::Condvar::new(),
            parties,
        }
    }

    /// Returns whether this thread was the round's leader (the last to arrive).
    pub fn wait(&self) -> bool {
        let mut state = self.state.lock();
        let generation = state.1;
        state.0 += 1;
        if state.0 < self.parties {
            self.round_over
                .wait_while(&mut state, |s| s.1 == generation);
            false
        } else {
            *state = (0, generation.wrapping_add(1));
            self.round_over.notify_all();
            true
        }
    }
}
