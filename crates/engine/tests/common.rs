//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use engine::{
    Database, DbConfig, Fetch, KeyRange, Preset, Switches, TableRef, TableSchema, Tx, TxError,
    Value,
};

/// An `accounts(id, owner, balance)` table.
pub fn accounts_schema() -> TableSchema {
    TableSchema::new("accounts")
        .int("id")
        .string("owner", 16)
        .int("balance")
        .key(&["id"])
        .int_key(&[32])
}

/// A `receipts(seq, amount)` table (the crash tests' record of what committed).
pub fn receipts_schema() -> TableSchema {
    TableSchema::new("receipts")
        .int("seq")
        .int("amount")
        .key(&["seq"])
        .int_key(&[40])
}

pub fn open(preset: Preset, threads: usize) -> Arc<Database> {
    Database::open(DbConfig {
        switches: Switches::preset(preset),
        threads,
        pool_mib: 16,
        ..DbConfig::default()
    })
    .unwrap()
}

/// Creates `accounts` with `n` rows of balance 100.
pub fn load_accounts(db: &Database, n: i64) -> TableRef {
    let t = db.create_table(accounts_schema()).unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        db.run(|tx| {
            for id in chunk {
                tx.insert(
                    &t,
                    &[
                        Value::Int(*id),
                        Value::Str(format!("owner{id}")),
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

/// A secondary index of `accounts` by owner, not unique.
pub fn index_accounts_by_owner(db: &Database) -> engine::IndexRef {
    db.create_index(engine::IndexSchema {
        name: "accounts_by_owner".into(),
        table: "accounts".into(),
        columns: vec![1],
        unique: false,
        kind: Default::default(),
        int_key_bits: None,
    })
    .unwrap()
}

/// Every row of a table in key order.
pub fn dump(db: &Database, t: &TableRef) -> Vec<Vec<Value>> {
    db.run(|tx| {
        tx.scan(
            t,
            KeyRange {
                low: std::ops::Bound::Unbounded,
                high: std::ops::Bound::Unbounded,
            },
            None,
            false,
            Fetch::All,
            false,
        )
    })
    .unwrap()
}

/// Sum of the balance column.
pub fn total(db: &Database, t: &TableRef) -> i64 {
    dump(db, t).iter().map(|r| r[2].as_int().unwrap()).sum()
}

/// The balance of account `id` of the `accounts` table, read in a transaction of its own.
pub fn balance(db: &Database, id: i64) -> i64 {
    let t = db.table("accounts").unwrap();
    let row = db
        .run(|tx| tx.get(&t, &[Value::Int(id)], Fetch::Cols(&[2]), false))
        .unwrap()
        .unwrap();
    row[0].as_int().unwrap()
}

/// Moves `amount` from `from` to `to` in one transaction body (no commit).
pub fn transfer(
    tx: &mut dyn Tx,
    t: &TableRef,
    from: i64,
    to: i64,
    amount: i64,
) -> Result<(), TxError> {
    let a = tx
        .get(t, &[Value::Int(from)], Fetch::Cols(&[2]), true)?
        .ok_or_else(|| TxError::Invalid("no source".into()))?;
    let b = tx
        .get(t, &[Value::Int(to)], Fetch::Cols(&[2]), true)?
        .ok_or_else(|| TxError::Invalid("no target".into()))?;
    tx.update(
        t,
        &[Value::Int(from)],
        &[(2, Value::Int(a[0].as_int().unwrap() - amount))],
    )?;
    tx.update(
        t,
        &[Value::Int(to)],
        &[(2, Value::Int(b[0].as_int().unwrap() + amount))],
    )?;
    Ok(())
}

/// The same transfer as [`transfer`], by read-modify-write (`update_with`): each row is found
/// and locked exclusively once.
pub fn transfer_in_place(
    tx: &mut dyn Tx,
    t: &TableRef,
    from: i64,
    to: i64,
    amount: i64,
) -> Result<(), TxError> {
    for (id, delta) in [(from, -amount), (to, amount)] {
        let found = tx.update_with(t, &[Value::Int(id)], &mut |r, set| {
            set.int(2, r.int(2)? + delta);
            Ok(())
        })?;
        if !found {
            return Err(TxError::Invalid(format!("no account {id}")));
        }
    }
    Ok(())
}
