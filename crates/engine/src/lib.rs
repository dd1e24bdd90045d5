//! The Glass engine: catalog, tables and indexes, the `Tx` API, switches and presets,
//! transaction management and ARIES recovery.

mod active;
pub mod api;
pub mod catalog;
mod checkpointer;
mod cleaner;
pub mod db;
pub mod execution;
pub mod integrity;
pub mod keys;
pub mod profile;
pub mod record;
pub mod recovery;
pub mod schema;
pub mod switches;
pub mod table;
pub mod txn;
pub mod undo;
pub mod value;

pub use api::{
    updates_of, updates_of_row, Connection, Fetch, IndexRef, KeyRange, ReadFn, RowRef, RowWriter,
    TableRef, Tx, TxError, TxResult, UpdateFn,
};
pub use db::{CheckpointTimes, Database, DbConfig, Doublewrite, FullPageImages, IMAGE_ALLOWANCE};
pub use integrity::{IntegrityFault, IntegrityReport, IntegrityStep};
pub use schema::{ColumnType, IndexSchema, TableSchema};
pub use switches::{ConfigError, Preset, Switch, Switches};
pub use txn::Transaction;
pub use value::{Row, Value, ValueRef};
