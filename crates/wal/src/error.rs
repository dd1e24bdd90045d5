//! Log errors, classified by what the caller must do.
//!
//! * [`WalError::Io`] and [`WalError::Failed`]: the log can no longer promise durability; the
//!   engine must stop accepting commits and restart (recovery repairs the log).
//! * [`WalError::Corrupt`], [`WalError::Damaged`], [`WalError::BadHeader`] and
//!   [`WalError::UnsupportedVersion`]: bytes on storage are not a valid log for this build; an
//!   operator must look (a torn tail is *not* this: [`crate::LogManager::open`] cuts it; damage
//!   followed by intact records is, and is cut only when the caller accepts the loss).
//! * [`WalError::OutOfRange`] and [`WalError::NotLogged`]: the caller asked for a record that
//!   does not exist (a bug in the caller, or a log mode that builds no records).
//! * [`WalError::Discarded`] and [`WalError::DiscardPastCheckpoint`]: the caller asked for a
//!   record below the log's start, or to discard records the last checkpoint still needs (a
//!   bug in whoever computed the oldest LSN still needed).

use std::fmt;
use std::sync::Arc;

use storage::{Lsn, StorageError};

/// Result of a log operation.
pub type WalResult<T> = Result<T, WalError>;

/// What can go wrong in the write-ahead log.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// The operating system refused a read, write, sync or rename.
    #[error("log i/o error while {action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// An earlier write or sync of the log failed; nothing more is made durable until restart.
    /// Keeps the first failure's action and cause (a full disk, say), which later callers
    /// would otherwise never see.
    #[error("the log is unusable since {action} failed earlier: {source}")]
    Failed {
        action: &'static str,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A record's bytes are invalid (checksum, length, kind or body).
    #[error("log record at {lsn} is corrupt: {reason}")]
    Corrupt { lsn: Lsn, reason: &'static str },
    /// A bad frame with intact records after it: damage in the middle of the log, which no
    /// crash leaves behind (see [`crate::log`]). Cutting the log there would silently drop
    /// those records, committed transactions among them.
    #[error(
        "{0}: damage in the middle of the log, not a torn tail; opening with accept-log-loss \
         cuts the log there and loses them"
    )]
    Damaged(LogDamage),
    /// Part of the log at or past its start is in no file: a segment file between two others
    /// is missing. Recovery would stop there and drop every record after it, committed
    /// transactions among them.
    #[error(
        "the log from {from} to {to} is in no file (a segment file `<log>.<offset>` beside the \
         log is missing, and the log goes on after it): put the file back; the records after \
         it cannot be recovered without it"
    )]
    Missing { from: Lsn, to: Lsn },
    /// The log file does not start with a Glass log header, or the master record is invalid.
    #[error("not a Glass log: {0}")]
    BadHeader(&'static str),
    /// The log (or its master record) was written in a format version this build cannot read:
    /// by an older or newer Glass. Recover it with the build that wrote it, or start afresh.
    #[error(
        "the {what} is in format version {found}, but this build reads only version {supported}: \
         recover it with the Glass build that wrote it, or remove it to start a new log"
    )]
    UnsupportedVersion {
        what: &'static str,
        found: u32,
        supported: u32,
    },
    /// No record starts at or can be read from this LSN (before the first or past the end).
    #[error("no log record at {lsn}: the log holds {first}..{end}")]
    OutOfRange { lsn: Lsn, first: Lsn, end: Lsn },
    /// The record was discarded: it lies below the log's start (the oldest LSN the last
    /// checkpoint still needed). Recovery or a rollback asking for it is a bug.
    #[error("log record at {lsn} was discarded: the log starts at {start}")]
    Discarded { lsn: Lsn, start: Lsn },
    /// A discard would drop records at or past the last complete checkpoint's begin (or there is
    /// no checkpoint yet), which recovery scans from.
    #[error(
        "cannot discard the log below {lsn}: the last complete checkpoint begins at {checkpoint:?}"
    )]
    DiscardPastCheckpoint { lsn: Lsn, checkpoint: Option<Lsn> },
    /// The log runs in `LsnOnly` mode: LSNs are handed out but no record is kept.
    #[error("no log records are kept in lsn-only mode")]
    NotLogged,
}

/// Where the log is damaged and what lies after the damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogDamage {
    /// The LSN of the first bad frame: the log's last intact record ends here.
    pub lsn: Lsn,
    /// What is wrong with the frame there.
    pub reason: &'static str,
    /// Bytes from `lsn` to the end of the log.
    pub bytes: u64,
    /// Intact records found after `lsn`.
    pub records: u64,
}

impl fmt::Display for LogDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let records = match self.records {
            1 => "1 intact record follows".to_string(),
            n => format!("{n} intact records follow"),
        };
        write!(
            f,
            "log record at {} is damaged ({}), yet {records} it in the {} bytes from there to \
             the end of the log",
            self.lsn, self.reason, self.bytes
        )
    }
}

impl WalError {
    /// Wraps an I/O error with the action that failed.
    pub fn io(action: &'static str, source: std::io::Error) -> Self {
        WalError::Io { action, source }
    }
}

impl From<WalError> for StorageError {
    /// The buffer pool sees log failures through [`storage::PageLog::flush_to`]; every one of
    /// them means the write-ahead rule cannot be honoured, so it becomes an I/O error that keeps
    /// the log's error as its source.
    fn from(err: WalError) -> Self {
        match err {
            WalError::Io { action, source } => StorageError::Io { action, source },
            other => StorageError::Io {
                action: "flushing the log (write-ahead rule)",
                source: std::io::Error::other(other),
            },
        }
    }
}
