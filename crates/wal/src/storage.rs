//! Where the log's bytes live: one file read and written with positioned I/O, or memory.
//!
//! A [`LogStorage`] is a flat byte array that grows at its end, plus a tiny *master record*
//! (where the last complete checkpoint begins) that is replaced atomically and durably.
//!
//! * [`FileLogStorage`]: the log file `<path>` and the master file `<path>.master`. The master
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
//!   file:   [ header | hole (no disk blocks, reads as zeros) | live log ............ ]
//!   memory: [ head   ]  (dropped)                            [ bytes, from `base` ... ]
//!           0        16                             block-aligned start / base          len
//! ```
//!
//! * [`FileLogStorage`] punches a hole (`fallocate(PUNCH_HOLE | KEEP_SIZE)` on Linux, whole
//!   blocks only, so no live byte is touched). A file system that cannot punch keeps the
//!   blocks; elsewhere than Linux nothing is freed. Either way the log is discarded logically:
//!   the log manager never reads below its start.
//! * [`MemLogStorage`] keeps the head and drops the discarded prefix of its buffer; a read
//!   inside the discarded range is an error (a caller bug), never zeros.
//!
//! # The file: zeros ahead of the end, and four ways to sync
//!
//! A durable commit waits for one force, so a force should write the log's new bytes and
//! nothing else. A file that grows with each write makes each sync write its new size too:
//! a journal commit on ext4. So [`FileLogStorage`] keeps the file zero-filled ahead of the
//! log's end, in chunks of [`FileLogOptions::prealloc_bytes`] (16 MiB by default; 0 turns it
//! off):
//!
//! ```text
//!   [ header | log records .................. | zeros, written and synced .......... ]
//!   0        16                               end                          file length
//!                                             └ the next write lands here, in place;
//!                                               its sync has no size to write
//! ```
//!
//! A write that would pass the file's length first writes zeros up to the next multiple of
//! the chunk and syncs the file once (`sync_all`: the zeros and the new size). Then it writes
//! its bytes in place. The zeros are written, not `fallocate`d: an allocated but unwritten
//! extent changes metadata at its first write. `len` is the file's length, zeros included.
//! [`LogManager::open`](crate::LogManager::open) ends the log at its first bad frame and takes
//! zeros to the end for a torn tail, which it truncates. Dropping the storage trims the zeros
//! past the log's end, so a log closed cleanly is as long as its records. After a crash they
//! stay, and the next open cuts them. A truncation cuts them too; the next write adds more.
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
//! [`DIRECT_BLOCK_BYTES`] (more if the file system asks), from memory aligned the same way.
//! A write at an unaligned offset rewrites the block it starts in. The storage keeps the
//! bytes of the block holding the log's end (after an open or a truncation it reads them
//! once), puts them before the new bytes, and pads the last block with zeros:
//!
//! ```text
//!   blocks:    |       4096       |       4096       |       4096       |
//!   the file:  [ log ............ | log ...... ]                           end at 1.4 blocks
//!   a write:                                   [ new bytes ....... ]
//!   written:                      [ kept ..... | new bytes ....... | 0 0 0 0 0 0 0 0 ]
//!                                 └ from an aligned buffer, blocks 1 and 2 ──────────┘
//! ```
//!
//! Reads, zero fills, truncation, hole punching and syncs go through a second, buffered
//! descriptor (`Dsync` has one too, so that zero fills are not synced write by write). A
//! file system that refuses `O_DIRECT` fails the open, with an error that names the method
//! and the directory.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
#[cfg(unix)]
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(not(unix))]
use storage::file::FileExt;

use parking_lot::Mutex;

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
    /// Bytes of disk or memory the log holds now: less than `len` where a discard freed some.
    /// `None` where the storage cannot tell.
    fn held_bytes(&self) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

/// How a [`FileLogStorage`] makes its writes durable (see the module's table).
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

/// How a [`FileLogStorage`] writes its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLogOptions {
    pub sync: LogSync,
    /// Zeros kept written ahead of the log's end, added this many bytes at a time; 0 lets
    /// the file grow with each write.
    pub prealloc_bytes: u64,
}

/// The default chunk of preallocated zeros.
pub const DEFAULT_PREALLOC_BYTES: u64 = 16 << 20;

impl Default for FileLogOptions {
    fn default() -> Self {
        FileLogOptions {
            sync: LogSync::Fdatasync,
            prealloc_bytes: DEFAULT_PREALLOC_BYTES,
        }
    }
}

/// The smallest block a [`LogSync::Direct`] write covers: a multiple of every common logical
/// block size (512 or 4096 bytes). A file system that asks for more alignment gets it.
pub const DIRECT_BLOCK_BYTES: usize = 4096;
const _: () =
    assert!(DIRECT_BLOCK_BYTES.is_power_of_two() && DIRECT_BLOCK_BYTES.is_multiple_of(512));

/// Zeros written per `pwrite` while preallocating.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// A log in one file, with its master record in a file beside it.
pub struct FileLogStorage {
    /// The buffered descriptor: reads, zero fills, truncation, hole punching, syncs, and the
    /// writes themselves under [`LogSync::Fdatasync`] and [`LogSync::Fsync`].
    file: File,
    /// Under [`LogSync::Dsync`] and [`LogSync::Direct`]: the descriptor every log write goes
    /// through (`O_DSYNC`, plus `O_DIRECT` for `Direct`).
    durable_writer: Option<File>,
    path: PathBuf,
    options: FileLogOptions,
    /// The block a `Direct` write covers (a power of two); unused by the other methods.
    block_bytes: usize,
    /// Latch: the log's end and the file's length as writes, truncation and drop see them.
    /// Held by `write_at` (including any zero fill) and `truncate`; reads do not take it.
    tail: Mutex<Tail>,
}

/// Where the log ends in its file (latch-protected in [`FileLogStorage::tail`]).
///
/// Invariant: `end <= file_len`; the bytes `end..file_len` are zeros this storage wrote
/// (preallocation, or the padding of a `Direct` write's last block).
struct Tail {
    /// The log's end: the length the file had when opened or last truncated, or the furthest
    /// byte written since.
    end: u64,
    /// The file's length as this storage left it.
    file_len: u64,
    /// `Direct` only: the start of the block holding `end` and its bytes below `end`, once
    /// known (a write puts them here; after open or truncate the next write reads them).
    block_at: Option<u64>,
    block: Vec<u8>,
    /// `Direct` only: the aligned buffer a write is assembled in.
    scratch: Option<AlignedBuf>,
}

impl FileLogStorage {
    /// Opens the log file at `path` with the default options (`fdatasync`, 16 MiB of
    /// preallocation), creating it (empty) if it does not exist.
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileLogStorage> {
        FileLogStorage::open_with(path, FileLogOptions::default())
    }

    /// Opens the log file at `path`, creating it (empty) if it does not exist. With
    /// [`LogSync::Direct`], a file system that refuses `O_DIRECT` fails the open with an error
    /// naming the method and the directory.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: FileLogOptions,
    ) -> io::Result<FileLogStorage> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let durable_writer = match options.sync {
            LogSync::Fdatasync | LogSync::Fsync => None,
            LogSync::Dsync => Some(open_durable_writer(&path, libc::O_DSYNC)?),
            LogSync::Direct => Some(
                open_direct_writer(&path).map_err(|e| direct_refused(&directory_of(&path), e))?,
            ),
        };
        let block_bytes = match options.sync {
            LogSync::Direct => direct_block_bytes(&file),
            _ => DIRECT_BLOCK_BYTES,
        };
        let len = file.metadata()?.len();
        let storage = FileLogStorage {
            file,
            durable_writer,
            path,
            options,
            block_bytes,
            tail: Mutex::new(Tail {
                end: len,
                file_len: len,
                block_at: None,
                block: Vec::new(),
                scratch: None,
            }),
        };
        // The file may have just been created: make its directory entry durable too.
        storage.sync_dir()?;
        Ok(storage)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn options(&self) -> FileLogOptions {
        self.options
    }

    fn master_path(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(directory_of(&self.path))?.sync_all()
    }

    /// Makes sure the file reaches `need` bytes before a write up to there. With
    /// preallocation, writes zeros from the file's length up to the next multiple of the
    /// chunk at or past `need` and syncs the file (data and size) once, so the write lands in
    /// place. Without it, nothing: the write extends the file.
    fn reserve(&self, tail: &mut Tail, need: u64) -> io::Result<()> {
        let chunk = self.options.prealloc_bytes;
        if chunk == 0 || need <= tail.file_len {
            return Ok(());
        }
        let target = need.div_ceil(chunk).saturating_mul(chunk);
        let zeros = vec![0u8; ZERO_FILL_BYTES];
        let mut at = tail.file_len;
        while at < target {
            let n = (target - at).min(ZERO_FILL_BYTES as u64) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.file.sync_all()?;
        tail.file_len = target;
        Ok(())
    }

    /// A `Direct` write: the whole blocks `bytes` touches, assembled in an aligned buffer from
    /// the kept bytes of the block it starts in, `bytes`, and zeros (or, for a write below the
    /// log's end, the bytes already there) to the end of its last block.
    fn write_direct(&self, tail: &mut Tail, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let writer = self
            .durable_writer
            .as_ref()
            .expect("Direct has its descriptor");
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
        let result = write_whole_blocks(writer, buf, first, block);
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

    /// Fills `buf` from the file at `offset`; bytes past the file's end read as zeros.
    fn read_or_zeros(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let got = self.read_at(offset, buf)?;
        buf[got..].fill(0);
        Ok(())
    }
}

impl LogStorage for FileLogStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut tail = self.tail.lock();
        let stop = offset + bytes.len() as u64;
        let need = match self.options.sync {
            LogSync::Direct => stop.div_ceil(self.block_bytes as u64) * self.block_bytes as u64,
            _ => stop,
        };
        self.reserve(&mut tail, need)?;
        match (&self.durable_writer, self.options.sync) {
            (_, LogSync::Direct) => self.write_direct(&mut tail, offset, bytes)?,
            (Some(writer), _) => writer.write_all_at(bytes, offset)?,
            (None, _) => self.file.write_all_at(bytes, offset)?,
        }
        tail.end = tail.end.max(stop);
        tail.file_len = tail.file_len.max(stop);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        match self.options.sync {
            LogSync::Fdatasync => self.file.sync_data(),
            LogSync::Fsync => self.file.sync_all(),
            // Every write was durable when it returned, its size included (`O_DSYNC`).
            LogSync::Dsync | LogSync::Direct => Ok(()),
        }
    }

    /// The file's length, preallocated zeros included.
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut tail = self.tail.lock();
        // Whatever happens below, the kept block may no longer match the file.
        tail.block_at = None;
        self.file.set_len(len)?;
        tail.end = len;
        tail.file_len = len;
        self.file.sync_all()
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

    /// Punches the whole file-system blocks inside `range` out of the file (Linux); the size
    /// stays and the hole reads as zeros. A file system without hole punching
    /// (`EOPNOTSUPP`) keeps the blocks, which is not an error.
    fn discard(&self, range: Range<u64>) -> io::Result<()> {
        let block = blksize(&self.file.metadata()?);
        let from = range.start.div_ceil(block) * block;
        let to = range.end / block * block;
        if to <= from {
            return Ok(());
        }
        punch_hole(&self.file, from, to - from)
    }

    /// The file's allocated size (`st_blocks` × 512, what `du` shows) less the zeros
    /// preallocated past the block holding the log's end: those are a bounded reserve, not
    /// log.
    fn held_bytes(&self) -> io::Result<Option<u64>> {
        let meta = self.file.metadata()?;
        let allocated = allocated_bytes(&meta);
        let end = self.tail.lock().end;
        let block = blksize(&meta);
        let reserve = meta.len().saturating_sub(end.div_ceil(block) * block);
        Ok(Some(allocated.saturating_sub(reserve)))
    }
}

/// Trims the zeros past the log's end, so that a log closed cleanly is as long as its
/// records. Only where the file is as this storage left it (another descriptor may have cut
/// it since); no sync is needed: after a crash the zeros come back and the next open cuts them.
impl Drop for FileLogStorage {
    fn drop(&mut self) {
        let tail = self.tail.get_mut();
        if tail.file_len <= tail.end {
            return;
        }
        if let Ok(meta) = self.file.metadata() {
            if meta.len() == tail.file_len {
                let _ = self.file.set_len(tail.end);
            }
        }
    }
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
mod tests {
    use super::*;

    /// Writes, reads and truncates `storage`; reads past the log's end see `len`, which
    /// includes any zeros a file preallocated.
    fn exercise(storage: &dyn LogStorage) {
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

    /// Every sync method, with preallocation off, in chunks smaller than a block, and at
    /// the default.
    fn every_option() -> Vec<FileLogOptions> {
        let mut all = Vec::new();
        for sync in LogSync::ALL {
            for prealloc_bytes in [0, 100, DEFAULT_PREALLOC_BYTES] {
                all.push(FileLogOptions {
                    sync,
                    prealloc_bytes,
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
            };
            let storage = FileLogStorage::open_with(dir.path().join("log"), options).unwrap();
            assert_eq!(open_flags(&storage.file) & durable, 0, "{sync:?}");
            let writer = storage.durable_writer.as_ref().map(open_flags);
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
