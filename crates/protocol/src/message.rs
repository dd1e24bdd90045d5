//! The messages: requests, responses, the operations of a batch and their results, each with
//! its encoder and decoder. The layouts are the crate docs' tables.
//!
//! Invariants of the codec (tested below):
//! * `decode(encode(m)) == m` for every message, floats compared by bits.
//! * The encoding is canonical: a frame that decodes is exactly the encoding of what it
//!   decodes to (a bool other than 0/1, an unknown tag or trailing bytes are rejected).
//! * Decoding never panics and allocates no more than a constant times the bytes it was given.

use std::ops::Bound;

use engine::{Row, RowRef, TxResult, Value};

use crate::class::ErrorClass;
use crate::codec::{
    put_bool, put_bound, put_columns, put_len, put_list, put_opt, put_str, put_u16, put_u32,
    put_u8, put_value, put_value_ref, put_values, Reader, MIN_COLUMN, MIN_LIST, MIN_STR, MIN_VALUE,
};
use crate::error::ProtocolError;
use crate::{HEADER_LEN, MAGIC, VERSION};

type Result<T> = std::result::Result<T, ProtocolError>;

const KIND_HELLO: u8 = 0x01;
const KIND_CATALOG: u8 = 0x02;
const KIND_CALL: u8 = 0x03;
const KIND_BEGIN: u8 = 0x04;
const KIND_BATCH: u8 = 0x05;
const KIND_COMMIT: u8 = 0x06;
const KIND_ABORT: u8 = 0x07;

const KIND_WELCOME: u8 = 0x81;
const KIND_CATALOG_IS: u8 = 0x82;
const KIND_RETURNED: u8 = 0x83;
const KIND_DONE: u8 = 0x84;
const KIND_RESULTS: u8 = 0x85;
const KIND_FAILED: u8 = 0xFF;

const OP_GET: u8 = 1;
const OP_UPDATE: u8 = 2;
const OP_INSERT: u8 = 3;
const OP_DELETE: u8 = 4;
const OP_SCAN: u8 = 5;
const OP_READ_COMMITTED: u8 = 6;

const SOURCE_TABLE: u8 = 0;
const SOURCE_INDEX: u8 = 1;

const RESULT_ROW: u8 = 1;
const RESULT_FOUND: u8 = 2;
const RESULT_INSERTED: u8 = 3;
const RESULT_ROWS: u8 = 4;
const RESULT_SET: u8 = 5;

/// The smallest op (`ReadCommitted`: its tag) and op results (`Inserted`, `Set`).
pub(crate) const MIN_OP: usize = 1;
pub(crate) const MIN_OP_RESULT: usize = 1;
/// `(u16 column, Value)` and `(str name, u32 id)`.
const MIN_SET: usize = MIN_COLUMN + MIN_VALUE;
const MIN_NAMED_ID: usize = MIN_STR + 4;

/// A message from a client to the server.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Opens the connection. `magic` is always [`MAGIC`] and `version` [`VERSION`] (decoding
    /// rejects others); `max_frame` is the largest frame the client accepts.
    Hello {
        magic: [u8; 4],
        version: u16,
        max_frame: u32,
    },
    /// Asks for the table and index names with their ids.
    Catalog,
    /// Runs a stored procedure as one transaction, in one round trip.
    Call {
        procedure: String,
        args: Vec<Value>,
    },
    /// Starts an interactive transaction.
    Begin,
    /// Operations of the open transaction (`autocommit: false`), or of a transaction of their
    /// own that commits at once (`autocommit: true`).
    Batch {
        autocommit: bool,
        ops: Vec<Op>,
    },
    Commit,
    Abort,
}

/// One operation of a [`Request::Batch`]. Tables and indexes are named by the ids of
/// [`Response::CatalogIs`]; columns by their position in the table.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Reads the row with primary key `key`: its `columns` in that order, or all of them.
    Get {
        table: u32,
        key: Vec<Value>,
        columns: Option<Vec<u16>>,
        for_update: bool,
    },
    /// Sets the given columns of the row with primary key `key`.
    Update {
        table: u32,
        key: Vec<Value>,
        set: Vec<(u16, Value)>,
    },
    Insert {
        table: u32,
        row: Row,
    },
    Delete {
        table: u32,
        key: Vec<Value>,
    },
    /// Reads the rows of a table (by primary key) or index between two bounds.
    Scan {
        source: ScanSource,
        low: Bound<Vec<Value>>,
        high: Bound<Vec<Value>>,
        limit: Option<u32>,
        reverse: bool,
        columns: Option<Vec<u16>>,
        for_update: bool,
    },
    /// From here to the transaction's end, its plain reads keep their shared locks only while
    /// they run: isolation level 1, read committed ([`engine::Tx::read_committed`]).
    ReadCommitted,
}

impl Op {
    /// Whether the operation changes the database (an update, insert or delete).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Op::Update { .. } | Op::Insert { .. } | Op::Delete { .. }
        )
    }

    /// The `columns` field for a read of `fetch`: `None` for every column, else their
    /// positions, each of which must fit a `u16`.
    pub fn columns(fetch: engine::Fetch<'_>) -> engine::TxResult<Option<Vec<u16>>> {
        match fetch {
            engine::Fetch::All => Ok(None),
            engine::Fetch::Cols(cols) => cols
                .iter()
                .map(|&c| {
                    u16::try_from(c).map_err(|_| engine::TxError::Invalid(format!("no column {c}")))
                })
                .collect::<engine::TxResult<Vec<u16>>>()
                .map(Some),
        }
    }

    /// The `limit` field for a scan of at most `limit` rows (more than `u32::MAX` is none).
    pub fn limit(limit: Option<usize>) -> Option<u32> {
        limit.map(|l| u32::try_from(l).unwrap_or(u32::MAX))
    }

    /// A scan of `source` over `range`, as [`engine::Tx::scan`] names one.
    pub fn scan(
        source: ScanSource,
        range: engine::KeyRange<'_>,
        limit: Option<u32>,
        reverse: bool,
        fetch: engine::Fetch<'_>,
        for_update: bool,
    ) -> engine::TxResult<Op> {
        Ok(Op::Scan {
            source,
            low: range.low.map(<[Value]>::to_vec),
            high: range.high.map(<[Value]>::to_vec),
            limit,
            reverse,
            columns: Op::columns(fetch)?,
            for_update,
        })
    }
}

/// What a [`Op::Scan`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanSource {
    Table(u32),
    Index(u32),
}

/// A message from the server to a client.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// Accepts a `Hello`. `max_frame` is the largest frame the server accepts; both sides then
    /// use the smaller of the two.
    Welcome {
        version: u16,
        max_frame: u32,
        workload: String,
        procedures: Vec<String>,
    },
    /// Answers `Catalog`: names with their ids.
    CatalogIs {
        tables: Vec<(String, u32)>,
        indexes: Vec<(String, u32)>,
    },
    /// What a `Call`'s procedure returned; it committed.
    Returned { values: Vec<Value> },
    /// `Begin`, `Commit` or `Abort` succeeded.
    Done,
    /// One result for each op of a `Batch`, in order.
    Results { results: Vec<OpResult> },
    /// The request failed; `class` says what to do about it.
    Failed { class: ErrorClass, message: String },
}

/// The result of one [`Op`].
#[derive(Clone, Debug, PartialEq)]
pub enum OpResult {
    /// `Get`: the row, or `None` if the key has none.
    Row(Option<Row>),
    /// `Update`, `Delete`: whether the key had a row.
    Found(bool),
    /// `Insert`.
    Inserted,
    /// `Scan`: the rows in scan order.
    Rows(Vec<Row>),
    /// `ReadCommitted`: the transaction reads at that level from now on.
    Set,
}

/// Appends a frame of `kind`: the length prefix, the kind byte and what `body` writes, then
/// fills the length in.
pub(crate) fn frame(out: &mut Vec<u8>, kind: u8, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    put_u8(out, kind);
    body(out);
    let len = u32::try_from(out.len() - start - HEADER_LEN).expect("a frame over 4 GiB");
    out[start..start + HEADER_LEN].copy_from_slice(&len.to_le_bytes());
}

impl Request {
    /// Appends this request as one whole frame, length prefix included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Request::Hello {
                magic,
                version,
                max_frame,
            } => frame(out, KIND_HELLO, |out| {
                out.extend_from_slice(magic);
                put_u16(out, *version);
                put_u32(out, *max_frame);
            }),
            Request::Catalog => frame(out, KIND_CATALOG, |_| {}),
            Request::Call { procedure, args } => frame(out, KIND_CALL, |out| {
                put_str(out, procedure);
                put_values(out, args);
            }),
            Request::Begin => frame(out, KIND_BEGIN, |_| {}),
            Request::Batch { autocommit, ops } => frame(out, KIND_BATCH, |out| {
                put_bool(out, *autocommit);
                put_list(out, ops, put_op);
            }),
            Request::Commit => frame(out, KIND_COMMIT, |_| {}),
            Request::Abort => frame(out, KIND_ABORT, |_| {}),
        }
    }

    /// Decodes a request from a frame's bytes after the length prefix: the kind byte, then the
    /// body, every byte of which must belong to the request.
    pub fn decode(kind_and_body: &[u8]) -> Result<Request> {
        let (&kind, body) = kind_and_body
            .split_first()
            .ok_or(ProtocolError::EmptyFrame)?;
        let mut r = Reader::new(body);
        let request = match kind {
            KIND_HELLO => {
                let magic = r.array::<4>("hello magic")?;
                if magic != MAGIC {
                    return Err(ProtocolError::BadMagic(magic));
                }
                let version = r.u16("hello version")?;
                if version != VERSION {
                    return Err(ProtocolError::UnsupportedVersion(version));
                }
                let max_frame = r.u32("hello max_frame")?;
                Request::Hello {
                    magic,
                    version,
                    max_frame,
                }
            }
            KIND_CATALOG => Request::Catalog,
            KIND_CALL => Request::Call {
                procedure: r.str("call procedure")?,
                args: r.values("call arguments")?,
            },
            KIND_BEGIN => Request::Begin,
            KIND_BATCH => Request::Batch {
                autocommit: r.bool("batch autocommit")?,
                ops: r.list(MIN_OP, "batch ops", read_op)?,
            },
            KIND_COMMIT => Request::Commit,
            KIND_ABORT => Request::Abort,
            _ => return Err(ProtocolError::UnknownRequest(kind)),
        };
        r.finish("request")?;
        Ok(request)
    }
}

pub(crate) fn put_op(out: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Get {
            table,
            key,
            columns,
            for_update,
        } => {
            put_u8(out, OP_GET);
            put_u32(out, *table);
            put_values(out, key);
            put_columns(out, columns.as_ref());
            put_bool(out, *for_update);
        }
        Op::Update { table, key, set } => {
            put_u8(out, OP_UPDATE);
            put_u32(out, *table);
            put_values(out, key);
            put_list(out, set, |out, (column, value)| {
                put_u16(out, *column);
                put_value(out, value);
            });
        }
        Op::Insert { table, row } => {
            put_u8(out, OP_INSERT);
            put_u32(out, *table);
            put_values(out, row);
        }
        Op::Delete { table, key } => {
            put_u8(out, OP_DELETE);
            put_u32(out, *table);
            put_values(out, key);
        }
        Op::Scan {
            source,
            low,
            high,
            limit,
            reverse,
            columns,
            for_update,
        } => {
            put_u8(out, OP_SCAN);
            match source {
                ScanSource::Table(id) => {
                    put_u8(out, SOURCE_TABLE);
                    put_u32(out, *id);
                }
                ScanSource::Index(id) => {
                    put_u8(out, SOURCE_INDEX);
                    put_u32(out, *id);
                }
            }
            put_bound(out, low);
            put_bound(out, high);
            put_opt(out, limit.as_ref(), |out, &limit| put_u32(out, limit));
            put_bool(out, *reverse);
            put_columns(out, columns.as_ref());
            put_bool(out, *for_update);
        }
        Op::ReadCommitted => put_u8(out, OP_READ_COMMITTED),
    }
}

pub(crate) fn read_op(r: &mut Reader<'_>) -> Result<Op> {
    read_op_into(r, &mut Spare::default())
}

/// The lists of operations that have run, emptied, for the next operations decoded: a key or
/// row, a list of columns, an update's columns and values. A host that runs each operation of a
/// frame as it decodes it ([`crate::guest::answer_ops_with`]) and keeps one `Spare` from frame
/// to frame allocates these lists once, not once an operation.
#[derive(Default)]
pub struct Spare {
    values: Option<Vec<Value>>,
    columns: Option<Vec<u16>>,
    set: Option<Vec<(u16, Value)>>,
}

impl Spare {
    /// Keeps the lists of `op`, which has run (what they held is dropped).
    pub(crate) fn recycle(&mut self, op: &mut Op) {
        match op {
            Op::Get { key, columns, .. } => {
                self.keep_values(key);
                self.keep_columns(columns);
            }
            Op::Update { key, set, .. } => {
                self.keep_values(key);
                set.clear();
                self.set = Some(std::mem::take(set));
            }
            Op::Insert { row: values, .. } | Op::Delete { key: values, .. } => {
                self.keep_values(values)
            }
            Op::Scan { columns, .. } => self.keep_columns(columns),
            Op::ReadCommitted => {}
        }
    }

    fn keep_values(&mut self, values: &mut Vec<Value>) {
        values.clear();
        self.values = Some(std::mem::take(values));
    }

    fn keep_columns(&mut self, columns: &mut Option<Vec<u16>>) {
        if let Some(mut columns) = columns.take() {
            columns.clear();
            self.columns = Some(columns);
        }
    }

    fn values(&mut self, r: &mut Reader<'_>, what: &'static str) -> Result<Vec<Value>> {
        match self.values.take() {
            Some(spare) => r.values_into(spare, what),
            None => r.values(what),
        }
    }

    fn columns(&mut self, r: &mut Reader<'_>, what: &'static str) -> Result<Option<Vec<u16>>> {
        // The flag first: an operation that names no columns leaves the spare list kept.
        if !r.bool(what)? {
            return Ok(None);
        }
        let item = |r: &mut Reader<'_>| r.u16(what);
        match self.columns.take() {
            Some(spare) => r.list_into(spare, MIN_COLUMN, what, item),
            None => r.list(MIN_COLUMN, what, item),
        }
        .map(Some)
    }

    fn set(&mut self, r: &mut Reader<'_>) -> Result<Vec<(u16, Value)>> {
        let item = |r: &mut Reader<'_>| Ok((r.u16("update column")?, r.value()?));
        match self.set.take() {
            Some(spare) => r.list_into(spare, MIN_SET, "update set", item),
            None => r.list(MIN_SET, "update set", item),
        }
    }
}

/// [`read_op`] with its lists from `spare`, where it has them.
pub(crate) fn read_op_into(r: &mut Reader<'_>, spare: &mut Spare) -> Result<Op> {
    Ok(match r.u8("op tag")? {
        OP_GET => Op::Get {
            table: r.u32("get table")?,
            key: spare.values(r, "get key")?,
            columns: spare.columns(r, "get columns")?,
            for_update: r.bool("get for_update")?,
        },
        OP_UPDATE => Op::Update {
            table: r.u32("update table")?,
            key: spare.values(r, "update key")?,
            set: spare.set(r)?,
        },
        OP_INSERT => Op::Insert {
            table: r.u32("insert table")?,
            row: spare.values(r, "insert row")?,
        },
        OP_DELETE => Op::Delete {
            table: r.u32("delete table")?,
            key: spare.values(r, "delete key")?,
        },
        OP_SCAN => Op::Scan {
            source: match r.u8("scan source tag")? {
                SOURCE_TABLE => ScanSource::Table(r.u32("scan table")?),
                SOURCE_INDEX => ScanSource::Index(r.u32("scan index")?),
                tag => {
                    return Err(ProtocolError::UnknownTag {
                        what: "scan source",
                        tag,
                    })
                }
            },
            low: r.bound("scan low bound")?,
            high: r.bound("scan high bound")?,
            limit: r.opt("scan limit", |r| r.u32("scan limit"))?,
            reverse: r.bool("scan reverse")?,
            columns: spare.columns(r, "scan columns")?,
            for_update: r.bool("scan for_update")?,
        },
        OP_READ_COMMITTED => Op::ReadCommitted,
        tag => return Err(ProtocolError::UnknownTag { what: "op", tag }),
    })
}

impl Response {
    /// The `Failed` response for an engine error: its class, and its text without the words
    /// the client's [`ErrorClass::into_tx_error`] adds back.
    pub fn failed(error: &engine::TxError) -> Response {
        Response::Failed {
            class: ErrorClass::of(error),
            message: ErrorClass::message_of(error),
        }
    }

    /// Appends this response as one whole frame, length prefix included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Response::Welcome {
                version,
                max_frame,
                workload,
                procedures,
            } => frame(out, KIND_WELCOME, |out| {
                put_u16(out, *version);
                put_u32(out, *max_frame);
                put_str(out, workload);
                put_list(out, procedures, |out, p| put_str(out, p));
            }),
            Response::CatalogIs { tables, indexes } => frame(out, KIND_CATALOG_IS, |out| {
                put_named_ids(out, tables);
                put_named_ids(out, indexes);
            }),
            Response::Returned { values } => frame(out, KIND_RETURNED, |out| {
                put_values(out, values);
            }),
            Response::Done => frame(out, KIND_DONE, |_| {}),
            Response::Results { results } => frame(out, KIND_RESULTS, |out| {
                put_list(out, results, put_op_result);
            }),
            Response::Failed { class, message } => frame(out, KIND_FAILED, |out| {
                put_u8(out, class.tag());
                put_str(out, message);
            }),
        }
    }

    /// Decodes a response from a frame's bytes after the length prefix: the kind byte, then
    /// the body, every byte of which must belong to the response.
    pub fn decode(kind_and_body: &[u8]) -> Result<Response> {
        let (&kind, body) = kind_and_body
            .split_first()
            .ok_or(ProtocolError::EmptyFrame)?;
        let mut r = Reader::new(body);
        let response = match kind {
            KIND_WELCOME => {
                let version = r.u16("welcome version")?;
                if version != VERSION {
                    return Err(ProtocolError::UnsupportedVersion(version));
                }
                Response::Welcome {
                    version,
                    max_frame: r.u32("welcome max_frame")?,
                    workload: r.str("welcome workload")?,
                    procedures: r
                        .list(MIN_STR, "welcome procedures", |r| r.str("procedure name"))?,
                }
            }
            KIND_CATALOG_IS => Response::CatalogIs {
                tables: read_named_ids(&mut r, "catalog tables")?,
                indexes: read_named_ids(&mut r, "catalog indexes")?,
            },
            KIND_RETURNED => Response::Returned {
                values: r.values("returned values")?,
            },
            KIND_DONE => Response::Done,
            KIND_RESULTS => Response::Results {
                results: r.list(MIN_OP_RESULT, "results", read_op_result)?,
            },
            KIND_FAILED => {
                let tag = r.u8("error class")?;
                let class = ErrorClass::from_tag(tag).ok_or(ProtocolError::UnknownTag {
                    what: "error class",
                    tag,
                })?;
                Response::Failed {
                    class,
                    message: r.str("error message")?,
                }
            }
            _ => return Err(ProtocolError::UnknownResponse(kind)),
        };
        r.finish("response")?;
        Ok(response)
    }
}

pub(crate) fn put_named_ids(out: &mut Vec<u8>, named: &[(String, u32)]) {
    put_list(out, named, |out, (name, id)| {
        put_str(out, name);
        put_u32(out, *id);
    });
}

pub(crate) fn read_named_ids(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<(String, u32)>> {
    r.list(MIN_NAMED_ID, what, |r| Ok((r.str(what)?, r.u32(what)?)))
}

pub(crate) fn put_op_result(out: &mut Vec<u8>, result: &OpResult) {
    match result {
        OpResult::Row(row) => {
            put_u8(out, RESULT_ROW);
            put_opt(out, row.as_ref(), |out, row| put_values(out, row));
        }
        OpResult::Found(found) => {
            put_u8(out, RESULT_FOUND);
            put_bool(out, *found);
        }
        OpResult::Inserted => put_u8(out, RESULT_INSERTED),
        OpResult::Set => put_u8(out, RESULT_SET),
        OpResult::Rows(rows) => {
            put_u8(out, RESULT_ROWS);
            put_len(out, rows.len());
            for row in rows {
                put_values(out, row);
            }
        }
    }
}

/// A `Row` result written from `row` (`None`: no row): its columns `columns`, in that order,
/// or with `None` every column, as [`OpResult::Row`] of those values encodes.
pub(crate) fn put_row_result(
    out: &mut Vec<u8>,
    row: Option<RowRef<'_>>,
    columns: Option<&[u16]>,
) -> TxResult<()> {
    put_u8(out, RESULT_ROW);
    let Some(row) = row else {
        put_u8(out, 0);
        return Ok(());
    };
    put_u8(out, 1);
    put_row_values(out, row, columns)
}

/// The values of `row` as a `Row` or `Rows` result holds them: columns `columns`, in that
/// order, or with `None` every column. Inlined into both (called, it cost Voter's call at
/// `--isolation wasm` some 150 instructions: callgrind).
#[inline(always)]
pub(crate) fn put_row_values(
    out: &mut Vec<u8>,
    row: RowRef<'_>,
    columns: Option<&[u16]>,
) -> TxResult<()> {
    match columns {
        None => {
            put_len(out, row.columns());
            for col in 0..row.columns() {
                put_value_ref(out, &row.value_ref(col)?);
            }
        }
        Some(columns) => {
            put_len(out, columns.len());
            for &col in columns {
                put_value_ref(out, &row.value_ref(usize::from(col))?);
            }
        }
    }
    Ok(())
}

/// A `Rows` result written a row at a time: [`RowsResult::start`], [`RowsResult::row`] for
/// each row, [`RowsResult::finish`] (which writes the count in front of them).
pub(crate) struct RowsResult {
    /// Where the count goes.
    at: usize,
    rows: usize,
}

impl RowsResult {
    pub(crate) fn start(out: &mut Vec<u8>) -> RowsResult {
        put_u8(out, RESULT_ROWS);
        let at = out.len();
        put_u32(out, 0);
        RowsResult { at, rows: 0 }
    }

    pub(crate) fn row(
        &mut self,
        out: &mut Vec<u8>,
        row: RowRef<'_>,
        columns: Option<&[u16]>,
    ) -> TxResult<()> {
        self.rows += 1;
        put_row_values(out, row, columns)
    }

    pub(crate) fn finish(self, out: &mut [u8]) {
        let count = u32::try_from(self.rows).expect("more than u32::MAX rows in one result");
        out[self.at..self.at + 4].copy_from_slice(&count.to_le_bytes());
    }
}

pub(crate) fn read_op_result(r: &mut Reader<'_>) -> Result<OpResult> {
    Ok(match r.u8("op result tag")? {
        RESULT_ROW => OpResult::Row(r.opt("row result", |r| r.values("row result"))?),
        RESULT_FOUND => OpResult::Found(r.bool("found result")?),
        RESULT_INSERTED => OpResult::Inserted,
        RESULT_SET => OpResult::Set,
        RESULT_ROWS => {
            OpResult::Rows(r.list(MIN_LIST, "rows result", |r| r.values("rows result row"))?)
        }
        tag => {
            return Err(ProtocolError::UnknownTag {
                what: "op result",
                tag,
            })
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::frame::frame_len;
    use crate::DEFAULT_MAX_FRAME;

    /// Any value, floats from any bits (every NaN payload, both zeroes) and strings of any
    /// characters.
    pub(crate) fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            any::<u64>().prop_map(|bits| Value::Float(f64::from_bits(bits))),
            ".{0,12}".prop_map(Value::Str),
        ]
    }

    fn values() -> impl Strategy<Value = Vec<Value>> {
        prop::collection::vec(value(), 0..5)
    }

    fn columns() -> impl Strategy<Value = Option<Vec<u16>>> {
        prop::option::of(prop::collection::vec(any::<u16>(), 0..5))
    }

    fn bound() -> impl Strategy<Value = Bound<Vec<Value>>> {
        prop_oneof![
            Just(Bound::Unbounded),
            values().prop_map(Bound::Included),
            values().prop_map(Bound::Excluded),
        ]
    }

    pub(crate) fn op() -> impl Strategy<Value = Op> {
        let source = prop_oneof![
            any::<u32>().prop_map(ScanSource::Table),
            any::<u32>().prop_map(ScanSource::Index),
        ];
        prop_oneof![
            (any::<u32>(), values(), columns(), any::<bool>()).prop_map(
                |(table, key, columns, for_update)| Op::Get {
                    table,
                    key,
                    columns,
                    for_update
                }
            ),
            (
                any::<u32>(),
                values(),
                prop::collection::vec((any::<u16>(), value()), 0..4)
            )
                .prop_map(|(table, key, set)| Op::Update { table, key, set }),
            (any::<u32>(), values()).prop_map(|(table, row)| Op::Insert { table, row }),
            (any::<u32>(), values()).prop_map(|(table, key)| Op::Delete { table, key }),
            (
                source,
                bound(),
                bound(),
                prop::option::of(any::<u32>()),
                any::<bool>(),
                columns(),
                any::<bool>()
            )
                .prop_map(
                    |(source, low, high, limit, reverse, columns, for_update)| {
                        Op::Scan {
                            source,
                            low,
                            high,
                            limit,
                            reverse,
                            columns,
                            for_update,
                        }
                    }
                ),
            Just(Op::ReadCommitted),
        ]
    }

    pub(crate) fn request() -> impl Strategy<Value = Request> {
        prop_oneof![
            any::<u32>().prop_map(|max_frame| Request::Hello {
                magic: MAGIC,
                version: VERSION,
                max_frame
            }),
            Just(Request::Catalog),
            ("[a-z_]{0,12}", values())
                .prop_map(|(procedure, args)| Request::Call { procedure, args }),
            Just(Request::Begin),
            (any::<bool>(), prop::collection::vec(op(), 0..5))
                .prop_map(|(autocommit, ops)| Request::Batch { autocommit, ops }),
            Just(Request::Commit),
            Just(Request::Abort),
        ]
    }

    pub(crate) fn op_result() -> impl Strategy<Value = OpResult> {
        prop_oneof![
            prop::option::of(values()).prop_map(OpResult::Row),
            any::<bool>().prop_map(OpResult::Found),
            Just(OpResult::Inserted),
            Just(OpResult::Set),
            prop::collection::vec(values(), 0..4).prop_map(OpResult::Rows),
        ]
    }

    pub(crate) fn named_ids() -> impl Strategy<Value = Vec<(String, u32)>> {
        prop::collection::vec((".{0,10}", any::<u32>()), 0..4)
    }

    pub(crate) fn response() -> impl Strategy<Value = Response> {
        prop_oneof![
            (
                any::<u32>(),
                ".{0,8}",
                prop::collection::vec(".{0,10}", 0..4)
            )
                .prop_map(|(max_frame, workload, procedures)| Response::Welcome {
                    version: VERSION,
                    max_frame,
                    workload,
                    procedures
                }),
            (named_ids(), named_ids())
                .prop_map(|(tables, indexes)| Response::CatalogIs { tables, indexes }),
            values().prop_map(|values| Response::Returned { values }),
            Just(Response::Done),
            prop::collection::vec(op_result(), 0..5)
                .prop_map(|results| Response::Results { results }),
            (prop::sample::select(ErrorClass::ALL.to_vec()), ".{0,20}")
                .prop_map(|(class, message)| Response::Failed { class, message }),
        ]
    }

    /// A message whose every float is replaced by a string of its bits (and every string
    /// marked as one), so that `==` compares floats by bits: NaN equals the same NaN, and
    /// 0.0 differs from -0.0.
    pub(crate) trait ByBits {
        fn by_bits(&self) -> Self;
    }

    impl ByBits for Value {
        fn by_bits(&self) -> Self {
            match self {
                Value::Float(f) => Value::Str(format!("float {:#018x}", f.to_bits())),
                Value::Str(s) => Value::Str(format!("str {s}")),
                other => other.clone(),
            }
        }
    }

    impl<T: ByBits> ByBits for Vec<T> {
        fn by_bits(&self) -> Self {
            self.iter().map(T::by_bits).collect()
        }
    }

    impl ByBits for Bound<Vec<Value>> {
        fn by_bits(&self) -> Self {
            match self {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(k) => Bound::Included(k.by_bits()),
                Bound::Excluded(k) => Bound::Excluded(k.by_bits()),
            }
        }
    }

    impl ByBits for Op {
        fn by_bits(&self) -> Self {
            let mut op = self.clone();
            match &mut op {
                Op::Get { key, .. } | Op::Delete { key, .. } => *key = key.by_bits(),
                Op::Insert { row, .. } => *row = row.by_bits(),
                Op::Update { key, set, .. } => {
                    *key = key.by_bits();
                    for (_, v) in set {
                        *v = v.by_bits();
                    }
                }
                Op::Scan { low, high, .. } => {
                    *low = low.by_bits();
                    *high = high.by_bits();
                }
                Op::ReadCommitted => {}
            }
            op
        }
    }

    impl ByBits for OpResult {
        fn by_bits(&self) -> Self {
            match self {
                OpResult::Row(row) => OpResult::Row(row.as_ref().map(|r| r.by_bits())),
                OpResult::Rows(rows) => OpResult::Rows(rows.by_bits()),
                other => other.clone(),
            }
        }
    }

    impl ByBits for Request {
        fn by_bits(&self) -> Self {
            match self {
                Request::Call { procedure, args } => Request::Call {
                    procedure: procedure.clone(),
                    args: args.by_bits(),
                },
                Request::Batch { autocommit, ops } => Request::Batch {
                    autocommit: *autocommit,
                    ops: ops.by_bits(),
                },
                other => other.clone(),
            }
        }
    }

    impl ByBits for Response {
        fn by_bits(&self) -> Self {
            match self {
                Response::Returned { values } => Response::Returned {
                    values: values.by_bits(),
                },
                Response::Results { results } => Response::Results {
                    results: results.by_bits(),
                },
                other => other.clone(),
            }
        }
    }

    fn encode_request(request: &Request) -> Vec<u8> {
        let mut out = Vec::new();
        request.encode(&mut out);
        out
    }

    fn encode_response(response: &Response) -> Vec<u8> {
        let mut out = Vec::new();
        response.encode(&mut out);
        out
    }

    /// The frame's kind and body, after checking its length prefix.
    fn body(frame: &[u8]) -> &[u8] {
        let total = frame_len(frame, DEFAULT_MAX_FRAME)
            .expect("a valid length")
            .expect("a whole header");
        assert_eq!(total, frame.len(), "the length prefix covers the frame");
        &frame[HEADER_LEN..]
    }

    /// Every strict prefix of `kind_and_body` fails; every single-byte change either fails or
    /// decodes to a message that encodes back to exactly the changed bytes.
    fn check_damage<M: std::fmt::Debug>(
        kind_and_body: &[u8],
        decode: impl Fn(&[u8]) -> Result<M>,
        encode: impl Fn(&M) -> Vec<u8>,
    ) {
        for cut in 0..kind_and_body.len() {
            let prefix = &kind_and_body[..cut];
            assert!(decode(prefix).is_err(), "prefix of {cut} bytes decoded");
        }
        let mut bytes = kind_and_body.to_vec();
        for i in 0..bytes.len() {
            let original = bytes[i];
            for changed in [original ^ 0xFF, original ^ 1, original ^ 0x80, 0, 2, 0xFF] {
                if changed == original {
                    continue;
                }
                bytes[i] = changed;
                if let Ok(message) = decode(&bytes) {
                    assert_eq!(
                        &encode(&message)[HEADER_LEN..],
                        &bytes[..],
                        "byte {i} set to {changed} decoded to {message:?}, not canonically"
                    );
                }
            }
            bytes[i] = original;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn requests_round_trip(request in request()) {
            let frame = encode_request(&request);
            let decoded = Request::decode(body(&frame)).expect("decodes");
            prop_assert_eq!(decoded.by_bits(), request.by_bits());
            prop_assert_eq!(encode_request(&decoded), frame);
        }

        #[test]
        fn responses_round_trip(response in response()) {
            let frame = encode_response(&response);
            let decoded = Response::decode(body(&frame)).expect("decodes");
            prop_assert_eq!(decoded.by_bits(), response.by_bits());
            prop_assert_eq!(encode_response(&decoded), frame);
        }

        /// A row result written straight from a row (or some of its columns) is the bytes of
        /// the result built from its values (or of no row).
        #[test]
        fn a_row_result_from_a_row_is_the_result_of_its_values(
            row in prop::collection::vec(value(), 0..6),
            picks in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let view = engine::RowRef::values(&row);
            let mut direct = Vec::new();
            put_row_result(&mut direct, Some(view), None).unwrap();
            let mut built = Vec::new();
            put_op_result(&mut built, &OpResult::Row(Some(row.clone())));
            prop_assert_eq!(&direct, &built);

            // Some of its columns, in any order, a column more than once: the row a get
            // that fetched them returns.
            let columns: Vec<u16> = match row.len() {
                0 => Vec::new(),
                n => picks.iter().map(|&p| (p % n) as u16).collect(),
            };
            let mut direct = Vec::new();
            put_row_result(&mut direct, Some(view), Some(&columns)).unwrap();
            let fetched: Vec<Value> = columns.iter().map(|&c| row[usize::from(c)].clone()).collect();
            let mut built = Vec::new();
            put_op_result(&mut built, &OpResult::Row(Some(fetched)));
            prop_assert_eq!(&direct, &built);
            // A column the row lacks is refused.
            let mut refused = Vec::new();
            prop_assert!(put_row_result(&mut refused, Some(view), Some(&[row.len() as u16])).is_err());

            // The same rows as a `Rows` result, written a row at a time.
            let mut direct = Vec::new();
            let mut rows = RowsResult::start(&mut direct);
            for _ in 0..3 {
                rows.row(&mut direct, view, Some(&columns)).unwrap();
            }
            rows.finish(&mut direct);
            let mut built = Vec::new();
            let fetched: Vec<Value> = columns.iter().map(|&c| row[usize::from(c)].clone()).collect();
            put_op_result(&mut built, &OpResult::Rows(vec![fetched; 3]));
            prop_assert_eq!(&direct, &built);

            let mut direct = Vec::new();
            put_row_result(&mut direct, None, None).unwrap();
            let mut built = Vec::new();
            put_op_result(&mut built, &OpResult::Row(None));
            prop_assert_eq!(direct, built);
        }

        /// Operations decoded one after another, each into the list of the one before
        /// (as a host runs a frame's), are the operations encoded, byte for byte.
        #[test]
        fn ops_decoded_into_the_lists_of_those_before_are_the_ops_encoded(
            ops in prop::collection::vec(op(), 1..6),
        ) {
            let mut bytes = Vec::new();
            for op in &ops {
                put_op(&mut bytes, op);
            }
            let mut r = Reader::new(&bytes);
            let mut spare = Spare::default();
            for op in &ops {
                let mut decoded = read_op_into(&mut r, &mut spare).expect("decodes");
                let (mut want, mut got) = (Vec::new(), Vec::new());
                put_op(&mut want, op);
                put_op(&mut got, &decoded);
                prop_assert_eq!(got, want);
                spare.recycle(&mut decoded);
            }
            r.finish("ops").expect("every byte read");
        }

        #[test]
        fn frames_append_to_what_is_there(
            requests in prop::collection::vec(request(), 1..4),
            prefix in prop::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut out = prefix.clone();
            for request in &requests {
                request.encode(&mut out);
            }
            prop_assert_eq!(&out[..prefix.len()], &prefix[..]);
            let mut rest = &out[prefix.len()..];
            for request in &requests {
                let total = frame_len(rest, DEFAULT_MAX_FRAME).unwrap().unwrap();
                let decoded = Request::decode(&rest[HEADER_LEN..total]).unwrap();
                prop_assert_eq!(decoded.by_bits(), request.by_bits());
                rest = &rest[total..];
            }
            prop_assert!(rest.is_empty());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn damaged_requests_fail_or_decode_canonically(request in request()) {
            let frame = encode_request(&request);
            check_damage(body(&frame), Request::decode, encode_request);
        }

        #[test]
        fn damaged_responses_fail_or_decode_canonically(response in response()) {
            let frame = encode_response(&response);
            check_damage(body(&frame), Response::decode, encode_response);
        }
    }

    #[test]
    fn by_bits_tells_nan_payloads_and_zero_signs_apart() {
        let nan = |bits| Value::Float(f64::from_bits(bits));
        assert_eq!(
            nan(0x7ff8_0000_0000_0001).by_bits(),
            nan(0x7ff8_0000_0000_0001).by_bits()
        );
        assert_ne!(
            nan(0x7ff8_0000_0000_0001).by_bits(),
            nan(0x7ff8_0000_0000_0002).by_bits()
        );
        assert_ne!(Value::Float(0.0).by_bits(), Value::Float(-0.0).by_bits());
        assert_ne!(
            Value::Float(1.0).by_bits(),
            Value::Str("1".into()).by_bits()
        );
    }

    #[test]
    fn a_huge_count_in_a_small_body_is_refused_before_allocating() {
        // Call: empty procedure name, then an argument count of u32::MAX and two bytes.
        let mut frame = vec![KIND_CALL, 0, 0, 0, 0];
        frame.extend_from_slice(&u32::MAX.to_le_bytes());
        frame.extend_from_slice(&[0, 0]);
        assert_eq!(frame.len() - 1, 10);
        assert_eq!(
            Request::decode(&frame),
            Err(ProtocolError::CountTooLarge {
                what: "call arguments",
                count: u32::MAX,
                remaining: 2,
            })
        );
        // Results: u32::MAX op results, each at least one byte, in a 10-byte body.
        let mut frame = vec![KIND_RESULTS];
        frame.extend_from_slice(&u32::MAX.to_le_bytes());
        frame.extend_from_slice(&[RESULT_INSERTED; 6]);
        assert!(matches!(
            Response::decode(&frame),
            Err(ProtocolError::CountTooLarge {
                count: u32::MAX,
                remaining: 6,
                ..
            })
        ));
    }

    #[test]
    fn a_count_that_fits_only_at_a_smaller_item_size_is_refused() {
        // Three ops need at least 3 bytes (a `ReadCommitted` is its tag alone); 2 are left.
        let mut frame = vec![KIND_BATCH, 0];
        frame.extend_from_slice(&3u32.to_le_bytes());
        frame.extend_from_slice(&[OP_READ_COMMITTED; 2]);
        assert_eq!(
            Request::decode(&frame),
            Err(ProtocolError::CountTooLarge {
                what: "batch ops",
                count: 3,
                remaining: 2,
            })
        );
    }

    #[test]
    fn each_problem_has_its_own_error() {
        assert_eq!(Request::decode(&[]), Err(ProtocolError::EmptyFrame));
        assert_eq!(Response::decode(&[]), Err(ProtocolError::EmptyFrame));
        assert_eq!(
            Request::decode(&[0x08]),
            Err(ProtocolError::UnknownRequest(0x08))
        );
        assert_eq!(
            Request::decode(&[KIND_DONE]),
            Err(ProtocolError::UnknownRequest(KIND_DONE))
        );
        assert_eq!(
            Response::decode(&[KIND_BEGIN]),
            Err(ProtocolError::UnknownResponse(KIND_BEGIN))
        );
        assert_eq!(
            Request::decode(&[KIND_BEGIN, 0]),
            Err(ProtocolError::TrailingBytes {
                what: "request",
                count: 1
            })
        );
        assert_eq!(
            Response::decode(&[KIND_DONE, 1, 2]),
            Err(ProtocolError::TrailingBytes {
                what: "response",
                count: 2
            })
        );
        // Hello: magic, version, max_frame.
        let hello = |magic: &[u8], version: u16| {
            let mut f = vec![KIND_HELLO];
            f.extend_from_slice(magic);
            f.extend_from_slice(&version.to_le_bytes());
            f.extend_from_slice(&DEFAULT_MAX_FRAME.to_le_bytes());
            f
        };
        assert!(Request::decode(&hello(b"GLAS", VERSION)).is_ok());
        assert_eq!(
            Request::decode(&hello(b"HTTP", VERSION)),
            Err(ProtocolError::BadMagic(*b"HTTP"))
        );
        // The version before `ReadCommitted`, and one not yet made.
        for other in [1, VERSION + 1] {
            assert_eq!(
                Request::decode(&hello(b"GLAS", other)),
                Err(ProtocolError::UnsupportedVersion(other))
            );
        }
        assert_eq!(
            Response::decode(&[KIND_WELCOME, 0, 0]),
            Err(ProtocolError::UnsupportedVersion(0))
        );
        assert_eq!(
            Request::decode(&[KIND_CALL, 1, 0]),
            Err(ProtocolError::Truncated {
                what: "call procedure",
                needed: 4,
                remaining: 2
            })
        );
        assert_eq!(
            Request::decode(&[KIND_CALL, 2, 0, 0, 0, b'a']),
            Err(ProtocolError::Truncated {
                what: "call procedure",
                needed: 2,
                remaining: 1
            })
        );
        // Call "p" with one argument.
        let call = |arg: &[u8]| {
            let mut f = vec![KIND_CALL, 1, 0, 0, 0, b'p', 1, 0, 0, 0];
            f.extend_from_slice(arg);
            f
        };
        assert!(Request::decode(&call(&[3, 1, 0, 0, 0, b'x'])).is_ok());
        assert_eq!(
            Request::decode(&call(&[4])),
            Err(ProtocolError::UnknownTag {
                what: "value",
                tag: 4
            })
        );
        assert_eq!(
            Request::decode(&call(&[3, 2, 0, 0, 0, 0xC3, 0x28])),
            Err(ProtocolError::InvalidUtf8 {
                what: "string value"
            })
        );
        assert_eq!(
            Request::decode(&[KIND_BATCH, 2, 0, 0, 0, 0]),
            Err(ProtocolError::InvalidBool {
                what: "batch autocommit",
                byte: 2
            })
        );
        // Batch of one op with tag 7.
        assert_eq!(
            Request::decode(&[KIND_BATCH, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(ProtocolError::UnknownTag { what: "op", tag: 7 })
        );
        // A `ReadCommitted` has no fields: a byte after it belongs to no message.
        assert_eq!(
            Request::decode(&[KIND_BATCH, 0, 1, 0, 0, 0, OP_READ_COMMITTED, 0]),
            Err(ProtocolError::TrailingBytes {
                what: "request",
                count: 1
            })
        );
        // Scan of a source with tag 2.
        assert_eq!(
            Request::decode(&[KIND_BATCH, 0, 1, 0, 0, 0, OP_SCAN, 2, 0, 0, 0, 0, 0, 0, 0]),
            Err(ProtocolError::UnknownTag {
                what: "scan source",
                tag: 2
            })
        );
        // Scan of table 0 with a low bound tagged 3.
        assert_eq!(
            Request::decode(&[KIND_BATCH, 0, 1, 0, 0, 0, OP_SCAN, 0, 0, 0, 0, 0, 3, 0, 0]),
            Err(ProtocolError::UnknownTag {
                what: "bound",
                tag: 3
            })
        );
        assert_eq!(
            Response::decode(&[KIND_FAILED, 10, 0, 0, 0, 0]),
            Err(ProtocolError::UnknownTag {
                what: "error class",
                tag: 10
            })
        );
        assert_eq!(
            Response::decode(&[KIND_RESULTS, 1, 0, 0, 0, 6]),
            Err(ProtocolError::UnknownTag {
                what: "op result",
                tag: 6
            })
        );
    }

    #[test]
    fn a_known_frame_has_the_documented_bytes() {
        let request = Request::Call {
            procedure: "pay".into(),
            args: vec![Value::Int(-2), Value::Null, Value::Str("é".into())],
        };
        let mut expected = vec![
            29, 0, 0, 0, KIND_CALL, 3, 0, 0, 0, b'p', b'a', b'y', 3, 0, 0, 0,
        ];
        expected.extend_from_slice(&[1, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        expected.extend_from_slice(&[0, 3, 2, 0, 0, 0, 0xC3, 0xA9]);
        assert_eq!(encode_request(&request), expected);
        let response = Response::Failed {
            class: ErrorClass::Busy,
            message: "full".into(),
        };
        assert_eq!(
            encode_response(&response),
            [
                10,
                0,
                0,
                0,
                KIND_FAILED,
                7,
                4,
                0,
                0,
                0,
                b'f',
                b'u',
                b'l',
                b'l'
            ]
        );
    }
}
