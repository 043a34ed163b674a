//! std's contract beyond its methods: for every type futexkit::sync defines itself, each auto
//! trait (`Send`, `Sync`, `Unpin`, `UnwindSafe`, `RefUnwindSafe`), each common trait and each
//! variance std's type has, futexkit's has too, for type parameters chosen to tell the cases
//! apart. Code written against `std::sync` then compiles unchanged after the switch: bounds
//! and lifetimes included. (`must_use` is checked by the compile_fail examples in
//! `futexkit::sync`'s docs.)
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::cell::Cell;
use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::marker::PhantomPinned;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::rc::Rc;

use futexkit::sync::{
    Barrier, BarrierWaitResult, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard,
    RwLockWriteGuard, WaitTimeoutResult,
};

/// Whether the type implements the bound, as a constant. The inherent constant exists only
/// where the bound holds, and path resolution prefers it to the trait's default, which
/// answers for every other type. Only for concrete types (not inside generic code).
macro_rules! implements {
    ($ty:ty: $bound:path) => {{
        struct Probe<T: ?Sized>(core::marker::PhantomData<T>);
        #[allow(dead_code)]
        trait Otherwise {
            const IMPLEMENTS: bool = false;
        }
        impl<T: ?Sized> Otherwise for Probe<T> {}
        #[allow(dead_code)]
        impl<T: ?Sized + $bound> Probe<T> {
            const IMPLEMENTS: bool = true;
        }
        <Probe<$ty>>::IMPLEMENTS
    }};
}

/// The traits where futexkit's `$ours` and std's `$theirs` differ, as `Trait: ours/std` lines.
macro_rules! differences {
    ($ours:ty, $theirs:ty) => {
        differences!(@each $ours, $theirs; Send, Sync, Unpin, UnwindSafe, RefUnwindSafe, Debug,
            Display, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)
    };
    (@each $ours:ty, $theirs:ty; $($bound:path),+) => {{
        let mut found = Vec::<String>::new();
        $(
            let (ours, theirs) = (implements!($ours: $bound), implements!($theirs: $bound));
            if ours != theirs {
                found.push(format!(
                    "{} vs {}: {}: futexkit {ours}, std {theirs}",
                    stringify!($ours), stringify!($theirs), stringify!($bound)
                ));
            }
        )+
        found
    }};
}

/// A type that is `Send` and `Sync` but not `UnwindSafe`, `RefUnwindSafe` or `Unpin`.
struct PinnedMutRef(#[allow(dead_code)] &'static mut u32, PhantomPinned);

/// Every lock and guard of both libraries over one type parameter `$t`.
macro_rules! lock_differences {
    ($found:ident; $($t:ty),+) => {$(
        $found.extend(differences!(Mutex<$t>, std::sync::Mutex<$t>));
        $found.extend(differences!(MutexGuard<'static, $t>, std::sync::MutexGuard<'static, $t>));
        $found.extend(differences!(RwLock<$t>, std::sync::RwLock<$t>));
        $found.extend(differences!(
            RwLockReadGuard<'static, $t>,
            std::sync::RwLockReadGuard<'static, $t>
        ));
        $found.extend(differences!(
            RwLockWriteGuard<'static, $t>,
            std::sync::RwLockWriteGuard<'static, $t>
        ));
    )+};
}

#[test]
fn the_probe_tells_yes_from_no() {
    // Without this, a probe that always answered alike would make every comparison pass.
    assert!(implements!(u32: Send));
    assert!(!implements!(Rc<u32>: Send));
    assert!(implements!(Cell<u32>: Send));
    assert!(!implements!(Cell<u32>: Sync));
    assert!(!implements!(Cell<u32>: RefUnwindSafe));
    assert!(!implements!(PinnedMutRef: Unpin));
    assert!(!implements!(PinnedMutRef: UnwindSafe));
    assert!(implements!(PinnedMutRef: Sync));
    assert!(!implements!(str: Clone));
    // A difference is reported: a guard is not its data.
    assert_eq!(
        differences!(u32, std::sync::MutexGuard<'static, u32>).len(),
        9
    );
}

#[test]
fn locks_and_guards_have_stds_traits_for_every_kind_of_data() {
    let mut found = Vec::new();
    lock_differences!(found;
        u32, String, Cell<u32>, Rc<u32>, PinnedMutRef, *const u8, [u8], str, dyn Debug,
        dyn Debug + Send, dyn Debug + Send + Sync);
    assert!(
        found.is_empty(),
        "differences from std:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_other_types_have_stds_traits() {
    let mut found = Vec::new();
    found.extend(differences!(Condvar, std::sync::Condvar));
    found.extend(differences!(
        WaitTimeoutResult,
        std::sync::WaitTimeoutResult
    ));
    found.extend(differences!(Barrier, std::sync::Barrier));
    found.extend(differences!(
        BarrierWaitResult,
        std::sync::BarrierWaitResult
    ));
    assert!(
        found.is_empty(),
        "differences from std:\n{}",
        found.join("\n")
    );
}

#[test]
fn locks_convert_from_their_data_as_stds() {
    assert_eq!(
        implements!(Mutex<u32>: From<u32>),
        implements!(std::sync::Mutex<u32>: From<u32>)
    );
    assert_eq!(
        implements!(RwLock<u32>: From<u32>),
        implements!(std::sync::RwLock<u32>: From<u32>)
    );
    assert!(implements!(Mutex<u32>: From<u32>));
}

// Variance, checked by the compiler: each function compiles only if the type is covariant
// where std's is. A read guard is covariant in its data type, as std tests; every guard is
// covariant in its lifetime.

#[allow(dead_code)]
fn read_guard_is_covariant_in_its_data<'a>(
    guard: RwLockReadGuard<'a, &'static str>,
) -> RwLockReadGuard<'a, &'a str> {
    guard
}

#[allow(dead_code)]
fn guards_are_covariant_in_their_lifetime<'a>(
    guards: (
        MutexGuard<'static, u32>,
        RwLockReadGuard<'static, u32>,
        RwLockWriteGuard<'static, u32>,
    ),
) -> (
    MutexGuard<'a, u32>,
    RwLockReadGuard<'a, u32>,
    RwLockWriteGuard<'a, u32>,
) {
    guards
}

#[allow(dead_code)]
fn results_are_covariant_in_their_lifetime<'a>(
    waited: std::sync::LockResult<(MutexGuard<'static, u32>, WaitTimeoutResult)>,
) -> std::sync::LockResult<(MutexGuard<'a, u32>, WaitTimeoutResult)> {
    waited
}

/// std's own covariance test, with the path changed: a guard of `&'a i32` taken from a lock
/// of a longer-lived reference.
#[test]
fn a_read_guard_of_a_longer_lived_reference_is_one_of_a_shorter() {
    fn do_stuff<'a>(guard: RwLockReadGuard<'_, &'a i32>, other: &'a i32) -> i32 {
        **guard + *other
    }
    let j: i32 = 5;
    let lock = RwLock::new(&j);
    {
        let i = 6;
        assert_eq!(do_stuff(lock.read().unwrap(), &i), 11);
    }
    assert_eq!(**lock.read().unwrap(), 5);
}

#[test]
fn a_downgraded_guard_reads_and_unlocks_as_a_read_guard() {
    let lock = RwLock::new(String::from("written"));
    let mut write = lock.write().unwrap();
    write.push('!');
    let read = RwLockWriteGuard::downgrade(write);
    assert_eq!(&*read, "written!");
    assert!(lock.try_write().is_err());
    assert_eq!(&*lock.try_read().unwrap(), "written!");
    drop(read);
    assert_eq!(lock.try_write().unwrap().len(), 8);
}
