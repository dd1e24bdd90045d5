//! The Glass write-ahead log.
//!
//! ARIES-style logging for the engine: physical page redo records produced by the buffer pool
//! (through [`storage::PageLog`](::storage::PageLog), which [`LogManager`] implements),
//! logical undo records whose payload the engine encodes itself, compensation records,
//! commit/abort/end, and fuzzy checkpoints whose begin is kept in a durable master record.
//!
//! ```text
//!   engine (Update, Compensation, Commit, ...)     buffer pool (PageLog::log_redo, flush_to)
//!                       \                             /
//!                LogManager ── log buffer (latch: copy in / swap out)
//!                       |           \
//!                       |        writer latch = group-commit leader: write, sync
//!                  LogStorage: FileLogStorage (segment files + master file) | MemLogStorage
//! ```
//!
//! * [`record`]: the records and their codec (frame and body tables).
//! * [`buffer`]: the in-memory tail of the log.
//! * [`checksum`]: CRC-32C, in hardware where the CPU has it.
//! * [`log`]: the log manager: modes, group commit, reading, checkpoints' master record.
//! * [`storage`]: where the bytes live; [`file`](mod@file): the log's segment files.
//! * [`reader`]: chunked forward scans (open-time torn-tail scan and the look past a bad
//!   frame, [`LogIter`]).

mod buffer;
pub mod checksum;
pub mod error;
pub mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod log;
pub mod reader;
pub mod record;
pub mod storage;

pub use buffer::RUN_BYTES;
pub use error::{LogDamage, WalError, WalResult};
pub use log::{HeldUpdate, LogConfig, LogManager, LogMode, LogStats, OpenReport, MIN_RUN_BYTES};
pub use reader::LogIter;
pub use record::{ActiveTxn, LogRecord, PageRedoOwned, RecordKind, TxnId};
pub use storage::{FileLogStorage, LogStorage, MemLogStorage};
