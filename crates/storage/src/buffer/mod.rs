//! The buffer pool: a fixed set of frames caching pages of a [`PageStore`](crate::file::PageStore).
//!
//! ```text
//!   fix_shared / fix_exclusive / allocate_page / fix_for_redo
//!          │
//!          ▼
//!   frame directory (PageId → FrameId, an array of atomics indexed by page id, no latch)
//!          │ hit: look up, pin, then latch the frame and check that it still holds the page
//!          │ miss: page table (Latch<PageTable>: frame → page, clock hand, changes of the
//!          │       directory) exclusive → clock victim → remap → release → I/O under the
//!          │       victim frame's exclusive latch only
//!          ▼
//!   frames[i]   (Latch<FrameData>: page bytes; atomics: pins, referenced, dirty, rec_lsn)
//! ```
//!
//! Protocol and invariants:
//!
//! * **Hits take no page-table latch.** A fix reads the frame from the directory, pins it and
//!   latches it, then checks the frame's `page`: a frame remapped between the lookup and the
//!   latch (an eviction raced with the fix) holds another page or none, and the fix unpins and
//!   starts over. The directory changes only under the exclusive page-table latch.
//! * **Read guards hold no pin when latching is on.** Their shared latch keeps the evictor
//!   off the frame as well as a pin would (the evictor must `try_write` it, and the clock
//!   passes over latched frames), so a shared hit skips the pin and its release. Exclusive
//!   fixes pin (`dirty_pages` finds the frames writers may be changing by their pins), and so
//!   does every fix without latching, where the latch keeps nobody off.
//! * **The hit is inlined into the caller** (`fix_shared`, `fix_exclusive`): directory
//!   lookup, pin, latch, page check, and a two-word read guard (frame, page id) handed back
//!   in registers; misses, retries and page ids past the directory go out of line. Guards
//!   hold the frame itself, so a release touches no pool state: latch, then pin (plus, for a
//!   write guard, the log hand-off when it has pending ranges and the dirty flag).
//! * **Victims.** The clock takes a frame it sees unpinned and unlatched, pins it and
//!   `try_write`s its latch.
//!   A fix that pinned the frame meanwhile either holds its latch (the `try_write` fails and
//!   the clock moves on) or waits for it and then finds the page changed. Guards release the
//!   frame latch *before* they unpin, so a frame nobody is fixing has a free latch.
//! * **No I/O under the page-table latch.** A miss maps the page to its victim frame and takes
//!   the frame's exclusive latch before releasing the table latch; the read happens under the
//!   frame latch only. Fixes of the same page meanwhile find the mapping, pin, and wait on the
//!   frame latch ("I/O in progress"). If the read fails, the page is unmapped, the frame's
//!   `page` is `None`, the waiters see that and retry.
//! * **Dirty victims** are written back (WAL rule first) under the victim's latch with the table
//!   latch released, then the miss starts over; only clean frames are remapped.
//! * **WAL rule**: before a page is written, [`PageLog::flush_to`](crate::page::PageLog) is
//!   called with its page LSN.
//! * **Checksums** are set in the written copy; a read verifies magic, checksum and page id
//!   (an all-zero page is a fresh page), else [`StorageError::Corruption`](crate::StorageError).
//! * Latches are acquired without waiting while another is held in one direction only
//!   (page table → frame, by `try_write`), so the pool itself cannot deadlock; callers that
//!   hold several guards must take them in a consistent order.
//!
//! * **Two-stage execution** ([`stage`]): with `set_staging(true)`, a fix also lets its
//!   thread's stage hold the frame pinned past the guard (until `release_held`), refuse a
//!   miss before reading (`StorageError::WouldRead`), and count its reads and write-backs.
//!
//! With `latching` off every latch is a predictable branch (one thread only). Without a
//! [`PageLog`](crate::page::PageLog) write guards track no ranges and log nothing.

mod frame;
mod guard;
pub mod handoff;
mod memory;
mod pool;
mod reclaim;
mod replacer;
pub mod stage;

pub use frame::FrameId;
pub use guard::{PageReadGuard, PageWriteGuard};
pub use handoff::Handoffs;
pub use memory::FrameMemory;
pub(crate) use pool::{verify_page, PageIdHasher};
pub use pool::{BufferPool, PoolConfig, PoolIo, ReadToken};
pub use reclaim::{EpochToken, ReuseStats};
