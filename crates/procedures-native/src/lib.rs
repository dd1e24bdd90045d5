//! The workloads' stored procedures as a shared library, loaded into the server with `dlopen`
//! by `glass serve --isolation none` (the 2025 paper's "no isolation": user code in the
//! engine's address space, called directly).
//!
//! ```sh
//! cargo build --release -p procedures-native   # target/release/libprocedures_native.so
//! ```
//!
//! The library exports one C symbol, [`glass_native_procedures`], which opens a workload's
//! procedures and hands the server a Rust trait object; from then on the server calls the
//! procedures, and they call the engine, through raw pointers to each other's code and data.
//! **Nothing checks that the two sides agree**: the library must be built by the same compiler
//! from the same source as the server, or the layouts they pass each other differ and the
//! server's memory is corrupted. And nothing stands between a procedure and the server: a
//! crash, a wild write or an endless loop in the library is one in the server. That is the
//! level's point, and what the containment tests show.

use engine::Connection;
use workloads::{Procedures, WorkloadOptions};

/// Opens `workload`'s procedures (the UTF-8 name at `name`, `len` bytes) against `conn`, and
/// writes them to `out`; on failure writes why to `error` and returns false.
///
/// # Safety
///
/// `name` must point to `len` readable bytes; `conn`, `out` and `error` must be valid, and
/// the caller must have been built by the same compiler from the same source as this library
/// (the values cross as Rust types). The procedures written to `out` must be dropped before
/// the library is unloaded.
#[no_mangle]
pub unsafe extern "C" fn glass_native_procedures(
    name: *const u8,
    len: usize,
    conn: *const &dyn Connection,
    out: *mut Option<Box<dyn Procedures>>,
    error: *mut String,
) -> bool {
    // SAFETY: the caller's contract above.
    let (name, conn, out, error) = unsafe {
        (
            std::str::from_utf8(std::slice::from_raw_parts(name, len)),
            &*conn,
            &mut *out,
            &mut *error,
        )
    };
    let opened = name
        .map_err(|e| format!("the workload's name is not UTF-8: {e}"))
        .and_then(|name| workloads::by_name(name, &WorkloadOptions::default()))
        .and_then(|w| w.procedures(*conn).map_err(|e| e.to_string()));
    match opened {
        Ok(p) => {
            *out = Some(p);
            true
        }
        Err(e) => {
            *error = e;
            false
        }
    }
}
