//! Reading ahead on a procedure's hints, where each operation crosses a boundary
//! ([`crate::boundary`]): a client's round trip to the server ([`client::RemoteTx`]), an
//! isolated procedure's exchange with its host ([`crate::guest`]).
//!
//! A procedure names the rows it knows from its input in hints ([`Tx::prefetch`] and its
//! kin). Across a boundary those hints become reads: each hinted row's read is kept (whole, or
//! the columns a hint of several rows names; shared, or exclusive where the hint says the row
//! will be updated) and sent in front of the
//! next operation that crosses, or alone when the next read is one of them; what came back
//! answers the reads of those rows that follow, as long as the lock it was read under
//! suffices. The transaction's own write of a row makes its answer stale (the next read
//! crosses); a hinted read sent after a write of its row runs after it and sees it.
//!
//! A hinted read is a real read: it takes its lock when it is sent (so hints are named in the
//! order the procedure locks), and its error fails the operation it travelled with.
//!
//! Scans are hinted the same way ([`Tx::prefetch_scan`]: a table's rows under a key prefix,
//! ascending, up to a limit): the scan is sent whole in front of the next operation, and a
//! later scan with the same table, prefix, limit and a lock the hint's suffices is answered
//! from its rows. A write of a row under the prefix (or any insert into the table) makes the
//! answer stale. So a procedure whose scans are independent (Delivery's ten districts) sends
//! them together.
//!
//! A transaction hints tens of rows (TPC-C's New-Order: its items and their stock), or hundreds
//! (Stock-Level's stock rows), so the rows read ahead and answered are kept in
//! [`RowList`]s, found by a hash of their keys' values once there are more than a few: no
//! encoded key to build and allocate at every read (which in a WebAssembly procedure cost more
//! than the search), and no search of every row hinted before (which cost Stock-Level's two hundred hints some twenty thousand
//! comparisons; see `docs/performance.md`).
//!
//! [`client::RemoteTx`]: ../../client/struct.RemoteTx.html
//! [`Tx::prefetch`]: engine::Tx::prefetch

use std::ops::Bound;

use engine::{Fetch, KeyRange, ReadFn, Row, RowRef, TableRef, Tx, TxResult, UpdateFn, Value};

use crate::rows::{Named, RowList};
use crate::{Op, ScanSource};

/// A read a hint named: row `key` of `table`, whole or the columns named, for update or not.
#[derive(Debug)]
pub struct HintedRead {
    pub table: u32,
    pub key: Vec<Value>,
    /// `None`: the whole row.
    pub columns: Option<Vec<u16>>,
    pub for_update: bool,
}

impl HintedRead {
    /// The read as an operation, taking its key (see [`ReadAhead::answered_op`]).
    pub fn into_op(self) -> Op {
        Op::Get {
            table: self.table,
            key: self.key,
            columns: self.columns,
            for_update: self.for_update,
        }
    }
}

impl Named for HintedRead {
    fn table(&self) -> u32 {
        self.table
    }

    fn key(&self) -> &[Value] {
        &self.key
    }
}

/// A scan a hint named: the rows of `table` whose key starts with `prefix`, ascending, at
/// most `limit`, whole, for update or not.
#[derive(Clone, Debug, PartialEq)]
pub struct HintedScan {
    pub table: u32,
    pub prefix: Vec<Value>,
    pub limit: Option<u32>,
    pub for_update: bool,
}

impl HintedScan {
    /// The scan as an operation: whole rows.
    pub fn op(&self) -> Op {
        Op::Scan {
            source: ScanSource::Table(self.table),
            low: Bound::Included(self.prefix.clone()),
            high: Bound::Included(self.prefix.clone()),
            limit: self.limit,
            reverse: false,
            columns: None,
            for_update: self.for_update,
        }
    }

    /// Whether this scan's answer serves a scan of `table` under `prefix` with `limit`
    /// (`for_update` or not).
    fn serves(&self, table: u32, prefix: &[Value], limit: Option<u32>, for_update: bool) -> bool {
        self.table == table
            && self.limit == limit
            && self.prefix == prefix
            && (self.for_update || !for_update)
    }
}

/// What a hinted read of row `key` of `table` returned: the row, or the columns named of it.
struct Answered {
    table: u32,
    key: Vec<Value>,
    columns: Option<Vec<u16>>,
    for_update: bool,
    row: Option<Row>,
}

impl Named for Answered {
    fn table(&self) -> u32 {
        self.table
    }

    fn key(&self) -> &[Value] {
        &self.key
    }
}

/// Whether a read of columns `have` holds every column of a read of `want` (`None`: the
/// whole row).
fn holds(have: Option<&[u16]>, want: Option<&[u16]>) -> bool {
    match (have, want) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(have), Some(want)) => want.iter().all(|c| have.contains(c)),
    }
}

/// Whether a read of `columns` (`None`: the whole row) holds every column `fetch` wants.
fn covers(columns: Option<&[u16]>, fetch: Fetch<'_>) -> bool {
    match (columns, fetch) {
        (None, _) => true,
        (Some(_), Fetch::All) => false,
        (Some(have), Fetch::Cols(want)) => want
            .iter()
            .all(|&c| have.iter().any(|&h| usize::from(h) == c)),
    }
}

/// One transaction's hinted reads not sent yet, and what those sent returned. Cleared when
/// the transaction ends.
#[derive(Default)]
pub struct ReadAhead {
    reads: RowList<HintedRead>,
    /// One answer a row: a row hinted again under a stronger lock or for more columns has
    /// its answer dropped, and is read again.
    answered: RowList<Answered>,
    scans: Vec<HintedScan>,
    scanned: Vec<(HintedScan, Vec<Row>)>,
}

impl ReadAhead {
    pub fn clear(&mut self) {
        self.reads.clear();
        self.answered.clear();
        self.scans.clear();
        self.scanned.clear();
    }

    /// Keeps the scan of `table` under `prefix` (at most `limit` rows, `for_update` or not)
    /// to send; one already made, or to be made, under a lock that suffices is not made
    /// again.
    pub fn hint_scan(
        &mut self,
        table: &TableRef,
        prefix: &[i64],
        limit: Option<usize>,
        for_update: bool,
    ) {
        let prefix: Vec<Value> = prefix.iter().map(|&k| Value::Int(k)).collect();
        let limit = Op::limit(limit);
        if self
            .scanned
            .iter()
            .any(|(s, _)| s.serves(table.id, &prefix, limit, for_update))
        {
            return;
        }
        let same =
            |s: &&mut HintedScan| s.table == table.id && s.limit == limit && s.prefix == prefix;
        match self.scans.iter_mut().find(same) {
            Some(scan) => scan.for_update |= for_update,
            None => self.scans.push(HintedScan {
                table: table.id,
                prefix,
                limit,
                for_update,
            }),
        }
    }

    /// The scans to send now, in the order hinted.
    pub fn take_scans(&mut self) -> Vec<HintedScan> {
        std::mem::take(&mut self.scans)
    }

    /// Keeps what a hinted scan returned (whole rows).
    pub fn scanned(&mut self, scan: HintedScan, rows: Vec<Row>) {
        self.scanned.push((scan, rows));
    }

    /// The answer to a scan of `table` under `prefix` (at most `limit` rows, ascending,
    /// `for_update` or not) that a hinted scan already gave: the rows, or the columns
    /// `fetch` names of them. `None` where no hinted scan answered it (or one scanned shared
    /// and this scan wants the rows exclusively, or it names a column past a row's).
    pub fn answer_scan(
        &self,
        table: u32,
        prefix: &[Value],
        limit: Option<u32>,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> Option<Vec<Row>> {
        let (_, rows) = self
            .scanned
            .iter()
            .find(|(s, _)| s.serves(table, prefix, limit, for_update))?;
        match fetch {
            Fetch::All => Some(rows.clone()),
            Fetch::Cols(cols) => rows
                .iter()
                .map(|row| cols.iter().map(|&c| row.get(c).cloned()).collect())
                .collect(),
        }
    }

    /// Whether a hinted scan not sent yet will answer a scan of `table` under `prefix`
    /// (at most `limit` rows, `for_update` or not).
    pub fn will_answer_scan(
        &self,
        table: u32,
        prefix: &[Value],
        limit: Option<u32>,
        for_update: bool,
    ) -> bool {
        self.scans
            .iter()
            .any(|s| s.serves(table, prefix, limit, for_update))
    }

    /// Keeps the reads of `rows`, whole (`for_update` or not), to send; a row already read,
    /// or to be read, under a lock that suffices is not read again.
    pub fn hint(&mut self, rows: &[(&TableRef, &[i64])], for_update: bool) {
        self.hint_reads(rows, None, for_update);
    }

    /// Keeps shared reads of `columns` of `rows` to send (a row hinted twice is read once,
    /// with the columns of both hints): a procedure that reads a few columns of many rows
    /// (TPC-C's Stock-Level: one column of some two hundred stock rows) moves only those,
    /// and a read of those columns is answered from them. A hint of one row reads it whole,
    /// as [`ReadAhead::hint`] does: the read that follows may take the whole row
    /// ([`engine::Tx::read_with`] does), which a part could not answer, and one row's other
    /// columns cost little.
    pub fn hint_columns(&mut self, rows: &[(&TableRef, &[i64])], columns: &[usize]) {
        let narrow = match rows.len() {
            0 | 1 => None,
            _ => columns
                .iter()
                .map(|&c| u16::try_from(c).ok())
                .collect::<Option<Vec<u16>>>(),
        };
        self.hint_reads(rows, narrow.as_deref(), false);
    }

    /// Keeps reads for update of `rows` to send: whole, or of `columns` where the hint names
    /// several rows (as [`ReadAhead::hint_columns`] narrows a shared hint), which then answer
    /// [`engine::Tx::update_columns_with`] of those columns and not a whole row's update.
    pub fn hint_for_update(&mut self, rows: &[(&TableRef, &[i64])], columns: Option<&[usize]>) {
        let narrow = match (rows.len(), columns) {
            (0 | 1, _) | (_, None) => None,
            (_, Some(columns)) => columns
                .iter()
                .map(|&c| u16::try_from(c).ok())
                .collect::<Option<Vec<u16>>>(),
        };
        self.hint_reads(rows, narrow.as_deref(), true);
    }

    fn hint_reads(
        &mut self,
        rows: &[(&TableRef, &[i64])],
        columns: Option<&[u16]>,
        for_update: bool,
    ) {
        for (table, key) in rows {
            let key: Vec<Value> = key.iter().map(|&k| Value::Int(k)).collect();
            if let Some(slot) = self.answered.find(table.id, &key) {
                let a = self.answered.at(slot);
                if (a.for_update || !for_update) && holds(a.columns.as_deref(), columns) {
                    continue;
                }
                // Read again, under a stronger lock or for more columns: the answer goes.
                self.answered.remove_at(slot);
            }
            match self.reads.get_mut(table.id, &key) {
                Some(read) => {
                    read.for_update |= for_update;
                    match (&mut read.columns, columns) {
                        (Some(have), Some(more)) => {
                            for &c in more {
                                if !have.contains(&c) {
                                    have.push(c);
                                }
                            }
                        }
                        (have, None) => *have = None,
                        (None, Some(_)) => {}
                    }
                }
                None => self.reads.push(HintedRead {
                    table: table.id,
                    key,
                    columns: columns.map(<[u16]>::to_vec),
                    for_update,
                }),
            }
        }
    }

    /// The reads to send now, in the order hinted.
    pub fn take(&mut self) -> Vec<HintedRead> {
        self.reads.take()
    }

    /// Keeps what a hinted read returned: one [`ReadAhead::take`] gave, each answered once.
    pub fn answered(&mut self, read: HintedRead, row: Option<Row>) {
        self.keep(read.table, read.key, read.columns, read.for_update, row);
    }

    /// Keeps what a hinted read returned, given back as the operation it was sent as
    /// ([`HintedRead::into_op`] of one [`ReadAhead::take`] gave, each answered once); any
    /// other operation is not a hinted read and is ignored.
    pub fn answered_op(&mut self, op: Op, row: Option<Row>) {
        if let Op::Get {
            table,
            key,
            columns,
            for_update,
        } = op
        {
            self.keep(table, key, columns, for_update, row);
        }
    }

    fn keep(
        &mut self,
        table: u32,
        key: Vec<Value>,
        columns: Option<Vec<u16>>,
        for_update: bool,
        row: Option<Row>,
    ) {
        // One answer a row: a row read again had its answer dropped when it was hinted again
        // (`hint_reads`), and a row is read once however often it is hinted, so no answer
        // of this row is kept: it is added without looking for one (`RowList::push` checks
        // that in debug builds).
        self.answered.push(Answered {
            table,
            key,
            columns,
            for_update,
            row,
        });
    }

    /// The answer to a read of row `key` of `table` (`for_update` or not) that a hinted read
    /// already gave: the row, or the columns `fetch` names of it, or its absence. `None`
    /// where no hinted read answered it (or one read it shared and this read wants it
    /// exclusively, or it names a column past the row's, which is left to the engine to
    /// refuse).
    pub fn answer(
        &self,
        table: u32,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> Option<Option<Row>> {
        let answered = self.answered.get(table, key)?;
        if for_update && !answered.for_update {
            return None;
        }
        let Some(row) = &answered.row else {
            return Some(None);
        };
        match (fetch, &answered.columns) {
            (Fetch::All, None) => Some(Some(row.clone())),
            (Fetch::All, Some(_)) => None,
            (Fetch::Cols(cols), None) => cols
                .iter()
                .map(|&c| row.get(c).cloned())
                .collect::<Option<Row>>()
                .map(Some),
            (Fetch::Cols(cols), Some(have)) => cols
                .iter()
                .map(|&c| {
                    let at = have.iter().position(|&h| usize::from(h) == c)?;
                    row.get(at).cloned()
                })
                .collect::<Option<Row>>()
                .map(Some),
        }
    }

    /// [`ReadAhead::answer`] handed to `f` in place, for a read that borrows its row
    /// ([`Tx::read_with`], or [`Tx::read_columns_with`] of `columns`): what was found is not
    /// copied out. `Some(Ok(found))` where an answer serves the read.
    pub fn answer_with(
        &self,
        table: u32,
        key: &[Value],
        columns: Option<&[usize]>,
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> Option<TxResult<bool>> {
        let answered = self.answered.get(table, key)?;
        if for_update && !answered.for_update {
            return None;
        }
        let Some(row) = &answered.row else {
            return Some(Ok(false));
        };
        let view = match (&answered.columns, columns) {
            (None, _) => RowRef::values(row),
            (Some(_), None) => return None,
            (Some(have), Some(cols)) => {
                if !cols
                    .iter()
                    .all(|&c| have.iter().any(|&h| usize::from(h) == c))
                {
                    return None;
                }
                RowRef::some(have, row)
            }
        };
        Some(f(view).map(|()| true))
    }

    /// What a hinted read for update found as row `key` of `table`, taken out of the answers
    /// (a read-modify-write's update makes the answer stale anyway; see [`update_with`]): the
    /// row, whole or of the columns it was read with. `columns`: the read wants only those
    /// (`None`: the whole row). `None` where no such answer is kept: none, or a shared read,
    /// or one that lacks a column wanted, or the row's absence.
    pub fn take_for_update(
        &mut self,
        table: u32,
        key: &[Value],
        columns: Option<&[usize]>,
    ) -> Option<TakenRow> {
        let slot = self.answered.find(table, key)?;
        let a = self.answered.at(slot);
        let fetch = columns.map_or(Fetch::All, Fetch::Cols);
        if !a.for_update || a.row.is_none() || !covers(a.columns.as_deref(), fetch) {
            return None;
        }
        let a = self.answered.remove_at(slot);
        Some(TakenRow {
            columns: a.columns,
            row: a.row?,
        })
    }

    /// Whether a hinted read not sent yet will answer a read of the columns `fetch` names of
    /// row `key` of `table` (`for_update` or not).
    pub fn will_answer(
        &self,
        table: u32,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> bool {
        self.reads
            .get(table, key)
            .is_some_and(|r| (r.for_update || !for_update) && covers(r.columns.as_deref(), fetch))
    }

    /// The transaction wrote row `key` of `table` (`None`: inserted into `table`): what a
    /// hinted read returned of it is stale.
    pub fn stale(&mut self, table: u32, key: Option<&[Value]>) {
        match key {
            Some(key) => _ = self.answered.remove(table, key),
            None => self.answered.retain(|a| a.table != table),
        }
        if !self.scanned.is_empty() {
            // A scan whose prefix the key starts with may have seen the row; any insert may
            // fall under any prefix.
            self.scanned.retain(|(s, _)| {
                s.table != table || key.is_some_and(|key| !key.starts_with(&s.prefix))
            });
        }
    }
}

/// A row [`ReadAhead::take_for_update`] took out of the answers: `row[i]` is column
/// `columns[i]`, or column `i` where `columns` is `None` (the whole row).
#[derive(Debug, PartialEq)]
pub struct TakenRow {
    columns: Option<Vec<u16>>,
    row: Row,
}

/// [`Tx::update_with`] (`columns`: `None`) and [`Tx::update_columns_with`] for a transaction
/// that reads ahead: `taken` is what [`ReadAhead::take_for_update`] gave for the row, handed
/// to `f` as it came instead of copied out of the answers (TPC-C's New-Order updates ten
/// stock rows this way, six of their seventeen columns read); without it the row is read for
/// update, whole or of `columns`, as the trait's default does.
pub fn update_with<T: Tx + ?Sized>(
    tx: &mut T,
    taken: Option<TakenRow>,
    table: &TableRef,
    key: &[Value],
    columns: Option<&[usize]>,
    f: &mut UpdateFn<'_>,
) -> TxResult<bool> {
    let taken = match taken {
        Some(taken) => taken,
        None => {
            let fetch = columns.map_or(Fetch::All, Fetch::Cols);
            let Some(row) = tx.get(table, key, fetch, true)? else {
                return Ok(false);
            };
            TakenRow {
                columns: Op::columns(fetch)?,
                row,
            }
        }
    };
    let set = match &taken.columns {
        None => engine::updates_of(&taken.row, f)?,
        Some(columns) => engine::updates_of_row(RowRef::some(columns, &taken.row), f)?,
    };
    tx.update(table, key, &set)
}

/// The prefix a range names, where it is one ([`engine::KeyRange::prefix`]: the same key as
/// both bounds, included; a range unbounded on both sides is the empty prefix's): the scans a
/// hint can name.
pub fn scan_prefix<'r>(range: &KeyRange<'r>) -> Option<&'r [Value]> {
    match (range.low, range.high) {
        (Bound::Included(low), Bound::Included(high)) if low == high => Some(low),
        (Bound::Unbounded, Bound::Unbounded) => Some(&[]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(id: u32) -> TableRef {
        TableRef {
            name: format!("t{id}"),
            id,
        }
    }

    #[test]
    fn a_hinted_read_answers_by_lock_and_column_until_the_row_is_written() {
        let (t, u) = (table(1), table(2));
        let mut ahead = ReadAhead::default();
        ahead.hint(&[(&t, &[7]), (&u, &[7])], false);
        ahead.hint(&[(&t, &[7])], true);
        let key = [Value::Int(7)];
        assert!(
            ahead.will_answer(1, &key, Fetch::All, true),
            "the second hint upgraded the read"
        );
        assert!(!ahead.will_answer(2, &key, Fetch::All, true));
        assert!(ahead.will_answer(2, &key, Fetch::All, false));
        let reads = ahead.take();
        assert_eq!(reads.len(), 2);
        assert!(!ahead.will_answer(1, &key, Fetch::All, false), "taken");
        let row = vec![Value::Int(7), Value::Str("x".into()), Value::Int(3)];
        for read in reads {
            let found = (read.table == 1).then(|| row.clone());
            ahead.answered(read, found);
        }
        assert_eq!(
            ahead.answer(1, &key, Fetch::All, true),
            Some(Some(row.clone()))
        );
        assert_eq!(
            ahead.answer(1, &key, Fetch::Cols(&[2, 0]), false),
            Some(Some(vec![Value::Int(3), Value::Int(7)]))
        );
        assert_eq!(ahead.answer(1, &key, Fetch::Cols(&[3]), false), None);
        assert_eq!(
            ahead.answer(2, &key, Fetch::All, false),
            Some(None),
            "absent"
        );
        assert_eq!(
            ahead.answer(2, &key, Fetch::All, true),
            None,
            "read shared only"
        );
        assert_eq!(ahead.answer(1, &[Value::Int(8)], Fetch::All, false), None);
        // Hinted again: already answered, not read again.
        ahead.hint(&[(&t, &[7])], true);
        assert!(ahead.take().is_empty());
        ahead.stale(1, Some(&key));
        assert_eq!(ahead.answer(1, &key, Fetch::All, false), None);
        ahead.stale(2, None);
        assert_eq!(ahead.answer(2, &key, Fetch::All, false), None);
    }

    #[test]
    fn a_read_of_some_columns_answers_reads_of_those_columns_only() {
        let t = table(1);
        let mut ahead = ReadAhead::default();
        ahead.hint_columns(&[(&t, &[7]), (&t, &[8])], &[2]);
        ahead.hint_columns(&[(&t, &[7]), (&t, &[9])], &[0]);
        let (k7, k8) = ([Value::Int(7)], [Value::Int(8)]);
        assert!(ahead.will_answer(1, &k7, Fetch::Cols(&[0, 2]), false));
        assert!(!ahead.will_answer(1, &k8, Fetch::Cols(&[0]), false));
        assert!(!ahead.will_answer(1, &k8, Fetch::All, false));
        assert!(!ahead.will_answer(1, &k8, Fetch::Cols(&[2]), true));
        let reads = ahead.take();
        assert_eq!(reads.len(), 3, "one read a row");
        assert_eq!(reads[0].columns, Some(vec![2, 0]), "both hints' columns");
        for read in reads {
            let op = read.into_op();
            let Op::Get { columns, .. } = &op else {
                panic!("{op:?}")
            };
            // What the engine answers: the columns asked for, in that order.
            let row = columns
                .as_ref()
                .unwrap()
                .iter()
                .map(|&c| Value::Int(i64::from(c) * 10))
                .collect();
            ahead.answered_op(op, Some(row));
        }
        assert_eq!(
            ahead.answer(1, &k7, Fetch::Cols(&[0, 2]), false),
            Some(Some(vec![Value::Int(0), Value::Int(20)]))
        );
        assert_eq!(
            ahead.answer(1, &k8, Fetch::Cols(&[2]), false),
            Some(Some(vec![Value::Int(20)]))
        );
        assert_eq!(ahead.answer(1, &k8, Fetch::Cols(&[0]), false), None);
        assert_eq!(ahead.answer(1, &k8, Fetch::All, false), None);
        assert_eq!(ahead.answer(1, &k8, Fetch::Cols(&[2]), true), None);
        // Hinted again for columns they hold: not read again; for more, read again.
        ahead.hint_columns(&[(&t, &[8]), (&t, &[7])], &[2]);
        assert!(ahead.take().is_empty());
        ahead.hint_columns(&[(&t, &[8]), (&t, &[7])], &[1]);
        assert_eq!(ahead.take().len(), 2);
        // A whole-row hint of a row read in part is a read of the whole row.
        ahead.hint(&[(&t, &[9])], false);
        let reads = ahead.take();
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].columns, None);
        // One row hinted alone is read whole (the read that follows may want it whole).
        ahead.hint_columns(&[(&t, &[10])], &[0]);
        assert_eq!(ahead.take()[0].columns, None);
    }

    #[test]
    fn a_hinted_scan_answers_the_same_scan_by_lock_and_column_until_a_row_under_it_is_written() {
        let t = table(1);
        let mut ahead = ReadAhead::default();
        ahead.hint_scan(&t, &[1, 2], Some(1), false);
        ahead.hint_scan(&t, &[1, 3], None, true);
        ahead.hint_scan(&t, &[1, 2], Some(1), true);
        let p2 = [Value::Int(1), Value::Int(2)];
        let p3 = [Value::Int(1), Value::Int(3)];
        assert!(ahead.will_answer_scan(1, &p2, Some(1), true), "upgraded");
        assert!(
            !ahead.will_answer_scan(1, &p2, None, false),
            "another limit"
        );
        let scans = ahead.take_scans();
        assert_eq!(scans.len(), 2);
        assert!(matches!(
            scans[0].op(),
            Op::Scan {
                limit: Some(1),
                reverse: false,
                columns: None,
                for_update: true,
                ..
            }
        ));
        let row = |a: i64, b: i64, c: i64| vec![Value::Int(a), Value::Int(b), Value::Int(c)];
        let rows2 = vec![row(1, 2, 7)];
        let rows3 = vec![row(1, 3, 8), row(1, 3, 9)];
        for (scan, rows) in scans.into_iter().zip([rows2.clone(), rows3]) {
            ahead.scanned(scan, rows);
        }
        assert_eq!(
            ahead.answer_scan(1, &p2, Some(1), Fetch::All, true),
            Some(rows2)
        );
        assert_eq!(
            ahead.answer_scan(1, &p3, None, Fetch::Cols(&[2]), false),
            Some(vec![vec![Value::Int(8)], vec![Value::Int(9)]])
        );
        assert_eq!(ahead.answer_scan(1, &p3, Some(1), Fetch::All, false), None);
        assert_eq!(ahead.answer_scan(2, &p3, None, Fetch::All, false), None);
        assert_eq!(
            ahead.answer_scan(1, &p3, None, Fetch::Cols(&[3]), false),
            None
        );
        // Hinted again: already made, not made again.
        ahead.hint_scan(&t, &[1, 3], None, false);
        assert!(ahead.take_scans().is_empty());
        // A write under one prefix makes that scan stale, not the other; an insert, both.
        ahead.stale(1, Some(&row(1, 3, 9)));
        assert_eq!(ahead.answer_scan(1, &p3, None, Fetch::All, false), None);
        assert!(ahead
            .answer_scan(1, &p2, Some(1), Fetch::All, false)
            .is_some());
        ahead.stale(2, None);
        assert!(ahead
            .answer_scan(1, &p2, Some(1), Fetch::All, false)
            .is_some());
        ahead.stale(1, None);
        assert_eq!(ahead.answer_scan(1, &p2, Some(1), Fetch::All, false), None);
    }

    #[test]
    fn only_a_read_for_update_of_the_columns_wanted_is_taken_for_a_read_modify_write() {
        let t = table(2);
        let mut ahead = ReadAhead::default();
        ahead.hint(&[(&t, &[1]), (&t, &[2])], true);
        ahead.hint(&[(&t, &[3])], false);
        ahead.hint_columns(&[(&t, &[4]), (&t, &[5])], &[1]);
        // For update, columns 0 and 2 of two rows: narrowed; of one row: whole.
        ahead.hint_for_update(&[(&t, &[6]), (&t, &[7])], Some(&[0, 2]));
        ahead.hint_for_update(&[(&t, &[8])], Some(&[2]));
        for read in ahead.take() {
            // Row 2 is not there.
            let whole = [read.key[0].clone(), Value::Int(7), Value::Int(9)];
            if read.key[0] == Value::Int(8) {
                assert_eq!(read.columns, None, "a hint of one row is not narrowed");
            }
            let row = (read.key[0] != Value::Int(2)).then(|| match &read.columns {
                None => whole.to_vec(),
                Some(columns) => columns
                    .iter()
                    .map(|&c| whole[usize::from(c)].clone())
                    .collect(),
            });
            ahead.answered(read, row);
        }
        let key = |k| [Value::Int(k)];
        let whole = |k| TakenRow {
            columns: None,
            row: vec![Value::Int(k), Value::Int(7), Value::Int(9)],
        };
        assert_eq!(ahead.take_for_update(2, &key(1), None), Some(whole(1)));
        assert_eq!(ahead.answer(2, &key(1), Fetch::All, true), None, "taken");
        assert_eq!(ahead.take_for_update(2, &key(1), None), None);
        for k in [2, 3, 4, 6, 9] {
            assert_eq!(ahead.take_for_update(2, &key(k), None), None, "row {k}");
        }
        // Some columns: from a narrowed answer that holds them, or from a whole one.
        assert_eq!(ahead.take_for_update(2, &key(6), Some(&[1])), None);
        assert_eq!(
            ahead.take_for_update(2, &key(6), Some(&[2, 0])),
            Some(TakenRow {
                columns: Some(vec![0, 2]),
                row: vec![Value::Int(6), Value::Int(9)],
            })
        );
        assert_eq!(
            ahead
                .take_for_update(2, &key(7), Some(&[2]))
                .map(|t| t.row.len()),
            Some(2)
        );
        assert_eq!(
            ahead.take_for_update(2, &key(8), Some(&[2])),
            Some(whole(8))
        );
        assert_eq!(
            ahead.take_for_update(2, &key(3), Some(&[1])),
            None,
            "shared"
        );
        // What was not taken still answers.
        assert_eq!(ahead.answer(2, &key(2), Fetch::All, true), Some(None));
        assert!(ahead.answer(2, &key(3), Fetch::All, false).is_some());
        assert!(ahead.answer(2, &key(4), Fetch::Cols(&[1]), false).is_some());
    }

    #[test]
    fn a_read_given_back_as_its_operation_is_answered_and_other_operations_are_not() {
        let t = table(4);
        let mut ahead = ReadAhead::default();
        ahead.hint(&[(&t, &[9])], true);
        let mut reads = ahead.take();
        let op = reads.pop().expect("one read").into_op();
        let row = vec![Value::Int(9), Value::Int(1)];
        ahead.answered_op(op, Some(row.clone()));
        assert_eq!(
            ahead.answer(4, &[Value::Int(9)], Fetch::All, true),
            Some(Some(row))
        );
        let mut other = ReadAhead::default();
        other.answered_op(
            Op::Get {
                table: 4,
                key: vec![Value::Int(9)],
                columns: Some(vec![0]),
                for_update: false,
            },
            Some(vec![Value::Int(9)]),
        );
        assert_eq!(
            other.answer(4, &[Value::Int(9)], Fetch::All, false),
            None,
            "a read of some columns is no hinted read"
        );
    }
}
