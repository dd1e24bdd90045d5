//! An update or delete of a row that the transaction's last scan found takes the row's
//! location from the scan instead of descending the primary index again (Delivery's order
//! lines). The kept locations are right only while their keys stay locked and the
//! transaction moves none of the rows itself, and only within their transaction and
//! database: sessions are kept per thread, and two databases in one thread give their tables
//! the same ids.

mod common;

use std::ops::Bound;

use common::*;
use engine::{Fetch, KeyRange, Preset, TableRef, Tx, TxResult, Value};

fn ids_in(tx: &mut dyn Tx, t: &TableRef, lo: i64, hi: i64) -> TxResult<Vec<Vec<Value>>> {
    let (lo, hi) = ([Value::Int(lo)], [Value::Int(hi)]);
    tx.scan(
        t,
        KeyRange {
            low: Bound::Included(&lo),
            high: Bound::Included(&hi),
        },
        None,
        false,
        Fetch::All,
        true,
    )
}

fn balances(db: &engine::Database, t: &TableRef) -> Vec<(i64, i64)> {
    dump(db, t)
        .iter()
        .map(|r| (r[0].as_int().unwrap(), r[2].as_int().unwrap()))
        .collect()
}

/// The scan's updates fix no index page; the same updates without the scan do.
#[test]
fn updates_of_the_rows_a_scan_found_descend_no_index() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 200);
    let _on = engine::profile::collect();
    let profile = |updates: bool, scan: bool| {
        db.run(|tx| {
            if scan {
                assert_eq!(ids_in(tx, &t, 50, 59)?.len(), 10);
            }
            if updates {
                for id in 50..60 {
                    assert!(tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(id))])?);
                }
            }
            Ok(())
        })
        .unwrap();
        engine::profile::last()
    };
    let scan_alone = profile(false, true);
    let scan_and_updates = profile(true, true);
    let updates_alone = profile(true, false);
    assert!(updates_alone.index_pages >= 10, "{updates_alone:?}");
    assert_eq!(
        scan_and_updates.index_pages, scan_alone.index_pages,
        "the updates descended the index again"
    );
    assert_eq!(
        scan_and_updates.records,
        scan_alone.records + updates_alone.records
    );
    let after = balances(&db, &t);
    assert!(after[50..60].iter().all(|&(id, balance)| balance == id));
}

/// The rows a scan for update found are locked exclusively already: their updates ask the
/// lock manager for nothing; after a shared scan they must still ask (an upgrade each).
#[test]
fn updates_of_the_rows_a_scan_for_update_found_request_no_lock() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 200);
    let lm = db.lock_manager().unwrap();
    let requests = |for_update: bool, updates: bool| {
        let before = lm.stats().requests;
        db.run(|tx| {
            let (lo, hi) = ([Value::Int(50)], [Value::Int(59)]);
            let range = KeyRange {
                low: Bound::Included(&lo),
                high: Bound::Included(&hi),
            };
            let rows = tx.scan(&t, range, None, false, Fetch::All, for_update)?;
            assert_eq!(rows.len(), 10);
            if updates {
                for id in 50..60 {
                    assert!(tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(id + 1))])?);
                }
            }
            Ok(())
        })
        .unwrap();
        lm.stats().requests - before
    };
    let (scan, scan_and_updates) = (requests(true, false), requests(true, true));
    assert!(scan >= 10, "the scan locked its rows: {scan}");
    assert_eq!(
        scan_and_updates, scan,
        "the updates asked for locks they held"
    );
    let (shared, shared_and_updates) = (requests(false, false), requests(false, true));
    assert!(
        shared_and_updates >= shared + 10,
        "updates after a shared scan must upgrade: {shared} then {shared_and_updates}"
    );
    let after = balances(&db, &t);
    assert!(after[50..60].iter().all(|&(id, balance)| balance == id + 1));
}

/// Scans of one table in one mode add to the rows kept (Delivery's ten scans of NEW-ORDER,
/// one row each): updates of the rows of every scan, not only the last, ask for no lock.
#[test]
fn the_rows_of_consecutive_scans_are_kept_together() {
    let updated: Vec<i64> = (10..100).step_by(10).collect();
    let scans: Vec<(i64, i64)> = updated.iter().map(|&id| (id, id + 1)).collect();
    let (scans, scans_and_updates) = scans_then_updates(&scans, 2, &updated);
    assert_eq!(
        scans_and_updates, scans,
        "an earlier scan's rows were not kept"
    );
}

/// Ten scans of ten rows each, then the updates of all hundred (Delivery's ORDER-LINE rows as
/// a procedure across a boundary writes them: every scan first, every update after): all
/// hundred are kept, and no update asks for a lock.
#[test]
fn a_hundred_rows_of_consecutive_scans_are_all_kept() {
    let scans: Vec<(i64, i64)> = (0..100).step_by(10).map(|lo| (lo, lo + 9)).collect();
    let updated: Vec<i64> = (0..100).collect();
    let (scans, scans_and_updates) = scans_then_updates(&scans, 10, &updated);
    assert_eq!(
        scans_and_updates, scans,
        "updates of rows the earlier scans found asked for locks"
    );
}

/// On 200 accounts, one transaction of the scans `scans` (each of `rows` rows, for update),
/// then one of the same scans followed by updates of the accounts `updated` (balance set to
/// minus the id): the lock requests of each. Checks the balances after.
fn scans_then_updates(scans: &[(i64, i64)], rows: usize, updated: &[i64]) -> (u64, u64) {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 200);
    let lm = db.lock_manager().unwrap();
    let requests = |updates: bool| {
        let before = lm.stats().requests;
        db.run(|tx| {
            for &(lo, hi) in scans {
                assert_eq!(ids_in(tx, &t, lo, hi)?.len(), rows);
            }
            if updates {
                for &id in updated {
                    assert!(tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(-id))])?);
                }
            }
            Ok(())
        })
        .unwrap();
        lm.stats().requests - before
    };
    let counts = (requests(false), requests(true));
    for (id, balance) in balances(&db, &t) {
        let expected = if updated.contains(&id) { -id } else { 100 };
        assert_eq!(balance, expected, "row {id}");
    }
    counts
}

#[test]
fn rows_deleted_from_the_kept_set_are_found_again_by_the_index() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 40);
    db.run(|tx| {
        for id in [5, 15, 25] {
            assert_eq!(ids_in(tx, &t, id, id + 2)?.len(), 3);
        }
        for id in [5, 15, 25] {
            assert!(tx.delete(&t, &[Value::Int(id)])?);
        }
        // Deleted: an update finds nothing, a second delete too.
        assert!(!tx.update(&t, &[Value::Int(15)], &[(2, Value::Int(1))])?);
        assert!(!tx.delete(&t, &[Value::Int(25)])?);
        tx.insert(
            &t,
            &[Value::Int(5), Value::Str("again".into()), Value::Int(50)],
        )?;
        assert!(tx.update(&t, &[Value::Int(5)], &[(2, Value::Int(55))])?);
        assert!(tx.update(&t, &[Value::Int(16)], &[(2, Value::Int(16))])?);
        assert!(tx.update(&t, &[Value::Int(27)], &[(2, Value::Int(27))])?);
        Ok(())
    })
    .unwrap();
    let after = balances(&db, &t);
    let want: Vec<(i64, i64)> = (0..40)
        .filter(|&id| id != 15 && id != 25)
        .map(|id| match id {
            5 => (5, 55),
            16 | 27 => (id, id),
            _ => (id, 100),
        })
        .collect();
    assert_eq!(after, want);
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{report:?}");
}

/// A row the scan found, deleted and put back under its key by the same transaction lives
/// elsewhere now: an update after that must reach the new record, not the deleted one.
#[test]
fn a_row_deleted_and_put_back_after_the_scan_is_updated_where_it_now_lives() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 20);
    db.run(|tx| {
        assert_eq!(ids_in(tx, &t, 0, 9)?.len(), 10);
        assert!(tx.delete(&t, &[Value::Int(3)])?);
        tx.insert(
            &t,
            &[Value::Int(3), Value::Str("again".into()), Value::Int(500)],
        )?;
        assert!(tx.update(&t, &[Value::Int(3)], &[(2, Value::Int(7))])?);
        // A later row of the same scan is still found (where the scan found it).
        assert!(tx.update(&t, &[Value::Int(4)], &[(2, Value::Int(8))])?);
        Ok(())
    })
    .unwrap();
    let after = balances(&db, &t);
    assert_eq!(after[3], (3, 7), "the update missed the row put back");
    assert_eq!(after[4], (4, 8));
    assert!(after.iter().all(|&(id, b)| id == 3 || id == 4 || b == 100));
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{report:?}");
}

/// A scan in one database, then in the same thread a transaction of another whose table has
/// the same id and the same keys at other places: its update must not go where the first
/// database's scan found the key.
#[test]
fn found_rows_stay_within_their_transaction_and_database() {
    let (a, b) = (open(Preset::Full, 1), open(Preset::Full, 1));
    let ta = load_accounts(&a, 10);
    let tb = b.create_table(accounts_schema()).unwrap();
    assert_eq!(ta.id, tb.id, "same ids, same lock spaces");
    // Loaded in the other order: key 3 of `b` is where key 6 of `a` is.
    for id in (0..10).rev() {
        b.run(|tx| {
            tx.insert(
                &tb,
                &[
                    Value::Int(id),
                    Value::Str(format!("b{id}")),
                    Value::Int(100),
                ],
            )
        })
        .unwrap();
    }
    a.run(|tx| ids_in(tx, &ta, 0, 9).map(|rows| assert_eq!(rows.len(), 10)))
        .unwrap();
    b.run(|tx| {
        assert!(tx.update(&tb, &[Value::Int(3)], &[(2, Value::Int(7))])?);
        Ok(())
    })
    .unwrap();
    let want: Vec<(i64, i64)> = (0..10)
        .map(|id| (id, if id == 3 { 7 } else { 100 }))
        .collect();
    assert_eq!(balances(&b, &tb), want);
    // And within one database, the next transaction's update without a scan.
    a.run(|tx| {
        assert!(tx.delete(&ta, &[Value::Int(6)])?);
        Ok(())
    })
    .unwrap();
    a.run(|tx| ids_in(tx, &ta, 0, 9).map(|rows| assert_eq!(rows.len(), 9)))
        .unwrap();
    a.run(|tx| {
        tx.insert(
            &ta,
            &[Value::Int(6), Value::Str("again".into()), Value::Int(1)],
        )?;
        Ok(())
    })
    .unwrap();
    a.run(|tx| {
        assert!(tx.update(&ta, &[Value::Int(6)], &[(2, Value::Int(9))])?);
        Ok(())
    })
    .unwrap();
    assert_eq!(balances(&a, &ta)[6], (6, 9));
}
