//! The transaction API (`Tx`): the few operations every workload procedure is written against.
//!
//! Arguments and results are plain data ([`Value`], [`Row`]), so the same procedure code runs
//! embedded, as a stored procedure, and as an interactive client-side transaction. A procedure
//! never begins or commits: the caller (driver, server) does, and retries it when it fails with
//! a retryable error. A procedure must be safe to run twice.

use std::ops::Bound;

use crate::value::{Row, Value};

/// A table handle: its name, and the catalog slot it was resolved to. With the `dir-lookup`
/// switch on, the engine looks the name up on every operation; with it off it uses the slot.
#[derive(Clone, Debug)]
pub struct TableRef {
    pub name: String,
    pub id: u32,
}

/// A secondary-index handle (see [`TableRef`]).
#[derive(Clone, Debug)]
pub struct IndexRef {
    pub name: String,
    pub id: u32,
}

/// Which columns a read returns.
#[derive(Clone, Copy, Debug)]
pub enum Fetch<'a> {
    /// Every column, in table order.
    All,
    /// These columns (positions in the table), in this order.
    Cols(&'a [usize]),
}

/// A range of index keys; a key may be a prefix of the index's columns.
#[derive(Clone, Debug)]
pub struct KeyRange<'a> {
    pub low: Bound<&'a [Value]>,
    pub high: Bound<&'a [Value]>,
}

impl<'a> KeyRange<'a> {
    /// Every entry whose key starts with `prefix`.
    pub fn prefix(prefix: &'a [Value]) -> Self {
        KeyRange {
            low: Bound::Included(prefix),
            high: Bound::Included(prefix),
        }
    }
}

/// Why a transaction failed, classified by what the caller must do.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// Chosen as a deadlock victim, or timed out waiting: abort and run it again.
    #[error("transaction must be retried: {0}")]
    Retry(String),
    /// The procedure asked for a rollback (e.g. TPC-C's unused item number).
    #[error("rolled back by the procedure: {0}")]
    UserAbort(String),
    /// An insert met an existing key in a unique index.
    #[error("duplicate key in {0}")]
    DuplicateKey(String),
    /// A name, column or value the schema does not allow.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The storage manager failed (I/O, corruption); its message names the page or action.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
}

impl TxError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, TxError::Retry(_))
    }
}

pub type TxResult<T> = Result<T, TxError>;

/// The operations a procedure may perform inside a transaction.
pub trait Tx {
    /// Reads the row with primary key `key`. `for_update` takes the exclusive lock at once
    /// (SELECT ... FOR UPDATE), avoiding the deadlocks of a later lock upgrade.
    fn get(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>>;

    /// Sets columns of the row with primary key `key`; returns whether the row existed.
    /// Key columns cannot be changed.
    fn update(&mut self, table: &TableRef, key: &[Value], set: &[(usize, Value)])
        -> TxResult<bool>;

    /// Inserts a row (all columns, table order) and its entries in every index of the table.
    fn insert(&mut self, table: &TableRef, row: &[Value]) -> TxResult<()>;

    /// Deletes the row with primary key `key`; returns whether it existed.
    fn delete(&mut self, table: &TableRef, key: &[Value]) -> TxResult<bool>;

    /// Rows of `table` in primary-key order within `range`, at most `limit`, ascending or
    /// (with `reverse`) descending.
    fn scan(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>>;

    /// Rows reached through secondary index `index` within `range` (on the index's columns),
    /// in index order, at most `limit`.
    fn scan_index(
        &mut self,
        index: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>>;
}
