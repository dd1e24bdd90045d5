//! The database: opening (and recovering), the catalog, and beginning transactions.

use std::path::PathBuf;
use std::sync::Arc;

use crate::api::{IndexRef, TableRef, TxResult};
use crate::schema::{IndexSchema, TableSchema};
use crate::switches::Switches;

/// How to open a database.
#[derive(Clone, Debug)]
pub struct DbConfig {
    /// Directory holding the page file and the log; `None` keeps everything in memory.
    pub path: Option<PathBuf>,
    /// Buffer pool size in MiB.
    pub pool_mib: usize,
    /// Force the log at commit (a commit returns once its record is durable).
    pub durable: bool,
    pub switches: Switches,
    /// Worker threads that will use the database (validated against the switches).
    pub threads: usize,
    /// Records per table a transaction may lock before escalating to a table lock.
    pub escalation_threshold: usize,
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig {
            path: None,
            pool_mib: 256,
            durable: false,
            switches: Switches::default(),
            threads: 1,
            escalation_threshold: 5000,
        }
    }
}

/// An open database.
pub struct Database {
    _private: (),
}

impl Database {
    /// Opens (creating if absent, recovering if not closed cleanly) a database.
    pub fn open(_config: DbConfig) -> TxResult<Arc<Database>> {
        todo!("engine under construction")
    }

    /// Creates a table, or returns the existing one if a table of this name and schema exists.
    pub fn create_table(&self, _schema: TableSchema) -> TxResult<TableRef> {
        todo!()
    }

    /// Creates a secondary index (over existing rows too), or returns the existing one.
    pub fn create_index(&self, _schema: IndexSchema) -> TxResult<IndexRef> {
        todo!()
    }

    /// Resolves a table name to a handle.
    pub fn table(&self, _name: &str) -> TxResult<TableRef> {
        todo!()
    }

    /// Resolves an index name to a handle.
    pub fn index(&self, _name: &str) -> TxResult<IndexRef> {
        todo!()
    }

    /// The schema of a table.
    pub fn table_schema(&self, _table: &TableRef) -> TxResult<TableSchema> {
        todo!()
    }
}
