//! `--isolation none`: stored procedures from a shared library (`crates/procedures-native`),
//! loaded with `dlopen` (libloading) and called directly, in the engine's address space.
//!
//! The library hands back a Rust trait object through its one C symbol; the server calls it
//! as it calls its own procedures (`--isolation rust`), and the procedures call the engine
//! through the `Tx` trait object they are given: raw pointers both ways, no copy, no check.
//! This is unsafe by design and documented as such: the library must be built by the same
//! compiler from the same source as the server, and whatever it does, the server does.

use std::path::{Path, PathBuf};

use engine::Connection;
use workloads::Procedures;

/// The C symbol the library exports (`procedures_native::glass_native_procedures`).
type OpenFn = unsafe extern "C" fn(
    *const u8,
    usize,
    *const &dyn Connection,
    *mut Option<Box<dyn Procedures>>,
    *mut String,
) -> bool;

/// Loads the library at `path` and opens `workload`'s procedures from it against `conn`. The
/// procedures must be dropped before the library.
pub(crate) fn load(
    path: &Path,
    workload: &str,
    conn: &dyn Connection,
) -> Result<(libloading::Library, Box<dyn Procedures>), String> {
    if !path.is_file() {
        return Err(format!(
            "no shared library of procedures at {}: build it with `cargo build --release -p \
             procedures-native`, or name one with --native-library",
            path.display()
        ));
    }
    // SAFETY: loading runs the library's initialisers, which are Rust's own; the library is
    // Glass's procedures, built from this source (the level's documented contract).
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("load {}: {e}", path.display()))?;
    // SAFETY: the symbol's type is the one `procedures-native` defines.
    let open: libloading::Symbol<'_, OpenFn> =
        unsafe { library.get(b"glass_native_procedures") }
            .map_err(|e| format!("{} has no glass_native_procedures: {e}", path.display()))?;
    let mut procedures: Option<Box<dyn Procedures>> = None;
    let mut error = String::new();
    // SAFETY: every pointer is to a live local; the contract on layouts is the level's.
    let opened = unsafe {
        open(
            workload.as_ptr(),
            workload.len(),
            &conn,
            &mut procedures,
            &mut error,
        )
    };
    match (opened, procedures) {
        (true, Some(p)) => Ok((library, p)),
        (_, p) => {
            drop(p);
            Err(format!(
                "open {workload}'s procedures from the library: {error}"
            ))
        }
    }
}

/// The default library: `libprocedures_native.so` beside the running binary (`cargo build
/// --release -p procedures-native` puts it in `target/release`, beside `glass`).
pub fn default_library(exe: &Path) -> PathBuf {
    exe.parent()
        .unwrap_or(Path::new("."))
        .join("libprocedures_native.so")
}
