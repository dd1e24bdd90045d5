//! `--isolation wasm`: stored procedures compiled to WebAssembly (`crates/procedures-wasm`)
//! and run inside the worker's thread by wasmtime, the host side of the module's exports and
//! imports.
//!
//! ```text
//!   worker thread
//!   ─────────────
//!   ConnState::call ─► wasm::call ─► thread-local Sandbox (Store + Instance)
//!      glass_input(len), copy Invoke in, glass_invoke() ──► module: Procedures::call
//!                       ◄── glass.op(Ops, room) ─ each operation run on the Transaction
//!                           as it is decoded, the answer written into the module's room
//!                           (glass.take where it did not fit)
//!      read Returned | Failed out of the module's memory
//! ```
//!
//! What bounds the module: its linear memory (`StoreLimits`, `--procedure-memory-mib`), its
//! time (epoch interruption: a ticker thread advances the engine's epoch every [`TICK`], and
//! each call's deadline is the time limit in ticks), and its imports: only `glass.op` and
//! `glass.take`, and of WASI what Rust's standard library needs to start (clocks, random
//! bytes, an empty environment, stderr captured for error messages, no preopened directories,
//! so no path can be opened); any other import traps. A trap (the time limit, a memory fault,
//! an abort, a failed allocation) rolls the transaction back with `TxError::Contained` and the
//! worker instantiates the module afresh at its next call.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{Tx, TxError, TxResult, Value};
use protocol::guest::{
    answer_ops_with, check_returned_write, decode_running_writes, GuestMsg, HostMsg, Spare,
};
use protocol::{Op, HEADER_LEN};
use wasmtime::{
    Caller, Config, Engine, Extern, Instance, Linker, Memory, Module, Store, StoreLimits,
    StoreLimitsBuilder, Trap, TypedFunc,
};

use crate::handler::{OpScratch, Shared};
use crate::isolation::{failed_reply, finish_call};
use crate::trace::Tracer;

/// How often the epoch advances: the resolution of the time limit.
pub const TICK: Duration = Duration::from_millis(5);
/// The first four bytes of every WebAssembly module (binary format).
const WASM_MAGIC: &[u8] = b"\0asm";
/// Bytes of a procedure's stderr kept for the error that names why it stopped.
const STDERR_KEPT: usize = 2048;

/// The compiled module, shared by every worker of a server.
pub(crate) struct Wasm {
    engine: Engine,
    module: Module,
    linker: Linker<HostState>,
    timeout: Duration,
    memory_bytes: usize,
    stop: Arc<AtomicBool>,
}

impl Wasm {
    /// Compiles the module at `path` and starts the epoch ticker; with `perfmap`, names its
    /// compiled functions in `/tmp/perf-PID.map` (wasmtime's perf map), where `perf` and
    /// callgrind's annotations can find them.
    pub(crate) fn load(
        path: &Path,
        timeout: Duration,
        memory_mib: u64,
        perfmap: bool,
    ) -> Result<Wasm, String> {
        if !path.is_file() {
            return Err(format!(
                "no WebAssembly module at {}: build it with `rustup target add wasm32-wasip1 && \
                 cargo build --release -p procedures-wasm --target wasm32-wasip1`, or name one \
                 with --wasm-module",
                path.display()
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        if !bytes.starts_with(WASM_MAGIC) {
            return Err(format!(
                "{} is not a WebAssembly module (a module's first four bytes are \\0asm; \
                 this file's are {:?})",
                path.display(),
                String::from_utf8_lossy(&bytes[..bytes.len().min(4)])
            ));
        }
        let mut config = Config::new();
        config.epoch_interruption(true);
        if perfmap {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| format!("start wasmtime: {e}"))?;
        let module = Module::new(&engine, &bytes)
            .map_err(|e| format!("compile {}: {e:#}", path.display()))?;
        let linker = linker(&engine, &module)?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (engine, stop) = (engine.clone(), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("glass-wasm-epoch".to_string())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| format!("start the epoch ticker: {e}"))?;
        }
        Ok(Wasm {
            engine,
            module,
            linker,
            timeout,
            memory_bytes: usize::try_from(memory_mib << 20).unwrap_or(usize::MAX),
            stop,
        })
    }
}

/// The default module: where `cargo build --release -p procedures-wasm --target
/// wasm32-wasip1` leaves it, in the target directory of the running binary (`target/release`
/// or `target/debug`).
pub fn default_module(exe: &Path) -> PathBuf {
    let target = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("target"));
    target
        .join("wasm32-wasip1")
        .join("release")
        .join("procedures_wasm.wasm")
}

impl Drop for Wasm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What the host keeps beside an instance.
struct HostState {
    limits: StoreLimits,
    /// The call in progress, while `glass_invoke` runs; null otherwise.
    call: *mut Call<'static>,
    /// The answer to the module's last `op`, until it `take`s it (where it did not fit the
    /// room the module offered).
    pending: Vec<u8>,
    /// The lists the module's operations are decoded into and run with, kept from one `op`
    /// to the next.
    spare: Spare,
    scratch: OpScratch,
    /// The tail of what the module wrote to stdout and stderr.
    stderr: Vec<u8>,
    /// The module's memory, once instantiated: looked up by name once, not at every import.
    memory: Option<Memory>,
}

// SAFETY: `call` is only ever set for the duration of a call on the thread that owns the
// store, and the store never leaves that thread (a thread-local); the rest is plain data.
unsafe impl Send for HostState {}

/// One call's access to the engine, lent to the module's `op` import.
struct Call<'a> {
    tx: &'a mut dyn Tx,
    shared: &'a Shared,
    engine_ns: u64,
    timing: bool,
    /// An operation that failed dooms the call, whatever the procedure does with its error.
    failed_op: Option<TxError>,
}

/// An instance of the module in one worker thread.
struct Sandbox {
    store: Store<HostState>,
    memory: Memory,
    input: TypedFunc<u32, u32>,
    invoke: TypedFunc<(), u64>,
}

thread_local! {
    static SANDBOX: RefCell<Option<Sandbox>> = const { RefCell::new(None) };
}

/// Runs procedure `txn` in this worker's sandbox (instantiated now if it has none).
pub(crate) fn call(
    shared: &Shared,
    wasm: &Wasm,
    tx: &mut dyn Tx,
    txn: usize,
    args: &[Value],
    out: &mut Vec<Value>,
    tracer: &mut Tracer,
) -> TxResult<()> {
    SANDBOX.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Sandbox::new(shared, wasm).map_err(|e| {
                TxError::Contained(format!("the WebAssembly module could not start: {e}"))
            })?);
        }
        let sandbox = slot.as_mut().expect("made above");
        let procedure = shared.procedure_names.get(txn).map_or("?", String::as_str);
        match sandbox.call(shared, wasm, tx, txn, args, out, tracer) {
            Ok(result) => result,
            Err(why) => {
                let said = slot
                    .take()
                    .map(|s| last_words(&s.store))
                    .unwrap_or_default();
                Err(TxError::Contained(format!(
                    "procedure {procedure}: {why}{said}; the transaction was rolled back"
                )))
            }
        }
    })
}

/// Instantiates the module once, to check that it starts (a server does, before it listens).
pub(crate) fn probe(shared: &Shared, wasm: &Wasm) -> Result<(), String> {
    Sandbox::new(shared, wasm).map(drop)
}

impl Sandbox {
    fn new(shared: &Shared, wasm: &Wasm) -> Result<Sandbox, String> {
        let state = HostState {
            limits: StoreLimitsBuilder::new()
                .memory_size(wasm.memory_bytes)
                .instances(1)
                .build(),
            call: std::ptr::null_mut(),
            pending: Vec::new(),
            spare: Spare::default(),
            scratch: OpScratch::default(),
            stderr: Vec::new(),
            memory: None,
        };
        let mut store = Store::new(&wasm.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(deadline_ticks(wasm.timeout));
        let instance: Instance = wasm
            .linker
            .instantiate(&mut store, &wasm.module)
            .map_err(|e| format!("instantiate: {e:#}"))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or("the module exports no memory")?;
        store.data_mut().memory = Some(memory);
        let func = |store: &mut Store<HostState>, name: &str| {
            instance
                .get_func(&mut *store, name)
                .ok_or_else(|| format!("the module exports no {name}"))
        };
        // A reactor module's constructors, where it has them.
        if let Some(init) = instance.get_func(&mut store, "_initialize") {
            init.typed::<(), ()>(&store)
                .and_then(|f| f.call(&mut store, ()))
                .map_err(|e| format!("_initialize: {e:#}"))?;
        }
        let input = func(&mut store, "glass_input")?
            .typed::<u32, u32>(&store)
            .map_err(|e| e.to_string())?;
        let setup = func(&mut store, "glass_setup")?
            .typed::<(), u64>(&store)
            .map_err(|e| e.to_string())?;
        let invoke = func(&mut store, "glass_invoke")?
            .typed::<(), u64>(&store)
            .map_err(|e| e.to_string())?;
        let mut sandbox = Sandbox {
            store,
            memory,
            input,
            invoke,
        };
        let message = HostMsg::Setup {
            workload: shared.workload.to_string(),
            tables: shared.tables.clone(),
            indexes: shared.indexes.clone(),
        };
        sandbox.put(&message)?;
        let packed = setup
            .call(&mut sandbox.store, ())
            .map_err(|e| format!("setup: {}", describe(&e)))?;
        match sandbox.answer(packed)? {
            GuestMsg::Ready => Ok(sandbox),
            GuestMsg::Failed { message, .. } => Err(format!("setup: {message}")),
            other => Err(format!("it answered its setup with {other:?}")),
        }
    }

    /// Copies `message` into the module's input buffer.
    fn put(&mut self, message: &HostMsg) -> Result<(), String> {
        let mut bytes = std::mem::take(&mut self.store.data_mut().pending);
        bytes.clear();
        message.encode(&mut bytes);
        let len = u32::try_from(bytes.len()).map_err(|_| "a message over 4 GiB".to_string())?;
        let ptr = self
            .input
            .call(&mut self.store, len)
            .map_err(|e| format!("glass_input: {}", describe(&e)))?;
        self.memory
            .write(&mut self.store, ptr as usize, &bytes)
            .map_err(|e| format!("the module's input buffer is out of its memory: {e}"))?;
        self.store.data_mut().pending = bytes;
        Ok(())
    }

    /// The frame an export returned (`ptr << 32 | len`), after its length prefix, in the
    /// module's memory.
    fn frame_at(&self, packed: u64) -> Result<&[u8], String> {
        frame_in(self.memory.data(&self.store), packed)
    }

    /// Reads the message an export returned out of the module's memory.
    fn answer(&mut self, packed: u64) -> Result<GuestMsg, String> {
        GuestMsg::decode(self.frame_at(packed)?)
            .map_err(|e| format!("it answered with a malformed message: {e}"))
    }

    /// As [`Sandbox::answer`], a `Returned`'s writes run with `run` as they are decoded
    /// ([`decode_running_writes`]).
    fn answer_running_writes(
        &mut self,
        packed: u64,
        mut run: impl FnMut(&Op, &mut OpScratch) -> TxResult<()>,
    ) -> Result<(GuestMsg, Option<TxError>), String> {
        let (memory, state) = self.memory.data_and_store_mut(&mut self.store);
        let scratch = &mut state.scratch;
        decode_running_writes(frame_in(memory, packed)?, &mut state.spare, |op| {
            run(op, scratch)
        })
        .map_err(|e| format!("it answered with a malformed message: {e}"))
    }

    /// One call. `Ok` carries the procedure's own outcome; `Err` says why the sandbox must go.
    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        shared: &Shared,
        wasm: &Wasm,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
        tracer: &mut Tracer,
    ) -> Result<TxResult<()>, String> {
        let start = tracer.start();
        // The time limit counts from here: copying the invocation in is part of the call.
        self.store.set_epoch_deadline(deadline_ticks(wasm.timeout));
        self.put(&HostMsg::Invoke {
            txn: txn as u16,
            args: args.to_vec(),
            timed: tracer.on(),
        })?;
        let mut call = Call {
            tx,
            shared,
            engine_ns: 0,
            timing: tracer.on(),
            failed_op: None,
        };
        // SAFETY: the pointer is used only by `op` during `invoke` below, while `call` lives,
        // and is cleared before `call` goes out of scope; the lifetime is erased only to store
        // it in the store's data.
        self.store.data_mut().call = (&mut call as *mut Call<'_>).cast::<Call<'static>>();
        self.store.set_epoch_deadline(deadline_ticks(wasm.timeout));
        let ran = self.invoke.call(&mut self.store, ());
        self.store.data_mut().call = std::ptr::null_mut();
        let packed = ran.map_err(|e| describe_with_limit(&e, wasm.timeout))?;
        let (mut engine_ns, failed_op, tx) = (call.engine_ns, call.failed_op, call.tx);
        // A `Returned`'s writes run as they are read out of the module's memory (unless an
        // operation already failed, which dooms the call).
        let (reply, failed_write) = self.answer_running_writes(packed, |op, scratch| {
            if failed_op.is_some() {
                return Ok(());
            }
            let t = call.timing.then(Instant::now);
            let result = crate::handler::run_op(tx, shared, op, scratch);
            if let Some(t) = t {
                engine_ns += t.elapsed().as_nanos() as u64;
            }
            check_returned_write(op, &result?)
        })?;
        match reply {
            end @ (GuestMsg::Returned { .. } | GuestMsg::Failed { .. }) => Ok(finish_call(
                end,
                failed_op.or(failed_write),
                out,
                tracer,
                start,
                engine_ns,
                // Its writes ran above, as they were decoded: none are left for this.
                |op| crate::handler::run_op(tx, shared, op, &mut OpScratch::default()),
            )),
            other => Err(format!("it ended a call with {other:?}")),
        }
    }
}

fn deadline_ticks(timeout: Duration) -> u64 {
    (timeout.as_nanos() / TICK.as_nanos()) as u64 + 1
}

/// A trap or host error, in words.
fn describe(e: &wasmtime::Error) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::MemoryOutOfBounds) => {
            "a memory access outside its sandbox (trap: out-of-bounds memory access)".to_string()
        }
        Some(Trap::UnreachableCodeReached) => {
            "an abort (trap: unreachable: a panic, an abort call or a failed allocation)"
                .to_string()
        }
        Some(Trap::StackOverflow) => "a stack overflow (trap)".to_string(),
        Some(trap) => format!("a trap: {trap}"),
        None => format!("{e:#}"),
    }
}

fn describe_with_limit(e: &wasmtime::Error, timeout: Duration) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            format!("ran past its {} ms limit; interrupted", timeout.as_millis())
        }
        _ => describe(e),
    }
}

/// The last line the module wrote to stderr, as ` (it said: ...)`, or nothing.
fn last_words(store: &Store<HostState>) -> String {
    crate::isolation::said(&String::from_utf8_lossy(&store.data().stderr))
}

/// The frame at `packed` (`ptr << 32 | len`, as an export returns it) in the module's
/// `memory`, after its length prefix.
fn frame_in(memory: &[u8], packed: u64) -> Result<&[u8], String> {
    let (ptr, len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
    let bytes = memory
        .get(ptr..ptr.saturating_add(len))
        .ok_or_else(|| format!("it answered at {ptr}+{len}, outside its memory"))?;
    if len < HEADER_LEN {
        return Err(format!("it answered with {len} bytes"));
    }
    Ok(&bytes[HEADER_LEN..])
}

/// The module's linear memory, from inside an import.
fn memory_of(caller: &mut Caller<'_, HostState>) -> wasmtime::Result<Memory> {
    if let Some(memory) = caller.data().memory {
        return Ok(memory);
    }
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Ok(m),
        _ => Err(wasmtime::Error::msg("the module exports no memory")),
    }
}

/// `glass.op(ptr, len, room, room_len) -> len`: runs the `Ops` frame at `ptr` on the call's
/// transaction; writes the answer at `room` where it fits in `room_len` bytes, else keeps it
/// for `take`, and returns its length.
fn op(
    mut caller: Caller<'_, HostState>,
    ptr: u32,
    len: u32,
    room: u32,
    room_len: u32,
) -> wasmtime::Result<u32> {
    let memory = memory_of(&mut caller)?;
    let call = caller.data().call;
    if call.is_null() {
        return Err(wasmtime::Error::msg("it ran an operation outside a call"));
    }
    // SAFETY: set by `Sandbox::call` for the duration of `glass_invoke`, on this thread.
    let call = unsafe { &mut *call };
    // The module's memory and the host's state at once: the frame is read where the module
    // wrote it, and the answer written back, with the host's lists borrowed beside it.
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let HostState {
        pending,
        spare,
        scratch,
        ..
    } = state;
    pending.clear();
    let (ptr, len) = (ptr as usize, len as usize);
    // The operations run as they are decoded straight out of the module's memory, and the
    // answer is encoded as each returns.
    let answered = match data.get(ptr..ptr.saturating_add(len)) {
        None => Err(format!("an operation at {ptr}+{len}, outside its memory")),
        Some(_) if len < HEADER_LEN => Err("an operation shorter than a frame".to_string()),
        Some(frame) => match &call.failed_op {
            Some(e) => {
                failed_reply(e).encode(pending);
                Ok(None)
            }
            None => {
                // A read's answer is encoded inside the engine's read (no row of values
                // built): its encoding counts as query execution.
                answer_ops_with(&frame[HEADER_LEN..], spare, pending, |op, out| {
                    let t = call.timing.then(Instant::now);
                    let ran = crate::handler::answer_op(call.tx, call.shared, op, scratch, out);
                    if let Some(t) = t {
                        call.engine_ns += t.elapsed().as_nanos() as u64;
                    }
                    ran
                })
            }
        },
    };
    match answered {
        Ok(None) => {}
        Ok(Some(e)) => call.failed_op = Some(e),
        Err(why) => return Err(wasmtime::Error::msg(format!("it passed {why}"))),
    }
    let answer_len = pending.len();
    if answer_len <= room_len as usize {
        let room = room as usize;
        data.get_mut(room..room + answer_len)
            .ok_or_else(|| {
                wasmtime::Error::msg(format!(
                    "its answer room at {room}+{answer_len} is outside its memory"
                ))
            })?
            .copy_from_slice(pending);
    }
    Ok(answer_len as u32)
}

/// `glass.take(ptr, len)`: copies the answer to the last `op`, which did not fit its room, to
/// `ptr`.
fn take(mut caller: Caller<'_, HostState>, ptr: u32, len: u32) -> wasmtime::Result<()> {
    let memory = memory_of(&mut caller)?;
    let pending = std::mem::take(&mut caller.data_mut().pending);
    if len as usize != pending.len() {
        return Err(wasmtime::Error::msg(format!(
            "it took {len} bytes of a {}-byte answer",
            pending.len()
        )));
    }
    let wrote = memory.write(&mut caller, ptr as usize, &pending);
    caller.data_mut().pending = pending;
    wrote.map_err(|e| wasmtime::Error::msg(format!("its answer buffer is outside its memory: {e}")))
}

// WASI's errno values the imports return.
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;
const ERRNO_INVAL: i32 = 28;

/// The imports: `glass.op` and `glass.take`, the WASI calls Rust's standard library makes to
/// start and to report (clocks, random bytes, an empty environment, writes to stdout and
/// stderr kept for error messages, no preopened directories), and a trap for anything else.
fn linker(engine: &Engine, module: &Module) -> Result<Linker<HostState>, String> {
    let mut linker: Linker<HostState> = Linker::new(engine);
    let e = |e: wasmtime::Error| e.to_string();
    linker.func_wrap("glass", "op", op).map_err(e)?;
    linker.func_wrap("glass", "take", take).map_err(e)?;
    let wasi = "wasi_snapshot_preview1";
    let started = Instant::now();
    linker
        .func_wrap(
            wasi,
            "clock_time_get",
            move |mut caller: Caller<'_, HostState>, id: i32, _precision: i64, at: i32| {
                let ns = match id {
                    // realtime
                    0 => std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64),
                    // monotonic, process and thread CPU time: the host's monotonic clock
                    _ => started.elapsed().as_nanos() as u64,
                };
                let memory = memory_of(&mut caller)?;
                Ok(
                    match memory.write(&mut caller, at as u32 as usize, &ns.to_le_bytes()) {
                        Ok(()) => ERRNO_SUCCESS,
                        Err(_) => ERRNO_INVAL,
                    },
                )
            },
        )
        .map_err(e)?;
    linker
        .func_wrap(
            wasi,
            "random_get",
            |mut caller: Caller<'_, HostState>, at: i32, len: i32| {
                // Hash-map seeds; nothing a procedure does depends on them being secret.
                let mut x = Instant::now().elapsed().as_nanos() as u64 ^ 0x9e37_79b9_7f4a_7c15;
                let bytes: Vec<u8> = (0..len.max(0))
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                let memory = memory_of(&mut caller)?;
                Ok(
                    match memory.write(&mut caller, at as u32 as usize, &bytes) {
                        Ok(()) => ERRNO_SUCCESS,
                        Err(_) => ERRNO_INVAL,
                    },
                )
            },
        )
        .map_err(e)?;
    linker
        .func_wrap(
            wasi,
            "environ_sizes_get",
            |mut caller: Caller<'_, HostState>, count: i32, size: i32| {
                let memory = memory_of(&mut caller)?;
                let zero = 0u32.to_le_bytes();
                let ok = memory
                    .write(&mut caller, count as u32 as usize, &zero)
                    .is_ok()
                    && memory
                        .write(&mut caller, size as u32 as usize, &zero)
                        .is_ok();
                Ok(if ok { ERRNO_SUCCESS } else { ERRNO_INVAL })
            },
        )
        .map_err(e)?;
    linker
        .func_wrap(wasi, "environ_get", |_: i32, _: i32| ERRNO_SUCCESS)
        .map_err(e)?;
    linker
        .func_wrap(wasi, "fd_prestat_get", |_: i32, _: i32| ERRNO_BADF)
        .map_err(e)?;
    linker
        .func_wrap(wasi, "fd_prestat_dir_name", |_: i32, _: i32, _: i32| {
            ERRNO_BADF
        })
        .map_err(e)?;
    linker
        .func_wrap(wasi, "sched_yield", || ERRNO_SUCCESS)
        .map_err(e)?;
    linker
        .func_wrap(
            wasi,
            "fd_write",
            |mut caller: Caller<'_, HostState>, fd: i32, iovs: i32, n: i32, written: i32| {
                if fd != 1 && fd != 2 {
                    return Ok(ERRNO_BADF);
                }
                let memory = memory_of(&mut caller)?;
                let mut text = Vec::new();
                {
                    let data = memory.data(&caller);
                    for i in 0..n.max(0) as usize {
                        let at = iovs as u32 as usize + 8 * i;
                        let Some(iov) = data.get(at..at + 8) else {
                            return Ok(ERRNO_INVAL);
                        };
                        let ptr = u32::from_le_bytes(iov[..4].try_into().unwrap()) as usize;
                        let len = u32::from_le_bytes(iov[4..].try_into().unwrap()) as usize;
                        let Some(bytes) = data.get(ptr..ptr.saturating_add(len)) else {
                            return Ok(ERRNO_INVAL);
                        };
                        text.extend_from_slice(bytes);
                    }
                }
                let total = text.len() as u32;
                let kept = &mut caller.data_mut().stderr;
                kept.extend_from_slice(&text);
                if kept.len() > STDERR_KEPT {
                    kept.drain(..kept.len() - STDERR_KEPT);
                }
                Ok(
                    match memory.write(&mut caller, written as u32 as usize, &total.to_le_bytes()) {
                        Ok(()) => ERRNO_SUCCESS,
                        Err(_) => ERRNO_INVAL,
                    },
                )
            },
        )
        .map_err(e)?;
    linker
        .func_wrap(wasi, "proc_exit", |code: i32| -> wasmtime::Result<()> {
            Err(wasmtime::Error::msg(format!(
                "it exited with status {code}"
            )))
        })
        .map_err(e)?;
    linker.define_unknown_imports_as_traps(module).map_err(e)?;
    Ok(linker)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(path: &Path) -> Result<Wasm, String> {
        Wasm::load(path, Duration::from_secs(1), 16, false)
    }

    #[test]
    fn a_file_that_is_not_a_module_is_named_and_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("passwd");
        std::fs::write(&text, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        let err = load(&text).err().expect("a text file is refused");
        assert!(err.contains("is not a WebAssembly module"), "{err}");
        assert!(err.contains("passwd") && err.contains("\"root\""), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");

        let empty = dir.path().join("empty.wasm");
        std::fs::write(&empty, b"").unwrap();
        let err = load(&empty).err().expect("an empty file is refused");
        assert!(err.contains("is not a WebAssembly module"), "{err}");

        let missing = dir.path().join("missing.wasm");
        let err = load(&missing).err().expect("no file, no module");
        assert!(err.contains("no WebAssembly module at"), "{err}");
    }

    #[test]
    fn a_truncated_module_is_refused_by_the_compiler_and_an_empty_one_loads() {
        let dir = tempfile::tempdir().unwrap();
        // The magic and version of the binary format, then a section that ends too soon.
        let header = b"\0asm\x01\0\0\0";
        let cut = dir.path().join("cut.wasm");
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&[1, 10, 1]);
        std::fs::write(&cut, &bytes).unwrap();
        let err = load(&cut).err().expect("a truncated module is refused");
        assert!(
            err.starts_with("compile ") && err.contains("cut.wasm"),
            "{err}"
        );

        // A module of no sections is a module: its missing exports are found when a worker
        // instantiates it.
        let bare = dir.path().join("bare.wasm");
        std::fs::write(&bare, header).unwrap();
        assert!(load(&bare).is_ok());
    }
}
