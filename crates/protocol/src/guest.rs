//! The procedure boundary: the messages between a server worker (the host) and the procedure
//! process it is paired with (the guest), when stored procedures run isolated from the engine
//! (`glass serve --isolation process|container`).
//!
//! The host owns the transaction; the guest owns the procedure's code. The guest cannot touch
//! the engine: every operation a procedure performs crosses the boundary as an [`Op`] and comes
//! back as an [`OpResult`], serialized as the 2025 paper's isolated procedures' queries were.
//! The conversation is strict ping-pong, one guest message for each host message, which is
//! what lets a single pair of shared-memory buffers carry it. An `Ops` message carries one
//! operation, or several: the reads the procedure's hints named travel together in front of
//! its next operation (see [`crate::read_ahead`]), so Voter's four reads cross once. Writes
//! whose results the procedure cannot observe are deferred (see [`crate::deferred`]): they
//! travel in front of the next operation, or with the procedure's `Returned`, so Voter's
//! three writes cross with its end and the whole call is one exchange and its end.
//!
//! ```text
//! host (worker)                              guest (procedure process)
//!   Setup ---------------------------------->      workload, tables and indexes by id
//!   <------------------------------------ Ready
//!   Invoke { txn, args, timed } ------------>      run procedure `txn`
//!   <----------------------------------- Ops        deferred writes, hinted reads, then
//!                                                    one operation the procedure performs
//!   Results | OpFailed --------------------->       their results, or the engine's error
//!   <----------------------------------- Ops        ...
//!   <---------------------- Returned | Failed        the procedure is done (Returned with
//!                                                    the writes still deferred)
//! ```
//!
//! Frames are the wire protocol's (length prefix, kind, body; [`crate`]'s field types), with
//! kinds of their own so that a frame of one conversation is never taken for the other's:
//!
//! | kind   | message    | body |
//! |-------:|------------|------|
//! | `0x41` | `Setup`    | `workload: str`, `tables: list<(str, u32)>`, `indexes: list<(str, u32)>` |
//! | `0x42` | `Invoke`   | `txn: u16`, `args: list<Value>`, `timed: bool` |
//! | `0x43` | `Results`  | `results: list<OpResult>` |
//! | `0x44` | `OpFailed` | `class: u8`, `message: str` |
//! | `0xC1` | `Ready`    | (empty) |
//! | `0xC2` | `Ops`      | `ops: list<Op>` |
//! | `0xC3` | `Returned` | `writes: list<Op>`, `values: list<Value>`, `busy_ns: u64` |
//! | `0xC4` | `Failed`   | `class: u8`, `message: str`, `busy_ns: u64` |
//!
//! `busy_ns` is the guest's own time in the procedure's code for this call, outside its waits
//! on the boundary: the host charges it to procedure execution and the rest of the call's
//! time, less the engine's, to isolation overhead (the server's phase 5). The guest measures it
//! only when `Invoke`'s `timed` asks (the host is tracing), and sends 0 otherwise.
//!
//! Decoding is as strict as the wire protocol's: canonical encodings only, never a panic. The
//! host treats a guest as untrusted: a frame that does not decode ends the guest.

use std::time::Instant;

use engine::{Connection, IndexRef, TableRef, Tx, TxError, TxResult, Value};

use crate::boundary::{BoundaryTx, Crossing};
use crate::class::ErrorClass;
use crate::codec::{put_bool, put_len, put_str, put_u16, put_u64, put_u8, put_values, Reader};
use crate::deferred::{self, Deferred, Expect};
use crate::error::ProtocolError;
use crate::message::{
    frame, put_named_ids, put_op, put_op_result, read_named_ids, read_op, read_op_into,
    read_op_result, MIN_OP, MIN_OP_RESULT,
};
use crate::{Op, OpResult, HEADER_LEN};

pub use crate::message::Spare;

type Result<T> = std::result::Result<T, ProtocolError>;

const KIND_SETUP: u8 = 0x41;
const KIND_INVOKE: u8 = 0x42;
const KIND_RESULTS: u8 = 0x43;
const KIND_OP_FAILED: u8 = 0x44;
const KIND_READY: u8 = 0xC1;
const KIND_OPS: u8 = 0xC2;
const KIND_RETURNED: u8 = 0xC3;
const KIND_FAILED: u8 = 0xC4;

/// What the host sends its guest.
#[derive(Clone, Debug, PartialEq)]
pub enum HostMsg {
    /// The first message: which workload's procedures to open, and the ids operations name
    /// tables and indexes by.
    Setup {
        workload: String,
        tables: Vec<(String, u32)>,
        indexes: Vec<(String, u32)>,
    },
    /// Run procedure `txn` (an index into the workload's transaction names) with `args`;
    /// `timed`: measure the guest's busy time for the call's end (the host is tracing), or
    /// report 0 and read no clock (in a WebAssembly module each clock read is a call out of
    /// the sandbox, several per operation).
    Invoke {
        txn: u16,
        args: Vec<Value>,
        timed: bool,
    },
    /// The result of the operation the guest sent last.
    Results { results: Vec<OpResult> },
    /// The operation the guest sent last failed; the transaction is over.
    OpFailed { class: ErrorClass, message: String },
}

/// What a guest sends its host.
#[derive(Clone, Debug, PartialEq)]
pub enum GuestMsg {
    /// Set up: the procedures are open.
    Ready,
    /// Operations the procedure performs, in order.
    Ops { ops: Vec<Op> },
    /// The procedure finished and returned `values`; `writes` are the writes it deferred
    /// and has not sent yet (see [`crate::deferred`]), which the host runs, in order, before
    /// the call's transaction commits: each must be answered as a deferred write is
    /// ([`check_returned_write`]), or the call fails.
    Returned {
        writes: Vec<Op>,
        values: Vec<Value>,
        busy_ns: u64,
    },
    /// The procedure failed (a user abort, an engine error it passed on, a bad argument).
    Failed {
        class: ErrorClass,
        message: String,
        busy_ns: u64,
    },
}

fn read_class(r: &mut Reader<'_>) -> Result<ErrorClass> {
    let tag = r.u8("error class")?;
    ErrorClass::from_tag(tag).ok_or(ProtocolError::UnknownTag {
        what: "error class",
        tag,
    })
}

impl HostMsg {
    /// Appends this message as one whole frame, length prefix included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            HostMsg::Setup {
                workload,
                tables,
                indexes,
            } => frame(out, KIND_SETUP, |out| {
                put_str(out, workload);
                put_named_ids(out, tables);
                put_named_ids(out, indexes);
            }),
            HostMsg::Invoke { txn, args, timed } => frame(out, KIND_INVOKE, |out| {
                put_u16(out, *txn);
                put_values(out, args);
                put_bool(out, *timed);
            }),
            HostMsg::Results { results } => frame(out, KIND_RESULTS, |out| {
                crate::codec::put_list(out, results, put_op_result);
            }),
            HostMsg::OpFailed { class, message } => frame(out, KIND_OP_FAILED, |out| {
                put_u8(out, class.tag());
                put_str(out, message);
            }),
        }
    }

    /// Decodes a message from a frame's bytes after the length prefix.
    pub fn decode(kind_and_body: &[u8]) -> Result<HostMsg> {
        let (&kind, body) = kind_and_body
            .split_first()
            .ok_or(ProtocolError::EmptyFrame)?;
        let mut r = Reader::new(body);
        let message = match kind {
            KIND_SETUP => HostMsg::Setup {
                workload: r.str("setup workload")?,
                tables: read_named_ids(&mut r, "setup tables")?,
                indexes: read_named_ids(&mut r, "setup indexes")?,
            },
            KIND_INVOKE => HostMsg::Invoke {
                txn: r.u16("invoke txn")?,
                args: r.values("invoke arguments")?,
                timed: r.bool("invoke timed")?,
            },
            KIND_RESULTS => HostMsg::Results {
                results: r.list(MIN_OP_RESULT, "results", read_op_result)?,
            },
            KIND_OP_FAILED => HostMsg::OpFailed {
                class: read_class(&mut r)?,
                message: r.str("error message")?,
            },
            _ => return Err(ProtocolError::UnknownBoundaryMessage(kind)),
        };
        r.finish("host message")?;
        Ok(message)
    }
}

impl GuestMsg {
    /// Appends this message as one whole frame, length prefix included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            GuestMsg::Ready => frame(out, KIND_READY, |_| {}),
            GuestMsg::Ops { ops } => frame(out, KIND_OPS, |out| {
                crate::codec::put_list(out, ops, put_op);
            }),
            GuestMsg::Returned {
                writes,
                values,
                busy_ns,
            } => frame(out, KIND_RETURNED, |out| {
                crate::codec::put_list(out, writes, put_op);
                put_values(out, values);
                put_u64(out, *busy_ns);
            }),
            GuestMsg::Failed {
                class,
                message,
                busy_ns,
            } => frame(out, KIND_FAILED, |out| {
                put_u8(out, class.tag());
                put_str(out, message);
                put_u64(out, *busy_ns);
            }),
        }
    }

    /// Decodes a message from a frame's bytes after the length prefix.
    pub fn decode(kind_and_body: &[u8]) -> Result<GuestMsg> {
        let (&kind, body) = kind_and_body
            .split_first()
            .ok_or(ProtocolError::EmptyFrame)?;
        let mut r = Reader::new(body);
        let message = match kind {
            KIND_READY => GuestMsg::Ready,
            KIND_OPS => GuestMsg::Ops {
                ops: r.list(MIN_OP, "ops", read_op)?,
            },
            KIND_RETURNED => GuestMsg::Returned {
                writes: r.list(MIN_OP, "returned writes", read_op)?,
                values: r.values("returned values")?,
                busy_ns: r.u64("busy_ns")?,
            },
            KIND_FAILED => GuestMsg::Failed {
                class: read_class(&mut r)?,
                message: r.str("error message")?,
                busy_ns: r.u64("busy_ns")?,
            },
            _ => return Err(ProtocolError::UnknownBoundaryMessage(kind)),
        };
        r.finish("guest message")?;
        Ok(message)
    }
}

/// Decodes a guest's message as [`GuestMsg::decode`] does, except that a `Returned`'s writes
/// are run with `run` as each is decoded, until one fails, instead of kept: the message comes
/// back with no writes, beside the first failure. A host that reads the frame where the guest
/// wrote it (a WebAssembly module's memory) so builds no operations. Each write is decoded
/// into lists kept in `spare`, as [`answer_ops_with`] decodes operations.
pub fn decode_running_writes(
    kind_and_body: &[u8],
    spare: &mut Spare,
    mut run: impl FnMut(&Op) -> TxResult<()>,
) -> Result<(GuestMsg, Option<TxError>)> {
    let Some((&KIND_RETURNED, body)) = kind_and_body.split_first() else {
        return GuestMsg::decode(kind_and_body).map(|m| (m, None));
    };
    let mut r = Reader::new(body);
    let count = r.count(MIN_OP, "returned writes")?;
    let mut failed = None;
    for _ in 0..count {
        let mut op = read_op_into(&mut r, spare)?;
        if failed.is_none() {
            failed = run(&op).err();
        }
        spare.recycle(&mut op);
    }
    let message = GuestMsg::Returned {
        writes: Vec::new(),
        values: r.values("returned values")?,
        busy_ns: r.u64("busy_ns")?,
    };
    r.finish("guest message")?;
    Ok((message, failed))
}

/// Whether a frame (after its length prefix) is an `Ops` message, to be answered with
/// [`answer_ops_with`] rather than decoded whole.
pub fn is_ops(kind_and_body: &[u8]) -> bool {
    kind_and_body.first() == Some(&KIND_OPS)
}

/// The host's side of one `Ops` frame (`kind_and_body`: the frame after its length prefix)
/// without building its messages: runs each operation as it is decoded and writes the answer
/// frame into `out`: `Results`, or `OpFailed` for the first operation that fails, whose error
/// is returned. A frame that is not a well-formed `Ops` is refused with what is wrong with it
/// (the operations before the flaw have run: the caller ends the call).
pub fn answer_ops(
    kind_and_body: &[u8],
    out: &mut Vec<u8>,
    mut run: impl FnMut(&Op) -> TxResult<OpResult>,
) -> std::result::Result<Option<TxError>, String> {
    answer_ops_with(kind_and_body, &mut Spare::default(), out, |op, out| {
        put_op_result(out, &run(op)?);
        Ok(())
    })
}

/// [`answer_ops`] whose `run` writes each operation's result into the answer itself (with
/// [`put_result`], or [`put_row_result`] straight from the engine's row), so that a row read
/// need not be built as values to be encoded and dropped. Whatever `run` wrote for an
/// operation that fails is discarded with the rest of the `Results`. Each operation is
/// decoded into lists kept in `spare` from the operations before, this frame's or an earlier
/// one's.
pub fn answer_ops_with(
    kind_and_body: &[u8],
    spare: &mut Spare,
    out: &mut Vec<u8>,
    mut run: impl FnMut(&Op, &mut Vec<u8>) -> TxResult<()>,
) -> std::result::Result<Option<TxError>, String> {
    let (&kind, body) = kind_and_body
        .split_first()
        .ok_or_else(|| ProtocolError::EmptyFrame.to_string())?;
    if kind != KIND_OPS {
        return Err(format!(
            "a message of kind {kind:#04x} where an operation belongs"
        ));
    }
    let malformed = |e: ProtocolError| format!("a malformed operation: {e}");
    let mut r = Reader::new(body);
    let count = r.count(MIN_OP, "ops").map_err(malformed)?;
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    put_u8(out, KIND_RESULTS);
    put_len(out, count);
    for _ in 0..count {
        let mut op = read_op_into(&mut r, spare).map_err(malformed)?;
        let ran = run(&op, out);
        spare.recycle(&mut op);
        match ran {
            Ok(()) => {}
            Err(e) => {
                out.truncate(start);
                HostMsg::OpFailed {
                    class: ErrorClass::of(&e),
                    message: ErrorClass::message_of(&e),
                }
                .encode(out);
                return Ok(Some(e));
            }
        }
    }
    r.finish("guest message").map_err(malformed)?;
    let len = u32::try_from(out.len() - start - HEADER_LEN).expect("a frame over 4 GiB");
    out[start..start + HEADER_LEN].copy_from_slice(&len.to_le_bytes());
    Ok(None)
}

/// Writes `result` into an answer (see [`answer_ops_with`]).
pub fn put_result(out: &mut Vec<u8>, result: &OpResult) {
    put_op_result(out, result);
}

/// Writes a `Row` result straight from the engine's row into an answer (see
/// [`answer_ops_with`]): the row's columns `columns`, in that order, or with `None` the whole
/// row; or no row. The bytes of `OpResult::Row` of the same values (a get's, whether it
/// fetched every column or those named), with no row of values built, encoded and dropped.
/// Fails (with part of it written) where a column cannot be read.
pub fn put_row_result(
    out: &mut Vec<u8>,
    row: Option<engine::RowRef<'_>>,
    columns: Option<&[u16]>,
) -> TxResult<()> {
    crate::message::put_row_result(out, row, columns)
}

/// A `Rows` result written straight from the engine's rows into an answer (see
/// [`answer_ops_with`]), a row at a time as a scan finds them: the bytes of `OpResult::Rows`
/// of the same values, with no rows of values built, encoded and dropped.
pub struct RowsResult(crate::message::RowsResult);

impl RowsResult {
    /// Starts the result at the end of `out`.
    pub fn start(out: &mut Vec<u8>) -> RowsResult {
        RowsResult(crate::message::RowsResult::start(out))
    }

    /// Writes the next row: its columns `columns`, in that order, or with `None` every
    /// column. Fails (with part of it written) where a column cannot be read.
    pub fn row(
        &mut self,
        out: &mut Vec<u8>,
        row: engine::RowRef<'_>,
        columns: Option<&[u16]>,
    ) -> TxResult<()> {
        self.0.row(out, row, columns)
    }

    /// Ends the result: its count of rows, written in front of them.
    pub fn finish(self, out: &mut [u8]) {
        self.0.finish(out)
    }
}

/// The engine error a `Failed` or `OpFailed` stands for, its message as its sender wrote it.
pub fn error_of(class: ErrorClass, message: String) -> TxError {
    match class {
        ErrorClass::Retry | ErrorClass::Busy | ErrorClass::TimedOut => TxError::Retry(message),
        ErrorClass::UserAbort => TxError::UserAbort(message),
        ErrorClass::DuplicateKey => TxError::DuplicateKey(message),
        ErrorClass::Contained => TxError::Contained(message),
        ErrorClass::Invalid | ErrorClass::Internal | ErrorClass::Protocol => {
            TxError::Invalid(message)
        }
    }
}

// The guest's half, shared by every guest whatever carries its messages: a procedure process
// (`server::guest`) and a WebAssembly module (`procedures-wasm`).

/// How a guest trades one message for its host's answer.
pub trait Exchange {
    /// Sends `message` and returns the host's answer; `None` when the host has gone.
    fn exchange(&mut self, message: &GuestMsg) -> std::result::Result<Option<HostMsg>, String>;
}

/// The names a host's `Setup` gave, resolved without an engine: what a guest opens the
/// workload's procedures against.
pub struct Catalog {
    tables: Vec<(String, u32)>,
    indexes: Vec<(String, u32)>,
}

impl Catalog {
    pub fn new(tables: Vec<(String, u32)>, indexes: Vec<(String, u32)>) -> Catalog {
        Catalog { tables, indexes }
    }
}

impl Connection for Catalog {
    fn table(&self, name: &str) -> TxResult<TableRef> {
        self.tables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(n, id)| TableRef {
                name: n.clone(),
                id: *id,
            })
            .ok_or_else(|| TxError::Invalid(format!("the host has no table {name}")))
    }

    fn index(&self, name: &str) -> TxResult<IndexRef> {
        self.indexes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(n, id)| IndexRef {
                name: n.clone(),
                id: *id,
            })
            .ok_or_else(|| TxError::Invalid(format!("the host has no index {name}")))
    }

    fn transaction(&self, _body: &mut dyn FnMut(&mut dyn Tx) -> TxResult<()>) -> TxResult<()> {
        Err(TxError::Invalid(
            "a procedure's guest runs no transactions of its own".to_string(),
        ))
    }
}

/// Runs one invocation in a guest: `call` runs procedure `txn` with `args` against a `Tx` whose
/// every operation is an exchange with the host; `deferred` keeps its deferred writes and
/// hinted reads (empty before and after, its memory kept for the next call). Returns the message that ends the call
/// (`Returned` or `Failed`, with the guest's own busy time: the call's, less its waits on the
/// host; 0 unless `timed`), or `None` when the host went away during it.
pub fn run_invocation<E: Exchange + ?Sized>(
    exchange: &mut E,
    deferred: &mut Deferred,
    txn: u16,
    args: &[Value],
    timed: bool,
    call: impl FnOnce(&mut dyn Tx, usize, &[Value], &mut Vec<Value>) -> TxResult<()>,
) -> Option<GuestMsg> {
    let start = timed.then(Instant::now);
    deferred.clear();
    let mut tx = BoundaryTx::new(GuestCrossing {
        exchange,
        timed: start.is_some(),
        waited_ns: 0,
        deferred,
        doomed: None,
    });
    let mut values = Vec::new();
    let mut ran = call(&mut tx, usize::from(txn), args, &mut values);
    let crossing = &mut tx.crossing;
    if let Some((class, message)) = crossing.doomed.take() {
        ran = Err(error_of(class, message));
    }
    let busy_ns = start.map_or(0, |start| {
        (start.elapsed().as_nanos() as u64).saturating_sub(crossing.waited_ns)
    });
    // The writes still deferred end the call with it; a rollback sends none of them.
    let writes = crossing.deferred.take().0;
    crossing.deferred.clear();
    match ran {
        Ok(()) => Some(GuestMsg::Returned {
            writes,
            values,
            busy_ns,
        }),
        Err(TxError::Connection(_)) => None,
        Err(e) => Some(GuestMsg::Failed {
            class: ErrorClass::of(&e),
            message: ErrorClass::message_of(&e),
            busy_ns,
        }),
    }
}

/// The host's check of a write that came with `Returned`, by what it answered: an insert must
/// have inserted, an update or delete must have found its row (the guest deferred it because
/// it held the row and knew it to exist, or guessed so: see [`crate::deferred`]).
pub fn check_returned_write(op: &Op, result: &OpResult) -> TxResult<()> {
    let expect = match op {
        Op::Insert { .. } => Expect::Inserted,
        Op::Update { .. } | Op::Delete { .. } => Expect::Guessed,
        // Not a write, but sent the same way: the call's last request, with nothing after it.
        Op::ReadCommitted => Expect::Set,
        other => {
            return Err(TxError::Invalid(format!(
                "a procedure returned with an operation that is not a write: {other:?}"
            )))
        }
    };
    deferred::check(
        std::slice::from_ref(op),
        &[expect],
        std::slice::from_ref(result),
    )
}

/// How a guest's operations cross to its host: each crossing one exchange, the call's
/// deferred writes in front (see [`crate::boundary`]).
struct GuestCrossing<'a, E: Exchange + ?Sized> {
    exchange: &'a mut E,
    /// Whether the guest measures its busy time (`HostMsg::Invoke`'s `timed`).
    timed: bool,
    /// Time spent waiting for the host, left out of the guest's busy time.
    waited_ns: u64,
    /// The procedure's deferred writes, what it knows of its rows, and its hinted reads (the
    /// guest's, reused from call to call).
    deferred: &'a mut Deferred,
    /// A deferred write answered otherwise than assumed: the call's error, whatever the
    /// procedure returns.
    doomed: Option<(ErrorClass, String)>,
}

impl<E: Exchange + ?Sized> Crossing for GuestCrossing<'_, E> {
    const PEER: &'static str = "the host";

    fn deferred(&mut self) -> &mut Deferred {
        self.deferred
    }

    fn defers(&self) -> bool {
        true
    }

    fn reads_ahead(&self) -> bool {
        true
    }

    fn cross(&mut self, ops: Vec<Op>) -> TxResult<(Vec<Op>, Vec<OpResult>)> {
        let (mut all, expect) = self.deferred.take();
        let written = all.len();
        if written == 0 {
            all = ops;
        } else {
            all.extend(ops);
        }
        let count = all.len();
        let message = GuestMsg::Ops { ops: all };
        let start = self.timed.then(Instant::now);
        let reply = self
            .exchange
            .exchange(&message)
            .map_err(TxError::Connection)?;
        if let Some(start) = start {
            self.waited_ns += start.elapsed().as_nanos() as u64;
        }
        let GuestMsg::Ops { ops: mut all } = message else {
            unreachable!("built as Ops above")
        };
        match reply {
            Some(HostMsg::Results { mut results }) if results.len() == count => {
                if let Err(e) = deferred::check(&all[..written], &expect, &results[..written]) {
                    // The host ran them, and one was not answered as deferring it assumed:
                    // the call fails whatever the procedure does with the error (as when an
                    // operation fails in the engine), and not as a lost connection.
                    let e = match e {
                        TxError::Connection(m) => TxError::Invalid(m),
                        e => e,
                    };
                    self.doomed = Some((ErrorClass::of(&e), ErrorClass::message_of(&e)));
                    return Err(e);
                }
                self.deferred.sent(all.drain(..written), &expect);
                results.drain(..written);
                Ok((all, results))
            }
            Some(HostMsg::OpFailed { class, message }) => Err(error_of(class, message)),
            Some(other) => Err(TxError::Connection(format!(
                "the host answered an operation with {other:?}"
            ))),
            None => Err(TxError::Connection("the host went away".to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use engine::{Fetch, KeyRange};

    use crate::message::tests::{named_ids, op, op_result, value};

    /// The table the tests' procedures use.
    fn table_t() -> TableRef {
        TableRef {
            name: "t".into(),
            id: 3,
        }
    }

    /// A host that answers every get with a row holding its key and a version (or the columns
    /// asked for of that row), every update
    /// by bumping the version; it keeps the messages it got.
    #[derive(Default)]
    struct Host {
        messages: Vec<Vec<Op>>,
        version: i64,
    }

    impl Exchange for Host {
        fn exchange(&mut self, message: &GuestMsg) -> std::result::Result<Option<HostMsg>, String> {
            let GuestMsg::Ops { ops } = message else {
                return Err(format!("unexpected {message:?}"));
            };
            self.messages.push(ops.clone());
            let results = ops
                .iter()
                .map(|op| match op {
                    Op::Get { key, columns, .. } => {
                        let mut row = key.clone();
                        row.push(Value::Int(self.version));
                        if let Some(columns) = columns {
                            row = columns
                                .iter()
                                .map(|&c| row[usize::from(c)].clone())
                                .collect();
                        }
                        OpResult::Row(Some(row))
                    }
                    Op::Update { .. } | Op::Delete { .. } => {
                        self.version += 1;
                        OpResult::Found(true)
                    }
                    // One row under a prefix: the prefix and the version.
                    Op::Scan {
                        low: std::ops::Bound::Included(prefix),
                        ..
                    } => {
                        let mut row = prefix.clone();
                        row.push(Value::Int(self.version));
                        OpResult::Rows(vec![row])
                    }
                    Op::ReadCommitted => OpResult::Set,
                    _ => OpResult::Inserted,
                })
                .collect();
            Ok(Some(HostMsg::Results { results }))
        }
    }

    #[test]
    fn ops_are_answered_as_they_are_decoded_and_stop_at_the_first_failure() {
        let get = |k| Op::Get {
            table: 1,
            key: vec![Value::Int(k)],
            columns: None,
            for_update: false,
        };
        let frame = |ops: Vec<Op>| {
            let mut out = Vec::new();
            GuestMsg::Ops { ops }.encode(&mut out);
            out.split_off(HEADER_LEN)
        };
        let decode = |out: &[u8]| {
            let len = u32::from_le_bytes(out[..HEADER_LEN].try_into().unwrap()) as usize;
            assert_eq!(len, out.len() - HEADER_LEN);
            HostMsg::decode(&out[HEADER_LEN..]).unwrap()
        };
        let row = |op: &Op| match op {
            Op::Get { key, .. } if key[0] != Value::Int(0) => Ok(OpResult::Row(Some(key.clone()))),
            _ => Err(TxError::Invalid("no row 0".into())),
        };
        // All succeed: one Results frame, after what `out` held.
        let mut out = vec![7];
        let mut ran = 0;
        let failed = answer_ops(&frame(vec![get(1), get(2)]), &mut out, |op| {
            ran += 1;
            row(op)
        });
        assert!(matches!(failed, Ok(None)));
        assert_eq!((ran, out[0]), (2, 7));
        assert_eq!(
            decode(&out[1..]),
            HostMsg::Results {
                results: vec![
                    OpResult::Row(Some(vec![Value::Int(1)])),
                    OpResult::Row(Some(vec![Value::Int(2)]))
                ]
            }
        );
        // The second fails: OpFailed alone, the third never runs.
        let mut out = Vec::new();
        let mut ran = 0;
        let failed = answer_ops(&frame(vec![get(1), get(0), get(3)]), &mut out, |op| {
            ran += 1;
            row(op)
        });
        assert!(
            matches!(failed, Ok(Some(TxError::Invalid(_)))),
            "{failed:?}"
        );
        assert_eq!(ran, 2);
        assert!(
            matches!(decode(&out), HostMsg::OpFailed { message, .. } if message.contains("no row 0"))
        );
        // Not Ops, or cut short: refused; `is_ops` tells the host which frames to answer so.
        let mut ready = Vec::new();
        GuestMsg::Ready.encode(&mut ready);
        assert!(is_ops(&frame(vec![get(1)])));
        assert!(!is_ops(&ready[HEADER_LEN..]) && !is_ops(&[]));
        let not_ops = answer_ops(&ready[HEADER_LEN..], &mut Vec::new(), row);
        assert!(not_ops.unwrap_err().contains("where an operation belongs"));
        let whole = frame(vec![get(1), get(2)]);
        let cut = answer_ops(&whole[..whole.len() - 3], &mut Vec::new(), row);
        assert!(cut.unwrap_err().contains("malformed"));
        assert!(answer_ops(&[], &mut Vec::new(), row).is_err());
    }

    #[test]
    fn a_guest_times_its_own_work_only_when_asked() {
        let work = Duration::from_millis(3);
        for timed in [true, false] {
            let mut host = Host::default();
            let t = table_t();
            let ended = run_invocation(
                &mut host,
                &mut Deferred::default(),
                0,
                &[],
                timed,
                |tx, _, _, _| {
                    std::thread::sleep(work);
                    tx.get(&t, &[Value::Int(1)], Fetch::All, false).map(drop)
                },
            );
            let Some(GuestMsg::Returned { busy_ns, .. }) = ended else {
                panic!("{ended:?}");
            };
            if timed {
                assert!(busy_ns >= work.as_nanos() as u64, "{busy_ns} ns");
            } else {
                assert_eq!(busy_ns, 0, "an untimed call reads no clock");
            }
        }
    }

    #[test]
    fn hinted_reads_cross_together_and_answer_until_a_write() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            true,
            |tx, _, _, out| {
                tx.prefetch(&[(&t, &[1]), (&t, &[2])]);
                tx.prefetch_for_update(&[(&t, &[3])], None);
                let key = |k| [Value::Int(k)];
                // The first read sends all three, alone: it is one of them.
                let one = tx.get(&t, &key(1), Fetch::All, false)?.unwrap();
                let two = tx.get(&t, &key(2), Fetch::Cols(&[1]), false)?.unwrap();
                let three = tx.get(&t, &key(3), Fetch::All, true)?.unwrap();
                // Read shared only: a read for update crosses.
                tx.get(&t, &key(2), Fetch::All, true)?;
                // An update of a row held (read for update, found) is deferred; it makes the
                // row's answer stale: the next read crosses behind it and sees it.
                assert!(tx.update(&t, &key(3), &[(1, Value::Int(9))])?);
                let again = tx.get(&t, &key(3), Fetch::All, true)?.unwrap();
                out.extend([
                    one[1].clone(),
                    two[0].clone(),
                    three[1].clone(),
                    again[1].clone(),
                ]);
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { values, .. }) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(
            values,
            vec![Value::Int(0), Value::Int(0), Value::Int(0), Value::Int(1)]
        );
        let sizes: Vec<usize> = host.messages.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![3, 1, 2], "{:?}", host.messages);
        assert!(matches!(
            host.messages[0][2],
            Op::Get {
                for_update: true,
                ..
            }
        ));
        assert!(
            matches!(host.messages[2][0], Op::Update { .. }),
            "the write first"
        );
    }

    #[test]
    fn reads_that_borrow_their_row_are_answered_where_the_hinted_answers_are_kept() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            true,
            |tx, _, _, out| {
                tx.prefetch(&[(&t, &[1])]);
                // A hint of several rows reads the columns it names: column 1 of rows 2 and 5.
                tx.prefetch_columns(&[(&t, &[2]), (&t, &[5])], &[1]);
                let key = |k| [Value::Int(k)];
                // The first read sends the three hinted reads; the second is answered by them.
                tx.read_with(&t, &key(1), false, &mut |r| {
                    out.extend([r.value(0)?, r.value(1)?]);
                    Ok(())
                })?;
                tx.read_columns_with(&t, &key(2), &[1], false, &mut |r| {
                    // Column 0 was not fetched: NULL, as a row placed by the default.
                    assert!(r.is_null(0)?);
                    out.push(r.value(1)?);
                    Ok(())
                })?;
                // A column the hint did not bring crosses; so does a row nobody hinted.
                tx.read_columns_with(&t, &key(5), &[0], false, &mut |r| {
                    out.push(r.value(0)?);
                    Ok(())
                })?;
                assert!(tx.read_columns_with(&t, &key(4), &[1], false, &mut |r| {
                    assert_eq!(r.columns(), 2);
                    assert!(r.value(2).is_err(), "no column beyond those read");
                    out.push(r.value(1)?);
                    Ok(())
                })?);
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { values, .. }) = ended else {
            panic!("{ended:?}");
        };
        let ints = |v: &[i64]| v.iter().map(|&i| Value::Int(i)).collect::<Vec<_>>();
        assert_eq!(values, ints(&[1, 0, 0, 5, 0]));
        let sizes: Vec<usize> = host.messages.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![3, 1, 1], "{:?}", host.messages);
    }

    /// An update closure that notes the version (column 1) it sees in `out` and sets it 10
    /// higher.
    fn bump_column_1(
        out: &mut Vec<Value>,
    ) -> impl FnMut(engine::RowRef<'_>, &mut engine::RowWriter<'_>) -> TxResult<()> + '_ {
        move |row, w| {
            let seen = row.int(1)?;
            out.push(Value::Int(seen));
            w.int(1, seen + 10);
            Ok(())
        }
    }

    #[test]
    fn a_read_modify_write_of_a_row_read_ahead_for_update_takes_the_answer_and_defers() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, out| {
                tx.prefetch_for_update(&[(&t, &[1]), (&t, &[2])], None);
                // Each sees the version it was read at, and sets column 1 from it.
                let mut bump = bump_column_1(out);
                for k in [1, 2, 7] {
                    assert!(tx.update_with(&t, &[Value::Int(k)], &mut bump)?);
                }
                drop(bump);
                // The answer was taken: a read crosses, behind the update, and sees it.
                let again = tx.get(&t, &[Value::Int(1)], Fetch::All, true)?.unwrap();
                out.push(again[1].clone());
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { values, writes, .. }) = ended else {
            panic!("{ended:?}");
        };
        // Rows 1 and 2 from the hinted reads; row 7 read behind their two updates; row 1
        // again behind row 7's.
        assert_eq!(
            values,
            [0, 0, 2, 3].map(Value::Int).to_vec(),
            "{:?}",
            host.messages
        );
        let sizes: Vec<usize> = host.messages.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![2, 3, 2], "{:?}", host.messages);
        assert!(matches!(
            &host.messages[1][..],
            [Op::Update { set: a, .. }, Op::Update { set: b, .. }, Op::Get { for_update: true, .. }]
                if a[..] == [(1, Value::Int(10))] && b[..] == [(1, Value::Int(10))]
        ));
        assert!(writes.is_empty(), "row 1's read took row 7's update along");
    }

    #[test]
    fn a_for_update_hint_of_some_columns_reads_only_those_and_answers_only_their_updates() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, out| {
                tx.prefetch_for_update(&[(&t, &[1]), (&t, &[2])], Some(&[1]));
                let mut bump = bump_column_1(out);
                // Of the column read: answered, the update deferred.
                assert!(tx.update_columns_with(&t, &[Value::Int(1)], &[1], &mut bump)?);
                // The whole row is not in the answer: it is read, behind row 1's update.
                assert!(tx.update_with(&t, &[Value::Int(2)], &mut bump)?);
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { values, writes, .. }) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(
            values,
            [0, 1].map(Value::Int).to_vec(),
            "{:?}",
            host.messages
        );
        let narrow = |op: &Op| matches!(op, Op::Get { columns: Some(c), for_update: true, .. } if c[..] == [1]);
        assert!(host.messages[0].iter().all(narrow), "{:?}", host.messages);
        assert_eq!(host.messages[0].len(), 2);
        assert!(matches!(
            &host.messages[1][..],
            [
                Op::Update { .. },
                Op::Get {
                    columns: None,
                    for_update: true,
                    ..
                }
            ]
        ));
        assert_eq!(writes.len(), 1, "row 2's update, with the return");
    }

    #[test]
    fn writes_cross_in_front_of_the_next_operation_or_with_the_return() {
        let t = table_t();
        let row = |k| vec![Value::Int(k), Value::Int(0)];
        let mut host = Host::default();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, _| {
                tx.insert(&t, &row(1))?;
                // Nothing known of row 5: the update crosses now, behind the insert.
                tx.update(&t, &[Value::Int(5)], &[(1, Value::Int(2))])?;
                tx.insert(&t, &row(2))?;
                // The row just inserted is taken as there: its update is deferred too.
                assert!(tx.update(&t, &[Value::Int(2)], &[(1, Value::Int(3))])?);
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { writes, .. }) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(host.messages.len(), 1, "{:?}", host.messages);
        assert!(matches!(
            host.messages[0][..],
            [Op::Insert { .. }, Op::Update { .. }]
        ));
        assert!(matches!(writes[..], [Op::Insert { .. }, Op::Update { .. }]));
        // A rollback sends none of its writes.
        let mut host = Host::default();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, _| {
                tx.insert(&t, &row(1))?;
                Err(TxError::UserAbort("no".into()))
            },
        );
        assert!(matches!(ended, Some(GuestMsg::Failed { .. })), "{ended:?}");
        assert!(host.messages.is_empty());
    }

    /// A host that answers every update `Found(false)`.
    struct Gone;

    impl Exchange for Gone {
        fn exchange(&mut self, message: &GuestMsg) -> std::result::Result<Option<HostMsg>, String> {
            let GuestMsg::Ops { ops } = message else {
                return Err(format!("unexpected {message:?}"));
            };
            let results = ops
                .iter()
                .map(|op| match op {
                    Op::Update { .. } => OpResult::Found(false),
                    _ => OpResult::Inserted,
                })
                .collect();
            Ok(Some(HostMsg::Results { results }))
        }
    }

    #[test]
    fn a_deferred_write_answered_otherwise_fails_the_call_whatever_the_procedure_does() {
        let t = table_t();
        let ended = run_invocation(
            &mut Gone,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, _| {
                tx.insert(&t, &[Value::Int(2), Value::Int(0)])?;
                // Taken as there (inserted): deferred, answered true.
                assert!(tx.update(&t, &[Value::Int(2)], &[(1, Value::Int(3))])?);
                // The next crossing finds it was not: the procedure swallows the error.
                let swallowed = tx.update(&t, &[Value::Int(9)], &[(1, Value::Int(3))]);
                assert!(
                    matches!(swallowed, Err(TxError::Invalid(_))),
                    "{swallowed:?}"
                );
                Ok(())
            },
        );
        assert!(
            matches!(
                ended,
                Some(GuestMsg::Failed {
                    class: ErrorClass::Invalid,
                    ..
                })
            ),
            "{ended:?}"
        );
    }

    #[test]
    fn the_host_checks_each_returned_write_by_its_answer() {
        let insert = Op::Insert {
            table: 1,
            row: vec![Value::Int(1)],
        };
        let update = Op::Update {
            table: 1,
            key: vec![Value::Int(1)],
            set: vec![(0, Value::Int(2))],
        };
        let get = Op::Get {
            table: 1,
            key: vec![Value::Int(1)],
            columns: None,
            for_update: false,
        };
        assert!(check_returned_write(&insert, &OpResult::Inserted).is_ok());
        assert!(check_returned_write(&update, &OpResult::Found(true)).is_ok());
        assert!(matches!(
            check_returned_write(&update, &OpResult::Found(false)),
            Err(TxError::Invalid(_))
        ));
        assert!(matches!(
            check_returned_write(&get, &OpResult::Row(None)),
            Err(TxError::Invalid(m)) if m.contains("not a write")
        ));
        // A read-committed request left for the call's end travels with its writes.
        assert!(check_returned_write(&Op::ReadCommitted, &OpResult::Set).is_ok());
        assert!(check_returned_write(&Op::ReadCommitted, &OpResult::Inserted).is_err());
    }

    #[test]
    fn a_read_committed_request_crosses_in_front_of_the_reads_it_is_for() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, _| {
                tx.read_committed();
                tx.prefetch(&[(&t, &[7])]);
                tx.get(&t, &[Value::Int(8)], Fetch::All, false)?;
                tx.get(&t, &[Value::Int(7)], Fetch::All, false)?;
                Ok(())
            },
        );
        assert!(
            matches!(ended, Some(GuestMsg::Returned { .. })),
            "{ended:?}"
        );
        // One exchange: the request, the hinted read, the read; the hinted row answered.
        assert_eq!(host.messages.len(), 1, "{:?}", host.messages);
        assert!(
            matches!(
                host.messages[0][..],
                [Op::ReadCommitted, Op::Get { .. }, Op::Get { .. }]
            ),
            "{:?}",
            host.messages
        );
    }

    #[test]
    fn a_scan_of_the_whole_table_is_answered_by_the_hint_of_the_empty_prefix() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            false,
            |tx, _, _, out| {
                tx.prefetch_scan(&t, &[], None, false);
                let everything = KeyRange {
                    low: std::ops::Bound::Unbounded,
                    high: std::ops::Bound::Unbounded,
                };
                let rows = tx.scan(&t, everything.clone(), None, false, Fetch::All, false)?;
                let again = tx.scan(&t, everything, None, false, Fetch::All, false)?;
                out.extend([rows[0][0].clone(), again[0][0].clone()]);
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { values, .. }) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(values, vec![Value::Int(0), Value::Int(0)]);
        // One crossing, the hinted scan alone: both scans were answered from it.
        assert_eq!(host.messages.len(), 1, "{:?}", host.messages);
        assert!(matches!(
            &host.messages[0][..],
            [Op::Scan {
                low: std::ops::Bound::Included(prefix),
                ..
            }] if prefix.is_empty()
        ));
    }

    #[test]
    fn hinted_scans_cross_with_the_hinted_reads_and_answer_until_a_write_under_them() {
        let mut host = Host::default();
        let t = table_t();
        let ended = run_invocation(
            &mut host,
            &mut Deferred::default(),
            0,
            &[],
            true,
            |tx, _, _, out| {
                tx.prefetch_scan(&t, &[1], Some(1), true);
                tx.prefetch_scan(&t, &[2], Some(1), true);
                tx.prefetch(&[(&t, &[7, 7])]);
                let prefix = |k| [Value::Int(k)];
                let scan = |tx: &mut dyn Tx, k, fetch| {
                    tx.scan(
                        &t,
                        KeyRange::prefix(&prefix(k)),
                        Some(1),
                        false,
                        fetch,
                        true,
                    )
                };
                // The first scan sends both scans and the read, alone.
                let one = scan(tx, 1, Fetch::Cols(&[1]))?;
                let two = scan(tx, 2, Fetch::All)?;
                tx.get(&t, &[Value::Int(7), Value::Int(7)], Fetch::All, false)?;
                // Another limit is another scan: it crosses.
                tx.scan(
                    &t,
                    KeyRange::prefix(&prefix(2)),
                    None,
                    false,
                    Fetch::All,
                    true,
                )?;
                // A delete under prefix 1 makes its answer stale, not prefix 2's. Its row is
                // the prefix then the first value the scan fetched: taken as held, so the delete
                // is deferred and crosses in front of the next scan.
                assert!(tx.delete(&t, &[Value::Int(1), Value::Int(0)])?);
                let again = scan(tx, 1, Fetch::Cols(&[1]))?;
                let two_again = scan(tx, 2, Fetch::All)?;
                out.extend([
                    one[0][0].clone(),
                    two[0][1].clone(),
                    again[0][0].clone(),
                    two_again[0][1].clone(),
                ]);
                Ok(())
            },
        );
        let Some(GuestMsg::Returned { values, .. }) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(
            values,
            vec![Value::Int(0), Value::Int(0), Value::Int(1), Value::Int(0)]
        );
        let sizes: Vec<usize> = host.messages.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![3, 1, 2], "{:?}", host.messages);
        assert!(matches!(host.messages[0][0], Op::Get { .. }), "reads first");
        assert!(
            matches!(host.messages[2][0], Op::Delete { .. }),
            "the write first"
        );
        assert!(matches!(
            host.messages[0][1],
            Op::Scan {
                limit: Some(1),
                columns: None,
                for_update: true,
                ..
            }
        ));
    }

    fn class() -> impl Strategy<Value = ErrorClass> {
        (0..ErrorClass::ALL.len()).prop_map(|i| ErrorClass::ALL[i])
    }

    fn host() -> impl Strategy<Value = HostMsg> {
        prop_oneof![
            (".{0,8}", named_ids(), named_ids()).prop_map(|(workload, tables, indexes)| {
                HostMsg::Setup {
                    workload,
                    tables,
                    indexes,
                }
            }),
            (
                any::<u16>(),
                prop::collection::vec(value(), 0..6),
                any::<bool>()
            )
                .prop_map(|(txn, args, timed)| HostMsg::Invoke { txn, args, timed }),
            prop::collection::vec(op_result(), 0..4)
                .prop_map(|results| HostMsg::Results { results }),
            (class(), ".{0,20}").prop_map(|(class, message)| HostMsg::OpFailed { class, message }),
        ]
    }

    fn guest() -> impl Strategy<Value = GuestMsg> {
        prop_oneof![
            Just(GuestMsg::Ready),
            prop::collection::vec(op(), 0..4).prop_map(|ops| GuestMsg::Ops { ops }),
            (
                prop::collection::vec(op(), 0..3),
                prop::collection::vec(value(), 0..6),
                any::<u64>()
            )
                .prop_map(|(writes, values, busy_ns)| GuestMsg::Returned {
                    writes,
                    values,
                    busy_ns
                }),
            (class(), ".{0,20}", any::<u64>()).prop_map(|(class, message, busy_ns)| {
                GuestMsg::Failed {
                    class,
                    message,
                    busy_ns,
                }
            }),
        ]
    }

    /// Encodes with `encode`, checks the length prefix, decodes the rest with `decode`.
    fn round_trip<M: std::fmt::Debug>(
        m: &M,
        encode: impl Fn(&M, &mut Vec<u8>),
        decode: impl Fn(&[u8]) -> Result<M>,
    ) -> (Vec<u8>, M) {
        let mut out = Vec::new();
        encode(m, &mut out);
        let len = u32::from_le_bytes(out[..HEADER_LEN].try_into().unwrap()) as usize;
        assert_eq!(len, out.len() - HEADER_LEN);
        let back = decode(&out[HEADER_LEN..]).expect("its own encoding decodes");
        (out, back)
    }

    proptest! {
        #[test]
        fn host_messages_round_trip(m in host()) {
            let (bytes, back) = round_trip(&m, HostMsg::encode, HostMsg::decode);
            let mut again = Vec::new();
            back.encode(&mut again);
            // Floats compare by bits through the encoding.
            prop_assert_eq!(again, bytes);
        }

        #[test]
        fn guest_messages_round_trip(m in guest()) {
            let (bytes, back) = round_trip(&m, GuestMsg::encode, GuestMsg::decode);
            let mut again = Vec::new();
            back.encode(&mut again);
            prop_assert_eq!(again, bytes);
        }

        /// A host keeps one `Spare` from frame to frame and call to call: frames of any
        /// operations answered one after another with it, and a call's returned writes
        /// decoded with it, hand `run` the operations each frame carries, byte for byte,
        /// whatever lists the operations before left behind.
        #[test]
        fn one_spare_kept_across_frames_decodes_each_frame_as_sent(
            frames in prop::collection::vec(prop::collection::vec(op(), 1..5), 1..4),
        ) {
            let mut spare = Spare::default();
            for ops in &frames {
                let mut want = Vec::new();
                for op in ops {
                    put_op(&mut want, op);
                }
                let mut frame = Vec::new();
                GuestMsg::Ops { ops: ops.clone() }.encode(&mut frame);
                let mut seen = Vec::new();
                let failed = answer_ops_with(&frame[HEADER_LEN..], &mut spare, &mut Vec::new(), |op, _| {
                    put_op(&mut seen, op);
                    Ok(())
                });
                prop_assert!(matches!(failed, Ok(None)), "{:?}", failed);
                prop_assert_eq!(&seen, &want);
                let mut frame = Vec::new();
                GuestMsg::Returned { writes: ops.clone(), values: Vec::new(), busy_ns: 0 }
                    .encode(&mut frame);
                let mut seen = Vec::new();
                let (_, failed) = decode_running_writes(&frame[HEADER_LEN..], &mut spare, |op| {
                    put_op(&mut seen, op);
                    Ok(())
                })
                .expect("decodes");
                prop_assert!(failed.is_none());
                prop_assert_eq!(&seen, &want);
            }
        }

        #[test]
        fn a_cut_guest_message_is_refused(m in guest(), cut in 1usize..64) {
            let mut out = Vec::new();
            m.encode(&mut out);
            let body = &out[HEADER_LEN..];
            if cut < body.len() {
                prop_assert!(GuestMsg::decode(&body[..body.len() - cut]).is_err());
            }
        }
    }

    #[test]
    fn the_two_conversations_do_not_take_each_others_frames() {
        let mut out = Vec::new();
        crate::Request::Begin.encode(&mut out);
        assert_eq!(
            GuestMsg::decode(&out[HEADER_LEN..]),
            Err(ProtocolError::UnknownBoundaryMessage(0x04))
        );
        out.clear();
        GuestMsg::Ready.encode(&mut out);
        assert!(HostMsg::decode(&out[HEADER_LEN..]).is_err());
        assert!(crate::Response::decode(&out[HEADER_LEN..]).is_err());
    }

    #[test]
    fn trailing_bytes_and_bad_classes_are_refused() {
        let mut out = Vec::new();
        GuestMsg::Returned {
            writes: Vec::new(),
            values: vec![Value::Int(1)],
            busy_ns: 7,
        }
        .encode(&mut out);
        let mut body = out[HEADER_LEN..].to_vec();
        body.push(0);
        assert!(matches!(
            GuestMsg::decode(&body),
            Err(ProtocolError::TrailingBytes { .. })
        ));
        let body = [KIND_FAILED, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            GuestMsg::decode(&body),
            Err(ProtocolError::UnknownTag {
                what: "error class",
                tag: 0
            })
        );
    }
}
