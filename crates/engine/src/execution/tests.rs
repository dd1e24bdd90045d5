//! The strategies against a table far larger than the buffer pool: what a fetch stage may not
//! do, OTSTE's conversion, TSTE's pins.

use std::ops::Bound;
use std::sync::Arc;

use super::fetch::FetchTx;
use super::{ExecutionConfig, Executor, Strategy};
use crate::api::{Fetch, KeyRange, Tx};
use crate::db::{Database, DbConfig};
use crate::schema::TableSchema;
use crate::value::Value;
use crate::TableRef;

/// Rows of [`load`]: about 18 to a page, some 1,100 pages (9 MiB) against a 1 MiB pool.
const ROWS: i64 = 20_000;

fn open() -> Arc<Database> {
    Database::open(DbConfig {
        pool_mib: 1,
        page_locking: true,
        ..DbConfig::default()
    })
    .unwrap()
}

/// `wide(id, pad, balance)`, `ROWS` rows of balance 100.
fn load(db: &Database) -> TableRef {
    let t = db
        .create_table(
            TableSchema::new("wide")
                .int("id")
                .string("pad", 400)
                .int("balance")
                .key(&["id"])
                .int_key(&[32]),
        )
        .unwrap();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1000) {
        db.run(|tx| {
            for id in chunk {
                tx.insert(
                    &t,
                    &[
                        Value::Int(*id),
                        Value::Str("p".repeat(400)),
                        Value::Int(100),
                    ],
                )?;
            }
            Ok(())
        })
        .unwrap();
    }
    t
}

fn balance(db: &Database, t: &TableRef, id: i64) -> Option<i64> {
    db.run(|tx| tx.get(t, &[Value::Int(id)], Fetch::Cols(&[2]), false))
        .unwrap()
        .map(|row| match row[0] {
            Value::Int(b) => b,
            ref other => panic!("balance {other:?}"),
        })
}

/// Reads rows `0..n`, so that the pool holds their pages and little else.
fn warm(db: &Database, t: &TableRef, n: i64) {
    db.run(|tx| {
        for id in 0..n {
            tx.get(t, &[Value::Int(id)], Fetch::Cols(&[0]), false)?;
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_fetch_stage_writes_nothing_and_takes_no_lock() {
    let db = open();
    let t = load(&db);
    let pool = db.pool().unwrap();
    pool.flush_all().unwrap();
    let log_end = db.log().unwrap().end_lsn();
    let before: Vec<Option<i64>> = [1, 2, 3, 4].map(|id| balance(&db, &t, id)).to_vec();
    let locks = db.lock_manager().unwrap().stats();

    let mut tx = FetchTx::new(&db);
    assert!(tx
        .update(&t, &[Value::Int(1)], &[(2, Value::Int(7))])
        .unwrap());
    let mut seen = None;
    assert!(tx
        .update_with(&t, &[Value::Int(2)], &mut |row, w| {
            seen = Some(row.int(2)?);
            w.int(2, 8);
            Ok(())
        })
        .unwrap());
    assert_eq!(seen, Some(100), "update_with's closure sees the row");
    tx.insert(
        &t,
        &[Value::Int(ROWS + 5), Value::Str("x".into()), Value::Int(1)],
    )
    .unwrap();
    assert!(tx.delete(&t, &[Value::Int(3)]).unwrap());
    assert!(tx
        .get(&t, &[Value::Int(4)], Fetch::All, true)
        .unwrap()
        .is_some());
    let range = [Value::Int(10)];
    let high = [Value::Int(19)];
    let rows = tx
        .scan(
            &t,
            KeyRange {
                low: Bound::Included(&range),
                high: Bound::Included(&high),
            },
            None,
            false,
            Fetch::Cols(&[0]),
            true,
        )
        .unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(tx.operations, 6);

    assert_eq!(db.log().unwrap().end_lsn(), log_end, "the stage logged");
    let after = db.lock_manager().unwrap().stats();
    assert_eq!(after.requests, locks.requests, "the stage asked for a lock");
    assert_eq!(db.lock_manager().unwrap().lock_name_count(), 0);
    assert!(pool.dirty_pages().is_empty(), "the stage changed a page");
    let now: Vec<Option<i64>> = [1, 2, 3, 4].map(|id| balance(&db, &t, id)).to_vec();
    assert_eq!(now, before);
    assert_eq!(balance(&db, &t, ROWS + 5), None, "the stage inserted");
    db.check_invariants().unwrap();
}

/// Adds one to row 0's balance, then reads row `ROWS - 1` (far from it on disk); counts runs.
fn bump_and_read_far(runs: &mut u32) -> impl FnMut(&mut dyn Tx) -> crate::TxResult<()> + '_ {
    move |tx| {
        *runs += 1;
        let t = TableRef {
            id: 0,
            name: "wide".into(),
        };
        tx.update_with(&t, &[Value::Int(0)], &mut |row, w| {
            let b = row.int(2)?;
            w.int(2, b + 1);
            Ok(())
        })?;
        tx.get(&t, &[Value::Int(ROWS - 1)], Fetch::Cols(&[2]), false)?;
        Ok(())
    }
}

/// An executor of one transaction type, "bump", under `strategy`.
fn executor(db: &Database, strategy: Strategy) -> Executor {
    Executor::new(
        db,
        ExecutionConfig {
            strategy,
            ..Default::default()
        },
        &["bump"],
    )
    .unwrap()
}

#[test]
fn otste_converts_on_its_first_read_and_its_writes_happen_once() {
    let db = open();
    let t = load(&db);
    warm(&db, &t, 3000);
    let ex = executor(&db, Strategy::Otste);
    let mut runs = 0;
    let report = ex
        .run(&db, 0, true, &mut bump_and_read_far(&mut runs))
        .unwrap();
    assert!(report.converted && report.two_stage, "{report:?}");
    assert_eq!(runs, 3, "operate (refused), fetch, operate");
    assert!(report.fetch_reads > 0, "{report:?}");
    assert_eq!(report.operate_reads, 0, "{report:?}");
    assert!(report.pinned_pages > 0);
    assert_eq!(
        balance(&db, &t, 0),
        Some(101),
        "the rolled-back bump counted"
    );
    assert_eq!(
        db.pool().unwrap().held_pins(),
        0,
        "pins outlived the transaction"
    );

    // Everything it needs is in the pool now: one stage, no conversion.
    let report = ex
        .run(&db, 0, true, &mut bump_and_read_far(&mut runs))
        .unwrap();
    assert!(!report.converted && !report.two_stage, "{report:?}");
    assert_eq!(runs, 4);
    assert_eq!(balance(&db, &t, 0), Some(102));
    let totals = &ex.totals()[0];
    assert_eq!((totals.instances, totals.converted), (2, 1));
    db.check_invariants().unwrap();
}

#[test]
fn tste_reads_in_the_fetch_stage_and_holds_until_the_end() {
    let db = open();
    let t = load(&db);
    warm(&db, &t, 3000);
    let ex = executor(&db, Strategy::Tste);
    let mut runs = 0;
    let report = ex
        .run(&db, 0, true, &mut bump_and_read_far(&mut runs))
        .unwrap();
    assert_eq!(runs, 2);
    assert!(report.two_stage && !report.converted);
    assert!(
        report.fetch_reads > 0 && report.operate_reads == 0,
        "{report:?}"
    );
    assert!(report.operate_fixes > 0 && report.fixes > report.operate_fixes);
    assert!(report.pinned_pages >= 2, "{report:?}");
    assert_eq!(db.pool().unwrap().held_pins(), 0);
    assert_eq!(balance(&db, &t, 0), Some(101));

    // Conventional: one run, which reads with its lock on row 0 held.
    let conventional = executor(&db, Strategy::Conventional);
    warm(&db, &t, 3000);
    let report = conventional
        .run(&db, 0, true, &mut bump_and_read_far(&mut runs))
        .unwrap();
    assert_eq!(runs, 3);
    assert!(!report.two_stage && report.operate_reads > 0, "{report:?}");
    assert_eq!(report.pinned_pages, 0);
    assert_eq!(balance(&db, &t, 0), Some(102));
}

#[test]
fn two_stage_execution_needs_the_buffer_pool() {
    let mut switches = crate::Switches::preset(crate::Preset::Full);
    switches.set(crate::Switch::PageAccess, false);
    let db = Database::open(DbConfig {
        switches,
        ..DbConfig::default()
    })
    .unwrap();
    let refused = Executor::new(
        &db,
        ExecutionConfig {
            strategy: Strategy::Tste,
            ..Default::default()
        },
        &["t"],
    );
    let message = refused.err().expect("refused").to_string();
    assert!(message.contains("needs the buffer pool"), "{message}");
    assert!(Executor::new(&db, ExecutionConfig::default(), &["t"]).is_ok());
}

/// The paper's order-line disk: a table named in `second_device_tables` has every page of its
/// heap and its primary index on device 1, the others on device 0.
#[test]
fn a_table_on_the_second_device_has_its_pages_there() {
    let db = Database::open(DbConfig {
        second_device_tables: vec!["wide".into()],
        ..DbConfig::default()
    })
    .unwrap();
    let t = load(&db);
    let other = db
        .create_table(TableSchema::new("other").int("id").key(&["id"]))
        .unwrap();
    db.run(|tx| tx.insert(&other, &[Value::Int(1)])).unwrap();
    let pool = db.pool().unwrap();
    let device = |page: u64| {
        let g = pool.fix_shared(storage::PageId(page)).unwrap();
        (
            g[storage::page::OFFSET_KIND],
            g[storage::page::OFFSET_DEVICE],
        )
    };
    let wide = db.resolve_table(&t).unwrap();
    let other = db.resolve_table(&other).unwrap();
    let (wide_first, other_first) = (
        wide.records.first_page().unwrap().0,
        other.records.first_page().unwrap().0,
    );
    assert_eq!(device(wide_first).1, 1);
    assert_eq!(device(wide.primary.root().unwrap().0).1, 1);
    assert_eq!(device(other_first).1, 0);
    // Every page the load allocated for `wide` (heap and B+-tree alike) names device 1.
    let (mut on_one, mut on_zero) = (0, 0);
    for page in 1..pool.page_count() {
        let (kind, d) = device(page);
        if kind != 0 && page != other_first && page != other.primary.root().unwrap().0 {
            if d == 1 {
                on_one += 1
            } else {
                on_zero += 1
            }
        }
    }
    assert!(on_one > 1000, "{on_one} pages on device 1");
    assert_eq!(on_zero, 0, "pages of `wide` on device 0");
}
