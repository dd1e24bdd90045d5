//! A disk that refuses a write: `glass load` and `glass bench --db` run under a file-size limit
//! (`ulimit -f`, with `SIGXFSZ` ignored so that a write past it fails with `EFBIG` instead of
//! killing the process), which refuses the write that would grow a file past it as a full disk
//! refuses it with `ENOSPC`. Each must end with an error naming the write and its cause, never
//! a panic, and leave a database that `glass check --ack-log` then finds intact, consistent and
//! holding every acknowledged durable commit. (A full disk itself, `ENOSPC` from a filled
//! tmpfs, takes the same paths; mounting one needs privileges a test does not have.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{path, text};

/// Runs the built `glass` with `args`, every file it writes limited to `limit_kib` KiB.
fn glass_limited(limit_kib: u64, args: &[&str]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(r#"trap "" XFSZ; ulimit -f "$1" || exit 99; shift; exec "$@""#)
        .arg("bash")
        .arg(limit_kib.to_string())
        .arg(env!("CARGO_BIN_EXE_glass"))
        .args(args)
        .output()
        .expect("run glass under a file-size limit")
}

fn output(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// The largest file's size in `dir`, in KiB.
fn largest_kib(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap()
        / 1024
}

/// The refusal reached the user as an error naming the log's write and the system's cause.
fn assert_refused(out: &Output, what: &str) {
    let all = output(out);
    assert_ne!(
        out.status.code(),
        Some(99),
        "bash could not set the limit: {all}"
    );
    assert_eq!(out.status.code(), Some(1), "{what}: {all}");
    assert!(!all.contains("panicked"), "{what} panicked: {all}");
    assert!(all.contains("File too large"), "{what}: no cause in {all}");
    assert!(all.contains("error: "), "{what}: no error line in {all}");
}

fn load_tpcb(db: &Path) {
    let out = common::glass(&["load", "tpcb", "--db", path(db), "--scale", "1"]);
    assert!(out.status.success(), "load: {}", output(&out));
}

/// `glass check tpcb --ack-log`: every condition holds and no acknowledged durable commit
/// is missing; returns the check's output.
fn check(db: &Path, acks: &Path) -> String {
    let out = common::glass(&["check", "tpcb", "--db", path(db), "--ack-log", path(acks)]);
    let all = output(&out);
    assert!(out.status.success(), "check: {all}");
    assert!(all.contains("3 of 3 conditions hold"), "{all}");
    all
}

/// The acknowledged durable commits the check looked up.
fn durable_receipts(check: &str) -> u64 {
    check
        .split("; ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no ack log summary in {check}"))
}

/// Loads a TPC-B database and runs `glass bench tpcb --db … --ack-log …` with `flags` for
/// up to 600 s, its files limited to `room_mib` MiB past the largest one after the load.
/// Returns the run's output, and the directory, database and ack log it left.
fn limited_run(room_mib: u64, flags: &[&str]) -> (Output, tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (db, acks) = (dir.path().join("db"), dir.path().join("acks"));
    load_tpcb(&db);
    let mut args = vec!["bench", "tpcb", "--db", path(&db), "--ack-log", path(&acks)];
    args.extend([
        "--threads",
        "2",
        "--duration",
        "600",
        "--warmup",
        "0",
        "--quiet",
    ]);
    args.extend(flags);
    let out = glass_limited(largest_kib(&db) + room_mib * 1024, &args);
    (out, dir, db, acks)
}

/// A durable run whose log can grow by 24 MiB past the largest file: the open preallocates
/// 16 MiB of it, the run fills it and the next write is refused.
#[test]
fn a_durable_run_whose_log_write_is_refused_ends_with_the_cause_and_keeps_every_acknowledged_commit(
) {
    let (out, _dir, db, acks) = limited_run(24, &["--durable"]);
    assert_refused(&out, "durable bench");
    assert!(output(&out).contains("writing the log"), "{}", output(&out));
    let check = check(&db, &acks);
    assert!(check.contains(", 0 missing"), "{check}");
    assert!(
        durable_receipts(&check) > 0,
        "the run committed nothing first: {check}"
    );
}

/// The same without a force at commit: the run may lose the commits its log had not yet
/// written, as a kill would, and nothing else.
#[test]
fn a_run_without_forces_whose_log_write_is_refused_loses_only_unforced_commits() {
    let (out, _dir, db, acks) = limited_run(20, &["--pool-mib", "2"]);
    assert_refused(&out, "bench without forces");
    let check = check(&db, &acks);
    assert!(check.contains("non-durable receipts checked"), "{check}");
    // Refused long before the 600 s: the run stopped at the refusal, not at its end.
    assert!(!check.contains(" 0 non-durable receipts"), "{check}");
}

/// An open whose log cannot be preallocated, and a load whose writes are refused part way.
#[test]
fn an_open_and_a_load_whose_writes_are_refused_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    load_tpcb(&db);
    let before = std::fs::read(db.join("pages.db")).unwrap();
    // Room for less than the 16 MiB the open preallocates.
    let out = glass_limited(
        largest_kib(&db) + 1024,
        &[
            "bench",
            "tpcb",
            "--db",
            path(&db),
            "--duration",
            "1",
            "--quiet",
        ],
    );
    assert_refused(&out, "open");
    assert!(output(&out).contains("open database"), "{}", output(&out));
    // Nothing was lost by the refused open: the pages are as loaded and the database opens.
    assert_eq!(std::fs::read(db.join("pages.db")).unwrap(), before);
    let out = common::glass(&["check", "tpcb", "--db", path(&db)]);
    assert!(
        out.status.success(),
        "check after the refused open: {}",
        output(&out)
    );

    let other = dir.path().join("other");
    let out = glass_limited(
        4 * 1024,
        &["load", "tpcb", "--db", path(&other), "--scale", "1"],
    );
    assert_refused(&out, "load");
}
