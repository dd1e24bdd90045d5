//! Crash recovery: a write-heavy workload with durable logging runs in a child process that is
//! killed with SIGKILL at random points; after each kill the database is reopened (ARIES
//! recovery) and must hold every acknowledged commit and no effect of an unfinished one.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use engine::{Database, DbConfig, Fetch, Tx, Value};
use rand::{Rng, SeedableRng};

const ACCOUNTS: i64 = 200;
const CHILD_ENV: &str = "GLASS_CRASH_CHILD_DIR";

fn durable_config(dir: &Path) -> DbConfig {
    DbConfig {
        path: Some(dir.to_path_buf()),
        durable: true,
        pool_mib: 1, // far smaller than the data: pages are evicted and written back mid-run
        threads: 2,
        checkpoint_bytes: 256 << 10, // fuzzy checkpoints mid-run: recovery starts from one
        ..DbConfig::default()
    }
}

fn open_durable(dir: &Path) -> Arc<Database> {
    Database::open(durable_config(dir)).unwrap()
}

/// The child: transfers money and records a receipt per transfer, printing `ACK seq` once the
/// commit returned. Every 7th transaction is a big one (many updates) that it aborts, and
/// some big ones are left running when the kill comes.
#[test]
#[ignore = "run by crash_recovery_keeps_every_acknowledged_commit as its child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    // The child's checkpoints are taken in the background (the kill falls during them
    // too), and in every other round two page cleaners write pages back beside the misses;
    // its parent opens the database again only once the child is dead.
    let cleaners: usize = std::env::var("GLASS_CRASH_CLEANERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let db = Database::open(DbConfig {
        background_checkpoints: true,
        page_cleaners: cleaners,
        ..durable_config(Path::new(&dir))
    })
    .unwrap();
    let t = db.table("accounts").unwrap();
    let r = db.table("receipts").unwrap();
    let start: i64 = std::env::var("GLASS_CRASH_SEQ").unwrap().parse().unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(start as u64);
    for seq in start.. {
        let from = rng.gen_range(0..ACCOUNTS);
        let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
        let mut tx = db.begin().unwrap();
        transfer(&mut tx, &t, from, to, 3).unwrap();
        if seq % 7 == 0 {
            // A wide change, then either rolled back or left hanging for the kill.
            for id in 0..ACCOUNTS {
                tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(-1_000_000))])
                    .unwrap();
            }
            if seq % 2 == 0 {
                tx.abort().unwrap();
                continue;
            }
            for id in 0..ACCOUNTS {
                tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(100))])
                    .unwrap();
            }
            tx.abort().unwrap();
            continue;
        }
        tx.insert(&r, &[Value::Int(seq), Value::Int(3)]).unwrap();
        tx.commit().unwrap();
        println!("ACK {seq}");
    }
}

/// Reopens the database after a kill and checks it; returns the next receipt number to use
/// and how many heaps the open took the checkpoint's saved free-space map for.
fn verify(dir: &Path, acked: &[i64]) -> (i64, u64) {
    let db = open_durable(dir);
    let saved = db.recovery().unwrap().heaps_saved;
    let t = db.table("accounts").unwrap();
    let r = db.table("receipts").unwrap();
    assert_eq!(
        total(&db, &t),
        ACCOUNTS * 100,
        "a transfer is half there after recovery"
    );
    let receipts = dump(&db, &r);
    let present: std::collections::HashSet<i64> = receipts
        .iter()
        .map(|row| row[0].as_int().unwrap())
        .collect();
    for seq in acked {
        assert!(present.contains(seq), "acknowledged commit {seq} lost");
    }
    for id in 0..ACCOUNTS {
        let row = db
            .run(|tx| tx.get(&t, &[Value::Int(id)], Fetch::Cols(&[2]), false))
            .unwrap()
            .unwrap();
        assert!(
            row[0].as_int().unwrap() > -100_000,
            "an aborted wide update survived"
        );
    }
    db.check_invariants().unwrap();
    let next = present.iter().max().copied().unwrap_or(0) + 1;
    db.close().unwrap();
    (next, saved)
}

#[test]
fn crash_recovery_keeps_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open_durable(dir.path());
        load_accounts(&db, ACCOUNTS);
        db.create_table(receipts_schema()).unwrap();
        db.close().unwrap();
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let mut acked_all = Vec::new();
    let mut seq = 1;
    let mut with_saved_maps = 0;
    let rounds = 8;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .env("GLASS_CRASH_SEQ", seq.to_string())
            .env(
                "GLASS_CRASH_CLEANERS",
                if round % 2 == 1 { "2" } else { "0" },
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| l.strip_prefix("ACK ").and_then(|s| s.parse::<i64>().ok()))
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..700)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked = reader.join().unwrap();
        acked_all.extend(acked.iter().copied());
        let (next, saved) = verify(dir.path(), &acked_all);
        seq = next.max(seq + 1);
        with_saved_maps += u64::from(saved > 0);
        eprintln!("round {round}: {} acknowledged so far", acked_all.len());
    }
    assert!(
        !acked_all.is_empty(),
        "the child never committed: the test exercised nothing"
    );
    // The opens after the kills took the maps the last checkpoint saved (a kill between the
    // map's write and the master record's leaves them rebuilt by a walk instead).
    assert!(with_saved_maps > 0, "no open took a saved free-space map");
}

/// An open takes each heap's free-space map as the checkpoint it recovers from saved it, and
/// reads only the pages the log changed since: none after a clean close, those the inserts
/// and deletes since touched after a crash; without the file, or with a damaged one, it reads
/// every heap page as before. Each time the map is exact (`check_invariants`, and `glass
/// check`'s comparison of map and pages).
#[test]
fn an_open_takes_the_free_space_maps_the_checkpoint_saved() {
    let dir = tempfile::tempdir().unwrap();
    // Only the sharp checkpoints of each open and close: the changes between stay after the
    // last one.
    let open_durable = |dir: &Path| {
        Database::open(DbConfig {
            checkpoint_bytes: u64::MAX,
            ..durable_config(dir)
        })
        .unwrap()
    };
    let db = open_durable(dir.path());
    load_accounts(&db, ACCOUNTS);
    let r = db.create_table(receipts_schema()).unwrap();
    let insert = |db: &Database, r: &engine::TableRef, seqs: std::ops::Range<i64>| {
        for chunk in seqs.collect::<Vec<_>>().chunks(100) {
            db.run(|tx| {
                for &seq in chunk {
                    tx.insert(r, &[Value::Int(seq), Value::Int(seq % 7)])?;
                }
                Ok(())
            })
            .unwrap();
        }
    };
    insert(&db, &r, 0..3000);
    db.close().unwrap();
    let exact = |db: &Database| {
        db.check_invariants().unwrap();
        let integrity = db.verify_integrity(10);
        assert!(integrity.faults.is_empty(), "{:?}", integrity.faults);
        integrity.heap_pages as u64
    };

    let db = open_durable(dir.path());
    let clean = db.recovery().unwrap();
    assert_eq!(
        (clean.heaps_saved, clean.heaps_walked, clean.heap_pages_read),
        (2, 0, 0),
        "{clean}"
    );
    let pages_before = exact(&db);
    let r = db.table("receipts").unwrap();
    insert(&db, &r, 3000..6000);
    db.run(|tx| {
        for seq in (0..3000).step_by(3) {
            tx.delete(&r, &[Value::Int(seq)])?;
        }
        Ok(())
    })
    .unwrap();
    let log = db.log().unwrap();
    log.flush_to(log.end_lsn()).unwrap();
    drop(db); // a crash: no checkpoint since the open's

    let db = open_durable(dir.path());
    let crashed = db.recovery().unwrap();
    assert_eq!(
        (crashed.heaps_saved, crashed.heaps_walked),
        (2, 0),
        "{crashed}"
    );
    let pages = exact(&db);
    assert!(pages > pages_before, "the inserts added no page");
    // Every new page, and the pages whose rows were deleted; not the accounts' pages.
    assert!(
        crashed.heap_pages_read >= pages - pages_before && crashed.heap_pages_read < pages,
        "{} of {pages} heap pages read ({pages_before} before the inserts)",
        crashed.heap_pages_read
    );
    let r = db.table("receipts").unwrap();
    assert_eq!(dump(&db, &r).len(), 6000 - 1000);
    db.close().unwrap();

    let map = dir.path().join(storage::heap::FREE_SPACE_FILE);
    let mut bytes = std::fs::read(&map).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&map, &bytes).unwrap();
    for damage in ["a flipped bit", "no file"] {
        let db = open_durable(dir.path());
        let walked = db.recovery().unwrap();
        assert_eq!(
            (
                walked.heaps_saved,
                walked.heaps_walked,
                walked.heap_pages_read
            ),
            (0, 2, pages),
            "with {damage}: {walked}"
        );
        exact(&db);
        db.close().unwrap();
        std::fs::remove_file(&map).unwrap();
    }
}

/// Fifty committed transfers (account i pays i + 1 five), then one transaction that sets
/// every balance to 0, its records forced but neither committed nor rolled back, and the
/// database dropped: a crash as far as its files are concerned.
fn crash_after_transfers_with_one_left_open(db: Arc<Database>, t: &engine::TableRef) {
    for i in 0..50 {
        db.run(|tx| transfer(tx, t, i, i + 1, 5)).unwrap();
    }
    let mut tx = db.begin().unwrap();
    for id in 0..ACCOUNTS {
        tx.update(t, &[Value::Int(id)], &[(2, Value::Int(0))])
            .unwrap();
    }
    let log = db.log().unwrap();
    log.flush_to(log.end_lsn()).unwrap();
    std::mem::forget(tx);
    drop(db);
}

#[test]
fn a_torn_log_tail_ends_the_log_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_durable(dir.path());
    let t = load_accounts(&db, ACCOUNTS);
    crash_after_transfers_with_one_left_open(db, &t);
    let log = dir.path().join("wal.log");
    let len = std::fs::metadata(&log).unwrap().len();
    // Tear the tail: cut into the last record, then add garbage after it.
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 3).unwrap();
    drop(f);
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(&[0xAB; 37])
        .unwrap();
    let db = open_durable(dir.path());
    let t = db.table("accounts").unwrap();
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    let r = db
        .run(|tx| tx.get(&t, &[Value::Int(0)], Fetch::Cols(&[2]), false))
        .unwrap()
        .unwrap();
    assert_eq!(
        r[0],
        Value::Int(95),
        "committed transfers survive, the unfinished one does not"
    );
}

/// The open says what its recovery did: nothing to redo or undo after a clean close; after a
/// crash with one transaction's updates logged and uncommitted, that transaction rolled back,
/// one change undone per update, and the committed work that had not reached the page file
/// redone.
#[test]
fn recovery_reports_what_it_redid_and_undid() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_durable(dir.path());
    assert_eq!(
        db.recovery(),
        None,
        "a database the open created has nothing to recover"
    );
    let t = load_accounts(&db, ACCOUNTS);
    db.close().unwrap();

    let db = open_durable(dir.path());
    let clean = db.recovery().expect("an existing database is recovered");
    assert_eq!(
        (
            clean.redone,
            clean.losers,
            clean.undone,
            clean.checkpoint_pages
        ),
        (0, 0, 0, 0),
        "{clean}"
    );
    crash_after_transfers_with_one_left_open(db, &t);

    let db = open_durable(dir.path());
    let crashed = db.recovery().unwrap();
    assert_eq!(crashed.losers, 1, "{crashed}");
    assert_eq!(crashed.undone, ACCOUNTS as u64, "{crashed}");
    // Fifty transfers of two updates each, at least, were read and either redone or found
    // written: every logged page change is one or the other.
    assert!(crashed.analysed > 100 + ACCOUNTS as u64, "{crashed}");
    assert!(crashed.redone + crashed.on_disk > 0, "{crashed}");
    // The undo rewrote every balance, so the checkpoint that ends the open wrote back every
    // page of the table, and its time is in recovery's.
    let heap_pages = db.verify_integrity(10).heap_pages as u64;
    assert!(
        crashed.checkpoint_pages >= heap_pages,
        "{crashed}: {heap_pages} heap pages"
    );
    assert!(crashed.total_us() >= crashed.checkpoint_us && crashed.checkpoint_us > 0);
    let t = db.table("accounts").unwrap();
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    db.close().unwrap();
}

/// A fuzzy checkpoint taken while a read-only transaction runs, then a crash: the database
/// opens again. (The checkpoint listed the transaction, which had logged nothing, as running;
/// recovery took it for a loser and tried to undo it from LSN 0, and every later open failed
/// with "no log record at lsn:0". Non-durable and durable runs alike: `kill -9` of a TPC-C
/// bench with the full mix, whose Order-Status and Stock-Level transactions log nothing.)
#[test]
fn a_checkpoint_during_a_read_only_transaction_leaves_a_database_that_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_durable(dir.path());
    let t = load_accounts(&db, ACCOUNTS);
    for i in 0..20 {
        db.run(|tx| transfer(tx, &t, i, i + 1, 5)).unwrap();
    }
    let mut reader = db.begin().unwrap();
    let row = reader
        .get(&t, &[Value::Int(3)], Fetch::Cols(&[2]), false)
        .unwrap();
    assert!(row.is_some());
    db.checkpoint().unwrap();
    // A writer after the checkpoint, committed: it must survive the crash.
    db.run(|tx| transfer(tx, &t, 100, 101, 7)).unwrap();
    let log = db.log().unwrap();
    log.flush_to(log.end_lsn()).unwrap();
    std::mem::forget(reader); // the crash: neither committed nor rolled back
    drop(db);

    let db = open_durable(dir.path());
    let t = db.table("accounts").unwrap();
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    let r = db
        .run(|tx| tx.get(&t, &[Value::Int(101)], Fetch::Cols(&[2]), false))
        .unwrap()
        .unwrap();
    assert_eq!(
        r[0],
        Value::Int(107),
        "the commit after the checkpoint survives"
    );
    db.check_invariants().unwrap();
    db.close().unwrap();
    // And again: recovery left a database that opens cleanly a second time.
    open_durable(dir.path()).close().unwrap();
}

/// Fuzzy checkpoints due so often that one is due again before the last one finished: they
/// must not overlap. (Two did: the later one began after the earlier one's begin, finished
/// first and discarded the log below its own begin, and the earlier one then failed with "no
/// log record at" its begin — an error returned by the commit that had triggered it, after
/// that commit had succeeded.)
#[test]
fn checkpoints_due_back_to_back_never_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(DbConfig {
        path: Some(dir.path().to_path_buf()),
        pool_mib: 1,
        threads: 4,
        checkpoint_bytes: 256,
        ..DbConfig::default()
    })
    .unwrap();
    let t = load_accounts(&db, ACCOUNTS);
    std::thread::scope(|s| {
        for worker in 0..4i64 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                for i in 0..600 {
                    let from = (worker * 67 + i) % ACCOUNTS;
                    let to = (from + 1 + worker) % ACCOUNTS;
                    loop {
                        match db.run(|tx| transfer(tx, t, from, to, 1)) {
                            Ok(()) => break,
                            Err(e) if e.is_retryable() => continue,
                            Err(e) => panic!("transfer {i} of worker {worker}: {e}"),
                        }
                    }
                }
            });
        }
    });
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    db.close().unwrap();
}

/// A committed delete, then a crash with the commit durable: the deleted record is gone from
/// the heap too, not left behind with no index entry naming it. (The record was freed after
/// the commit record, and the free's redo was not forced with it: a crash campaign's TPC-C
/// check found delivered new-order rows that no index named.)
#[test]
fn a_durable_delete_leaves_no_record_behind_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_durable(dir.path());
    let t = load_accounts(&db, ACCOUNTS);
    db.checkpoint().unwrap();
    let log = db.log().unwrap();
    let start = log.end_lsn();
    db.run(|tx| {
        for id in 0..10 {
            assert!(tx.delete(&t, &[Value::Int(id)])?);
        }
        Ok(())
    })
    .unwrap();
    // What a crash just after the commit keeps is the log up to the commit record: every
    // change of the transaction, its frees included, must lie before it.
    log.flush_to(log.end_lsn()).unwrap();
    let records: Vec<wal::LogRecord> = log.iter_from(start).map(|r| r.unwrap().1).collect();
    let commit = records
        .iter()
        .position(|r| matches!(r, wal::LogRecord::Commit { .. }))
        .expect("a commit record");
    let after: Vec<_> = records[commit + 1..].iter().map(|r| r.kind()).collect();
    assert!(
        after.is_empty(),
        "logged after the commit record: {after:?}"
    );
    drop(db);
    let db = open_durable(dir.path());
    let report = db.verify_integrity(100);
    assert!(report.is_clean(), "{:?}", report.faults);
    let t = db.table("accounts").unwrap();
    assert_eq!(dump(&db, &t).len(), ACCOUNTS as usize - 10);
    db.close().unwrap();
}
