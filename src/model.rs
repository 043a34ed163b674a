//! Under a model checker (`cfg(loom)` or `cfg(shuttle)`): an emulated futex.
//!
//! Real futexes are kernel objects a model checker cannot see, so under one
//! [`Futex`](crate::futex::Futex) routes wait, wake and requeue here. State: one table of
//! `(address, bitset, waiter id)` entries in arrival order, guarded by the checker's `Mutex` so
//! that "compare the word, then enqueue" is atomic with respect to wakers (the kernel's
//! hash-bucket lock does the same), and one `Condvar` that every wake notifies; a waiter
//! returns once its entry is gone. A timed wait gives the checker a scheduling point and then,
//! if nobody woke it, times out, so both outcomes are explored. A lost wakeup shows up as the
//! checker's deadlock report.
//!
//! The protocols above run unchanged: only this emulation and the spin bounds
//! ([`crate::spin`]) differ under a model checker.

#[cfg(loom)]
use ::loom::{
    lazy_static,
    sync::{Condvar, Mutex},
    thread::yield_now,
};
#[cfg(shuttle)]
use ::shuttle::{
    lazy_static,
    sync::{Condvar, Mutex},
    thread::yield_now,
};

use crate::atomic::{AtomicU32, Ordering};
use crate::futex::Error;

struct Waiter {
    addr: usize,
    bitset: u32,
    id: u64,
}

struct Table {
    /// Sleeping waiters in arrival order.
    waiters: Vec<Waiter>,
    next_id: u64,
}

struct Emulated {
    table: Mutex<Table>,
    woken: Condvar,
}

lazy_static! {
    static ref FUTEXES: Emulated = Emulated {
        table: Mutex::new(Table {
            waiters: Vec::new(),
            next_id: 0
        }),
        woken: Condvar::new(),
    };
}

pub(crate) fn futex_wait(
    addr: usize,
    word: &AtomicU32,
    expected: u32,
    bitset: u32,
    timed: bool,
) -> Result<(), Error> {
    let mut table = FUTEXES.table.lock().unwrap();
    if word.load(Ordering::SeqCst) != expected {
        return Err(Error::ValueChanged);
    }
    let id = table.next_id;
    table.next_id += 1;
    table.waiters.push(Waiter { addr, bitset, id });
    if timed {
        drop(table);
        yield_now();
        let mut table = FUTEXES.table.lock().unwrap();
        return match table.waiters.iter().position(|w| w.id == id) {
            Some(pos) => {
                table.waiters.remove(pos);
                Err(Error::TimedOut)
            }
            None => Ok(()),
        };
    }
    while table.waiters.iter().any(|w| w.id == id) {
        table = FUTEXES.woken.wait(table).unwrap();
    }
    Ok(())
}

pub(crate) fn futex_wake(addr: usize, n: u32, bitset: u32) -> usize {
    let mut table = FUTEXES.table.lock().unwrap();
    let woken = take_waiters(&mut table, addr, bitset, n as usize, None);
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    woken
}

/// `FUTEX_WAKE_OP` on one word: changes it and wakes, atomically with respect to waiters.
pub(crate) fn futex_update_and_wake(
    addr: usize,
    word: &AtomicU32,
    update: impl Fn(u32) -> u32,
    n: u32,
) -> usize {
    let mut table = FUTEXES.table.lock().unwrap();
    let mut old = word.load(Ordering::SeqCst);
    while let Err(now) = word.compare_exchange(old, update(old), Ordering::SeqCst, Ordering::SeqCst)
    {
        old = now;
    }
    let woken = take_waiters(&mut table, addr, u32::MAX, n as usize, None);
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    woken
}

pub(crate) fn futex_requeue(
    addr: usize,
    word: &AtomicU32,
    expected: Option<u32>,
    n_wake: u32,
    target: usize,
    n_requeue: u32,
) -> Result<usize, Error> {
    let mut table = FUTEXES.table.lock().unwrap();
    if let Some(expected) = expected {
        if word.load(Ordering::SeqCst) != expected {
            return Err(Error::ValueChanged);
        }
    }
    let woken = take_waiters(&mut table, addr, u32::MAX, n_wake as usize, None);
    let moved = take_waiters(&mut table, addr, u32::MAX, n_requeue as usize, Some(target));
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    Ok(woken + moved)
}

/// Removes (or, with `move_to`, re-addresses) the first `n` waiters of `addr` whose bitset
/// shares a bit with `bitset`.
fn take_waiters(
    table: &mut Table,
    addr: usize,
    bitset: u32,
    n: usize,
    move_to: Option<usize>,
) -> usize {
    let mut done = 0;
    let mut i = 0;
    while i < table.waiters.len() && done < n {
        let waiter = &mut table.waiters[i];
        if waiter.addr != addr || waiter.bitset & bitset == 0 {
            i += 1;
            continue;
        }
        done += 1;
        match move_to {
            Some(target) => {
                waiter.addr = target;
                i += 1;
            }
            None => {
                table.waiters.remove(i);
            }
        }
    }
    done
}
