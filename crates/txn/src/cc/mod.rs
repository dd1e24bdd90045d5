//! The concurrency-control seam: one trait the engine calls around every record access,
//! one scheme per file behind it.
//!
//! ```text
//!   engine Tx          ConcurrencyControl           schemes
//!   begin ───────────▶ begin(txn) -> Txn            two_pl::TwoPhaseLocking  (strict 2PL)
//!   get / scan ──────▶ read / scan                  no_cc::NoConcurrencyControl (locking=off)
//!   update / insert ─▶ write                        (later: occ, mvcc — new files, same trait)
//!   commit ──────────▶ validate, log commit, finish
//!   abort ───────────▶ undo, finish
//! ```
//!
//! Contract. `read`/`write` are called *before* the access; an error means the access
//! must not happen and the transaction must abort (`finish` after its undo).
//! `validate` is called before the commit record is written (a locking scheme has nothing
//! to check; an optimistic one validates its read set there); `finish` after the commit is
//! logged, or after an abort's undo — strict 2PL releases its locks there.
//!
//! The per-transaction state is an associated type, so an engine generic over the scheme
//! is monomorphised: with [`no_cc::NoConcurrencyControl`] every call is an empty inline
//! function and the lock manager's code is not even linked into the hot path (the design
//! brief's principle 1).

pub mod no_cc;
pub mod two_pl;

use crate::lock::LockError;
use crate::TxnId;

pub use no_cc::NoConcurrencyControl;
pub use two_pl::TwoPhaseLocking;

/// A record, as the engine names it to concurrency control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordRef {
    pub table: u32,
    /// Hash of the record's primary key (the engine's choice of hash).
    pub key: u64,
    /// The page the record lives on, when the engine knows it (page-level locking uses it;
    /// record-level locking ignores it).
    pub page: Option<u64>,
}

impl RecordRef {
    pub fn new(table: u32, key: u64) -> Self {
        RecordRef {
            table,
            key,
            page: None,
        }
    }

    pub fn on_page(table: u32, key: u64, page: u64) -> Self {
        RecordRef {
            table,
            key,
            page: Some(page),
        }
    }
}

/// What a scan will do with the records it visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessMode {
    Read,
    Write,
}

/// Why a concurrency-control call failed. Every variant says whether a retry may succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CcError {
    /// A lock request failed (deadlock victim or timeout): abort, then retry.
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl CcError {
    /// Whether running the transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            CcError::Lock(e) => e.is_retryable(),
        }
    }
}

/// A concurrency-control scheme.
pub trait ConcurrencyControl: Send + Sync {
    /// Per-transaction state, owned by the transaction.
    type Txn: Send;

    /// A short name for reports (`"2pl-record"`, `"none"`, ...).
    fn name(&self) -> &'static str;

    /// Starts transaction `txn`.
    fn begin(&self, txn: TxnId) -> Self::Txn;

    /// Starts transaction `txn` reusing a finished transaction's state (no allocation).
    fn restart(&self, t: &mut Self::Txn, txn: TxnId);

    /// Before reading `record`.
    fn read(&self, t: &mut Self::Txn, record: RecordRef) -> Result<(), CcError>;

    /// Before updating, inserting or deleting `record`.
    fn write(&self, t: &mut Self::Txn, record: RecordRef) -> Result<(), CcError>;

    /// Before scanning `table` (a range or the whole of it). Schemes without range locks
    /// protect the whole table, which also excludes phantoms.
    fn scan(&self, t: &mut Self::Txn, table: u32, access: AccessMode) -> Result<(), CcError>;

    /// Before the commit record is written: may refuse the commit (then abort).
    fn validate(&self, t: &mut Self::Txn) -> Result<(), CcError>;

    /// After the commit is logged, or after an abort's undo.
    fn finish(&self, t: &mut Self::Txn);
}
