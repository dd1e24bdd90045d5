//! Where the log's bytes live: segment files read and written with positioned I/O, or memory.
//!
//! A [`LogStorage`] is a flat byte array that grows at its end, plus a tiny *master record*
//! (where the last complete checkpoint begins) that is replaced atomically and durably.
//!
//! * [`FileLogStorage`] ([`crate::file`]): the log in files of at most a segment each, the
//!   first at `<path>` and the rest beside it, and the master file `<path>.master`. The master
//!   is written to `<path>.master.tmp`, synced, renamed over the old one, and the directory is
//!   synced, so a crash leaves either the old or the new master, never a mix.
//! * [`MemLogStorage`]: for in-memory databases and tests. It remembers how long the log was at
//!   its last sync, so [`MemLogStorage::crash_image`] yields what a disk would still hold after
//!   a crash (everything synced, plus any chosen part of the unsynced tail): the simulated disk
//!   of the crash-recovery tests.
//!
//! Invariant (both): `sync` makes every byte written before it survive a crash; `truncate`
//! is durable when it returns.
//!
//! # Discarded bytes
//!
//! Once a checkpoint's master record names the log's *start* (the oldest LSN recovery or a
//! rollback can still need), the log manager calls [`LogStorage::discard`] with
//! `LOG_HEADER_SIZE..start`. Offsets never move: `len` and every byte at or past the range's
//! end read as before; the header below it is kept.
//!
//! ```text
//!   files:  [ header | hole ] (segments unlinked)   [ hole | live log ............ ]
//!   memory: [ head   ]  (dropped)                            [ bytes, from `base` ... ]
//!           0        16                             block-aligned start / base          len
//! ```
//!
//! * [`FileLogStorage`] unlinks the segments wholly below the start but the first, and
//!   punches holes (`fallocate(PUNCH_HOLE | KEEP_SIZE)` on Linux, whole blocks only, so no
//!   live byte is touched) in the first and in the one holding the start. A file system that
//!   cannot punch keeps those blocks; elsewhere than Linux nothing is punched. Either way the
//!   log is discarded logically: the log manager never reads below its start.
//! * [`MemLogStorage`] keeps the head and drops the discarded prefix of its buffer; a read
//!   inside the discarded range is an error (a caller bug), never zeros.

use std::io;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;

pub use crate::file::FileLogStorage;

/// The byte store under a log.
pub trait LogStorage: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (fewer only
    /// where the log ends).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes all of `bytes` at `offset` (the log writes at its end only).
    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// Makes every byte written so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Cuts the log to `len` bytes, durably.
    fn truncate(&self, len: u64) -> io::Result<()>;
    /// The master record as last written, if any.
    fn read_master(&self) -> io::Result<Option<Vec<u8>>>;
    /// Replaces the master record atomically and durably.
    fn write_master(&self, bytes: &[u8]) -> io::Result<()>;
    /// The bytes in `range` will never be read again: the storage may free them, keeping every
    /// offset (and `len`) as it is. Called with a range that starts where the last one started
    /// and ends at or past where it ended. Freeing is an optimisation, never needed for
    /// correctness (the master record says where the log starts), so the default keeps them.
    fn discard(&self, range: Range<u64>) -> io::Result<()> {
        let _ = range;
        Ok(())
    }
    /// Stretches of the log that no file held when the storage was opened: a segment file
    /// missing between two others. Below the log's start they are what discards leave; at or
    /// past it, records lost ([`crate::LogManager::open`] refuses the log). None by default.
    fn missing(&self) -> Vec<Range<u64>> {
        Vec::new()
    }
    /// Bytes of disk or memory the log holds now: less than `len` where a discard freed some.
    /// `None` where the storage cannot tell.
    fn held_bytes(&self) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

/// How a [`FileLogStorage`] makes its writes durable (see [`crate::file`]'s table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LogSync {
    /// Buffered writes; `sync` is `fdatasync`: the data, and the size only where it changed.
    #[default]
    Fdatasync,
    /// Buffered writes; `sync` is `fsync`: the data and every metadata change (times too).
    Fsync,
    /// Writes through an `O_DSYNC` descriptor, each durable when it returns; `sync` does
    /// nothing.
    Dsync,
    /// Writes of whole aligned blocks through an `O_DIRECT | O_DSYNC` descriptor, past the
    /// page cache, each durable when it returns; `sync` does nothing.
    Direct,
}

impl LogSync {
    pub const ALL: [LogSync; 4] = [
        LogSync::Fdatasync,
        LogSync::Fsync,
        LogSync::Dsync,
        LogSync::Direct,
    ];

    /// The method's name, as options and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            LogSync::Fdatasync => "fdatasync",
            LogSync::Fsync => "fsync",
            LogSync::Dsync => "dsync",
            LogSync::Direct => "direct",
        }
    }
}

/// How a [`FileLogStorage`] writes its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLogOptions {
    pub sync: LogSync,
    /// Zeros kept written ahead of the log's end, added this many bytes at a time; 0 lets
    /// the file grow with each write.
    pub prealloc_bytes: u64,
    /// The most bytes of log one file holds: a positive multiple of [`DIRECT_BLOCK_BYTES`].
    pub segment_bytes: u64,
}

/// The default chunk of preallocated zeros.
pub const DEFAULT_PREALLOC_BYTES: u64 = 16 << 20;

/// The default size of a log segment: four chunks of preallocated zeros.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

impl Default for FileLogOptions {
    fn default() -> Self {
        FileLogOptions {
            sync: LogSync::Fdatasync,
            prealloc_bytes: DEFAULT_PREALLOC_BYTES,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
        }
    }
}

/// The smallest block a [`LogSync::Direct`] write covers: a multiple of every common logical
/// block size (512 or 4096 bytes). A file system that asks for more alignment gets it.
pub const DIRECT_BLOCK_BYTES: usize = 4096;
const _: () =
    assert!(DIRECT_BLOCK_BYTES.is_power_of_two() && DIRECT_BLOCK_BYTES.is_multiple_of(512));

/// A log in memory. Clones share the same bytes, so a test can "reopen" a log.
#[derive(Clone, Default)]
pub struct MemLogStorage {
    inner: Arc<Mutex<MemInner>>,
}

/// Latch-protected state of a [`MemLogStorage`].
///
/// Offsets `0..head.len()` are in `head`, `head.len()..base` were discarded, and
/// `base..base + bytes.len()` are in `bytes`. With nothing discarded `head` is empty and
/// `base` is 0.
#[derive(Default)]
struct MemInner {
    head: Vec<u8>,
    base: u64,
    bytes: Vec<u8>,
    /// Length of the log at the last `sync` (or durable truncate).
    synced_len: u64,
    master: Option<Vec<u8>>,
}

impl MemInner {
    fn len(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    /// Index into `bytes` of `offset`, which must not lie in the discarded range.
    fn index(&self, offset: u64) -> io::Result<usize> {
        if offset < self.base && offset >= self.head.len() as u64 {
            return Err(discarded(offset, self.base));
        }
        usize::try_from(offset.saturating_sub(self.base))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
    }
}

fn discarded(offset: u64, base: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("log offset {offset} was discarded (the log is held from {base})"),
    )
}

impl MemLogStorage {
    pub fn new() -> MemLogStorage {
        MemLogStorage::default()
    }

    /// A storage holding what a disk would hold after a crash now: every synced byte, plus
    /// the first `unsynced_kept` bytes written since the last sync (a torn write keeps some).
    /// Exact for a writer that only appends, as the log manager does. A discard is durable at
    /// once (like the master record, which is written before it), so the image keeps it.
    pub fn crash_image(&self, unsynced_kept: usize) -> MemLogStorage {
        let inner = self.inner.lock();
        let keep = inner
            .synced_len
            .saturating_add(unsynced_kept as u64)
            .min(inner.len())
            .max(inner.base);
        let kept = (keep - inner.base) as usize;
        MemLogStorage {
            inner: Arc::new(Mutex::new(MemInner {
                head: inner.head.clone(),
                base: inner.base,
                bytes: inner.bytes[..kept].to_vec(),
                synced_len: keep,
                master: inner.master.clone(),
            })),
        }
    }

    /// Marks durable the bytes below `len` (at most those written): what a sync that began
    /// when the log was `len` long guarantees, for wrappers that model a sync taking time
    /// while later writes arrive (`sync` itself marks everything written when it runs).
    pub fn sync_upto(&self, len: u64) {
        let mut inner = self.inner.lock();
        inner.synced_len = inner.synced_len.max(len.min(inner.len()));
    }

    /// A copy of the whole log image, discarded bytes as zeros (as a punched file reads), for
    /// tests and tools that inspect a log.
    pub fn bytes(&self) -> Vec<u8> {
        let inner = self.inner.lock();
        let mut image = vec![0u8; inner.len() as usize];
        image[..inner.head.len()].copy_from_slice(&inner.head);
        image[inner.base as usize..].copy_from_slice(&inner.bytes);
        image
    }

    /// Replaces the stored bytes (for tests that damage a log on purpose); nothing is
    /// discarded afterwards.
    pub fn set_bytes(&self, bytes: Vec<u8>) {
        let mut inner = self.inner.lock();
        inner.synced_len = bytes.len() as u64;
        inner.head.clear();
        inner.base = 0;
        inner.bytes = bytes;
    }
}

impl LogStorage for MemLogStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let inner = self.inner.lock();
        if offset < inner.head.len() as u64 {
            // The header; a read never spans the head and the live bytes.
            let head = &inner.head[offset as usize..];
            let n = buf.len().min(head.len());
            buf[..n].copy_from_slice(&head[..n]);
            return Ok(n);
        }
        if offset >= inner.len() {
            return Ok(0);
        }
        let start = inner.index(offset)?;
        let n = buf.len().min(inner.bytes.len() - start);
        buf[..n].copy_from_slice(&inner.bytes[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let mut inner = self.inner.lock();
        if offset < inner.base {
            return Err(discarded(offset, inner.base));
        }
        let start = inner.index(offset)?;
        let end = start + bytes.len();
        if inner.bytes.len() < end {
            inner.bytes.resize(end, 0);
        }
        inner.bytes[start..end].copy_from_slice(bytes);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut inner = self.inner.lock();
        inner.synced_len = inner.len();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.inner.lock().len())
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut inner = self.inner.lock();
        let len = len.min(inner.len());
        if len < inner.base {
            return Err(discarded(len, inner.base));
        }
        let keep = (len - inner.base) as usize;
        inner.bytes.truncate(keep);
        inner.synced_len = len;
        Ok(())
    }

    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.inner.lock().master.clone())
    }

    fn write_master(&self, bytes: &[u8]) -> io::Result<()> {
        self.inner.lock().master = Some(bytes.to_vec());
        Ok(())
    }

    /// Keeps `0..range.start` as the head and drops the buffer's prefix below `range.end`
    /// (one move of the live bytes); the buffer's capacity is cut to twice what it holds, so
    /// the memory held follows the live log, not its peak.
    fn discard(&self, range: Range<u64>) -> io::Result<()> {
        let mut inner = self.inner.lock();
        let end = range.end.min(inner.len());
        if end <= inner.base.max(range.start) {
            return Ok(());
        }
        if inner.base == 0 {
            let head = usize::try_from(range.start)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?
                .min(inner.bytes.len());
            inner.head = inner.bytes[..head].to_vec();
        } else if range.start != inner.head.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a discard must keep the head the first one kept",
            ));
        }
        let cut = (end - inner.base) as usize;
        inner.bytes.drain(..cut);
        let held = inner.bytes.len();
        inner.bytes.shrink_to(held.saturating_mul(2));
        inner.base = end;
        Ok(())
    }

    /// The head plus the buffer's capacity.
    fn held_bytes(&self) -> io::Result<Option<u64>> {
        let inner = self.inner.lock();
        Ok(Some((inner.head.len() + inner.bytes.capacity()) as u64))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes, reads and truncates `storage`; reads past the log's end see `len`, which
    /// includes any zeros a file preallocated.
    pub(crate) fn exercise(storage: &dyn LogStorage) {
        assert_eq!(storage.len().unwrap(), 0);
        storage.write_at(0, b"hello").unwrap();
        storage.write_at(5, b" world").unwrap();
        storage.sync().unwrap();
        let len = storage.len().unwrap();
        assert!(len >= 11, "{len}");
        let mut buf = [0xAAu8; 20];
        assert_eq!(storage.read_at(0, &mut buf).unwrap() as u64, len.min(20));
        assert_eq!(&buf[..11], b"hello world");
        assert!(buf[11..len.min(20) as usize].iter().all(|&b| b == 0));
        assert_eq!(storage.read_at(6, &mut buf[..3]).unwrap(), 3);
        assert_eq!(&buf[..3], b"wor");
        assert_eq!(storage.read_at(len + 50, &mut buf).unwrap(), 0);
        storage.truncate(5).unwrap();
        assert_eq!(storage.len().unwrap(), 5);
        assert_eq!(storage.read_at(0, &mut buf).unwrap(), 5);
        assert_eq!(storage.read_master().unwrap(), None);
        storage.write_master(b"m1").unwrap();
        storage.write_master(b"m2").unwrap();
        assert_eq!(storage.read_master().unwrap().as_deref(), Some(&b"m2"[..]));
    }

    #[test]
    fn mem_storage_reads_what_it_wrote() {
        exercise(&MemLogStorage::new());
    }

    #[test]
    fn mem_storage_discard_keeps_the_head_and_offsets_and_refuses_the_hole() {
        let s = MemLogStorage::new();
        s.write_at(0, b"HEADER--abcdefghij").unwrap();
        s.sync().unwrap();
        s.discard(8..12).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(s.read_at(0, &mut buf).unwrap(), 8);
        assert_eq!(&buf, b"HEADER--");
        assert_eq!(s.read_at(12, &mut buf[..3]).unwrap(), 3);
        assert_eq!(&buf[..3], b"efg");
        assert!(s.read_at(9, &mut buf).is_err(), "a read in the hole");
        assert!(s.write_at(10, b"x").is_err(), "a write in the hole");
        assert!(s.truncate(10).is_err(), "a cut into the hole");
        assert_eq!(s.len().unwrap(), 18);
        // A later discard grows the hole; one with another head is refused.
        s.discard(8..14).unwrap();
        assert!(s.discard(4..16).is_err());
        s.write_at(18, b"kl").unwrap();
        assert_eq!(s.bytes(), b"HEADER--\0\0\0\0\0\0ghijkl");
        // A crash image keeps the hole and drops the unsynced tail.
        let image = s.crash_image(1);
        assert_eq!(image.bytes(), b"HEADER--\0\0\0\0\0\0ghijk");
        assert!(image.read_at(13, &mut buf).is_err());
    }

    #[test]
    fn crash_image_drops_unsynced_bytes() {
        let s = MemLogStorage::new();
        s.write_at(0, b"durable").unwrap();
        s.sync().unwrap();
        s.write_at(7, b"-volatile").unwrap();
        assert_eq!(s.crash_image(0).bytes(), b"durable");
        assert_eq!(s.crash_image(3).bytes(), b"durable-vo");
        assert_eq!(s.crash_image(1000).bytes(), b"durable-volatile");
    }
}
