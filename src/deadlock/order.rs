//! The lock order graph: an edge A -> B for each lock B taken while A was held, with the call
//! sites; an edge that closes a cycle is reported (once per pair).

use core::fmt;
use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::Location;
use std::sync::atomic::Ordering;

use super::record::{
    lock, outside_checks, tracker, Held, LockName, Tracker, FORGOTTEN, SHARED_BIT, TRACKER,
};

/// One pair of the order graph: `first` was held (taken at `first_at`) when `then` was
/// taken at `then_at`, by `thread`.
#[derive(Debug, Clone)]
pub struct OrderEdge {
    /// The lock held.
    pub first: LockName,
    /// Where it was taken.
    pub first_at: &'static Location<'static>,
    /// The lock taken while `first` was held.
    pub then: LockName,
    /// Where it was taken.
    pub then_at: &'static Location<'static>,
    /// The thread that took them (its name, or its id).
    pub thread: String,
}

impl fmt::Display for OrderEdge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (taken at {}) then {} at {}, in thread {}",
            self.first, self.first_at, self.then, self.then_at, self.thread
        )
    }
}

/// Two locks taken in an order that contradicts an order seen before: two threads running
/// the two can each hold one and wait for the other. Or, with `before` empty and the same
/// lock on both sides of `now`, a read lock asked for again by a thread that holds it: a
/// writer that starts waiting between the two keeps the second out, and the thread waits
/// for itself.
#[derive(Debug, Clone)]
pub struct OrderViolation {
    /// The order seen now.
    pub now: OrderEdge,
    /// The order seen before, from `now.then` to `now.first`: one pair, or a chain of
    /// pairs through other locks; empty for a read lock asked for again.
    pub before: Vec<OrderEdge>,
}

impl fmt::Display for OrderViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.before.is_empty() {
            return write!(
                f,
                "read lock asked for again: {}; a writer that waits between the two \
                 keeps the second out, and the thread waits for itself",
                self.now
            );
        }
        writeln!(f, "lock order inversion: {}", self.now)?;
        write!(f, "  contradicts the order seen before:")?;
        for edge in &self.before {
            write!(f, "\n    {edge}")?;
        }
        Ok(())
    }
}

#[derive(Default)]
pub(super) struct Graph {
    /// `after[a][b]`: `b` was taken while `a` was held; the first time it was seen.
    after: HashMap<u64, HashMap<u64, OrderEdge>>,
    /// `before[b]`: every `a` with `after[a][b]`.
    before: HashMap<u64, HashSet<u64>>,
    /// Pairs reported, so that each is reported once.
    reported: HashSet<(u64, u64)>,
    violations: Vec<OrderViolation>,
}

impl Graph {
    /// The edges of a path from `from` to `to`, if there is one (breadth first: the
    /// shortest).
    fn path(&self, from: u64, to: u64) -> Option<Vec<OrderEdge>> {
        let mut came_from: HashMap<u64, u64> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(node) = queue.pop_front() {
            if node == to {
                let mut path = Vec::new();
                let mut at = to;
                while at != from {
                    let previous = came_from[&at];
                    path.push(self.after[&previous][&at].clone());
                    at = previous;
                }
                path.reverse();
                return Some(path);
            }
            for &next in self.after.get(&node).into_iter().flat_map(HashMap::keys) {
                if next != from && !came_from.contains_key(&next) {
                    came_from.insert(next, node);
                    queue.push_back(next);
                }
            }
        }
        None
    }

    fn remove(&mut self, id: u64) {
        self.reported.retain(|&(a, b)| a != id && b != id);
        if let Some(after) = self.after.remove(&id) {
            for next in after.keys() {
                if let Some(before) = self.before.get_mut(next) {
                    before.remove(&id);
                }
            }
        }
        if let Some(before) = self.before.remove(&id) {
            for previous in before {
                if let Some(after) = self.after.get_mut(&previous) {
                    after.remove(&id);
                }
            }
        }
    }
}

/// Puts "each of `held`, then `wanted`" in the order graph; reports each pair that closes
/// a cycle instead.
pub(super) fn order(held: &[Held], wanted: Held, thread: &str) {
    let mut found = Vec::new();
    {
        let mut graph = lock(&tracker().graph);
        for first in held {
            let (a, b) = (first.lock.id, wanted.lock.id);
            if graph
                .after
                .get(&a)
                .is_some_and(|after| after.contains_key(&b))
            {
                continue;
            }
            let edge = OrderEdge {
                first: first.lock,
                first_at: first.at,
                then: wanted.lock,
                then_at: wanted.at,
                thread: thread.to_owned(),
            };
            // A read lock asked for again: a cycle of one lock, reported, never put in.
            let cycle = if a == b {
                Some(Vec::new())
            } else {
                graph.path(b, a)
            };
            if let Some(before) = cycle {
                if graph.reported.insert((a.min(b), a.max(b))) {
                    let violation = OrderViolation {
                        now: edge.clone(),
                        before,
                    };
                    graph.violations.push(violation.clone());
                    found.push(violation);
                }
            }
            // Reported or not, the order was seen: later cycles may run through it.
            if a != b {
                graph.after.entry(a).or_default().insert(b, edge);
                graph.before.entry(b).or_default().insert(a);
            }
        }
    }
    for violation in found {
        crate::futex::sys::process::write_to_stderr(&format!("futexkit: {violation}\n"));
    }
}

/// Every lock order inversion found so far, in the order they were found (each pair of
/// locks once).
pub fn order_violations() -> Vec<OrderViolation> {
    outside_checks(|| lock(&tracker().graph).violations.clone()).unwrap_or_default()
}

pub(super) fn forget(id: u64) {
    let current = TRACKER.load(Ordering::Acquire);
    if current.is_null() {
        return;
    }
    // SAFETY: a published tracker is leaked: it lives as long as the program.
    let tracker = unsafe { &*current };
    outside_checks(|| lock(&tracker.graph).remove(id));
}

pub(super) fn forget_shared(start: usize, len: usize) {
    let current = TRACKER.load(Ordering::Acquire);
    if current.is_null() {
        return;
    }
    // SAFETY: a published tracker is leaked: it lives as long as the program.
    let tracker = unsafe { &*current };
    outside_checks(|| forget_range(tracker, start, len));
}

fn forget_range(tracker: &Tracker, start: usize, len: usize) {
    let mut graph = lock(&tracker.graph);
    let range = (start as u64 | SHARED_BIT)..((start + len) as u64 | SHARED_BIT);
    let gone: Vec<u64> = graph
        .after
        .keys()
        .chain(graph.before.keys())
        .copied()
        .filter(|id| range.contains(id))
        .collect();
    for id in gone {
        graph.remove(id);
    }
    drop(graph);
    FORGOTTEN.fetch_add(1, Ordering::Relaxed);
}
