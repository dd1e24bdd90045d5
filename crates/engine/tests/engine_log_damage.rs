//! A database whose log is damaged in its middle, or whose directory lost a file, is refused
//! with an error naming the LSN or the file, never opened as if nothing happened:
//! `accept_log_loss` opens the damaged one, cut at the damage, and says what it lost.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use common::*;
use engine::{Database, DbConfig, TxResult};
use storage::Lsn;

const ACCOUNTS: i64 = 200;

fn open_db(dir: &Path, accept_log_loss: bool) -> TxResult<Arc<Database>> {
    Database::open(DbConfig {
        path: Some(dir.to_path_buf()),
        durable: true,
        accept_log_loss,
        ..DbConfig::default()
    })
}

/// A database of `ACCOUNTS` accounts after 50 committed transfers `i → i+1` of 5, left as a
/// crash leaves it; returns the LSN at which the 21st transfer's records begin.
fn crashed_after_transfers(dir: &Path) -> Lsn {
    let db = open_db(dir, false).unwrap();
    let t = load_accounts(&db, ACCOUNTS);
    let mut mark = Lsn::NONE;
    for i in 0..50 {
        if i == 20 {
            mark = db.log().unwrap().end_lsn();
        }
        db.run(|tx| transfer(tx, &t, i, i + 1, 5)).unwrap();
    }
    drop(db); // no close: no checkpoint, recovery runs on the next open
    mark
}

fn flip_bits(path: &Path, at: u64, mask: u8) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ mask], at).unwrap();
}

#[test]
fn flipped_bits_before_committed_transactions_refuse_the_open_naming_the_lsn() {
    let dir = tempfile::tempdir().unwrap();
    let mark = crashed_after_transfers(dir.path());
    let log = dir.path().join("wal.log");
    flip_bits(&log, mark.0 + 12, 0x21);
    let len = std::fs::metadata(&log).unwrap().len();
    let err = open_db(dir.path(), false)
        .err()
        .expect("a damaged log opened");
    let message = err.to_string();
    assert!(
        message.contains(&format!("log record at {mark}")),
        "{message}"
    );
    assert!(message.contains("--accept-log-loss"), "{message}");
    assert!(!message.contains("write-ahead rule"), "{message}");
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        len,
        "the log was cut"
    );

    // Accepting the loss: the 30 transfers from the damage on are gone, the rest are there.
    let db = open_db(dir.path(), true).unwrap();
    let loss = *db.log_loss().expect("the loss is reported");
    assert_eq!(loss.lsn, mark);
    assert!(loss.records > 30 * 3, "{loss}");
    assert_eq!(loss.bytes, len - mark.0);
    let t = db.table("accounts").unwrap();
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    assert_eq!(balance(&db, 0), 95);
    assert_eq!(balance(&db, 20), 105, "transfers before the damage survive");
    assert_eq!(
        balance(&db, 50),
        100,
        "transfers after the damage are dropped"
    );
    db.close().unwrap();
    // Cut, the log opens without the flag again.
    let db = open_db(dir.path(), false).unwrap();
    assert!(db.log_loss().is_none());
    assert_eq!(balance(&db, 20), 105);
}

#[test]
fn a_torn_tail_stays_quiet() {
    let dir = tempfile::tempdir().unwrap();
    crashed_after_transfers(dir.path());
    let log = dir.path().join("wal.log");
    let len = std::fs::metadata(&log).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(len - 5).unwrap();
    file.write_all_at(&[0x5A; 300], len - 5).unwrap();
    drop(file);
    let db = open_db(dir.path(), false).unwrap();
    assert!(db.log_loss().is_none());
    assert_eq!(balance(&db, 48), 100, "only the last transfer was torn off");
    assert_eq!(balance(&db, 49), 105);
}

/// A closed database with one table.
fn closed_database(dir: &Path) {
    let db = open_db(dir, false).unwrap();
    load_accounts(&db, 10);
    db.close().unwrap();
}

fn open_error(dir: &Path) -> String {
    match open_db(dir, false) {
        Ok(_) => panic!("a database missing a file opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_page_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    closed_database(dir.path());
    std::fs::remove_file(dir.path().join("pages.db")).unwrap();
    let message = open_error(dir.path());
    assert!(message.contains("pages.db is missing"), "{message}");
    assert!(
        !dir.path().join("pages.db").exists(),
        "an empty page file was created"
    );
}

#[test]
fn a_missing_log_is_named() {
    let dir = tempfile::tempdir().unwrap();
    closed_database(dir.path());
    std::fs::remove_file(dir.path().join("wal.log")).unwrap();
    let message = open_error(dir.path());
    assert!(message.contains("wal.log is missing"), "{message}");
    assert!(
        !dir.path().join("wal.log").exists(),
        "an empty log was created"
    );
}

#[test]
fn a_missing_catalog_is_named() {
    let dir = tempfile::tempdir().unwrap();
    closed_database(dir.path());
    std::fs::remove_file(dir.path().join("catalog.json")).unwrap();
    let message = open_error(dir.path());
    assert!(message.contains("catalog.json is missing"), "{message}");
    assert!(message.contains("pages.db"), "{message}");
    assert!(
        !dir.path().join("catalog.json").exists(),
        "a new catalog was written"
    );
}

#[test]
fn a_new_or_empty_database_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    // New, then reopened without a table.
    open_db(dir.path(), false).unwrap().close().unwrap();
    let db = open_db(dir.path(), false).unwrap();
    let t = load_accounts(&db, 10);
    assert_eq!(total(&db, &t), 1000);
    db.close().unwrap();
    let db = open_db(dir.path(), false).unwrap();
    assert_eq!(total(&db, &db.table("accounts").unwrap()), 1000);
}

#[test]
fn a_foreign_log_is_an_error_opening_the_log() {
    let dir = tempfile::tempdir().unwrap();
    closed_database(dir.path());
    std::fs::write(
        dir.path().join("wal.log"),
        b"not a log at all, as you can see",
    )
    .unwrap();
    let message = open_error(dir.path());
    assert!(message.contains("opening the log"), "{message}");
    assert!(!message.contains("write-ahead rule"), "{message}");
}
