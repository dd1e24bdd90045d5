//! Operations, rollback and configuration checks across presets.

mod common;

use common::*;
use engine::{Database, DbConfig, Fetch, KeyRange, Preset, Switches, Tx, TxError, Value};
use std::ops::Bound;

const PRESETS: [Preset; 2] = [Preset::Full, Preset::Stripped];

#[test]
fn crud_and_scans_agree_on_every_preset() {
    for p in PRESETS {
        let db = open(p, 1);
        let t = load_accounts(&db, 2000);
        let mut tx = db.begin().unwrap();
        let r = tx
            .get(&t, &[Value::Int(7)], Fetch::All, false)
            .unwrap()
            .unwrap();
        assert_eq!(
            r,
            vec![Value::Int(7), Value::Str("owner7".into()), Value::Int(100)]
        );
        assert!(tx
            .update(&t, &[Value::Int(7)], &[(2, Value::Int(5))])
            .unwrap());
        assert!(!tx
            .update(&t, &[Value::Int(99_999)], &[(2, Value::Int(5))])
            .unwrap());
        assert!(tx.delete(&t, &[Value::Int(8)]).unwrap());
        assert!(!tx.delete(&t, &[Value::Int(8)]).unwrap());
        assert!(matches!(
            tx.insert(&t, &[Value::Int(9), Value::Str("x".into()), Value::Int(1)]),
            Err(TxError::DuplicateKey(_))
        ));
        let lo = [Value::Int(5)];
        let hi = [Value::Int(10)];
        let rows = tx
            .scan(
                &t,
                KeyRange {
                    low: Bound::Included(&lo),
                    high: Bound::Excluded(&hi),
                },
                None,
                false,
                Fetch::Cols(&[0]),
                false,
            )
            .unwrap();
        let ids: Vec<i64> = rows.iter().map(|r| r[0].as_int().unwrap()).collect();
        assert_eq!(ids, vec![5, 6, 7, 9], "preset {p:?}");
        let rows = tx
            .scan(
                &t,
                KeyRange {
                    low: Bound::Unbounded,
                    high: Bound::Included(&hi),
                },
                Some(3),
                true,
                Fetch::Cols(&[0]),
                false,
            )
            .unwrap();
        let ids: Vec<i64> = rows.iter().map(|r| r[0].as_int().unwrap()).collect();
        assert_eq!(ids, vec![10, 9, 7], "preset {p:?}");
        tx.commit().unwrap();
        assert_eq!(total(&db, &t), 100 * 1999 - 95);
        db.check_invariants().unwrap();
    }
}

#[test]
fn rollback_restores_the_exact_state() {
    for p in PRESETS {
        let db = open(p, 1);
        let t = load_accounts(&db, 3000);
        let before = dump(&db, &t);
        let mut tx = db.begin().unwrap();
        for id in 0..400 {
            tx.update(&t, &[Value::Int(id)], &[(2, Value::Int(-id))])
                .unwrap();
        }
        for id in 400..900 {
            assert!(tx.delete(&t, &[Value::Int(id)]).unwrap());
        }
        for id in 10_000..11_000 {
            tx.insert(
                &t,
                &[Value::Int(id), Value::Str("new".into()), Value::Int(1)],
            )
            .unwrap();
        }
        tx.abort().unwrap();
        assert_eq!(dump(&db, &t), before, "preset {p:?}");
        // A dropped transaction rolls back too.
        {
            let mut tx = db.begin().unwrap();
            tx.delete(&t, &[Value::Int(1)]).unwrap();
        }
        assert_eq!(dump(&db, &t), before, "preset {p:?}");
        db.check_invariants().unwrap();
    }
}

#[test]
fn secondary_index_scans_follow_inserts_deletes_and_rollbacks() {
    for p in PRESETS {
        let db = open(p, 1);
        let t = load_accounts(&db, 100);
        let ix = index_accounts_by_owner(&db);
        db.run(|tx| {
            tx.insert(
                &t,
                &[Value::Int(500), Value::Str("owner7".into()), Value::Int(3)],
            )
        })
        .unwrap();
        let key = [Value::Str("owner7".into())];
        let rows = db
            .run(|tx| {
                tx.scan_index(
                    &ix,
                    KeyRange::prefix(&key),
                    None,
                    false,
                    Fetch::Cols(&[0]),
                    false,
                )
            })
            .unwrap();
        let mut ids: Vec<i64> = rows.iter().map(|r| r[0].as_int().unwrap()).collect();
        ids.sort();
        assert_eq!(ids, vec![7, 500], "preset {p:?}");
        let mut tx = db.begin().unwrap();
        tx.delete(&t, &[Value::Int(7)]).unwrap();
        tx.abort().unwrap();
        db.run(|tx| tx.delete(&t, &[Value::Int(500)])).unwrap();
        let rows = db
            .run(|tx| {
                tx.scan_index(
                    &ix,
                    KeyRange::prefix(&key),
                    None,
                    false,
                    Fetch::Cols(&[0]),
                    false,
                )
            })
            .unwrap();
        assert_eq!(rows, vec![vec![Value::Int(7)]], "preset {p:?}");
    }
}

#[test]
fn bad_requests_are_clear_errors() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 10);
    let mut tx = db.begin().unwrap();
    let e = tx
        .get(&t, &[Value::Str("x".into())], Fetch::All, false)
        .unwrap_err();
    assert!(matches!(e, TxError::Invalid(_)), "{e}");
    let e = tx
        .update(&t, &[Value::Int(1)], &[(0, Value::Int(2))])
        .unwrap_err();
    assert!(e.to_string().contains("index key"), "{e}");
    let e = tx
        .update(&t, &[Value::Int(1)], &[(2, Value::Str("no".into()))])
        .unwrap_err();
    assert!(e.to_string().contains("balance"), "{e}");
    let e = tx
        .get(&t, &[Value::Int(1)], Fetch::Cols(&[9]), false)
        .unwrap_err();
    assert!(e.to_string().contains("column 9"), "{e}");
    assert!(db.table("nope").is_err());
    let bad = Database::open(DbConfig {
        switches: Switches::preset(Preset::Stripped),
        threads: 2,
        ..DbConfig::default()
    });
    assert!(bad.is_err());
}

#[test]
fn a_database_directory_opens_once_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = || engine::DbConfig {
        path: Some(dir.path().to_path_buf()),
        pool_mib: 2,
        ..engine::DbConfig::default()
    };
    let db = engine::Database::open(config()).unwrap();
    let second = engine::Database::open(config())
        .err()
        .expect("a second open is refused");
    let message = second.to_string();
    assert!(message.contains("is in use"), "{message}");
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    // Closed (or dropped, as when a process dies), the directory opens again.
    db.close().unwrap();
    let again = engine::Database::open(config()).unwrap();
    drop(again);
    engine::Database::open(config()).unwrap();
}
