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
//!
//! Threads. With [`LockConfig::thread_bound`](super::LockConfig::thread_bound) every
//! transaction stays on its thread (a server's worker keeps its connections' open
//! transactions), so a transaction that is not running waits for its thread: while a
//! transaction `R` of thread `h` is a registered waiter, every other transaction bound to `h`
//! has an implicit edge to `R`. A wait for a transaction of one's own thread is refused before
//! it queues (`LockHead::own_thread_blocker`); the implicit edges find the longer cycles, such
//! as `T_B` (thread 1) waiting for `T_C` (thread 2) waiting for `T_A`, idle on thread 1.
//! Such an edge appears when `R` registers, so `R` is the last member of the cycle and finds
//! it, as above. Each edge therefore carries its target's thread (`UNBOUND` if none).

use std::collections::{HashMap, HashSet};

use super::mode::LockMode;
use super::name::{BuildNameHasher, LockName};
use super::table::UNBOUND;
use super::TxnId;

/// An out-edge: the transaction waited for, and its thread (`UNBOUND` if none).
type Edge = (TxnId, u32);

/// A registered waiter: its thread, whom it waits for, each with its thread, and the lock
/// it asked for (set as it registers; kept for [`DeadlockReport`]).
#[derive(Default)]
struct Node {
    home: u32,
    blockers: Vec<Edge>,
    wants: Option<(LockName, LockMode)>,
}

/// Who waits for whom. Protected by the lock manager's graph mutex.
#[derive(Default)]
pub struct WaitForGraph {
    edges: HashMap<TxnId, Node, BuildNameHasher>,
    /// The registered waiter of each thread with thread-bound transactions.
    thread_waiter: HashMap<u32, TxnId>,
    /// The last cycle broken (see [`WaitForGraph::note_deadlock`]).
    last: Option<DeadlockReport>,
}

/// One transaction on a deadlock's cycle, and the lock it waited for: `None` for one that was
/// not waiting in the lock manager but for its thread (a thread-bound transaction, idle while
/// another transaction of its thread waits; see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleMember {
    pub txn: TxnId,
    pub wants: Option<(LockName, LockMode)>,
}

/// A deadlock the manager broke: the cycle of the wait-for graph, each member waiting for the
/// next and the last for the first, beginning with the victim. Only its victim's request was
/// refused; the others went on waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlockReport {
    pub cycle: Vec<CycleMember>,
}

impl DeadlockReport {
    /// The transaction whose request was refused.
    pub fn victim(&self) -> TxnId {
        self.cycle[0].txn
    }

    /// The cycle in words, each lock named by `name`: `T7 (the victim) waits for S on … → T9
    /// waits for X on … → T7`.
    pub fn describe(&self, name: impl Fn(LockName) -> String) -> String {
        let mut out = String::new();
        for (i, m) in self.cycle.iter().enumerate() {
            let victim = if i == 0 { " (the victim)" } else { "" };
            let what = match m.wants {
                Some((lock, mode)) => format!("waits for {mode} on {}", name(lock)),
                None => "waits for its thread".to_string(),
            };
            out += &format!("{}{victim} {what} → ", m.txn);
        }
        out + &self.victim().to_string()
    }
}

impl std::fmt::Display for DeadlockReport {
    /// [`DeadlockReport::describe`] with the locks' own names (`table 8 record 0x…`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(|lock| lock.to_string()))
    }
}

impl WaitForGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the out-edges of `waiter`, bound to thread `home` (or `UNBOUND`), registering
    /// it as blocked; `blockers` name their threads too.
    pub fn set_edges(
        &mut self,
        waiter: TxnId,
        home: u32,
        blockers: impl IntoIterator<Item = Edge>,
    ) {
        let node = self.edges.entry(waiter).or_default();
        node.home = home;
        let list = &mut node.blockers;
        list.clear();
        list.extend(blockers.into_iter().filter(|b| b.0 != waiter));
        list.sort_unstable();
        list.dedup();
        if home != UNBOUND {
            self.thread_waiter.insert(home, waiter);
        }
    }

    /// Records the lock the registered waiter `waiter` asked for.
    pub fn note_wants(&mut self, waiter: TxnId, name: LockName, mode: LockMode) {
        if let Some(node) = self.edges.get_mut(&waiter) {
            node.wants = Some((name, mode));
        }
    }

    /// Keeps `cycle` (from [`Self::cycle_through`], its victim first) as the last deadlock
    /// broken, with the lock each member waited for.
    pub fn note_deadlock(&mut self, cycle: &[TxnId]) {
        let cycle = cycle
            .iter()
            .map(|&txn| CycleMember {
                txn,
                wants: self.edges.get(&txn).and_then(|n| n.wants),
            })
            .collect();
        self.last = Some(DeadlockReport { cycle });
    }

    /// The last deadlock broken, if any.
    pub fn last_deadlock(&self) -> Option<&DeadlockReport> {
        self.last.as_ref()
    }

    /// Forgets `txn` as a waiter (it was granted, timed out, or chosen as victim).
    pub fn remove(&mut self, txn: TxnId) {
        if let Some(node) = self.edges.remove(&txn) {
            if node.home != UNBOUND && self.thread_waiter.get(&node.home) == Some(&txn) {
                self.thread_waiter.remove(&node.home);
            }
        }
    }

    /// Whether `txn` is registered as blocked.
    pub fn is_waiting(&self, txn: TxnId) -> bool {
        self.edges.contains_key(&txn)
    }

    /// The transactions `txn` waits for (as a registered waiter).
    pub fn blockers(&self, txn: TxnId) -> impl Iterator<Item = TxnId> + '_ {
        self.edges
            .get(&txn)
            .into_iter()
            .flat_map(|n| n.blockers.iter().map(|b| b.0))
    }

    /// Every transaction `txn` (bound to `home`) waits for: its blockers if it is a registered
    /// waiter, else the registered waiter of its thread, if any.
    fn out_edges(&self, txn: TxnId, home: u32) -> Vec<Edge> {
        if let Some(node) = self.edges.get(&txn) {
            return node.blockers.clone();
        }
        match self.thread_waiter.get(&home) {
            Some(&r) if home != UNBOUND && r != txn => vec![(r, home)],
            _ => Vec::new(),
        }
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
        if first.blockers.is_empty() {
            return None;
        }
        let mut visited: HashSet<TxnId> = HashSet::new();
        // Stack of (node, its out-edges, index of the next); the stack is the current path.
        let mut stack: Vec<(TxnId, Vec<Edge>, usize)> = vec![(start, first.blockers.clone(), 0)];
        visited.insert(start);
        while let Some((_, out, next)) = stack.last_mut() {
            let Some(&(target, home)) = out.get(*next) else {
                stack.pop();
                continue;
            };
            *next += 1;
            if target == start {
                return Some(stack.iter().map(|(n, _, _)| *n).collect());
            }
            if visited.insert(target) {
                let out = self.out_edges(target, home);
                stack.push((target, out, 0));
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
        g.set_edges(t(1), UNBOUND, [(t(2), UNBOUND)]);
        assert_eq!(g.cycle_through(t(1)), None);
        g.set_edges(t(2), UNBOUND, [(t(1), UNBOUND)]);
        assert_eq!(g.cycle_through(t(2)), Some(vec![t(2), t(1)]));
        assert_eq!(g.cycle_through(t(1)), Some(vec![t(1), t(2)]));
        g.remove(t(2));
        assert_eq!(g.cycle_through(t(1)), None);
    }

    #[test]
    fn cycle_not_through_start_is_not_reported() {
        // 1 -> 2 -> 3 -> 2: 1 is blocked by a deadlock but is not on it.
        let mut g = WaitForGraph::new();
        g.set_edges(t(1), UNBOUND, [(t(2), UNBOUND)]);
        g.set_edges(t(2), UNBOUND, [(t(3), UNBOUND)]);
        g.set_edges(t(3), UNBOUND, [(t(2), UNBOUND)]);
        assert_eq!(g.cycle_through(t(1)), None);
        assert!(g.cycle_through(t(3)).is_some());
    }

    #[test]
    fn three_cycle_with_branches() {
        let mut g = WaitForGraph::new();
        g.set_edges(t(1), UNBOUND, [(t(5), UNBOUND), (t(2), UNBOUND)]);
        g.set_edges(t(2), UNBOUND, [(t(4), UNBOUND), (t(3), UNBOUND)]);
        g.set_edges(t(4), UNBOUND, []);
        g.set_edges(t(3), UNBOUND, [(t(1), UNBOUND)]);
        assert_eq!(g.cycle_through(t(1)), Some(vec![t(1), t(2), t(3)]));
    }

    #[test]
    fn a_transaction_that_is_not_running_waits_for_its_threads_waiter() {
        // T1 is idle on thread 1, whose T2 waits for T3 (thread 2), which waits for T1.
        let mut g = WaitForGraph::new();
        g.set_edges(t(3), 2, [(t(1), 1)]);
        assert_eq!(g.cycle_through(t(3)), None, "thread 1 is not waiting yet");
        g.set_edges(t(2), 1, [(t(3), 2)]);
        assert_eq!(g.cycle_through(t(2)), Some(vec![t(2), t(3), t(1)]));
        assert_eq!(g.cycle_through(t(3)), Some(vec![t(3), t(1), t(2)]));
        g.remove(t(2));
        assert_eq!(g.cycle_through(t(3)), None, "thread 1 runs again");
        // Unbound transactions have no thread to wait for.
        let mut g = WaitForGraph::new();
        g.set_edges(t(3), UNBOUND, [(t(1), UNBOUND)]);
        g.set_edges(t(2), UNBOUND, [(t(3), UNBOUND)]);
        assert_eq!(g.cycle_through(t(2)), None);
    }

    #[test]
    fn self_edges_and_duplicates_are_dropped() {
        let mut g = WaitForGraph::new();
        g.set_edges(
            t(1),
            UNBOUND,
            [(t(1), UNBOUND), (t(2), UNBOUND), (t(2), UNBOUND)],
        );
        assert_eq!(g.blockers(t(1)).collect::<Vec<_>>(), [t(2)]);
        assert!(g.is_waiting(t(1)) && !g.is_waiting(t(2)));
        assert_eq!(g.cycle_through(t(2)), None);
    }
}
