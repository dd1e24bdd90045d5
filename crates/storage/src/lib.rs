//! The Glass storage manager.
//!
//! Everything below the transaction layer: a page file read and written with positioned I/O
//! (or held in memory), a buffer pool of frames that fixes pages through RAII guards, slotted
//! heap files, B+-trees on buffer-pool pages with two key paths, an in-memory hash index, and a
//! main-memory record store for the ladder's `page-access` rung.
//!
//! ```text
//!   heap::HeapFile   btree::BTree   hash::HashIndex   memstore::MemStore, memindex::MemIndex
//!          \            /                 (no pages)        (no pages)
//!        buffer::BufferPool ── page::PageLog (WAL rule, redo; implemented by the wal crate)
//!                |
//!        file::PageStore (file or memory) ── device::DeviceModel (emulated latency)
//! ```
//!
//! Layering rule: this crate knows nothing of transactions, locks or log record formats. The
//! log manager reaches it only through the [`page::PageLog`] trait.

pub mod btree;
pub mod buffer;
pub mod counters;
mod dense_map;
pub mod device;
pub mod doublewrite;
pub mod error;
pub mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod hash;
pub mod heap;
mod int_hash;
pub mod latch;
pub mod memindex;
pub mod memstore;
pub mod page;
pub mod prefetch;
pub mod shard;
pub mod shared;

pub use btree::{BTree, IntKeyOrder, KeyOrder, SchemaKeyOrder};
pub use buffer::{BufferPool, FrameId, FrameMemory, PageReadGuard, PageWriteGuard, PoolConfig};
pub use counters::StorageCounters;
pub use device::{DelayedStore, DeviceModel, QueueMode};
pub use doublewrite::{DoublewriteStats, DoublewriteStore};
pub use error::{Fault, StorageError, StorageResult};
pub use file::{FilePageStore, MemPageStore, PageStore};
pub use hash::HashIndex;
pub use heap::{HeapFile, RecordId};
pub use latch::{Latch, SpinLatch};
pub use memindex::MemIndex;
pub use memstore::{MemStore, RecordPtr};
pub use page::{Lsn, PageId, PageLog, PageSize};
