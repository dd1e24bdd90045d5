//! Per-thread shards of what every transaction used to share: transaction ids and the
//! active-transaction table.
//!
//! Both used to be one word or one latch for the whole database: each transaction's begin
//! incremented one counter, and its begin, commit and end latched one hash map. On a
//! 16-core machine every thread's transactions then met on those two cache lines three or
//! four times a transaction. Here each is split into [`SHARDS`] shards on cache lines of
//! their own, and a thread always uses the same shard (`storage::shard::thread_index() %
//! SHARDS`), so up to `SHARDS` threads never write the same line on this path.
//!
//! ```text
//!   TxnIds:       shard k hands out k, k + SHARDS, k + 2·SHARDS, …  (unique; not in time order)
//!   ActiveTable:  shard k: latch ─ { txn id → ActiveTxn } of the transactions begun on
//!                 threads with shard k
//!   checkpoint:   latches every shard exclusively, in order, appends its begin record,
//!                 reads every shard's entries (the protocol of `recovery::checkpoint`)
//!   commit:       latches its own shard shared while it appends its commit record
//! ```
//!
//! Transaction ids need only be unique and larger than every id in the log (recovery moves
//! every shard past the largest it saw); nothing orders transactions by id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam::utils::CachePadded;
use storage::latch::{Latch, LatchWriteGuard};
use storage::Lsn;
use wal::TxnId;

use crate::db::{ActiveTxn, RunningTxn};

/// Shards of the id counter and the active-transaction table: more than the threads of any
/// machine this is measured on, so that each thread has one of its own.
pub(crate) const SHARDS: usize = 64;

/// The calling thread's shard.
#[inline]
pub(crate) fn thread_shard() -> usize {
    storage::shard::thread_index() % SHARDS
}

/// Transaction ids, handed out per shard: shard `k`'s `n`-th id is `n * SHARDS + k`.
pub(crate) struct TxnIds {
    next: Box<[CachePadded<AtomicU64>]>,
}

impl TxnIds {
    /// Ids from 1 on.
    pub(crate) fn new() -> TxnIds {
        let ids = TxnIds {
            next: (0..SHARDS)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        };
        ids.start_after(0);
        ids
    }

    /// A fresh id, from the calling thread's shard.
    #[inline]
    pub(crate) fn next(&self) -> TxnId {
        let k = thread_shard();
        let n = self.next[k].fetch_add(1, Ordering::Relaxed);
        TxnId(n * SHARDS as u64 + k as u64)
    }

    /// Makes every id handed out from now on larger than `largest` (recovery, after reading
    /// the log).
    pub(crate) fn start_after(&self, largest: u64) {
        let first_round = largest / SHARDS as u64 + 1;
        for shard in self.next.iter() {
            shard.fetch_max(first_round, Ordering::Relaxed);
        }
    }

    /// A bound every id handed out so far lies below (a checkpoint records it).
    pub(crate) fn upper_bound(&self) -> u64 {
        let round = self
            .next
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (round + 1) * SHARDS as u64
    }
}

type Shard = Latch<HashMap<u64, Arc<ActiveTxn>>>;

/// The active-transaction table (`xactions` on), one latched map per shard.
pub(crate) struct ActiveTable {
    shards: Box<[CachePadded<Shard>]>,
}

impl ActiveTable {
    pub(crate) fn new(latching: bool) -> ActiveTable {
        ActiveTable {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Latch::new(HashMap::new(), latching)))
                .collect(),
        }
    }

    /// Enters `t` in the calling thread's shard; returns the shard, which the transaction
    /// keeps for its commit and end.
    pub(crate) fn register(&self, t: &Arc<ActiveTxn>) -> usize {
        let k = thread_shard();
        self.shards[k].write().insert(t.id.0, t.clone());
        k
    }

    pub(crate) fn deregister(&self, t: &ActiveTxn, shard: usize) {
        self.shards[shard].write().remove(&t.id.0);
    }

    /// Runs `f` with shard `shard` latched shared (a commit record's append).
    pub(crate) fn with_shared<R>(&self, shard: usize, f: impl FnOnce() -> R) -> R {
        let _shared = self.shards[shard].read();
        f()
    }

    /// Runs `f` with every shard latched exclusively, then reads every entry, still latched.
    pub(crate) fn with_all_exclusive<R>(&self, f: impl FnOnce() -> R) -> (R, Vec<RunningTxn>) {
        let latched: Vec<LatchWriteGuard<'_, _>> = self.shards.iter().map(|s| s.write()).collect();
        let r = f();
        let list = latched
            .iter()
            .flat_map(|shard| shard.values())
            .map(|a| RunningTxn {
                txn: a.id,
                last_lsn: Lsn(a.last_lsn.load(Ordering::Relaxed)),
                first_lsn: Lsn(a.first_lsn.load(Ordering::Relaxed)),
                committed: a.committed.load(Ordering::Relaxed),
            })
            .collect();
        (r, list)
    }

    /// How many transactions are registered.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// (txn, last LSN) of every registered transaction.
    pub(crate) fn list(&self) -> Vec<(TxnId, u64)> {
        self.shards
            .iter()
            .flat_map(|s| {
                s.read()
                    .values()
                    .map(|a| (a.id, a.last_lsn.load(Ordering::Relaxed)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_across_threads_and_above_a_recovered_bound() {
        let ids = Arc::new(TxnIds::new());
        ids.start_after(1_000);
        let per_thread: Vec<Vec<u64>> = (0..4)
            .map(|_| {
                let ids = ids.clone();
                std::thread::spawn(move || (0..1_000).map(|_| ids.next().0).collect())
            })
            .map(|h| h.join().unwrap())
            .collect();
        let all: HashSet<u64> = per_thread.iter().flatten().copied().collect();
        assert_eq!(all.len(), 4_000, "no id handed out twice");
        assert!(all.iter().all(|&id| id > 1_000));
        assert!(all.iter().all(|&id| id < ids.upper_bound()));
    }

    #[test]
    fn a_thread_keeps_its_shard() {
        let a = thread_shard();
        assert_eq!(thread_shard(), a);
        let other = std::thread::spawn(thread_shard).join().unwrap();
        assert!(other < SHARDS);
    }

    #[test]
    fn the_table_lists_transactions_of_every_shard() {
        let table = Arc::new(ActiveTable::new(true));
        let handles: Vec<_> = (0..3u64)
            .map(|i| {
                let table = table.clone();
                std::thread::spawn(move || {
                    let t = Arc::new(ActiveTxn::new(TxnId(i + 1)));
                    let shard = table.register(&t);
                    (t, shard)
                })
            })
            .collect();
        let entered: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(table.len(), 3);
        let (_, running) = table.with_all_exclusive(|| ());
        let mut ids: Vec<u64> = running.iter().map(|r| r.txn.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3]);
        for (t, shard) in &entered {
            table.deregister(t, *shard);
        }
        assert_eq!(table.len(), 0);
        assert!(table.list().is_empty());
    }
}
