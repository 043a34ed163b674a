//! [`Plain`]: what a process-shared lock may guard, and how a value crosses into and out of
//! memory that other processes write.

use core::mem::{align_of, size_of, MaybeUninit};
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Plain data that can live in memory several processes share: any bit pattern of its size is
/// a valid value, it has no padding, and it holds no pointers or references (an address means
/// something in one process only). Integers, floats and arrays of them are `Plain`; so is a
/// `#[repr(C)]` struct of `Plain` fields with no padding between or after them, by an `unsafe
/// impl`. `bool`, `char`, enums, references and `Box` are not.
///
/// A type whose bytemuck or zerocopy derives already prove this needs no `unsafe impl`:
/// `plain_from_bytemuck!` (feature `bytemuck`) and `plain_from_zerocopy!` (feature `zerocopy`)
/// implement `Plain` from those crates' traits, checked at compile time.
///
/// A bound on the type, rather than a marker that a type has no pointers, because the data is
/// only ever copied in and out of the shared memory with atomic accesses (a peer process may
/// write it at any moment, whatever the lock says): a value made from whatever bytes were there
/// must be a valid value, so every bit pattern must be one, which also rules out pointers as
/// anything but numbers.
///
/// ```
/// use futexkit::shared::Plain;
///
/// #[derive(Clone, Copy, Default)]
/// #[repr(C)]
/// struct Account {
///     id: u64,
///     balance: i64,
///     history: [u32; 4],
/// }
///
/// // SAFETY: a `#[repr(C)]` struct of integers, 8 + 8 + 16 bytes with no padding: every bit
/// // pattern is a valid value, and it holds no pointers.
/// unsafe impl Plain for Account {}
/// ```
///
/// # Safety
///
/// Implement it only for types for which every pattern of `size_of::<Self>()` bytes is a valid
/// value, that have no padding bytes, and whose alignment is at most 64.
pub unsafe trait Plain: Copy + Send + Sync + 'static {}

macro_rules! plain {
    ($($t:ty),*) => {
        $(
            // SAFETY: a primitive number: every bit pattern is a valid value, no padding.
            unsafe impl Plain for $t {}
        )*
    };
}

plain!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

// SAFETY: an array of `Plain` elements has no padding between them (the element's size is a
// multiple of its alignment) and every pattern of each element is valid.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

/// What [`plain_from_bytemuck!`](crate::plain_from_bytemuck) checks at compile time: it compiles
/// only for a type bytemuck vouches has no invalid bit pattern (`AnyBitPattern`) and no padding
/// (`NoUninit`), and panics (a compile error in a `const`) if it is aligned to more than 64.
#[cfg(feature = "bytemuck")]
#[doc(hidden)]
pub const fn bytemuck_proves_plain<T: bytemuck::AnyBitPattern + bytemuck::NoUninit>() {
    assert!(
        align_of::<T>() <= super::region::OBJECT_ALIGN,
        "a Plain type is aligned to at most 64 bytes"
    );
}

/// What [`plain_from_zerocopy!`](crate::plain_from_zerocopy) checks at compile time: it compiles
/// only for a type zerocopy vouches has no invalid bit pattern (`FromBytes`) and no padding
/// (`IntoBytes`), and panics (a compile error in a `const`) if it is aligned to more than 64.
#[cfg(feature = "zerocopy")]
#[doc(hidden)]
pub const fn zerocopy_proves_plain<T: zerocopy::FromBytes + zerocopy::IntoBytes>() {
    assert!(
        align_of::<T>() <= super::region::OBJECT_ALIGN,
        "a Plain type is aligned to at most 64 bytes"
    );
}

/// Implements [`Plain`] for each type named, from its bytemuck traits (`Pod`, or `AnyBitPattern`
/// with `NoUninit`, of bytemuck 1): the derives a type already has stand in for an `unsafe impl`.
/// A type that lacks them, or is aligned to more than 64 bytes, is a compile error. Each type
/// named is concrete (`Wrapper<u32>`, not `Wrapper<T>`). Feature `bytemuck`.
///
/// ```
/// use bytemuck::{Pod, Zeroable};
/// use futexkit::shared::Region;
///
/// #[derive(Clone, Copy, Pod, Zeroable)]
/// #[repr(C)]
/// struct Account {
///     id: u64,
///     balance: i64,
/// }
/// futexkit::plain_from_bytemuck!(Account);
///
/// let region = Region::builder().mutex("account", Account { id: 7, balance: 100 }).build()?;
/// let account = region.mutex::<Account>("account")?;
/// account.lock().map_err(|e| e.without_guard())?.update(|a| a.balance -= 30);
/// assert_eq!(account.lock().map_err(|e| e.without_guard())?.get().balance, 70);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A type with invalid bit patterns (a `bool` field) is refused, whatever else it derives:
///
/// ```compile_fail
/// #[derive(Clone, Copy, bytemuck::NoUninit)]
/// #[repr(C)]
/// struct Switch {
///     on: bool,
///     level: [u8; 3],
/// }
/// futexkit::plain_from_bytemuck!(Switch);
/// ```
#[cfg(feature = "bytemuck")]
#[cfg_attr(docsrs, doc(cfg(feature = "bytemuck")))]
#[macro_export]
macro_rules! plain_from_bytemuck {
    ($($ty:ty),+ $(,)?) => {$(
        const _: () = $crate::shared::bytemuck_proves_plain::<$ty>();
        // SAFETY: the `const` above compiles only if bytemuck vouches that every bit pattern of
        // the type is valid and that it has no padding, and only if it is aligned to at most 64
        // bytes; this impl compiles only if it is `Copy + Send + Sync + 'static`.
        unsafe impl $crate::shared::Plain for $ty {}
    )+};
}

/// Implements [`Plain`] for each type named, from its zerocopy traits (`FromBytes` and
/// `IntoBytes`, of zerocopy 0.8): the derives a type already has stand in for an `unsafe impl`. A
/// type that lacks them, or is aligned to more than 64 bytes, is a compile error. Each type named
/// is concrete (`Wrapper<u32>`, not `Wrapper<T>`). Feature `zerocopy`.
///
/// ```
/// use futexkit::shared::Region;
/// use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
///
/// #[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
/// #[repr(C)]
/// struct Reading {
///     sensor: u32,
///     millivolts: i32,
/// }
/// futexkit::plain_from_zerocopy!(Reading);
///
/// let region = Region::builder().mutex("last", Reading { sensor: 1, millivolts: -5 }).build()?;
/// let last = region.mutex::<Reading>("last")?;
/// assert_eq!(last.lock().map_err(|e| e.without_guard())?.get().millivolts, -5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A type aligned to more than 64 bytes is refused:
///
/// ```compile_fail
/// use zerocopy::{FromBytes, IntoBytes};
///
/// #[derive(Clone, Copy, FromBytes, IntoBytes)]
/// #[repr(C, align(128))]
/// struct Line([u8; 128]);
/// futexkit::plain_from_zerocopy!(Line);
/// ```
#[cfg(feature = "zerocopy")]
#[cfg_attr(docsrs, doc(cfg(feature = "zerocopy")))]
#[macro_export]
macro_rules! plain_from_zerocopy {
    ($($ty:ty),+ $(,)?) => {$(
        const _: () = $crate::shared::zerocopy_proves_plain::<$ty>();
        // SAFETY: the `const` above compiles only if zerocopy vouches that every bit pattern of
        // the type is valid and that it has no padding, and only if it is aligned to at most 64
        // bytes; this impl compiles only if it is `Copy + Send + Sync + 'static`.
        unsafe impl $crate::shared::Plain for $ty {}
    )+};
}

/// Copies the value at `src` out of shared memory: one atomic access for a value of 1, 2, 4 or 8
/// bytes aligned to its size, else `atomic_copy`'s word and byte accesses.
///
/// # Safety
///
/// `src` must point to `size_of::<T>()` bytes, aligned for `T`, that stay mapped for the call and
/// that this process accesses only atomically (other processes may write them).
pub(crate) unsafe fn load<T: Plain>(src: *const T) -> T {
    macro_rules! one_access {
        ($atomic:ty, $int:ty) => {
            if size_of::<T>() == size_of::<$int>() && align_of::<T>() >= align_of::<$int>() {
                // SAFETY: `src` is aligned for `T`, so for this integer of `T`'s size, and the
                // caller vouches for the memory and for atomic-only access.
                let bits = unsafe { <$atomic>::from_ptr(src.cast::<$int>().cast_mut()) }
                    .load(Ordering::Relaxed);
                // SAFETY: the same size, and every bit pattern is a `T` (`Plain`).
                return unsafe { core::mem::transmute_copy::<$int, T>(&bits) };
            }
        };
    }
    one_access!(AtomicU64, u64);
    one_access!(AtomicU32, u32);
    one_access!(AtomicU16, u16);
    one_access!(AtomicU8, u8);
    let mut value = MaybeUninit::<T>::zeroed();
    // SAFETY: the destination is a local of `size_of::<T>()` initialized (zero) bytes; the
    // source as the caller vouches.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(value.as_mut_ptr().cast::<u8>(), core::mem::size_of::<T>())
    };
    // SAFETY: as above.
    unsafe { crate::atomic_copy::load(src.cast::<u8>(), bytes) };
    // SAFETY: every byte was written, and every pattern of them is a `T` (`Plain`).
    unsafe { value.assume_init() }
}

/// Copies `value` into shared memory at `dst`.
///
/// # Safety
///
/// As [`load`], for `dst`.
pub(crate) unsafe fn store<T: Plain>(dst: *mut T, value: &T) {
    macro_rules! one_access {
        ($atomic:ty, $int:ty) => {
            if size_of::<T>() == size_of::<$int>() && align_of::<T>() >= align_of::<$int>() {
                // SAFETY: the same size; a `Plain` value has no padding, so every byte is
                // initialized.
                let bits = unsafe { core::mem::transmute_copy::<T, $int>(value) };
                // SAFETY: as in `load`.
                unsafe { <$atomic>::from_ptr(dst.cast::<$int>()) }.store(bits, Ordering::Relaxed);
                return;
            }
        };
    }
    one_access!(AtomicU64, u64);
    one_access!(AtomicU32, u32);
    one_access!(AtomicU16, u16);
    one_access!(AtomicU8, u8);
    // SAFETY: a `Plain` value has no padding, so all its bytes are initialized.
    let bytes = unsafe {
        core::slice::from_raw_parts((value as *const T).cast::<u8>(), core::mem::size_of::<T>())
    };
    // SAFETY: the destination as the caller vouches.
    unsafe { crate::atomic_copy::store(dst.cast::<u8>(), bytes) };
}
