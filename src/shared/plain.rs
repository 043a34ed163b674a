//! [`Plain`]: what a process-shared lock may guard, and how a value crosses into and out of
//! memory that other processes write.

use core::mem::MaybeUninit;

/// Plain data that can live in memory several processes share: any bit pattern of its size is
/// a valid value, it has no padding, and it holds no pointers or references (an address means
/// something in one process only). Integers, floats and arrays of them are `Plain`; so is a
/// `#[repr(C)]` struct of `Plain` fields with no padding between or after them, by an `unsafe
/// impl`. `bool`, `char`, enums, references and `Box` are not.
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

/// Copies the value at `src` out of shared memory.
///
/// # Safety
///
/// `src` must point to `size_of::<T>()` bytes, aligned for `T`, that stay mapped for the call and
/// that this process accesses only atomically (other processes may write them).
pub(crate) unsafe fn load<T: Plain>(src: *const T) -> T {
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
    // SAFETY: a `Plain` value has no padding, so all its bytes are initialized.
    let bytes = unsafe {
        core::slice::from_raw_parts((value as *const T).cast::<u8>(), core::mem::size_of::<T>())
    };
    // SAFETY: the destination as the caller vouches.
    unsafe { crate::atomic_copy::store(dst.cast::<u8>(), bytes) };
}
