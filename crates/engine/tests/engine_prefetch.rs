//! `Tx::prefetch`, `Tx::prefetch_columns` and `Tx::prefetch_inserts`: hints that start loading
//! rows (some of their columns; for inserts, only their index slots) and change nothing. They
//! act only on main-memory records reached through an integer index (`page-access` off), and
//! only when the configuration lets them; the storage counters count the records they started
//! loading.

mod common;

use common::*;
use engine::{Database, DbConfig, Preset, Switches, TableRef, TableSchema, Tx, Value};
use storage::counters;

fn open_with(preset: Preset, prefetch: bool) -> std::sync::Arc<Database> {
    Database::open(DbConfig {
        switches: Switches::preset(preset),
        pool_mib: 16,
        prefetch,
        ..DbConfig::default()
    })
    .unwrap()
}

/// Which hint a test gives: `Tx::prefetch` (rows to read or update), `Tx::prefetch_columns`
/// (the same, these columns only) or `Tx::prefetch_inserts` (rows to insert).
#[derive(Clone, Copy)]
enum Hint<'a> {
    Lookups,
    Columns(&'a [usize]),
    Inserts,
}

/// How many records a hint naming `rows` started loading.
fn hint_of(db: &Database, kind: Hint, rows: &[(&TableRef, &[i64])]) -> u64 {
    db.run(|tx| {
        let before = counters::snapshot().prefetches;
        match kind {
            Hint::Lookups => tx.prefetch(rows),
            Hint::Columns(columns) => tx.prefetch_columns(rows, columns),
            Hint::Inserts => tx.prefetch_inserts(rows),
        }
        Ok(counters::snapshot().prefetches - before)
    })
    .unwrap()
}

fn hint(db: &Database, rows: &[(&TableRef, &[i64])]) -> u64 {
    hint_of(db, Hint::Lookups, rows)
}

#[test]
fn a_hint_loads_exactly_the_rows_that_exist_and_changes_nothing() {
    let db = open_with(Preset::Stripped, true);
    let t = load_accounts(&db, 100);
    let before = dump(&db, &t);
    // Three rows that exist; one that does not; a negative key and a key of the wrong number
    // of columns, which no packed key can be; and a table that does not exist.
    let unknown = TableRef {
        name: "nowhere".into(),
        id: 999,
    };
    let mixed: [(&TableRef, &[i64]); 7] = [
        (&t, &[1]),
        (&t, &[50]),
        (&t, &[99]),
        (&t, &[100]),
        (&t, &[-1]),
        (&t, &[1, 2]),
        (&unknown, &[1]),
    ];
    assert_eq!(hint(&db, &mixed), 3);
    // A hint for inserts looks nothing up, so it loads no record, not even of rows that exist.
    assert_eq!(hint_of(&db, Hint::Inserts, &mixed), 0);
    assert_eq!(dump(&db, &t), before);
    // More rows than one pass handles.
    let keys: Vec<[i64; 1]> = (0..100).map(|id| [id]).collect();
    let rows: Vec<(&TableRef, &[i64])> = keys.iter().map(|k| (&t, &k[..])).collect();
    assert_eq!(hint(&db, &rows), 100);
    // The transaction goes on as if nothing happened.
    let balance = db
        .run(|tx| {
            tx.prefetch(&[(&t, &[7])]);
            tx.update(&t, &[Value::Int(7)], &[(2, Value::Int(5))])?;
            tx.get(&t, &[Value::Int(7)], engine::Fetch::All, false)
        })
        .unwrap();
    assert_eq!(balance.unwrap()[2], Value::Int(5));
}

#[test]
fn a_hint_is_ignored_on_the_buffer_pool_when_off_and_for_generic_keys() {
    for (preset, prefetch) in [(Preset::Full, true), (Preset::Stripped, false)] {
        let db = open_with(preset, prefetch);
        let t = load_accounts(&db, 10);
        assert_eq!(
            hint(&db, &[(&t, &[1]), (&t, &[2])]),
            0,
            "{preset:?} {prefetch}"
        );
    }
    // A key without declared integer widths is not packed: its index is an ordered map.
    let db = open_with(Preset::Stripped, true);
    let t = db
        .create_table(TableSchema::new("plain").int("id").int("v").key(&["id"]))
        .unwrap();
    db.run(|tx| tx.insert(&t, &[Value::Int(1), Value::Int(2)]))
        .unwrap();
    assert_eq!(hint(&db, &[(&t, &[1])]), 0);
}

#[test]
fn the_inserts_a_hint_names_go_ahead_as_without_it() {
    let db = open_with(Preset::Stripped, true);
    let t = load_accounts(&db, 100);
    let row = [Value::Int(100), Value::Str("new".into()), Value::Int(7)];
    db.run(|tx| {
        tx.prefetch_inserts(&[(&t, &[100]), (&t, &[5])]);
        tx.insert(&t, &row)
    })
    .unwrap();
    let after = dump(&db, &t);
    assert_eq!(after.len(), 101);
    assert_eq!(after.last().unwrap(), &row.to_vec());
}

#[test]
fn a_column_hint_loads_the_rows_that_exist_and_changes_nothing() {
    let db = open_with(Preset::Stripped, true);
    let t = load_accounts(&db, 100);
    let before = dump(&db, &t);
    // Two rows that exist, one that does not and a key no packed key can be; a column past
    // the table's end is left out, and no column at all still loads the record's first line.
    let rows: [(&TableRef, &[i64]); 4] = [(&t, &[1]), (&t, &[2]), (&t, &[500]), (&t, &[-3])];
    assert_eq!(hint_of(&db, Hint::Columns(&[2, 0, 99]), &rows), 2);
    assert_eq!(hint_of(&db, Hint::Columns(&[]), &rows[..1]), 1);
    assert_eq!(dump(&db, &t), before);
    // Off, and on the buffer pool, it is ignored like `Tx::prefetch`.
    for (preset, prefetch) in [(Preset::Full, true), (Preset::Stripped, false)] {
        let db = open_with(preset, prefetch);
        let t = load_accounts(&db, 10);
        let loaded = hint_of(&db, Hint::Columns(&[1]), &[(&t, &[1])]);
        assert_eq!(loaded, 0, "{preset:?} {prefetch}");
    }
}
