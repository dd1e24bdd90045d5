//! Each switch removes its component's work, not only its effect: with the switch off the
//! component's counters stay at zero (or the component is not there at all), with it on they
//! move. Instruction counts per rung are measured by `glass ladder` (crates/bench).

mod common;

use std::sync::Arc;

use common::*;
use engine::{Database, DbConfig, Fetch, Preset, Switch, Switches, Tx, Value};
use storage::counters;

/// Opens an in-memory database with `off` switched off (and what it needs switched off).
fn open_with(off: &[Switch], durable: bool) -> Arc<Database> {
    let mut s = Switches::preset(Preset::Full);
    for sw in off {
        s.set(*sw, false);
    }
    Database::open(DbConfig {
        switches: s,
        durable,
        pool_mib: 16,
        ..DbConfig::default()
    })
    .unwrap()
}

/// A few transactions of reads and writes; returns the storage counters they moved.
fn work(db: &Database) -> counters::StorageCounters {
    let t = load_accounts(db, 300);
    counters::reset();
    let before = counters::snapshot();
    for i in 0..50 {
        db.run(|tx| {
            transfer(tx, &t, i, i + 100, 1)?;
            tx.get(&t, &[Value::Int(i + 7)], Fetch::All, false)
        })
        .unwrap();
    }
    counters::snapshot() - before
}

#[test]
fn locking_off_runs_no_lock_manager() {
    let on = open_with(&[], false);
    work(&on);
    assert!(on.lock_manager().unwrap().stats().requests > 0);
    let off = open_with(&[Switch::Locking], false);
    work(&off);
    assert!(
        off.lock_manager().is_none(),
        "locking=off must not build a lock manager"
    );
}

#[test]
fn main_log_off_builds_no_records_and_lsn_off_has_no_log() {
    let on = open_with(&[], false);
    work(&on);
    let s = on.log().unwrap().stats();
    assert!(s.records > 0 && s.bytes > 0, "{s:?}");
    let off = open_with(&[Switch::DiskLog, Switch::MainLog], false);
    work(&off);
    let s = off.log().unwrap().stats();
    assert_eq!(
        (s.records, s.bytes),
        (0, 0),
        "main-log=off still built records: {s:?}"
    );
    let none = open_with(&[Switch::DiskLog, Switch::MainLog, Switch::Lsn], false);
    work(&none);
    assert!(
        none.log().is_none(),
        "lsn=off with main-log=off must not keep a log at all"
    );
}

#[test]
fn disk_log_off_never_forces_the_log() {
    let on = open_with(&[], true);
    work(&on);
    assert!(on.log().unwrap().stats().syncs > 0);
    let off = open_with(&[Switch::DiskLog], true);
    work(&off);
    let s = off.log().unwrap().stats();
    assert_eq!(s.syncs, 0, "disk-log=off forced the log: {s:?}");
    assert!(s.records > 0, "disk-log=off must still build records");
}

#[test]
fn latching_off_acquires_no_latch() {
    let on = open_with(&[], false);
    assert!(work(&on).latches > 0);
    let off = open_with(&[Switch::Locking, Switch::Latching], false);
    let moved = work(&off);
    assert_eq!(moved.latches, 0, "latching=off still latched: {moved:?}");
    assert!(moved.fixes > 0, "the buffer pool must still be in use");
}

#[test]
fn page_access_off_fixes_no_page() {
    let on = open_with(&[], false);
    let moved = work(&on);
    assert!(moved.fixes > 0 && moved.node_visits > 0, "{moved:?}");
    let off = open_with(&[Switch::PageAccess], false);
    let moved = work(&off);
    assert_eq!(
        (moved.fixes, moved.node_visits),
        (0, 0),
        "page-access=off touched pages: {moved:?}"
    );
    assert!(off.pool().is_none());
}

#[test]
fn small_page_off_uses_32_kib_pages() {
    assert_eq!(open_with(&[], false).pool().unwrap().page_size(), 8192);
    let off = open_with(&[Switch::SmallPage], false);
    assert_eq!(off.pool().unwrap().page_size(), 32768);
    // Bigger nodes: the same lookups visit fewer B+-tree nodes.
    let on_visits = work(&open_with(&[], false)).node_visits;
    let off_visits = work(&off).node_visits;
    assert!(off_visits <= on_visits, "{off_visits} > {on_visits}");
}

#[test]
fn btree_keys_off_takes_the_integer_path() {
    // The integer path compares one u64 per probe; both paths must agree on every answer.
    for off in [&[][..], &[Switch::BtreeKeys][..]] {
        let db = open_with(off, false);
        let t = load_accounts(&db, 500);
        let rows = dump(&db, &t);
        let ids: Vec<i64> = rows.iter().map(|r| r[0].as_int().unwrap()).collect();
        assert_eq!(ids, (0..500).collect::<Vec<_>>());
    }
}

#[test]
fn dir_lookup_off_uses_the_cached_handle_without_a_name_lookup() {
    let on = open_with(&[], false);
    let t = load_accounts(&on, 3);
    let stale = engine::TableRef {
        name: "renamed".into(),
        id: t.id,
    };
    let looked_up = on.run(|tx| tx.get(&stale, &[Value::Int(1)], Fetch::All, false));
    assert!(
        looked_up.is_err(),
        "dir-lookup=on must resolve the name on every operation"
    );
    let off = open_with(&[Switch::DirLookup], false);
    let t = load_accounts(&off, 3);
    let stale = engine::TableRef {
        name: "renamed".into(),
        id: t.id,
    };
    let row = off
        .run(|tx| tx.get(&stale, &[Value::Int(1)], Fetch::All, false))
        .unwrap();
    assert!(
        row.is_some(),
        "dir-lookup=off must go straight to the cached slot"
    );
}

#[test]
fn xactions_off_keeps_no_active_transaction_table() {
    let on = open_with(&[], false);
    let tx = on.begin().unwrap();
    assert_eq!(on.running_transactions(), 1);
    tx.commit().unwrap();
    assert_eq!(on.running_transactions(), 0);
    let off = open_with(&[Switch::Xactions], false);
    let tx = off.begin().unwrap();
    assert_eq!(
        off.running_transactions(),
        0,
        "xactions=off must not register transactions"
    );
    tx.commit().unwrap();
}

#[test]
fn page_access_off_merges_a_bulk_load_when_it_ends() {
    let db = open(Preset::Stripped, 1);
    let t = load_accounts(&db, 1000);
    // Integer keys on a main-memory index: inserts leave the ordered map alone.
    assert_eq!(db.pending_index_entries(), 1000);
    db.finish_load();
    assert_eq!(db.pending_index_entries(), 0);
    db.check_invariants().unwrap();
    let ids: Vec<i64> = dump(&db, &t)
        .iter()
        .map(|r| r[0].as_int().unwrap())
        .collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
    // Keys 0..1000 fill their leaves: the index is now a dense map, ordered as it goes, so
    // a later insert is never pending and the next scan finds it in place.
    db.run(|tx| {
        tx.insert(
            &t,
            &[Value::Int(5000), Value::Str("late".into()), Value::Int(1)],
        )
    })
    .unwrap();
    assert_eq!(db.pending_index_entries(), 0);
    assert_eq!(dump(&db, &t).len(), 1001);

    // Keys a million apart stay in a hash map: a later insert is pending again, and the next
    // scan merges it.
    let sparse = open(Preset::Stripped, 1);
    let s = sparse.create_table(accounts_schema()).unwrap();
    sparse
        .run(|tx| {
            for id in 0..1000i64 {
                let row = [
                    Value::Int(id * 1_000_000),
                    Value::Str("far".into()),
                    Value::Int(1),
                ];
                tx.insert(&s, &row)?;
            }
            Ok(())
        })
        .unwrap();
    sparse.finish_load();
    assert_eq!(sparse.pending_index_entries(), 0);
    sparse
        .run(|tx| {
            tx.insert(
                &s,
                &[Value::Int(7), Value::Str("late".into()), Value::Int(1)],
            )
        })
        .unwrap();
    assert_eq!(sparse.pending_index_entries(), 1);
    assert_eq!(dump(&sparse, &s).len(), 1001);
    assert_eq!(sparse.pending_index_entries(), 0);
    sparse.check_invariants().unwrap();

    // B+-trees keep nothing pending.
    let full = open(Preset::Full, 1);
    load_accounts(&full, 100);
    assert_eq!(full.pending_index_entries(), 0);
}
