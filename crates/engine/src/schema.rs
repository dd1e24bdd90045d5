//! Table and index definitions.
//!
//! Records are stored in a fixed layout: every column has a fixed offset and width, so a read
//! can decode only the columns it asks for and an update writes its columns in place.

use serde::{Deserialize, Serialize};

/// Type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnType {
    /// 64-bit signed integer.
    Int,
    /// 64-bit float (TPC-C money and rates).
    Float,
    /// String of at most `max_len` bytes (no NUL bytes).
    Str { max_len: u16 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    /// Whether the column may hold `Value::Null`.
    pub nullable: bool,
}

/// A table: columns and the primary key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    pub name: String,
    pub columns: Vec<Column>,
    /// Column positions of the primary key, in key order.
    pub primary_key: Vec<usize>,
    /// Bit widths that pack an all-integer primary key into one `u64` for the hand-coded
    /// integer key path (`btree-keys=off`); `None` keeps the generic path for this table.
    pub int_key_bits: Option<Vec<u8>>,
}

/// How an index is organised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum IndexKind {
    #[default]
    BTree,
    /// Point lookups only; scans are refused.
    Hash,
}

/// A secondary index over a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexSchema {
    pub name: String,
    pub table: String,
    /// Column positions of the index key, in key order.
    pub columns: Vec<usize>,
    pub unique: bool,
    pub kind: IndexKind,
    /// As for tables: bit widths packing an all-integer key into a `u64`.
    pub int_key_bits: Option<Vec<u8>>,
}

impl TableSchema {
    /// Starts a schema; add columns with [`TableSchema::int`], [`TableSchema::float`],
    /// [`TableSchema::string`], then name the key with [`TableSchema::key`].
    pub fn new(name: &str) -> Self {
        TableSchema {
            name: name.to_string(),
            columns: Vec::new(),
            primary_key: Vec::new(),
            int_key_bits: None,
        }
    }

    pub fn int(mut self, name: &str) -> Self {
        self.push(name, ColumnType::Int, false);
        self
    }

    pub fn float(mut self, name: &str) -> Self {
        self.push(name, ColumnType::Float, false);
        self
    }

    pub fn string(mut self, name: &str, max_len: u16) -> Self {
        self.push(name, ColumnType::Str { max_len }, false);
        self
    }

    /// Marks the most recently added column nullable.
    pub fn nullable(mut self) -> Self {
        if let Some(c) = self.columns.last_mut() {
            c.nullable = true;
        }
        self
    }

    /// Names the primary key columns.
    pub fn key(mut self, columns: &[&str]) -> Self {
        self.primary_key = columns
            .iter()
            .map(|c| {
                self.column(c)
                    .unwrap_or_else(|| panic!("no column {c} in {}", self.name))
            })
            .collect();
        self
    }

    /// Declares the bit widths that pack the (all-integer) primary key into a `u64`.
    pub fn int_key(mut self, bits: &[u8]) -> Self {
        self.int_key_bits = Some(bits.to_vec());
        self
    }

    /// Position of a column by name.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    fn push(&mut self, name: &str, ty: ColumnType, nullable: bool) {
        self.columns.push(Column {
            name: name.to_string(),
            ty,
            nullable,
        });
    }
}
