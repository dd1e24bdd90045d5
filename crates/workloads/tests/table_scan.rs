//! `TableScan`, the paged whole-table read of the consistency checks: every row exactly once,
//! in primary-key order, whatever the page size and wherever the pages break, over B+-trees
//! and the main-memory indexes, with composite and string keys; an error from the caller
//! stops it and comes back.

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

/// Column `n` of every row as a scan in turns by the first key column's `prefixes` hands
/// them over, pages of `page_rows`.
fn in_turns(
    db: &Arc<Database>,
    t: &TableRef,
    page_rows: usize,
    prefixes: &[Vec<i64>],
) -> Result<Vec<i64>, TxError> {
    let scan = TableScan::new(db, t, &[2]).unwrap().page_rows(page_rows);
    with_txn(db, |tx| {
        let mut seen = Vec::new();
        scan.for_each_interleaved(tx, prefixes, |r| {
            seen.push(int(r, 0)?);
            Ok(())
        })?;
        Ok(seen)
    })
}

/// The order a scan in turns promises, worked out from the rows' keys: first the rows under
/// none of `firsts` (values of the first key column), in key order; then, for each first
/// value in ascending order in turn, its next `page_rows` rows, until all are handed over.
fn turns_expected(keys: &[(i64, i64)], page_rows: usize, firsts: &[i64]) -> Vec<i64> {
    // `keys`: (first key column, n), in key order.
    let mut out: Vec<i64> = keys
        .iter()
        .filter(|(a, _)| !firsts.contains(a))
        .map(|&(_, n)| n)
        .collect();
    let mut firsts = firsts.to_vec();
    firsts.sort_unstable();
    firsts.dedup();
    let mut queues: Vec<Vec<i64>> = firsts
        .iter()
        .map(|f| {
            keys.iter()
                .filter(|(a, _)| a == f)
                .map(|&(_, n)| n)
                .collect()
        })
        .collect();
    while queues.iter().any(|q| !q.is_empty()) {
        for q in &mut queues {
            let take = q.len().min(page_rows);
            out.extend(q.drain(..take));
        }
    }
    out
}

#[test]
fn a_scan_in_turns_hands_over_every_row_once_a_page_from_each_prefix_in_turn() {
    for preset in [Preset::Full, Preset::Stripped] {
        let rows = 103;
        let (db, t) = filled(preset, rows);
        // Rows numbered in key order: row n has first key column n / 5.
        let keys: Vec<(i64, i64)> = (0..rows as i64).map(|n| (n / 5, n)).collect();
        // Unsorted, repeated, one (99) with no rows, and rows before, between and after them.
        let firsts = [12, 3, 7, 3, 99, 1];
        let prefixes: Vec<Vec<i64>> = firsts.iter().map(|&a| vec![a]).collect();
        for page_rows in [1, 2, 3, 5, 7, 4096] {
            let seen = in_turns(&db, &t, page_rows, &prefixes).unwrap();
            assert_eq!(
                seen,
                turns_expected(&keys, page_rows, &firsts),
                "{preset:?}, pages of {page_rows}"
            );
            let mut sorted = seen;
            sorted.sort_unstable();
            let all: Vec<i64> = (0..rows as i64).collect();
            assert_eq!(
                sorted, all,
                "{preset:?}, pages of {page_rows}: every row once"
            );
        }
        // No prefixes: the whole table in key order.
        assert_eq!(
            in_turns(&db, &t, 4, &[]).unwrap(),
            (0..rows as i64).collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_scan_in_turns_refuses_prefixes_of_different_lengths() {
    let (db, t) = filled(Preset::Full, 20);
    let err = in_turns(&db, &t, 4, &[vec![1], vec![1, 2]]).unwrap_err();
    assert!(
        matches!(&err, TxError::Invalid(m) if m.contains("prefixes of one length")),
        "{err:?}"
    );
}
