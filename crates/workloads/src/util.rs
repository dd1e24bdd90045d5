//! Small helpers every workload shares: typed column access that turns a malformed row into
//! an error (never a panic), whole-table reads, batched loading, money comparison.

use std::ops::Bound;
use std::sync::Arc;

use engine::db::Database;
use engine::{Fetch, KeyRange, Row, TableRef, Tx, TxError, TxResult, Value};

/// The integer in column `i` of `row`.
pub fn int(row: &[Value], i: usize) -> TxResult<i64> {
    row.get(i)
        .and_then(Value::as_int)
        .ok_or_else(|| TxError::Invalid(format!("column {i} is not an integer: {row:?}")))
}

/// The number in column `i` of `row` (a float, or an integer widened).
pub fn float(row: &[Value], i: usize) -> TxResult<f64> {
    row.get(i)
        .and_then(Value::as_float)
        .ok_or_else(|| TxError::Invalid(format!("column {i} is not a number: {row:?}")))
}

/// The string in column `i` of `row`.
pub fn string(row: &[Value], i: usize) -> TxResult<&str> {
    row.get(i)
        .and_then(Value::as_str)
        .ok_or_else(|| TxError::Invalid(format!("column {i} is not a string: {row:?}")))
}

/// Whether column `i` of `row` is NULL (a missing column is an error).
pub fn is_null(row: &[Value], i: usize) -> TxResult<bool> {
    row.get(i)
        .map(Value::is_null)
        .ok_or_else(|| TxError::Invalid(format!("row has no column {i}: {row:?}")))
}

/// The key range covering a whole table.
pub fn everything<'a>() -> KeyRange<'a> {
    KeyRange {
        low: Bound::Unbounded,
        high: Bound::Unbounded,
    }
}

/// Reads columns `cols` of every row of `table`.
pub fn scan_all(tx: &mut dyn Tx, table: &TableRef, cols: &[usize]) -> TxResult<Vec<Row>> {
    tx.scan(table, everything(), None, false, Fetch::Cols(cols), false)
}

/// Money is compared to the cent, with a relative slack for the rounding of long float sums.
pub fn money_eq(a: f64, b: f64) -> bool {
    let tolerance = 0.005f64.max(1e-9 * a.abs().max(b.abs()));
    (a - b).abs() <= tolerance
}

/// Rows per loading transaction.
pub const LOAD_BATCH_ROWS: usize = 1000;

/// Inserts rows in transactions of about [`LOAD_BATCH_ROWS`] rows, retrying a batch that
/// fails with a retryable error. Rows are produced lazily by the caller through `push`.
pub struct BatchLoader<'a> {
    db: &'a Arc<Database>,
    pending: Vec<(TableRef, Row)>,
    /// Rows committed so far by this loader.
    pub committed_rows: u64,
    on_commit: &'a (dyn Fn(u64) + Sync),
}

impl<'a> BatchLoader<'a> {
    /// `on_commit(rows)` is told how many rows each committed batch held.
    pub fn new(db: &'a Arc<Database>, on_commit: &'a (dyn Fn(u64) + Sync)) -> Self {
        BatchLoader {
            db,
            pending: Vec::with_capacity(LOAD_BATCH_ROWS),
            committed_rows: 0,
            on_commit,
        }
    }

    pub fn push(&mut self, table: &TableRef, row: Row) -> TxResult<()> {
        self.pending.push((table.clone(), row));
        if self.pending.len() >= LOAD_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Commits what is pending.
    pub fn flush(&mut self) -> TxResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut attempts = 0;
        loop {
            let mut txn = self.db.begin()?;
            let result = self
                .pending
                .iter()
                .try_for_each(|(table, row)| txn.insert(table, row));
            let result = match result {
                Ok(()) => txn.commit(),
                Err(e) => {
                    let _ = txn.abort();
                    Err(e)
                }
            };
            match result {
                Ok(()) => break,
                Err(e) if e.is_retryable() && attempts < 100 => attempts += 1,
                Err(e) => return Err(e),
            }
        }
        let rows = self.pending.len() as u64;
        self.pending.clear();
        self.committed_rows += rows;
        (self.on_commit)(rows);
        Ok(())
    }
}

/// Runs `body` in its own transaction, retrying on a retryable error (used by `check()` and
/// by terminals' set-up, never by measured work).
pub fn with_txn<T>(
    db: &Arc<Database>,
    mut body: impl FnMut(&mut dyn Tx) -> TxResult<T>,
) -> TxResult<T> {
    let mut attempts = 0;
    loop {
        let mut txn = db.begin()?;
        let result = body(&mut txn);
        let result = match result {
            Ok(v) => txn.commit().map(|()| v),
            Err(e) => {
                let _ = txn.abort();
                Err(e)
            }
        };
        match result {
            Err(e) if e.is_retryable() && attempts < 100 => attempts += 1,
            other => return other,
        }
    }
}

/// FNV-1a over the eight bytes of `value` (YCSB's `fnvhash64`, used to scramble keys).
pub fn fnv1a_64(value: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Seconds since the Unix epoch (TPC-C dates are stored as integers).
pub fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_access_reports_wrong_kinds() {
        let row = vec![
            Value::Int(3),
            Value::Float(1.5),
            Value::Str("x".into()),
            Value::Null,
        ];
        assert_eq!(int(&row, 0).unwrap(), 3);
        assert_eq!(float(&row, 1).unwrap(), 1.5);
        assert_eq!(float(&row, 0).unwrap(), 3.0);
        assert_eq!(string(&row, 2).unwrap(), "x");
        assert!(is_null(&row, 3).unwrap());
        assert!(matches!(int(&row, 2), Err(TxError::Invalid(_))));
        assert!(matches!(int(&row, 9), Err(TxError::Invalid(_))));
        assert!(is_null(&row, 9).is_err());
    }

    #[test]
    fn money_is_compared_to_the_cent() {
        assert!(money_eq(10.0, 10.004));
        assert!(!money_eq(10.0, 10.02));
        assert!(money_eq(1e12, 1e12 + 0.5));
    }

    #[test]
    fn fnv_scrambles() {
        assert_ne!(fnv1a_64(1), fnv1a_64(2));
        assert_eq!(fnv1a_64(7), fnv1a_64(7));
    }
}
