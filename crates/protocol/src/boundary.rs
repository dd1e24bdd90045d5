//! A transaction whose every operation crosses a boundary: one `Tx` for both sides that run
//! workload code away from the engine, a client's interactive transaction over the network
//! (`client::RemoteTx`) and an isolated procedure's transaction in its guest
//! (`guest::run_invocation`). What differs between the two is how a crossing is made, which
//! a [`Crossing`] says; what a crossing carries, and what is answered without one, is here:
//!
//! * a read (or scan) that a hint named is answered from what the hinted reads brought back
//!   ([`crate::read_ahead`]); the first read of a hinted row that has not crossed yet sends
//!   the hinted reads and scans alone;
//! * an insert, and an update or delete of a row held exclusively and known to exist, is
//!   deferred ([`crate::deferred`]) and crosses in front of the next operation, or with the
//!   transaction's end (the crossing's own business);
//! * every other operation is one crossing: the deferred writes, the hinted reads and scans
//!   not sent yet, then the operation.
//!
//! A crossing that neither defers nor reads ahead (a client's autocommit operations, each a
//! transaction of its own) sends each operation alone.

use engine::{
    Fetch, IndexRef, KeyRange, ReadFn, Row, RowRef, TableRef, Tx, TxError, TxResult, UpdateFn,
    Value,
};

use crate::deferred::Deferred;
use crate::read_ahead::{self, HintedRead};
use crate::{Op, OpResult, ScanSource};

/// Column positions as the wire carries them.
fn column_numbers(columns: &[usize]) -> TxResult<Vec<u16>> {
    columns
        .iter()
        .map(|&c| u16::try_from(c).map_err(|_| TxError::Invalid(format!("no column {c}"))))
        .collect()
}

/// How a [`BoundaryTx`]'s operations cross, and where it keeps what it defers.
pub trait Crossing {
    /// Who answers across the boundary, for errors ("the server", "the host").
    const PEER: &'static str;

    /// The transaction's deferred writes, what it knows of its rows and its hinted reads.
    fn deferred(&mut self) -> &mut Deferred;

    /// Whether writes are deferred and a row's reads known to be held: not where every
    /// operation is a transaction of its own.
    fn defers(&self) -> bool;

    /// Whether hints are read ahead (only where writes are deferred, too).
    fn reads_ahead(&self) -> bool;

    /// One crossing: the writes [`Crossing::deferred`] keeps, taken from it, then `ops`.
    /// Checks the writes' answers, and returns `ops` (given back: the hinted reads' keys come
    /// out of them) with one result each. An operation's error is the crossing's error.
    fn cross(&mut self, ops: Vec<Op>) -> TxResult<(Vec<Op>, Vec<OpResult>)>;

    /// The transaction made a write (deferred or not).
    fn wrote(&mut self) {}
}

/// A `Tx` whose operations cross a boundary by `C` (see the module's documentation).
pub struct BoundaryTx<C> {
    pub crossing: C,
}

impl<C: Crossing> BoundaryTx<C> {
    pub fn new(crossing: C) -> Self {
        BoundaryTx { crossing }
    }

    fn unexpected(op: &str, result: &OpResult) -> TxError {
        TxError::Connection(format!("{} answered {op} with {result:?}", C::PEER))
    }

    fn one(&mut self, op: Op) -> TxResult<OpResult> {
        self.cross_with(Some(op))?
            .ok_or_else(|| TxError::Connection(format!("{} answered no operation", C::PEER)))
    }

    /// One crossing: the deferred writes, the hinted reads and scans not sent yet (their
    /// answers kept), then `op` if any; returns `op`'s result.
    fn cross_with(&mut self, op: Option<Op>) -> TxResult<Option<OpResult>> {
        let ahead = &mut self.crossing.deferred().ahead;
        let reads = ahead.take();
        let scans = ahead.take_scans();
        let read_count = reads.len();
        let has_op = op.is_some();
        let mut ops = Vec::with_capacity(read_count + scans.len() + usize::from(has_op));
        // The reads' keys travel in the operations and come back out of them below.
        ops.extend(reads.into_iter().map(HintedRead::into_op));
        ops.extend(scans.iter().map(|s| s.op()));
        ops.extend(op);
        let count = ops.len();
        let (mut ops, mut results) = self.crossing.cross(ops)?;
        if results.len() != count || ops.len() != count {
            return Err(TxError::Connection(format!(
                "{} answered {count} operations with {} results",
                C::PEER,
                results.len()
            )));
        }
        let result = if has_op { results.pop() } else { None };
        let scan_results = results.split_off(read_count);
        let deferred = self.crossing.deferred();
        for (scan, result) in scans.into_iter().zip(scan_results) {
            match result {
                OpResult::Rows(rows) => deferred.ahead.scanned(scan, rows),
                other => return Err(Self::unexpected("a hinted scan", &other)),
            }
        }
        for (read, result) in ops.drain(..read_count).zip(results) {
            match result {
                OpResult::Row(row) => {
                    if let Op::Get {
                        table,
                        key,
                        for_update: true,
                        ..
                    } = &read
                    {
                        deferred.read_for_update(*table, key, row.as_ref());
                    }
                    deferred.ahead.answered_op(read, row);
                }
                other => return Err(Self::unexpected("a hinted get", &other)),
            }
        }
        Ok(result)
    }

    /// A read that a hinted read answers: from its answer, or by sending the hinted reads now,
    /// alone (this read is among them). `None`: no hinted read answers it.
    fn hinted(
        &mut self,
        table: u32,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Option<Row>>> {
        let ahead = &self.crossing.deferred().ahead;
        if let Some(row) = ahead.answer(table, key, fetch, for_update) {
            return Ok(Some(row));
        }
        if !ahead.will_answer(table, key, fetch, for_update) {
            return Ok(None);
        }
        self.cross_with(None)?;
        Ok(self
            .crossing
            .deferred()
            .ahead
            .answer(table, key, fetch, for_update))
    }

    /// A read-modify-write of the whole row (`columns`: `None`) or of `columns`, from what a
    /// hinted read for update brought where it holds them ([`read_ahead::update_with`]).
    fn update_from_answer(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: Option<&[usize]>,
        f: &mut UpdateFn<'_>,
    ) -> TxResult<bool> {
        let taken = self
            .crossing
            .deferred()
            .ahead
            .take_for_update(table.id, key, columns);
        read_ahead::update_with(self, taken, table, key, columns, f)
    }

    /// A read that no hinted read answers: one crossing.
    fn get_now(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>> {
        let op = Op::Get {
            table: table.id,
            key: key.to_vec(),
            columns: Op::columns(fetch)?,
            for_update,
        };
        let row = match self.one(op)? {
            OpResult::Row(row) => row,
            other => return Err(Self::unexpected("a get", &other)),
        };
        if for_update && self.crossing.defers() {
            self.crossing
                .deferred()
                .read_for_update(table.id, key, row.as_ref());
        }
        Ok(row)
    }

    /// A read that borrows its row (`columns`: of those columns only) and that a hinted read
    /// answers: `f` sees the answer where it is kept, not a copy. `None`: no hinted read
    /// answers it.
    fn hinted_with(
        &mut self,
        table: u32,
        key: &[Value],
        columns: Option<&[usize]>,
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<Option<bool>> {
        let ahead = &self.crossing.deferred().ahead;
        if let Some(found) = ahead.answer_with(table, key, columns, for_update, f) {
            return found.map(Some);
        }
        let fetch = columns.map_or(Fetch::All, Fetch::Cols);
        if !ahead.will_answer(table, key, fetch, for_update) {
            return Ok(None);
        }
        self.cross_with(None)?;
        let ahead = &self.crossing.deferred().ahead;
        ahead
            .answer_with(table, key, columns, for_update, f)
            .transpose()
    }

    /// A scan that a hinted scan answers (the table's rows under `prefix`, ascending): from
    /// its answer, or by sending the hinted reads and scans now, alone (this scan is among
    /// them). `None`: no hinted scan answers it.
    fn hinted_scan(
        &mut self,
        table: u32,
        prefix: &[Value],
        limit: Option<u32>,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Vec<Row>>> {
        let ahead = &self.crossing.deferred().ahead;
        if let Some(rows) = ahead.answer_scan(table, prefix, limit, fetch, for_update) {
            return Ok(Some(rows));
        }
        if !ahead.will_answer_scan(table, prefix, limit, for_update) {
            return Ok(None);
        }
        self.cross_with(None)?;
        Ok(self
            .crossing
            .deferred()
            .ahead
            .answer_scan(table, prefix, limit, fetch, for_update))
    }

    /// Defers `op`, an update or delete of row `key` of `table`, where writes are deferred
    /// and the transaction holds the row and knows it exists; gives `op` back otherwise, to
    /// be sent now.
    fn defer_write(&mut self, table: u32, key: &[Value], op: Op) -> Result<(), Op> {
        if !self.crossing.defers() {
            return Err(op);
        }
        self.crossing.deferred().write(table, key, op)
    }

    /// An update or delete sent now: its rows' hinted answers go stale (the hinted reads sent
    /// with it ran before it); `Found(found)` is its answer.
    fn written_now(&mut self, table: u32, key: &[Value], op: Op, what: &str) -> TxResult<bool> {
        let result = self.one(op)?;
        self.crossing.deferred().ahead.stale(table, Some(key));
        match result {
            OpResult::Found(found) => Ok(found),
            other => Err(Self::unexpected(what, &other)),
        }
    }

    fn scan_from(
        &mut self,
        source: ScanSource,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let limit = Op::limit(limit);
        let prefix = read_ahead::scan_prefix(&range);
        let hinted = match (source, prefix, reverse) {
            (ScanSource::Table(table), Some(prefix), false) => {
                self.hinted_scan(table, prefix, limit, fetch, for_update)?
            }
            _ => None,
        };
        let rows = match hinted {
            Some(rows) => rows,
            None => match self.one(Op::scan(source, range, limit, reverse, fetch, for_update)?)? {
                OpResult::Rows(rows) => rows,
                other => return Err(Self::unexpected("a scan", &other)),
            },
        };
        if let (ScanSource::Table(table), Some(prefix), true) = (source, prefix, for_update) {
            if self.crossing.defers() {
                self.crossing
                    .deferred()
                    .scanned_for_update(table, prefix, &rows);
            }
        }
        Ok(rows)
    }
}

impl<C: Crossing> Tx for BoundaryTx<C> {
    fn get(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>> {
        if let Some(row) = self.hinted(table.id, key, fetch, for_update)? {
            return Ok(row);
        }
        self.get_now(table, key, fetch, for_update)
    }

    /// A hinted read's answer is handed to `f` where it is kept, not copied.
    fn read_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        if let Some(found) = self.hinted_with(table.id, key, None, for_update, f)? {
            return Ok(found);
        }
        match self.get_now(table, key, Fetch::All, for_update)? {
            Some(row) => f(RowRef::values(&row)).map(|()| true),
            None => Ok(false),
        }
    }

    /// As [`BoundaryTx::read_with`]; a row fetched now is handed to `f` as it came, its
    /// columns where they are.
    fn read_columns_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: &[usize],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        if let Some(found) = self.hinted_with(table.id, key, Some(columns), for_update, f)? {
            return Ok(found);
        }
        let Some(row) = self.get_now(table, key, Fetch::Cols(columns), for_update)? else {
            return Ok(false);
        };
        f(RowRef::some(&column_numbers(columns)?, &row)).map(|()| true)
    }

    /// Each row fetched is handed to `f` as it came, its columns where they are.
    fn scan_columns_with(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        columns: &[usize],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<()> {
        let rows = self.scan(
            table,
            range,
            limit,
            reverse,
            Fetch::Cols(columns),
            for_update,
        )?;
        let columns = column_numbers(columns)?;
        rows.iter()
            .try_for_each(|row| f(RowRef::some(&columns, row)))
    }

    /// A row a hinted read brought for update is handed to `f` as it came, not copied.
    fn update_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        f: &mut UpdateFn<'_>,
    ) -> TxResult<bool> {
        self.update_from_answer(table, key, None, f)
    }

    /// As `update_with`, answered by a for-update hint of these columns (or more).
    fn update_columns_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: &[usize],
        f: &mut UpdateFn<'_>,
    ) -> TxResult<bool> {
        self.update_from_answer(table, key, Some(columns), f)
    }

    /// Deferred where the row is held and known to exist (answered `true` at once);
    /// otherwise one crossing.
    fn update(
        &mut self,
        table: &TableRef,
        key: &[Value],
        set: &[(usize, Value)],
    ) -> TxResult<bool> {
        self.crossing.wrote();
        let set = set
            .iter()
            .map(|(c, v)| {
                u16::try_from(*c)
                    .map(|c| (c, v.clone()))
                    .map_err(|_| TxError::Invalid(format!("no column {c}")))
            })
            .collect::<TxResult<Vec<_>>>()?;
        let op = Op::Update {
            table: table.id,
            key: key.to_vec(),
            set,
        };
        let Err(op) = self.defer_write(table.id, key, op) else {
            return Ok(true);
        };
        let found = self.written_now(table.id, key, op, "an update")?;
        if found && self.crossing.defers() {
            self.crossing.deferred().updated(table.id, key);
        }
        Ok(found)
    }

    /// Deferred where writes are: sent in front of the next crossing, or with the
    /// transaction's end; its error is then returned by the next operation that crosses
    /// (see [`crate::deferred`]).
    fn insert(&mut self, table: &TableRef, row: &[Value]) -> TxResult<()> {
        self.crossing.wrote();
        if self.crossing.defers() {
            self.crossing.deferred().insert(table.id, row);
            return Ok(());
        }
        let op = Op::Insert {
            table: table.id,
            row: row.to_vec(),
        };
        match self.one(op)? {
            OpResult::Inserted => Ok(()),
            other => Err(Self::unexpected("an insert", &other)),
        }
    }

    fn delete(&mut self, table: &TableRef, key: &[Value]) -> TxResult<bool> {
        self.crossing.wrote();
        let op = Op::Delete {
            table: table.id,
            key: key.to_vec(),
        };
        let Err(op) = self.defer_write(table.id, key, op) else {
            return Ok(true);
        };
        self.written_now(table.id, key, op, "a delete")
    }

    fn scan(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let source = ScanSource::Table(table.id);
        self.scan_from(source, range, limit, reverse, fetch, for_update)
    }

    fn scan_index(
        &mut self,
        index: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let source = ScanSource::Index(index.id);
        self.scan_from(source, range, limit, reverse, fetch, for_update)
    }

    /// Read ahead: the rows cross, whole and shared, in front of the next operation.
    fn prefetch(&mut self, rows: &[(&TableRef, &[i64])]) {
        if self.crossing.reads_ahead() {
            self.crossing.deferred().ahead.hint(rows, false);
        }
    }

    /// Read ahead: the columns named of the rows cross, shared, in front of the next
    /// operation.
    fn prefetch_columns(&mut self, rows: &[(&TableRef, &[i64])], columns: &[usize]) {
        if self.crossing.reads_ahead() {
            self.crossing.deferred().ahead.hint_columns(rows, columns);
        }
    }

    /// Read ahead: the rows cross, exclusive, in front of the next operation: whole, or the
    /// columns named where the hint names several rows.
    fn prefetch_for_update(&mut self, rows: &[(&TableRef, &[i64])], columns: Option<&[usize]>) {
        if self.crossing.reads_ahead() {
            self.crossing
                .deferred()
                .ahead
                .hint_for_update(rows, columns);
        }
    }

    /// Read ahead: the scan crosses, whole rows, in front of the next operation.
    fn prefetch_scan(
        &mut self,
        table: &TableRef,
        prefix: &[i64],
        limit: Option<usize>,
        for_update: bool,
    ) {
        if self.crossing.reads_ahead() {
            self.crossing
                .deferred()
                .ahead
                .hint_scan(table, prefix, limit, for_update);
        }
    }

    /// Kept as a pending request (`Op::ReadCommitted`), sent in front of the next crossing's
    /// reads (see [`Deferred::read_committed`]); where every operation is a transaction of its
    /// own, nothing is sent.
    fn read_committed(&mut self) {
        if self.crossing.defers() {
            self.crossing.deferred().read_committed();
        }
    }
}
