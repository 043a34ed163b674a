//! Copies between Rust slices and memory a peer process may write at any moment.
//!
//! Every access to the shared side is a relaxed atomic load or store, a machine word at a time
//! where the shared address is word-aligned and a byte at a time at the edges; on x86-64, long
//! copies are one string instruction (`rep movsb`), which stands for the same relaxed byte
//! accesses and runs at `memcpy`'s speed. Racing with the peer then gives each byte some value
//! the memory held during the copy (a torn mix of the peer's writes at worst), never undefined
//! behaviour; ordering comes from the Acquire/Release on the word that hands the memory over
//! (FlipCall's state word, a shared lock's word) around the copy.
//!
//! The atomic-memcpy crate gives the same guarantee; this copy is kept because it is faster at
//! every size and alignment measured (`examples/atomic_copy.rs`, which compiles this file as it
//! is; figures in `docs/benchmarks.md`).

use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

const WORD: usize = core::mem::size_of::<usize>();

/// From this many bytes on, a string copy beats word-by-word atomics (its start-up cost is
/// that of about 1 KiB of words).
#[cfg(target_arch = "x86_64")]
const STRING_COPY_MIN: usize = 1024;

/// `len` bytes from `src` to `dst` with `rep movsb`.
///
/// # Safety
///
/// Both ranges must be live and must not overlap; any memory in them that another thread or
/// process may touch meanwhile must be memory this process accesses only atomically.
#[cfg(target_arch = "x86_64")]
unsafe fn string_copy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller vouches for the ranges. `rep movsb` reads each byte of the source
    // and writes each byte of the destination once, in no promised order, and x86 never
    // tears a byte access: the effect of a loop of relaxed `AtomicU8` loads and stores,
    // which is what this instruction stands for here, so a peer writing the shared range
    // meanwhile races with atomics, not with plain accesses. The direction flag is clear
    // on entry (the ABI guarantees it), so the copy runs upwards; it touches no flags and
    // no stack.
    unsafe {
        core::arch::asm!(
            "rep movsb",
            inout("rcx") len => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags),
        );
    }
}

/// Copies `dst.len()` bytes from `src` into `dst`.
///
/// # Safety
///
/// `src .. src + dst.len()` must be live memory that this process accesses only atomically
/// for the duration of the call (other processes may write it).
pub(crate) unsafe fn load(src: *const u8, dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if dst.len() >= STRING_COPY_MIN {
        // SAFETY: the source as the caller vouches; the destination is an exclusive Rust
        // slice of the same length, which cannot overlap memory only accessed atomically.
        unsafe { string_copy(dst.as_mut_ptr(), src, dst.len()) };
        return;
    }
    let head = src.align_offset(WORD).min(dst.len());
    let (edge, rest) = dst.split_at_mut(head);
    for (i, byte) in edge.iter_mut().enumerate() {
        // SAFETY: in the range the caller vouches for; a byte needs no alignment.
        *byte = unsafe { AtomicU8::from_ptr(src.add(i).cast_mut()) }.load(Ordering::Relaxed);
    }
    // SAFETY: `head <= dst.len()`, so still inside the range (or one past its end).
    let src = unsafe { src.add(head) };
    let copied = rest.len() / WORD * WORD;
    let mut words = rest.chunks_exact_mut(WORD);
    for (i, chunk) in (&mut words).enumerate() {
        // SAFETY: `src` is word-aligned now and the word lies in the range; atomic access
        // only, as the caller guarantees.
        let word = unsafe { AtomicUsize::from_ptr(src.add(i * WORD).cast::<usize>().cast_mut()) }
            .load(Ordering::Relaxed);
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    for (i, byte) in words.into_remainder().iter_mut().enumerate() {
        // SAFETY: the last bytes of the range.
        *byte =
            unsafe { AtomicU8::from_ptr(src.add(copied + i).cast_mut()) }.load(Ordering::Relaxed);
    }
}

/// Copies `src` to `dst .. dst + src.len()`.
///
/// # Safety
///
/// As [`load`], for `dst .. dst + src.len()`.
pub(crate) unsafe fn store(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if src.len() >= STRING_COPY_MIN {
        // SAFETY: the destination as the caller vouches; the source is a Rust slice of the
        // same length, which cannot overlap memory only accessed atomically.
        unsafe { string_copy(dst, src.as_ptr(), src.len()) };
        return;
    }
    let head = dst.align_offset(WORD).min(src.len());
    let (edge, rest) = src.split_at(head);
    for (i, &byte) in edge.iter().enumerate() {
        // SAFETY: in the range the caller vouches for.
        unsafe { AtomicU8::from_ptr(dst.add(i)) }.store(byte, Ordering::Relaxed);
    }
    // SAFETY: `head <= src.len()`, so inside the range (or one past its end).
    let dst = unsafe { dst.add(head) };
    let words = rest.chunks_exact(WORD);
    let tail = words.remainder();
    for (i, chunk) in words.enumerate() {
        let mut bytes = [0u8; WORD];
        bytes.copy_from_slice(chunk);
        // SAFETY: `dst` is word-aligned now and the word lies in the range.
        unsafe { AtomicUsize::from_ptr(dst.add(i * WORD).cast::<usize>()) }
            .store(usize::from_ne_bytes(bytes), Ordering::Relaxed);
    }
    let copied = rest.len() - tail.len();
    for (i, &byte) in tail.iter().enumerate() {
        // SAFETY: the last bytes of the range.
        unsafe { AtomicU8::from_ptr(dst.add(copied + i)) }.store(byte, Ordering::Relaxed);
    }
}
