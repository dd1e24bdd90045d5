//! The fetch stage: a transaction's body run once to bring its pages into the buffer pool,
//! changing nothing and locking nothing.
//!
//! [`FetchTx`] implements [`Tx`] over the tables and indexes directly, without a transaction:
//! it holds no reference to the lock manager or the log, so it cannot take a data lock or
//! write a log record, and no operation of it changes a page. What each operation touches:
//!
//! | operation                | pages read in                                                |
//! |--------------------------|--------------------------------------------------------------|
//! | get, read, update, delete| the primary index's path to the key's leaf, the record's heap page |
//! | insert                   | the primary index's path to where the key would go, each secondary index's likewise, and the heap page this thread's next insert goes to |
//! | scan (either index)      | the index's leaves over the range, every record found         |
//!
//! B+-tree descents latch-couple as every descent does, which protects the inner nodes (the
//! paper takes locks on them for the same reason). Reads are of whatever is there: nothing is
//! locked, so a row may change or vanish under the stage. Any error ends the stage, which the
//! strategy ignores; the operate stage that follows is the transaction.

use std::ops::Bound;

use crate::api::{Fetch, IndexRef, KeyRange, ReadFn, RowRef, RowWriter, TableRef, Tx, TxResult};
use crate::db::Database;
use crate::table::{IndexStore, Records, Table};
use crate::txn::Transaction;
use crate::value::{Row, Value};

/// A fetch stage's view of the database (see the module docs).
pub(crate) struct FetchTx<'db> {
    db: &'db Database,
    key: Vec<u8>,
    rec: Vec<u8>,
    /// Operations run, for the tests' accounting.
    pub(crate) operations: u64,
    /// Counted as a reader of the trees' pages while the stage runs, as a transaction is: a
    /// backward scan holds a leaf's id across latches, and no page unlinked meanwhile may be
    /// handed out again under it (`storage::BufferPool::epoch_enter`).
    epoch: Option<storage::buffer::EpochToken>,
}

impl<'db> FetchTx<'db> {
    pub(crate) fn new(db: &'db Database) -> FetchTx<'db> {
        FetchTx {
            db,
            key: Vec::new(),
            rec: Vec::new(),
            operations: 0,
            epoch: db.pool.as_ref().and_then(|pool| pool.epoch_enter()),
        }
    }

    /// The location of the row with primary key `key` in `table`, reading the index path.
    fn locate(&mut self, table: &Table, key: &[Value]) -> TxResult<Option<u64>> {
        self.operations += 1;
        table.key.encode(key, &mut self.key)?;
        Ok(table.primary.get(&self.key)?)
    }

    /// Reads the row with primary key `key` and hands it to `f`; `None` if there is none.
    fn read<R>(
        &mut self,
        t: &TableRef,
        key: &[Value],
        f: impl FnOnce(&Table, &[u8]) -> R,
    ) -> TxResult<Option<R>> {
        let table = self.db.resolve_table(t)?;
        let Some(loc) = self.locate(table, key)? else {
            return Ok(None);
        };
        Ok(table.records.with(loc, |rec| f(table, rec))?)
    }

    /// Every row of `table` whose location `store` yields over `range`, at most `limit`.
    #[allow(clippy::too_many_arguments)]
    fn scan_rows(
        &mut self,
        table: &Table,
        store: &IndexStore,
        (lo, lob): (&[u8], Bound<()>),
        (hi, hib): (&[u8], Bound<()>),
        reverse: bool,
        limit: Option<usize>,
        fetch: Fetch<'_>,
    ) -> TxResult<Vec<Row>> {
        self.operations += 1;
        let mut locs = Vec::new();
        store.scan(
            bound(lo, lob),
            bound(hi, hib),
            reverse,
            limit.unwrap_or(usize::MAX),
            |_, loc| {
                locs.push(loc);
                true
            },
        )?;
        let mut rows = Vec::with_capacity(locs.len());
        for loc in locs {
            if let Some(row) = table
                .records
                .with(loc, |rec| Transaction::project(&table.layout, rec, fetch))?
            {
                rows.push(row);
            }
        }
        Ok(rows)
    }
}

/// Reads what an insert of `key` into `store` reads: the leaf the key goes to, and the key
/// after it (which the insert locks, and which may lie on the next leaf).
fn touch_insert_position(store: &IndexStore, key: &[u8]) -> TxResult<()> {
    store.scan(Bound::Included(key), Bound::Unbounded, false, 2, |_, _| {
        true
    })?;
    Ok(())
}

fn bound(key: &[u8], b: Bound<()>) -> Bound<&[u8]> {
    match b {
        Bound::Included(()) => Bound::Included(key),
        Bound::Excluded(()) => Bound::Excluded(key),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Drop for FetchTx<'_> {
    fn drop(&mut self) {
        if let (Some(token), Some(pool)) = (self.epoch.take(), &self.db.pool) {
            pool.epoch_exit(token);
        }
    }
}

impl Tx for FetchTx<'_> {
    fn get(
        &mut self,
        t: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        _for_update: bool,
    ) -> TxResult<Option<Row>> {
        Transaction::check_fetch(self.db.resolve_table(t)?, fetch)?;
        self.read(t, key, |table, rec| {
            Transaction::project(&table.layout, rec, fetch)
        })
    }

    fn read_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        _for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        match self.read(t, key, |table, rec| f(RowRef::record(&table.layout, rec)))? {
            Some(read) => read.map(|()| true),
            None => Ok(false),
        }
    }

    fn read_columns_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        _columns: &[usize],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        self.read_with(t, key, for_update, f)
    }

    /// As `update_with`: the record is read in place.
    fn update_columns_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        _columns: &[usize],
        f: &mut crate::api::UpdateFn<'_>,
    ) -> TxResult<bool> {
        self.update_with(t, key, f)
    }

    /// Reads the row and runs `f` on it, so that the body goes on with what `f` took from
    /// it (a New-Order's order number), and writes nothing.
    fn update_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        f: &mut crate::api::UpdateFn<'_>,
    ) -> TxResult<bool> {
        let mut set = Vec::new();
        match self.read(t, key, |table, rec| {
            let mut writer = RowWriter::values(&mut set);
            f(RowRef::record(&table.layout, rec), &mut writer)
        })? {
            Some(done) => done.map(|()| true),
            None => Ok(false),
        }
    }

    fn update(&mut self, t: &TableRef, key: &[Value], _set: &[(usize, Value)]) -> TxResult<bool> {
        Ok(self.read(t, key, |_, _| ())?.is_some())
    }

    fn insert(&mut self, t: &TableRef, row: &[Value]) -> TxResult<()> {
        self.operations += 1;
        let table = self.db.resolve_table(t)?;
        table.layout.encode(row, &mut self.rec)?;
        table
            .key
            .encode_record(&table.layout, &self.rec, &mut self.key)?;
        touch_insert_position(&table.primary, &self.key)?;
        let secondaries = table.secondaries.read().clone();
        for ix in secondaries {
            let index = self.db.index_by_id(ix)?;
            index
                .key
                .encode_record(&table.layout, &self.rec, &mut self.key)?;
            touch_insert_position(&index.store, &self.key)?;
        }
        if let Records::Heap(heap) = &table.records {
            heap.touch_insert_page(self.rec.len())?;
        }
        Ok(())
    }

    fn delete(&mut self, t: &TableRef, key: &[Value]) -> TxResult<bool> {
        Ok(self.read(t, key, |_, _| ())?.is_some())
    }

    fn scan(
        &mut self,
        t: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        _for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let table = self.db.resolve_table(t)?;
        Transaction::check_fetch(table, fetch)?;
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        let lob = table.key.low_bound(range.low, &mut lo)?;
        let hib = table.key.high_bound(range.high, &mut hi)?;
        self.scan_rows(
            table,
            &table.primary,
            (&lo, lob),
            (&hi, hib),
            reverse,
            limit,
            fetch,
        )
    }

    fn scan_index(
        &mut self,
        ix: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        _for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let index = self.db.resolve_index(ix)?;
        let table = self.db.table_by_id(index.table)?;
        Transaction::check_fetch(table, fetch)?;
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        let lob = index.key.low_bound(range.low, &mut lo)?;
        let hib = index.key.high_bound(range.high, &mut hi)?;
        self.scan_rows(
            table,
            &index.store,
            (&lo, lob),
            (&hi, hib),
            reverse,
            limit,
            fetch,
        )
    }
}
