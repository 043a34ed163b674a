//! The wait graph and `check_deadlock`: threads that wait, untimed, for a lock another holds
//! in a mode that keeps them out; a cycle is returned only if its threads' records stood still
//! between two reads.

use core::fmt;
use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use super::record::{
    lock, outside_checks, thread_name, tracker, Held, ThreadRecord, ThreadState, PERIOD,
};
use super::{LockName, Mode};

/// One thread of a [`Deadlock`]: it waits for a lock the next thread holds.
#[derive(Debug, Clone)]
pub struct Waiter {
    /// The thread: its name in quotes, or its id.
    pub thread: String,
    /// The lock it waits for.
    pub lock: LockName,
    /// How it wants it.
    pub mode: Mode,
    /// Where it waits.
    pub waits_at: &'static Location<'static>,
    /// Where the next thread of the cycle took the lock.
    pub holder_took_it_at: &'static Location<'static>,
    /// How the next thread holds it.
    pub held_as: Mode,
}

/// Threads that wait for each other: each waits, untimed, for a lock the next one holds,
/// and the last for one the first holds. None of them can go on.
#[derive(Debug, Clone)]
pub struct Deadlock {
    /// The threads of the cycle, in order.
    pub threads: Vec<Waiter>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deadlock of {} threads:", self.threads.len())?;
        let n = self.threads.len();
        for (i, waiter) in self.threads.iter().enumerate() {
            let holder = &self.threads[(i + 1) % n];
            write!(
                f,
                "\n  thread {} waits at {} for {} ({}), which thread {} holds ({}, taken at {})",
                waiter.thread,
                waiter.waits_at,
                waiter.lock,
                waiter.mode,
                holder.thread,
                waiter.held_as,
                waiter.holder_took_it_at
            )?;
        }
        Ok(())
    }
}

/// The cycles of threads that wait for each other now (module documentation, "Waits"):
/// empty when none does. Each cycle is returned once.
pub fn check_deadlock() -> Vec<Deadlock> {
    outside_checks(find_deadlocks).unwrap_or_default()
}

/// What `copy` takes out of the value under `mutex`, into a vector given room for `len` of it
/// before the mutex is taken, so that nothing allocates under the mutex: a thread waiting for
/// it (to record a lock it took) may hold a lock that an allocation takes (an allocator built on
/// futexkit locks), and would wait for this thread while this one waited for it.
fn copied_outside<T, E>(
    mutex: &Mutex<T>,
    len: impl Fn(&T) -> usize,
    mut copy: impl FnMut(&T, &mut Vec<E>),
) -> Vec<E> {
    let mut out = Vec::new();
    loop {
        let needed = len(&lock(mutex));
        out.reserve(needed);
        let value = lock(mutex);
        // It may have grown in between: then make room again.
        if len(&value) <= out.capacity() {
            copy(&value, &mut out);
            return out;
        }
    }
}

fn find_deadlocks() -> Vec<Deadlock> {
    let period = PERIOD.load(Ordering::Relaxed);
    if period == 0 {
        return Vec::new();
    }
    let records: Vec<Arc<ThreadRecord>> =
        copied_outside(&tracker().threads, Vec::len, |threads, out| {
            out.extend(threads.iter().filter_map(Weak::upgrade));
        });
    // A cycle whose threads all kept their versions between the two reads is a deadlock;
    // one that changed may have been passing: look again, a few times.
    let mut confirmed = Vec::new();
    for _ in 0..5 {
        let states: Vec<ThreadState> = records
            .iter()
            .map(|record| {
                let mut seen = ThreadState::default();
                seen.held = copied_outside(
                    &record.state,
                    |state| state.held.len(),
                    |state, held| {
                        held.extend_from_slice(&state.held);
                        (seen.version, seen.period, seen.waiting) =
                            (state.version, state.period, state.waiting);
                    },
                );
                if seen.period == period {
                    seen
                } else {
                    ThreadState::default()
                }
            })
            .collect();
        let cycles = cycles(&states);
        confirmed = cycles
            .iter()
            .filter(|cycle| {
                cycle
                    .iter()
                    .all(|&(i, _)| lock(&records[i].state).version == states[i].version)
            })
            .map(|cycle| Deadlock {
                threads: cycle
                    .iter()
                    .map(|&(i, holder)| {
                        let waiting = states[i].waiting.expect("a waiter of a cycle");
                        Waiter {
                            thread: thread_name(records[i].thread.as_ref()),
                            lock: waiting.lock,
                            mode: waiting.mode,
                            waits_at: waiting.at,
                            holder_took_it_at: holder.at,
                            held_as: holder.mode,
                        }
                    })
                    .collect(),
            })
            .collect::<Vec<_>>();
        if confirmed.len() == cycles.len() {
            break;
        }
    }
    confirmed
}

/// The cycles of the wait graph of `states`: thread `i` has an edge to each other thread
/// holding the lock `i` waits for in a mode that keeps it out. Each cycle is a list of
/// (thread, the entry of the next thread that keeps it out).
fn cycles(states: &[ThreadState]) -> Vec<Vec<(usize, Held)>> {
    let edges: Vec<Vec<(usize, Held)>> = states
        .iter()
        .enumerate()
        .map(|(i, state)| {
            let Some(waiting) = state.waiting else {
                return Vec::new();
            };
            states
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .flat_map(|(j, other)| {
                    other
                        .held
                        .iter()
                        .filter(move |h| h.lock == waiting.lock && waiting.mode.kept_out_by(h.mode))
                        .map(move |h| (j, *h))
                })
                .collect()
        })
        .collect();
    // Depth first, keeping the path: an edge back into it closes a cycle.
    let mut done = vec![false; states.len()];
    let mut in_cycle = vec![false; states.len()];
    let mut found = Vec::new();
    for start in 0..states.len() {
        if done[start] {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        let mut on_path = vec![false; states.len()];
        on_path[start] = true;
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            let Some(&(to, _)) = edges[node].get(*next) else {
                on_path[node] = false;
                done[node] = true;
                path.pop();
                continue;
            };
            *next += 1;
            if on_path[to] {
                let from = path
                    .iter()
                    .position(|&(n, _)| n == to)
                    .expect("on the path");
                let members: Vec<usize> = path[from..].iter().map(|&(n, _)| n).collect();
                if members.iter().all(|&n| !in_cycle[n]) {
                    // Each member left by the edge it took last (`next - 1`).
                    let cycle = path[from..]
                        .iter()
                        .map(|&(n, next)| (n, edges[n][next - 1].1))
                        .collect();
                    for &n in &members {
                        in_cycle[n] = true;
                    }
                    found.push(cycle);
                }
            } else if !done[to] {
                on_path[to] = true;
                path.push((to, 0));
            }
        }
    }
    found
}
