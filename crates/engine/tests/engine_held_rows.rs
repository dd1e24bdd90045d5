//! A row read for update by key (`Tx::get`, `Tx::read_with`) keeps its location for the write
//! that follows: the update or delete neither descends the primary index again nor asks the
//! lock manager for the lock the read holds (a procedure across a boundary reads for update
//! in one operation and writes in another; Voter reads its tallies before it bumps them).
//! The kept locations are right only while the keys stay locked exclusively and the
//! transaction moves none of the rows itself, and only within their transaction.

mod common;

use common::*;
use engine::{Fetch, Preset, TableRef, Tx, TxResult, Value};

fn balances(db: &engine::Database, t: &TableRef) -> Vec<(i64, i64)> {
    dump(db, t)
        .iter()
        .map(|r| (r[0].as_int().unwrap(), r[2].as_int().unwrap()))
        .collect()
}

/// Reads row `id` of `t` (`for_update` or not) by `get` for even ids, `read_with` for odd.
fn read(tx: &mut dyn Tx, t: &TableRef, id: i64, for_update: bool) -> TxResult<bool> {
    let key = [Value::Int(id)];
    if id % 2 == 0 {
        Ok(tx.get(t, &key, Fetch::All, for_update)?.is_some())
    } else {
        tx.read_with(t, &key, for_update, &mut |row| row.int(2).map(drop))
    }
}

/// Updates after reads for update fix no index page and ask for no lock; after shared
/// reads they do both (a descent and an upgrade each).
#[test]
fn updates_of_rows_read_for_update_descend_no_index_and_request_no_lock() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 200);
    let lm = db.lock_manager().unwrap();
    let _on = engine::profile::collect();
    let run = |for_update: bool, updates: bool| {
        let before = lm.stats().requests;
        db.run(|tx| {
            for id in 50..60 {
                assert!(read(tx, &t, id, for_update)?);
            }
            if updates {
                for id in 50..60 {
                    assert!(tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(id))])?);
                }
            }
            Ok(())
        })
        .unwrap();
        (engine::profile::last(), lm.stats().requests - before)
    };
    let (reads, read_locks) = run(true, false);
    let (reads_and_updates, both_locks) = run(true, true);
    assert_eq!(
        reads_and_updates.index_pages, reads.index_pages,
        "the updates descended the index again"
    );
    assert_eq!(
        both_locks, read_locks,
        "the updates asked for locks they held"
    );
    let (shared, shared_locks) = run(false, false);
    let (shared_and_updates, shared_both_locks) = run(false, true);
    assert!(
        shared_and_updates.index_pages >= shared.index_pages + 10,
        "updates after shared reads must find their rows: {shared:?} {shared_and_updates:?}"
    );
    assert!(
        shared_both_locks >= shared_locks + 10,
        "updates after shared reads must upgrade: {shared_locks} then {shared_both_locks}"
    );
    let after = balances(&db, &t);
    assert!(after[50..60].iter().all(|&(id, balance)| balance == id));
    assert!(after
        .iter()
        .all(|&(id, b)| (50..60).contains(&id) || b == 100));
}

/// More rows read for update than are kept: the rest are found by the index, and every
/// update reaches its row, in any order, with rows of another table read between.
#[test]
fn rows_past_the_kept_ones_and_of_other_tables_are_updated_all_the_same() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 100);
    let u = db
        .create_table(
            engine::TableSchema::new("others")
                .int("id")
                .string("owner", 16)
                .int("balance")
                .key(&["id"])
                .int_key(&[32]),
        )
        .unwrap();
    db.run(|tx| {
        for id in 0..5 {
            tx.insert(
                &u,
                &[Value::Int(id), Value::Str("o".into()), Value::Int(100)],
            )?;
        }
        Ok(())
    })
    .unwrap();
    db.run(|tx| {
        for id in 0..60 {
            assert!(read(tx, &t, id, true)?);
            if id % 12 == 0 {
                assert!(read(tx, &u, id / 12, true)?);
            }
        }
        for id in (0..60).rev() {
            assert!(tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(-id))])?);
        }
        for id in 0..5 {
            assert!(tx.update(&u, &[Value::Int(id)], &[(2, Value::Int(id))])?);
        }
        Ok(())
    })
    .unwrap();
    let after = balances(&db, &t);
    for (id, balance) in after {
        assert_eq!(balance, if id < 60 { -id } else { 100 }, "row {id}");
    }
    assert_eq!(
        balances(&db, &u),
        (0..5).map(|id| (id, id)).collect::<Vec<_>>()
    );
}

/// A row read for update, deleted and put back under its key lives elsewhere: the update
/// after that reaches the new record; a row deleted stays deleted.
#[test]
fn a_row_read_for_update_deleted_and_put_back_is_updated_where_it_now_lives() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 20);
    db.run(|tx| {
        for id in 0..10 {
            assert!(read(tx, &t, id, true)?);
        }
        assert!(tx.delete(&t, &[Value::Int(3)])?);
        assert!(tx.delete(&t, &[Value::Int(4)])?);
        assert!(!tx.update(&t, &[Value::Int(4)], &[(2, Value::Int(1))])?);
        assert!(!read(tx, &t, 4, true)?);
        tx.insert(
            &t,
            &[Value::Int(3), Value::Str("again".into()), Value::Int(500)],
        )?;
        assert!(tx.update(&t, &[Value::Int(3)], &[(2, Value::Int(7))])?);
        assert!(tx.update(&t, &[Value::Int(5)], &[(2, Value::Int(8))])?);
        Ok(())
    })
    .unwrap();
    let after = balances(&db, &t);
    assert_eq!(after[3], (3, 7), "the update missed the row put back");
    assert_eq!(after[4], (5, 8));
    assert!(!after.iter().any(|&(id, _)| id == 4));
    assert_eq!(after.len(), 19);
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{report:?}");
}

/// A delete taken back to a savepoint, then the update of the row read for update before
/// it; and the next transaction's update of a row the last one read, deleted and put back.
#[test]
fn rows_read_for_update_stay_right_across_savepoints_and_transactions() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 10);
    let mut tx = db.begin().unwrap();
    assert!(read(&mut tx, &t, 2, true).unwrap());
    let savepoint = tx.savepoint();
    assert!(tx.delete(&t, &[Value::Int(2)]).unwrap());
    tx.rollback_to(savepoint).unwrap();
    assert!(tx
        .update(&t, &[Value::Int(2)], &[(2, Value::Int(22))])
        .unwrap());
    tx.commit().unwrap();
    assert_eq!(balances(&db, &t)[2], (2, 22));

    db.run(|tx| {
        assert!(read(tx, &t, 6, true)?);
        assert!(tx.delete(&t, &[Value::Int(6)])?);
        tx.insert(
            &t,
            &[Value::Int(6), Value::Str("again".into()), Value::Int(1)],
        )
    })
    .unwrap();
    db.run(|tx| {
        assert!(tx.update(&t, &[Value::Int(6)], &[(2, Value::Int(9))])?);
        Ok(())
    })
    .unwrap();
    assert_eq!(balances(&db, &t)[6], (6, 9));
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{report:?}");
}
