//! Inserts under record locking lock the key after theirs in the same B+-tree descent that
//! inserts the entry (a conditional lock under the leaf latch, a wait and a retry when it is
//! refused). These tests pin down what that must preserve: an insert into a gap a running
//! scan covered waits for the scan's transaction, an insert elsewhere does not, and a
//! duplicate (found only after the record went into the heap) is taken back at once.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use engine::{Fetch, KeyRange, Preset, TableRef, Tx, TxError, Value};
use rand::SeedableRng;

fn row(id: i64) -> Vec<Value> {
    vec![Value::Int(id), Value::Str(format!("o{id}")), Value::Int(1)]
}

fn ids(db: &engine::Database, t: &TableRef) -> Vec<i64> {
    dump(db, t).iter().map(|r| r[0].as_int().unwrap()).collect()
}

/// Accounts 0, 10, ..., 90.
fn spaced(db: &engine::Database) -> TableRef {
    let t = db.create_table(accounts_schema()).unwrap();
    db.run(|tx| (0..10).try_for_each(|i| tx.insert(&t, &row(i * 10))))
        .unwrap();
    t
}

/// The ids in [lo, hi) that a scan by `tx` returns.
fn scan_ids(tx: &mut dyn Tx, t: &TableRef, lo: i64, hi: i64) -> engine::TxResult<Vec<i64>> {
    let (lo, hi) = ([Value::Int(lo)], [Value::Int(hi)]);
    let range = KeyRange {
        low: std::ops::Bound::Included(&lo[..]),
        high: std::ops::Bound::Excluded(&hi[..]),
    };
    let rows = tx.scan(t, range, None, false, Fetch::Cols(&[0]), false)?;
    Ok(rows.iter().map(|r| r[0].as_int().unwrap()).collect())
}

/// A transaction that scanned [0, 25) of `spaced`'s accounts, so that it holds 30, the key
/// after the range.
fn holding_30<'db>(db: &'db engine::Database, t: &TableRef) -> engine::Transaction<'db> {
    let mut reader = db.begin().unwrap();
    assert_eq!(scan_ids(&mut reader, t, 0, 25).unwrap(), vec![0, 10, 20]);
    reader
}

/// Spawns a transaction inserting `id`; the flag turns true once it committed.
fn insert_in_thread(
    db: &Arc<engine::Database>,
    t: &TableRef,
    id: i64,
) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let (db, t, flag) = (db.clone(), t.clone(), done.clone());
    let handle = std::thread::spawn(move || {
        db.run(|tx| tx.insert(&t, &row(id))).unwrap();
        flag.store(true, Ordering::SeqCst);
    });
    (handle, done)
}

#[test]
fn insert_waits_for_a_scanners_next_key_lock_in_the_middle_of_the_index() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    let mut reader = db.begin().unwrap();
    let (lo, hi) = ([Value::Int(0)], [Value::Int(25)]);
    let range = || KeyRange {
        low: std::ops::Bound::Included(&lo[..]),
        high: std::ops::Bound::Excluded(&hi[..]),
    };
    // Returns 0, 10, 20 and locks 30, the key after the range.
    let first = reader
        .scan(&t, range(), None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    assert_eq!(first.len(), 3);

    // 24 falls into the gap (20, 30) that the scan covered: its next key, 30, is locked.
    let (blocked, blocked_done) = insert_in_thread(&db, &t, 24);
    // 35's next key is 40, which nobody holds: it goes through at once.
    let (free, free_done) = insert_in_thread(&db, &t, 35);
    free.join().unwrap();
    assert!(free_done.load(Ordering::SeqCst));
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !blocked_done.load(Ordering::SeqCst),
        "an insert went into a gap a running scan covers"
    );
    let again = reader
        .scan(&t, range(), None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    assert_eq!(first, again, "phantom row appeared");
    reader.commit().unwrap();
    blocked.join().unwrap();
    assert!(blocked_done.load(Ordering::SeqCst));
    assert_eq!(
        ids(&db, &t),
        vec![0, 10, 20, 24, 30, 35, 40, 50, 60, 70, 80, 90]
    );
    db.check_invariants().unwrap();
}

#[test]
fn an_insert_keeps_no_lock_on_its_next_key_but_guards_its_own_entry() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    // The writer inserts 24 (next key 30) and stays open.
    let mut writer = db.begin().unwrap();
    writer.insert(&t, &row(24)).unwrap();
    // A delete of 30, which needs 30 exclusively, goes through while the writer is open:
    // the insert only checked 30 for an instant. (It held 30 to its commit before: a
    // Delivery's lock on one district's oldest new order waited for every New-Order
    // inserting at the end of the district before it.)
    let deleted = Arc::new(AtomicBool::new(false));
    let deleter = {
        let (db, t, flag) = (db.clone(), t.clone(), deleted.clone());
        std::thread::spawn(move || {
            db.run(|tx| tx.delete(&t, &[Value::Int(30)]).map(drop))
                .unwrap();
            flag.store(true, Ordering::SeqCst);
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !deleted.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        deleted.load(Ordering::SeqCst),
        "a delete of the key after an open insert waited for the insert's transaction"
    );
    deleter.join().unwrap();
    // A scan over the new entry still waits for the writer: 24's own lock is held.
    let (scanned, scanned_rows) = {
        let (db, t) = (db.clone(), t.clone());
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let handle = std::thread::spawn(move || {
            let mut got = Vec::new();
            db.run(|tx| {
                got = scan_ids(tx, &t, 20, 28)?;
                Ok(())
            })
            .unwrap();
            flag.store(true, Ordering::SeqCst);
            got
        });
        (done, handle)
    };
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !scanned.load(Ordering::SeqCst),
        "a scan read past an uncommitted insert"
    );
    writer.commit().unwrap();
    assert_eq!(scanned_rows.join().unwrap(), vec![20, 24]);
    assert_eq!(ids(&db, &t), vec![0, 10, 20, 24, 40, 50, 60, 70, 80, 90]);
    db.check_invariants().unwrap();
}

/// Waits up to 20 s for `flag`; whether it turned true.
fn turns_true(flag: &AtomicBool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !flag.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    flag.load(Ordering::SeqCst)
}

#[test]
fn an_insert_below_a_scans_range_goes_ahead_though_its_next_key_is_the_scans_first() {
    // TPC-C's New-Order inserts at the end of one district's new orders, whose next key is
    // the next district's oldest, which a running Delivery's scan of that district locked:
    // the scan's lock guards its range, not the end of the district before it.
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    let mut reader = db.begin().unwrap();
    // Returns 30 and 40, and locks them and 50, each guarding the gap from 25 up.
    assert_eq!(scan_ids(&mut reader, &t, 25, 45).unwrap(), vec![30, 40]);
    // 22's next key is 30, but 22 lies below the scanned range: no wait.
    let (below, below_done) = insert_in_thread(&db, &t, 22);
    assert!(
        turns_true(&below_done),
        "an insert below a running scan's range waited for the scan's first key"
    );
    below.join().unwrap();
    // 27 lies inside the range, in the gap 30 guards: it waits for the reader.
    let (inside, inside_done) = insert_in_thread(&db, &t, 27);
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !inside_done.load(Ordering::SeqCst),
        "an insert went into the range of a running scan"
    );
    assert_eq!(scan_ids(&mut reader, &t, 25, 45).unwrap(), vec![30, 40]);
    reader.commit().unwrap();
    inside.join().unwrap();
    assert_eq!(
        ids(&db, &t),
        vec![0, 10, 20, 22, 27, 30, 40, 50, 60, 70, 80, 90]
    );
    db.check_invariants().unwrap();
}

#[test]
fn an_open_delete_holds_off_inserts_after_the_removed_key_only() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    // The deleter removes 30 and stays open, holding 40 (the key after it) from 30 up.
    let mut deleter = db.begin().unwrap();
    assert!(deleter.delete(&t, &[Value::Int(30)]).unwrap());
    // 25's next key is now 40, but 25 lies below the removed key: no wait.
    let (below, below_done) = insert_in_thread(&db, &t, 25);
    assert!(
        turns_true(&below_done),
        "an insert below an open delete's key waited for the delete"
    );
    below.join().unwrap();
    // 35 would sit between the removed key and 40: a scan of [20, 35] would then end at 35,
    // never reach 40, and miss the delete, which may yet roll back. It waits.
    let (after, after_done) = insert_in_thread(&db, &t, 35);
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !after_done.load(Ordering::SeqCst),
        "an insert went in just after a key an open transaction deleted"
    );
    // The same with 30 itself: its lock is the deleter's until the end.
    let (same, same_done) = insert_in_thread(&db, &t, 30);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !same_done.load(Ordering::SeqCst),
        "30 went back in under an open delete"
    );
    deleter.abort().unwrap();
    after.join().unwrap();
    // The abort put 30 back, so the second insert of 30 failed as a duplicate.
    assert!(same.join().is_err());
    assert_eq!(
        ids(&db, &t),
        vec![0, 10, 20, 25, 30, 35, 40, 50, 60, 70, 80, 90]
    );
    db.check_invariants().unwrap();
}

#[test]
fn a_scan_that_deletes_the_key_after_its_range_keeps_its_gap_closed() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    // The reader scanned [0, 25): its lock on 30, the key after the range, guards 20..30.
    // Then it deletes 30 itself: 40 becomes the key after the range, and the lock that
    // the delete takes on it must guard the scan's part of the gap too, or 25 would go in
    // and the reader's rescan would see a phantom.
    let mut reader = holding_30(&db, &t);
    assert!(reader.delete(&t, &[Value::Int(30)]).unwrap());
    let (inside, inside_done) = insert_in_thread(&db, &t, 25);
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !inside_done.load(Ordering::SeqCst),
        "an insert went into a scanned range whose next key the scanner deleted"
    );
    assert_eq!(scan_ids(&mut reader, &t, 0, 25).unwrap(), vec![0, 10, 20]);
    reader.commit().unwrap();
    inside.join().unwrap();
    assert_eq!(ids(&db, &t), vec![0, 10, 20, 25, 40, 50, 60, 70, 80, 90]);
    db.check_invariants().unwrap();
}

#[test]
fn an_insert_that_waited_for_its_next_key_lets_it_go_once_its_entry_is_in() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    let reader = holding_30(&db, &t);
    // A writer inserts 24 (next key 30: it waits), then stays open until told to commit.
    let (inserted, commit) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let writer = {
        let (db, t, inserted, commit) = (db.clone(), t.clone(), inserted.clone(), commit.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin().unwrap();
            tx.insert(&t, &row(24)).unwrap();
            inserted.store(true, Ordering::SeqCst);
            while !commit.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            tx.commit().unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !inserted.load(Ordering::SeqCst),
        "the insert did not wait for 30"
    );
    reader.commit().unwrap();
    assert!(turns_true(&inserted));
    // The writer is open with 24 in: a delete of 30 goes through, as after an insert that
    // never waited (it kept 30 to its commit before, so a Delivery's scan of the next
    // district's new orders waited for a New-Order that had waited once).
    let deleted = Arc::new(AtomicBool::new(false));
    let deleter = {
        let (db, t, flag) = (db.clone(), t.clone(), deleted.clone());
        std::thread::spawn(move || {
            db.run(|tx| tx.delete(&t, &[Value::Int(30)]).map(drop))
                .unwrap();
            flag.store(true, Ordering::SeqCst);
        })
    };
    let went_through = turns_true(&deleted);
    commit.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    deleter.join().unwrap();
    assert!(
        went_through,
        "a delete of the key an open insert had waited for waited for the insert's transaction"
    );
    assert_eq!(ids(&db, &t), vec![0, 10, 20, 24, 40, 50, 60, 70, 80, 90]);
    db.check_invariants().unwrap();
}

#[test]
fn an_insert_whose_next_key_changed_while_it_waited_locks_the_new_one() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    let mut reader = holding_30(&db, &t);
    // A writer inserts 27 (next key 30: waits).
    let (waiting, waiting_done) = insert_in_thread(&db, &t, 27);
    std::thread::sleep(Duration::from_millis(100));
    assert!(!waiting_done.load(Ordering::SeqCst));
    // Meanwhile 28 goes in by the reader itself (it holds 30): 27's next key is now 28,
    // X-locked by the reader until it commits.
    reader.insert(&t, &row(28)).unwrap();
    reader.commit().unwrap();
    waiting.join().unwrap();
    assert_eq!(
        ids(&db, &t),
        vec![0, 10, 20, 27, 28, 30, 40, 50, 60, 70, 80, 90]
    );
    db.check_invariants().unwrap();
}

#[test]
fn a_scan_whose_next_key_changed_while_it_waited_lets_the_old_one_go() {
    // TPC-C on one warehouse: a Stock-Level's scan of a district's last order lines waited
    // for the next district's first line (a New-Order into that district had queued for it
    // first), and when it was granted, the New-Order's first line had gone in between: the
    // scan waited for that line's lock, still holding the next district's first, which the
    // New-Order's second line needed as its next key. A deadlock, one of them its victim.
    let db = open(Preset::Full, 3);
    let t = spaced(&db);
    // The holder's lock on 30 (from 0 up) refuses the writer's check of its next key.
    let holder = holding_30(&db, &t);
    let (first_in, commit) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let writer = {
        let (db, t, first_in, commit) = (db.clone(), t.clone(), first_in.clone(), commit.clone());
        std::thread::spawn(move || -> engine::TxResult<()> {
            let mut tx = db.begin()?;
            tx.insert(&t, &row(24))?;
            first_in.store(true, Ordering::SeqCst);
            tx.insert(&t, &row(26))?;
            while !commit.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            tx.commit()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(!first_in.load(Ordering::SeqCst), "24 did not wait for 30");
    // The scanner comes to 30 after the writer: it queues behind the writer's request.
    let scanned = Arc::new(AtomicBool::new(false));
    let scanner = {
        let (db, t, scanned) = (db.clone(), t.clone(), scanned.clone());
        std::thread::spawn(move || -> engine::TxResult<Vec<i64>> {
            let mut tx = db.begin()?;
            let ids = scan_ids(&mut tx, &t, 0, 25)?;
            scanned.store(true, Ordering::SeqCst);
            tx.commit()?;
            Ok(ids)
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !scanned.load(Ordering::SeqCst),
        "the scan did not wait for 30"
    );
    // The holder ends: the writer gets 30, puts 24 in and lets 30 go; the scanner gets 30,
    // finds 24 next and waits for the writer; the writer puts 26 in (next key 30 again).
    holder.commit().unwrap();
    assert!(turns_true(&first_in));
    std::thread::sleep(Duration::from_millis(200));
    commit.store(true, Ordering::SeqCst);
    let wrote = writer.join().unwrap();
    let read = scanner.join().unwrap();
    assert_eq!(
        db.last_deadlock(),
        None,
        "the scan and the writer deadlocked"
    );
    wrote.expect("the writer commits");
    assert_eq!(read.expect("the scan ends"), vec![0, 10, 20, 24]);
    assert_eq!(
        ids(&db, &t),
        vec![0, 10, 20, 24, 26, 30, 40, 50, 60, 70, 80, 90]
    );
    db.check_invariants().unwrap();
}

#[test]
fn duplicate_insert_in_a_committed_transaction_leaves_the_table_as_it_was() {
    let page_locking = || {
        engine::Database::open(engine::DbConfig {
            threads: 2,
            pool_mib: 16,
            page_locking: true,
            ..engine::DbConfig::default()
        })
        .unwrap()
    };
    for (name, db) in [
        ("full", open(Preset::Full, 2)),
        ("stripped", open(Preset::Stripped, 1)),
        ("page locking", page_locking()),
    ] {
        let t = load_accounts(&db, 20);
        let before = dump(&db, &t);
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &row(100)).unwrap();
        assert!(matches!(
            tx.insert(&t, &row(7)),
            Err(TxError::DuplicateKey(_))
        ));
        tx.update(&t, &[Value::Int(100)], &[(2, Value::Int(5))])
            .unwrap();
        tx.commit().unwrap();
        let mut after = dump(&db, &t);
        assert_eq!(after.len(), before.len() + 1);
        assert_eq!(
            after.remove(20),
            vec![Value::Int(100), Value::Str("o100".into()), Value::Int(5)]
        );
        assert_eq!(after, before, "{name}: the duplicate changed the table");
        db.check_invariants().unwrap();

        // The same in a transaction that aborts: everything goes.
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &row(200)).unwrap();
        assert!(tx.insert(&t, &row(200)).is_err());
        tx.abort().unwrap();
        assert_eq!(ids(&db, &t).len(), 21);
        db.check_invariants().unwrap();
    }
}

fn owner_index(db: &engine::Database, unique: bool) -> engine::IndexRef {
    db.create_index(engine::IndexSchema {
        name: "accounts_by_owner".into(),
        table: "accounts".into(),
        columns: vec![1],
        unique,
        kind: Default::default(),
        int_key_bits: None,
    })
    .unwrap()
}

#[test]
fn a_secondary_index_scan_blocks_inserts_into_its_gap() {
    let db = open(Preset::Full, 3);
    let t = spaced(&db); // owners o0, o10, ..., o90
    let ix = owner_index(&db, false);
    let mut reader = db.begin().unwrap();
    let (lo, hi) = ([Value::Str("o10".into())], [Value::Str("o20".into())]);
    let range = || KeyRange {
        low: std::ops::Bound::Included(&lo[..]),
        high: std::ops::Bound::Included(&hi[..]),
    };
    // Returns o10 and o20 and locks o30, the index key after the range.
    let first = reader
        .scan_index(&ix, range(), None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    assert_eq!(first, vec![vec![Value::Int(10)], vec![Value::Int(20)]]);
    // Owner o25 falls into (o20, o30): waits. Owner o35's next index key o40 is free.
    let (blocked, blocked_done) = insert_in_thread(&db, &t, 25);
    let (free, free_done) = insert_in_thread(&db, &t, 35);
    free.join().unwrap();
    assert!(free_done.load(Ordering::SeqCst));
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !blocked_done.load(Ordering::SeqCst),
        "an insert went into a secondary-index gap a running scan covers"
    );
    let again = reader
        .scan_index(&ix, range(), None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    assert_eq!(first, again, "phantom index entry appeared");
    reader.commit().unwrap();
    blocked.join().unwrap();
    assert!(blocked_done.load(Ordering::SeqCst));
    let owners = db
        .run(|tx| {
            tx.scan_index(
                &ix,
                KeyRange {
                    low: std::ops::Bound::Unbounded,
                    high: std::ops::Bound::Unbounded,
                },
                None,
                false,
                Fetch::Cols(&[0]),
                false,
            )
        })
        .unwrap();
    assert_eq!(owners.len(), 12);
    db.check_invariants().unwrap();
}

#[test]
fn a_unique_secondary_duplicate_takes_the_whole_insert_back() {
    for (name, db) in [
        ("full", open(Preset::Full, 2)),
        ("stripped", open(Preset::Stripped, 1)),
    ] {
        let t = spaced(&db);
        owner_index(&db, true);
        let before = dump(&db, &t);
        let mut tx = db.begin().unwrap();
        // A new primary key whose owner "o30" is taken.
        let mut dup = row(31);
        dup[1] = Value::Str("o30".into());
        assert!(
            matches!(tx.insert(&t, &dup), Err(TxError::DuplicateKey(ix)) if ix == "accounts_by_owner"),
            "{name}"
        );
        tx.commit().unwrap();
        assert_eq!(dump(&db, &t), before, "{name}");
        // The key is free again: no index entry of the failed insert remains.
        db.run(|tx| tx.insert(&t, &row(31))).unwrap();
        db.check_invariants().unwrap();
    }
}

/// Keys the stress test's transactions touch: `0..STRESS_KEYS`, thread `i` inserting and
/// deleting only the keys `≡ i (mod STRESS_THREADS)`, so each key's final state follows from
/// its owner's commits, while every thread's scans cover the others' keys and gaps.
const STRESS_KEYS: i64 = 240;
const STRESS_THREADS: usize = 4;
const STRESS_TXNS: usize = 300;

/// One stress transaction: scan a range, insert or delete a few owned keys, scan it again.
/// The second scan must be the first plus this transaction's own changes: another
/// transaction's insert into the scanned range (a phantom) or delete from it would show.
/// Returns the owned keys' new states (key, present) for the model, applied at commit only.
fn stress_txn(
    tx: &mut dyn Tx,
    (t, ix, shape): (&TableRef, &engine::IndexRef, Shape),
    rng: &mut impl rand::Rng,
    me: usize,
) -> Result<Vec<(i64, bool)>, TxError> {
    let lo = rng.gen_range(0..STRESS_KEYS);
    let hi = (lo + rng.gen_range(8..60)).min(STRESS_KEYS);
    // Half the transactions scan the primary key range [lo, hi), half the owner index range
    // ["o{lo}", "o{hi}"), whose keys order as strings ("o100" < "o11").
    let by_owner = rng.gen_bool(0.5);
    // Some scans run backwards (highest key first): the gap above their range must be
    // protected as well as a forward scan's.
    let reverse = rng.gen_bool(0.3);
    let (lo_k, hi_k) = if by_owner {
        (
            vec![Value::Str(shape.owner(lo))],
            vec![Value::Str(shape.owner(hi))],
        )
    } else {
        (shape.bound(lo), shape.bound(hi))
    };
    let in_range = |key: i64| {
        if by_owner {
            (shape.owner(lo)..shape.owner(hi)).contains(&shape.owner(key))
        } else {
            (lo..hi).contains(&key)
        }
    };
    // The ids in scan order, up to `limit`.
    let scan_ids = |tx: &mut dyn Tx, limit: Option<usize>| -> Result<Vec<i64>, TxError> {
        let range = KeyRange {
            low: std::ops::Bound::Included(&lo_k[..]),
            high: std::ops::Bound::Excluded(&hi_k[..]),
        };
        let cols = Fetch::Cols(&[0]);
        let rows = if by_owner {
            tx.scan_index(ix, range, limit, reverse, cols, false)?
        } else {
            tx.scan(t, range, limit, reverse, cols, false)?
        };
        Ok(rows.iter().map(|r| r[0].as_int().unwrap()).collect())
    };
    // The whole range's ids, sorted.
    let scan = |tx: &mut dyn Tx| -> Result<Vec<i64>, TxError> {
        let mut ids = scan_ids(tx, None)?;
        ids.sort_unstable();
        Ok(ids)
    };
    // A scan that stops at its limit (the first or last three keys, in scan order) must
    // read the same twice, with other transactions running in between.
    let limited = |tx: &mut dyn Tx| scan_ids(tx, Some(3));
    if rng.gen_bool(0.3) {
        let first = limited(tx)?;
        for _ in 0..3 {
            std::thread::yield_now();
        }
        assert_eq!(
            limited(tx)?,
            first,
            "thread {me}: a scan of [{lo}, {hi}) limited to 3 (by owner: {by_owner}, reverse: \
             {reverse}) read differently twice"
        );
    }
    let mut expected: std::collections::BTreeSet<i64> = scan(tx)?.into_iter().collect();
    let mut changes = Vec::new();
    for _ in 0..rng.gen_range(1..4) {
        // An owned key, mostly inside the scanned range so the rescan checks it.
        let base = if rng.gen_bool(0.7) {
            rng.gen_range(lo..hi)
        } else {
            rng.gen_range(0..STRESS_KEYS)
        };
        let key = base - base.rem_euclid(STRESS_THREADS as i64) + me as i64;
        if !(0..STRESS_KEYS).contains(&key) {
            continue;
        }
        let present = match tx.insert(t, &shape.row(key)) {
            Ok(()) => true,
            // Present already: delete it instead.
            Err(TxError::DuplicateKey(_)) => {
                assert!(tx.delete(t, &shape.key(key))?, "key {key} vanished");
                false
            }
            Err(e) => return Err(e),
        };
        if in_range(key) {
            if present {
                expected.insert(key);
            } else {
                expected.remove(&key);
            }
        }
        changes.push((key, present));
    }
    let again = scan(tx)?;
    assert_eq!(
        again,
        expected.into_iter().collect::<Vec<_>>(),
        "thread {me}: rescan of [{lo}, {hi}) (by owner: {by_owner}, reverse: {reverse}) differs \
         from the first scan plus own changes"
    );
    Ok(changes)
}

/// The stress table's shape. `Narrow`: `accounts`, every key in one leaf. `Wide`: keys and
/// owners of about a kilobyte, so that a scanned range spans leaves and its scans cross
/// leaf boundaries (where a one-pass scan's locks rest on latch coupling).
#[derive(Clone, Copy, Debug)]
enum Shape {
    Narrow,
    Wide,
    /// A key of two integers, (id / 16, id), as TPC-C's (district, order): keys of one
    /// group rank apart from the next group's, so inserts at a group's end meet locks whose
    /// floors lie in the next group.
    Grouped,
}

impl Shape {
    const PAD: u16 = 1000;

    fn schema(self) -> engine::TableSchema {
        match self {
            Shape::Narrow => accounts_schema(),
            Shape::Wide => engine::TableSchema::new("accounts")
                .int("id")
                .string("owner", 16 + Self::PAD)
                .int("balance")
                .string("pad", Self::PAD)
                .key(&["id", "pad"]),
            Shape::Grouped => engine::TableSchema::new("accounts")
                .int("id")
                .string("owner", 16)
                .int("balance")
                .int("grp")
                .key(&["grp", "id"]),
        }
    }

    /// The owner of account `id`: `o{id}`, padded with a byte below every digit so that
    /// owners order as their unpadded forms do.
    fn owner(self, id: i64) -> String {
        match self {
            Shape::Narrow | Shape::Grouped => format!("o{id}"),
            Shape::Wide => format!("o{id}{}", "-".repeat(Self::PAD.into())),
        }
    }

    fn row(self, id: i64) -> Vec<Value> {
        match self {
            Shape::Narrow => row(id),
            Shape::Grouped => vec![
                Value::Int(id),
                Value::Str(self.owner(id)),
                Value::Int(1),
                Value::Int(id / 16),
            ],
            Shape::Wide => vec![
                Value::Int(id),
                Value::Str(self.owner(id)),
                Value::Int(1),
                Value::Str("p".repeat(Self::PAD.into())),
            ],
        }
    }

    fn key(self, id: i64) -> Vec<Value> {
        match self {
            Shape::Narrow => vec![Value::Int(id)],
            Shape::Wide => vec![Value::Int(id), Value::Str("p".repeat(Self::PAD.into()))],
            Shape::Grouped => vec![Value::Int(id / 16), Value::Int(id)],
        }
    }

    /// A range bound at `id` over the primary key (a prefix where the key has more).
    fn bound(self, id: i64) -> Vec<Value> {
        match self {
            Shape::Narrow | Shape::Wide => vec![Value::Int(id)],
            Shape::Grouped => self.key(id),
        }
    }
}

fn stress(db: Arc<engine::Database>, shape: Shape, name: &str) {
    let t = db.create_table(shape.schema()).unwrap();
    let ix = owner_index(&db, false);
    // Every fourth key present at the start.
    db.run(|tx| (0..STRESS_KEYS / 4).try_for_each(|i| tx.insert(&t, &shape.row(i * 4))))
        .unwrap();
    let handles: Vec<_> = (0..STRESS_THREADS)
        .map(|me| {
            let (db, t, ix) = (db.clone(), t.clone(), ix.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(me as u64 + 7);
                // The owned keys' committed states.
                let mut model: std::collections::BTreeMap<i64, bool> = (0..STRESS_KEYS)
                    .filter(|k| k.rem_euclid(STRESS_THREADS as i64) == me as i64)
                    .map(|k| (k, k % 4 == 0))
                    .collect();
                let mut retries = 0u64;
                for _ in 0..STRESS_TXNS {
                    loop {
                        let mut tx = db.begin().unwrap();
                        match stress_txn(&mut tx, (&t, &ix, shape), &mut rng, me) {
                            Ok(changes) => {
                                tx.commit().unwrap();
                                model.extend(changes);
                                break;
                            }
                            Err(e) if e.is_retryable() => {
                                tx.abort().unwrap();
                                retries += 1;
                            }
                            Err(e) => panic!("thread {me}: {e}"),
                        }
                    }
                }
                (model, retries)
            })
        })
        .collect();
    let mut expected = Vec::new();
    let mut retries = 0;
    for h in handles {
        let (model, r) = h.join().unwrap();
        expected.extend(model.into_iter().filter(|&(_, p)| p).map(|(k, _)| k));
        retries += r;
    }
    expected.sort_unstable();
    assert_eq!(
        ids(&db, &t),
        expected,
        "{name}: final keys differ from the commits"
    );
    db.check_invariants().unwrap();
    eprintln!("{name}: {retries} deadlock retries");
}

#[test]
fn concurrent_inserts_deletes_and_rescans_see_no_phantoms_and_lose_nothing() {
    stress(
        open(Preset::Full, STRESS_THREADS),
        Shape::Narrow,
        "record locking",
    );
    let page_locking = engine::Database::open(engine::DbConfig {
        threads: STRESS_THREADS,
        pool_mib: 16,
        page_locking: true,
        ..engine::DbConfig::default()
    })
    .unwrap();
    stress(page_locking, Shape::Narrow, "page locking");
    stress(
        open(Preset::Full, STRESS_THREADS),
        Shape::Grouped,
        "record locking, two-integer keys",
    );
}

#[test]
fn scans_across_leaves_see_no_phantoms_while_others_insert_and_delete() {
    let db = open(Preset::Full, STRESS_THREADS);
    stress(db.clone(), Shape::Wide, "record locking, wide keys");
    // The ranges did span leaves: some 60 entries of a kilobyte and more in each index are
    // two leaves or more under a root, in each of the two.
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{:?}", report.faults);
    assert!(
        report.tree_pages >= 6,
        "the wide keys' two indexes have {} pages",
        report.tree_pages
    );
}

/// A forward scan under record locking reads its range once: it locks the entries and the
/// key after them as it reads them (`collect_once`), where it used to read the range, lock,
/// look up the next key and read the range again. A backward scan still does all four.
#[test]
fn a_forward_scan_reads_its_leaf_once_and_a_backward_scan_checks_again() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 200);
    let _on = engine::profile::collect();
    let scan = |reverse: bool| {
        db.run(|tx| {
            let (lo, hi) = ([Value::Int(50)], [Value::Int(60)]);
            let range = KeyRange {
                low: std::ops::Bound::Included(&lo[..]),
                high: std::ops::Bound::Excluded(&hi[..]),
            };
            let rows = tx.scan(&t, range, None, reverse, Fetch::Cols(&[0]), false)?;
            assert_eq!(rows.len(), 10);
            Ok(())
        })
        .unwrap();
        engine::profile::last()
    };
    let forward = scan(false);
    let backward = scan(true);
    // 200 accounts fit one leaf: a descent fixes as many pages as a lookup's.
    db.run(|tx| {
        tx.get(&t, &[Value::Int(55)], Fetch::Cols(&[0]), false)
            .map(|_| ())
    })
    .unwrap();
    let descent = engine::profile::last().index_pages;
    assert_eq!(forward.index_pages, descent, "{forward:?}");
    assert!(backward.index_pages >= 3 * descent, "{backward:?}");
}
