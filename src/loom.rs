//! Under `cfg(loom)`: an emulated futex for loom's model checker.
//!
//! Real futexes are kernel objects loom cannot see, so under loom [`Futex`](crate::futex::Futex)
//! routes wait, wake and requeue here. State: one table of `(address, waiter id)` entries in
//! arrival order, guarded by a loom `Mutex` so that "check the word, then enqueue" is atomic with
//! respect to wakers (the kernel's hash-bucket lock does the same), and one loom `Condvar` that
//! every wake notifies; a waiter returns once its entry is gone. A timed wait gives loom a
//! preemption point and then, if nobody woke it, times out, so models explore both outcomes.
//! A lost wakeup shows up as loom's deadlock report.

use ::loom::sync::atomic::{AtomicU32, Ordering};
use ::loom::sync::{Condvar, Mutex};

use crate::futex::Error;

struct Table {
    /// Sleeping waiters in arrival order: (futex address, waiter id).
    waiters: Vec<(usize, u64)>,
    next_id: u64,
}

struct Emulated {
    table: Mutex<Table>,
    woken: Condvar,
}

::loom::lazy_static! {
    static ref FUTEXES: Emulated = Emulated {
        table: Mutex::new(Table { waiters: Vec::new(), next_id: 0 }),
        woken: Condvar::new(),
    };
}

pub(crate) fn futex_wait(
    addr: usize,
    word: &AtomicU32,
    expected: u32,
    timed: bool,
) -> Result<(), Error> {
    let mut table = FUTEXES.table.lock().unwrap();
    if word.load(Ordering::SeqCst) != expected {
        return Err(Error::ValueChanged);
    }
    let id = table.next_id;
    table.next_id += 1;
    table.waiters.push((addr, id));
    if timed {
        drop(table);
        ::loom::thread::yield_now();
        let mut table = FUTEXES.table.lock().unwrap();
        return match table.waiters.iter().position(|&(_, w)| w == id) {
            Some(pos) => {
                table.waiters.remove(pos);
                Err(Error::TimedOut)
            }
            None => Ok(()),
        };
    }
    while table.waiters.iter().any(|&(_, w)| w == id) {
        table = FUTEXES.woken.wait(table).unwrap();
    }
    Ok(())
}

pub(crate) fn futex_wake(addr: usize, n: u32) -> usize {
    let mut table = FUTEXES.table.lock().unwrap();
    let woken = take_waiters(&mut table, addr, n as usize, None);
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
    let woken = take_waiters(&mut table, addr, n as usize, None);
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
    let woken = take_waiters(&mut table, addr, n_wake as usize, None);
    let moved = take_waiters(&mut table, addr, n_requeue as usize, Some(target));
    if woken > 0 {
        FUTEXES.woken.notify_all();
    }
    Ok(woken + moved)
}

/// Removes (or, with `move_to`, re-addresses) the first `n` waiters of `addr`.
fn take_waiters(table: &mut Table, addr: usize, n: usize, move_to: Option<usize>) -> usize {
    let mut done = 0;
    let mut i = 0;
    while i < table.waiters.len() && done < n {
        if table.waiters[i].0 != addr {
            i += 1;
            continue;
        }
        done += 1;
        match move_to {
            Some(target) => {
                table.waiters[i].0 = target;
                i += 1;
            }
            None => {
                table.waiters.remove(i);
            }
        }
    }
    done
}
