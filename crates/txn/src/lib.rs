//! Glass transactions: the lock manager and the concurrency-control schemes above it.
//!
//! ```text
//!   engine ──calls──▶ cc::ConcurrencyControl  (one trait; one scheme per file)
//!                        ├── cc::two_pl::TwoPhaseLocking ──▶ lock::LockManager
//!                        │                                    ├── lock table (latched buckets)
//!                        │                                    └── wait-for graph
//!                        └── cc::no_cc::NoConcurrencyControl  (locking=off: no code at all)
//! ```
//!
//! Layering: this crate uses `storage` only for its [`storage::latch::Latch`]; it knows
//! nothing of pages' contents, log records or tables' schemas. The engine names what it
//! locks with plain numbers (table id, primary-key hash, page number).

use std::fmt;

pub mod cc;
pub mod lock;

pub use cc::{AccessMode, CcError, ConcurrencyControl, RecordRef};
pub use lock::{
    KeyRank, LockConfig, LockError, LockManager, LockMode, LockName, LockStats, TxnLocks, NO_GAP,
    WHOLE_GAP,
};

/// A transaction's identity in the lock manager. Unique among live transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TxnId(pub u64);

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}", self.0)
    }
}
