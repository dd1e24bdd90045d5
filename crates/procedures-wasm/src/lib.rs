//! The workloads' stored procedures as a WebAssembly module: the same Rust source the server
//! runs at `--isolation rust`, compiled to `wasm32-wasip1`, and run by `glass serve --isolation
//! wasm` in an in-process sandbox (wasmtime; the host side is `server::wasm`).
//!
//! ```sh
//! rustup target add wasm32-wasip1
//! cargo build --release -p procedures-wasm --target wasm32-wasip1
//! # target/wasm32-wasip1/release/procedures_wasm.wasm
//! ```
//!
//! The module speaks the procedure boundary's messages (`protocol::guest`), as a procedure
//! process does, through its linear memory instead of a channel:
//!
//! | export | what it does |
//! |---|---|
//! | `glass_input(len) -> ptr` | room for the host's next message, `len` bytes |
//! | `glass_setup() -> ptr << 32 \| len` | opens the workload's procedures from the `Setup` frame in the input buffer; answers `Ready` or `Failed` |
//! | `glass_invoke() -> ptr << 32 \| len` | runs the `Invoke` frame in the input buffer; answers `Returned` or `Failed` |
//!
//! | import (`glass`) | what it does |
//! |---|---|
//! | `op(ptr, len, room, room_len) -> len` | the host runs the `Ops` frame at `ptr` on the call's transaction and returns the length of its answer (`Results` or `OpFailed`), which it has written at `room` if it fits in `room_len` bytes |
//! | `take(ptr, len)` | the host copies an answer that did not fit to `ptr` |
//!
//! The module's engine code (the workloads crate depends on it) is compiled in but never
//! called: a procedure's `Tx` here is `protocol::guest`'s, every operation an `op` call. The
//! host gives the module no files, no sockets and no environment (WASI calls it does not
//! define trap), bounds its memory and interrupts it at the time limit.

pub mod size_classes;

/// The module's allocator: small blocks by size class ([`size_classes`]) over Talc, not the
/// Rust standard library's default for WASI (wasi-libc's dlmalloc, reached through three
/// wrapping calls), whose allocations and frees were half of the module's instructions on a
/// Voter call (see `docs/performance.md`).
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: size_classes::SizeClasses<talc::wasm::WasmDynamicTalc> =
    size_classes::SizeClasses::new(talc::wasm::new_wasm_dynamic_allocator());

#[cfg(target_family = "wasm")]
mod module {
    use std::cell::RefCell;

    use protocol::deferred::Deferred;
    use protocol::guest::{run_invocation, Catalog, Exchange, GuestMsg, HostMsg};
    use protocol::{ErrorClass, HEADER_LEN};
    use workloads::{Procedures, WorkloadOptions};

    #[link(wasm_import_module = "glass")]
    extern "C" {
        fn op(ptr: *const u8, len: usize, room: *mut u8, room_len: usize) -> usize;
        fn take(ptr: *mut u8, len: usize);
    }

    /// The room offered for the host's answers: most fit, so most operations are one call out
    /// of the module, not two.
    const ANSWER_ROOM: usize = 4096;

    #[derive(Default)]
    struct State {
        procedures: Option<Box<dyn Procedures>>,
        /// Room for the host's messages (zeroed once, as it grows), and the length of the last.
        input: Vec<u8>,
        input_len: usize,
        /// The module's last answer, read by the host after the export returns.
        reply: Vec<u8>,
    }

    thread_local! {
        static STATE: RefCell<State> = RefCell::new(State::default());
        /// The exchange's buffers, kept from call to call.
        static HOST: RefCell<Host> = const { RefCell::new(Host { out: Vec::new(), back: Vec::new() }) };
        /// A call's deferred writes and hinted reads, kept from call to call.
        static DEFERRED: RefCell<Deferred> = RefCell::new(Deferred::default());
    }

    /// The host's end of the boundary, seen from inside the module.
    struct Host {
        out: Vec<u8>,
        /// Room for the host's answers (zeroed once, as it grows; its length is the room).
        back: Vec<u8>,
    }

    impl Exchange for Host {
        fn exchange(&mut self, message: &GuestMsg) -> Result<Option<HostMsg>, String> {
            self.out.clear();
            message.encode(&mut self.out);
            if self.back.len() < ANSWER_ROOM {
                self.back.resize(ANSWER_ROOM, 0);
            }
            // SAFETY: the host reads `out.len()` bytes at `out`'s pointer and writes at most
            // `back.len()` at `back`'s, both in this module's memory and held for the call.
            let len = unsafe {
                op(
                    self.out.as_ptr(),
                    self.out.len(),
                    self.back.as_mut_ptr(),
                    self.back.len(),
                )
            };
            if len > self.back.len() {
                self.back.resize(len, 0);
                // SAFETY: the host writes exactly `len` bytes at `ptr`, which `back` has.
                unsafe { take(self.back.as_mut_ptr(), len) };
            }
            if len < HEADER_LEN {
                return Err(format!("the host answered with {len} bytes"));
            }
            HostMsg::decode(&self.back[HEADER_LEN..len])
                .map(Some)
                .map_err(|e| e.to_string())
        }
    }

    fn answer(state: &mut State, message: &GuestMsg) -> u64 {
        state.reply.clear();
        message.encode(&mut state.reply);
        ((state.reply.as_ptr() as u64) << 32) | state.reply.len() as u64
    }

    fn failed(message: String) -> GuestMsg {
        GuestMsg::Failed {
            class: ErrorClass::Invalid,
            message,
            busy_ns: 0,
        }
    }

    fn input_message(state: &State) -> Result<HostMsg, String> {
        if state.input_len < HEADER_LEN {
            return Err("the host's message is shorter than a frame header".to_string());
        }
        HostMsg::decode(&state.input[HEADER_LEN..state.input_len]).map_err(|e| e.to_string())
    }

    #[no_mangle]
    pub extern "C" fn glass_input(len: usize) -> *mut u8 {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            if s.input.len() < len {
                s.input.resize(len, 0);
            }
            s.input_len = len;
            s.input.as_mut_ptr()
        })
    }

    #[no_mangle]
    pub extern "C" fn glass_setup() -> u64 {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            let reply = match input_message(&s) {
                Ok(HostMsg::Setup {
                    workload,
                    tables,
                    indexes,
                }) => {
                    // Options decide what is loaded and drawn, not what a procedure does.
                    match workloads::by_name(&workload, &WorkloadOptions::default()).and_then(|w| {
                        w.procedures(&Catalog::new(tables, indexes))
                            .map_err(|e| e.to_string())
                    }) {
                        Ok(p) => {
                            s.procedures = Some(p);
                            GuestMsg::Ready
                        }
                        Err(e) => failed(format!("open the procedures of {workload}: {e}")),
                    }
                }
                Ok(other) => failed(format!("expected Setup, got {other:?}")),
                Err(e) => failed(e),
            };
            answer(&mut s, &reply)
        })
    }

    #[no_mangle]
    pub extern "C" fn glass_invoke() -> u64 {
        // The procedures are taken out of the state for the call, so that nothing borrowed
        // is held while the host runs operations.
        let (message, procedures) = STATE.with(|s| {
            let mut s = s.borrow_mut();
            (input_message(&s), s.procedures.take())
        });
        let reply = match (message, &procedures) {
            (Ok(HostMsg::Invoke { txn, args, timed }), Some(p)) => HOST.with(|host| {
                DEFERRED.with(|deferred| {
                    run_invocation(
                        &mut *host.borrow_mut(),
                        &mut deferred.borrow_mut(),
                        txn,
                        &args,
                        timed,
                        |tx, txn, args, out| p.call(tx, txn, args, out),
                    )
                    .unwrap_or_else(|| failed("the host went away".to_string()))
                })
            }),
            (Ok(HostMsg::Invoke { .. }), None) => failed("invoked before setup".to_string()),
            (Ok(other), _) => failed(format!("expected Invoke, got {other:?}")),
            (Err(e), _) => failed(e),
        };
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.procedures = procedures;
            answer(&mut s, &reply)
        })
    }
}
