//! Statement-level rollback: `Transaction::rollback_to` takes back what a transaction did since
//! a savepoint — inserts, updates, deletes, their index entries — and the transaction goes on
//! and commits as if that work had never been done; on disk, a reopened database holds the
//! same.

mod common;

use common::*;
use engine::{Database, DbConfig, Fetch, Preset, TableRef, Tx, Value};

fn row(id: i64, balance: i64) -> [Value; 3] {
    [
        Value::Int(id),
        Value::Str(format!("owner{id}")),
        Value::Int(balance),
    ]
}

/// Updates account 1, then (after a savepoint) inserts 1000, updates 2 and deletes 3, rolls
/// back to the savepoint, inserts 1001 and commits.
fn work_and_take_back(db: &Database, t: &TableRef) {
    let mut tx = db.begin().unwrap();
    assert!(tx
        .update(t, &[Value::Int(1)], &[(2, Value::Int(7))])
        .unwrap());
    let savepoint = tx.savepoint();
    tx.insert(t, &row(1000, 5)).unwrap();
    assert!(tx
        .update(t, &[Value::Int(2)], &[(2, Value::Int(8))])
        .unwrap());
    assert!(tx.delete(t, &[Value::Int(3)]).unwrap());
    tx.rollback_to(savepoint).unwrap();
    // What was taken back is gone for the transaction itself too.
    let get = |tx: &mut engine::txn::Transaction<'_>, id: i64| {
        tx.get(t, &[Value::Int(id)], Fetch::All, false).unwrap()
    };
    assert_eq!(get(&mut tx, 1000), None);
    assert_eq!(get(&mut tx, 2), Some(row(2, 100).to_vec()));
    assert_eq!(get(&mut tx, 3), Some(row(3, 100).to_vec()));
    assert_eq!(get(&mut tx, 1), Some(row(1, 7).to_vec()));
    // Rolled back to it twice: nothing more to take back.
    tx.rollback_to(savepoint).unwrap();
    tx.insert(t, &row(1001, 9)).unwrap();
    // Deleted again after the rollback: the delete is the transaction's, freed at its commit.
    assert!(tx.delete(t, &[Value::Int(4)]).unwrap());
    tx.commit().unwrap();
}

fn expected() -> Vec<Vec<Value>> {
    (0..10)
        .filter(|&id| id != 4)
        .map(|id| row(id, if id == 1 { 7 } else { 100 }).to_vec())
        .chain([row(1001, 9).to_vec()])
        .collect()
}

#[test]
fn a_rollback_to_a_savepoint_takes_back_only_what_followed_it() {
    for preset in [Preset::Full, Preset::Stripped] {
        let db = open(preset, 1);
        let t = load_accounts(&db, 10);
        let ix = index_accounts_by_owner(&db);
        work_and_take_back(&db, &t);
        assert_eq!(dump(&db, &t), expected(), "{preset:?}");
        // The secondary index lost the entry of the insert taken back and kept the deleted
        // row's.
        let by_owner = |owner: &str| {
            db.run(|tx| {
                tx.scan_index(
                    &ix,
                    engine::KeyRange::prefix(&[Value::Str(owner.into())]),
                    None,
                    false,
                    Fetch::All,
                    false,
                )
            })
            .unwrap()
            .len()
        };
        assert_eq!(by_owner("owner1000"), 0, "{preset:?}");
        assert_eq!(by_owner("owner3"), 1, "{preset:?}");
        assert_eq!(by_owner("owner1001"), 1, "{preset:?}");
        db.check_invariants().unwrap();
    }
}

#[test]
fn a_database_reopened_after_a_rollback_to_a_savepoint_holds_what_committed() {
    let dir = tempfile::tempdir().unwrap();
    let config = || DbConfig {
        path: Some(dir.path().to_path_buf()),
        durable: true,
        pool_mib: 4,
        threads: 1,
        ..DbConfig::default()
    };
    {
        let db = Database::open(config()).unwrap();
        let t = load_accounts(&db, 10);
        work_and_take_back(&db, &t);
        // Left running at the close: rolled back by recovery, savepoint and all.
        let mut open = db.begin().unwrap();
        open.insert(&t, &row(2000, 1)).unwrap();
        let savepoint = open.savepoint();
        assert!(open.delete(&t, &[Value::Int(5)]).unwrap());
        open.rollback_to(savepoint).unwrap();
        assert!(open
            .update(&t, &[Value::Int(6)], &[(2, Value::Int(0))])
            .unwrap());
        // Its records and compensations forced, the database dropped: a crash as far as its
        // files are concerned.
        let log = db.log().unwrap();
        log.flush_to(log.end_lsn()).unwrap();
        std::mem::forget(open);
        drop(db);
    }
    let db = Database::open(config()).unwrap();
    let t = db.table("accounts").unwrap();
    assert_eq!(dump(&db, &t), expected());
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{:?}", report.faults);
}
