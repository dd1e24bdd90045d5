//! Storage errors, classified by what the caller must do.

use crate::page::PageId;

/// Result of a storage operation.
pub type StorageResult<T> = Result<T, StorageError>;

/// What can go wrong below the transaction layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The operating system refused a read, write, sync or allocation (full disk included).
    #[error("i/o error while {action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A page read from the store failed its checksum or header check.
    #[error("page {page} is corrupt: {reason}")]
    Corruption { page: PageId, reason: String },
    /// Every frame is fixed: the pool cannot make room for another page.
    #[error("buffer pool exhausted: all {frames} frames are fixed")]
    PoolExhausted { frames: usize },
    /// A unique index already holds the key.
    #[error("duplicate key")]
    DuplicateKey,
    /// A record does not fit in one page.
    #[error("record of {len} bytes is larger than the largest a page can hold ({max})")]
    RecordTooLarge { len: usize, max: usize },
    /// A key does not fit in a B+-tree node.
    #[error("key of {len} bytes is larger than the largest a node can hold ({max})")]
    KeyTooLarge { len: usize, max: usize },
    /// A record id names no live record.
    #[error("no record at {0}")]
    NoSuchRecord(String),
    /// A fix would have read page `page` from the store while its thread refuses reads
    /// (two-stage execution's "this would miss", see [`crate::buffer::stage`]); nothing was
    /// read and nothing changed.
    #[error("page {page} is not in the buffer pool and reads are refused")]
    WouldRead { page: PageId },
    /// A caller passed something the storage manager cannot act on.
    #[error("invalid argument: {0}")]
    Invalid(String),
}

// Four words today (`Corruption`'s page and `String`). Boxing the large payloads to bring it to
// two words was measured on the TPC-C paper mix and saved nothing (about 20 instructions per
// transaction of ~106K): the results on the hot paths carry page guards of two and four words, so
// they go through memory whatever the error's size. This bound keeps it from growing further.
const _: () = assert!(std::mem::size_of::<StorageError>() <= 32);

/// One fault a structural check found, by place: the page it lies on (the page the check
/// expected, which a damaged header may not name) and what is wrong there (a slot, a key, a
/// link). Checks that go on past the first fault collect these, e.g. [`crate::BTree::verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub page: PageId,
    pub detail: String,
}

impl Fault {
    /// The fault an error met at `page` stands for: a corruption's reason without the page
    /// its header named (the caller knows which page it read), anything else as it reads.
    pub fn from_error(page: PageId, error: &StorageError) -> Fault {
        let detail = match error {
            StorageError::Corruption { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        Fault { page, detail }
    }

    /// The fault as an error, for checks that stop at the first one.
    pub fn into_error(self) -> StorageError {
        StorageError::Corruption {
            page: self.page,
            reason: self.detail,
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "page {}: {}", self.page, self.detail)
    }
}

impl StorageError {
    /// Wraps an I/O error with the action that failed.
    pub fn io(action: &'static str, source: std::io::Error) -> Self {
        StorageError::Io { action, source }
    }
}
