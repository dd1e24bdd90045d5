//! A doublewrite file: torn page writes repaired from a second copy, InnoDB's way.
//!
//! A page write that a crash interrupts can leave a page that is part new, part old (a "torn"
//! page). Full-page images ([`crate::BufferPool::set_full_page_images`]) repair it from the
//! log, at the price of one page image in the log, on the commit path, per page written back.
//! A doublewrite file moves that price to the writers of pages: [`DoublewriteStore`] gathers
//! the pages written back into a batch; a full batch (or a [`PageStore::sync`]) is written
//! first to a slot of the doublewrite file and synced, and only then to the pages' places in
//! the page file. The file holds a ring of slots; the page file is synced before a slot whose
//! batch it has not yet synced is written again (and at every [`PageStore::sync`]), so a page
//! file sync covers several batches. So at any crash, a page whose write may have been torn
//! has a whole copy in one of the slots, and [`restore`], run at every open before anything
//! reads a page, puts it back. A store dropped with every batch in the page file, synced (a
//! close), empties the ring: there is nothing left for it to guard.
//!
//! A full batch is written by the store's writer thread ([`DoublewriteStore::with_writer`],
//! as a database opens it) while the next one fills, so that a thread writing a page back
//! waits for the file's sync only when the writer is a whole batch behind; without the thread,
//! by the thread whose page finds the batch full. The writer thread also syncs the page file
//! once half the ring's slots hold batches not yet synced there, without holding the
//! writer's lock, so that a batch seldom waits for that sync when it comes round.
//!
//! ```text
//!   write_page ─▶ batch (memory, read through) ─▶ full (the writer thread) or sync:
//!        1. doublewrite file: the next slot's pages, then its header, fdatasync
//!        2. page file: each page at its place (synced by the writer thread at half a
//!           round, once the ring comes round to the slot, or at a sync)
//! ```
//!
//! The file: one header block per slot (one page long each) — magic, the batch's sequence
//! number, the last batch the page file had synced when it was written, the ring's slots and
//! pages per slot, its page count, its page ids, a CRC32 of all that — then each slot's pages,
//! in the order of the ids. A store opening the file zeroes its header blocks and writes it
//! out to the ring's whole length in zeros once, so that a batch's sync never also writes the
//! file's size. A crash while a slot is written leaves the page file untouched by that batch
//! (step 2 has not begun), so a header or page that fails its check is simply not used. A
//! batch up to the last one a header names synced is whole in the page file, so [`restore`]
//! compares only the batches after it (with the writer thread, about half the ring at most).
//! Of the copies of a page in those batches the latest batch's is used, and put back only if
//! it passes the page check and the page file's copy does not, or holds an older page LSN:
//! every page in a batch obeyed the WAL rule when it entered it (the pool forces the log to a
//! page's LSN before it writes the page), so a copy newer than the page file's is as safe to
//! write as the write it repeats.
//!
//! Invariants: a page handed to [`DoublewriteStore::write_page`] reads back from the store at
//! once (from the batch until it reaches the page file); a page reaches the page file only
//! after its copy is durable in the doublewrite file; a slot is written again only after the
//! page file has been synced since its batch reached it; one batch is written at a time, in
//! the order the batches filled, so the page file receives a page's versions in order.

use std::fs::{File, OpenOptions};
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{StorageError, StorageResult};
#[cfg(not(unix))]
use crate::file::FileExt;
use crate::file::PageStore;
use crate::page::{page_lsn, PageId};
use crate::shared::{self, Place};

/// The doublewrite file's name in a database directory.
pub const DOUBLEWRITE_FILE: &str = "doublewrite.db";

/// Pages in one batch by default: 256 pages of 8 KiB is 2 MiB per sync of the file. Batches
/// of 64 in a ring of 32 (the same 16 MiB) ran as fast durable and 12–34% slower without
/// `--durable` (docs/performance.md, "Fewer, larger doublewrite batches").
pub const DEFAULT_BATCH_PAGES: usize = 256;

/// Slots in the ring by default, and the fewest [`slots_for`] gives: the page file is synced
/// once every 8 batches (16 MiB of pages at the default batch; every 4 from the writer
/// thread) instead of after each, so that the page cache can absorb a page written back again
/// before then (docs/performance.md, "The doublewrite file's ring").
pub const DEFAULT_SLOTS: usize = 8;

/// The most slots [`slots_for`] gives: 64 MiB at the default batch and 8 KiB pages.
pub const MOST_SIZED_SLOTS: usize = 32;
// `restore` looks through every slot a sized ring may have.
const _: () = assert!(MOST_SIZED_SLOTS <= MAX_SLOTS);

/// The ring's slots for a page file of `page_file_bytes`: a quarter of the page file, between
/// [`DEFAULT_SLOTS`] and [`MOST_SIZED_SLOTS`] slots of `batch_pages` pages. The longer the
/// ring, the fewer syncs of the page file, and the more pages written back twice between two
/// of them the page cache absorbs: 64 MiB ran TPC-C 7–17% faster than 16 MiB with a pool
/// smaller than its 248 MB of pages (docs/performance.md, "A ring sized by the page file").
/// A small database keeps a small file.
pub fn slots_for(page_file_bytes: u64, page_size: usize, batch_pages: usize) -> usize {
    slots_in(page_file_bytes / 4, page_size, batch_pages).clamp(DEFAULT_SLOTS, MOST_SIZED_SLOTS)
}

/// Most slots a ring may have (what [`restore`] looks through for a header).
pub const MAX_SLOTS: usize = 64;

const MAGIC: &[u8; 8] = b"GLASSDW3";
/// The ring's header before it named the last batch synced in the page file: read as one that
/// names none, so that a crash under that format is repaired by the open after it.
const MAGIC_UNSYNCED: &[u8; 8] = b"GLASSDW2";
/// The file before it held a ring: one batch, its header (magic, sequence, count, page ids,
/// CRC32) in block 0 and its pages after it, which is a ring of one slot. Still read, so that
/// a crash under that format is repaired by the open after it.
const MAGIC_ONE_BATCH: &[u8; 8] = b"GLASSDW1";
/// Bytes of the header before the page ids: magic, sequence, the last batch synced in the page
/// file, slots, pages per slot, count.
const HEADER_FIXED: usize = 8 + 8 + 8 + 4 + 4 + 4;
/// The same, in a [`MAGIC_UNSYNCED`] header: no last batch synced.
const HEADER_FIXED_UNSYNCED: usize = 8 + 8 + 4 + 4 + 4;

/// What [`restore`] did at an open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Pages whose copy in the page file failed its check (torn) and were put back.
    pub torn: usize,
    /// Pages whose copy in the page file was whole but older than the batch's, put back too
    /// (the crash came before the batch reached them).
    pub older: usize,
    /// Pages of the ring whose copy in the page file was already as new.
    pub current: usize,
    /// Pages of batches the page file had synced before the crash, which no crash could have
    /// torn there: not compared (see [`BatchHeader::synced`]).
    pub synced: usize,
}

/// What a [`DoublewriteStore`] has done since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoublewriteStats {
    /// Batches written (each: one doublewrite file write and sync, then the pages).
    pub batches: u64,
    /// Pages those batches carried.
    pub pages: u64,
    /// Syncs of the page file: by the writer thread once half the ring held batches not yet
    /// synced there, when the ring came round to a slot whose batch was not yet synced there,
    /// and at each [`PageStore::sync`].
    pub page_file_syncs: u64,
    /// Of `batches`, those the writer thread wrote ([`DoublewriteStore::with_writer`]); the
    /// rest were written by a thread whose page found the batch full, or by a sync.
    pub writer_batches: u64,
    /// The ring's length: bytes of pages its slots hold (slots × pages per slot × page size).
    pub ring_bytes: u64,
}

/// The counters behind [`DoublewriteStats`], shared with whoever reports them.
#[derive(Debug, Default)]
pub struct DoublewriteCounters {
    batches: AtomicU64,
    pages: AtomicU64,
    page_file_syncs: AtomicU64,
    writer_batches: AtomicU64,
    ring_bytes: AtomicU64,
}

impl DoublewriteCounters {
    /// Batches and pages written so far.
    pub fn stats(&self) -> DoublewriteStats {
        DoublewriteStats {
            batches: self.batches.load(Ordering::Relaxed),
            pages: self.pages.load(Ordering::Relaxed),
            page_file_syncs: self.page_file_syncs.load(Ordering::Relaxed),
            writer_batches: self.writer_batches.load(Ordering::Relaxed),
            ring_bytes: self.ring_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The header of a batch in the doublewrite file, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub sequence: u64,
    /// The last batch whose pages the page file had synced when this header was written:
    /// every batch up to it is whole in the page file, so [`restore`] compares only the
    /// batches after the largest such number a ring's headers name. 0 in a header of the
    /// formats before it (every batch compared).
    pub synced: u64,
    /// The ring it was written in: its slots, and the pages each slot holds.
    pub layout: Layout,
    pub pages: Vec<PageId>,
}

/// Where a ring's slots lie in the doublewrite file: `slots` header blocks, then each slot's
/// `slot_pages` pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub slots: usize,
    pub slot_pages: usize,
}

impl Layout {
    /// Byte offset of slot `slot`'s header block.
    pub fn header_offset(&self, slot: usize, page_size: usize) -> u64 {
        (slot * page_size) as u64
    }

    /// Byte offset of the `index`th page of slot `slot`.
    pub fn page_offset(&self, slot: usize, index: usize, page_size: usize) -> u64 {
        ((self.slots + slot * self.slot_pages + index) * page_size) as u64
    }

    /// Bytes of a doublewrite file that holds the whole ring.
    pub fn file_len(&self, page_size: usize) -> u64 {
        (self.slots * (1 + self.slot_pages) * page_size) as u64
    }
}

/// Encodes a batch's header into `out` (one page long, zeroed past the header; it must hold
/// `pages`, no more than `layout.slot_pages`: see [`decode_header`]'s `max_pages`). `synced`
/// is the last batch the page file has synced (see [`BatchHeader::synced`]).
pub fn encode_header(sequence: u64, synced: u64, layout: Layout, pages: &[PageId], out: &mut [u8]) {
    out.fill(0);
    out[..8].copy_from_slice(MAGIC);
    out[8..16].copy_from_slice(&sequence.to_le_bytes());
    out[16..24].copy_from_slice(&synced.to_le_bytes());
    out[24..28].copy_from_slice(&(layout.slots as u32).to_le_bytes());
    out[28..32].copy_from_slice(&(layout.slot_pages as u32).to_le_bytes());
    out[32..36].copy_from_slice(&(pages.len() as u32).to_le_bytes());
    let mut at = HEADER_FIXED;
    for id in pages {
        out[at..at + 8].copy_from_slice(&id.0.to_le_bytes());
        at += 8;
    }
    let crc = crc32fast::hash(&out[..at]);
    out[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes a batch header from a header block of a doublewrite file; `None` if it is not a
/// whole, checked header (a block never written, or a write a crash tore), or its ring is not
/// one a store writes (no slot, more than [`MAX_SLOTS`], slots of more than `max_pages`
/// pages, or more pages than its slot holds).
pub fn decode_header(block: &[u8], max_pages: usize) -> Option<BatchHeader> {
    if block.len() < HEADER_FIXED_UNSYNCED + 4 {
        return None;
    }
    let word = |at: usize| u32::from_le_bytes(block[at..at + 4].try_into().unwrap()) as usize;
    let sequence = u64::from_le_bytes(block[8..16].try_into().ok()?);
    let (synced, layout, count, ids_at) = if &block[..8] == MAGIC {
        if block.len() < HEADER_FIXED + 4 {
            return None;
        }
        let synced = u64::from_le_bytes(block[16..24].try_into().ok()?);
        let layout = Layout {
            slots: word(24),
            slot_pages: word(28),
        };
        (synced, layout, word(32), HEADER_FIXED)
    } else if &block[..8] == MAGIC_UNSYNCED {
        let layout = Layout {
            slots: word(16),
            slot_pages: word(20),
        };
        (0, layout, word(24), HEADER_FIXED_UNSYNCED)
    } else if &block[..8] == MAGIC_ONE_BATCH {
        let count = word(16);
        let layout = Layout {
            slots: 1,
            slot_pages: count.max(1),
        };
        (0, layout, count, 20)
    } else {
        return None;
    };
    if !(1..=MAX_SLOTS).contains(&layout.slots)
        || layout.slot_pages == 0
        || layout.slot_pages > max_pages
        || count > layout.slot_pages
    {
        return None;
    }
    let end = ids_at.checked_add(count.checked_mul(8)?)?;
    let stored = block.get(end..end + 4)?;
    if crc32fast::hash(&block[..end]).to_le_bytes() != stored {
        return None;
    }
    let pages = block[ids_at..end]
        .chunks_exact(8)
        .map(|c| PageId(u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    if synced > 0 && synced >= sequence {
        // A batch is written before the page file can have synced it.
        return None;
    }
    Some(BatchHeader {
        sequence,
        synced,
        layout,
        pages,
    })
}

/// Most pages a header block of `page_size` bytes can name.
pub fn max_batch_pages(page_size: usize) -> usize {
    (page_size - HEADER_FIXED - 4) / 8
}

/// Puts back, into `home`, every page of the batches in the doublewrite file at `path` not
/// yet synced in the page file whose latest copy there is whole while the page file's is torn
/// or older (see the module's description), then syncs `home` if the file held any batch (so
/// that emptying the file afterwards loses no page a crash left unsynced). A missing, empty or
/// torn doublewrite file restores nothing. Run it before anything reads a page of `home`.
pub fn restore(path: &Path, home: &dyn PageStore, page_size: usize) -> StorageResult<Restored> {
    let mut done = Restored::default();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(StorageError::io("open doublewrite file", e)),
    };
    let max_pages = max_batch_pages(page_size);
    let mut block = vec![0u8; page_size];
    // The ring's layout, from the first header block that holds a whole header (slot 0's may
    // be the one a crash tore).
    let mut layout = None;
    for slot in 0..MAX_SLOTS {
        if !read_block(&file, (slot * page_size) as u64, &mut block)? {
            break;
        }
        if let Some(header) = decode_header(&block, max_pages) {
            layout = Some(header.layout);
            break;
        }
    }
    let Some(layout) = layout else {
        return Ok(done);
    };
    // The ring's batches, newest first: the first whole copy of a page met is its latest, so
    // each page's copies are read only until one is whole, and that one once.
    let mut batches = Vec::with_capacity(layout.slots);
    let mut synced = 0;
    for slot in 0..layout.slots {
        if !read_block(&file, layout.header_offset(slot, page_size), &mut block)? {
            continue;
        }
        if let Some(header) = decode_header(&block, max_pages).filter(|h| h.layout == layout) {
            synced = synced.max(header.synced);
            batches.push((header.sequence, slot, header.pages));
        }
    }
    // A batch the page file had synced before a later batch's header was written is whole
    // there, and no later write of its pages tore them but a later batch's, compared below.
    batches.retain(|(sequence, _, pages)| {
        let keep = *sequence > synced;
        if !keep {
            done.synced += pages.len();
        }
        keep
    });
    batches.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
    // Every read below at once: the batches' slots in this file and their pages in the page
    // file, which a crash leaves cold and one read after another would wait for in turn.
    for (_, slot, pages) in &batches {
        crate::file::advise_will_need(
            &file,
            layout.page_offset(*slot, 0, page_size),
            (pages.len() * page_size) as u64,
        );
    }
    let compared: Vec<PageId> = batches.iter().flat_map(|b| b.2.iter().copied()).collect();
    home.will_need(&compared);
    let mut found: FxHashSet<PageId> = FxHashSet::default();
    let mut copy = vec![0u8; page_size];
    for (_, slot, pages) in batches {
        for (index, id) in pages.into_iter().enumerate() {
            if found.contains(&id) {
                continue;
            }
            if !read_block(&file, layout.page_offset(slot, index, page_size), &mut copy)?
                || crate::buffer::verify_page(id, &copy).is_err()
                || copy.iter().all(|&b| b == 0)
            {
                // Not whole in the doublewrite file: this batch never reached the page file.
                continue;
            }
            found.insert(id);
            home.read_page(id, &mut block)?;
            if crate::buffer::verify_page(id, &block).is_err() {
                done.torn += 1;
            } else if page_lsn(&block) < page_lsn(&copy) {
                done.older += 1;
            } else {
                done.current += 1;
                continue;
            }
            home.write_page(id, &copy)?;
        }
    }
    if done.torn + done.older + done.current > 0 {
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

/// The slots of `batch_pages` pages that `ring_bytes` of pages make, rounded down, at least
/// one and at most [`MAX_SLOTS`]: a ring of a chosen length (`--doublewrite-ring-mib`).
pub fn slots_in(ring_bytes: u64, page_size: usize, batch_pages: usize) -> usize {
    let slot_bytes = (page_size.max(1) * batch_pages.max(1)) as u64;
    (ring_bytes / slot_bytes).clamp(1, MAX_SLOTS as u64) as usize
}

/// Whether the doublewrite file at `path` holds a ring: it exists and is not empty (what
/// [`forget`] leaves holds none). A database that has one was last opened with it.
pub fn holds_ring(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// Zeros written at a time when [`prepare`] fills the file.
const ZERO_CHUNK: usize = 1 << 20;

/// Readies an open doublewrite file for a new ring, durably: every block a header of any ring
/// could be in (the first [`MAX_SLOTS`]) zeroed, so that no batch of an earlier open is put
/// back over pages written since, and the file made the ring's whole length in zeros written
/// (not a hole or an unwritten extent), so that no batch's sync also writes the file's size or
/// its extents. A file already that long is only zeroed where the headers are. A file made
/// longer has its directory synced too, so that the entry of a file just created survives a
/// power loss with the batches it will hold.
fn prepare(file: &File, path: &Path, layout: Layout, page_size: usize) -> StorageResult<()> {
    let fail = |e| StorageError::io("prepare doublewrite file", e);
    let len = file.metadata().map_err(fail)?.len();
    let want = layout.file_len(page_size);
    let headers = (MAX_SLOTS * page_size) as u64;
    let zeros = vec![0u8; ZERO_CHUNK];
    let fill = |from: u64, to: u64| -> std::io::Result<()> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZERO_CHUNK as u64) as usize;
            file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        Ok(())
    };
    fill(0, len.min(headers)).map_err(fail)?;
    if len < want {
        fill(len, want).map_err(fail)?;
    } else if len > want {
        file.set_len(want).map_err(fail)?;
    }
    if len == want {
        return file.sync_data().map_err(fail);
    }
    file.sync_all().map_err(fail)?;
    if len < want {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        crate::file::sync_directory(dir).map_err(fail)?;
    }
    Ok(())
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

/// Buckets of [`Present`] (a power of two): 16 KiB of counters.
const PRESENT_BUCKETS: usize = 4096;

/// How many entries of the two batches fall in each bucket of page ids (`id %
/// PRESENT_BUCKETS`), so that a read of a page in neither batch — nearly every miss of a
/// pool — goes straight to the page file without taking either batch's lock, which every
/// thread writing a page back takes too. An entry is counted when it enters the batch being
/// filled (under that batch's lock, before the write that put it there returns) and uncounted
/// once its page is in the page file: while the store holds a page the page file does not,
/// its bucket's count is at least one, and a reader that finds a count of zero after the pool
/// handed the page over reads it from the page file, where the uncounting left it.
struct Present(Box<[AtomicU32]>);

impl Present {
    fn new() -> Present {
        Present((0..PRESENT_BUCKETS).map(|_| AtomicU32::new(0)).collect())
    }

    fn bucket(&self, id: PageId) -> &AtomicU32 {
        &self.0[(id.0 as usize) & (PRESENT_BUCKETS - 1)]
    }

    /// Counts a new entry (the caller holds `filling`).
    fn add(&self, id: PageId) {
        self.bucket(id).fetch_add(1, Ordering::Relaxed);
    }

    /// Uncounts an entry whose page is in the page file now.
    fn remove(&self, id: PageId) {
        // Release: a reader that sees the count fall reads the page file after its write.
        self.bucket(id).fetch_sub(1, Ordering::Release);
    }

    /// Whether `id` may be in a batch; `false` means it is in neither.
    fn maybe(&self, id: PageId) -> bool {
        self.bucket(id).load(Ordering::Acquire) != 0
    }
}

/// The writer's place in the ring.
struct Ring {
    /// The next batch's sequence number; it goes to slot `sequence % slots`.
    sequence: u64,
    /// The last batch whose pages are in the page file.
    written: u64,
    /// The last batch the last sync of the page file covers: the slot of a batch after it
    /// may not be written again before a sync covers that batch too.
    synced: u64,
}

/// A [`PageStore`] that writes every page through a doublewrite file first (see the
/// module's description). Reads see a page written to it at once.
///
/// Made with [`DoublewriteStore::new`], a batch is written by the thread whose page finds it
/// full (or by a sync). [`DoublewriteStore::with_writer`] adds a writer thread that writes
/// each batch as soon as it fills, so that a thread writing a page back waits for the
/// doublewrite file's sync only when the writer is a whole batch behind.
pub struct DoublewriteStore<S: PageStore + 'static> {
    inner: Arc<Inner<S>>,
    writer_thread: Option<std::thread::JoinHandle<()>>,
}

/// What the store and its writer thread share.
struct Inner<S: PageStore> {
    home: S,
    file: File,
    path: PathBuf,
    page_size: usize,
    layout: Layout,
    /// The batch being filled.
    filling: Mutex<Batch>,
    /// The batch being written, readable until its pages are in the page file.
    writing: RwLock<Batch>,
    /// The two batches' entries counted by bucket, for reads of pages in neither.
    present: Present,
    /// One batch written at a time.
    writer: Mutex<Ring>,
    /// What the writer thread is asked to do.
    wake: Mutex<WriterTask>,
    wake_cv: Condvar,
    counters: Arc<DoublewriteCounters>,
}

/// The writer thread's orders: write the full batch, or stop.
#[derive(Default)]
struct WriterTask {
    full: bool,
    stop: bool,
}

impl<S: PageStore + 'static> DoublewriteStore<S> {
    /// Wraps `home` with a doublewrite file at `path` of `slots` slots of `batch_pages` pages
    /// each. Call [`restore`] on `home` first: this empties the ring (durably), since its
    /// batches are in the page file by then, and makes the file the ring's whole length in
    /// zeros the first time (16.1 MiB at 8 slots of 256 pages of 8 KiB; see [`slots_for`]).
    /// `batch_pages` is clamped to what one header block can name, `slots` to
    /// 1..=[`MAX_SLOTS`].
    pub fn new(
        home: S,
        path: &Path,
        page_size: usize,
        batch_pages: usize,
        slots: usize,
    ) -> StorageResult<DoublewriteStore<S>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StorageError::io("open doublewrite file", e))?;
        let layout = Layout {
            slots: slots.clamp(1, MAX_SLOTS),
            slot_pages: batch_pages.clamp(1, max_batch_pages(page_size)),
        };
        prepare(&file, path, layout, page_size)?;
        let counters = DoublewriteCounters::default();
        counters.ring_bytes.store(
            (layout.slots * layout.slot_pages * page_size) as u64,
            Ordering::Relaxed,
        );
        Ok(DoublewriteStore {
            inner: Arc::new(Inner {
                home,
                file,
                path: path.to_path_buf(),
                page_size,
                layout,
                filling: Mutex::new(Batch::default()),
                writing: RwLock::new(Batch::default()),
                present: Present::new(),
                writer: Mutex::new(Ring {
                    sequence: 1,
                    written: 0,
                    synced: 0,
                }),
                wake: Mutex::new(WriterTask::default()),
                wake_cv: Condvar::new(),
                counters: Arc::new(counters),
            }),
            writer_thread: None,
        })
    }

    /// Starts the writer thread (`glass-doublewrite`): each batch is written as soon as it
    /// fills. A batch it fails to write stays readable, and the next thread that finds the
    /// batch full, or the next sync, writes it and gets the error.
    pub fn with_writer(mut self) -> StorageResult<DoublewriteStore<S>> {
        if self.writer_thread.is_none() {
            let inner = Arc::clone(&self.inner);
            let thread = std::thread::Builder::new()
                .name("glass-doublewrite".into())
                .spawn(move || inner.run_writer())
                .map_err(|e| StorageError::io("start the doublewrite file's writer", e))?;
            self.writer_thread = Some(thread);
        }
        Ok(self)
    }

    /// Batches and pages written so far.
    pub fn stats(&self) -> DoublewriteStats {
        self.inner.counters.stats()
    }

    /// The counters, for a report made after the store is handed to a pool.
    pub fn counters(&self) -> Arc<DoublewriteCounters> {
        Arc::clone(&self.inner.counters)
    }

    /// The page file it writes through to.
    pub fn home(&self) -> &S {
        &self.inner.home
    }

    /// The doublewrite file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Where the ring's slots lie in the file.
    pub fn layout(&self) -> Layout {
        self.inner.layout
    }
}

impl<S: PageStore> Inner<S> {
    /// The writer thread: waits for a full batch, writes it, until told to stop.
    fn run_writer(&self) {
        loop {
            {
                let mut task = self.wake.lock();
                while !task.full && !task.stop {
                    self.wake_cv.wait(&mut task);
                }
                if task.stop {
                    return;
                }
                task.full = false;
            }
            // An error leaves the batch readable in `writing`; whoever writes next reports it.
            // A failed early sync of the page file is made again, and reported, by the batch
            // that comes round to a slot not yet synced.
            if let Ok(batches) = self.write_batch(false, self.layout.slot_pages) {
                self.counters
                    .writer_batches
                    .fetch_add(batches, Ordering::Relaxed);
                let _ = self.sync_home_early();
            }
        }
    }

    /// Writes the batch being filled if it has at least `min_pages` pages (see
    /// [`Self::write_out`]), and with `sync_home` then syncs the page file; returns the
    /// batches written. Batches are written one at a time, in the order they filled; a batch
    /// whose write failed stays readable and goes first next time.
    fn write_batch(&self, sync_home: bool, min_pages: usize) -> StorageResult<u64> {
        let mut ring = self.writer.lock();
        let mut batches = 0;
        if !self.writing.read().ids.is_empty() {
            self.write_out(&mut ring)?;
            batches += 1;
        }
        let swapped = {
            let mut writing = self.writing.write();
            let mut filling = self.filling.lock();
            let any = !filling.ids.is_empty() && filling.ids.len() >= min_pages;
            if any {
                std::mem::swap(&mut *filling, &mut *writing);
            }
            any
        };
        if swapped {
            self.write_out(&mut ring)?;
            batches += 1;
        }
        if sync_home {
            self.sync_home(&mut ring)?;
        }
        Ok(batches)
    }

    /// Syncs the page file without holding `writer`, once half the ring's slots hold batches
    /// it has not synced, so that the batch that comes round to a slot seldom waits for it.
    fn sync_home_early(&self) -> StorageResult<()> {
        let target = {
            let ring = self.writer.lock();
            if ring.written.saturating_sub(ring.synced) < (self.layout.slots as u64).div_ceil(2) {
                return Ok(());
            }
            ring.written
        };
        // Every batch up to `target` is in the page file: the sync covers them.
        self.home.sync()?;
        let mut ring = self.writer.lock();
        ring.synced = ring.synced.max(target);
        self.counters
            .page_file_syncs
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Zeroes every slot's header, durably: for a store whose batches are all in the page
    /// file, synced, and which will write no more. The next open then has nothing to compare
    /// (a full ring is 2 × its pages read), and a page damaged after a clean close is found
    /// damaged by the next check, not put back from the ring without a word. A crash while
    /// the headers are zeroed leaves each one whole (its batch synced in the page file,
    /// harmless to put back) or failing its check (not used).
    fn empty_ring(&self) -> StorageResult<()> {
        let headers = vec![0u8; self.layout.slots * self.page_size];
        self.file
            .write_all_at(&headers, self.layout.header_offset(0, self.page_size))
            .and_then(|()| self.file.sync_data())
            .map_err(|e| StorageError::io("empty the doublewrite file's ring at close", e))
    }

    /// Syncs the page file (the caller holds `writer`): every slot may be written again.
    fn sync_home(&self, ring: &mut Ring) -> StorageResult<()> {
        self.home.sync()?;
        ring.synced = ring.written;
        self.counters
            .page_file_syncs
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the batch in `writing` out (the caller holds `writer`): to its slot in the
    /// doublewrite file, synced — after syncing the page file if the slot's last batch is not
    /// yet synced there — then to the page file. Empties the batch once its pages are in the
    /// page file, and leaves it as it is on an error.
    fn write_out(&self, ring: &mut Ring) -> StorageResult<()> {
        let ps = self.page_size;
        let layout = self.layout;
        // The slot's last batch, `sequence - slots`, must be synced in the page file first.
        if ring.sequence > ring.synced + layout.slots as u64 {
            self.sync_home(ring)?;
        }
        let slot = (ring.sequence % layout.slots as u64) as usize;
        {
            // Readers may look at the batch while it is written.
            let writing = self.writing.read();
            let mut header = vec![0u8; ps];
            encode_header(
                ring.sequence,
                ring.synced,
                layout,
                &writing.ids,
                &mut header,
            );
            // The pages first, then the header that names them. A crash in between leaves
            // the slot's old header over some of the new pages: each carries its id, so one
            // passes its check under the old header only if it is the same page, newer, and
            // obeyed the WAL rule, as safe to put back as the old copy.
            self.file
                .write_all_at(&writing.bytes, layout.page_offset(slot, 0, ps))
                .and_then(|()| {
                    self.file
                        .write_all_at(&header, layout.header_offset(slot, ps))
                })
                .and_then(|()| self.file.sync_data())
                .map_err(|e| StorageError::io("write doublewrite file", e))?;
            for (i, &id) in writing.ids.iter().enumerate() {
                self.home
                    .write_page(id, &writing.bytes[i * ps..(i + 1) * ps])?;
            }
            // Every page is in the page file: reads may go there without looking here.
            for &id in &writing.ids {
                self.present.remove(id);
            }
            ring.written = ring.sequence;
            ring.sequence += 1;
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

impl<S: PageStore + 'static> Drop for DoublewriteStore<S> {
    fn drop(&mut self) {
        if let Some(thread) = self.writer_thread.take() {
            self.inner.wake.lock().stop = true;
            self.inner.wake_cv.notify_one();
            let _ = thread.join();
        }
        // A pool's close syncs its store, which writes the last batch; this covers a store
        // dropped without one.
        if let Err(e) = self.inner.write_batch(true, 1) {
            eprintln!("error: pages left unwritten at close: {e}");
        } else if let Err(e) = self.inner.empty_ring() {
            eprintln!("error: {e}");
        }
    }
}

impl<S: PageStore + 'static> PageStore for DoublewriteStore<S> {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        let inner = &*self.inner;
        if buf.len() != inner.page_size {
            return inner.home.read_page(id, buf);
        }
        // Nearly every read is of a page in neither batch: see `Present`.
        if !inner.present.maybe(id) {
            return inner.home.read_page(id, buf);
        }
        shared::bump(Place::Doublewrite);
        // The batch filling, then the one being written, then the page file: a page moves
        // from one to the next only after it is in the next.
        if let Some(page) = inner.filling.lock().find(id, inner.page_size) {
            buf.copy_from_slice(page);
            return Ok(());
        }
        if let Some(page) = inner.writing.read().find(id, inner.page_size) {
            buf.copy_from_slice(page);
            return Ok(());
        }
        inner.home.read_page(id, buf)
    }

    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        let inner = &*self.inner;
        let ps = inner.page_size;
        if buf.len() != ps {
            return Err(StorageError::Invalid(format!(
                "page buffer of {} bytes for a store of {ps}-byte pages",
                buf.len()
            )));
        }
        loop {
            let filled = {
                shared::bump(Place::Doublewrite);
                let mut filling = inner.filling.lock();
                if let Some(&i) = filling.slot.get(&id) {
                    filling.bytes[i * ps..(i + 1) * ps].copy_from_slice(buf);
                    return Ok(());
                }
                if filling.ids.len() < inner.layout.slot_pages {
                    let i = filling.ids.len();
                    filling.ids.push(id);
                    filling.bytes.extend_from_slice(buf);
                    filling.slot.insert(id, i);
                    inner.present.add(id);
                    Some(filling.ids.len() == inner.layout.slot_pages)
                } else {
                    None
                }
            };
            match filled {
                Some(full) => {
                    if full && self.writer_thread.is_some() {
                        // The writer thread's lock, which every thread's full batch takes.
                        shared::bump(Place::Doublewrite);
                        inner.wake.lock().full = true;
                        inner.wake_cv.notify_one();
                    }
                    return Ok(());
                }
                // Full (the writer thread, if any, is a batch behind): write it, or wait for
                // the thread writing it, then try again. On an error the page is not taken,
                // and the pool keeps it dirty.
                None => {
                    shared::bump(Place::Doublewrite);
                    inner.write_batch(false, 1)?;
                }
            }
        }
    }

    fn sync(&self) -> StorageResult<()> {
        self.inner.write_batch(true, 1).map(|_| ())
    }

    fn will_need(&self, ids: &[PageId]) {
        self.inner.home.will_need(ids)
    }

    fn page_count(&self) -> u64 {
        let inner = &*self.inner;
        let pending = |b: &Batch| b.ids.iter().map(|id| id.0 + 1).max().unwrap_or(0);
        let filling = pending(&inner.filling.lock());
        let writing = pending(&inner.writing.read());
        inner.home.page_count().max(filling).max(writing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_decodes_to_what_was_encoded_and_a_damaged_one_to_nothing() {
        let ids = [PageId(7), PageId(1), PageId(u64::MAX)];
        let layout = Layout {
            slots: 8,
            slot_pages: 64,
        };
        let mut block = vec![0u8; 8192];
        encode_header(42, 40, layout, &ids, &mut block);
        let max = max_batch_pages(8192);
        let header = decode_header(&block, max).unwrap();
        assert_eq!(header.sequence, 42);
        assert_eq!(header.synced, 40);
        assert_eq!(header.layout, layout);
        assert_eq!(header.pages, ids);
        for at in [0, 9, 17, 25, 29, 33, HEADER_FIXED + 3 * 8] {
            let mut bad = block.clone();
            bad[at] ^= 1;
            assert_eq!(decode_header(&bad, max), None, "byte {at}");
        }
        assert_eq!(decode_header(&block, 2), None, "slots larger than allowed");
        assert_eq!(decode_header(&block[..10], 64), None);
        // Rings no store writes: no slot, too many, or more pages than a slot holds.
        for (slots, slot_pages, count) in [(0, 64, 3), (MAX_SLOTS + 1, 64, 3), (8, 2, 3)] {
            let mut odd = vec![0u8; 8192];
            let layout = Layout { slots, slot_pages };
            encode_header(1, 0, layout, &ids[..count], &mut odd);
            assert_eq!(decode_header(&odd, max), None, "{layout:?}");
        }
        // A batch the page file synced before the batch itself was written.
        for synced in [42, 43] {
            let mut odd = vec![0u8; 8192];
            encode_header(42, synced, layout, &ids, &mut odd);
            assert_eq!(decode_header(&odd, max), None, "synced {synced}");
        }
    }

    #[test]
    fn a_header_of_the_ring_before_it_named_its_synced_batch_names_none() {
        let mut block = vec![0u8; 8192];
        block[..8].copy_from_slice(MAGIC_UNSYNCED);
        block[8..16].copy_from_slice(&12u64.to_le_bytes());
        block[16..20].copy_from_slice(&8u32.to_le_bytes());
        block[20..24].copy_from_slice(&256u32.to_le_bytes());
        block[24..28].copy_from_slice(&2u32.to_le_bytes());
        block[28..36].copy_from_slice(&9u64.to_le_bytes());
        block[36..44].copy_from_slice(&4u64.to_le_bytes());
        let crc = crc32fast::hash(&block[..44]);
        block[44..48].copy_from_slice(&crc.to_le_bytes());
        let header = decode_header(&block, max_batch_pages(8192)).unwrap();
        assert_eq!(header.sequence, 12);
        assert_eq!(header.synced, 0, "every batch of such a ring is compared");
        assert_eq!(
            header.layout,
            Layout {
                slots: 8,
                slot_pages: 256
            }
        );
        assert_eq!(header.pages, [PageId(9), PageId(4)]);
        block[21] ^= 1;
        assert_eq!(decode_header(&block, max_batch_pages(8192)), None);
    }

    #[test]
    fn a_header_of_the_one_batch_file_reads_as_a_ring_of_one_slot() {
        let mut block = vec![0u8; 8192];
        block[..8].copy_from_slice(MAGIC_ONE_BATCH);
        block[8..16].copy_from_slice(&5u64.to_le_bytes());
        block[16..20].copy_from_slice(&2u32.to_le_bytes());
        block[20..28].copy_from_slice(&9u64.to_le_bytes());
        block[28..36].copy_from_slice(&4u64.to_le_bytes());
        let crc = crc32fast::hash(&block[..36]);
        block[36..40].copy_from_slice(&crc.to_le_bytes());
        let header = decode_header(&block, max_batch_pages(8192)).unwrap();
        assert_eq!(header.sequence, 5);
        assert_eq!(header.pages, [PageId(9), PageId(4)]);
        // Its pages followed its header block: slot 0 of a ring of one.
        assert_eq!(
            header.layout,
            Layout {
                slots: 1,
                slot_pages: 2
            }
        );
        assert_eq!(header.layout.page_offset(0, 1, 8192), 2 * 8192);
        block[30] ^= 1;
        assert_eq!(decode_header(&block, max_batch_pages(8192)), None);
    }

    #[test]
    fn the_ring_is_a_quarter_of_the_page_file_between_16_and_64_mib() {
        const MIB: u64 = 1 << 20;
        let slots = |bytes| slots_for(bytes, 8192, DEFAULT_BATCH_PAGES);
        // Slots of 2 MiB: a small database keeps the 16 MiB ring.
        assert_eq!(slots(0), DEFAULT_SLOTS);
        assert_eq!(slots(20 * MIB), DEFAULT_SLOTS);
        assert_eq!(slots(64 * MIB), DEFAULT_SLOTS);
        assert_eq!(slots(80 * MIB), 10);
        assert_eq!(slots(248 * MIB), 31);
        assert_eq!(slots(256 * MIB), MOST_SIZED_SLOTS);
        assert_eq!(slots(100 << 30), MOST_SIZED_SLOTS);
        // Smaller pages or batches make more, smaller slots, the ring as long.
        assert_eq!(slots_for(80 * MIB, 4096, DEFAULT_BATCH_PAGES), 20);
        assert_eq!(slots_for(u64::MAX, 0, 0), MOST_SIZED_SLOTS);
    }

    #[test]
    fn a_chosen_ring_is_whole_slots_between_one_and_the_most() {
        const MIB: u64 = 1 << 20;
        let slots = |bytes| slots_in(bytes, 8192, DEFAULT_BATCH_PAGES);
        assert_eq!(slots(0), 1);
        assert_eq!(slots(2 * MIB), 1);
        assert_eq!(slots(5 * MIB), 2, "rounded down");
        assert_eq!(slots(64 * MIB), 32);
        assert_eq!(slots(128 * MIB), MAX_SLOTS);
        assert_eq!(slots(u64::MAX), MAX_SLOTS);
        assert_eq!(slots_in(8 * MIB, 4096, 64), 32);
    }

    #[test]
    fn only_a_file_that_is_not_empty_holds_a_ring() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DOUBLEWRITE_FILE);
        assert!(!holds_ring(&path), "no file");
        std::fs::write(&path, b"").unwrap();
        assert!(!holds_ring(&path), "what forget leaves");
        std::fs::write(&path, [0u8; 8192]).unwrap();
        assert!(holds_ring(&path));
        forget(&path).unwrap();
        assert!(!holds_ring(&path));
    }

    #[test]
    fn slots_lie_after_the_header_blocks_and_never_overlap() {
        let layout = Layout {
            slots: 3,
            slot_pages: 4,
        };
        let ps = 8192;
        assert_eq!(layout.header_offset(2, ps), 2 * 8192);
        assert_eq!(layout.page_offset(0, 0, ps), 3 * 8192);
        assert_eq!(
            layout.page_offset(1, 0, ps),
            layout.page_offset(0, 3, ps) + 8192
        );
        assert_eq!(layout.page_offset(2, 3, ps), (3 + 11) * 8192);
    }
}
