//! `read_with`, `read_columns_with`, `scan_columns_with`, `update_with` and
//! `update_columns_with`: the engine's
//! in-place forms against the trait's default forms (built on `get` and `update`, as a client-side transaction would run them), on every
//! preset; errors, rollback and index-key protection.

mod common;

use common::*;
use engine::{
    Fetch, IndexRef, KeyRange, Preset, ReadFn, Row, RowRef, TableRef, Tx, TxError, TxResult,
    UpdateFn, Value,
};

const PRESETS: [Preset; 2] = [Preset::Full, Preset::Stripped];

/// A `Tx` that only forwards the basic operations, so `read_with` and `update_with` take the
/// trait's default implementations over rows of values.
struct ValuesOnly<'a>(&'a mut dyn Tx);

impl Tx for ValuesOnly<'_> {
    fn get(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>> {
        self.0.get(table, key, fetch, for_update)
    }
    fn update(
        &mut self,
        table: &TableRef,
        key: &[Value],
        set: &[(usize, Value)],
    ) -> TxResult<bool> {
        self.0.update(table, key, set)
    }
    fn insert(&mut self, table: &TableRef, row: &[Value]) -> TxResult<()> {
        self.0.insert(table, row)
    }
    fn delete(&mut self, table: &TableRef, key: &[Value]) -> TxResult<bool> {
        self.0.delete(table, key)
    }
    fn scan(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        self.0.scan(table, range, limit, reverse, fetch, for_update)
    }
    fn scan_index(
        &mut self,
        index: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        self.0
            .scan_index(index, range, limit, reverse, fetch, for_update)
    }
}

/// Reads (owner, balance) of `id` through `read_with`.
fn owner_and_balance(tx: &mut dyn Tx, t: &TableRef, id: i64) -> TxResult<Option<(String, i64)>> {
    let mut out = None;
    let read: &mut ReadFn<'_> = &mut |r: RowRef<'_>| {
        out = Some((r.str(1)?.to_string(), r.int(2)?));
        Ok(())
    };
    let found = tx.read_with(t, &[Value::Int(id)], false, read)?;
    assert_eq!(found, out.is_some());
    Ok(out)
}

/// Reads (balance, owner) of `id` through `read_columns_with`, naming the two columns in the
/// order given (each is read at its own position either way).
fn named_columns(
    tx: &mut dyn Tx,
    t: &TableRef,
    id: i64,
    columns: &[usize],
) -> TxResult<Option<(i64, String)>> {
    let mut out = None;
    let found = tx.read_columns_with(t, &[Value::Int(id)], columns, false, &mut |r| {
        out = Some((r.int(2)?, r.str(1)?.to_string()));
        Ok(())
    })?;
    assert_eq!(found, out.is_some());
    Ok(out)
}

/// Adds `amount` to the balance of `id`; returns the balance before.
fn deposit(tx: &mut dyn Tx, t: &TableRef, id: i64, amount: i64) -> TxResult<Option<i64>> {
    let mut before = None;
    let f: &mut UpdateFn<'_> = &mut |r, set| {
        let balance = r.int(2)?;
        before = Some(balance);
        set.int(2, balance + amount);
        Ok(())
    };
    tx.update_with(t, &[Value::Int(id)], f)?;
    Ok(before)
}

/// Adds `amount` to the balance of `id` through `update_columns_with` of the balance only,
/// renaming its owner too when asked (`rename`: a column not read may be set); returns the
/// balance before.
fn deposit_named(
    tx: &mut dyn Tx,
    t: &TableRef,
    id: i64,
    amount: i64,
    rename: bool,
) -> TxResult<Option<i64>> {
    let mut before = None;
    tx.update_columns_with(t, &[Value::Int(id)], &[2], &mut |r, set| {
        let balance = r.int(2)?;
        before = Some(balance);
        set.int(2, balance + amount);
        if rename {
            set.set(1, Value::Str(format!("renamed{id}")));
        }
        Ok(())
    })?;
    Ok(before)
}

#[test]
fn in_place_and_default_forms_agree_on_every_preset() {
    for p in PRESETS {
        for default_forms in [false, true] {
            let db = open(p, 1);
            let t = load_accounts(&db, 300);
            db.run(|tx| {
                let tx: &mut dyn Tx = if default_forms {
                    &mut ValuesOnly(tx)
                } else {
                    tx
                };
                assert_eq!(
                    owner_and_balance(tx, &t, 42)?,
                    Some(("owner42".to_string(), 100))
                );
                assert_eq!(owner_and_balance(tx, &t, 1000)?, None);
                assert_eq!(deposit(tx, &t, 42, 25)?, Some(100));
                assert_eq!(deposit(tx, &t, 42, -5)?, Some(125));
                assert_eq!(deposit(tx, &t, 1000, 1)?, None);
                assert_eq!(owner_and_balance(tx, &t, 42)?.unwrap().1, 120);
                // Of some columns: the balance alone read, another column set all the same.
                assert_eq!(deposit_named(tx, &t, 43, 7, true)?, Some(100));
                assert_eq!(deposit_named(tx, &t, 43, -7, false)?, Some(107));
                assert_eq!(deposit_named(tx, &t, 1000, 1, true)?, None);
                assert_eq!(
                    owner_and_balance(tx, &t, 43)?,
                    Some(("renamed43".to_string(), 100))
                );
                for columns in [&[1, 2][..], &[2, 1]] {
                    assert_eq!(
                        named_columns(tx, &t, 42, columns)?,
                        Some((120, "owner42".to_string()))
                    );
                    assert_eq!(named_columns(tx, &t, 1000, columns)?, None);
                    // A scan's rows handed over one by one, each column at its position.
                    let (lo, hi) = ([Value::Int(40)], [Value::Int(44)]);
                    let mut seen = Vec::new();
                    tx.scan_columns_with(
                        &t,
                        KeyRange {
                            low: std::ops::Bound::Included(&lo[..]),
                            high: std::ops::Bound::Excluded(&hi[..]),
                        },
                        Some(3),
                        true,
                        columns,
                        false,
                        &mut |r| {
                            seen.push((r.int(2)?, r.str(1)?.to_string()));
                            Ok(())
                        },
                    )?;
                    let owner = |i: i64| format!("owner{i}");
                    assert_eq!(
                        seen,
                        [
                            (100, "renamed43".to_string()),
                            (120, owner(42)),
                            (100, owner(41))
                        ],
                        "columns {columns:?}"
                    );
                }
                Ok(())
            })
            .unwrap();
            let row = dump(&db, &t).into_iter().nth(42).unwrap();
            assert_eq!(
                row,
                vec![
                    Value::Int(42),
                    Value::Str("owner42".into()),
                    Value::Int(120)
                ],
                "preset {p:?}, default forms {default_forms}"
            );
            assert_eq!(total(&db, &t), 100 * 300 + 20);
            db.check_invariants().unwrap();
        }
    }
}

/// An update and a read-modify-write read the record and write it under one fix of its page
/// (they used to read it under a shared latch, then fix the page again to write).
#[test]
fn an_update_fixes_its_records_page_once() {
    let db = open(Preset::Full, 1);
    let t = load_accounts(&db, 300);
    let _on = engine::profile::collect();
    let heap_pages = |body: &mut dyn FnMut(&mut dyn Tx) -> TxResult<()>| {
        db.run(|tx| body(tx)).unwrap();
        engine::profile::last().heap_pages
    };
    let update = heap_pages(&mut |tx| {
        assert!(tx.update(&t, &[Value::Int(7)], &[(2, Value::Int(5))])?);
        Ok(())
    });
    let update_with = heap_pages(&mut |tx| {
        assert_eq!(deposit(tx, &t, 8, 3)?, Some(100));
        Ok(())
    });
    let unchanged = heap_pages(&mut |tx| {
        assert!(tx.update(&t, &[Value::Int(7)], &[(2, Value::Int(5))])?);
        Ok(())
    });
    assert_eq!((update, update_with, unchanged), (1, 1, 1));
    let rows = dump(&db, &t);
    assert_eq!(
        (rows[7][2].as_int(), rows[8][2].as_int()),
        (Some(5), Some(103))
    );
}

#[test]
fn a_failing_closure_changes_nothing_and_errors_name_the_column() {
    for p in PRESETS {
        let db = open(p, 1);
        let t = load_accounts(&db, 10);
        let mut tx = db.begin().unwrap();
        // Reading a string column as an integer names the column.
        let err = tx
            .read_with(&t, &[Value::Int(3)], false, &mut |r| r.int(1).map(drop))
            .unwrap_err();
        assert!(
            matches!(&err, TxError::Invalid(m) if m.contains("owner")),
            "{err}"
        );
        // A closure that fails after asking for a change: the row keeps its value.
        let err = tx
            .update_with(&t, &[Value::Int(3)], &mut |_, set| {
                set.int(2, 0);
                Err(TxError::UserAbort("changed my mind".into()))
            })
            .unwrap_err();
        assert!(matches!(err, TxError::UserAbort(_)));
        // A bad value is refused before anything is written.
        let err = tx
            .update_with(&t, &[Value::Int(3)], &mut |_, set| {
                set.int(2, 1);
                set.set(1, Value::Str("x".repeat(40)));
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(&err, TxError::Invalid(m) if m.contains("owner")),
            "{err}"
        );
        // The key column cannot change.
        let err = tx
            .update_with(&t, &[Value::Int(3)], &mut |_, set| {
                set.int(0, 77);
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(&err, TxError::Invalid(m) if m.contains("index key")),
            "{err}"
        );
        assert_eq!(owner_and_balance(&mut tx, &t, 3).unwrap().unwrap().1, 100);
        tx.commit().unwrap();
        assert_eq!(total(&db, &t), 1000, "preset {p:?}");
    }
}

/// Numbers set into NULL columns and next to them (on the stripped preset an update of
/// numbers alone is written into the record in place): they read back set with their null
/// bits cleared, a rollback brings back the NULLs and every byte, and a commit keeps them.
#[test]
fn numbers_set_into_null_columns_read_back_and_roll_back() {
    for p in PRESETS {
        for commit in [false, true] {
            let db = open(p, 1);
            let t = db
                .create_table(
                    engine::TableSchema::new("nums")
                        .int("id")
                        .int("n")
                        .nullable()
                        .float("f")
                        .nullable()
                        .int("plain")
                        .key(&["id"]),
                )
                .unwrap();
            db.run(|tx| {
                for id in 0..4 {
                    tx.insert(
                        &t,
                        &[Value::Int(id), Value::Null, Value::Null, Value::Int(id)],
                    )?;
                }
                Ok(())
            })
            .unwrap();
            let before = dump(&db, &t);
            let mut tx = db.begin().unwrap();
            for id in 0..4 {
                let found = tx
                    .update_with(&t, &[Value::Int(id)], &mut |r, w| {
                        if id % 2 == 0 {
                            w.int(1, id * 10);
                        }
                        w.float(2, id as f64 / 2.0);
                        w.int(3, r.int(3)? + 1);
                        Ok(())
                    })
                    .unwrap();
                assert!(found);
            }
            let expected: Vec<Vec<Value>> = (0..4)
                .map(|id| {
                    vec![
                        Value::Int(id),
                        if id % 2 == 0 {
                            Value::Int(id * 10)
                        } else {
                            Value::Null
                        },
                        Value::Float(id as f64 / 2.0),
                        Value::Int(id + 1),
                    ]
                })
                .collect();
            for (id, row) in expected.iter().enumerate() {
                let got = tx
                    .get(&t, &[Value::Int(id as i64)], Fetch::All, false)
                    .unwrap();
                assert_eq!(got.as_ref(), Some(row), "preset {p:?}");
            }
            if commit {
                tx.commit().unwrap();
                assert_eq!(dump(&db, &t), expected, "preset {p:?}");
            } else {
                tx.abort().unwrap();
                assert_eq!(dump(&db, &t), before, "preset {p:?}");
            }
            db.check_invariants().unwrap();
        }
    }
}

#[test]
fn rollback_takes_back_a_read_modify_write() {
    for p in PRESETS {
        let db = open(p, 1);
        let t = load_accounts(&db, 50);
        let before = dump(&db, &t);
        let mut tx = db.begin().unwrap();
        for id in 0..50 {
            deposit(&mut tx, &t, id, id).unwrap();
        }
        tx.abort().unwrap();
        assert_eq!(dump(&db, &t), before, "preset {p:?}");
        db.check_invariants().unwrap();
    }
}

/// `wide(id, a, pad, b, note)`: `a` and `b` lie 202 bytes apart, with `pad` between them.
fn wide_table(db: &engine::Database, rows: i64) -> TableRef {
    let t = db
        .create_table(
            engine::TableSchema::new("wide")
                .int("id")
                .int("a")
                .string("pad", 200)
                .int("b")
                .string("note", 8)
                .nullable()
                .key(&["id"])
                .int_key(&[32]),
        )
        .unwrap();
    db.run(|tx| {
        for id in 0..rows {
            tx.insert(
                &t,
                &[
                    Value::Int(id),
                    Value::Int(id),
                    Value::Str("p".repeat(200)),
                    Value::Int(-id),
                    Value::Null,
                ],
            )?;
        }
        Ok(())
    })
    .unwrap();
    t
}

#[test]
fn columns_far_apart_are_logged_and_undone_in_pieces() {
    for p in PRESETS {
        let db = open(p, 1);
        let t = wide_table(&db, 50);
        let before = dump(&db, &t);
        let log_bytes = || db.log().map_or(0, |l| l.stats().bytes);

        // Committed: a, b and the nullable note (which brings the null bitmap) change.
        let start = log_bytes();
        db.run(|tx| {
            for id in 0..50 {
                tx.update_with(&t, &[Value::Int(id)], &mut |r, set| {
                    set.int(1, r.int(1)? + 1000);
                    set.int(3, r.int(3)? - 1000);
                    set.set(4, Value::Str("noted".into()));
                    Ok(())
                })?;
            }
            Ok(())
        })
        .unwrap();
        if p == Preset::Full {
            // Undo + redo of three 8–10 byte pieces per row, not of the 200-byte pad between.
            let per_row = (log_bytes() - start) / 50;
            assert!(per_row < 200, "{per_row} log bytes per row");
        }
        let rows = dump(&db, &t);
        for (id, row) in rows.iter().enumerate() {
            let id = id as i64;
            assert_eq!(row[1], Value::Int(id + 1000));
            assert_eq!(row[2], Value::Str("p".repeat(200)));
            assert_eq!(row[3], Value::Int(-id - 1000));
            assert_eq!(row[4], Value::Str("noted".into()));
        }

        // Rolled back: every piece, null bitmap included, comes back exactly.
        let mut tx = db.begin().unwrap();
        for id in 0..50 {
            tx.update(
                &t,
                &[Value::Int(id)],
                &[(1, Value::Int(0)), (3, Value::Int(0)), (4, Value::Null)],
            )
            .unwrap();
        }
        tx.abort().unwrap();
        assert_eq!(dump(&db, &t), rows, "preset {p:?}");
        assert_ne!(rows, before);
        db.check_invariants().unwrap();
    }
}

/// Columns of `many`: `id`, then 69 of every kind (integers, floats, strings of several
/// widths, nullable or not), so updates reach columns past the 64 a bit mask covers.
const MANY_COLUMNS: usize = 70;

fn many_kind(c: usize) -> (u8, bool) {
    ((c % 5) as u8, c.is_multiple_of(3))
}

fn many_table(db: &engine::Database, rows: i64) -> TableRef {
    let mut schema = engine::TableSchema::new("many").int("id");
    for c in 1..MANY_COLUMNS {
        let name = format!("c{c}");
        let (kind, nullable) = many_kind(c);
        schema = match kind {
            0 | 1 => schema.int(&name),
            2 => schema.float(&name),
            3 => schema.string(&name, 2 + (c % 7) as u16),
            _ => schema.string(&name, 30),
        };
        if nullable {
            schema = schema.nullable();
        }
    }
    let t = db.create_table(schema.key(&["id"]).int_key(&[32])).unwrap();
    db.run(|tx| {
        for id in 0..rows {
            let row: Vec<Value> = (0..MANY_COLUMNS)
                .map(|c| {
                    if c == 0 {
                        Value::Int(id)
                    } else {
                        many_value(c, id as u64 * 7 + c as u64)
                    }
                })
                .collect();
            tx.insert(&t, &row)?;
        }
        Ok(())
    })
    .unwrap();
    t
}

/// A value column `c` of `many` can hold, chosen by `seed` (NULL where allowed).
fn many_value(c: usize, seed: u64) -> Value {
    let (kind, nullable) = many_kind(c);
    if nullable && seed.is_multiple_of(4) {
        return Value::Null;
    }
    match kind {
        0 | 1 => Value::Int(seed as i64 - 1000),
        2 => Value::Float(seed as f64 / 8.0),
        3 => Value::Str("x".repeat((seed % (3 + c as u64 % 7)) as usize)),
        _ => Value::Str(format!("{:x}", seed % 0x10000).repeat(1 + (seed % 3) as usize)),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Updates of any set of columns, near together (their spans merge across the bytes
    /// between) or far apart (pieces), past column 64 or not, NULLs included, numbers alone
    /// (in place on the stripped preset) or with strings: the row reads back as a model of it
    /// says, through `update_with` and `update`, and a rollback brings back every byte.
    #[test]
    fn updates_of_any_columns_read_back_as_set(
        stripped in proptest::prelude::any::<bool>(),
        updates in proptest::collection::vec(
            (0i64..4, proptest::collection::vec((1..MANY_COLUMNS, proptest::prelude::any::<u64>()), 1..14), proptest::prelude::any::<bool>()),
            1..6,
        ),
        rollback in proptest::prelude::any::<bool>(),
    ) {
        let db = open(if stripped { Preset::Stripped } else { Preset::Full }, 1);
        let t = many_table(&db, 4);
        let before = dump(&db, &t);
        let mut model = before.clone();
        let mut tx = db.begin().unwrap();
        for (id, sets, computed) in &updates {
            let sets: Vec<(usize, Value)> =
                sets.iter().map(|&(c, seed)| (c, many_value(c, seed))).collect();
            let found = if *computed {
                // Numbers through the typed setters (on the main-memory store an update of
                // numbers alone is made in place), the rest through `set` (which makes the
                // record copy, after any numbers set before it).
                tx.update_with(&t, &[Value::Int(*id)], &mut |_, w| {
                    for (c, v) in &sets {
                        match v {
                            Value::Int(i) => w.int(*c, *i),
                            Value::Float(f) => w.float(*c, *f),
                            other => w.set(*c, other.clone()),
                        }
                    }
                    Ok(())
                })
            } else {
                tx.update(&t, &[Value::Int(*id)], &sets)
            };
            proptest::prop_assert!(found.unwrap());
            for (c, v) in sets {
                model[*id as usize][c] = v;
            }
            let row = tx.get(&t, &[Value::Int(*id)], Fetch::All, false).unwrap().unwrap();
            proptest::prop_assert_eq!(&row, &model[*id as usize]);
        }
        if rollback {
            tx.abort().unwrap();
            proptest::prop_assert_eq!(dump(&db, &t), before);
        } else {
            tx.commit().unwrap();
            proptest::prop_assert_eq!(dump(&db, &t), model);
        }
        db.check_invariants().unwrap();
    }
}
