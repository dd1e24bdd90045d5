//! The persistent catalog, `catalog.json`: the page size and key path a database was created
//! with, and every table and index with its definition and root pages.
//!
//! ```json
//! { "page_size": 8192, "packed_keys": true,
//!   "tables":  [ { "schema": { "name": .., "columns": [..], "primary_key": [0], .. },
//!                  "first_page": 1, "primary_root": 2 } ],
//!   "indexes": [ { "schema": { "name": .., "table": .., "columns": [..], .. }, "root": 9 } ] }
//! ```
//!
//! The file is rewritten whole, atomically, at every schema change (see `Database`). Reading it
//! back goes through [`parse_catalog`], which checks everything opening a database relies on
//! before any of it is used, so a damaged file is an error naming what is wrong, never a panic
//! or a table built on page 0.

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use storage::PageSize;

use crate::api::{TxError, TxResult};
use crate::db::{validate_table, MAX_TABLES};
use crate::keys::KeySpec;
use crate::record::Layout;
use crate::schema::{IndexKind, IndexSchema, TableSchema};

/// The persistent catalog (`catalog.json`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub(crate) page_size: usize,
    pub(crate) packed_keys: bool,
    pub(crate) tables: Vec<CatalogTable>,
    pub(crate) indexes: Vec<CatalogIndex>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CatalogTable {
    pub(crate) schema: TableSchema,
    pub(crate) first_page: u64,
    pub(crate) primary_root: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CatalogIndex {
    pub(crate) schema: IndexSchema,
    pub(crate) root: u64,
}

/// Decodes the catalog read from `path` and checks it: a page size Glass writes, at most
/// [`MAX_TABLES`] tables and indexes, unique names, key columns that exist (with valid
/// packed-key widths), indexes over tables the catalog holds, and no root or first page 0
/// (the meta page). Every fault is an error naming `path` and the table or index.
pub fn parse_catalog(path: &Path, bytes: &[u8]) -> TxResult<Catalog> {
    let corrupt = |detail: String| {
        TxError::Invalid(format!("catalog {} is corrupt: {detail}", path.display()))
    };
    let catalog: Catalog = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    check(&catalog).map_err(|e| match e {
        TxError::Invalid(detail) => corrupt(detail),
        other => other,
    })?;
    Ok(catalog)
}

fn check(catalog: &Catalog) -> TxResult<()> {
    let invalid = |detail: String| Err(TxError::Invalid(detail));
    if PageSize::from_bytes(catalog.page_size).is_none() {
        return invalid(format!(
            "page size {} (Glass writes 8192 or 32768)",
            catalog.page_size
        ));
    }
    for (what, count) in [
        ("tables", catalog.tables.len()),
        ("indexes", catalog.indexes.len()),
    ] {
        if count > MAX_TABLES {
            return invalid(format!("{count} {what}, more than {MAX_TABLES}"));
        }
    }
    let mut layouts = std::collections::HashMap::new();
    for t in &catalog.tables {
        let name = &t.schema.name;
        validate_table(&t.schema)?;
        if let Some(c) = t
            .schema
            .primary_key
            .iter()
            .find(|c| **c >= t.schema.columns.len())
        {
            return invalid(format!("table {name}: primary key names no column {c}"));
        }
        if t.first_page == 0 || t.primary_root == 0 {
            return invalid(format!(
                "table {name}: first page {} or primary root {} is the meta page",
                t.first_page, t.primary_root
            ));
        }
        let layout = Layout::new(&t.schema);
        KeySpec::new(
            name,
            &layout,
            &t.schema.primary_key,
            t.schema.int_key_bits.as_deref(),
            catalog.packed_keys,
        )?;
        if layouts.insert(name.as_str(), layout).is_some() {
            return invalid(format!("two tables named {name}"));
        }
    }
    let mut index_names = HashSet::new();
    for ix in &catalog.indexes {
        let s = &ix.schema;
        let Some(layout) = layouts.get(s.table.as_str()) else {
            return invalid(format!("index {}: no table named {}", s.name, s.table));
        };
        if s.columns.is_empty() {
            return invalid(format!("index {} has no columns", s.name));
        }
        if let Some(c) = s.columns.iter().find(|c| **c >= layout.columns()) {
            return invalid(format!(
                "index {}: table {} has no column {c}",
                s.name, s.table
            ));
        }
        if s.kind == IndexKind::BTree && ix.root == 0 {
            return invalid(format!("index {}: root is the meta page", s.name));
        }
        KeySpec::new(
            &s.name,
            layout,
            &s.columns,
            s.int_key_bits.as_deref(),
            catalog.packed_keys,
        )?;
        if !index_names.insert(s.name.as_str()) {
            return invalid(format!("two indexes named {}", s.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::IndexSchema;

    fn good() -> Catalog {
        let table = TableSchema::new("accounts")
            .int("id")
            .string("owner", 16)
            .key(&["id"])
            .int_key(&[32]);
        Catalog {
            page_size: 8192,
            packed_keys: true,
            tables: vec![CatalogTable {
                schema: table,
                first_page: 1,
                primary_root: 2,
            }],
            indexes: vec![CatalogIndex {
                schema: IndexSchema {
                    name: "by_owner".into(),
                    table: "accounts".into(),
                    columns: vec![1],
                    unique: false,
                    kind: IndexKind::BTree,
                    int_key_bits: None,
                },
                root: 3,
            }],
        }
    }

    fn parse(catalog: &Catalog) -> TxResult<Catalog> {
        let bytes = serde_json::to_vec(catalog).unwrap();
        parse_catalog(Path::new("db/catalog.json"), &bytes)
    }

    fn error(change: impl FnOnce(&mut Catalog)) -> String {
        let mut catalog = good();
        change(&mut catalog);
        let message = parse(&catalog).unwrap_err().to_string();
        assert!(
            message.contains("catalog db/catalog.json is corrupt"),
            "{message}"
        );
        message
    }

    #[test]
    fn a_catalog_opening_relies_on_parses() {
        let parsed = parse(&good()).unwrap();
        assert_eq!(parsed.tables.len(), 1);
        assert_eq!(parsed.indexes[0].root, 3);
    }

    #[test]
    fn every_fault_opening_would_trip_on_is_an_error_naming_the_file() {
        let bad_json = parse_catalog(Path::new("db/catalog.json"), b"{\"page_size\": 8192,")
            .unwrap_err()
            .to_string();
        assert!(
            bad_json.contains("db/catalog.json is corrupt"),
            "{bad_json}"
        );
        assert!(error(|c| c.page_size = 12345).contains("page size 12345"));
        assert!(error(|c| c.page_size = usize::MAX).contains("page size"));
        assert!(error(|c| {
            let t = c.tables[0].clone();
            c.tables.push(t);
        })
        .contains("two tables named accounts"));
        assert!(error(|c| c.tables[0].schema.primary_key = vec![7]).contains("no column 7"));
        assert!(error(|c| c.tables[0].schema.primary_key.clear()).contains("no primary key"));
        assert!(error(|c| c.tables[0].first_page = 0).contains("meta page"));
        assert!(error(|c| c.tables[0].primary_root = 0).contains("meta page"));
        assert!(
            error(|c| c.tables[0].schema.int_key_bits = Some(vec![40, 40]))
                .contains("key bit widths")
        );
        assert!(error(|c| c.indexes[0].schema.table = "nope".into()).contains("no table named"));
        assert!(error(|c| c.indexes[0].schema.columns = vec![2]).contains("no column 2"));
        assert!(error(|c| c.indexes[0].schema.columns.clear()).contains("has no columns"));
        assert!(error(|c| c.indexes[0].root = 0).contains("root is the meta page"));
        assert!(error(|c| {
            let ix = c.indexes[0].clone();
            c.indexes.push(ix);
        })
        .contains("two indexes named by_owner"));
        assert!(error(|c| {
            let t = c.tables[0].clone();
            c.tables = (0..=MAX_TABLES)
                .map(|i| {
                    let mut t = t.clone();
                    t.schema.name = format!("t{i}");
                    t
                })
                .collect();
        })
        .contains("more than 256"));
    }

    /// A catalog whose primary key names a column the table lacks made opening the database
    /// index out of bounds while building the key; now the open fails naming the file.
    #[test]
    fn opening_a_database_whose_catalog_names_a_missing_key_column_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = || crate::DbConfig {
            path: Some(dir.path().to_path_buf()),
            pool_mib: 2,
            ..crate::DbConfig::default()
        };
        let db = crate::Database::open(config()).unwrap();
        db.create_table(good().tables[0].schema.clone()).unwrap();
        db.close().unwrap();
        let path = dir.path().join("catalog.json");
        let mut catalog: Catalog = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        catalog.tables[0].schema.primary_key = vec![7];
        std::fs::write(&path, serde_json::to_vec(&catalog).unwrap()).unwrap();
        let message = crate::Database::open(config()).err().unwrap().to_string();
        assert!(message.contains("catalog.json is corrupt"), "{message}");
        assert!(message.contains("no column 7"), "{message}");
    }
}
