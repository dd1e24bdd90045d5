//! The lock manager: hierarchical two-phase locking with deadlock detection and escalation.
//!
//! * [`mode`]: the five modes, their compatibility matrix and supremum (upgrade) table;
//! * [`name`]: what is locked — database → table → page or record;
//! * `table`: the hash-partitioned lock table, one latch per bucket;
//! * [`deadlock`]: the wait-for graph and its cycle search;
//! * [`manager`]: [`LockManager`], the entry points, escalation, statistics.
//!
//! Locks are logical and transactional (held to commit or abort, deadlock-detected);
//! latches (`storage::latch`) are physical and short. The lock table's buckets are guarded
//! by latches; nothing here ever waits for a lock while holding a latch.

pub mod deadlock;
pub mod manager;
pub mod mode;
pub mod name;
#[cfg(test)]
mod partition_tests;
pub(crate) mod table;
#[cfg(test)]
mod tests;

pub use deadlock::{CycleMember, DeadlockReport};
pub use manager::{IoProbe, LockConfig, LockManager, LockStats, TxnLocks};
pub use mode::LockMode;
pub use name::LockName;

pub use crate::TxnId;

/// Where in the gap below a record a record lock's guard starts: the rank of the lowest key
/// whose insertion the lock must hold off. Next-key locking (ARIES/IM) makes a key's lock
/// guard the whole gap down to the key before it, which is coarser than most holders need:
/// a scan of one TPC-C district's new orders locks the next district's oldest, and that lock
/// also held off every insert at the end of the district before, which the scan never read.
/// So each grant carries a floor, and an insert's instant check of the key after its own
/// ([`LockManager::try_lock_record_instant`]) waits only for holders whose floor is at or
/// below the key it inserts; every other request ignores floors.
///
/// Ranks come from the caller (the engine's `KeySpec::rank`): any `u64` that never
/// decreases as keys ascend, so that a rank below a floor means a key below every key the
/// holder guards, and equal ranks count as a conflict. The floors a holder sets: a point
/// lock (a read, update or delete of one key) [`NO_GAP`]; a scan its range's low end; a
/// delete's lock on the key after the one it removed, the removed key (an insert between the
/// two would let a reader of the range miss the uncommitted delete); an insert's lock on its
/// own new key, [`WHOLE_GAP`] (the new key splits a gap that its own transaction may be
/// guarding for a scan). A transaction asking for a record again keeps the lower floor.
/// `WHOLE_GAP` everywhere is plain next-key locking.
pub type KeyRank = u64;

/// The floor that guards the whole gap below a record.
pub const WHOLE_GAP: KeyRank = 0;

/// The floor of a point lock: it guards its record and no gap below it (an insert of the
/// record's own key locks that key, and meets the point lock there).
pub const NO_GAP: KeyRank = KeyRank::MAX;

/// Why a lock request failed. Every kind is *retryable*: the caller aborts the transaction
/// (undo, then [`LockManager::release_all`]) and may run it again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// The request closed a cycle in the wait-for graph; its transaction is the victim. The
    /// blocked request was withdrawn; locks the transaction already held are kept until it
    /// calls `release_all`.
    #[error("transaction {victim} was chosen as a deadlock victim; abort and retry it")]
    Deadlock { victim: TxnId },
    /// The request waited longer than [`LockConfig::wait_timeout`] (a backstop; deadlocks
    /// are detected without it). The request was withdrawn.
    #[error("transaction {txn} timed out waiting for a lock on {name}; abort and retry it")]
    Timeout { txn: TxnId, name: LockName },
    /// The request would have waited for `holder`, a transaction bound to the requester's own
    /// thread ([`LockConfig::thread_bound`]), which cannot run again while that thread waits:
    /// a deadlock through the thread. Refused before it queued.
    #[error(
        "transaction {txn} would wait on {name} for transaction {holder}, which runs on the same \
         thread and cannot go on while it waits (a server worker keeps both open); abort and \
         retry it"
    )]
    SameThread {
        txn: TxnId,
        holder: TxnId,
        name: LockName,
    },
}

impl LockError {
    /// Whether running the transaction again may succeed (always, for lock errors).
    pub fn is_retryable(&self) -> bool {
        match self {
            LockError::Deadlock { .. }
            | LockError::Timeout { .. }
            | LockError::SameThread { .. } => true,
        }
    }

    /// The transaction that must abort.
    pub fn txn(&self) -> TxnId {
        match self {
            LockError::Deadlock { victim } => *victim,
            LockError::Timeout { txn, .. } | LockError::SameThread { txn, .. } => *txn,
        }
    }
}
