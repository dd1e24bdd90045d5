//! `TableScan`, the paged whole-table read of the consistency checks: every row exactly once,
//! in primary-key order, whatever the page size and wherever the pages break, over B+-trees
//! and the main-memory indexes, with composite and string keys, or in the order the table
//! stores them (its progress told up to every row); an error from the caller stops it and
//! comes back.

use std::sync::Arc;

use engine::db::{Database, DbConfig};
use engine::schema::TableSchema;
use engine::switches::{Preset, Switches};
use engine::{TableRef, TxError, Value};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use workloads::util::{int, scan_all, string, with_txn, TableScan};

/// `(a int, b string, n int)` keyed on `(a, b)`: many rows share `a`, so pages break inside
/// a run of equal first key columns, where an exclusive bound on `a` alone would skip rows.
fn table(db: &Arc<Database>) -> TableRef {
    db.create_table(
        TableSchema::new("t")
            .int("a")
            .string("b", 12)
            .int("n")
            .key(&["a", "b"]),
    )
    .unwrap()
}

/// A database of `rows` rows, inserted in a shuffled order; column `n` numbers them in key
/// order.
fn filled(preset: Preset, rows: usize) -> (Arc<Database>, TableRef) {
    let db = Database::open(DbConfig {
        switches: Switches::preset(preset),
        ..DbConfig::default()
    })
    .unwrap();
    let t = table(&db);
    let mut keys: Vec<(i64, String)> = (0..rows)
        .map(|i| ((i / 5) as i64, format!("k{:04}", i % 5)))
        .collect();
    keys.sort();
    let mut order: Vec<usize> = (0..rows).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(7));
    for chunk in order.chunks(100) {
        with_txn(&db, |tx| {
            for &i in chunk {
                let (a, b) = &keys[i];
                let row = [Value::Int(*a), Value::Str(b.clone()), Value::Int(i as i64)];
                tx.insert(&t, &row)?;
            }
            Ok(())
        })
        .unwrap();
    }
    (db, t)
}

/// Column `n` of every row, as a paged scan of `page_rows` hands them over (it fetches only
/// `n` and `b`, not the key's first column, so it must fetch the key itself to page on).
fn paged(db: &Arc<Database>, t: &TableRef, page_rows: usize) -> Vec<i64> {
    let scan = TableScan::new(db, t, &[2, 1]).unwrap().page_rows(page_rows);
    with_txn(db, |tx| {
        let mut seen = Vec::new();
        scan.for_each(tx, |r| {
            assert_eq!(r.len(), 2, "the caller sees its own columns only");
            assert!(string(r, 1)?.starts_with('k'));
            seen.push(int(r, 0)?);
            Ok(())
        })?;
        Ok(seen)
    })
    .unwrap()
}

#[test]
fn every_row_once_in_key_order_at_any_page_size() {
    for preset in [Preset::Full, Preset::Stripped] {
        let rows = 103;
        let (db, t) = filled(preset, rows);
        let all: Vec<i64> = (0..rows as i64).collect();
        for page_rows in [1, 2, 3, 5, 7, 50, 102, 103, 104, 4096] {
            assert_eq!(
                paged(&db, &t, page_rows),
                all,
                "{preset:?}, pages of {page_rows}"
            );
        }
        // The same rows as a read of the whole table at once.
        let whole = with_txn(&db, |tx| scan_all(tx, &t, &[2])).unwrap();
        let whole: Vec<i64> = whole.iter().map(|r| int(r, 0).unwrap()).collect();
        assert_eq!(whole, all);
    }
}

#[test]
fn an_empty_table_calls_nothing() {
    let (db, t) = filled(Preset::Full, 0);
    assert!(paged(&db, &t, 1).is_empty());
    assert!(paged(&db, &t, 4096).is_empty());
}

#[test]
fn the_callers_error_stops_the_scan() {
    let (db, t) = filled(Preset::Full, 40);
    let scan = TableScan::new(&db, &t, &[2]).unwrap().page_rows(3);
    let mut calls = 0;
    let mut tx = db.begin().unwrap();
    let result = scan.for_each(&mut tx, |r| {
        calls += 1;
        if int(r, 0)? == 10 {
            return Err(TxError::Invalid("stop at ten".into()));
        }
        Ok(())
    });
    tx.abort().unwrap();
    assert!(matches!(result, Err(TxError::Invalid(m)) if m == "stop at ten"));
    assert_eq!(calls, 11);
}

/// Column `n` of every row as a scan in storage order hands them over, and the progress it
/// reported last.
fn stored(db: &Arc<Database>, t: &TableRef, page_rows: usize) -> (Vec<i64>, Option<u64>) {
    let last = std::cell::Cell::new(None);
    let report = |table: &str, rows: u64| {
        assert_eq!(table, "t");
        assert!(last.get().is_none_or(|l| l <= rows), "progress went back");
        last.set(Some(rows));
    };
    let scan = TableScan::new(db, t, &[2])
        .unwrap()
        .page_rows(page_rows)
        .reporting_to(&report);
    let seen = with_txn(db, |tx| {
        let mut seen = Vec::new();
        scan.for_each_stored(tx, |r| {
            assert_eq!(r.len(), 1, "the caller sees its own columns only");
            seen.push(int(r, 0)?);
            Ok(())
        })?;
        Ok(seen)
    })
    .unwrap();
    (seen, last.get())
}

#[test]
fn a_scan_in_storage_order_hands_over_every_row_once() {
    for preset in [Preset::Full, Preset::Stripped] {
        let (db, t) = filled(preset, 1000);
        // Every tenth row deleted: a heap's freed slots are not rows.
        with_txn(&db, |tx| {
            for i in (0..1000).step_by(10) {
                let key = [Value::Int(i / 5), Value::Str(format!("k{:04}", i % 5))];
                assert!(tx.delete(&t, &key)?, "{key:?}");
            }
            Ok(())
        })
        .unwrap();
        let left: Vec<i64> = (0..1000).filter(|i| i % 10 != 0).collect();
        for page_rows in [1, 7, 256] {
            let (mut seen, last) = stored(&db, &t, page_rows);
            seen.sort_unstable();
            assert_eq!(seen, left, "{preset:?}, pages of {page_rows}");
            assert_eq!(
                last,
                Some(900),
                "{preset:?}: the last progress is every row"
            );
        }
    }
    let (db, t) = filled(Preset::Full, 0);
    assert_eq!(stored(&db, &t, 256), (vec![], Some(0)));
}

#[test]
fn a_scan_in_storage_order_stops_at_the_callers_error() {
    let (db, t) = filled(Preset::Full, 40);
    let scan = TableScan::new(&db, &t, &[2]).unwrap();
    let mut calls = 0;
    let mut tx = db.begin().unwrap();
    let result = scan.for_each_stored(&mut tx, |_| {
        calls += 1;
        if calls == 11 {
            return Err(TxError::Invalid("stop at eleven".into()));
        }
        Ok(())
    });
    tx.abort().unwrap();
    assert!(matches!(result, Err(TxError::Invalid(m)) if m == "stop at eleven"));
    assert_eq!(calls, 11);
}
