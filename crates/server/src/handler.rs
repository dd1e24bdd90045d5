//! What the server does with one connection's requests, whichever thread architecture runs
//! them: the protocol's state machine and the execution of each request on the engine.
//!
//! ```text
//!               Hello (version ok)              Begin, Batch
//!   Greeting ─────────────────────► Ready ───────────────────────► InTransaction
//!      │                            ▲  │ Catalog, Call,                │ Batch
//!      │ anything else              │  │ Batch(autocommit)             │
//!      ▼                            │  ▼ (each its own transaction)    │
//!   Closing ◄── malformed or        └── Commit, Abort, Batch(autocommit) (its operations,
//!               out-of-order frame      then commit), or a failed operation (aborted) ◄─┘
//!
//!   InTransaction ──(no request for `idle_timeout`: `ConnState::expire`)──► TimedOut
//!   TimedOut ──(next request: Failed{TimedOut}; a Begin starts afresh)──► Ready
//! ```
//!
//! A batch's `autocommit` flag means "commit after these operations": outside a transaction
//! the batch is a transaction of its own, inside one it is the last, and a transaction's last
//! writes travel with its commit. A batch outside a transaction without the flag begins one,
//! so `Begin` costs no round trip of its own.
//!
//! Every transition is made by [`ConnState::handle`], except the time-out, made by
//! [`ConnState::expire`]. A request that fails gets a `Failed` frame classified as its
//! [`engine::TxError`] is; a protocol error gets `Failed{Protocol}` and the connection closes.
//! Dropping a `ConnState` (the client went away) aborts its open transaction, releasing its
//! locks at once.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::db::Database;
use engine::{Fetch, IndexRef, KeyRange, TableRef, Transaction, Tx, TxError, TxResult, Value};
use protocol::{ErrorClass, Op, OpResult, Request, Response, ScanSource, MAGIC, VERSION};
use rustc_hash::FxHashMap;
use workloads::{Procedures, Workload};

use crate::isolation::{GuestConfig, Isolation};
use crate::trace::{Phase, Tracer};

/// What every connection of one server shares: the database, the workload's procedures, and
/// the names a client may use.
pub struct Shared {
    pub db: Arc<Database>,
    pub(crate) workload: &'static str,
    procedures: Box<dyn Procedures>,
    /// Where procedures run, and how to start a guest when not in the server.
    pub(crate) isolation: Isolation,
    pub(crate) guest: Option<GuestConfig>,
    /// Guests started before the server listened, one per worker, each taken by a worker at
    /// its first call (`crate::isolation::prestart`).
    pub(crate) started: std::sync::Mutex<Vec<crate::isolation::Guest>>,
    /// `--isolation wasm`: the compiled module.
    pub(crate) wasm: Option<crate::wasm::Wasm>,
    /// Procedure names in the workload's order, and their indexes.
    pub(crate) procedure_names: Vec<String>,
    procedure_index: HashMap<String, usize>,
    pub(crate) tables: Vec<(String, u32)>,
    pub(crate) indexes: Vec<(String, u32)>,
    /// Tables (with their number of columns) and indexes by id, as operations name them
    /// (every remote operation looks one up).
    table_refs: FxHashMap<u32, (TableRef, usize)>,
    index_refs: FxHashMap<u32, IndexRef>,
    /// The largest frame this server accepts or sends.
    pub max_frame: u32,
    /// `--isolation none`: the library `procedures` came from. Last, so that it is unloaded
    /// only after the procedures (its code) are dropped.
    native: Option<libloading::Library>,
}

impl Shared {
    pub fn new(db: Arc<Database>, workload: &dyn Workload, max_frame: u32) -> TxResult<Shared> {
        let procedures = workload.procedures(&db)?;
        let procedure_names: Vec<String> =
            workload.txn_names().iter().map(|n| n.to_string()).collect();
        let procedure_index = procedure_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let mut tables = Vec::new();
        let mut table_refs = FxHashMap::default();
        for name in db.table_names() {
            let t = db.table(&name)?;
            let columns = db.table_schema(&t)?.columns.len();
            tables.push((name, t.id));
            table_refs.insert(t.id, (t, columns));
        }
        let mut indexes = Vec::new();
        let mut index_refs = FxHashMap::default();
        for name in db.index_names() {
            let ix = db.index(&name)?;
            indexes.push((name, ix.id));
            index_refs.insert(ix.id, ix);
        }
        Ok(Shared {
            db,
            workload: workload.name(),
            procedures,
            isolation: Isolation::Rust,
            guest: None,
            started: std::sync::Mutex::new(Vec::new()),
            wasm: None,
            native: None,
            procedure_names,
            procedure_index,
            tables,
            indexes,
            table_refs,
            index_refs,
            max_frame,
        })
    }

    /// Runs procedures at `isolation`, starting guests (or loading the WebAssembly module) as
    /// `guest` says.
    pub fn isolated(
        mut self,
        isolation: Isolation,
        guest: Option<GuestConfig>,
    ) -> Result<Shared, String> {
        if isolation == Isolation::None {
            let library = guest
                .as_ref()
                .and_then(|g| g.library.as_ref())
                .ok_or("isolation none needs a shared library of procedures (--native-library)")?;
            let (lib, procedures) = crate::native::load(library, self.workload, &*self.db)?;
            self.procedures = procedures;
            self.native = Some(lib);
        }
        if isolation == Isolation::Wasm {
            let config = guest
                .as_ref()
                .ok_or("isolation wasm needs its module's settings")?;
            let module = config
                .module
                .as_ref()
                .ok_or("isolation wasm needs a WebAssembly module (--wasm-module)")?;
            self.wasm = Some(crate::wasm::Wasm::load(
                module,
                config.timeout,
                config.memory_mib,
                config.perfmap,
            )?);
        }
        self.isolation = isolation;
        self.guest = guest;
        Ok(self)
    }

    fn table(&self, id: u32) -> TxResult<&TableRef> {
        self.table_and_columns(id).map(|(table, _)| table)
    }

    /// Table `id` and how many columns it has.
    fn table_and_columns(&self, id: u32) -> TxResult<(&TableRef, usize)> {
        self.table_refs
            .get(&id)
            .map(|(table, columns)| (table, *columns))
            .ok_or_else(|| TxError::Invalid(format!("no table with id {id}")))
    }

    /// Table `id`, how many columns it has, and `columns` of it to fetch (`None`: every
    /// column), each checked to be one of its columns, as the engine checks a fetch of them
    /// before it reads anything.
    fn fetched<'c>(
        &self,
        id: u32,
        columns: Option<&'c [u16]>,
    ) -> TxResult<(&TableRef, usize, Option<&'c [u16]>)> {
        let (table, width) = self.table_and_columns(id)?;
        if let Some(c) = columns
            .into_iter()
            .flatten()
            .find(|&&c| usize::from(c) >= width)
        {
            return Err(TxError::Invalid(format!(
                "table {} has no column {c}",
                table.name
            )));
        }
        Ok((table, width, columns))
    }

    fn index(&self, id: u32) -> TxResult<&IndexRef> {
        self.index_refs
            .get(&id)
            .ok_or_else(|| TxError::Invalid(format!("no index with id {id}")))
    }
}

/// Where a connection is in the protocol (see the module's diagram).
enum State<'db> {
    Greeting,
    Ready,
    /// Boxed: a transaction is 400 bytes, a connection without one needs none of them.
    InTransaction(Box<Transaction<'db>>),
    TimedOut,
}

/// What the caller does with the connection after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The response sent was a protocol error: flush it, then close.
    Close,
    /// Nothing was answered: the request is put aside, to be handled again once the
    /// transaction of this worker it would have waited for has ended (see
    /// [`ConnState::handle_or_park`] and [`HandOffs`]); the connection's later requests wait
    /// behind it.
    Park,
}

/// Whether a request parked behind transaction `behind` (`None`: not named, as for a
/// deadlock's victim) is to run again: at a sweep, or once `behind` (or, not knowing it, any
/// transaction of the worker) is among those that `ended`.
pub(crate) fn parked_is_due(behind: Option<u64>, sweep: bool, ended: &[u64]) -> bool {
    sweep
        || match behind {
            Some(holder) => ended.contains(&holder),
            None => !ended.is_empty(),
        }
}

/// The hand-offs of one pass over a worker's parked requests. Requests parked behind one
/// holder were most likely refused the same lock: once the holder has ended and the oldest of
/// them has run and left a transaction of its own open, that transaction holds the lock now,
/// and running the others would only see them refused again (on one warehouse with eight
/// connections a worker, a parked TPC-C batch ran about 5.5 times before). So they are parked
/// behind the new holder instead, to run when it ends: one wakes at a time, in the order they
/// were parked. Where the guess is wrong (the younger ones wanted another lock) they wait for
/// one more transaction of their worker, no longer than a sweep.
#[derive(Debug, Default)]
pub(crate) struct HandOffs(Vec<(u64, u64)>);

impl HandOffs {
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The transaction that took over in this pass from the holder a request is parked
    /// `behind`, if one did.
    pub fn successor(&self, behind: Option<u64>) -> Option<u64> {
        let holder = behind?;
        self.0.iter().find(|(h, _)| *h == holder).map(|&(_, t)| t)
    }

    /// Notes that a request parked `behind` a holder has run and answered, leaving its
    /// transaction `open` (if it did, the first to do so takes over from that holder).
    pub fn note(&mut self, behind: Option<u64>, open: Option<u64>) {
        if let (Some(holder), Some(txn)) = (behind, open) {
            if self.successor(Some(holder)).is_none() {
                self.0.push((holder, txn));
            }
        }
    }
}

/// One connection's protocol state.
pub struct ConnState<'db> {
    state: State<'db>,
    last_request: Instant,
    /// The largest frame the client accepts (agreed in the handshake).
    pub max_frame: u32,
    /// The vector the last call's values were returned in, emptied, for the next call to
    /// fill: a procedure's result then costs no allocation of its own nor growth (kept up to
    /// [`KEPT_VALUES`] values, so a large scan's capacity is not held by an idle connection).
    spare: Vec<Value>,
    /// Where the last request was parked behind a transaction of this worker: its id.
    parked_behind: Option<u64>,
    /// The open transaction, while a later batch of it is parked (see [`PARKED_LATER`]).
    parked_later: Option<u64>,
}

thread_local! {
    /// The transactions of this worker thread whose later batch is parked ([`Flow::Park`]).
    /// A later batch is not parked behind one of them: it keeps what its transaction holds,
    /// so two such could wait for each other until the wait's bound parted them (measured:
    /// interactive TPC-C without read-ahead, one warehouse, 8 connections a worker, a quarter
    /// of its throughput). Refused instead, it breaks the cycle at once.
    static PARKED_LATER: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether transaction `txn` of this worker thread has a later batch parked.
fn later_batch_parked(txn: u64) -> bool {
    PARKED_LATER.with(|p| p.borrow().contains(&txn))
}

fn note_later_batch(txn: u64, parked: bool) {
    PARKED_LATER.with(|p| {
        let mut p = p.borrow_mut();
        if parked {
            p.push(txn);
        } else {
            p.retain(|&t| t != txn);
        }
    });
}

impl Drop for ConnState<'_> {
    fn drop(&mut self) {
        if let Some(txn) = self.parked_later.take() {
            note_later_batch(txn, false);
        }
    }
}

/// The most values a connection keeps room for between calls.
const KEPT_VALUES: usize = 256;

impl Default for ConnState<'_> {
    fn default() -> Self {
        ConnState {
            state: State::Greeting,
            last_request: Instant::now(),
            max_frame: protocol::DEFAULT_MAX_FRAME,
            spare: Vec::new(),
            parked_behind: None,
            parked_later: None,
        }
    }
}

impl<'db> ConnState<'db> {
    /// Whether an interactive transaction is open.
    pub fn in_transaction(&self) -> bool {
        matches!(self.state, State::InTransaction(_))
    }

    /// The id of the connection's open transaction, if one is open.
    pub fn open_transaction(&self) -> Option<u64> {
        match &self.state {
            State::InTransaction(txn) => Some(txn.id()),
            _ => None,
        }
    }

    /// After [`Flow::Park`]: the transaction of this worker the request would have waited
    /// for, where the lock manager named one (not for a deadlock's victim); its end is when
    /// the request may go on.
    pub fn parked_behind(&self) -> Option<u64> {
        self.parked_behind
    }

    /// Handles one frame (its kind byte and body), appending the response frame to `out`.
    pub fn handle(
        &mut self,
        frame: &[u8],
        shared: &'db Shared,
        out: &mut Vec<u8>,
        tracer: &mut Tracer,
    ) -> Flow {
        self.handle_or_park(frame, shared, out, tracer, false)
    }

    /// [`ConnState::handle`], where a worker serves several connections: with `may_park`, a
    /// transaction's first batch that fails on a lock (refused because another transaction
    /// of this worker holds it, or a deadlock's victim) is rolled back and not answered, and
    /// [`Flow::Park`] returned; the worker handles the frame again once the holder
    /// ([`ConnState::parked_behind`]; not knowing it, any transaction of the worker) has
    /// ended, as the client would have retried it, but without the round trip and not
    /// before the holder is gone. Nothing of the batch was seen by the client, so running
    /// it again as a new transaction is the same to it. A later batch refused so (not a
    /// deadlock's victim, which must give way) is taken back to a savepoint at its start and
    /// parked the same way, its transaction open: run again, it goes on from there. Without
    /// `may_park` (the worker's wait bound has passed), or where a lock wait of the batch ran
    /// out its bound (it waited for another worker's transaction as long as a parked one
    /// would), the failure is answered.
    pub fn handle_or_park(
        &mut self,
        frame: &[u8],
        shared: &'db Shared,
        out: &mut Vec<u8>,
        tracer: &mut Tracer,
        may_park: bool,
    ) -> Flow {
        self.last_request = Instant::now();
        // A parked request is the connection's only one until it is answered: this is it.
        if let Some(txn) = self.parked_later.take() {
            note_later_batch(txn, false);
        }
        let request = match tracer.time(Phase::Decode, || Request::decode(frame)) {
            Ok(r) => r,
            Err(e) => return self.protocol_error(e.to_string(), out),
        };
        let response = match (&mut self.state, request) {
            (
                State::Greeting,
                Request::Hello {
                    magic,
                    version,
                    max_frame,
                },
            ) => {
                if magic != MAGIC || version != VERSION {
                    return self.protocol_error(
                        format!("this server speaks version {VERSION} of the protocol"),
                        out,
                    );
                }
                self.max_frame = max_frame.min(shared.max_frame);
                self.state = State::Ready;
                Response::Welcome {
                    version: VERSION,
                    max_frame: self.max_frame,
                    workload: shared.workload.to_string(),
                    procedures: shared.procedure_names.clone(),
                }
            }
            (State::Greeting, _) => {
                return self.protocol_error("the first message must be Hello".to_string(), out)
            }
            (_, Request::Hello { .. }) => {
                return self.protocol_error("Hello sent twice".to_string(), out)
            }
            (State::TimedOut, request) => {
                self.state = State::Ready;
                if matches!(request, Request::Begin) {
                    tracer.time_cpu(Phase::QueryExecution, || self.begin(shared))
                } else {
                    failed(
                        ErrorClass::TimedOut,
                        "the interactive transaction was idle too long and was aborted".to_string(),
                    )
                }
            }
            (State::Ready, Request::Catalog) | (State::InTransaction(_), Request::Catalog) => {
                Response::CatalogIs {
                    tables: shared.tables.clone(),
                    indexes: shared.indexes.clone(),
                }
            }
            (State::Ready, Request::Call { procedure, args }) => {
                self.call(shared, &procedure, &args, tracer)
            }
            (State::Ready, Request::Begin) => {
                tracer.time_cpu(Phase::QueryExecution, || self.begin(shared))
            }
            (State::Ready, Request::Batch { autocommit, ops }) => {
                match tracer.time_cpu(Phase::QueryExecution, || shared.db.begin()) {
                    // A batch outside a transaction begins one; with `autocommit` it also
                    // ends it.
                    Ok(mut txn) => match run_ops_traced(&mut txn, shared, &ops, tracer) {
                        Ok(results) if autocommit => {
                            match tracer.time_cpu(Phase::QueryExecution, || txn.commit()) {
                                Ok(()) => {
                                    tracer.transaction();
                                    if ops.iter().any(Op::writes) {
                                        tracer.lone_write();
                                    }
                                    Response::Results { results }
                                }
                                Err(e) => failure(&e),
                            }
                        }
                        Ok(results) => {
                            self.state = State::InTransaction(Box::new(txn));
                            Response::Results { results }
                        }
                        Err(e) => {
                            let behind = txn.refused_by();
                            // A lock wait that ran out (for another worker's transaction)
                            // has waited as long as a parked batch may: answered at once.
                            let waited_out = txn.lock_timed_out();
                            let _ = tracer.time_cpu(Phase::QueryExecution, || txn.abort());
                            if may_park && e.is_retryable() && !waited_out {
                                self.parked_behind = behind;
                                return Flow::Park;
                            }
                            failure(&e)
                        }
                    },
                    Err(e) => failure(&e),
                }
            }
            (State::Ready, Request::Commit | Request::Abort) => {
                return self.protocol_error("no transaction is open".to_string(), out)
            }
            (State::InTransaction(txn), Request::Batch { autocommit, ops }) => {
                // Where it may be parked, the batch starts from a savepoint: refused a lock
                // that another transaction of this worker holds, its work is taken back and
                // it goes again once that one has ended.
                let savepoint = may_park.then(|| {
                    txn.forget_refusal();
                    txn.savepoint()
                });
                match run_ops_traced(txn.as_mut(), shared, &ops, tracer) {
                    Ok(results) if autocommit => {
                        match tracer.time_cpu(Phase::QueryExecution, || self.finish(true)) {
                            Ok(()) => {
                                tracer.transaction();
                                Response::Results { results }
                            }
                            Err(e) => failure(&e),
                        }
                    }
                    Ok(results) => Response::Results { results },
                    Err(e) => {
                        let holder = txn.refused_by();
                        if let (Some(savepoint), Some(holder)) = (savepoint, holder) {
                            let parks = e.is_retryable()
                                && !txn.lock_timed_out()
                                && !later_batch_parked(holder);
                            let id = txn.id();
                            let back = || txn.rollback_to(savepoint);
                            if parks && tracer.time_cpu(Phase::QueryExecution, back).is_ok() {
                                self.parked_behind = Some(holder);
                                self.parked_later = Some(id);
                                note_later_batch(id, true);
                                return Flow::Park;
                            }
                        }
                        // Any other failed operation ends the transaction (a deadlock's
                        // victim keeps what it holds if it waits: it must give way).
                        let _ = tracer.time_cpu(Phase::QueryExecution, || self.finish(false));
                        failure(&e)
                    }
                }
            }
            (State::InTransaction(_), request @ (Request::Commit | Request::Abort)) => {
                let commit = matches!(request, Request::Commit);
                match tracer.time_cpu(Phase::QueryExecution, || self.finish(commit)) {
                    Ok(()) => {
                        tracer.transaction();
                        Response::Done
                    }
                    Err(e) => failure(&e),
                }
            }
            (State::InTransaction(_), Request::Begin | Request::Call { .. }) => {
                return self.protocol_error(
                    "a transaction is already open: Commit or Abort it first".to_string(),
                    out,
                )
            }
        };
        let flow = tracer.time(Phase::Encode, || self.respond(&response, out));
        if let Response::Returned { mut values } = response {
            if values.capacity() <= KEPT_VALUES {
                values.clear();
                self.spare = values;
            }
        }
        flow
    }

    /// Aborts an interactive transaction that has had no request for `idle_timeout`; its next
    /// request is told so. Returns whether it did.
    pub fn expire(&mut self, now: Instant, idle_timeout: Duration) -> bool {
        if self.in_transaction() && now.duration_since(self.last_request) >= idle_timeout {
            let _ = self.finish(false);
            self.state = State::TimedOut;
            return true;
        }
        false
    }

    fn begin(&mut self, shared: &'db Shared) -> Response {
        match shared.db.begin() {
            Ok(txn) => {
                self.state = State::InTransaction(Box::new(txn));
                Response::Done
            }
            Err(e) => failure(&e),
        }
    }

    fn call(
        &mut self,
        shared: &Shared,
        procedure: &str,
        args: &[Value],
        tracer: &mut Tracer,
    ) -> Response {
        let Some(&index) = shared.procedure_index.get(procedure) else {
            return failed(
                ErrorClass::Invalid,
                format!("{} has no procedure named {procedure:?}", shared.workload),
            );
        };
        let mut values = std::mem::take(&mut self.spare);
        let mut txn = match tracer.time_cpu(Phase::QueryExecution, || shared.db.begin()) {
            Ok(txn) => txn,
            Err(e) => return failure(&e),
        };
        let ran = if let Some(wasm) = &shared.wasm {
            crate::wasm::call(shared, wasm, &mut txn, index, args, &mut values, tracer)
        } else if shared.isolation.out_of_process() {
            crate::isolation::call(shared, &mut txn, index, args, &mut values, tracer)
        } else if tracer.on() {
            // The procedure's span, split into its engine calls and the rest.
            let start = tracer.start_handling();
            let mut timed = TimedTx::new(&mut txn);
            let ran = shared.procedures.call(&mut timed, index, args, &mut values);
            let engine_ns = timed.ns;
            tracer.charge_handling(start, engine_ns);
            ran
        } else {
            shared.procedures.call(&mut txn, index, args, &mut values)
        };
        let result = match ran {
            Ok(()) => tracer.time_cpu(Phase::QueryExecution, || txn.commit()),
            Err(e) => {
                let _ = tracer.time_cpu(Phase::QueryExecution, || txn.abort());
                Err(e)
            }
        };
        match result {
            Ok(()) => {
                tracer.transaction();
                Response::Returned { values }
            }
            Err(e) => {
                if matches!(e, TxError::UserAbort(_)) {
                    tracer.transaction();
                }
                failure(&e)
            }
        }
    }

    /// Commits (or aborts) the open transaction and returns to `Ready`.
    fn finish(&mut self, commit: bool) -> TxResult<()> {
        match std::mem::replace(&mut self.state, State::Ready) {
            State::InTransaction(txn) if commit => txn.commit(),
            State::InTransaction(txn) => txn.abort(),
            other => {
                self.state = other;
                Ok(())
            }
        }
    }

    fn respond(&mut self, response: &Response, out: &mut Vec<u8>) -> Flow {
        let start = out.len();
        response.encode(out);
        let len = out.len() - start;
        if len > self.max_frame as usize {
            out.truncate(start);
            let message = format!(
                "the response is {len} bytes, over the connection's frame limit of {}",
                self.max_frame
            );
            failed(ErrorClass::Invalid, message).encode(out);
        }
        Flow::Continue
    }

    fn protocol_error(&mut self, message: String, out: &mut Vec<u8>) -> Flow {
        let _ = self.finish(false);
        failed(ErrorClass::Protocol, message).encode(out);
        Flow::Close
    }
}

fn failed(class: ErrorClass, message: String) -> Response {
    Response::Failed { class, message }
}

fn failure(e: &TxError) -> Response {
    Response::failed(e)
}

/// The columns an operation names, as the engine takes them (`scratch` holds them).
fn fetch<'c>(columns: &Option<Vec<u16>>, scratch: &'c mut Vec<usize>) -> Fetch<'c> {
    scratch.clear();
    match columns {
        None => Fetch::All,
        Some(cols) => {
            scratch.extend(cols.iter().map(|&c| c as usize));
            Fetch::Cols(scratch)
        }
    }
}

fn bound(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v),
        Bound::Excluded(v) => Bound::Excluded(v),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// [`run_ops`], with its dispatch charged to procedure execution and its engine calls to
/// query execution.
fn run_ops_traced(
    tx: &mut dyn Tx,
    shared: &Shared,
    ops: &[Op],
    tracer: &mut Tracer,
) -> TxResult<Vec<OpResult>> {
    if !tracer.on() {
        return run_ops(tx, shared, ops);
    }
    let start = tracer.start_handling();
    let mut timed = TimedTx::new(tx);
    let results = run_ops(&mut timed, shared, ops);
    let engine_ns = timed.ns;
    tracer.charge_handling(start, engine_ns);
    results
}

/// A `Tx` that adds up the time its calls spend in the engine (query execution).
struct TimedTx<'a> {
    inner: &'a mut dyn Tx,
    ns: u64,
}

impl<'a> TimedTx<'a> {
    fn new(inner: &'a mut dyn Tx) -> Self {
        TimedTx { inner, ns: 0 }
    }

    fn timed<R>(&mut self, f: impl FnOnce(&mut dyn Tx) -> R) -> R {
        let start = Instant::now();
        let r = f(&mut *self.inner);
        self.ns += start.elapsed().as_nanos() as u64;
        r
    }
}

impl Tx for TimedTx<'_> {
    fn get(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<engine::Row>> {
        self.timed(|tx| tx.get(table, key, fetch, for_update))
    }

    fn read_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        for_update: bool,
        f: &mut engine::ReadFn<'_>,
    ) -> TxResult<bool> {
        self.timed(|tx| tx.read_with(table, key, for_update, f))
    }

    fn read_columns_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: &[usize],
        for_update: bool,
        f: &mut engine::ReadFn<'_>,
    ) -> TxResult<bool> {
        self.timed(|tx| tx.read_columns_with(table, key, columns, for_update, f))
    }

    fn update_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        f: &mut engine::UpdateFn<'_>,
    ) -> TxResult<bool> {
        self.timed(|tx| tx.update_with(table, key, f))
    }

    fn update_columns_with(
        &mut self,
        table: &TableRef,
        key: &[Value],
        columns: &[usize],
        f: &mut engine::UpdateFn<'_>,
    ) -> TxResult<bool> {
        self.timed(|tx| tx.update_columns_with(table, key, columns, f))
    }

    fn prefetch(&mut self, rows: &[(&TableRef, &[i64])]) {
        self.timed(|tx| tx.prefetch(rows))
    }

    fn prefetch_columns(&mut self, rows: &[(&TableRef, &[i64])], columns: &[usize]) {
        self.timed(|tx| tx.prefetch_columns(rows, columns))
    }

    fn prefetch_for_update(&mut self, rows: &[(&TableRef, &[i64])], columns: Option<&[usize]>) {
        self.timed(|tx| tx.prefetch_for_update(rows, columns))
    }

    fn prefetch_inserts(&mut self, rows: &[(&TableRef, &[i64])]) {
        self.timed(|tx| tx.prefetch_inserts(rows))
    }

    fn update(
        &mut self,
        table: &TableRef,
        key: &[Value],
        set: &[(usize, Value)],
    ) -> TxResult<bool> {
        self.timed(|tx| tx.update(table, key, set))
    }

    fn insert(&mut self, table: &TableRef, row: &[Value]) -> TxResult<()> {
        self.timed(|tx| tx.insert(table, row))
    }

    fn delete(&mut self, table: &TableRef, key: &[Value]) -> TxResult<bool> {
        self.timed(|tx| tx.delete(table, key))
    }

    fn scan(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<engine::Row>> {
        self.timed(|tx| tx.scan(table, range, limit, reverse, fetch, for_update))
    }

    fn scan_columns_with(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        columns: &[usize],
        for_update: bool,
        f: &mut engine::ReadFn<'_>,
    ) -> TxResult<()> {
        self.timed(|tx| tx.scan_columns_with(table, range, limit, reverse, columns, for_update, f))
    }

    fn scan_index(
        &mut self,
        index: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<engine::Row>> {
        self.timed(|tx| tx.scan_index(index, range, limit, reverse, fetch, for_update))
    }

    fn read_committed(&mut self) {
        self.inner.read_committed();
    }
}

/// Runs a batch's operations in order; the first failure ends the batch.
pub(crate) fn run_ops(tx: &mut dyn Tx, shared: &Shared, ops: &[Op]) -> TxResult<Vec<OpResult>> {
    let mut scratch = OpScratch::default();
    ops.iter()
        .map(|op| run_op(tx, shared, op, &mut scratch))
        .collect()
}

/// The lists an operation's run fills for the engine and empties again, kept from one
/// operation to the next (a caller that runs many keeps one) so that they are allocated once.
#[derive(Default)]
pub(crate) struct OpScratch {
    /// The columns a read or scan names, as the engine takes them.
    cols: Vec<usize>,
    /// An update's columns and values, as the engine takes them.
    set: Vec<(usize, Value)>,
}

/// Runs `op` and writes its result into an answer (`protocol::guest::answer_ops_with`): a
/// read of a row, whole or some of its columns, and a scan of a table are encoded straight
/// from the engine's records (`protocol::guest::put_row_result` inside `Tx::read_with`,
/// `protocol::guest::RowsResult` inside `Tx::scan_columns_with`), not built as values to be
/// encoded and dropped; anything else as [`run_op`] answers it.
pub(crate) fn answer_op(
    tx: &mut dyn Tx,
    shared: &Shared,
    op: &Op,
    scratch: &mut OpScratch,
    out: &mut Vec<u8>,
) -> TxResult<()> {
    match op {
        // The whole row, the most common read (apart so that its path stays short).
        Op::Get {
            table,
            key,
            columns: None,
            for_update,
        } => {
            let table = shared.table(*table)?;
            let found = tx.read_with(table, key, *for_update, &mut |row| {
                protocol::guest::put_row_result(out, Some(row), None)
            })?;
            if !found {
                protocol::guest::put_row_result(out, None, None)?;
            }
        }
        Op::Get {
            table,
            key,
            columns: Some(columns),
            for_update,
        } => {
            let (table, _, columns) = shared.fetched(*table, Some(columns))?;
            let found = tx.read_with(table, key, *for_update, &mut |row| {
                protocol::guest::put_row_result(out, Some(row), columns)
            })?;
            if !found {
                protocol::guest::put_row_result(out, None, None)?;
            }
        }
        Op::Scan {
            source: ScanSource::Table(id),
            low,
            high,
            limit,
            reverse,
            columns,
            for_update,
        } => {
            let (table, width, columns) = shared.fetched(*id, columns.as_deref())?;
            // Every column where none are named: the engine reads its records in place
            // whatever it is told, a `Tx` of rows of values fetches what it is told.
            let cols = &mut scratch.cols;
            cols.clear();
            match columns {
                Some(columns) => cols.extend(columns.iter().map(|&c| usize::from(c))),
                None => cols.extend(0..width),
            }
            let range = KeyRange {
                low: bound(low),
                high: bound(high),
            };
            let limit = limit.map(|l| l as usize);
            let mut rows = protocol::guest::RowsResult::start(out);
            tx.scan_columns_with(
                table,
                range,
                limit,
                *reverse,
                cols,
                *for_update,
                &mut |row| rows.row(out, row, columns),
            )?;
            rows.finish(out);
        }
        _ => protocol::guest::put_result(out, &run_op(tx, shared, op, scratch)?),
    }
    Ok(())
}

/// Runs one operation.
pub(crate) fn run_op(
    tx: &mut dyn Tx,
    shared: &Shared,
    op: &Op,
    scratch: &mut OpScratch,
) -> TxResult<OpResult> {
    Ok(match op {
        Op::Get {
            table,
            key,
            columns,
            for_update,
        } => {
            let f = fetch(columns, &mut scratch.cols);
            OpResult::Row(tx.get(shared.table(*table)?, key, f, *for_update)?)
        }
        Op::Update { table, key, set } => {
            let pairs = &mut scratch.set;
            pairs.clear();
            pairs.extend(set.iter().map(|(c, v)| (usize::from(*c), v.clone())));
            OpResult::Found(tx.update(shared.table(*table)?, key, pairs)?)
        }
        Op::Insert { table, row } => {
            tx.insert(shared.table(*table)?, row)?;
            OpResult::Inserted
        }
        Op::Delete { table, key } => OpResult::Found(tx.delete(shared.table(*table)?, key)?),
        Op::Scan {
            source,
            low,
            high,
            limit,
            reverse,
            columns,
            for_update,
        } => {
            let f = fetch(columns, &mut scratch.cols);
            let range = KeyRange {
                low: bound(low),
                high: bound(high),
            };
            let limit = limit.map(|l| l as usize);
            OpResult::Rows(match source {
                ScanSource::Table(id) => {
                    tx.scan(shared.table(*id)?, range, limit, *reverse, f, *for_update)?
                }
                ScanSource::Index(id) => {
                    tx.scan_index(shared.index(*id)?, range, limit, *reverse, f, *for_update)?
                }
            })
        }
        Op::ReadCommitted => {
            tx.read_committed();
            OpResult::Set
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `answer_op` writes straight from the records is, byte for byte, what `run_op`'s
    /// result encodes: reads of a whole row, of columns in any order (one twice), of a row
    /// that is not there, and scans of a table, whole or some columns, forward or back, with
    /// a limit or none, empty or not; a column the table lacks is refused with the same
    /// error, whether the row is there or not.
    #[test]
    fn answers_written_from_the_records_are_the_results_run_op_builds() {
        let options = workloads::WorkloadOptions {
            scale: 40,
            ..workloads::WorkloadOptions::default()
        };
        let w = workloads::by_name("ycsb", &options).unwrap();
        let db = Database::open(engine::DbConfig::default()).unwrap();
        w.create_schema(&db).unwrap();
        w.load(&db, &|_, _| {}).unwrap();
        let shared = Shared::new(Arc::clone(&db), w.as_ref(), 1 << 20).unwrap();
        let table = shared.tables[0].1;
        let get = |key: i64, columns: Option<Vec<u16>>| Op::Get {
            table,
            key: vec![Value::Int(key)],
            columns,
            for_update: false,
        };
        let scan = |low: i64, high: i64, limit, reverse, columns| Op::Scan {
            source: ScanSource::Table(table),
            low: Bound::Included(vec![Value::Int(low)]),
            high: Bound::Excluded(vec![Value::Int(high)]),
            limit,
            reverse,
            columns,
            for_update: false,
        };
        let mut tx = db.begin().unwrap();
        let mut scratch = OpScratch::default();
        for op in [
            get(3, None),
            get(3, Some(vec![2, 0, 2])),
            get(1_000_000, Some(vec![1])),
            get(1_000_000, None),
            scan(5, 12, None, false, None),
            scan(5, 12, Some(3), true, Some(vec![1, 0])),
            scan(100, 200, None, false, Some(vec![0])),
        ] {
            let mut answered = Vec::new();
            answer_op(&mut tx, &shared, &op, &mut scratch, &mut answered).unwrap();
            let mut built = Vec::new();
            protocol::guest::put_result(
                &mut built,
                &run_op(&mut tx, &shared, &op, &mut scratch).unwrap(),
            );
            assert_eq!(answered, built, "{op:?}");
        }
        // YCSB's table has 11 columns.
        for op in [
            get(3, Some(vec![0, 11])),
            get(1_000_000, Some(vec![11])),
            scan(5, 12, None, false, Some(vec![11])),
        ] {
            let answered = answer_op(&mut tx, &shared, &op, &mut scratch, &mut Vec::new());
            let ran = run_op(&mut tx, &shared, &op, &mut scratch);
            let (answered, ran) = (
                answered.unwrap_err().to_string(),
                ran.unwrap_err().to_string(),
            );
            assert_eq!(answered, ran, "{op:?}");
            assert!(answered.contains("has no column 11"), "{answered}");
        }
    }

    #[test]
    fn the_first_to_leave_a_transaction_open_takes_over_from_the_holder() {
        let mut hand_offs = HandOffs::default();
        // Answered and ended (autocommit), or parked behind no named holder: no hand-off.
        hand_offs.note(Some(7), None);
        hand_offs.note(None, Some(9));
        assert_eq!(hand_offs.successor(Some(7)), None);
        assert_eq!(hand_offs.successor(None), None);
        hand_offs.note(Some(7), Some(11));
        hand_offs.note(Some(7), Some(12));
        hand_offs.note(Some(8), Some(13));
        assert_eq!(hand_offs.successor(Some(7)), Some(11));
        assert_eq!(hand_offs.successor(Some(8)), Some(13));
        assert_eq!(hand_offs.successor(Some(9)), None);
        hand_offs.clear();
        assert_eq!(hand_offs.successor(Some(7)), None);
    }

    #[test]
    fn a_parked_request_is_due_when_its_holder_ends_or_at_a_sweep() {
        assert!(parked_is_due(Some(7), false, &[3, 7]));
        assert!(!parked_is_due(Some(7), false, &[3]));
        assert!(parked_is_due(Some(7), true, &[]));
        assert!(parked_is_due(None, false, &[3]));
        assert!(!parked_is_due(None, false, &[]));
    }
}
