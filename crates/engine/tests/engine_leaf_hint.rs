//! A transaction's B+-tree inserts go through a leaf hint per index (see
//! `storage::btree::LeafHint`): the lines of one order skip the descent. A hint names a page
//! of one tree of one database, so it must not outlive its transaction: sessions are kept per
//! thread, and two databases in one thread give their tables the same ids.

mod common;

use std::sync::Arc;

use common::*;
use engine::{Database, DbConfig, Preset, Switch, Switches, TableRef, Tx, Value};

fn open_full(locking: bool, xactions: bool) -> Arc<Database> {
    let mut switches = Switches::preset(Preset::Full);
    switches.set(Switch::Locking, locking);
    switches.set(Switch::Xactions, xactions);
    Database::open(DbConfig {
        switches,
        pool_mib: 16,
        ..DbConfig::default()
    })
    .unwrap()
}

fn row(id: i64) -> Vec<Value> {
    vec![Value::Int(id), Value::Str(format!("o{id}")), Value::Int(1)]
}

fn ids(db: &Database, t: &TableRef) -> Vec<i64> {
    dump(db, t).iter().map(|r| r[0].as_int().unwrap()).collect()
}

/// Transactions alternate between two databases in one thread, each appending keys at two
/// places of its table: with and without record locking (whose inserts take different paths
/// through the index), and without transaction management (whose sessions, hints included,
/// pass from one transaction of the thread to the next). The second database has another
/// table's pages among its own, so a page a hint of the first names is something else there.
/// Every key arrives, once, and both databases stay well formed.
#[test]
fn hints_stay_within_their_transaction_and_database() {
    for (locking, xactions) in [(true, true), (false, true), (false, false)] {
        let dbs = [open_full(locking, xactions), open_full(locking, xactions)];
        let tables: Vec<TableRef> = dbs
            .iter()
            .map(|db| db.create_table(accounts_schema()).unwrap())
            .collect();
        assert_eq!(tables[0].id, tables[1].id, "same ids, same lock spaces");
        let other = dbs[1].create_table(receipts_schema()).unwrap();
        let mut want: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
        for round in 0..60i64 {
            for (n, (db, t)) in dbs.iter().zip(&tables).enumerate() {
                // The two databases' keys interleave, so a page of one names another range
                // of the other.
                let base = n as i64 * 25;
                let keys: Vec<i64> = (0..25)
                    .flat_map(|i| {
                        let at = round * 50 + base + i;
                        [at, 1_000_000 - at]
                    })
                    .collect();
                db.run(|tx| keys.iter().try_for_each(|id| tx.insert(t, &row(*id))))
                    .unwrap();
                if n == 1 {
                    dbs[1]
                        .run(|tx| {
                            (0..40).try_for_each(|i| {
                                let seq = round * 40 + i;
                                tx.insert(&other, &[Value::Int(seq), Value::Int(seq)])
                            })
                        })
                        .unwrap();
                }
                want[n].extend(&keys);
            }
        }
        for (n, (db, t)) in dbs.iter().zip(&tables).enumerate() {
            db.check_invariants().unwrap();
            want[n].sort_unstable();
            assert_eq!(ids(db, t), want[n], "database {n}, {locking} {xactions}");
        }
    }
}
