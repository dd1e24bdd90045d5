//! The log buffer: the tail of the log that is not yet written to storage.
//!
//! ```text
//!   log:  [ header | written to storage ......... | pending (being written) | buffer.bytes ]
//!         0        16                              written                   base          end
//! ```
//!
//! Appenders copy a whole frame into [`LogBuffer::bytes`] under the log buffer latch and get
//! `base + bytes.len()` as their LSN; the frame was encoded and checksummed (in a per-thread
//! scratch buffer) before the latch was taken. A writer *takes* the buffered bytes by swapping the `Vec` with an empty one of the
//! same capacity (O(1) under the latch, no copy, no allocation) and writes them with the latch
//! released, so appends continue while the write and the sync run.
//!
//! Invariants: `bytes` always holds whole frames (an append is one latched copy), so every
//! write to storage ends on a record boundary; `base` only grows, by exactly the bytes taken.

use storage::Lsn;

use crate::record::{check_frame, write_frame, Encode, FrameCheck};

/// How far ahead of its end the log buffer is fetched for writing (see
/// [`LogBuffer::prefetch_ahead`]): a few transactions' worth of log records.
const WRITE_AHEAD: usize = 4096;

/// The latch-protected state of the log buffer.
pub(crate) struct LogBuffer {
    /// LSN of `bytes[0]`: everything below it has been taken by a writer.
    pub base: u64,
    /// Whole frames appended since the last take.
    pub bytes: Vec<u8>,
    /// Records appended since the log was opened.
    pub records: u64,
    /// Bytes appended since the log was opened.
    pub bytes_appended: u64,
    /// Commit records appended since the log was opened.
    pub commits: u64,
    /// Commit records in `bytes` (moved to the writer on a take, for group-commit statistics).
    pub commits_buffered: u64,
}

/// Bytes taken from the buffer by a writer.
pub(crate) struct Taken {
    pub base: u64,
    pub commits: u64,
}

impl LogBuffer {
    pub fn new(base: u64, capacity: usize) -> LogBuffer {
        LogBuffer {
            base,
            bytes: Vec::with_capacity(capacity),
            records: 0,
            bytes_appended: 0,
            commits: 0,
            commits_buffered: 0,
        }
    }

    /// The LSN the next record will get.
    #[inline]
    pub fn end(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    /// Copies one frame in; returns its LSN.
    #[inline]
    pub fn append<E: Encode>(&mut self, record: &E, len: u32, crc: u32) -> Lsn {
        let lsn = Lsn(self.end());
        write_frame(record, len, crc, &mut self.bytes);
        self.prefetch_ahead(len as usize);
        self.records += 1;
        self.bytes_appended += u64::from(len);
        lsn
    }

    /// Copies in one frame already encoded, checksum included; returns its LSN.
    #[inline]
    pub fn append_frame(&mut self, frame: &[u8]) -> Lsn {
        let lsn = Lsn(self.end());
        self.bytes.extend_from_slice(frame);
        self.prefetch_ahead(frame.len());
        self.records += 1;
        self.bytes_appended += frame.len() as u64;
        lsn
    }

    /// After an append of `len` bytes, starts fetching for writing the lines as far beyond
    /// the new end as [`WRITE_AHEAD`], as many as were just appended. Each line of the buffer
    /// is so fetched once, some appends before it is written: the buffer (a megabyte or two,
    /// filled once between takes) is cold, and without this the stores of an append wait for
    /// their lines, and the release of the buffer's mutex (an atomic instruction) for the
    /// stores. Only memory the vector already owns is touched.
    #[inline]
    fn prefetch_ahead(&self, len: usize) {
        let to = (self.bytes.len() + WRITE_AHEAD).min(self.bytes.capacity());
        let from = (self.bytes.len() + WRITE_AHEAD).saturating_sub(len);
        if from < to {
            storage::prefetch::range_for_write(self.bytes.as_ptr().wrapping_add(from), to - from);
        }
    }

    /// Swaps the buffered bytes into `into` (which must be empty) and advances `base` past them.
    pub fn take(&mut self, into: &mut Vec<u8>) -> Taken {
        debug_assert!(into.is_empty());
        std::mem::swap(into, &mut self.bytes);
        let taken = Taken {
            base: self.base,
            commits: std::mem::take(&mut self.commits_buffered),
        };
        self.base += into.len() as u64;
        taken
    }

    /// The buffered bytes from `lsn` on, if `lsn` lies in the buffer.
    pub fn bytes_from(&self, lsn: u64) -> Option<&[u8]> {
        if lsn < self.base || lsn >= self.end() {
            return None;
        }
        Some(&self.bytes[(lsn - self.base) as usize..])
    }

    /// Checks that the buffer holds whole, intact frames.
    pub fn check_invariants(&self) {
        let mut at = 0;
        while at < self.bytes.len() {
            match check_frame(&self.bytes[at..]) {
                FrameCheck::Complete(len) => at += len,
                other => panic!(
                    "log buffer holds a bad frame at {}: {other:?}",
                    self.base + at as u64
                ),
            }
        }
        assert!(self.commits_buffered <= self.commits);
        assert!(self.bytes_appended >= self.bytes.len() as u64);
    }
}
