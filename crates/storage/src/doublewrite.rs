//! A doublewrite file: torn page writes repaired from a second copy, InnoDB's way.
//!
//! A page write that a crash interrupts can leave a page that is part new, part old (a "torn"
//! page). Full-page images ([`crate::BufferPool::set_full_page_images`]) repair it from the
//! log, at the price of one page image in the log, on the commit path, per page written back.
//! A doublewrite file moves that price to the writers of pages: [`DoublewriteStore`] gathers
//! the pages written back into a batch; a full batch (or a [`PageStore::sync`]) is written
//! first to the doublewrite file and synced, and only then to the pages' places in the page
//! file, which is synced before the doublewrite file is written again. So at any crash, a
//! page whose write was torn has a whole copy in the doublewrite file, and [`restore`], run
//! at every open before anything reads a page, puts it back.
//!
//! ```text
//!   write_page ─▶ batch (memory, read through) ─▶ full or sync:
//!        1. doublewrite file: header + the batch's pages, fdatasync
//!        2. page file: each page at its place, fdatasync
//! ```
//!
//! The file: one header block (one page long) — magic, the batch's sequence number, its page
//! count, its page ids, a CRC32 of all that — then the pages, in the order of the ids. A
//! crash while it is being written leaves the page file untouched by that batch (step 2 has
//! not begun), so a header or page that fails its check is simply not used. A page is put
//! back only if its copy passes the page check and the page file's does not, or holds an
//! older page LSN: every page in a batch obeyed the WAL rule when it entered it (the pool
//! forces the log to a page's LSN before it writes the page), so a copy newer than the page
//! file's is as safe to write as the write it repeats.
//!
//! Invariants: a page handed to [`DoublewriteStore::write_page`] reads back from the store at
//! once (from the batch until it reaches the page file); a page reaches the page file only
//! after its copy is durable in the doublewrite file; one batch is written at a time, in the
//! order the batches filled, so the page file receives a page's versions in order.

use std::fs::{File, OpenOptions};
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use crate::error::{StorageError, StorageResult};
#[cfg(not(unix))]
use crate::file::FileExt;
use crate::file::PageStore;
use crate::page::{page_lsn, PageId};

/// The doublewrite file's name in a database directory.
pub const DOUBLEWRITE_FILE: &str = "doublewrite.db";

/// Pages in one batch by default: 64 pages of 8 KiB is half a MiB per sync pair.
pub const DEFAULT_BATCH_PAGES: usize = 64;

const MAGIC: &[u8; 8] = b"GLASSDW1";
/// Bytes of the header before the page ids: magic, sequence, count.
const HEADER_FIXED: usize = 8 + 8 + 4;

/// What [`restore`] did at an open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Pages whose copy in the page file failed its check (torn) and were put back.
    pub torn: usize,
    /// Pages whose copy in the page file was whole but older than the batch's, put back too
    /// (the crash came before the batch reached them).
    pub older: usize,
    /// Pages of the last batch whose copy in the page file was already as new.
    pub current: usize,
}

/// What a [`DoublewriteStore`] has done since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoublewriteStats {
    /// Batches written (each: one doublewrite file write and sync, then the pages and a sync).
    pub batches: u64,
    /// Pages those batches carried.
    pub pages: u64,
}

/// The counters behind [`DoublewriteStats`], shared with whoever reports them.
#[derive(Debug, Default)]
pub struct DoublewriteCounters {
    batches: AtomicU64,
    pages: AtomicU64,
}

impl DoublewriteCounters {
    /// Batches and pages written so far.
    pub fn stats(&self) -> DoublewriteStats {
        DoublewriteStats {
            batches: self.batches.load(Ordering::Relaxed),
            pages: self.pages.load(Ordering::Relaxed),
        }
    }
}

/// The header of a batch in the doublewrite file, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub sequence: u64,
    pub pages: Vec<PageId>,
}

/// Encodes a batch's header into `out` (one page long, zeroed past the header; it must hold
/// `pages`: see [`decode_header`]'s `max_pages`).
pub fn encode_header(sequence: u64, pages: &[PageId], out: &mut [u8]) {
    out.fill(0);
    out[..8].copy_from_slice(MAGIC);
    out[8..16].copy_from_slice(&sequence.to_le_bytes());
    out[16..20].copy_from_slice(&(pages.len() as u32).to_le_bytes());
    let mut at = HEADER_FIXED;
    for id in pages {
        out[at..at + 8].copy_from_slice(&id.0.to_le_bytes());
        at += 8;
    }
    let crc = crc32fast::hash(&out[..at]);
    out[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes a batch header from the first block of a doublewrite file; `None` if it is not a
/// whole, checked header (a file never written, or a write a crash tore), or names more pages
/// than `max_pages`.
pub fn decode_header(block: &[u8], max_pages: usize) -> Option<BatchHeader> {
    if block.len() < HEADER_FIXED + 4 || &block[..8] != MAGIC {
        return None;
    }
    let sequence = u64::from_le_bytes(block[8..16].try_into().ok()?);
    let count = u32::from_le_bytes(block[16..20].try_into().ok()?) as usize;
    if count > max_pages {
        return None;
    }
    let end = HEADER_FIXED.checked_add(count.checked_mul(8)?)?;
    let stored = block.get(end..end + 4)?;
    if crc32fast::hash(&block[..end]).to_le_bytes() != stored {
        return None;
    }
    let pages = block[HEADER_FIXED..end]
        .chunks_exact(8)
        .map(|c| PageId(u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    Some(BatchHeader { sequence, pages })
}

/// Most pages a header block of `page_size` bytes can name.
fn max_batch_pages(page_size: usize) -> usize {
    (page_size - HEADER_FIXED - 4) / 8
}

/// Puts back, into `home`, every page of the last batch in the doublewrite file at `path`
/// whose copy there is torn or older (see the module's description), then syncs `home`. A
/// missing, empty or torn doublewrite file restores nothing. Run it before anything reads a
/// page of `home`.
pub fn restore(path: &Path, home: &dyn PageStore, page_size: usize) -> StorageResult<Restored> {
    let mut done = Restored::default();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(StorageError::io("open doublewrite file", e)),
    };
    let mut block = vec![0u8; page_size];
    if !read_block(&file, 0, &mut block)? {
        return Ok(done);
    }
    let Some(header) = decode_header(&block, max_batch_pages(page_size)) else {
        return Ok(done);
    };
    let mut copy = vec![0u8; page_size];
    for (slot, &id) in header.pages.iter().enumerate() {
        if !read_block(&file, (slot as u64 + 1) * page_size as u64, &mut copy)?
            || crate::buffer::verify_page(id, &copy).is_err()
            || copy.iter().all(|&b| b == 0)
        {
            // Not whole in the doublewrite file: its batch never reached the page file.
            continue;
        }
        home.read_page(id, &mut block)?;
        let torn = crate::buffer::verify_page(id, &block).is_err();
        if torn {
            done.torn += 1;
        } else if page_lsn(&block) < page_lsn(&copy) {
            done.older += 1;
        } else {
            done.current += 1;
            continue;
        }
        home.write_page(id, &copy)?;
    }
    if done.torn + done.older > 0 {
        home.sync()?;
    }
    Ok(done)
}

/// Empties the doublewrite file at `path`, if there is one, durably: for a database opened
/// without it after [`restore`], whose pages written from then on must never be put back
/// from an older batch (a file only unlinked could come back after a power loss).
pub fn forget(path: &Path) -> StorageResult<()> {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StorageError::io("open doublewrite file", e)),
    };
    if file
        .metadata()
        .map_err(|e| StorageError::io("open doublewrite file", e))?
        .len()
        == 0
    {
        return Ok(());
    }
    file.set_len(0)
        .and_then(|()| file.sync_all())
        .map_err(|e| StorageError::io("empty doublewrite file", e))
}

/// Reads one block at `offset`; `false` if the file ends before it is whole.
fn read_block(file: &File, offset: u64, buf: &mut [u8]) -> StorageResult<bool> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => return Ok(false),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StorageError::io("read doublewrite file", e)),
        }
    }
    Ok(true)
}

/// Pages gathered for the next write of the doublewrite file.
#[derive(Default)]
struct Batch {
    ids: Vec<PageId>,
    /// `ids[i]`'s image at `bytes[i * page_size..]`.
    bytes: Vec<u8>,
    slot: FxHashMap<PageId, usize>,
}

impl Batch {
    fn find(&self, id: PageId, page_size: usize) -> Option<&[u8]> {
        let &i = self.slot.get(&id)?;
        Some(&self.bytes[i * page_size..(i + 1) * page_size])
    }
}

/// A [`PageStore`] that writes every page through a doublewrite file first (see the
/// module's description). Reads see a page written to it at once.
pub struct DoublewriteStore<S: PageStore> {
    home: S,
    file: File,
    path: PathBuf,
    page_size: usize,
    batch_pages: usize,
    /// The batch being filled.
    filling: Mutex<Batch>,
    /// The batch being written, readable until its pages are in the page file.
    writing: RwLock<Batch>,
    /// One batch written at a time; holds the next batch's sequence number.
    writer: Mutex<u64>,
    counters: Arc<DoublewriteCounters>,
}

impl<S: PageStore> DoublewriteStore<S> {
    /// Wraps `home` with the doublewrite file at `path` (created if missing). Call
    /// [`restore`] on `home` first: this overwrites the file's last batch as soon as it
    /// writes one. `batch_pages` is clamped to what one header block can name.
    pub fn new(
        home: S,
        path: &Path,
        page_size: usize,
        batch_pages: usize,
    ) -> StorageResult<DoublewriteStore<S>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StorageError::io("open doublewrite file", e))?;
        Ok(DoublewriteStore {
            home,
            file,
            path: path.to_path_buf(),
            page_size,
            batch_pages: batch_pages.clamp(1, max_batch_pages(page_size)),
            filling: Mutex::new(Batch::default()),
            writing: RwLock::new(Batch::default()),
            writer: Mutex::new(1),
            counters: Arc::default(),
        })
    }

    /// Batches and pages written so far.
    pub fn stats(&self) -> DoublewriteStats {
        self.counters.stats()
    }

    /// The counters, for a report made after the store is handed to a pool.
    pub fn counters(&self) -> Arc<DoublewriteCounters> {
        Arc::clone(&self.counters)
    }

    /// The page file it writes through to.
    pub fn home(&self) -> &S {
        &self.home
    }

    /// The doublewrite file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the batch being filled, if it has pages: to the doublewrite file, synced, then
    /// to the page file, synced. Batches are written one at a time, in the order they filled;
    /// a batch whose write failed stays readable and goes first next time.
    fn write_batch(&self) -> StorageResult<()> {
        let mut sequence = self.writer.lock();
        if !self.writing.read().ids.is_empty() {
            self.write_out(&mut sequence)?;
        }
        {
            let mut writing = self.writing.write();
            let mut filling = self.filling.lock();
            if filling.ids.is_empty() {
                return Ok(());
            }
            std::mem::swap(&mut *filling, &mut *writing);
        }
        self.write_out(&mut sequence)
    }

    /// Writes the batch in `writing` out (the caller holds `writer`); empties it once its
    /// pages are in the page file and synced, and leaves it as it is on an error.
    fn write_out(&self, sequence: &mut u64) -> StorageResult<()> {
        let ps = self.page_size;
        {
            // Readers may look at the batch while it is written.
            let writing = self.writing.read();
            let mut header = vec![0u8; ps];
            encode_header(*sequence, &writing.ids, &mut header);
            self.file
                .write_all_at(&writing.bytes, ps as u64)
                .and_then(|()| self.file.write_all_at(&header, 0))
                .and_then(|()| self.file.sync_data())
                .map_err(|e| StorageError::io("write doublewrite file", e))?;
            for (i, &id) in writing.ids.iter().enumerate() {
                self.home
                    .write_page(id, &writing.bytes[i * ps..(i + 1) * ps])?;
            }
            self.home.sync()?;
            *sequence += 1;
            self.counters.batches.fetch_add(1, Ordering::Relaxed);
            self.counters
                .pages
                .fetch_add(writing.ids.len() as u64, Ordering::Relaxed);
        }
        let mut writing = self.writing.write();
        writing.ids.clear();
        writing.bytes.clear();
        writing.slot.clear();
        Ok(())
    }
}

impl<S: PageStore> Drop for DoublewriteStore<S> {
    fn drop(&mut self) {
        // A pool's close syncs its store, which writes the last batch; this covers a store
        // dropped without one.
        if let Err(e) = self.write_batch() {
            eprintln!("error: pages left unwritten at close: {e}");
        }
    }
}

impl<S: PageStore> PageStore for DoublewriteStore<S> {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        if buf.len() != self.page_size {
            return self.home.read_page(id, buf);
        }
        // The batch filling, then the one being written, then the page file: a page moves
        // from one to the next only after it is in the next.
        if let Some(page) = self.filling.lock().find(id, self.page_size) {
            buf.copy_from_slice(page);
            return Ok(());
        }
        if let Some(page) = self.writing.read().find(id, self.page_size) {
            buf.copy_from_slice(page);
            return Ok(());
        }
        self.home.read_page(id, buf)
    }

    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        if buf.len() != self.page_size {
            return Err(StorageError::Invalid(format!(
                "page buffer of {} bytes for a store of {}-byte pages",
                buf.len(),
                self.page_size
            )));
        }
        loop {
            {
                let mut filling = self.filling.lock();
                let ps = self.page_size;
                if let Some(&i) = filling.slot.get(&id) {
                    filling.bytes[i * ps..(i + 1) * ps].copy_from_slice(buf);
                    return Ok(());
                }
                if filling.ids.len() < self.batch_pages {
                    let i = filling.ids.len();
                    filling.ids.push(id);
                    filling.bytes.extend_from_slice(buf);
                    filling.slot.insert(id, i);
                    return Ok(());
                }
            }
            // Full: write it (or wait for the thread writing it), then try again. On an error
            // the page is not taken, and the pool keeps it dirty.
            self.write_batch()?;
        }
    }

    fn sync(&self) -> StorageResult<()> {
        self.write_batch()?;
        self.home.sync()
    }

    fn page_count(&self) -> u64 {
        let pending = |b: &Batch| b.ids.iter().map(|id| id.0 + 1).max().unwrap_or(0);
        let filling = pending(&self.filling.lock());
        let writing = pending(&self.writing.read());
        self.home.page_count().max(filling).max(writing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_decodes_to_what_was_encoded_and_a_damaged_one_to_nothing() {
        let ids = [PageId(7), PageId(1), PageId(u64::MAX)];
        let mut block = vec![0u8; 8192];
        encode_header(42, &ids, &mut block);
        let header = decode_header(&block, max_batch_pages(8192)).unwrap();
        assert_eq!(header.sequence, 42);
        assert_eq!(header.pages, ids);
        for at in [0, 9, 17, 30, HEADER_FIXED + 3 * 8] {
            let mut bad = block.clone();
            bad[at] ^= 1;
            assert_eq!(
                decode_header(&bad, max_batch_pages(8192)),
                None,
                "byte {at}"
            );
        }
        assert_eq!(decode_header(&block, 2), None, "more pages than allowed");
        assert_eq!(decode_header(&block[..10], 64), None);
    }
}
