//! The log in files: a first file that holds the header, one file for each later segment,
//! and the master record beside them.
//!
//! # Segments
//!
//! The log's bytes are one flat array (an offset is an LSN), kept in files of at most
//! [`FileLogOptions::segment_bytes`] (64 MiB by default). The first segment is the file
//! named by the path (`wal.log`) and starts at offset 0; every later one is named by where it
//! starts, in sixteen hex digits (`wal.log.0000000004000000`), at a multiple of the segment
//! size. Writes go to the last segment; a write that reaches its end first syncs it and
//! creates the next (its directory entry synced before any byte in it counts as written), so
//! a sync covers the last segment only.
//!
//! ```text
//!   wal.log                   wal.log.0000000004000000   wal.log.0000000008000000
//!   [ header | hole ........ ] (unlinked: discarded)     [ live log ..... | zeros ]
//!   0        16       64 MiB  64 MiB            128 MiB  128 MiB        end   limit
//! ```
//!
//! A discard unlinks every segment that lies wholly below the log's new start, except the
//! first, which keeps the header: while the start lies in it, its discarded blocks are
//! punched out (`fallocate(PUNCH_HOLE | KEEP_SIZE)` on Linux, whole blocks only, so no live
//! byte is touched), and once the start has passed it, it is cut to the header. Blocks below
//! the start in the segment that holds it are punched too. So the files' sizes stay bounded
//! by what the log still holds plus a segment or two, however long the database runs: no file
//! grows towards the file system's largest offset, and no copy of the directory (`tar`,
//! `rsync`, `scp`) carries gigabytes of holes. A read below the start reads zeros, as a hole
//! does; the log manager never makes one.
//!
//! A log written before segments existed is one long `wal.log`: it opens as a first segment
//! that ends at the next multiple of the segment size past its end, the log goes on in
//! segments from there, and the first checkpoint whose start passes that end cuts the long
//! file to its header.
//!
//! A segment missing between two others leaves a stretch no file holds
//! ([`LogStorage::missing`]): below the start that is what discards leave (and a crash during
//! one: its unlinks are not synced), past it the log manager refuses the log by name rather
//! than take the zeros for a torn tail and cut every record after them.
//!
//! # Zeros ahead of the end, and four ways to sync
//!
//! A durable commit waits for one force, so a force should write the log's new bytes and
//! nothing else. A file that grows with each write makes each sync write its new size too:
//! a journal commit on ext4. So [`FileLogStorage`] keeps the last segment zero-filled ahead of
//! the log's end, in chunks of [`FileLogOptions::prealloc_bytes`] (16 MiB by default; 0 turns
//! it off), never past the segment's end:
//!
//! ```text
//!   [ log records .................. | zeros, written and synced .......... ]
//!   segment start                    end                          file length ≤ limit
//!                                    └ the next write lands here, in place;
//!                                      its sync has no size to write
//! ```
//!
//! A write that would pass the file's length first writes zeros up to the next multiple of
//! the chunk at or past it (at most to the segment's end) and syncs the file once
//! (`sync_all`: the zeros and the new size). Then it writes its bytes in place. The zeros are
//! written, not `fallocate`d: an allocated but unwritten extent changes metadata at its first
//! write. `len` counts the zeros. [`LogManager::open`](crate::LogManager::open) ends the log
//! at its first bad frame and takes zeros to the end for a torn tail, which it truncates.
//! Dropping the storage trims the zeros past the log's end, so a log closed cleanly is as
//! long as its records. After a crash they stay, and the next open cuts them. A truncation
//! cuts them too (and unlinks the segments past its point first); the next write adds more.
//!
//! [`LogSync`] chooses how a write becomes durable:
//!
//! | method      | writes through          | a write                        | `sync`      |
//! |-------------|-------------------------|--------------------------------|-------------|
//! | `Fdatasync` | the buffered descriptor | `pwrite`                       | `fdatasync` |
//! | `Fsync`     | the buffered descriptor | `pwrite`                       | `fsync`     |
//! | `Dsync`     | `O_DSYNC`               | `pwrite`, durable on return    | nothing     |
//! | `Direct`    | `O_DIRECT \| O_DSYNC`   | whole blocks, durable on return | nothing    |
//!
//! `Direct` bypasses the page cache. Each write covers whole blocks of
//! [`DIRECT_BLOCK_BYTES`] (more if the file system asks; segments start on such blocks), from
//! memory aligned the same way. A write at an unaligned offset rewrites the block it starts
//! in. The storage keeps the bytes of the block holding the log's end (after an open, a
//! truncation or a new segment it reads them once), puts them before the new bytes, and pads
//! the last block with zeros:
//!
//! ```text
//!   blocks:    |       4096       |       4096       |       4096       |
//!   the file:  [ log ............ | log ...... ]                           end at 1.4 blocks
//!   a write:                                   [ new bytes ....... ]
//!   written:                      [ kept ..... | new bytes ....... | 0 0 0 0 0 0 0 0 ]
//!                                 └ from an aligned buffer, blocks 1 and 2 ──────────┘
//! ```
//!
//! Reads, zero fills, truncation, hole punching and syncs go through each segment's
//! buffered descriptor; the last segment has a second one for writes under `Dsync` (so that
//! zero fills are not synced write by write) and `Direct`. A file system that refuses
//! `O_DIRECT` fails the open, with an error that names the method and the directory.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
#[cfg(unix)]
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(not(unix))]
use storage::file::FileExt;

use parking_lot::{Mutex, RwLock};

use crate::storage::{FileLogOptions, LogStorage, LogSync, DIRECT_BLOCK_BYTES};

/// Zeros written per `pwrite` while preallocating.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// One file of the log: the bytes from `start` on, up to where the next segment starts.
struct Segment {
    /// The log offset of the file's first byte: 0 for the first segment, a multiple of the
    /// segment size (when it was created) for the others.
    start: u64,
    /// Read, zero-filled, cut, punched and synced through; written through under
    /// `Fdatasync` and `Fsync`.
    file: File,
    path: PathBuf,
}

/// A log in segment files, with its master record in a file beside them.
pub struct FileLogStorage {
    /// The first segment's file (the log's name).
    path: PathBuf,
    options: FileLogOptions,
    /// The block a `Direct` write covers (a power of two); unused by the other methods.
    block_bytes: usize,
    /// Every segment the log holds, by start; the first starts at 0 and is never removed.
    /// Read-locked for a moment by reads, syncs and `len` to pick their segment;
    /// write-locked to add one (a write, under `tail`) or remove some (a truncation, under
    /// `tail`, or a discard).
    segments: RwLock<Vec<Arc<Segment>>>,
    /// The stretches between segments that no file held at open (see
    /// [`LogStorage::missing`]).
    missing: Vec<Range<u64>>,
    /// Latch: the last segment, the log's end and the file's length as writes, truncation
    /// and drop see them. Held by `write_at` (including any zero fill and a new segment) and
    /// `truncate`; reads do not take it.
    tail: Mutex<Tail>,
}

/// Where the log ends (latch-protected in [`FileLogStorage::tail`]). Offsets are the log's.
///
/// Invariant: `seg.start <= end <= file_len <= limit`; the bytes `end..file_len` are zeros
/// this storage wrote (preallocation, or the padding of a `Direct` write's last block).
struct Tail {
    /// The last segment: every write lands in it.
    seg: Arc<Segment>,
    /// Under [`LogSync::Dsync`] and [`LogSync::Direct`]: the descriptor of the last
    /// segment every log write goes through (`O_DSYNC`, plus `O_DIRECT` for `Direct`).
    writer: Option<File>,
    /// Where the last segment ends: a write there starts the next segment.
    limit: u64,
    /// The log's end: where the file ended when opened or last truncated, or the furthest
    /// byte written since.
    end: u64,
    /// Where the last segment's file ends as this storage left it.
    file_len: u64,
    /// `Direct` only: the start of the block holding `end` and its bytes below `end`, once
    /// known (a write puts them here; after open, truncate or a new segment the next write
    /// reads them).
    block_at: Option<u64>,
    block: Vec<u8>,
    /// `Direct` only: the aligned buffer a write is assembled in.
    scratch: Option<AlignedBuf>,
}

impl FileLogStorage {
    /// Opens the log at `path` (its first segment; later ones beside it) with the default
    /// options (`fdatasync`, 16 MiB of preallocation, 64 MiB segments), creating it (empty)
    /// if it does not exist.
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileLogStorage> {
        FileLogStorage::open_with(path, FileLogOptions::default())
    }

    /// Opens the log at `path`, creating it (empty) if it does not exist, with every
    /// segment beside it. With [`LogSync::Direct`], a file system that refuses `O_DIRECT`
    /// fails the open with an error naming the method and the directory. Segments that
    /// overlap, a segment size that is not a whole number of blocks, or (with `Direct`) a
    /// segment that does not start on a block are errors naming the file.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: FileLogOptions,
    ) -> io::Result<FileLogStorage> {
        let path = path.as_ref().to_path_buf();
        if options.segment_bytes == 0
            || !options
                .segment_bytes
                .is_multiple_of(DIRECT_BLOCK_BYTES as u64)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a log segment of {} bytes: it must be a positive multiple of {DIRECT_BLOCK_BYTES}",
                    options.segment_bytes
                ),
            ));
        }
        let first = open_segment_file(&path, false)?;
        let block_bytes = match options.sync {
            LogSync::Direct => direct_block_bytes(&first),
            _ => DIRECT_BLOCK_BYTES,
        };
        if options.sync == LogSync::Direct
            && !options.segment_bytes.is_multiple_of(block_bytes as u64)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a log segment of {} bytes is not a whole number of the {block_bytes}-byte \
                     blocks that O_DIRECT writes in {}",
                    options.segment_bytes,
                    directory_of(&path).display()
                ),
            ));
        }
        let mut segments = vec![Arc::new(Segment {
            start: 0,
            file: first,
            path: path.clone(),
        })];
        for (start, seg_path) in later_segments(&path)? {
            if options.sync == LogSync::Direct && !start.is_multiple_of(block_bytes as u64) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "log segment {} does not start on a {block_bytes}-byte block, which \
                         O_DIRECT needs",
                        seg_path.display()
                    ),
                ));
            }
            let file = open_segment_file(&seg_path, false)?;
            segments.push(Arc::new(Segment {
                start,
                file,
                path: seg_path,
            }));
        }
        let mut missing = Vec::new();
        for pair in segments.windows(2) {
            let len = pair[0].file.metadata()?.len();
            if pair[0].start + len < pair[1].start {
                missing.push(pair[0].start + len..pair[1].start);
            }
            if pair[0].start + len > pair[1].start {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "log segment {} ({len} bytes from log offset {}) overlaps the next, {} \
                         (from offset {})",
                        pair[0].path.display(),
                        pair[0].start,
                        pair[1].path.display(),
                        pair[1].start
                    ),
                ));
            }
        }
        let last = segments.last().expect("the first segment").clone();
        let end = last.start + last.file.metadata()?.len();
        let writer = durable_writer(&last.path, options.sync)?;
        let storage = FileLogStorage {
            path,
            options,
            block_bytes,
            missing,
            tail: Mutex::new(Tail {
                limit: segment_limit(last.start, end, options.segment_bytes),
                seg: last,
                writer,
                end,
                file_len: end,
                block_at: None,
                block: Vec::new(),
                scratch: None,
            }),
            segments: RwLock::new(segments),
        };
        // The first file may have just been created: make its directory entry durable too.
        storage.sync_dir()?;
        Ok(storage)
    }

    /// The first segment's path (the log's name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn options(&self) -> FileLogOptions {
        self.options
    }

    /// Every segment's file, in log order, the first at [`FileLogStorage::path`].
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments
            .read()
            .iter()
            .map(|s| s.path.clone())
            .collect()
    }

    fn master_path(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    }

    fn sync_dir(&self) -> io::Result<()> {
        storage::file::sync_directory(&directory_of(&self.path))
    }

    /// The last segment, where writes go.
    fn last_segment(&self) -> Arc<Segment> {
        self.segments
            .read()
            .last()
            .expect("the first segment is never removed")
            .clone()
    }

    /// The segment holding log offset `at`, and where the next one starts (none for the last).
    fn segment_at(&self, at: u64) -> (Arc<Segment>, Option<u64>) {
        let segments = self.segments.read();
        let i = segments
            .partition_point(|s| s.start <= at)
            .saturating_sub(1);
        (segments[i].clone(), segments.get(i + 1).map(|s| s.start))
    }

    /// Syncs `file` as the method syncs the log (nothing where writes are durable already).
    fn sync_file(&self, file: &File) -> io::Result<()> {
        match self.options.sync {
            LogSync::Fdatasync => file.sync_data(),
            LogSync::Fsync => file.sync_all(),
            // Every write was durable when it returned, its size included (`O_DSYNC`).
            LogSync::Dsync | LogSync::Direct => Ok(()),
        }
    }

    /// Ends the last segment (its bytes made durable) and starts the next at its limit: the
    /// file created empty, its directory entry synced before any write lands in it.
    fn next_segment(&self, tail: &mut Tail) -> io::Result<()> {
        self.sync_file(&tail.seg.file)?;
        let start = tail.limit;
        let path = segment_path(&self.path, start);
        // A file of that name is a leftover of a log cut since (a truncation that a crash
        // interrupted): nothing in it is log.
        let file = open_segment_file(&path, true)?;
        self.sync_dir()?;
        let writer = durable_writer(&path, self.options.sync)?;
        let seg = Arc::new(Segment { start, file, path });
        self.segments.write().push(seg.clone());
        tail.seg = seg;
        tail.writer = writer;
        tail.limit = segment_limit(start, start, self.options.segment_bytes);
        tail.end = tail.end.max(start);
        tail.file_len = start;
        tail.block_at = None;
        tail.block.clear();
        Ok(())
    }

    /// Writes `bytes`, which lie inside the last segment, at log offset `offset`.
    fn write_in_segment(&self, tail: &mut Tail, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let stop = offset + bytes.len() as u64;
        let need = match self.options.sync {
            LogSync::Direct => stop.div_ceil(self.block_bytes as u64) * self.block_bytes as u64,
            _ => stop,
        };
        self.reserve(tail, need)?;
        let at = offset - tail.seg.start;
        match (&tail.writer, self.options.sync) {
            (_, LogSync::Direct) => self.write_direct(tail, offset, bytes)?,
            (Some(writer), _) => writer.write_all_at(bytes, at)?,
            (None, _) => tail.seg.file.write_all_at(bytes, at)?,
        }
        tail.end = tail.end.max(stop);
        tail.file_len = tail.file_len.max(stop);
        Ok(())
    }

    /// Makes sure the last segment's file reaches log offset `need` before a write up to
    /// there. With preallocation, writes zeros from the file's length up to the next multiple
    /// of the chunk at or past `need` (never past the segment's end) and syncs the file (data
    /// and size) once, so the write lands in place. Without it, nothing: the write extends the
    /// file.
    fn reserve(&self, tail: &mut Tail, need: u64) -> io::Result<()> {
        let chunk = self.options.prealloc_bytes;
        if chunk == 0 || need <= tail.file_len {
            return Ok(());
        }
        let target = need
            .div_ceil(chunk)
            .saturating_mul(chunk)
            .min(tail.limit)
            .max(need);
        let zeros = vec![0u8; ZERO_FILL_BYTES];
        let mut at = tail.file_len;
        while at < target {
            let n = (target - at).min(ZERO_FILL_BYTES as u64) as usize;
            tail.seg
                .file
                .write_all_at(&zeros[..n], at - tail.seg.start)?;
            at += n as u64;
        }
        tail.seg.file.sync_all()?;
        tail.file_len = target;
        Ok(())
    }

    /// A `Direct` write inside the last segment: the whole blocks `bytes` touches, assembled
    /// in an aligned buffer from the kept bytes of the block it starts in, `bytes`, and zeros
    /// (or, for a write below the log's end, the bytes already there) to the end of its last
    /// block.
    fn write_direct(&self, tail: &mut Tail, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let block = self.block_bytes as u64;
        let first = offset / block * block;
        let stop = offset + bytes.len() as u64;
        let last_end = stop.div_ceil(block) * block;
        let span = (last_end - first) as usize;
        let head = (offset - first) as usize;
        let mut scratch = match tail.scratch.take() {
            Some(buf) if buf.len() >= span => buf,
            _ => AlignedBuf::zeroed(
                span.next_power_of_two().max(self.block_bytes),
                self.block_bytes,
            )?,
        };
        let buf = &mut scratch.as_mut_slice()[..span];
        if head > 0 {
            if tail.block_at == Some(first) && tail.block.len() >= head {
                buf[..head].copy_from_slice(&tail.block[..head]);
            } else {
                self.read_or_zeros(first, &mut buf[..head])?;
            }
        }
        buf[head..head + bytes.len()].copy_from_slice(bytes);
        let after = &mut buf[head + bytes.len()..];
        if stop < tail.end {
            // Below the log's end (never done by the log manager): keep what follows.
            self.read_or_zeros(stop, after)?;
        } else {
            after.fill(0);
        }
        // The kept block is stale until the write is known to have happened.
        tail.block_at = None;
        let writer = tail.writer.as_ref().expect("Direct has its descriptor");
        let result = write_whole_blocks(writer, buf, first - tail.seg.start, block);
        if result.is_ok() && stop >= tail.end {
            let at = stop / block * block;
            tail.block.clear();
            tail.block
                .extend_from_slice(&buf[(at - first) as usize..(stop - first) as usize]);
            tail.block_at = Some(at);
        }
        tail.scratch = Some(scratch);
        result?;
        tail.file_len = tail.file_len.max(last_end);
        Ok(())
    }

    /// Fills `buf` from the log at `offset`; bytes past the log's end read as zeros.
    fn read_or_zeros(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let got = self.read_at(offset, buf)?;
        buf[got..].fill(0);
        Ok(())
    }
}

impl LogStorage for FileLogStorage {
    /// Reads segment by segment. A segment's file that ends before the next segment starts
    /// (the first one's punched or unlinked stretch, below the log's start) reads as zeros up
    /// to there.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let (seg, next) = self.segment_at(at);
            let want = match next {
                Some(next) => (buf.len() - done).min((next - at) as usize),
                None => buf.len() - done,
            };
            let got = read_full(&seg.file, &mut buf[done..done + want], at - seg.start)?;
            done += got;
            if got < want {
                if next.is_none() {
                    break;
                }
                buf[done..done + want - got].fill(0);
                done += want - got;
            }
        }
        Ok(done)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut tail = self.tail.lock();
        if offset < tail.seg.start {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a log write at offset {offset} falls before the last segment, {} (from \
                     offset {}): the log is written at its end",
                    tail.seg.path.display(),
                    tail.seg.start
                ),
            ));
        }
        let (mut at, mut rest) = (offset, bytes);
        while !rest.is_empty() {
            while at >= tail.limit {
                self.next_segment(&mut tail)?;
            }
            let n = rest.len().min((tail.limit - at) as usize);
            self.write_in_segment(&mut tail, at, &rest[..n])?;
            at += n as u64;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Syncs the last segment: every earlier one was synced as the log left it.
    fn sync(&self) -> io::Result<()> {
        let last = self.last_segment();
        self.sync_file(&last.file)
    }

    /// Where the last segment's file ends, preallocated zeros included.
    fn len(&self) -> io::Result<u64> {
        let last = self.last_segment();
        Ok(last.start + last.file.metadata()?.len())
    }

    /// Unlinks the segments that start at or past `len` (the directory synced) before it cuts
    /// the one holding `len`, so that a crash in between leaves no segment after a cut one.
    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut tail = self.tail.lock();
        // Whatever happens below, the kept block may no longer match the file.
        tail.block_at = None;
        let removed: Vec<Arc<Segment>> = {
            let mut segments = self.segments.write();
            let keep = segments.partition_point(|s| s.start <= len).max(1);
            segments.drain(keep..).collect()
        };
        for seg in &removed {
            remove_if_present(&seg.path)?;
        }
        if !removed.is_empty() {
            self.sync_dir()?;
        }
        let (seg, _) = self.segment_at(len);
        if !Arc::ptr_eq(&seg, &tail.seg) {
            tail.writer = durable_writer(&seg.path, self.options.sync)?;
            tail.seg = seg.clone();
        }
        seg.file.set_len(len - seg.start)?;
        tail.end = len;
        tail.file_len = len;
        tail.limit = segment_limit(seg.start, len, self.options.segment_bytes);
        seg.file.sync_all()
    }

    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.master_path(".master")) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_master(&self, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.master_path(".master.tmp");
        {
            let mut f = File::create(&tmp)?;
            io::Write::write_all(&mut f, bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.master_path(".master"))?;
        self.sync_dir()
    }

    /// Unlinks every segment but the first that ends at or before `range.end`; cuts the first
    /// to `range.start` (its header) once all of its log lies in the range, and punches the
    /// whole file-system blocks of `range` out of it before that; punches them out of the one
    /// holding `range.end` too (Linux). Punched files keep their sizes and holes read as
    /// zeros. A file system without hole punching (`EOPNOTSUPP`) keeps the blocks, which is
    /// not an error. Neither the unlinks nor the cut are synced: what a crash brings back lies
    /// below the log's start, never read.
    fn discard(&self, range: Range<u64>) -> io::Result<()> {
        let removed: Vec<Arc<Segment>> = {
            let mut segments = self.segments.write();
            let mut until = 1;
            while until + 1 < segments.len() && segments[until + 1].start <= range.end {
                until += 1;
            }
            segments.drain(1..until).collect()
        };
        for seg in &removed {
            remove_if_present(&seg.path)?;
        }
        let (first, next) = {
            let segments = self.segments.read();
            (segments[0].clone(), segments.get(1).map(|s| s.start))
        };
        match next {
            // All of the first segment's log is discarded: it keeps the header alone.
            Some(next) if range.end >= next => {
                if first.file.metadata()?.len() > range.start {
                    first.file.set_len(range.start)?;
                }
            }
            _ => punch_blocks(
                &first.file,
                range.start,
                range.end.min(next.unwrap_or(u64::MAX)),
            )?,
        }
        let (holder, _) = self.segment_at(range.end);
        if holder.start > 0 {
            punch_blocks(&holder.file, 0, range.end - holder.start)?;
        }
        Ok(())
    }

    fn missing(&self) -> Vec<Range<u64>> {
        self.missing.clone()
    }

    /// The segments' allocated sizes (`st_blocks` × 512, what `du` shows) less the zeros
    /// preallocated past the block holding the log's end: those are a bounded reserve, not
    /// log.
    fn held_bytes(&self) -> io::Result<Option<u64>> {
        let segments: Vec<Arc<Segment>> = self.segments.read().clone();
        let mut allocated = 0;
        for seg in &segments {
            allocated += allocated_bytes(&seg.file.metadata()?);
        }
        let last = segments.last().expect("the first segment");
        let meta = last.file.metadata()?;
        let end = self.tail.lock().end.saturating_sub(last.start);
        let block = blksize(&meta);
        let reserve = meta.len().saturating_sub(end.div_ceil(block) * block);
        Ok(Some(allocated.saturating_sub(reserve)))
    }
}

/// Trims the zeros past the log's end, so that a log closed cleanly is as long as its
/// records. Only where the last segment is as this storage left it (another descriptor may
/// have cut it since); no sync is needed: after a crash the zeros come back and the next open
/// cuts them.
impl Drop for FileLogStorage {
    fn drop(&mut self) {
        let tail = self.tail.get_mut();
        if tail.file_len <= tail.end {
            return;
        }
        let seg = &tail.seg;
        if let Ok(meta) = seg.file.metadata() {
            if meta.len() == tail.file_len - seg.start {
                let _ = seg.file.set_len(tail.end - seg.start);
            }
        }
    }
}

/// Where a segment starting at `start` whose file ends at `end` ends: the next multiple of
/// the segment size past its start, or past its end for a first segment written before
/// segments existed (longer than one).
fn segment_limit(start: u64, end: u64, segment_bytes: u64) -> u64 {
    let past_start = (start / segment_bytes + 1) * segment_bytes;
    past_start.max(end.div_ceil(segment_bytes).saturating_mul(segment_bytes))
}

/// The file of the segment starting at log offset `start` (past 0).
fn segment_path(first: &Path, start: u64) -> PathBuf {
    let mut name = first.as_os_str().to_owned();
    name.push(format!(".{start:016x}"));
    PathBuf::from(name)
}

/// The segments after the first beside `first`, by start: files named like it with a dot and
/// sixteen hex digits after.
fn later_segments(first: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let dir = directory_of(first);
    let Some(name) = first.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(suffix) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        if suffix.len() != 16 || !suffix.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let start = u64::from_str_radix(suffix, 16).expect("sixteen hex digits");
        if start == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "log segment {} claims offset 0, which is {}'s",
                    entry.path().display(),
                    first.display()
                ),
            ));
        }
        if !entry.file_type()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "log segment {} is not a regular file",
                    entry.path().display()
                ),
            ));
        }
        found.push((start, entry.path()));
    }
    found.sort_unstable_by_key(|&(start, _)| start);
    Ok(found)
}

/// Opens a segment's file for reads and writes, creating it; `fresh` empties it. An error
/// names the file (which of the log's files could not be opened or created).
fn open_segment_file(path: &Path, fresh: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(fresh)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("log file {}: {e}", path.display())))
}

/// The descriptor the method writes `path` through, if not the buffered one.
fn durable_writer(path: &Path, sync: LogSync) -> io::Result<Option<File>> {
    Ok(match sync {
        LogSync::Fdatasync | LogSync::Fsync => None,
        LogSync::Dsync => Some(open_durable_writer(path, libc::O_DSYNC)?),
        LogSync::Direct => {
            Some(open_direct_writer(path).map_err(|e| direct_refused(&directory_of(path), e))?)
        }
    })
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Fills as much of `buf` as `file` holds at `offset`; returns how many bytes.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Punches the whole file-system blocks of `file` inside `from..to` (offsets in the file).
fn punch_blocks(file: &File, from: u64, to: u64) -> io::Result<()> {
    let block = blksize(&file.metadata()?);
    let from = from.div_ceil(block) * block;
    let to = to / block * block;
    if to <= from {
        return Ok(());
    }
    punch_hole(file, from, to - from)
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The file system's block size for `meta`'s file, at least 512.
#[cfg(unix)]
fn blksize(meta: &std::fs::Metadata) -> u64 {
    meta.blksize().max(512)
}

/// What the file holds on disk (`st_blocks` × 512).
#[cfg(unix)]
fn allocated_bytes(meta: &std::fs::Metadata) -> u64 {
    meta.blocks() * 512
}

// Elsewhere (WebAssembly, where only stored procedures are built and no log is opened): a
// page-sized block, and the file's length.
#[cfg(not(unix))]
fn blksize(_meta: &std::fs::Metadata) -> u64 {
    4096
}

#[cfg(not(unix))]
fn allocated_bytes(meta: &std::fs::Metadata) -> u64 {
    meta.len()
}

/// A second descriptor of the log file, for writes only, with `flags` added.
#[cfg(unix)]
fn open_durable_writer(path: &Path, flags: libc::c_int) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .custom_flags(flags)
        .open(path)
}

#[cfg(not(unix))]
fn open_durable_writer(_path: &Path, _flags: libc::c_int) -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "the log's durable writer needs a Unix system",
    ))
}

#[cfg(target_os = "linux")]
fn open_direct_writer(path: &Path) -> io::Result<File> {
    open_durable_writer(path, libc::O_DIRECT | libc::O_DSYNC)
}

#[cfg(not(target_os = "linux"))]
fn open_direct_writer(_path: &Path) -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "O_DIRECT is opened here on Linux only",
    ))
}

/// The error of an open whose `O_DIRECT` descriptor the file system refused (tmpfs before
/// Linux 6.6 answers `EINVAL`), naming the method and the directory.
fn direct_refused(dir: &Path, err: io::Error) -> io::Error {
    io::Error::new(
        if err.raw_os_error() == Some(libc::EINVAL) {
            io::ErrorKind::Unsupported
        } else {
            err.kind()
        },
        format!(
            "log sync method `direct` opens the log with O_DIRECT, which the file system \
             holding {} refused ({err}); use fdatasync, fsync or dsync there",
            dir.display()
        ),
    )
}

/// The block a `Direct` write covers: [`DIRECT_BLOCK_BYTES`], or more where the file system
/// reports a larger alignment for direct I/O (`statx`, Linux 6.1 and later).
#[cfg(target_os = "linux")]
fn direct_block_bytes(file: &File) -> usize {
    use std::os::fd::AsRawFd;
    // SAFETY: `statx` fills the zeroed struct it is given; the empty path with
    // `AT_EMPTY_PATH` names the open descriptor itself.
    let (rc, stx) = unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        let rc = libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        );
        (rc, stx)
    };
    let mut block = DIRECT_BLOCK_BYTES;
    if rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0 {
        let asked = stx.stx_dio_offset_align.max(stx.stx_dio_mem_align) as usize;
        if asked.is_power_of_two() {
            block = block.max(asked);
        }
    }
    block
}

#[cfg(not(target_os = "linux"))]
fn direct_block_bytes(_file: &File) -> usize {
    DIRECT_BLOCK_BYTES
}

/// Writes `buf` (whole blocks, from aligned memory) at `offset`, continuing after a short
/// write only where it ended on a block boundary: anything else could not be continued with
/// `O_DIRECT` and is an error.
fn write_whole_blocks(file: &File, buf: &[u8], offset: u64, block: u64) -> io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        match file.write_at(&buf[done..], offset + done as u64) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) if n % block as usize != 0 && done + n < buf.len() => {
                return Err(io::Error::other(format!(
                    "a direct write of {} bytes stopped after {} (not a whole block)",
                    buf.len(),
                    done + n
                )))
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Heap memory aligned to a block, for `O_DIRECT` writes.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer owns its memory exclusively, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn zeroed(len: usize, align: usize) -> io::Result<AlignedBuf> {
        let layout = std::alloc::Layout::from_size_align(len.max(align), align)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout's size is at least `align`, so not zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                "no memory for a direct write buffer",
            )
        })?;
        Ok(AlignedBuf { ptr, layout })
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised (zeroed, then written) bytes owned
        // by `self`, borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(target_os = "linux")]
fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "hole past the largest file offset",
        ));
    };
    // SAFETY: a plain system call on a descriptor this `File` owns; no memory is passed.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => Ok(()),
        _ => Err(err),
    }
}

#[cfg(not(target_os = "linux"))]
fn punch_hole(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::tests::exercise;
    use crate::storage::DEFAULT_PREALLOC_BYTES;

    /// Every sync method, with preallocation off, in chunks smaller than a block, and at
    /// the default.
    fn every_option() -> Vec<FileLogOptions> {
        let mut all = Vec::new();
        for sync in LogSync::ALL {
            for prealloc_bytes in [0, 100, DEFAULT_PREALLOC_BYTES] {
                all.push(FileLogOptions {
                    sync,
                    prealloc_bytes,
                    ..FileLogOptions::default()
                });
            }
        }
        all
    }

    #[test]
    fn file_storage_reads_what_it_wrote() {
        for options in every_option() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            exercise(&FileLogStorage::open_with(&path, options).unwrap());
            // Reopening sees the truncated bytes and the last master.
            let again = FileLogStorage::open_with(&path, options).unwrap();
            assert_eq!(again.len().unwrap(), 5, "{options:?}");
            assert_eq!(again.read_master().unwrap().as_deref(), Some(&b"m2"[..]));
            assert!(!dir.path().join("log.master.tmp").exists());
        }
    }

    #[test]
    fn preallocation_keeps_zeros_ahead_in_chunks_and_a_drop_trims_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let chunk = 64 << 10;
        let options = FileLogOptions {
            sync: LogSync::Fdatasync,
            prealloc_bytes: chunk,
            ..FileLogOptions::default()
        };
        let storage = FileLogStorage::open_with(&path, options).unwrap();
        storage.write_at(0, &[7u8; 100]).unwrap();
        assert_eq!(storage.len().unwrap(), chunk);
        storage.write_at(100, &vec![8u8; chunk as usize]).unwrap();
        assert_eq!(
            storage.len().unwrap(),
            2 * chunk,
            "the next multiple past the write"
        );
        let image = std::fs::read(&path).unwrap();
        assert!(image[..100].iter().all(|&b| b == 7));
        assert!(image[100..100 + chunk as usize].iter().all(|&b| b == 8));
        assert!(image[100 + chunk as usize..].iter().all(|&b| b == 0));
        // The reserve is real blocks, but not counted as held log.
        let meta = std::fs::metadata(&path).unwrap();
        assert!(
            meta.blocks() * 512 >= 2 * chunk,
            "zeros written, not a sparse file"
        );
        let held = storage.held_bytes().unwrap().unwrap();
        assert!(held < chunk + 2 * meta.blksize(), "{held}");
        drop(storage);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 100 + chunk);
    }

    #[test]
    fn a_drop_leaves_a_file_cut_by_another_descriptor_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let storage = FileLogStorage::open(&path).unwrap();
        storage.write_at(0, b"abc").unwrap();
        // Someone else cuts and grows the file: its bytes are not this storage's zeros.
        let other = OpenOptions::new().write(true).open(&path).unwrap();
        other.set_len(10).unwrap();
        other.write_all_at(b"xyz", 7).unwrap();
        drop(storage);
        assert_eq!(std::fs::read(&path).unwrap(), b"abc\0\0\0\0xyz");
    }

    /// Appends of random lengths at unaligned offsets, reopening now and then (the kept block
    /// is then read back from the file), read back byte for byte; the file is also read with
    /// no storage in between.
    #[test]
    fn direct_writes_of_random_lengths_read_back_byte_identical() {
        use rand::{Rng, SeedableRng};
        for prealloc_bytes in [0, 256 << 10] {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(7 + prealloc_bytes);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            let options = FileLogOptions {
                sync: LogSync::Direct,
                prealloc_bytes,
                ..FileLogOptions::default()
            };
            let mut storage = FileLogStorage::open_with(&path, options).unwrap();
            let mut model: Vec<u8> = Vec::new();
            for round in 0..300 {
                let len = match rng.gen_range(0..4) {
                    0 => rng.gen_range(1..16),
                    1 => rng.gen_range(1..5000),
                    2 => DIRECT_BLOCK_BYTES - model.len() % DIRECT_BLOCK_BYTES,
                    _ => rng.gen_range(5000..40_000),
                };
                let bytes: Vec<u8> = (0..len).map(|_| rng.gen_range(1..=255)).collect();
                storage.write_at(model.len() as u64, &bytes).unwrap();
                model.extend_from_slice(&bytes);
                if round % 37 == 36 {
                    drop(storage);
                    assert_eq!(std::fs::read(&path).unwrap(), model, "round {round}");
                    storage = FileLogStorage::open_with(&path, options).unwrap();
                }
                if round % 50 == 49 {
                    let mut back = vec![0u8; model.len()];
                    assert_eq!(storage.read_at(0, &mut back).unwrap(), model.len());
                    assert_eq!(back, model, "round {round}");
                }
            }
            let len = storage.len().unwrap() as usize;
            assert!(len >= model.len());
            let mut back = vec![0xAAu8; len];
            assert_eq!(storage.read_at(0, &mut back).unwrap(), len);
            assert_eq!(&back[..model.len()], &model[..]);
            assert!(back[model.len()..].iter().all(|&b| b == 0));
            drop(storage);
            assert_eq!(std::fs::read(&path).unwrap(), model);
        }
    }

    #[test]
    fn a_direct_write_inside_the_log_keeps_the_bytes_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let options = FileLogOptions {
            sync: LogSync::Direct,
            prealloc_bytes: 0,
            ..FileLogOptions::default()
        };
        let storage = FileLogStorage::open_with(&path, options).unwrap();
        let mut model = vec![3u8; 10_000];
        storage.write_at(0, &model).unwrap();
        storage.write_at(4090, b"middle").unwrap();
        model[4090..4096].copy_from_slice(b"middle");
        drop(storage);
        assert_eq!(std::fs::read(&path).unwrap(), model);
    }

    /// The flags of an open descriptor, as the kernel holds them.
    #[cfg(target_os = "linux")]
    fn open_flags(file: &File) -> libc::c_int {
        use std::os::fd::AsRawFd;
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", file.as_raw_fd()));
        let info = info.unwrap();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap();
        libc::c_int::from_str_radix(flags.trim(), 8).unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn each_method_writes_through_a_descriptor_with_its_flags() {
        let dir = tempfile::tempdir().unwrap();
        let durable = libc::O_DSYNC | libc::O_DIRECT;
        for (sync, flags) in [
            (LogSync::Fdatasync, None),
            (LogSync::Fsync, None),
            (LogSync::Dsync, Some(libc::O_DSYNC)),
            (LogSync::Direct, Some(durable)),
        ] {
            let options = FileLogOptions {
                sync,
                prealloc_bytes: 0,
                ..FileLogOptions::default()
            };
            let storage = FileLogStorage::open_with(dir.path().join("log"), options).unwrap();
            assert_eq!(
                open_flags(&storage.segments.read()[0].file) & durable,
                0,
                "{sync:?}"
            );
            let writer = storage.tail.lock().writer.as_ref().map(open_flags);
            assert_eq!(writer.map(|f| f & durable), flags, "{sync:?}");
        }
    }

    #[test]
    fn a_refused_direct_open_names_the_method_and_the_directory() {
        let err = direct_refused(
            Path::new("/some/dir"),
            io::Error::from_raw_os_error(libc::EINVAL),
        );
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
        let text = err.to_string();
        assert!(
            text.contains("`direct`") && text.contains("O_DIRECT"),
            "{text}"
        );
        assert!(text.contains("/some/dir"), "{text}");
    }

    /// Segments of sixteen 4 KiB blocks, so that a few hundred KiB of log cross many.
    const SEGMENT: u64 = 64 << 10;

    fn segmented(sync: LogSync, prealloc_bytes: u64) -> FileLogOptions {
        FileLogOptions {
            sync,
            prealloc_bytes,
            segment_bytes: SEGMENT,
        }
    }

    /// The files beside `path` named as its later segments, by name.
    fn segment_files(path: &Path) -> Vec<String> {
        let mut names: Vec<String> = later_segments(path)
            .unwrap()
            .into_iter()
            .map(|(_, p)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Appends `total` bytes of random content in pieces of random lengths (some ending
    /// exactly on a segment's end), to `storage` and `model`.
    fn append_random(storage: &FileLogStorage, model: &mut Vec<u8>, total: usize, seed: u64) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let stop = model.len() + total;
        while model.len() < stop {
            let len = match rng.gen_range(0..4) {
                0 => rng.gen_range(1..16),
                1 => rng.gen_range(1..5000),
                2 => SEGMENT as usize - model.len() % SEGMENT as usize,
                _ => rng.gen_range(5000..150_000),
            };
            let len = len.min(stop - model.len());
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen_range(1..=255)).collect();
            storage.write_at(model.len() as u64, &bytes).unwrap();
            model.extend_from_slice(&bytes);
        }
    }

    /// Reads `model` back from `storage`: whole, and in pieces that straddle segment ends.
    fn check_reads(storage: &FileLogStorage, model: &[u8], from: usize, what: &str) {
        let mut back = vec![0xAAu8; model.len() - from];
        let got = storage.read_at(from as u64, &mut back).unwrap();
        assert!(got >= back.len(), "{what}: read {got} of {}", back.len());
        assert!(back == model[from..], "{what}: the whole log differs");
        let mut at = (from as u64 + 100).div_ceil(SEGMENT).max(1) * SEGMENT;
        while at + 100 < model.len() as u64 {
            let mut piece = [0u8; 200];
            let start = at - 100;
            let want = piece.len().min(model.len() - start as usize);
            assert!(storage.read_at(start, &mut piece[..want]).unwrap() >= want);
            assert_eq!(
                &piece[..want],
                &model[start as usize..start as usize + want],
                "{what} at {at}"
            );
            at += SEGMENT;
        }
    }

    /// Every method, with and without preallocation (in chunks that do and do not divide a
    /// segment): a log of about ten segments reads back byte for byte, while written and after
    /// a reopen; every segment but the last is a segment long, named by its start; a drop
    /// leaves the last one as long as its records.
    #[test]
    fn writes_across_segments_read_back_and_survive_a_reopen() {
        for sync in LogSync::ALL {
            for prealloc_bytes in [0, 24 << 10, SEGMENT] {
                let what = format!("{sync:?}, prealloc {prealloc_bytes}");
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("log");
                let options = segmented(sync, prealloc_bytes);
                let storage = FileLogStorage::open_with(&path, options).unwrap();
                let mut model = Vec::new();
                append_random(&storage, &mut model, 600 << 10, 11 + prealloc_bytes);
                storage.sync().unwrap();
                check_reads(&storage, &model, 0, &what);
                let len = storage.len().unwrap();
                assert!(len >= model.len() as u64, "{what}");
                drop(storage);

                let segments = model.len().div_ceil(SEGMENT as usize);
                let expected: Vec<String> = (1..segments as u64)
                    .map(|k| format!("log.{:016x}", k * SEGMENT))
                    .collect();
                assert_eq!(segment_files(&path), expected, "{what}");
                assert_eq!(std::fs::metadata(&path).unwrap().len(), SEGMENT, "{what}");
                let mut joined = std::fs::read(&path).unwrap();
                for name in &expected {
                    let bytes = std::fs::read(dir.path().join(name)).unwrap();
                    if name != expected.last().unwrap() {
                        assert_eq!(bytes.len() as u64, SEGMENT, "{what}: {name}");
                    }
                    joined.extend_from_slice(&bytes);
                }
                assert!(joined == model, "{what}: the files joined are not the log");

                let storage = FileLogStorage::open_with(&path, options).unwrap();
                assert_eq!(storage.len().unwrap(), model.len() as u64, "{what}");
                check_reads(&storage, &model, 0, &what);
                // The log goes on where it ended, in the same segments.
                append_random(&storage, &mut model, 200 << 10, 99);
                check_reads(&storage, &model, 0, &what);
                assert_eq!(
                    storage.segment_paths().len(),
                    model.len().div_ceil(SEGMENT as usize),
                    "{what}"
                );
            }
        }
    }

    /// A discard unlinks the segments wholly below its end but the first, which keeps its
    /// length while the start lies in it (punched) and is cut to the header once the start
    /// has passed it; the log above the end reads as before, below it as zeros, and a reopen
    /// finds the same log.
    #[test]
    fn a_discard_unlinks_whole_segments_below_the_start_and_keeps_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let options = segmented(LogSync::Fdatasync, 0);
        let storage = FileLogStorage::open_with(&path, options).unwrap();
        let mut model = Vec::new();
        append_random(&storage, &mut model, 10 * SEGMENT as usize + 5000, 3);
        storage.sync().unwrap();
        storage.discard(16..SEGMENT / 2).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), SEGMENT);
        assert_eq!(segment_files(&path).len(), 10);
        check_reads(
            &storage,
            &model,
            SEGMENT as usize / 2,
            "the start in the first",
        );
        let held_before = storage.held_bytes().unwrap().unwrap();
        assert_eq!(segment_files(&path).len(), 10);

        // The start inside the seventh segment (offsets 6..7 segments).
        let start = 6 * SEGMENT + 12_345;
        storage.discard(16..start).unwrap();
        assert_eq!(
            segment_files(&path),
            (6..=10)
                .map(|k| format!("log.{:016x}", k * SEGMENT))
                .collect::<Vec<_>>(),
            "segments 1 to 5 end at or before the start"
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            16,
            "the first segment, all of its log discarded, keeps its header alone"
        );
        check_reads(&storage, &model, start as usize, "after the discard");
        let mut header = [0u8; 16];
        assert_eq!(storage.read_at(0, &mut header).unwrap(), 16);
        assert_eq!(header, model[..16], "the header is kept");
        let mut below = vec![0xAAu8; 3000];
        assert_eq!(
            storage.read_at(3 * SEGMENT - 1000, &mut below).unwrap(),
            3000
        );
        assert!(
            below.iter().all(|&b| b == 0),
            "unlinked segments read as zeros"
        );
        let held_after = storage.held_bytes().unwrap().unwrap();
        assert!(
            held_after <= held_before - 5 * SEGMENT,
            "{held_before} -> {held_after}"
        );
        assert_eq!(storage.len().unwrap(), model.len() as u64);

        // A later discard goes on from there; writes and reads carry on.
        storage.discard(16..9 * SEGMENT).unwrap();
        assert_eq!(segment_files(&path).len(), 2, "{:?}", segment_files(&path));
        append_random(&storage, &mut model, 2 * SEGMENT as usize, 5);
        check_reads(&storage, &model, 9 * SEGMENT as usize, "after writes");
        drop(storage);
        let storage = FileLogStorage::open_with(&path, options).unwrap();
        assert_eq!(storage.len().unwrap(), model.len() as u64);
        check_reads(&storage, &model, 9 * SEGMENT as usize, "reopened");
    }

    /// A cut into an earlier segment unlinks the later ones; the log goes on from the cut in
    /// segments at the same offsets, and a reopen agrees.
    #[test]
    fn a_truncation_into_an_earlier_segment_unlinks_the_later_ones() {
        for sync in LogSync::ALL {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            let options = segmented(sync, 24 << 10);
            let storage = FileLogStorage::open_with(&path, options).unwrap();
            let mut model = Vec::new();
            append_random(&storage, &mut model, 5 * SEGMENT as usize + 777, 8);
            let cut = 2 * SEGMENT + 1001;
            storage.truncate(cut).unwrap();
            model.truncate(cut as usize);
            assert_eq!(storage.len().unwrap(), cut, "{sync:?}");
            assert_eq!(segment_files(&path).len(), 2, "{sync:?}");
            check_reads(&storage, &model, 0, "after the cut");
            append_random(&storage, &mut model, 2 * SEGMENT as usize, 9);
            check_reads(&storage, &model, 0, "written again");
            drop(storage);
            let expected: Vec<String> = (1..model.len().div_ceil(SEGMENT as usize) as u64)
                .map(|k| format!("log.{:016x}", k * SEGMENT))
                .collect();
            assert_eq!(segment_files(&path), expected, "{sync:?}");
            let storage = FileLogStorage::open_with(&path, options).unwrap();
            check_reads(&storage, &model, 0, "reopened");
            // A cut to the first segment leaves it alone.
            storage.truncate(10).unwrap();
            assert!(segment_files(&path).is_empty(), "{sync:?}");
            assert_eq!(storage.len().unwrap(), 10);
        }
    }

    /// A log in one long file, as written before segments: it opens as it is and goes on in
    /// segments from the first multiple of the segment size past its end.
    #[test]
    fn a_log_in_one_long_file_goes_on_in_segments_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut model = Vec::new();
        {
            let one_file = FileLogOptions {
                segment_bytes: 1 << 30,
                ..segmented(LogSync::Fdatasync, 0)
            };
            let storage = FileLogStorage::open_with(&path, one_file).unwrap();
            append_random(&storage, &mut model, 5 * SEGMENT as usize + 300, 21);
        }
        assert!(segment_files(&path).is_empty());
        let storage = FileLogStorage::open_with(&path, segmented(LogSync::Fdatasync, 0)).unwrap();
        check_reads(&storage, &model, 0, "the long file");
        append_random(&storage, &mut model, 2 * SEGMENT as usize, 22);
        check_reads(&storage, &model, 0, "written on");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 6 * SEGMENT);
        assert_eq!(segment_files(&path)[0], format!("log.{:016x}", 6 * SEGMENT));
        // Once the start passes its end, the long file keeps its header alone.
        storage.discard(16..6 * SEGMENT + 10).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        check_reads(
            &storage,
            &model,
            6 * SEGMENT as usize + 10,
            "past the long file",
        );
    }

    /// Files that cannot be a log's segments are refused by name, never read as log.
    #[test]
    fn overlapping_segments_and_bad_sizes_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, vec![1u8; 100 << 10]).unwrap();
        std::fs::write(dir.path().join("log.0000000000010000"), b"x").unwrap();
        let options = segmented(LogSync::Fdatasync, 0);
        let err = FileLogStorage::open_with(&path, options).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let text = err.to_string();
        assert!(
            text.contains("overlaps") && text.contains("log.0000000000010000"),
            "{text}"
        );

        std::fs::remove_file(dir.path().join("log.0000000000010000")).unwrap();
        std::fs::create_dir(dir.path().join("log.0000000000080000")).unwrap();
        let err = FileLogStorage::open_with(&path, options).err().unwrap();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        std::fs::remove_dir(dir.path().join("log.0000000000080000")).unwrap();

        // Names that are not segments' are left alone.
        std::fs::write(dir.path().join("log.master"), b"m").unwrap();
        std::fs::write(dir.path().join("log.12"), b"m").unwrap();
        assert!(FileLogStorage::open_with(&path, options).is_ok());

        for segment_bytes in [0, 1000, (64 << 10) + 512] {
            let bad = FileLogOptions {
                segment_bytes,
                ..options
            };
            let err = FileLogStorage::open_with(&path, bad).err().unwrap();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{segment_bytes}");
            assert!(err.to_string().contains("segment"), "{err}");
        }
    }

    /// A segment that cannot be created fails the write that needed it, naming the file; the
    /// log written so far stays readable.
    #[test]
    fn a_segment_that_cannot_be_created_fails_the_write_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let storage = FileLogStorage::open_with(&path, segmented(LogSync::Fdatasync, 0)).unwrap();
        let mut model = Vec::new();
        append_random(&storage, &mut model, SEGMENT as usize - 100, 4);
        let blocker = dir.path().join(format!("log.{SEGMENT:016x}"));
        std::fs::create_dir(&blocker).unwrap();
        let err = storage
            .write_at(model.len() as u64, &[9u8; 300])
            .unwrap_err();
        assert!(
            err.to_string().contains(&blocker.display().to_string()),
            "{err}"
        );
        check_reads(&storage, &model, 0, "after the failure");
    }
}
