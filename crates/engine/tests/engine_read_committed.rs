//! Isolation level 1 (`Tx::read_committed`): a read lets go of its shared locks as it ends,
//! so a writer need not wait for the reader's transaction, while the reader still never sees
//! an uncommitted row and its writes and reads for update keep their locks to the end.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use engine::{Fetch, KeyRange, Preset, TableRef, Tx, Value};

fn row(id: i64, balance: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Str(format!("o{id}")),
        Value::Int(balance),
    ]
}

/// Accounts 0, 10, ..., 90, each with balance 1.
fn spaced(db: &engine::Database) -> TableRef {
    let t = db.create_table(accounts_schema()).unwrap();
    db.run(|tx| (0..10).try_for_each(|i| tx.insert(&t, &row(i * 10, 1))))
        .unwrap();
    t
}

fn balance(tx: &mut dyn Tx, t: &TableRef, id: i64) -> i64 {
    let r = tx
        .get(t, &[Value::Int(id)], Fetch::Cols(&[2]), false)
        .unwrap()
        .unwrap();
    r[0].as_int().unwrap()
}

/// The ids in [lo, hi) that a scan by `tx` returns.
fn scan_ids(tx: &mut dyn Tx, t: &TableRef, lo: i64, hi: i64) -> Vec<i64> {
    let (lo, hi) = ([Value::Int(lo)], [Value::Int(hi)]);
    let range = KeyRange {
        low: std::ops::Bound::Included(&lo[..]),
        high: std::ops::Bound::Excluded(&hi[..]),
    };
    let rows = tx
        .scan(t, range, None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    rows.iter().map(|r| r[0].as_int().unwrap()).collect()
}

/// Runs `body` in a transaction of its own on another thread; the flag turns true once it
/// committed.
fn in_thread(
    db: &Arc<engine::Database>,
    body: impl Fn(&mut dyn Tx) -> engine::TxResult<()> + Send + 'static,
) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let (db, flag) = (db.clone(), done.clone());
    let handle = std::thread::spawn(move || {
        db.run(|tx| body(tx)).unwrap();
        flag.store(true, Ordering::SeqCst);
    });
    (handle, done)
}

/// Waits up to 20 s for `flag`; whether it turned true.
fn turns_true(flag: &AtomicBool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !flag.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    flag.load(Ordering::SeqCst)
}

/// A writer that updates account 10 and inserts 24 into the gap (20, 30).
fn writer(
    db: &Arc<engine::Database>,
    t: &TableRef,
) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
    let t = t.clone();
    in_thread(db, move |tx| {
        tx.update(&t, &[Value::Int(10)], &[(2, Value::Int(7))])?;
        tx.insert(&t, &row(24, 1))
    })
}

/// The full preset with page-level locking: a read locks its record's heap page, and the
/// ten accounts share one page.
fn open_page_locking() -> Arc<engine::Database> {
    open_page_locking_with(true)
}

/// As [`open_page_locking`], honouring read committed or not (`DbConfig::read_committed`).
fn open_page_locking_with(read_committed: bool) -> Arc<engine::Database> {
    engine::Database::open(engine::DbConfig {
        threads: 3,
        pool_mib: 16,
        page_locking: true,
        read_committed,
        ..engine::DbConfig::default()
    })
    .unwrap()
}

/// Berkeley DB style (`glass charm`, `--no-read-committed`): a transaction that asks for read
/// committed is serializable all the same, its page locks kept to commit.
#[test]
fn with_read_committed_off_a_reader_that_asks_for_it_keeps_its_locks() {
    let db = open_page_locking_with(false);
    let t = spaced(&db);
    let mut reader = db.begin().unwrap();
    reader.read_committed();
    assert_eq!(balance(&mut reader, &t, 10), 1);
    waits_for(
        reader,
        &db,
        &t,
        "a reader whose database does not honour read committed",
    );
    db.check_invariants().unwrap();
}

/// Starts [`writer`] beside the open `reader` and checks that it waits until the reader
/// commits (`who` names the reader in the failure).
fn waits_for(reader: engine::Transaction<'_>, db: &Arc<engine::Database>, t: &TableRef, who: &str) {
    let (handle, done) = writer(db, t);
    std::thread::sleep(Duration::from_millis(150));
    assert!(!done.load(Ordering::SeqCst), "a writer passed {who}");
    reader.commit().unwrap();
    handle.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
}

#[test]
fn a_read_committed_reader_lets_writers_in_before_it_ends() {
    lets_writers_in(open(Preset::Full, 3));
}

#[test]
fn a_read_committed_reader_lets_writers_in_under_page_locking_too() {
    lets_writers_in(open_page_locking());
}

#[test]
fn a_read_committed_reader_never_sees_an_uncommitted_write_under_page_locking() {
    never_sees_an_uncommitted_write(open_page_locking());
}

/// A serializable reader's locks keep a writer out until it ends; a read-committed
/// reader's are gone as each read ends.
fn lets_writers_in(db: Arc<engine::Database>) {
    let t = spaced(&db);
    // Serializable, the reader's locks on 10 and on the range [0, 25) keep the writer out
    // until it ends.
    let mut reader = db.begin().unwrap();
    assert_eq!(balance(&mut reader, &t, 10), 1);
    assert_eq!(scan_ids(&mut reader, &t, 0, 25), vec![0, 10, 20]);
    waits_for(reader, &db, &t, "a serializable reader");
    db.run(|tx| tx.delete(&t, &[Value::Int(24)]).map(drop))
        .unwrap();

    // Read committed, the same reads hold nothing once they end: the writer goes through
    // while the reader is open, and the reader's next reads see what it committed.
    let mut reader = db.begin().unwrap();
    reader.read_committed();
    assert_eq!(balance(&mut reader, &t, 10), 7);
    assert_eq!(scan_ids(&mut reader, &t, 0, 25), vec![0, 10, 20]);
    let t2 = t.clone();
    let (handle, done) = in_thread(&db, move |tx| {
        tx.update(&t2, &[Value::Int(10)], &[(2, Value::Int(9))])?;
        tx.insert(&t2, &row(24, 1))
    });
    let went_through = turns_true(&done);
    handle.join().unwrap();
    assert!(went_through, "a writer waited for a read-committed reader");
    assert_eq!(balance(&mut reader, &t, 10), 9);
    assert_eq!(scan_ids(&mut reader, &t, 0, 25), vec![0, 10, 20, 24]);
    reader.commit().unwrap();
    db.check_invariants().unwrap();
}

#[test]
fn a_read_committed_reader_never_sees_an_uncommitted_write() {
    never_sees_an_uncommitted_write(open(Preset::Full, 3));
}

fn never_sees_an_uncommitted_write(db: Arc<engine::Database>) {
    let t = spaced(&db);
    let mut writer = db.begin().unwrap();
    writer
        .update(&t, &[Value::Int(10)], &[(2, Value::Int(5))])
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let (t2, seen2) = (t.clone(), seen.clone());
    let (handle, done) = in_thread(&db, move |tx| {
        tx.read_committed();
        *seen2.lock().unwrap() = Some(balance(tx, &t2, 10));
        Ok(())
    });
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !done.load(Ordering::SeqCst),
        "a read-committed read went past an uncommitted update"
    );
    writer.commit().unwrap();
    handle.join().unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(5));
}

#[test]
fn a_read_committed_transaction_keeps_its_write_and_for_update_locks() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    let mut own = db.begin().unwrap();
    own.read_committed();
    own.get(&t, &[Value::Int(10)], Fetch::Cols(&[2]), true)
        .unwrap();
    own.update(&t, &[Value::Int(20)], &[(2, Value::Int(3))])
        .unwrap();
    // A plain read of a row it updated keeps the update's lock.
    assert_eq!(balance(&mut own, &t, 20), 3);
    let t2 = t.clone();
    let (handle, done) = in_thread(&db, move |tx| {
        tx.update(&t2, &[Value::Int(10)], &[(2, Value::Int(8))])?;
        tx.update(&t2, &[Value::Int(20)], &[(2, Value::Int(8))])
            .map(drop)
    });
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !done.load(Ordering::SeqCst),
        "a writer passed a row read for update, or written, by an open transaction"
    );
    own.commit().unwrap();
    handle.join().unwrap();
    let mut check = db.begin().unwrap();
    assert_eq!(
        (balance(&mut check, &t, 10), balance(&mut check, &t, 20)),
        (8, 8)
    );
    check.commit().unwrap();
    db.check_invariants().unwrap();
}

/// `glass profile` counts the record locks a transaction took: a read-committed read's are
/// gone by its commit, and still counted, so both levels report the same count for the same
/// reads (the scan's next key included).
#[test]
fn a_profile_counts_the_record_locks_a_read_let_go_of() {
    let counted = |read_committed: bool| {
        let db = open(Preset::Full, 2);
        let t = spaced(&db);
        let collecting = engine::profile::collect();
        let mut tx = db.begin().unwrap();
        if read_committed {
            tx.read_committed();
        }
        balance(&mut tx, &t, 30);
        assert_eq!(scan_ids(&mut tx, &t, 50, 80), [50, 60, 70]);
        tx.commit().unwrap();
        let p = engine::profile::last();
        drop(collecting);
        p.row_locks
    };
    let serializable = counted(false);
    assert!(
        serializable >= 4,
        "one get, three rows scanned: {serializable}"
    );
    assert_eq!(counted(true), serializable);
}
