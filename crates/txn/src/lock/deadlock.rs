//! The wait-for graph and deadlock detection.
//!
//! A node is a *registered* waiter: a transaction blocked in the lock manager that is
//! about to sleep or sleeps. Its out-edges are the transactions it waits for. A waiter
//! that spins first (at the front of its queue, see `super::manager`) registers only when
//! its spin ends without a grant; one that will not spin registers as it queues. A running
//! transaction, and a spinning one, have no entry. A blocked request `W` on a lock head
//! waits for
//!
//! * every *other* holder whose granted mode is incompatible with `W`'s requested mode, and
//! * every request queued *ahead* of `W` (no barging: `W` cannot be granted before them).
//!
//! ```text
//!   T1 ──waits for──▶ T2 ──waits for──▶ T3
//!    ▲                                    │
//!    └────────────── waits for ───────────┘     a cycle: a deadlock
//! ```
//!
//! Maintenance. A waiter's edges depend only on the one lock head it waits in, so they are
//! computed when it registers and recomputed, under that head's bucket latch and then this
//! graph's mutex (always in that order), whenever the head changes while it has registered
//! waiters: a request enqueues ahead of them, a holder releases, a waiter is granted or
//! leaves. A head whose waiters all spin changes without the mutex. Edges may point at a
//! spinner (which has no entry yet); the registered waiters' edges are exact, never stale.
//!
//! Detection and its guarantee. Take a cycle of blocked transactions. None of them can be
//! granted, so every spinner among them stops spinning within its bounded spin and
//! registers; the *last* of them to register finds every other member registered with
//! exact edges, and searches for a cycle through itself while still holding the graph
//! mutex it registered under — so it finds this one. Edges to new targets appear only
//! when a request blocks (its own, and those of waiters behind an upgrade it queues ahead
//! of them) or when a running holder's mode grows by an immediate upgrade; either way the
//! new target is not yet registered, so a cycle is complete in the graph only at its last
//! member's registration. Hence **every deadlock is found, at the latest when its last
//! spinner stops spinning (at once when nobody on it spins), and exactly one victim is
//! chosen per cycle**: the member that registered last. (A test spins 20 ms and finds the
//! deadlock well before the timeout.) Registered waiters also search again periodically (a
//! backstop, cheap when the graph is small). The victim's queued request is removed (its
//! other locks stay) and it gets the retryable
//! [`LockError::Deadlock`](super::LockError::Deadlock).

use std::collections::{HashMap, HashSet};

use super::name::BuildNameHasher;
use super::TxnId;

/// Who waits for whom. Protected by the lock manager's graph mutex.
#[derive(Default)]
pub struct WaitForGraph {
    edges: HashMap<TxnId, Vec<TxnId>, BuildNameHasher>,
}

impl WaitForGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the out-edges of `waiter` (registering it as blocked).
    pub fn set_edges(&mut self, waiter: TxnId, blockers: impl IntoIterator<Item = TxnId>) {
        let list = self.edges.entry(waiter).or_default();
        list.clear();
        list.extend(blockers.into_iter().filter(|b| *b != waiter));
        list.sort_unstable();
        list.dedup();
    }

    /// Forgets `txn` as a waiter (it was granted, timed out, or chosen as victim).
    pub fn remove(&mut self, txn: TxnId) {
        self.edges.remove(&txn);
    }

    /// Whether `txn` is registered as blocked.
    pub fn is_waiting(&self, txn: TxnId) -> bool {
        self.edges.contains_key(&txn)
    }

    /// The transactions `txn` waits for.
    pub fn blockers(&self, txn: TxnId) -> &[TxnId] {
        self.edges.get(&txn).map_or(&[], |v| v.as_slice())
    }

    /// Number of blocked transactions.
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// A cycle through `start`, as the list of transactions on it beginning with `start`,
    /// or `None`. Iterative depth-first search; runs only on the blocking path.
    pub fn cycle_through(&self, start: TxnId) -> Option<Vec<TxnId>> {
        let first = self.edges.get(&start)?;
        let mut visited: HashSet<TxnId> = HashSet::new();
        // Stack of (node, index of next out-edge); the stack itself is the current path.
        let mut stack: Vec<(TxnId, usize)> = vec![(start, 0)];
        visited.insert(start);
        if first.is_empty() {
            return None;
        }
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let out = self.blockers(node);
            if *next >= out.len() {
                stack.pop();
                continue;
            }
            let target = out[*next];
            *next += 1;
            if target == start {
                return Some(stack.iter().map(|(n, _)| *n).collect());
            }
            if visited.insert(target) {
                stack.push((target, 0));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u64) -> TxnId {
        TxnId(n)
    }

    #[test]
    fn two_cycle() {
        let mut g = WaitForGraph::new();
        g.set_edges(t(1), [t(2)]);
        assert_eq!(g.cycle_through(t(1)), None);
        g.set_edges(t(2), [t(1)]);
        assert_eq!(g.cycle_through(t(2)), Some(vec![t(2), t(1)]));
        assert_eq!(g.cycle_through(t(1)), Some(vec![t(1), t(2)]));
        g.remove(t(2));
        assert_eq!(g.cycle_through(t(1)), None);
    }

    #[test]
    fn cycle_not_through_start_is_not_reported() {
        // 1 -> 2 -> 3 -> 2: 1 is blocked by a deadlock but is not on it.
        let mut g = WaitForGraph::new();
        g.set_edges(t(1), [t(2)]);
        g.set_edges(t(2), [t(3)]);
        g.set_edges(t(3), [t(2)]);
        assert_eq!(g.cycle_through(t(1)), None);
        assert!(g.cycle_through(t(3)).is_some());
    }

    #[test]
    fn three_cycle_with_branches() {
        let mut g = WaitForGraph::new();
        g.set_edges(t(1), [t(5), t(2)]);
        g.set_edges(t(2), [t(4), t(3)]);
        g.set_edges(t(4), []);
        g.set_edges(t(3), [t(1)]);
        assert_eq!(g.cycle_through(t(1)), Some(vec![t(1), t(2), t(3)]));
    }

    #[test]
    fn self_edges_and_duplicates_are_dropped() {
        let mut g = WaitForGraph::new();
        g.set_edges(t(1), [t(1), t(2), t(2)]);
        assert_eq!(g.blockers(t(1)), &[t(2)]);
        assert!(g.is_waiting(t(1)) && !g.is_waiting(t(2)));
        assert_eq!(g.cycle_through(t(2)), None);
    }
}
