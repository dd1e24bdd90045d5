//! The transaction API (`Tx`): the few operations every workload procedure is written against.
//!
//! Arguments and results are plain data ([`Value`], [`Row`]), so the same procedure code runs
//! embedded, as a stored procedure, and as an interactive client-side transaction. A procedure
//! never begins or commits: the caller (driver, server) does, and retries it when it fails with
//! a retryable error. A procedure must be safe to run twice.

use std::borrow::Cow;
use std::ops::Bound;

use crate::record::Layout;
use crate::schema::ColumnType;
use crate::value::{Row, Value, ValueRef};

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
    /// Every entry.
    pub fn all() -> Self {
        KeyRange {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
        }
    }

    /// Every entry whose key starts with `prefix`.
    pub fn prefix(prefix: &'a [Value]) -> Self {
        KeyRange {
            low: Bound::Included(prefix),
            high: Bound::Included(prefix),
        }
    }
}

/// A borrowed view of one row, as the closure of [`Tx::read_with`] or [`Tx::update_with`]
/// sees it. Columns are numbered as in the table (like [`Fetch::All`]).
///
/// Embedded, the view reads the stored record in place: nothing is copied or allocated. A
/// `Tx` that only has rows of values (a client-side transaction) wraps a fetched row in
/// [`RowRef::values`]; the procedure cannot tell the difference.
#[derive(Clone, Copy)]
pub struct RowRef<'a>(RowSource<'a>);

#[derive(Clone, Copy)]
enum RowSource<'a> {
    Record {
        layout: &'a Layout,
        bytes: &'a [u8],
    },
    Values(&'a [Value]),
    /// Some of a row's columns: `values[i]` is column `columns[i]`. A column below the
    /// highest one named reads as NULL, as in a row placed by [`Tx::read_columns_with`]'s
    /// default.
    Some {
        columns: &'a [u16],
        values: &'a [Value],
    },
}

/// What a column of a row of values that was not fetched reads as.
static NOT_FETCHED: Value = Value::Null;

impl<'a> RowRef<'a> {
    /// A view of a stored record (the engine checks the record's size when it reads it).
    pub fn record(layout: &'a Layout, bytes: &'a [u8]) -> Self {
        RowRef(RowSource::Record { layout, bytes })
    }

    /// A view of a whole row of values, in table column order.
    pub fn values(row: &'a [Value]) -> Self {
        RowRef(RowSource::Values(row))
    }

    /// A view of some columns of a row: `values[i]` is column `columns[i]` (the others below
    /// the highest read as NULL), without placing them in a row of their own.
    pub fn some(columns: &'a [u16], values: &'a [Value]) -> Self {
        RowRef(RowSource::Some { columns, values })
    }

    /// Column `col` of a row of values (`None` for a stored record, or a column the row lacks).
    fn of_values(&self, col: usize) -> Option<&'a Value> {
        match self.0 {
            RowSource::Record { .. } => None,
            RowSource::Values(row) => row.get(col),
            RowSource::Some { columns, values } => {
                match columns.iter().position(|&c| usize::from(c) == col) {
                    Some(i) => values.get(i),
                    None if columns.iter().any(|&c| usize::from(c) > col) => Some(&NOT_FETCHED),
                    None => None,
                }
            }
        }
    }

    fn missing(col: usize) -> TxError {
        TxError::Invalid(format!("row has no column {col}"))
    }

    fn wrong(col: usize, want: &str, layout: Option<&Layout>) -> TxError {
        match layout {
            Some(l) => TxError::Invalid(format!(
                "column {} is {:?}, not {want}",
                l.column_name(col),
                l.column_type(col)
            )),
            None => TxError::Invalid(format!("column {col} is not {want}")),
        }
    }

    /// The error for reading column `col` of a record as `want`: missing, wrong type, or NULL.
    #[cold]
    fn refuse(layout: &Layout, bytes: &[u8], col: usize, want: &str) -> TxError {
        if col >= layout.columns() {
            Self::missing(col)
        } else if layout.is_null(bytes, col) {
            TxError::Invalid(format!("column {} is NULL", layout.column_name(col)))
        } else {
            Self::wrong(col, want, Some(layout))
        }
    }

    /// The integer in column `col` (NULL is an error: see [`RowRef::is_null`]).
    #[inline]
    pub fn int(&self, col: usize) -> TxResult<i64> {
        if let RowSource::Record { layout, bytes } = self.0 {
            if let Some(v) = layout.int_at(bytes, col) {
                return Ok(v);
            }
        }
        self.int_slow(col)
    }

    /// [`RowRef::int`] from values, and its errors (kept out of line so the record path
    /// inlines).
    #[inline(never)]
    fn int_slow(&self, col: usize) -> TxResult<i64> {
        match self.0 {
            RowSource::Record { layout, bytes } => match layout.type_of(col) {
                Some(ColumnType::Int) if !layout.is_null(bytes, col) => {
                    Ok(layout.read_int(bytes, col))
                }
                _ => Err(Self::refuse(layout, bytes, col, "an integer")),
            },
            RowSource::Values(_) | RowSource::Some { .. } => self
                .of_values(col)
                .ok_or_else(|| Self::missing(col))?
                .as_int()
                .ok_or_else(|| Self::wrong(col, "an integer", None)),
        }
    }

    /// The number in column `col` (a float, or an integer widened).
    #[inline]
    pub fn float(&self, col: usize) -> TxResult<f64> {
        if let RowSource::Record { layout, bytes } = self.0 {
            if let Some(v) = layout.float_at(bytes, col) {
                return Ok(v);
            }
        }
        self.float_slow(col)
    }

    /// [`RowRef::float`] from values, widened integers, and the errors.
    #[inline(never)]
    fn float_slow(&self, col: usize) -> TxResult<f64> {
        match self.0 {
            RowSource::Record { layout, bytes } => match layout.type_of(col) {
                Some(ColumnType::Float) if !layout.is_null(bytes, col) => {
                    Ok(layout.read_float(bytes, col))
                }
                Some(ColumnType::Int) if !layout.is_null(bytes, col) => {
                    Ok(layout.read_int(bytes, col) as f64)
                }
                _ => Err(Self::refuse(layout, bytes, col, "a number")),
            },
            RowSource::Values(_) | RowSource::Some { .. } => self
                .of_values(col)
                .ok_or_else(|| Self::missing(col))?
                .as_float()
                .ok_or_else(|| Self::wrong(col, "a number", None)),
        }
    }

    /// The string in column `col`, borrowed from the row.
    #[inline]
    pub fn str(&self, col: usize) -> TxResult<&'a str> {
        if let RowSource::Record { layout, bytes } = self.0 {
            if let Some(v) = layout.ascii_at(bytes, col) {
                return Ok(v);
            }
        }
        self.str_slow(col)
    }

    /// [`RowRef::str`] from values, of text that is not ASCII, and the errors.
    #[inline(never)]
    fn str_slow(&self, col: usize) -> TxResult<&'a str> {
        match self.0 {
            RowSource::Record { layout, bytes } => match layout.type_of(col) {
                Some(ColumnType::Str { .. }) if !layout.is_null(bytes, col) => {
                    layout.read_text(bytes, col).map_err(|_| {
                        TxError::Invalid(format!(
                            "column {} holds bytes that are not UTF-8",
                            layout.column_name(col)
                        ))
                    })
                }
                _ => Err(Self::refuse(layout, bytes, col, "a string")),
            },
            RowSource::Values(_) | RowSource::Some { .. } => self
                .of_values(col)
                .ok_or_else(|| Self::missing(col))?
                .as_str()
                .ok_or_else(|| Self::wrong(col, "a string", None)),
        }
    }

    /// Whether column `col` is NULL.
    pub fn is_null(&self, col: usize) -> TxResult<bool> {
        match self.0 {
            RowSource::Record { layout, bytes } => {
                if col >= layout.columns() {
                    return Err(Self::missing(col));
                }
                Ok(layout.is_null(bytes, col))
            }
            RowSource::Values(_) | RowSource::Some { .. } => Ok(self
                .of_values(col)
                .ok_or_else(|| Self::missing(col))?
                .is_null()),
        }
    }

    /// Column `col` as an owned value.
    pub fn value(&self, col: usize) -> TxResult<Value> {
        match self.0 {
            RowSource::Record { layout, bytes } => {
                if col >= layout.columns() {
                    return Err(Self::missing(col));
                }
                Ok(layout.read_column(bytes, col))
            }
            RowSource::Values(_) | RowSource::Some { .. } => self
                .of_values(col)
                .cloned()
                .ok_or_else(|| Self::missing(col)),
        }
    }

    /// How many columns the row has.
    pub fn columns(&self) -> usize {
        match self.0 {
            RowSource::Record { layout, .. } => layout.columns(),
            RowSource::Values(row) => row.len(),
            RowSource::Some { columns, .. } => {
                columns.iter().max().map_or(0, |&c| usize::from(c) + 1)
            }
        }
    }

    /// Column `col`, borrowed from the row: what [`RowRef::value`] gives, without copying a
    /// string (a server encodes a row it reads straight into its reply this way). Inlined
    /// into that loop, its one caller: called, it cost a TPC-C call at `--isolation wasm`
    /// some 4,000 instructions more (callgrind).
    #[inline(always)]
    pub fn value_ref(&self, col: usize) -> TxResult<ValueRef<'a>> {
        match self.0 {
            RowSource::Record { layout, bytes } => {
                let Some(ty) = layout.type_of(col) else {
                    return Err(Self::missing(col));
                };
                if layout.is_null(bytes, col) {
                    return Ok(ValueRef::Null);
                }
                Ok(match ty {
                    ColumnType::Int => ValueRef::Int(layout.read_int(bytes, col)),
                    ColumnType::Float => ValueRef::Float(layout.read_float(bytes, col)),
                    ColumnType::Str { .. } => ValueRef::Str(match layout.read_text(bytes, col) {
                        Ok(s) => Cow::Borrowed(s),
                        // As `Layout::read_column`: a damaged page still decodes, lossily.
                        Err(_) => String::from_utf8_lossy(layout.read_str(bytes, col)),
                    }),
                })
            }
            RowSource::Values(_) | RowSource::Some { .. } => Ok(self
                .of_values(col)
                .ok_or_else(|| Self::missing(col))?
                .into()),
        }
    }

    /// Appends every column, in order, to `out`: what [`Tx::get`] with [`Fetch::All`] returns,
    /// without a vector of its own.
    pub fn append_to(&self, out: &mut Vec<Value>) {
        match self.0 {
            RowSource::Record { layout, bytes } => {
                out.extend((0..layout.columns()).map(|c| layout.read_column(bytes, c)))
            }
            RowSource::Values(row) => out.extend_from_slice(row),
            RowSource::Some { .. } => out.extend(
                (0..self.columns()).map(|c| self.of_values(c).cloned().unwrap_or(Value::Null)),
            ),
        }
    }
}

/// The closure of [`Tx::read_with`].
pub type ReadFn<'f> = dyn FnMut(RowRef<'_>) -> TxResult<()> + 'f;

/// The closure of [`Tx::update_with`]: reads the current row and sets the columns to change
/// through the [`RowWriter`].
pub type UpdateFn<'f> = dyn FnMut(RowRef<'_>, &mut RowWriter<'_>) -> TxResult<()> + 'f;

/// What `f` sets, seeing `row`: the columns and their values, as [`Tx::update`] takes them.
/// The read-modify-write of [`Tx::update_with`]'s default, for forms that hold rows as values.
pub fn updates_of(row: &[Value], f: &mut UpdateFn<'_>) -> TxResult<Vec<(usize, Value)>> {
    updates_of_row(RowRef::values(row), f)
}

/// [`updates_of`] for a row seen through any [`RowRef`] (some of its columns, say, as
/// [`Tx::update_columns_with`] may fetch them).
pub fn updates_of_row(row: RowRef<'_>, f: &mut UpdateFn<'_>) -> TxResult<Vec<(usize, Value)>> {
    let mut set = Vec::new();
    let mut writer = RowWriter::values(&mut set);
    f(row, &mut writer)?;
    writer.finish()?;
    Ok(set)
}

/// Where the closure of [`Tx::update_with`] sets the columns it changes, by column number.
/// Setting a column does not change what the closure reads through its [`RowRef`] (the row
/// as it was).
///
/// Embedded, each value is written at once into a copy of the stored record (an integer or a
/// float in a few instructions, nothing allocated), and the engine then writes back only the
/// byte spans that changed. On the main-memory store without a log the writer starts
/// *deferred*: integers and floats into columns of their own type are only noted, as
/// `(offset, bytes)`, and the engine writes them into the record in place once the closure
/// has returned (no copy of the record at all); the first value of any other kind makes the
/// copy then and carries on as above. A client-side transaction collects `(column, value)`
/// pairs for an update instead ([`RowWriter::values`]); the procedure cannot tell the
/// difference.
///
/// A value the column cannot take (wrong type, too long, NULL where not allowed, no such
/// column) is not an error at the call, so that setters chain without `?`: the first one is
/// kept, and `update_with` returns it without changing the row. So does setting a column of
/// the primary key or of an index key.
pub struct RowWriter<'a> {
    sink: Sink<'a>,
    error: Option<TxError>,
}

enum Sink<'a> {
    Values(&'a mut Vec<(usize, Value)>),
    Record {
        layout: &'a Layout,
        /// The stored record, which the copy is made from.
        bytes: &'a [u8],
        /// A copy of the record, which the values are written into: made at the start, or
        /// (deferred) by the first value that is not a word.
        rec: &'a mut Vec<u8>,
        /// False while deferred: no copy yet, the values set so far are in `words`.
        copied: bool,
        /// Deferred: the words set so far, `(byte offset, bytes)` in the order set.
        words: &'a mut Vec<(usize, [u8; 8])>,
        /// Bit `c` set when column `c` (< 64) was set.
        mask: u64,
        /// Columns from 64 on that were set.
        wide: &'a mut Vec<usize>,
    },
}

/// What a [`RowWriter`] over a record was given, once its closure has returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    /// Bit `c` set when column `c` (< 64) was set.
    pub mask: u64,
    /// True if the values are written into the copy of the record; false if they are only in
    /// the writer's words (deferred, and nothing but words was set).
    pub copied: bool,
}

impl<'a> RowWriter<'a> {
    /// A writer that collects `(column, value)` pairs (the default [`Tx::update_with`] passes
    /// them to [`Tx::update`]).
    pub fn values(out: &'a mut Vec<(usize, Value)>) -> Self {
        RowWriter {
            sink: Sink::Values(out),
            error: None,
        }
    }

    /// A writer over `bytes`, a stored record of `layout`: into `rec`, a copy of it made now,
    /// or with `deferred` into `words` until something other than a word is set (see the
    /// type's documentation). `wide` and `words` arrive empty.
    pub(crate) fn record(
        layout: &'a Layout,
        bytes: &'a [u8],
        rec: &'a mut Vec<u8>,
        words: &'a mut Vec<(usize, [u8; 8])>,
        wide: &'a mut Vec<usize>,
        deferred: bool,
    ) -> Self {
        if !deferred {
            rec.clear();
            rec.extend_from_slice(bytes);
        }
        RowWriter {
            sink: Sink::Record {
                layout,
                bytes,
                rec,
                copied: !deferred,
                words,
                mask: 0,
                wide,
            },
            error: None,
        }
    }

    /// Sets column `col` to the integer `v`.
    #[inline]
    pub fn int(&mut self, col: usize, v: i64) {
        if !self.put_word(col, ColumnType::Int, v.to_le_bytes()) {
            self.set(col, Value::Int(v));
        }
    }

    /// Sets column `col` to the number `v`.
    #[inline]
    pub fn float(&mut self, col: usize, v: f64) {
        if !self.put_word(col, ColumnType::Float, v.to_le_bytes()) {
            self.set(col, Value::Float(v));
        }
    }

    /// The inline path of [`RowWriter::int`] and [`RowWriter::float`]: a number into a column
    /// of its own type below 64, written straight into the record copy. False, with nothing
    /// done, for anything else (collected values, conversions, errors), which goes through
    /// [`RowWriter::set`].
    #[inline(always)]
    fn put_word(&mut self, col: usize, ty: ColumnType, word: [u8; 8]) -> bool {
        if let Sink::Record {
            layout,
            rec,
            copied,
            words,
            mask,
            ..
        } = &mut self.sink
        {
            if col >= 64 {
                return false;
            }
            if !*copied {
                let Some(offset) = layout.word_offset(col, ty) else {
                    return false;
                };
                words.push((offset, word));
                *mask |= 1 << col;
                return true;
            }
            if layout.put_word(rec, col, ty, word) {
                *mask |= 1 << col;
                return true;
            }
        }
        false
    }

    /// Ends deferral: copies the stored record, writes the words set so far into the copy and
    /// clears their columns' null bits.
    #[cold]
    fn materialize(&mut self) {
        if let Sink::Record {
            bytes,
            rec,
            copied,
            words,
            mask,
            ..
        } = &mut self.sink
        {
            if !*copied {
                rec.clear();
                rec.extend_from_slice(bytes);
                for &(offset, word) in words.iter() {
                    rec[offset..offset + 8].copy_from_slice(&word);
                }
                Layout::clear_null_bits(rec, *mask);
                *copied = true;
            }
        }
    }

    /// Sets column `col` to any value: a string, NULL, a number.
    #[inline(never)]
    pub fn set(&mut self, col: usize, v: Value) {
        match &mut self.sink {
            Sink::Values(out) => out.push((col, v)),
            Sink::Record { .. } => self.write(col, &v),
        }
    }

    /// Sets column `col` to a copy of `v` (what [`Tx::update`] does for each pair).
    pub(crate) fn set_ref(&mut self, col: usize, v: &Value) {
        match &mut self.sink {
            Sink::Values(out) => out.push((col, v.clone())),
            Sink::Record { .. } => self.write(col, v),
        }
    }

    /// Writes `v` into the record copy (the `Record` sink, copied first if deferred) and notes
    /// the column.
    fn write(&mut self, col: usize, v: &Value) {
        self.materialize();
        let Sink::Record {
            layout,
            rec,
            mask,
            wide,
            ..
        } = &mut self.sink
        else {
            return;
        };
        if col >= layout.columns() {
            return self.fail(RowRef::missing(col));
        }
        match layout.write_column(rec, col, v) {
            Ok(()) if col < 64 => *mask |= 1 << col,
            Ok(()) => wide.push(col),
            Err(e) => self.fail(e),
        }
    }

    #[cold]
    fn fail(&mut self, e: TxError) {
        self.error.get_or_insert(e);
    }

    /// The columns set (as [`Sink::Record`]'s mask; 0 for collected values) and whether they
    /// are in the copy or only in the words, or the first value refused.
    pub(crate) fn finish(self) -> TxResult<Written> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(match self.sink {
            Sink::Record { mask, copied, .. } => Written { mask, copied },
            Sink::Values(_) => Written {
                mask: 0,
                copied: true,
            },
        })
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
    /// The connection to a Glass server failed or broke (client side): whether the
    /// transaction committed is unknown.
    #[error("connection to the server: {0}")]
    Connection(String),
    /// A stored procedure run in isolation (its own process, a sandbox) was stopped by it: it
    /// crashed, ran past its time limit, outgrew its memory or made a call its sandbox
    /// forbids. The message names which; the transaction was rolled back.
    #[error("stored procedure stopped by its isolation: {0}")]
    Contained(String),
}

impl TxError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, TxError::Retry(_))
    }
}

pub type TxResult<T> = Result<T, TxError>;

/// Puts the values of `row`, fetched as `columns`, at those columns' positions in `placed`
/// (the others `Null`), so that a [`RowRef`] over it reads each column by its position in the
/// table, as one over the stored record does.
fn place_columns(columns: &[usize], row: Row, placed: &mut Vec<Value>) {
    placed.clear();
    placed.resize(columns.iter().max().map_or(0, |&c| c + 1), Value::Null);
    for (&c, v) in columns.iter().zip(row) {
        placed[c] = v;
    }
}

/// [`Tx::get`] of `columns` of row `key`, each placed at its own position ([`place_columns`]):
/// the defaults of [`Tx::read_columns_with`] and [`Tx::update_columns_with`].
fn get_placed<T: Tx + ?Sized>(
    tx: &mut T,
    table: &TableRef,
    key: &[Value],
    columns: &[usize],
    for_update: bool,
) -> TxResult<Option<Row>> {
    let Some(row) = tx.get(table, key, Fetch::Cols(columns), for_update)? else {
        return Ok(None);
    };
    let mut placed = Vec::new();
    place_columns(columns, row, &mut placed);
    Ok(Some(placed))
}

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

    /// Reads the row with primary key `key` and hands a view of it to `f`; returns whether the
    /// row existed (`f` is not called if not). Like [`Tx::get`] with [`Fetch::All`], without
    /// copying the row out: one round trip.
    fn read_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        match self.get(table, key, Fetch::All, for_update)? {
            Some(row) => f(RowRef::values(&row)).map(|()| true),
            None => Ok(false),
        }
    }

    /// [`Tx::read_with`] for a procedure whose `f` reads only `columns` (by their positions in
    /// the table, as always): an implementation may fetch only those. Embedded it is
    /// `read_with`, which copies nothing out; the default, for implementations that fetch
    /// what they are asked for (a client, a sandbox's boundary), is [`Tx::get`] of the
    /// columns, whose answer a column hint ([`Tx::prefetch_columns`]) can give, handed to `f`
    /// with each column at its own position (the others `Null`).
    fn read_columns_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: &[usize],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        match get_placed(self, table, key, columns, for_update)? {
            Some(placed) => f(RowRef::values(&placed)).map(|()| true),
            None => Ok(false),
        }
    }

    /// Read-modify-write of the row with primary key `key`: `f` sees the row and says which
    /// columns to set; the row is locked exclusively first. Returns whether the row existed.
    /// Embedded this finds the row once; a client-side form needs two round trips (a read for
    /// update, then the update).
    fn update_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        f: &mut UpdateFn<'_>,
    ) -> TxResult<bool> {
        let Some(row) = self.get(table, key, Fetch::All, true)? else {
            return Ok(false);
        };
        let set = updates_of(&row, f)?;
        self.update(table, key, &set)
    }

    /// [`Tx::update_with`] for a procedure whose `f` reads only `columns` of the row (by
    /// their positions in the table; it may set any): an implementation may fetch only those.
    /// Embedded it is `update_with`, which reads the stored record in place; the default, for
    /// implementations that fetch what they are asked for (a client, a sandbox's boundary),
    /// is [`Tx::get`] of the columns for update, whose answer a for-update hint of those
    /// columns ([`Tx::prefetch_for_update`]) can give, handed to `f` with each column at its
    /// own position (the others `Null`), then [`Tx::update`].
    fn update_columns_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: &[usize],
        f: &mut UpdateFn<'_>,
    ) -> TxResult<bool> {
        let Some(placed) = get_placed(self, table, key, columns, true)? else {
            return Ok(false);
        };
        let set = updates_of(&placed, f)?;
        self.update(table, key, &set)
    }

    /// A hint that the transaction will soon read or update the rows with these primary keys
    /// (for rows it will insert, see [`Tx::prefetch_inserts`]), `(table, key)` each: an
    /// engine may start loading what reaching them
    /// reads, so that their cache misses overlap instead of following one another. It changes
    /// nothing, locks nothing and reports nothing (a key that does not exist, or a bad key, is
    /// left to the operation that follows). Keys are integers, one per key column (as every
    /// benchmark's are), so that naming them costs next to nothing; a key of any other kind is
    /// not prefetched. The default does nothing. A client-side form (`client::RemoteTx`) reads
    /// the rows its hints name, whole, in front of its next round trip, and answers the reads
    /// that follow from what came back: a transaction's independent reads travel together.
    /// There a hint is a read: it takes its row's lock, and its error fails the transaction at
    /// that round trip.
    fn prefetch(&mut self, rows: &[(&TableRef, &[i64])]) {
        let _ = rows;
    }

    /// [`Tx::prefetch`] (with `columns`, [`Tx::prefetch_columns`]) for rows the transaction
    /// will read for update (`for_update`, [`Tx::update_with`]): a form that reads ahead on
    /// hints (a client) reads these under exclusive locks, so that the update needs no lock
    /// upgrade (two transactions that both read a row shared and then wanted it exclusively
    /// would deadlock); of a hint of several rows with `columns`, only those columns, which
    /// then answer [`Tx::update_columns_with`] of no others (not `update_with`, which takes
    /// the whole row). The default is the plain hint.
    fn prefetch_for_update(&mut self, rows: &[(&TableRef, &[i64])], columns: Option<&[usize]>) {
        match columns {
            Some(columns) => self.prefetch_columns(rows, columns),
            None => self.prefetch(rows),
        }
    }

    /// [`Tx::prefetch`] for rows of which the transaction will touch only `columns`
    /// (positions in the table): an engine may load just the parts of each record that hold
    /// them; a client-side form reads only those columns of the rows of a hint that names
    /// several (so the reads that follow must name no others to be answered from them). The
    /// default is [`Tx::prefetch`].
    fn prefetch_columns(&mut self, rows: &[(&TableRef, &[i64])], columns: &[usize]) {
        let _ = columns;
        self.prefetch(rows);
    }

    /// A hint that the transaction will soon scan `table` for the rows whose primary key
    /// starts with `prefix` (integers, one per key column), ascending, at most `limit`,
    /// `for_update` or not, as [`Tx::scan`] with [`KeyRange::prefix`]. Like [`Tx::prefetch`]
    /// it changes, locks and reports nothing, and the default does nothing. A client-side
    /// form (`client::RemoteTx`) makes the scan, whole rows, in front of its next round trip
    /// and answers the scan that follows (same table, prefix and limit, not reversed) from
    /// what came back: a procedure's independent scans travel together.
    fn prefetch_scan(
        &mut self,
        table: &TableRef,
        prefix: &[i64],
        limit: Option<usize>,
        for_update: bool,
    ) {
        let _ = (table, prefix, limit, for_update);
    }

    /// A hint that the transaction will soon insert rows with these primary keys, which
    /// therefore do not exist yet: an engine may start loading where the inserts will write
    /// (an index's slot), but has no record to load and should read nothing to find one. On
    /// memory the run has not touched yet, a read would map the kernel's zero page only for
    /// the insert's write to fault a second time; a prefetch instruction never faults. Like
    /// [`Tx::prefetch`] it changes, locks and reports nothing, and the default does nothing.
    fn prefetch_inserts(&mut self, rows: &[(&TableRef, &[i64])]) {
        let _ = rows;
    }

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

    /// [`Tx::scan`] handing each row to `f`, in scan order, instead of returning them, for a
    /// procedure whose `f` reads only `columns` (an implementation may fetch only those).
    /// Embedded the records are read in place and nothing is copied out; the default scans
    /// the columns (which a scan hint, [`Tx::prefetch_scan`], can answer) and hands `f` each
    /// row with each column at its own position (the others `Null`). With `for_update` the
    /// rows are locked as [`Tx::scan`] locks them for update (Delivery's order lines, each
    /// updated after).
    #[allow(clippy::too_many_arguments)]
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
        let mut placed = Vec::new();
        for row in rows {
            place_columns(columns, row, &mut placed);
            f(RowRef::values(&placed))?;
        }
        Ok(())
    }

    /// Every row of `table`, handed to `f` in the order the table stores them, not in key
    /// order, for a reader of whole tables that needs no order (a consistency check): read so,
    /// a table on heap pages is read a page after another, each page once. Embedded, a table
    /// on heap pages is locked whole (shared, to the end of the transaction) and its heap
    /// read page by page in place; the default, and a table in main memory, is
    /// [`Tx::scan_columns_with`] over the whole table in key order. `f` reads only `columns`.
    fn scan_table_with(
        &mut self,
        table: &TableRef,
        columns: &[usize],
        f: &mut ReadFn<'_>,
    ) -> TxResult<()> {
        self.scan_columns_with(table, KeyRange::all(), None, false, columns, false, f)
    }

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

    /// Asks for isolation level 1 (read committed; TPC-C clause 3.4.0.1) for this
    /// transaction's reads from here on: a read sees only committed rows, but a row read
    /// twice may have changed and a range read twice may hold new rows, because a read's
    /// shared locks may be let go as the read ends instead of at commit. Writes, and reads
    /// for update, keep their locks to the end. This default keeps every lock: serializable,
    /// which is stronger and so also correct; the embedded engine lets them go (where its
    /// `DbConfig::read_committed` is on, the default), and a client and a sandbox's boundary
    /// pass the request on to it.
    fn read_committed(&mut self) {}
}

/// What a terminal, a procedure table or a check is opened against: the database in this
/// process, or a connection to a Glass server. It names tables and indexes and runs a body in a
/// transaction of its own, so that the same workload code sets itself up either way.
pub trait Connection {
    /// Resolves a table name to a handle.
    fn table(&self, name: &str) -> TxResult<TableRef>;
    /// Resolves a secondary index's name to a handle.
    fn index(&self, name: &str) -> TxResult<IndexRef>;
    /// One attempt of `body` in a transaction of its own: begin, `body`, then commit, or abort
    /// if `body` (or the commit) failed. Returns the error that ended the attempt; retrying a
    /// retryable one is the caller's choice.
    fn transaction(&self, body: &mut dyn FnMut(&mut dyn Tx) -> TxResult<()>) -> TxResult<()>;
}

impl<S: Connection + ?Sized> Connection for std::sync::Arc<S> {
    fn table(&self, name: &str) -> TxResult<TableRef> {
        (**self).table(name)
    }

    fn index(&self, name: &str) -> TxResult<IndexRef> {
        (**self).index(name)
    }

    fn transaction(&self, body: &mut dyn FnMut(&mut dyn Tx) -> TxResult<()>) -> TxResult<()> {
        (**self).transaction(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::TableSchema;

    /// `(id int, note str(8) nullable, amount float, count int)`, 4 columns; or, with
    /// `wide`, 70 integer columns after them.
    fn layout(wide: bool) -> Layout {
        let mut schema = TableSchema::new("t")
            .int("id")
            .string("note", 8)
            .nullable()
            .float("amount")
            .int("count");
        if wide {
            for c in 0..70 {
                schema = schema.int(&format!("w{c}"));
            }
        }
        Layout::new(&schema.key(&["id"]))
    }

    fn record(layout: &Layout, row: &[Value]) -> Vec<u8> {
        let mut rec = Vec::new();
        layout.encode(row, &mut rec).unwrap();
        rec
    }

    /// A row appended from a stored record or from values is the row, after what the vector
    /// held: NULL, text, a float and integers alike.
    #[test]
    fn a_row_appends_every_column_in_order() {
        let layout = layout(false);
        for row in [
            vec![
                Value::Int(7),
                Value::Str("né".into()),
                Value::Float(-1.5),
                Value::Int(0),
            ],
            vec![
                Value::Int(-3),
                Value::Null,
                Value::Float(0.0),
                Value::Int(i64::MAX),
            ],
        ] {
            let stored = record(&layout, &row);
            for view in [RowRef::record(&layout, &stored), RowRef::values(&row)] {
                let mut out = vec![Value::Int(99)];
                view.append_to(&mut out);
                assert_eq!(out[0], Value::Int(99));
                assert_eq!(out[1..], row[..]);
            }
        }
    }

    /// Some columns of a row read as the same columns of the row placed whole (the others
    /// below the highest NULL, none beyond it), whatever order they came in.
    #[test]
    fn some_columns_read_as_the_row_placed_by_them() {
        let columns = [2u16, 0, 1];
        let values = [Value::Float(2.5), Value::Int(7), Value::Str("né".into())];
        let placed = [Value::Int(7), Value::Str("né".into()), Value::Float(2.5)];
        let (some, whole) = (RowRef::some(&columns, &values), RowRef::values(&placed));
        assert_eq!(some.columns(), 3);
        for col in 0..3 {
            assert_eq!(some.value(col).unwrap(), whole.value(col).unwrap());
            assert_eq!(some.value_ref(col).unwrap(), whole.value_ref(col).unwrap());
        }
        assert_eq!(some.int(1).ok(), None, "a string is not an integer");
        assert_eq!(some.int(0).unwrap(), 7);
        assert_eq!(some.float(2).unwrap(), 2.5);
        assert_eq!(some.str(1).unwrap(), "né");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        some.append_to(&mut a);
        whole.append_to(&mut b);
        assert_eq!(a, b);

        // Column 3 alone: 0 to 2 were not fetched, and read as NULL; 4 is beyond the row.
        let gap = RowRef::some(&[3], &values[1..2]);
        assert_eq!(gap.columns(), 4);
        assert_eq!(gap.int(3).unwrap(), 7);
        assert!(gap.is_null(0).unwrap() && gap.is_null(2).unwrap());
        assert!(!gap.is_null(3).unwrap());
        assert!(gap.is_null(4).is_err() && gap.value(4).is_err());
        let mut out = Vec::new();
        gap.append_to(&mut out);
        assert_eq!(out, [Value::Null, Value::Null, Value::Null, Value::Int(7)]);
    }

    /// A borrowed column is the owned one, from a stored record or from values, NULL, text,
    /// floats and integers alike; a column past the row's is refused.
    #[test]
    fn a_borrowed_column_is_the_owned_column() {
        let layout = layout(false);
        let row = vec![
            Value::Int(-7),
            Value::Str("né".into()),
            Value::Float(2.25),
            Value::Int(i64::MIN),
        ];
        let with_null = vec![
            Value::Int(1),
            Value::Null,
            Value::Float(-0.0),
            Value::Int(0),
        ];
        for row in [row, with_null] {
            let stored = record(&layout, &row);
            for view in [RowRef::record(&layout, &stored), RowRef::values(&row)] {
                assert_eq!(view.columns(), 4);
                for (c, want) in row.iter().enumerate() {
                    let owned = match view.value_ref(c).unwrap() {
                        ValueRef::Null => Value::Null,
                        ValueRef::Int(i) => Value::Int(i),
                        ValueRef::Float(f) => Value::Float(f),
                        ValueRef::Str(s) => Value::Str(s.into_owned()),
                    };
                    assert_eq!(owned, view.value(c).unwrap(), "column {c}");
                    assert_eq!(&owned, want);
                }
                assert!(view.value_ref(4).is_err());
            }
        }
    }

    /// Writing through the record writer gives the bytes of encoding the new row whole, and
    /// notes exactly the columns set, whether it starts with a copy or deferred (the string
    /// makes the copy then); the values writer collects the same pairs.
    #[test]
    fn the_record_writer_writes_what_encoding_the_row_writes() {
        let layout = layout(false);
        let old = [Value::Int(1), Value::Null, Value::Float(2.5), Value::Int(3)];
        let stored = record(&layout, &old);
        let new = [
            Value::Int(1),
            Value::Str("hi".into()),
            Value::Float(8.0),
            Value::Int(-4),
        ];
        for deferred in [false, true] {
            let (mut rec, mut words, mut wide) = (Vec::new(), Vec::new(), Vec::new());
            let mut writer =
                RowWriter::record(&layout, &stored, &mut rec, &mut words, &mut wide, deferred);
            writer.float(2, 7.25);
            writer.int(3, -4);
            writer.set(1, Value::Str("hi".into()));
            // An integer into a float column is converted, as `update` converts it.
            writer.int(2, 8);
            let written = writer.finish().unwrap();
            assert_eq!(written.mask, 0b1110);
            assert!(written.copied, "deferred {deferred}");
            assert_eq!(rec, record(&layout, &new), "deferred {deferred}");
            assert!(wide.is_empty());
        }

        let mut pairs = Vec::new();
        let mut writer = RowWriter::values(&mut pairs);
        writer.float(2, 7.25);
        writer.int(3, -4);
        writer.set(1, Value::Null);
        assert_eq!(writer.finish().unwrap().mask, 0);
        assert_eq!(
            pairs,
            vec![
                (2, Value::Float(7.25)),
                (3, Value::Int(-4)),
                (1, Value::Null)
            ]
        );
    }

    /// A deferred writer given only words copies nothing: it lists each word at its column's
    /// offset, in the order set, and writing them over the record (null bits cleared) gives
    /// what encoding the new row gives.
    #[test]
    fn a_deferred_writer_of_words_lists_them_at_their_offsets() {
        let layout = layout(false);
        let old = [Value::Int(1), Value::Null, Value::Float(2.5), Value::Int(3)];
        let stored = record(&layout, &old);
        let (mut rec, mut words, mut wide) = (Vec::new(), Vec::new(), Vec::new());
        let mut writer = RowWriter::record(&layout, &stored, &mut rec, &mut words, &mut wide, true);
        writer.int(3, 5);
        writer.float(2, -1.5);
        writer.int(3, 6);
        let written = writer.finish().unwrap();
        assert_eq!(
            written,
            Written {
                mask: 0b1100,
                copied: false
            }
        );
        assert!(rec.is_empty(), "no copy was made");
        assert_eq!(
            words,
            vec![
                (layout.column_range(3).start, 5i64.to_le_bytes()),
                (layout.column_range(2).start, (-1.5f64).to_le_bytes()),
                (layout.column_range(3).start, 6i64.to_le_bytes()),
            ]
        );
        let mut applied = stored.clone();
        for (offset, word) in &words {
            applied[*offset..offset + 8].copy_from_slice(word);
        }
        let new = [
            Value::Int(1),
            Value::Null,
            Value::Float(-1.5),
            Value::Int(6),
        ];
        assert_eq!(applied, record(&layout, &new));
    }

    /// Words set while deferred keep their place when a later value makes the copy: written
    /// into it, their columns' null bits cleared.
    #[test]
    fn making_the_copy_keeps_the_words_set_before_it() {
        let layout = Layout::new(
            &TableSchema::new("t")
                .int("id")
                .int("opt")
                .nullable()
                .string("note", 8)
                .key(&["id"]),
        );
        let stored = record(
            &layout,
            &[Value::Int(1), Value::Null, Value::Str("a".into())],
        );
        let (mut rec, mut words, mut wide) = (Vec::new(), Vec::new(), Vec::new());
        let mut writer = RowWriter::record(&layout, &stored, &mut rec, &mut words, &mut wide, true);
        writer.int(1, 5);
        writer.set(2, Value::Str("b".into()));
        let written = writer.finish().unwrap();
        assert_eq!((written.mask, written.copied), (0b110, true));
        let new = [Value::Int(1), Value::Int(5), Value::Str("b".into())];
        assert_eq!(rec, record(&layout, &new));
    }

    /// The first refused value is the error, and later ones do not replace it; columns from
    /// 64 on are listed apart from the mask.
    #[test]
    fn the_first_refusal_is_kept_and_wide_columns_are_listed() {
        let layout = layout(true);
        let mut row = vec![Value::Int(1), Value::Null, Value::Float(0.0), Value::Int(0)];
        row.extend((0..70).map(Value::Int));
        let before = record(&layout, &row);
        for deferred in [false, true] {
            let (mut rec, mut words, mut wide) = (Vec::new(), Vec::new(), Vec::new());
            let mut writer =
                RowWriter::record(&layout, &before, &mut rec, &mut words, &mut wide, deferred);
            writer.int(70, 5);
            writer.int(3, 9);
            let written = writer.finish().unwrap();
            assert_eq!(written.mask, 1 << 3);
            assert!(written.copied, "a wide column makes the copy");
            assert_eq!(wide, vec![70]);

            for (bad, message) in [
                (0usize, "is Str"),
                (1, "longer than column note"),
                (2, "no column 200"),
            ] {
                let (mut rec, mut words, mut wide) = (Vec::new(), Vec::new(), Vec::new());
                let mut writer =
                    RowWriter::record(&layout, &before, &mut rec, &mut words, &mut wide, deferred);
                match bad {
                    0 => writer.set(1, Value::Int(3)),
                    1 => writer.set(1, Value::Str("far too long".into())),
                    _ => writer.int(200, 1),
                }
                writer.int(200, 2);
                writer.set(3, Value::Null);
                let e = writer.finish().unwrap_err().to_string();
                assert!(e.contains(message), "{e}");
            }
        }
    }
}
