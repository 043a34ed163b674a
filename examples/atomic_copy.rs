//! The copies into and out of memory a peer process may write (FlipCall's mapped windows, the
//! shared locks' values): futexkit's own (`src/atomic_copy.rs`, compiled into this example as
//! it is into the crate) against the atomic-memcpy crate, with plain `memcpy` as the floor that
//! a copy racing a writer may not use. Nanoseconds per copy, median of interleaved rounds, at
//! a word-aligned shared address and one byte past it.
//! `cargo run --release --example atomic_copy [-- --quick]`.

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futexkit_support::report::turns;

#[allow(dead_code)]
#[path = "../src/atomic_copy.rs"]
mod atomic_copy;

/// The copies compared, in table order.
#[derive(Clone, Copy)]
enum Copier {
    Futexkit,
    AtomicMemcpy,
    Memcpy,
}

const COPIERS: [Copier; 3] = [Copier::Futexkit, Copier::AtomicMemcpy, Copier::Memcpy];

/// One copy of `N` bytes between the shared range at `shared` and `private`, in the direction
/// `load` says.
///
/// # Safety
///
/// `shared .. shared + N` is live and accessed only atomically meanwhile (here: only by this
/// thread).
unsafe fn copy<const N: usize>(how: Copier, load: bool, shared: *mut u8, private: &mut [u8; N]) {
    match (how, load) {
        // SAFETY: the caller's range, accessed only atomically.
        (Copier::Futexkit, true) => unsafe { atomic_copy::load(shared, private) },
        // SAFETY: as above.
        (Copier::Futexkit, false) => unsafe { atomic_copy::store(shared, private) },
        (Copier::AtomicMemcpy, true) => {
            // SAFETY: `[u8; N]` needs no alignment; the range was written, so the value is
            // initialized.
            *private = unsafe {
                atomic_memcpy::atomic_load(shared.cast::<[u8; N]>(), Ordering::Relaxed)
                    .assume_init()
            }
        }
        // SAFETY: as above.
        (Copier::AtomicMemcpy, false) => unsafe {
            atomic_memcpy::atomic_store(shared.cast::<[u8; N]>(), *private, Ordering::Relaxed)
        },
        // SAFETY: the ranges do not overlap and nothing else touches them (this is the copy
        // that would race a writing peer; it is here as the floor).
        (Copier::Memcpy, true) => unsafe {
            std::ptr::copy_nonoverlapping(shared, private.as_mut_ptr(), N)
        },
        // SAFETY: as above.
        (Copier::Memcpy, false) => unsafe {
            std::ptr::copy_nonoverlapping(private.as_ptr(), shared, N)
        },
    }
}

/// Nanoseconds per copy of `N` bytes: the median of `rounds` rounds, the copiers taking turns.
fn measure<const N: usize>(load: bool, offset: usize, rounds: usize) -> [f64; 3] {
    // 64-aligned backing, so that `offset` alone decides the shared address's alignment.
    let mut backing = vec![[0u64; 8]; (N + 128) / 64];
    // SAFETY: `offset < 64` and the backing holds `N + 64` bytes past its start.
    let shared = unsafe { backing.as_mut_ptr().cast::<u8>().add(offset) };
    let mut private = Box::new([7u8; N]);
    let iterations = (2_000_000 / (N + 64)).max(20);
    let mut samples = vec![Vec::new(); COPIERS.len()];
    for round in 0..rounds {
        for i in turns(round, COPIERS.len()) {
            let how = COPIERS[i];
            let start = Instant::now();
            for _ in 0..iterations {
                // SAFETY: the range lies in `backing`, which only this thread touches.
                unsafe { copy::<N>(how, load, black_box(shared), black_box(&mut private)) };
            }
            samples[i].push(start.elapsed().as_secs_f64() * 1e9 / iterations as f64);
        }
    }
    black_box(&backing);
    let mut medians = [0.0; 3];
    for (median, mut runs) in medians.iter_mut().zip(samples) {
        runs.sort_by(f64::total_cmp);
        *median = runs[runs.len() / 2];
    }
    medians
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 15 };
    println!("{}", futexkit::capabilities());
    for (load, what) in [
        (true, "load (shared to private)"),
        (false, "store (private to shared)"),
    ] {
        println!(
            "\n{what}: ns per copy, median of {rounds} interleaved rounds; best is atomic-memcpy (memcpy may not race a writer, so it is the floor, not a choice)"
        );
        println!(
            "| bytes | shared address | futexkit | atomic-memcpy | memcpy | futexkit / best |"
        );
        println!("|---|---|---|---|---|---|");
        macro_rules! row {
            ($n:literal) => {
                for (offset, at) in [(0, "8-aligned"), (1, "8-aligned + 1")] {
                    let [fk, am, mc] = measure::<$n>(load, offset, rounds);
                    println!(
                        "| {:>5} | {at} | {fk:.1} | {am:.1} | {mc:.1} | {:.2} |",
                        $n,
                        am / fk
                    );
                }
            };
        }
        row!(16);
        row!(64);
        row!(256);
        row!(1024);
        row!(4096);
        row!(65536);
    }
}
