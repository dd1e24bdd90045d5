//! Read-only tables (`Database::set_read_only`): writes refused, reads without record locks,
//! and a switch that waits for the transactions it would change the table under.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use engine::{Fetch, Preset, Tx, TxError, Value};

fn refused(r: Result<impl std::fmt::Debug, TxError>, what: &str) {
    match r {
        Err(TxError::Invalid(msg)) => assert!(
            msg.contains("accounts") && msg.contains("read-only"),
            "{what}: {msg}"
        ),
        other => panic!("{what} on a read-only table: {other:?}"),
    }
}

#[test]
fn a_read_only_table_refuses_writes_and_serves_reads() {
    for preset in [Preset::Full, Preset::Stripped] {
        let db = open(preset, 1);
        let t = load_accounts(&db, 10);
        let before = dump(&db, &t);
        db.set_read_only("accounts", true).unwrap();
        let row = [Value::Int(10), Value::Str("new".into()), Value::Int(1)];
        refused(db.run(|tx| tx.insert(&t, &row)), "insert");
        refused(
            db.run(|tx| tx.update(&t, &[Value::Int(3)], &[(2, Value::Int(0))])),
            "update",
        );
        refused(db.run(|tx| tx.delete(&t, &[Value::Int(3)])), "delete");
        refused(
            db.run(|tx| tx.get(&t, &[Value::Int(3)], Fetch::All, true)),
            "read for update",
        );
        let got = db
            .run(|tx| tx.get(&t, &[Value::Int(3)], Fetch::All, false))
            .unwrap();
        assert_eq!(got, Some(before[3].clone()), "{preset:?}");
        assert_eq!(
            dump(&db, &t),
            before,
            "{preset:?}: a refused write changed the table"
        );

        db.set_read_only("accounts", false).unwrap();
        db.run(|tx| tx.update(&t, &[Value::Int(3)], &[(2, Value::Int(0))]))
            .unwrap();
        db.run(|tx| tx.insert(&t, &row)).unwrap();
        assert_eq!(dump(&db, &t).len(), 11, "{preset:?}");
    }
}

#[test]
fn reads_of_a_read_only_table_take_no_record_locks() {
    let db = open(Preset::Full, 2);
    let t = load_accounts(&db, 20);
    let lm = db.lock_manager().expect("the full preset locks");
    let requests = |read_only: bool| {
        db.set_read_only("accounts", read_only).unwrap();
        lm.reset_stats();
        db.run(|tx| {
            for id in 0..20 {
                assert!(tx.get(&t, &[Value::Int(id)], Fetch::All, false)?.is_some());
            }
            Ok(())
        })
        .unwrap();
        lm.stats().requests
    };
    let writable = requests(false);
    let read_only = requests(true);
    assert!(
        writable >= 20,
        "a writable table's reads lock records: {writable}"
    );
    assert!(
        read_only <= 2,
        "a read-only table's reads took {read_only} locks (the table's and the database's intention locks at most)"
    );
}

/// Runs `switch` on another thread while `holder` (a transaction that read or wrote the
/// table) is open: the switch must wait until it ends.
fn switch_waits_for(db: &Arc<engine::Database>, holder: engine::Transaction<'_>, read_only: bool) {
    let done = Arc::new(AtomicBool::new(false));
    let switch = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            db.set_read_only("accounts", read_only).unwrap();
            done.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !done.load(Ordering::SeqCst),
        "the switch to read_only={read_only} ran under an open transaction"
    );
    holder.commit().unwrap();
    switch.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
}

#[test]
fn the_switch_waits_for_writers_and_for_readers() {
    let db = open(Preset::Full, 2);
    let t = load_accounts(&db, 10);

    let mut writer = db.begin().unwrap();
    writer
        .update(&t, &[Value::Int(1)], &[(2, Value::Int(7))])
        .unwrap();
    switch_waits_for(&db, writer, true);
    let balance = db
        .run(|tx| tx.get(&t, &[Value::Int(1)], Fetch::Cols(&[2]), false))
        .unwrap();
    assert_eq!(
        balance,
        Some(vec![Value::Int(7)]),
        "the writer's update is kept"
    );
    refused(
        db.run(|tx| tx.update(&t, &[Value::Int(1)], &[(2, Value::Int(8))])),
        "update after the switch",
    );

    // A reader of the read-only table holds no record lock, but its intention lock keeps
    // the table read-only until it ends.
    let mut reader = db.begin().unwrap();
    assert!(reader
        .get(&t, &[Value::Int(2)], Fetch::All, false)
        .unwrap()
        .is_some());
    switch_waits_for(&db, reader, false);
    db.run(|tx| tx.update(&t, &[Value::Int(1)], &[(2, Value::Int(8))]))
        .unwrap();
}
