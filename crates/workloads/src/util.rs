//! Small helpers every workload shares: typed column access that turns a malformed row into
//! an error (never a panic), whole-table reads, batched loading, money comparison.

use std::ops::Bound;
use std::sync::Arc;

use engine::db::Database;
use engine::{Connection, Fetch, KeyRange, Row, RowRef, TableRef, Tx, TxError, TxResult, Value};

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

/// Reads columns `cols` of every row of `table` into memory at once: for tables whose size
/// the caller knows to be small. A table that grows as a run goes on is read with
/// [`TableScan`].
pub fn scan_all(tx: &mut dyn Tx, table: &TableRef, cols: &[usize]) -> TxResult<Vec<Row>> {
    tx.scan(table, everything(), None, false, Fetch::Cols(cols), false)
}

/// Rows a [`TableScan`] reads at a time. Embedded, a page is read in place and holds nothing
/// but its keys; a [`Tx`] that copies rows out (`Tx::scan_columns_with`'s default) holds the
/// page's rows, a few tens of KB, under glibc malloc's trim threshold (128 KB): pages of 4,096
/// rows (about 800 KB) were handed back to the kernel when freed and faulted in again for the
/// next, which cost the check as many page faults as reading the whole table at once. (On a
/// 6.6 GB TPC-C database, in place, 4,096 rows a page checked 3–6% faster than 256: not kept.)
pub const SCAN_PAGE_ROWS: usize = 256;

/// A read of every row of a table that holds a page of rows at a time, not the table.
///
/// It scans up to [`SCAN_PAGE_ROWS`] rows in primary-key order, hands each to the caller, and
/// scans on from just after the last key it saw, within the same transaction (or, with
/// [`TableScan::for_each_stored`], reads the table in the order it is stored).
/// A consistency check after a long run reads tables of tens of millions of rows (TPC-C's
/// ORDER-LINE grows by ten rows per New-Order); read at once they took gigabytes, and a
/// minute's run of the stripped engine more memory than this machine has. Paged, the check
/// needs memory for its aggregates only.
///
/// The primary key's columns are fetched along with the caller's, so the caller need not
/// know them; the caller's closure sees its own columns only, numbered as in `cols`.
///
/// After each page the scan tells its [`CheckProgress`] (none unless
/// [`TableScan::reporting_to`] gives one) how many rows of the table it has read.
pub struct TableScan<'p> {
    table: TableRef,
    /// The primary key's columns, then the caller's.
    fetch: Vec<usize>,
    key_len: usize,
    page_rows: usize,
    progress: CheckProgress<'p>,
}

/// Where a consistency check reports how far it has read: `progress(table, rows)`, the rows
/// of `table` read so far, after each page (see [`crate::Workload::check_with_progress`]).
pub type CheckProgress<'p> = &'p dyn Fn(&str, u64);

/// A [`CheckProgress`] that reports nowhere.
pub const NO_PROGRESS: CheckProgress<'static> = &|_, _| {};

impl TableScan<'static> {
    /// A scan of columns `cols` of `table`, whose primary key it looks up in `db`.
    pub fn new(db: &Database, table: &TableRef, cols: &[usize]) -> TxResult<TableScan<'static>> {
        let key = db.table_schema(table)?.primary_key;
        if key.is_empty() {
            return Err(TxError::Invalid(format!(
                "table {} has no primary key to page a scan by",
                table.name
            )));
        }
        let key_len = key.len();
        let mut fetch = key;
        fetch.extend_from_slice(cols);
        Ok(TableScan {
            table: table.clone(),
            fetch,
            key_len,
            page_rows: SCAN_PAGE_ROWS,
            progress: NO_PROGRESS,
        })
    }
}

impl<'p> TableScan<'p> {
    /// The same scan, reading `rows` rows at a time (at least one).
    pub fn page_rows(mut self, rows: usize) -> TableScan<'p> {
        self.page_rows = rows.max(1);
        self
    }

    /// The same scan, reporting the rows it has read to `progress` after each page.
    pub fn reporting_to<'q>(self, progress: CheckProgress<'q>) -> TableScan<'q> {
        TableScan {
            table: self.table,
            fetch: self.fetch,
            key_len: self.key_len,
            page_rows: self.page_rows,
            progress,
        }
    }

    /// Calls `f` on every row, in primary-key order; the first error stops the scan.
    pub fn for_each(
        &self,
        tx: &mut dyn Tx,
        mut f: impl FnMut(&[Value]) -> TxResult<()>,
    ) -> TxResult<()> {
        let (mut after, mut rows) = (None, 0);
        let everything = (Bound::Unbounded, Bound::Unbounded);
        while self.page(tx, everything, &mut after, &mut rows, &mut f)? {}
        Ok(())
    }

    /// Calls `f` on every row, in the order the table stores them ([`Tx::scan_table_with`]:
    /// embedded, a table on heap pages is locked whole and read a page after another, each
    /// page once; elsewhere, key order); the first error stops the scan. Its progress is told
    /// every page of rows, as [`TableScan::for_each`]'s.
    pub fn for_each_stored(
        &self,
        tx: &mut dyn Tx,
        mut f: impl FnMut(&[Value]) -> TxResult<()>,
    ) -> TxResult<()> {
        // No page to continue after: the key's columns are not read.
        let cols = &self.fetch[self.key_len..];
        let mut row = Vec::with_capacity(cols.len());
        let mut rows = 0u64;
        tx.scan_table_with(&self.table, cols, &mut |r| {
            read_into(&mut row, cols, r)?;
            rows += 1;
            if rows.is_multiple_of(self.page_rows as u64) {
                (self.progress)(&self.table.name, rows);
            }
            f(&row)
        })?;
        (self.progress)(&self.table.name, rows);
        Ok(())
    }

    /// Reads the next page of rows in `range` (from just after `after`, the last key read,
    /// if any) and hands each to `f`, adds them to `rows` (the scan's count, reported to its
    /// progress); whether the range may hold more rows. The rows are read in place
    /// ([`Tx::scan_columns_with`]), each column copied into one row reused for all.
    fn page(
        &self,
        tx: &mut dyn Tx,
        (low, high): (Bound<&[Value]>, Bound<&[Value]>),
        after: &mut Option<Row>,
        rows: &mut u64,
        f: &mut impl FnMut(&[Value]) -> TxResult<()>,
    ) -> TxResult<bool> {
        let range = KeyRange {
            low: after.as_deref().map_or(low, Bound::Excluded),
            high,
        };
        let mut row = Vec::with_capacity(self.fetch.len());
        let mut read = 0;
        tx.scan_columns_with(
            &self.table,
            range,
            Some(self.page_rows),
            false,
            &self.fetch,
            false,
            &mut |r| {
                read_into(&mut row, &self.fetch, r)?;
                read += 1;
                f(&row[self.key_len..])
            },
        )?;
        *rows += read as u64;
        (self.progress)(&self.table.name, *rows);
        if read < self.page_rows {
            return Ok(false);
        }
        // The last row read is still in `row`, its key first.
        row.truncate(self.key_len);
        *after = Some(row);
        Ok(true)
    }
}

/// Replaces `row` with columns `cols` of the row `r`, in that order.
fn read_into(row: &mut Row, cols: &[usize], r: RowRef<'_>) -> TxResult<()> {
    row.clear();
    for &c in cols {
        row.push(r.value(c)?);
    }
    Ok(())
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

/// Loads partitions `1..=partitions` (warehouses, branches) on up to `threads` threads, each
/// partition from one thread (partition `p` on thread `(p - 1) % threads`), each thread with a
/// [`BatchLoader`] of its own that `load` fills and this flushes. Each loading thread inserts
/// into heap pages of its own, so partitions loaded by different threads never share a page.
/// A panic in a loading thread is raised again here.
pub fn load_partitions(
    db: &Arc<Database>,
    report: &(dyn Fn(u64) + Sync),
    threads: usize,
    partitions: u64,
    load: impl Fn(&mut BatchLoader<'_>, i64) -> TxResult<()> + Sync,
) -> TxResult<()> {
    let threads = threads.max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let load = &load;
                scope.spawn(move || -> TxResult<()> {
                    let mut loader = BatchLoader::new(db, report);
                    let mut p = thread as u64 + 1;
                    while p <= partitions {
                        load(&mut loader, p as i64)?;
                        p += threads as u64;
                    }
                    loader.flush()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<TxResult<Vec<()>>>()
    })?;
    Ok(())
}

/// Runs `body` in its own transaction, retrying on a retryable error (used by `check()` and
/// by terminals' set-up, never by measured work). `conn` is the database in process or a
/// connection to a server.
pub fn with_txn<T>(
    conn: &dyn Connection,
    mut body: impl FnMut(&mut dyn Tx) -> TxResult<T>,
) -> TxResult<T> {
    let mut attempts = 0;
    loop {
        let mut value = None;
        let result = conn.transaction(&mut |tx| {
            value = Some(body(tx)?);
            Ok(())
        });
        match result {
            Ok(()) => {
                return value.ok_or_else(|| {
                    TxError::Invalid("a committed transaction returned nothing".to_string())
                })
            }
            Err(e) if e.is_retryable() && attempts < 100 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// A stored procedure's arguments, read in order with their kinds checked: a wrong count or
/// kind is an [`TxError::Invalid`] naming the procedure and the argument, never a panic (the
/// arguments come from the network).
pub struct Args<'a> {
    procedure: &'static str,
    values: &'a [Value],
    next: usize,
}

impl<'a> Args<'a> {
    pub fn new(procedure: &'static str, values: &'a [Value]) -> Self {
        Args {
            procedure,
            values,
            next: 0,
        }
    }

    fn take(&mut self, kind: &str) -> TxResult<&'a Value> {
        let v = self.values.get(self.next).ok_or_else(|| {
            TxError::Invalid(format!(
                "procedure {}: argument {} ({kind}) missing: {} given",
                self.procedure,
                self.next + 1,
                self.values.len()
            ))
        })?;
        self.next += 1;
        Ok(v)
    }

    fn wrong(&self, kind: &str, v: &Value) -> TxError {
        TxError::Invalid(format!(
            "procedure {}: argument {} must be {kind}, not {v:?}",
            self.procedure, self.next
        ))
    }

    /// The arguments not read yet.
    pub fn values_left(&self) -> &'a [Value] {
        &self.values[self.next.min(self.values.len())..]
    }

    pub fn int(&mut self) -> TxResult<i64> {
        let v = self.take("an integer")?;
        v.as_int().ok_or_else(|| self.wrong("an integer", v))
    }

    /// An integer in `range`, as a count or position (e.g. a list's length).
    pub fn count(&mut self, max: usize) -> TxResult<usize> {
        let v = self.take("a count")?;
        match v.as_int() {
            Some(n) if (0..=max as i64).contains(&n) => Ok(n as usize),
            _ => Err(self.wrong(&format!("a count of at most {max}"), v)),
        }
    }

    pub fn float(&mut self) -> TxResult<f64> {
        let v = self.take("a number")?;
        v.as_float().ok_or_else(|| self.wrong("a number", v))
    }

    pub fn bool(&mut self) -> TxResult<bool> {
        match self.int()? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(self.wrong("0 or 1", &Value::Int(n))),
        }
    }

    pub fn str(&mut self) -> TxResult<&'a str> {
        let v = self.take("a string")?;
        v.as_str().ok_or_else(|| self.wrong("a string", v))
    }

    /// The next argument, whatever its kind.
    pub fn value(&mut self) -> TxResult<&'a Value> {
        self.take("a value")
    }

    /// Every argument was read: more is an error, not ignored.
    pub fn finish(self) -> TxResult<()> {
        if self.next == self.values.len() {
            Ok(())
        } else {
            Err(TxError::Invalid(format!(
                "procedure {} takes {} arguments, not {}",
                self.procedure,
                self.next,
                self.values.len()
            )))
        }
    }
}

/// The input a terminal's `next` drew, for its method `what` (`run`, `args`, `returned`):
/// an error if `next` has not drawn one.
pub fn drawn<'a, T>(input: &'a Option<T>, what: &str) -> TxResult<&'a T> {
    input
        .as_ref()
        .ok_or_else(|| TxError::Invalid(format!("Terminal::{what} before next")))
}

/// A procedure index a client sent that the workload does not have.
pub fn no_procedure(workload: &str, txn: usize) -> TxError {
    TxError::Invalid(format!("{workload} has no procedure number {txn}"))
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
