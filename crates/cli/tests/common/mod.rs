//! What the command-line tests share: running the built `glass` binary and reading its output.
// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built `glass` binary with `args` and waits for it.
pub fn glass(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(args)
        .output()
        .expect("run the glass binary")
}

/// A finished command's stdout then stderr, as text (lossily).
pub fn output_text(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// Output bytes as text (lossily).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temporary path as the `&str` an argument list needs.
pub fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// The JSON a command wrote to `path` (`--json`).
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
