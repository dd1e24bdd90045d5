//! The buffer pool: fixes pages in frames, writes dirty pages back, obeys the WAL rule.
//!
//! See the module docs of [`crate::buffer`] for the protocol; this file holds the page table,
//! the fix paths (hit and miss), write-back and the log hand-off.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::frame::{Frame, FrameData, FrameId, NO_PAGE};
use super::guard::{PageReadGuard, PageWriteGuard};
use super::handoff::{HandoffTracker, Handoffs};
use super::memory::{FrameImages, FrameMemory};
use super::reclaim::{EpochToken, Reclaimer, ReuseStats};
use super::replacer::Clock;
use crate::counters;
use crate::error::{StorageError, StorageResult};
use crate::file::PageStore;
use crate::latch::{Latch, LatchWriteGuard};
use crate::page::{
    page_checksum, page_lsn, Lsn, PageId, PageKind, PageLog, PageRedo, PageSize, RedoRange,
    OFFSET_CHECKSUM, OFFSET_DEVICE, OFFSET_KIND, OFFSET_MAGIC, OFFSET_PAGE_ID, PAGE_HEADER_SIZE,
    PAGE_MAGIC,
};

/// How a pool is set up.
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    pub page_size: PageSize,
    /// Number of frames (pages the pool holds at once).
    pub frames: usize,
    /// Whether frame and page-table latches are real (off: one thread only).
    pub latching: bool,
}

/// A cheap hasher for page ids (Fibonacci hashing of the one `u64`).
#[derive(Default)]
pub(crate) struct PageIdHasher(u64);

impl Hasher for PageIdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Page ids below this are mapped by the lock-free [`FrameDirectory`] (in chunks of
/// `DIRECTORY_CHUNK` entries, 4 bytes each, made when a page of their range is first mapped);
/// larger ones (only a damaged log could name one) by a hash map under the page-table latch.
const DIRECT_PAGES_MAX: u64 = 1 << 26;
const DIRECTORY_CHUNK_BITS: u32 = 14;
const DIRECTORY_CHUNK: usize = 1 << DIRECTORY_CHUNK_BITS;
const DIRECTORY_CHUNKS: usize = (DIRECT_PAGES_MAX >> DIRECTORY_CHUNK_BITS) as usize;
/// An entry of the directory that maps its page to no frame.
const NO_FRAME: u32 = u32::MAX;

/// The page → frame map for page ids below `DIRECT_PAGES_MAX`, readable without any latch.
///
/// Page ids are dense (the allocator hands them out in order), so the map is an array indexed
/// by page id holding a frame number or `NO_FRAME`: a lookup on the fix path is two loads and
/// no hashing, probing or latching. Entries change only under the exclusive page-table latch;
/// a reader may see a mapping that is being replaced, which the frame latch then catches (the
/// fix compares the frame's `page` with the page it wants and retries; see [`crate::buffer`]).
///
/// Both levels are arrays of fixed length, so a lookup of an id below `DIRECT_PAGES_MAX`
/// needs no bounds check: the chunk index and the masked entry index are in range by
/// construction. A chunk is a plain pointer (null until made), so finding it is one load and
/// a null test.
struct FrameDirectory {
    /// Chunk `i` maps pages `i << DIRECTORY_CHUNK_BITS ..`: null until a page of its range is
    /// first mapped, then a chunk from `Box::into_raw`, freed only by `drop` (so a reference
    /// to a chunk lives as long as the directory). Made under the exclusive page-table latch.
    chunks: Box<[AtomicPtr<DirectoryChunk>; DIRECTORY_CHUNKS]>,
}

type DirectoryChunk = [AtomicU32; DIRECTORY_CHUNK];

impl FrameDirectory {
    fn new() -> FrameDirectory {
        let chunks: Box<[AtomicPtr<DirectoryChunk>]> = (0..DIRECTORY_CHUNKS)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        FrameDirectory {
            chunks: chunks
                .try_into()
                .unwrap_or_else(|_| unreachable!("made with DIRECTORY_CHUNKS entries")),
        }
    }

    /// The chunk mapping `id` (below `DIRECT_PAGES_MAX`), if it has been made.
    #[inline(always)]
    fn chunk(&self, id: PageId) -> Option<&DirectoryChunk> {
        let slot = &self.chunks[(id.0 >> DIRECTORY_CHUNK_BITS) as usize % DIRECTORY_CHUNKS];
        let chunk = slot.load(Ordering::Acquire);
        // SAFETY: a non-null chunk came from `Box::into_raw` in `set` (published with
        // Release, read with Acquire) and is freed only when the directory is dropped.
        (!chunk.is_null()).then(|| unsafe { &*chunk })
    }

    /// The frame `id` is mapped to, for an id below `DIRECT_PAGES_MAX`.
    #[inline(always)]
    fn get(&self, id: PageId) -> Option<FrameId> {
        debug_assert!(id.0 < DIRECT_PAGES_MAX);
        let f = self.chunk(id)?[id.0 as usize & (DIRECTORY_CHUNK - 1)].load(Ordering::Acquire);
        (f != NO_FRAME).then_some(FrameId(f))
    }

    /// Maps `id` (below `DIRECT_PAGES_MAX`) to `f`, or to no frame. Under the exclusive
    /// page-table latch (which is what lets a missing chunk be made without a race).
    fn set(&self, id: PageId, f: u32) {
        debug_assert!(id.0 < DIRECT_PAGES_MAX);
        let chunk = match self.chunk(id) {
            Some(chunk) => chunk,
            None => {
                let entries: Box<[AtomicU32]> = (0..DIRECTORY_CHUNK)
                    .map(|_| AtomicU32::new(NO_FRAME))
                    .collect();
                let entries: Box<DirectoryChunk> = entries
                    .try_into()
                    .unwrap_or_else(|_| unreachable!("made with DIRECTORY_CHUNK entries"));
                let raw = Box::into_raw(entries);
                self.chunks[(id.0 >> DIRECTORY_CHUNK_BITS) as usize].store(raw, Ordering::Release);
                // SAFETY: just made; freed only when the directory is dropped.
                unsafe { &*raw }
            }
        };
        chunk[id.0 as usize & (DIRECTORY_CHUNK - 1)].store(f, Ordering::Release);
    }

    /// Every chunk made so far, with its index.
    fn chunks(&self) -> impl Iterator<Item = (usize, &DirectoryChunk)> {
        self.chunks.iter().enumerate().filter_map(|(c, slot)| {
            let chunk = slot.load(Ordering::Acquire);
            // SAFETY: as in `chunk`.
            (!chunk.is_null()).then(|| (c, unsafe { &*chunk }))
        })
    }
}

impl Drop for FrameDirectory {
    fn drop(&mut self) {
        for slot in self.chunks.iter_mut() {
            let chunk = *slot.get_mut();
            if !chunk.is_null() {
                // SAFETY: made by `Box::into_raw` in `set`; `&mut self` means no reference
                // into it is left, and the slot is never read again.
                drop(unsafe { Box::from_raw(chunk) });
            }
        }
    }
}

/// The latched part of the page table; protected by the page-table latch, which also
/// serialises every change of the [`FrameDirectory`].
struct PageTable {
    /// Mappings of page ids from `DIRECT_PAGES_MAX` on.
    overflow: HashMap<PageId, FrameId, BuildHasherDefault<PageIdHasher>>,
    /// The page each frame is assigned to (the inverse of the map).
    frame_page: Vec<Option<PageId>>,
    clock: Clock,
}

impl PageTable {
    /// The frame holding `id`, if it is mapped.
    #[inline]
    fn get(&self, dir: &FrameDirectory, id: PageId) -> Option<FrameId> {
        if id.0 < DIRECT_PAGES_MAX {
            dir.get(id)
        } else {
            self.overflow.get(&id).copied()
        }
    }

    fn insert(&mut self, dir: &FrameDirectory, id: PageId, f: FrameId) {
        debug_assert!(f.0 != NO_FRAME);
        if id.0 < DIRECT_PAGES_MAX {
            dir.set(id, f.0);
        } else {
            self.overflow.insert(id, f);
        }
    }

    fn remove(&mut self, dir: &FrameDirectory, id: PageId) {
        if id.0 < DIRECT_PAGES_MAX {
            dir.set(id, NO_FRAME);
        } else {
            self.overflow.remove(&id);
        }
    }

    /// Every mapping, in no particular order.
    fn mappings<'a>(
        &'a self,
        dir: &'a FrameDirectory,
    ) -> impl Iterator<Item = (PageId, FrameId)> + 'a {
        dir.chunks()
            .flat_map(|(c, chunk)| {
                chunk.iter().enumerate().filter_map(move |(i, f)| {
                    let f = f.load(Ordering::Acquire);
                    let page = ((c as u64) << DIRECTORY_CHUNK_BITS) + i as u64;
                    (f != NO_FRAME).then_some((PageId(page), FrameId(f)))
                })
            })
            .chain(self.overflow.iter().map(|(&p, &f)| (p, f)))
    }
}

/// What the miss path hands back: a pinned frame, or a frame it just loaded (pinned and
/// exclusively latched, holding the page).
enum Pinned<'a> {
    Hit(&'a Frame),
    Loaded(&'a Frame, LatchWriteGuard<'a, FrameData>),
}

/// Why a page is being fixed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Intent {
    /// Read it from the store on a miss.
    Existing,
    /// A page being allocated: neither read nor zeroed here (`allocate_page` zeroes it).
    Fresh,
}

/// A pool of frames over a [`PageStore`]. Shared between threads as `Arc<BufferPool>`.
pub struct BufferPool {
    store: Box<dyn PageStore>,
    log: Option<Arc<dyn PageLog>>,
    page_size: usize,
    frames: Box<[Frame]>,
    /// The frames' page images, one mapping (`frames[f]`'s is image `f`, which never moves),
    /// so that [`BufferPool::prefetch_page`] can find an image's lines without first loading
    /// its frame's. After `frames`, whose buffers point into it, so that it is dropped last.
    images: FrameImages,
    /// Page → frame for page ids below `DIRECT_PAGES_MAX`: read without a latch, changed
    /// under the exclusive `table` latch.
    directory: FrameDirectory,
    /// Protects the overflow map, the frame-to-page map, the clock hand, and serialises
    /// changes of `directory`.
    table: Latch<PageTable>,
    /// The next page id `allocate_page` hands out (pages allocated so far).
    next_page: AtomicU64,
    /// Whether fixes consult this thread's two-stage state ([`super::stage`]): off, the
    /// conventional path pays one predictable branch per fix.
    staging: AtomicBool,
    /// Log a page's whole image at its first change since it was last written back (see
    /// [`BufferPool::set_full_page_images`]).
    full_page_images: AtomicBool,
    /// Bytes of page images logged so far ([`BufferPool::image_bytes`]).
    image_bytes: AtomicU64,
    /// Pins held by transactions across fixes ([`super::stage::hold`]), all threads together.
    held_pins: AtomicUsize,
    /// Pages read from and written to the store, all threads together: bumped only beside
    /// the I/O itself, on a line of their own.
    io: crossbeam::utils::CachePadded<IoTotals>,
    /// Who fixed each frame last, once [`BufferPool::track_handoffs`] asked for it.
    handoffs: std::sync::OnceLock<HandoffTracker>,
    /// Unlinked B+-tree leaves, reused once no reader can hold them
    /// ([`BufferPool::enable_page_reuse`]).
    reclaim: Reclaimer,
}

#[derive(Default)]
struct IoTotals {
    reads: AtomicU64,
    writes: AtomicU64,
    evict_writes: AtomicU64,
    cleaner_writes: AtomicU64,
}

/// Pages a pool read from and wrote to its store, all threads together ([`BufferPool::io`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolIo {
    pub reads: u64,
    /// Every page written: by misses, [`BufferPool::clean_frames`], checkpoints and flushes.
    pub writes: u64,
    /// Of `writes`, those a miss made to free its dirty victim: writes a fix waited for.
    pub evict_writes: u64,
    /// Of `writes`, those [`BufferPool::clean_frames`] made (a page cleaner's).
    pub cleaner_writes: u64,
    /// Bytes of full-page images logged ([`BufferPool::image_bytes`]).
    pub image_bytes: u64,
}

impl PoolIo {
    /// What happened between `earlier` and this reading.
    pub fn since(&self, earlier: &PoolIo) -> PoolIo {
        PoolIo {
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
            evict_writes: self.evict_writes - earlier.evict_writes,
            cleaner_writes: self.cleaner_writes - earlier.cleaner_writes,
            image_bytes: self.image_bytes - earlier.image_bytes,
        }
    }
}

impl BufferPool {
    /// Creates a pool of `config.frames` frames over `store`, its page images in small pages
    /// ([`FrameMemory::Small`]). With `log`, every change made through a write guard is logged
    /// and the WAL rule is obeyed on write-back.
    pub fn new(
        store: Box<dyn PageStore>,
        config: PoolConfig,
        log: Option<Arc<dyn PageLog>>,
    ) -> StorageResult<BufferPool> {
        Self::with_memory(store, config, log, FrameMemory::Small)
    }

    /// [`BufferPool::new`] with the frames' images in the pages `memory` names.
    pub fn with_memory(
        store: Box<dyn PageStore>,
        config: PoolConfig,
        log: Option<Arc<dyn PageLog>>,
        memory: FrameMemory,
    ) -> StorageResult<BufferPool> {
        if config.frames == 0 || config.frames >= NO_FRAME as usize {
            return Err(StorageError::Invalid(format!(
                "a buffer pool needs between 1 and 2^32-2 frames, not {}",
                config.frames
            )));
        }
        let page_size = config.page_size.bytes();
        // The pool's big allocations are reserved fallibly: a pool larger than the machine
        // can hold is an error for the caller to report, not an aborted process.
        let out_of_memory = |_| {
            StorageError::io(
                "allocating the buffer pool's frames",
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!(
                        "no memory for {} frames of {page_size} bytes",
                        config.frames
                    ),
                ),
            )
        };
        let images = FrameImages::new(config.frames, page_size, memory)?;
        let mut frames = Vec::new();
        frames
            .try_reserve_exact(config.frames)
            .map_err(out_of_memory)?;
        frames.extend((0..config.frames).map(|i| Frame::new(images.image(i), config.latching)));
        let mut frame_page = Vec::new();
        frame_page
            .try_reserve_exact(config.frames)
            .map_err(out_of_memory)?;
        frame_page.resize(config.frames, None);
        let table = PageTable {
            overflow: HashMap::default(),
            frame_page,
            clock: Clock::new(),
        };
        Ok(BufferPool {
            next_page: AtomicU64::new(store.page_count().max(1)),
            store,
            log,
            page_size,
            frames: frames.into_boxed_slice(),
            images,
            directory: FrameDirectory::new(),
            table: Latch::new(table, config.latching),
            staging: AtomicBool::new(false),
            full_page_images: AtomicBool::new(false),
            image_bytes: AtomicU64::new(0),
            held_pins: AtomicUsize::new(0),
            io: Default::default(),
            handoffs: std::sync::OnceLock::new(),
            reclaim: Reclaimer::new(),
        })
    }

    /// Turns two-stage support on or off (see [`super::stage`]). Off (the default), a fix
    /// never holds a page nor refuses a read, whatever its thread asked.
    pub fn set_staging(&self, on: bool) {
        self.staging.store(on, Ordering::Relaxed);
    }

    /// Turns full-page images on or off. On, the first change to a page since it was last
    /// written back (or read in) is logged as the page's whole image after the change, not as
    /// the bytes changed: a redo record marked "zeroed" with one range over the rest of the
    /// page, which recovery applies whatever the page on disk holds. So every stretch in which
    /// a page is dirty starts in the log with its whole image, and a write of it that a crash
    /// tears, in whatever pieces (a power loss can keep any of its sectors), is rebuilt by
    /// replaying its records from there. What it costs: one page image in the log per page
    /// written back, about what a doublewrite buffer writes. Off (the default), a torn page
    /// is rebuilt only when its header is the new one (`engine::recovery`'s `Torn`).
    pub fn set_full_page_images(&self, on: bool) {
        self.full_page_images.store(on, Ordering::Relaxed);
    }

    /// Bytes of page images logged since the pool was made, all threads together (see
    /// [`BufferPool::set_full_page_images`]): the engine leaves them out of the log it counts
    /// toward the next checkpoint, since each checkpoint's page writes bring more of them.
    pub fn image_bytes(&self) -> u64 {
        self.image_bytes.load(Ordering::Relaxed)
    }

    /// Whether the next logged change to `g`'s page is logged as its whole image (see
    /// [`BufferPool::set_full_page_images`]): the first change since the page was clean.
    #[inline]
    fn logs_image(&self, g: &PageWriteGuard<'_>) -> bool {
        self.full_page_images.load(Ordering::Relaxed)
            && !g.data().zeroed
            && g.frame.rec_lsn.load(Ordering::Relaxed) == 0
    }

    /// Gives back every pin the calling thread holds in this pool (see [`super::stage::hold`]);
    /// returns how many pages it held.
    pub fn release_held(&self) -> usize {
        super::stage::release(self)
    }

    /// Pins held by transactions now, all threads together.
    pub fn held_pins(&self) -> usize {
        self.held_pins.load(Ordering::Relaxed)
    }

    /// The most pins transactions may hold at once: three quarters of the frames, so that the
    /// rest always leaves room to read into.
    pub fn held_pin_limit(&self) -> usize {
        self.frames.len() * 3 / 4
    }

    /// Reserves one held pin under the limit; false if the limit is reached.
    pub(super) fn take_hold(&self) -> bool {
        let limit = self.held_pin_limit();
        self.held_pins
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    pub(super) fn give_back_holds(&self, n: usize) {
        if n > 0 {
            self.held_pins.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Which pool a held pin belongs to: the pool's address, stable while it is shared.
    pub(super) fn identity(&self) -> usize {
        self as *const BufferPool as usize
    }

    /// After a fix of `frame` succeeded: let this thread's stage hold it.
    #[inline(always)]
    fn staged(&self, frame: &Frame) {
        if let Some(tracker) = self.handoffs.get() {
            self.note_handoff(tracker, frame);
        }
        if self.staging.load(Ordering::Relaxed) {
            super::stage::fixed(self, frame);
        }
    }

    /// Counts page-latch handoffs from now on (see [`super::handoff`]): latched fixes of a
    /// page whose last latched fix (since this call) was another thread's.
    pub fn track_handoffs(&self) {
        self.handoffs
            .get_or_init(|| HandoffTracker::new(self.frames.len()));
    }

    /// The handoffs counted since [`BufferPool::track_handoffs`]; `None` if never asked for.
    pub fn handoffs(&self) -> Option<Handoffs> {
        self.handoffs.get().map(HandoffTracker::counts)
    }

    /// [`BufferPool::staged`]'s handoff count, out of line: only a tracking run pays for it.
    #[cold]
    #[inline(never)]
    fn note_handoff(&self, tracker: &HandoffTracker, frame: &Frame) {
        let index = (frame as *const Frame as usize - self.frames.as_ptr() as usize)
            / std::mem::size_of::<Frame>();
        tracker.fixed(index, || {
            // The caller holds the frame's latch, shared or exclusive: its image is stable.
            let image = self.images.address(index) as *const u8;
            // SAFETY: `index` is a frame of this pool (its address came from `frames`), so
            // its image is `page_size` bytes of the pool's mapping; OFFSET_KIND is within.
            unsafe { *image.add(OFFSET_KIND) }
        });
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// Pages allocated so far (page 0, the meta page, always counts).
    pub fn page_count(&self) -> u64 {
        self.next_page.load(Ordering::Acquire)
    }

    /// Whether latches are real (structures built on the pool latch the same way).
    pub fn is_latching(&self) -> bool {
        self.table.is_enabled()
    }

    /// Whether changes are logged (the pool has a [`PageLog`]).
    pub fn is_logged(&self) -> bool {
        self.log.is_some()
    }

    #[inline(always)]
    fn frame(&self, f: FrameId) -> &Frame {
        &self.frames[f.index()]
    }

    /// The frame of a directory entry, without a bounds check: the directory holds only
    /// frame ids the clock handed out, which index `frames` (`check_invariants` verifies
    /// every mapping's frame).
    #[inline(always)]
    fn mapped_frame(&self, f: FrameId) -> &Frame {
        debug_assert!(f.index() < self.frames.len());
        // SAFETY: every frame id stored in the directory came from `Clock::pick` over
        // `self.frames` (see `load`), so it is in bounds; `frames` never shrinks.
        unsafe { self.frames.get_unchecked(f.index()) }
    }

    fn check_allocated(&self, id: PageId) -> StorageResult<()> {
        if id.0 >= self.page_count() {
            return Err(StorageError::Invalid(format!(
                "page {id} has not been allocated ({} pages)",
                self.page_count()
            )));
        }
        Ok(())
    }

    /// Lets [`BufferPool::allocate_page`] hand out again the pages of unlinked B+-tree leaves
    /// ([`BufferPool::retire_page`]), each once every reader that may hold its id is gone.
    /// Only an owner that makes every reader of its trees count itself
    /// ([`BufferPool::epoch_enter`] around each transaction) may turn it on; off, a retired
    /// page is kept, unlinked, for good. See `reclaim.rs`.
    pub fn enable_page_reuse(&self) {
        self.reclaim.enable();
    }

    /// Counts the caller as a reader that may hold page ids of B+-tree leaves until
    /// [`BufferPool::epoch_exit`]; `None` while page reuse is off. Writes only the calling
    /// thread's own counter line.
    #[inline]
    pub fn epoch_enter(&self) -> Option<EpochToken> {
        self.reclaim.enter()
    }

    /// Ends what [`BufferPool::epoch_enter`] began (on any thread).
    #[inline]
    pub fn epoch_exit(&self, token: EpochToken) {
        self.reclaim.exit(token);
    }

    /// Takes page `id`, just taken out of every structure (an unlinked leaf), for reuse once
    /// no reader that entered before can hold it. Nothing while page reuse is off.
    pub fn retire_page(&self, id: PageId) {
        self.reclaim.retire(id);
    }

    /// Hands out `pages` again from now on: unlinked leaves an earlier run of the database
    /// left, which no reader can hold (call it at open, before any transaction; see
    /// [`crate::btree::unlinked_leaves`] for which pages qualify). Nothing while page reuse
    /// is off.
    pub fn adopt_free_pages(&self, pages: &[PageId]) {
        self.reclaim.adopt(pages);
    }

    /// The pages retired or adopted and not yet allocated again: what a checkpoint records.
    pub fn reusable_pages(&self) -> Vec<PageId> {
        self.reclaim.listed()
    }

    /// Pages retired and reused so far.
    pub fn reuse_stats(&self) -> ReuseStats {
        self.reclaim.stats()
    }

    /// Allocates a fresh page, fixed exclusively, zeroed, its header formatted with `kind`
    /// and its id. The whole page counts as changed. With page reuse on, the page may be an
    /// unlinked leaf no reader can hold any more ([`BufferPool::enable_page_reuse`]).
    pub fn allocate_page(&self, kind: PageKind) -> StorageResult<PageWriteGuard<'_>> {
        self.allocate_page_on(kind, 0)
    }

    /// [`BufferPool::allocate_page`] for a structure whose pages live on emulated data
    /// device `device` (the header's device byte; see [`crate::device`]).
    pub fn allocate_page_on(
        &self,
        kind: PageKind,
        device: u8,
    ) -> StorageResult<PageWriteGuard<'_>> {
        let id = match self.reclaim.take() {
            // An unlinked leaf no reader can hold any more: zeroed below as a new page is
            // (and logged so), whatever it held.
            Some(id) => id,
            None => {
                crate::shared::bump(crate::shared::Place::PageTable);
                PageId(self.next_page.fetch_add(1, Ordering::AcqRel))
            }
        };
        counters::bump_fix(id.0);
        let mut g = self.fix_write_slow(id, Intent::Fresh, self.log.is_some(), false)?;
        // Zeroes logged as "zeroed", not as a page image of them: then the header.
        g.zero_fresh();
        g.range_mut(OFFSET_MAGIC, 2)
            .copy_from_slice(&PAGE_MAGIC.to_le_bytes());
        g.range_mut(OFFSET_KIND, 1)[0] = kind as u8;
        if device != 0 {
            g.range_mut(OFFSET_DEVICE, 1)[0] = device;
        }
        g.range_mut(OFFSET_PAGE_ID, 8)
            .copy_from_slice(&id.0.to_le_bytes());
        Ok(g)
    }

    /// Fixes page `id` in shared mode.
    ///
    /// Inlined: a hit (the page is in a frame and the frame still holds it once latched) is
    /// the directory lookup, the latch and a compare (and a pin, without latching), and hands
    /// the guard back in registers; everything else goes to `fix_shared_slow`, out of line.
    #[inline(always)]
    pub fn fix_shared(&self, id: PageId) -> StorageResult<PageReadGuard<'_>> {
        counters::bump_fix(id.0);
        if let Some(frame) = self.find_hit(id) {
            // With latching on, the shared latch keeps the evictor off the frame (it must
            // `try_write` it): a read guard needs no pin, and the fix takes none.
            let pinned = !frame.data.is_enabled();
            if pinned {
                frame.pin();
            }
            if let Some(g) = Self::latch_shared(frame, id, pinned) {
                self.staged(frame);
                return Ok(g);
            }
        }
        self.fix_shared_slow(id)
    }

    /// The rest of [`BufferPool::fix_shared`]: a miss, or a hit on a frame that was remapped
    /// (or whose load failed) before the fix got its latch.
    #[inline(never)]
    fn fix_shared_slow(&self, id: PageId) -> StorageResult<PageReadGuard<'_>> {
        loop {
            let frame = match self.pin_hit(id) {
                Some(frame) => frame,
                // A mapped page is allocated, so only a miss checks.
                None => match self.pin_miss(id, Intent::Existing, true)? {
                    Pinned::Hit(frame) => frame,
                    Pinned::Loaded(frame, w) => {
                        drop(w);
                        frame
                    }
                },
            };
            if let Some(g) = Self::latch_shared(frame, id, true) {
                self.staged(frame);
                return Ok(g);
            }
            // The load this fix waited for failed, or the frame went to another page; try
            // again (and see the load's error ourselves).
        }
    }

    /// Latches `frame` (pinned by the caller iff `pinned`) in shared mode and checks that it
    /// holds `id`: a guard if so, which keeps a pin only without latching (see `fix_shared`);
    /// else the latch and any pin are given back.
    #[inline(always)]
    fn latch_shared(frame: &Frame, id: PageId, pinned: bool) -> Option<PageReadGuard<'_>> {
        if !frame.data.lock_shared_while(|| frame.holds(id)) {
            if pinned {
                frame.unpin();
            }
            return None;
        }
        // SAFETY: the shared latch is held; the reference ends with this statement.
        if unsafe { frame.data.value() }.page == Some(id) {
            if pinned && frame.data.is_enabled() {
                frame.unpin();
            }
            return Some(PageReadGuard::new(frame, id));
        }
        // SAFETY: taken above, no reference into the data is left.
        unsafe { frame.data.unlock_shared() };
        if pinned {
            frame.unpin();
        }
        None
    }

    /// Fixes page `id` exclusively (inlined like [`BufferPool::fix_shared`]).
    #[inline(always)]
    pub fn fix_exclusive(&self, id: PageId) -> StorageResult<PageWriteGuard<'_>> {
        counters::bump_fix(id.0);
        self.fix_write(id, Intent::Existing, self.log.is_some(), true)
    }

    /// For recovery redo: fixes exclusively a page that may not exist yet (it reads as a zero
    /// page) and moves the allocator past it. Changes made through this guard are not logged.
    pub fn fix_for_redo(&self, id: PageId) -> StorageResult<PageWriteGuard<'_>> {
        counters::bump_fix(id.0);
        self.next_page.fetch_max(id.0 + 1, Ordering::AcqRel);
        self.fix_write_slow(id, Intent::Existing, false, false)
    }

    /// For recovery redo: fixes exclusively page `id` without reading it, to be overwritten
    /// whole by a record that zeroes it (a fresh page, or a full image) while the page on disk
    /// is damaged; moves the allocator past it. Changes made through this guard are not logged.
    pub fn fix_unread_for_redo(&self, id: PageId) -> StorageResult<PageWriteGuard<'_>> {
        counters::bump_fix(id.0);
        self.next_page.fetch_max(id.0 + 1, Ordering::AcqRel);
        self.fix_write_slow(id, Intent::Fresh, false, false)
    }

    /// For recovery redo, after [`BufferPool::fix_for_redo`] failed on page `id`: reads the
    /// page as the store holds it and, if its checksum is all that is wrong (magic, page id
    /// and kind right), returns the image and the checksum stored in it. That checksum
    /// belongs to the image whose LSN the header holds: a write that a crash tore after its
    /// first part (a process killed inside `pwrite` keeps the part the kernel had copied)
    /// looks so, and recovery rebuilds it from the log or refuses it. `None`: the page is
    /// damaged in some other way.
    pub fn read_torn(&self, id: PageId) -> StorageResult<Option<(Vec<u8>, u32)>> {
        let mut image = vec![0u8; self.page_size];
        self.store.read_page(id, &mut image)?;
        self.io.reads.fetch_add(1, Ordering::Relaxed);
        Ok(torn_checksum(id, &image).map(|stored| (image, stored)))
    }

    /// Fixes `id` exclusively; `check`: fail on a miss if the page is not allocated. Inlined
    /// like [`BufferPool::fix_shared`]: the hit is handled here, the rest out of line.
    #[inline(always)]
    fn fix_write(
        &self,
        id: PageId,
        intent: Intent,
        track: bool,
        check: bool,
    ) -> StorageResult<PageWriteGuard<'_>> {
        if let Some(frame) = self.pin_hit(id) {
            if Self::latch_exclusive(frame, id) {
                if let Some(g) = self.latched_exclusive(frame, id, track) {
                    self.staged(frame);
                    return Ok(g);
                }
            }
        }
        self.fix_write_slow(id, intent, track, check)
    }

    /// The rest of [`BufferPool::fix_write`]: a miss, or a hit on a frame remapped meanwhile.
    #[inline(never)]
    fn fix_write_slow(
        &self,
        id: PageId,
        intent: Intent,
        track: bool,
        check: bool,
    ) -> StorageResult<PageWriteGuard<'_>> {
        loop {
            let (frame, latched) = match self.pin_hit(id) {
                Some(frame) => (frame, false),
                None => match self.pin_miss(id, intent, check)? {
                    Pinned::Hit(frame) => (frame, false),
                    Pinned::Loaded(frame, w) => {
                        // The guard takes over the exclusive latch the load holds.
                        w.into_held();
                        (frame, true)
                    }
                },
            };
            if !latched && !Self::latch_exclusive(frame, id) {
                continue;
            }
            if let Some(g) = self.latched_exclusive(frame, id, track) {
                self.staged(frame);
                return Ok(g);
            }
        }
    }

    /// Latches the pinned `frame` exclusively, waiting only while it is assigned `id`
    /// ([`Frame::holds`]); if it goes to another page first, gives the pin back and returns
    /// false.
    #[inline(always)]
    fn latch_exclusive(frame: &Frame, id: PageId) -> bool {
        if frame.data.lock_exclusive_while(|| frame.holds(id)) {
            return true;
        }
        frame.unpin();
        false
    }

    /// For a pinned `frame` whose latch the caller holds exclusively: a guard if it holds
    /// `id`, else the latch and the pin are given back.
    #[inline(always)]
    fn latched_exclusive<'a>(
        &'a self,
        frame: &'a Frame,
        id: PageId,
        track: bool,
    ) -> Option<PageWriteGuard<'a>> {
        // SAFETY: the caller holds the exclusive latch; the reference ends with this statement.
        if unsafe { frame.data.value() }.page == Some(id) {
            return Some(PageWriteGuard::new(self, frame, id, track));
        }
        // SAFETY: the caller's exclusive latch, given up here; no reference into the data is
        // left.
        unsafe { frame.data.unlock_exclusive() };
        frame.unpin();
        None
    }

    /// Pins the frame holding `id` if the page is in the pool.
    ///
    /// A hit takes no page-table latch: the frame comes from the lock-free directory, and the
    /// caller validates it under the frame latch (`data.page == Some(id)`, else unpin and try
    /// again), which catches a frame remapped between the lookup and the latch.
    #[inline(always)]
    fn pin_hit(&self, id: PageId) -> Option<&Frame> {
        let frame = self.find_hit(id)?;
        frame.pin();
        Some(frame)
    }

    /// Advice to the store: pages `ids` will be read into the pool soon (recovery's redo, of
    /// the pages its analysis found dirty), so that a store on a file reads them all at once
    /// ([`PageStore::will_need`]). Nothing is read into the pool by it.
    pub fn will_need(&self, ids: &[PageId]) {
        self.store.will_need(ids);
    }

    /// Starts loading what a fix of `id` followed by reads of `ranges` (byte ranges of the
    /// page, clipped to it) will touch: the frame's first cache line and those lines of its
    /// image, all at once. Without the hint a fix waits for the frame's line before it learns
    /// where the image is, and a read for the image's header before its slot, one miss after
    /// another. Only a hint: nothing is latched or pinned, a page not in the pool costs the
    /// directory lookup, and one remapped meanwhile only wastes the loads.
    #[inline]
    pub fn prefetch_page(&self, id: PageId, ranges: &[(usize, usize)]) {
        if id.0 >= DIRECT_PAGES_MAX {
            return;
        }
        let Some(f) = self.directory.get(id) else {
            return;
        };
        crate::prefetch::line((self.mapped_frame(f) as *const Frame).cast());
        // In bounds: a frame id from the directory, as `mapped_frame` relies on.
        let image = self.images.address(f.index());
        for &(start, len) in ranges {
            let end = start.saturating_add(len).min(self.page_size);
            if start < end {
                crate::prefetch::range((image + start) as *const u8, end - start);
            }
        }
    }

    /// Reads page `id` without latching it, if it is in the pool and nobody holds it
    /// exclusively: `read` gets the page's bytes, which a writer may change while they are
    /// read, and its result is kept only if no exclusive hold of the frame began or ended
    /// meanwhile and the frame still held `id` ([`Latch::validate`]); `None` otherwise (the
    /// caller latches instead). With the result comes a token that tells later whether the
    /// page is still unchanged ([`ReadToken::still_valid`]), for a caller that must know the
    /// page stayed as read while it went on (a B+-tree descent checks a parent after fixing
    /// its child).
    ///
    /// For read-mostly pages every thread visits (B+-tree inner nodes): a shared latch is a
    /// write to the frame's latch word, and threads that read the same node take its line
    /// from each other at every fix and release. `read` must cope with any bytes (the page
    /// decoders are fuzzed for that: a torn read gives an error or a wrong answer, never a
    /// panic or an endless loop), and nothing it returns may point into the page.
    #[inline(always)]
    pub fn read_optimistic<R>(
        &self,
        id: PageId,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Option<(R, ReadToken<'_>)> {
        if id.0 >= DIRECT_PAGES_MAX {
            return None;
        }
        let f = self.directory.get(id)?;
        let frame = self.mapped_frame(f);
        let version = frame.data.optimistic_version()?;
        // In bounds: a frame id from the directory, as `mapped_frame` relies on.
        let image = self.images.address(f.index());
        // SAFETY: the frame's data lives as long as the pool; `page` is a plain `Copy` value
        // read volatile, and a torn or stale one fails the check below or the validation.
        let page =
            unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*frame.data.value_ptr()).page)) };
        if page != Some(id) {
            return None;
        }
        counters::bump_fix(id.0);
        // SAFETY: `image` is the frame's page buffer (`page_size` bytes of the pool's images,
        // never unmapped or moved while the pool lives). A writer holding the frame's latch may
        // change its bytes meanwhile: whatever is read is discarded unless the validation
        // below shows no write happened.
        let bytes = unsafe { std::slice::from_raw_parts(image as *const u8, self.page_size) };
        let result = read(bytes);
        let token = ReadToken { frame, version };
        token.still_valid().then_some((result, token))
    }

    /// The frame holding `id` if the page is in the pool, unpinned: [`BufferPool::pin_hit`]
    /// without the pin, for a shared fix with latching on. The same validation under the
    /// frame latch catches a frame remapped meanwhile.
    #[inline(always)]
    fn find_hit(&self, id: PageId) -> Option<&Frame> {
        if id.0 >= DIRECT_PAGES_MAX {
            return self.find_hit_overflow(id);
        }
        let frame = self.mapped_frame(self.directory.get(id)?);
        if !frame.referenced.load(Ordering::Relaxed) {
            frame.referenced.store(true, Ordering::Relaxed);
        }
        counters::bump_hit();
        Some(frame)
    }

    /// [`BufferPool::find_hit`] for a page id past the directory (only a damaged log names
    /// one): looked up in the overflow map under the page-table latch.
    #[cold]
    #[inline(never)]
    fn find_hit_overflow(&self, id: PageId) -> Option<&Frame> {
        let f = self.table.read().overflow.get(&id).copied()?;
        let frame = self.frame(f);
        frame.referenced.store(true, Ordering::Relaxed);
        counters::bump_hit();
        Some(frame)
    }

    /// After a missed [`BufferPool::pin_hit`]: checks (with `check`) that the page is
    /// allocated, then loads it (or finds that another fix just did).
    #[cold]
    fn pin_miss(&self, id: PageId, intent: Intent, check: bool) -> StorageResult<Pinned<'_>> {
        if check {
            self.check_allocated(id)?;
        }
        self.load(id, intent)
    }

    /// The miss path: finds a victim frame, writes it back if dirty (without the page-table
    /// latch), maps `id` to it and loads the page holding only the frame's exclusive latch.
    ///
    /// A dirty victim stays pinned while it is written back and is then taken, if it is still
    /// clean and unlatched, rather than left for the clock to pass: otherwise, in a pool whose
    /// frames are all dirty (the first miss after a load filled it), one miss went on writing
    /// back frame after frame, the whole pool, before it found a clean one (a 180 ms stall in a
    /// TPC-C run with a 256 MiB pool).
    #[cold]
    fn load(&self, id: PageId, intent: Intent) -> StorageResult<Pinned<'_>> {
        // The frame this miss just wrote back, still pinned by it.
        let mut cleaned: Option<FrameId> = None;
        loop {
            let mut table = {
                crate::shared::bump(crate::shared::Place::PageTable);
                self.table.write()
            };
            if let Some(f) = table.get(&self.directory, id) {
                // Someone else loaded (or is loading) it meanwhile.
                if let Some(c) = cleaned.take() {
                    self.frame(c).unpin();
                }
                let frame = self.frame(f);
                frame.pin();
                drop(table);
                counters::bump_hit();
                return Ok(Pinned::Hit(frame));
            }
            if intent == Intent::Existing
                && self.staging.load(Ordering::Relaxed)
                && super::stage::refusing()
            {
                drop(table);
                if let Some(c) = cleaned.take() {
                    self.frame(c).unpin();
                }
                return Err(super::stage::refused(id));
            }
            let retry = cleaned.is_some();
            let v = match cleaned.take() {
                Some(c) => c,
                None => {
                    let Some(v) = table.clock.pick(&self.frames) else {
                        return Err(StorageError::PoolExhausted {
                            frames: self.frames.len(),
                        });
                    };
                    self.frame(v).pin();
                    v
                }
            };
            let frame = self.frame(v);
            // A frame seen unpinned has a free latch unless a fix pinned it just now.
            let Some(mut data) = frame.data.try_write() else {
                drop(table);
                frame.unpin();
                continue;
            };
            if frame.dirty.load(Ordering::Acquire) {
                drop(table);
                if retry {
                    // Dirtied again since this miss wrote it back: a busy page; leave it to
                    // the clock rather than write it again.
                    drop(data);
                    frame.unpin();
                    continue;
                }
                // Write the victim back without the page-table latch, then try it again
                // (others may have fixed it meanwhile).
                let written = self.write_back(frame, &data);
                drop(data);
                if let Err(e) = written {
                    frame.unpin();
                    return Err(e);
                }
                self.io.evict_writes.fetch_add(1, Ordering::Relaxed);
                cleaned = Some(v);
                continue;
            }
            if let Some(old) = table.frame_page[v.index()].take() {
                table.remove(&self.directory, old);
                counters::bump_eviction();
            }
            table.insert(&self.directory, id, v);
            table.frame_page[v.index()] = Some(id);
            frame.mapped.store(id.0, Ordering::Release);
            frame.referenced.store(true, Ordering::Relaxed);
            data.page = None;
            drop(table);
            counters::bump_miss();

            let loaded = match intent {
                // `allocate_page` zeroes the whole page through its guard.
                Intent::Fresh => Ok(()),
                Intent::Existing => self.read_in(id, &mut data.buf),
            };
            return match loaded {
                Ok(()) => {
                    data.page = Some(id);
                    Ok(Pinned::Loaded(frame, data))
                }
                Err(e) => {
                    // Unmap the page so the next fix tries again; waiters see `page == None`.
                    let mut table = {
                        crate::shared::bump(crate::shared::Place::PageTable);
                        self.table.write()
                    };
                    table.remove(&self.directory, id);
                    table.frame_page[v.index()] = None;
                    frame.mapped.store(NO_PAGE, Ordering::Release);
                    drop(table);
                    drop(data);
                    frame.unpin();
                    Err(e)
                }
            };
        }
    }

    /// Pages read from and written back to the store so far, all threads together.
    pub fn io(&self) -> PoolIo {
        PoolIo {
            reads: self.io.reads.load(Ordering::Relaxed),
            writes: self.io.writes.load(Ordering::Relaxed),
            evict_writes: self.io.evict_writes.load(Ordering::Relaxed),
            cleaner_writes: self.io.cleaner_writes.load(Ordering::Relaxed),
            image_bytes: self.image_bytes(),
        }
    }

    /// Reads page `id` from the store and checks it: an all-zero page is fresh; otherwise the
    /// magic, the checksum and the stored page id must be right.
    fn read_in(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        let started = Instant::now();
        let reading = super::stage::Reading::start();
        self.store.read_page(id, buf)?;
        drop(reading);
        super::stage::note_read(started.elapsed());
        counters::bump_read();
        self.io.reads.fetch_add(1, Ordering::Relaxed);
        verify_page(id, buf)
    }

    /// Writes a frame's page to the store: flushes the log up to the page LSN first (the WAL
    /// rule), sets the checksum in a copy (the caller may hold the latch only shared), then
    /// marks the frame clean. The caller holds the frame latch.
    fn write_back(&self, frame: &Frame, data: &FrameData) -> StorageResult<()> {
        let Some(page) = data.page else {
            return Ok(());
        };
        if let Some(log) = &self.log {
            let lsn = page_lsn(&data.buf);
            if lsn != Lsn::NONE {
                log.flush_to(lsn)?;
            }
        }
        let mut image = data.buf.to_vec();
        let sum = page_checksum(&image);
        image[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&sum.to_le_bytes());
        let started = Instant::now();
        let writing = super::stage::Reading::start();
        self.store.write_page(page, &image)?;
        drop(writing);
        super::stage::note_write(started.elapsed());
        counters::bump_write();
        self.io.writes.fetch_add(1, Ordering::Relaxed);
        frame.rec_lsn.store(0, Ordering::Relaxed);
        frame.dirty.store(false, Ordering::Release);
        Ok(())
    }

    /// Emits one redo record for the pending changes of all `guards`, stamps each changed
    /// page with its LSN, and leaves the guards with nothing pending. Without a log it only
    /// forgets the (empty) pending lists.
    ///
    /// One guard takes `log_pending` (what a write guard's release calls); several guards
    /// (a B+-tree split) take the general path, which collects the ranges into vectors.
    pub fn log_together(&self, guards: &mut [&mut PageWriteGuard<'_>]) {
        if let [g] = guards {
            self.log_pending(g);
            return;
        }
        let Some(log) = &self.log else {
            for g in guards.iter_mut() {
                let data = g.data_mut();
                data.ranges.clear();
                data.zeroed = false;
            }
            return;
        };
        // A page changed for the first time since it was clean, with full-page images on, is
        // logged whole: "zeroed", then everything after the checksum.
        let whole: Vec<bool> = guards
            .iter()
            .map(|g| {
                let data = g.data();
                !data.ranges.is_empty() && self.logs_image(g)
            })
            .collect();
        let ranges: Vec<Vec<RedoRange<'_>>> = guards
            .iter()
            .zip(&whole)
            .map(|(g, &whole)| {
                let data = g.data();
                if whole {
                    return vec![RedoRange {
                        offset: OFFSET_MAGIC as u16,
                        bytes: &data.buf[OFFSET_MAGIC..],
                    }];
                }
                data.ranges
                    .iter()
                    .map(|&(s, e)| RedoRange {
                        offset: s as u16,
                        bytes: &data.buf[s as usize..e as usize],
                    })
                    .collect()
            })
            .collect();
        let pages: Vec<PageRedo<'_>> = guards
            .iter()
            .zip(&ranges)
            .zip(&whole)
            .filter(|((g, r), _)| !r.is_empty() || g.data().zeroed)
            .map(|((g, r), &whole)| PageRedo {
                page: g.page,
                zeroed: g.data().zeroed || whole,
                ranges: r,
            })
            .collect();
        if pages.is_empty() {
            return;
        }
        let lsn = log.log_redo(&pages);
        let images = guards
            .iter()
            .zip(&whole)
            .filter(|(_, &whole)| whole)
            .map(|(g, _)| (g.data().buf.len() - OFFSET_MAGIC) as u64)
            .sum::<u64>();
        if images > 0 {
            self.image_bytes.fetch_add(images, Ordering::Relaxed);
        }
        drop(ranges);
        for g in guards.iter_mut() {
            let data = g.data_mut();
            if !data.ranges.is_empty() || data.zeroed {
                data.ranges.clear();
                data.zeroed = false;
                g.stamp(lsn);
            }
        }
    }

    /// Logs the pending changes of one guard (a write guard's release, or
    /// [`BufferPool::log_together`] of one guard): its frame's range list goes to
    /// [`PageLog::log_page_redo`] as it is, which encodes it without building anything; the
    /// page is stamped with the record's LSN and the list emptied (its capacity stays with the
    /// frame).
    #[inline(never)]
    pub(crate) fn log_pending(&self, g: &mut PageWriteGuard<'_>) {
        let data = g.data();
        if data.ranges.is_empty() && !data.zeroed {
            return;
        }
        let Some(log) = &self.log else {
            let data = g.data_mut();
            data.ranges.clear();
            data.zeroed = false;
            return;
        };
        if self.full_page_images.load(Ordering::Relaxed) && self.logs_image(g) {
            return self.log_image(log, g);
        }
        let lsn = log.log_page_redo(g.page, data.zeroed, &data.buf, &data.ranges);
        let data = g.data_mut();
        data.ranges.clear();
        data.zeroed = false;
        g.stamp(lsn);
    }

    /// [`BufferPool::log_pending`] for a page whose change is logged as its whole image (see
    /// [`BufferPool::set_full_page_images`]): out of the way of the usual path.
    #[cold]
    #[inline(never)]
    fn log_image(&self, log: &Arc<dyn PageLog>, g: &mut PageWriteGuard<'_>) {
        let data = g.data();
        let whole = [(OFFSET_MAGIC as u32, data.buf.len() as u32)];
        let lsn = log.log_page_redo(g.page, true, &data.buf, &whole);
        self.image_bytes
            .fetch_add((data.buf.len() - OFFSET_MAGIC) as u64, Ordering::Relaxed);
        let data = g.data_mut();
        data.ranges.clear();
        data.zeroed = false;
        g.stamp(lsn);
    }

    /// Writes every dirty page back (WAL rule included), then syncs the store.
    pub fn flush_all(&self) -> StorageResult<()> {
        self.flush_where(|_| true)?;
        self.store.sync()
    }

    /// Writes back (WAL rule included) every dirty page whose recovery LSN is below `lsn`, then
    /// syncs the store; returns how many pages it wrote. Fuzzy checkpoints pass the previous
    /// checkpoint's begin: during a run pages are written only when evicted, so without this a
    /// hot page's first change since it was last clean would pin the log forever.
    pub fn flush_older_than(&self, lsn: Lsn) -> StorageResult<usize> {
        let written = self.flush_where(|frame| {
            let rec = frame.rec_lsn.load(Ordering::Relaxed);
            rec != 0 && rec < lsn.0
        })?;
        self.store.sync()?;
        Ok(written)
    }

    /// Makes every page written so far durable (a checkpoint's dirty page table leaves out
    /// pages written back before it was read: their writes must not be lost to a crash).
    pub fn sync_store(&self) -> StorageResult<()> {
        self.store.sync()
    }

    /// Writes back the dirty frames that `pick` chooses (asked twice: before pinning, and again
    /// under the frame latch). The page-table latch is held only to pin a frame, never across
    /// I/O; the write happens under the frame's shared latch. The log is forced up to the
    /// page's LSN before that latch is taken for the write: a force waits for a sync, and a
    /// hot page's writers (who need the latch exclusive) would wait out the sync behind a
    /// checkpoint. Under the latch, [`BufferPool::write_back`] forces again only if the page
    /// changed meanwhile and its new LSN is not yet durable.
    fn flush_where(&self, pick: impl Fn(&Frame) -> bool) -> StorageResult<usize> {
        let mut count = 0;
        for i in 0..self.frames.len() {
            if self.flush_frame(i, &pick)? {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Writes frame `i` back if it is dirty and `pick` chooses it (asked before pinning and
    /// again under the frame latch), as [`BufferPool::flush_where`] describes; returns whether
    /// it wrote.
    fn flush_frame(&self, i: usize, pick: &impl Fn(&Frame) -> bool) -> StorageResult<bool> {
        let frame = &self.frames[i];
        if !frame.dirty.load(Ordering::Acquire) || !pick(frame) {
            return Ok(false);
        }
        let page = {
            let table = self.table.read();
            let Some(page) = table.frame_page[i] else {
                return Ok(false);
            };
            frame.pin();
            page
        };
        let still = |data: &FrameData| {
            data.page == Some(page) && frame.dirty.load(Ordering::Acquire) && pick(frame)
        };
        let forced = match &self.log {
            Some(log) => {
                let lsn = {
                    let data = frame.data.read();
                    still(&data).then(|| page_lsn(&data.buf))
                };
                match lsn {
                    Some(lsn) if lsn != Lsn::NONE => log.flush_to(lsn),
                    _ => Ok(()),
                }
            }
            None => Ok(()),
        };
        let written = forced.and_then(|()| {
            let data = frame.data.read();
            if still(&data) {
                self.write_back(frame, &data).map(|()| true)
            } else {
                Ok(false)
            }
        });
        frame.unpin();
        written
    }

    /// Where the clock hand points: the frame it looks at next (a page cleaner's bearing).
    pub fn clock_hand(&self) -> usize {
        self.table.read().clock.hand()
    }

    /// A page cleaner's work: writes back the dirty frames among `count` frames from `start`
    /// on (wrapping around the pool) that the clock would take as they are — unpinned,
    /// unlatched and not referenced since the hand last passed — so that the misses that take
    /// them find them clean and read without first writing. Each is written as a
    /// checkpoint's write-back is (the log forced to the page's LSN first, the write under
    /// the frame's shared latch); a frame fixed or referenced again before its write is left
    /// alone. Of those frames it takes the ones whose index is `share.0` modulo `share.1`, so
    /// that `share.1` cleaners can split one range, each writing its own (`(0, 1)`: all).
    /// Returns how many it wrote.
    pub fn clean_frames(
        &self,
        start: usize,
        count: usize,
        share: (usize, usize),
    ) -> StorageResult<usize> {
        let n = self.frames.len();
        let idle = |frame: &Frame| {
            frame.pins.load(Ordering::Acquire) <= 1 && !frame.referenced.load(Ordering::Relaxed)
        };
        let mut written = 0;
        for k in 0..count.min(n) {
            let i = (start + k) % n;
            if i % share.1.max(1) != share.0 {
                continue;
            }
            let frame = &self.frames[i];
            if frame.pins.load(Ordering::Acquire) != 0 || frame.data.is_locked() {
                continue;
            }
            if self.flush_frame(i, &idle)? {
                written += 1;
                self.io.cleaner_writes.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(written)
    }

    /// Dirty pages with their recovery LSN (the LSN of the first change since the page was
    /// last clean; [`Lsn::NONE`] without a log), for fuzzy checkpoints.
    ///
    /// Complete for a checkpoint whose begin record was appended before the call: every page
    /// with a change logged before that record is listed with a recovery LSN at or below the
    /// change, or has been written back. A write guard logs its change and marks the frame
    /// dirty while it holds the frame's exclusive latch, so a pinned frame is read under its
    /// shared latch (waiting for such a guard); an unpinned one has no guard, and any guard
    /// that pins it later logs after the begin record. The page-table latch is not held while
    /// waiting (a guard holder may need it for a miss). With a log, a dirty frame without a
    /// recovery LSN is being written back (or changed nothing that was logged) and is left out.
    pub fn dirty_pages(&self) -> Vec<(PageId, Lsn)> {
        let mut dirty = Vec::new();
        let mut busy = Vec::new();
        {
            let table = self.table.read();
            for (i, (frame, page)) in self.frames.iter().zip(&table.frame_page).enumerate() {
                if frame.pins.load(Ordering::Acquire) != 0 {
                    busy.push(i);
                } else if let Some(entry) = self.dirty_entry(frame, *page) {
                    dirty.push(entry);
                }
            }
        }
        for i in busy {
            let frame = &self.frames[i];
            let data = frame.data.read();
            if let Some(entry) = self.dirty_entry(frame, data.page) {
                dirty.push(entry);
            }
        }
        dirty
    }

    /// The dirty page table entry of `frame` holding `page`, if it has one.
    fn dirty_entry(&self, frame: &Frame, page: Option<PageId>) -> Option<(PageId, Lsn)> {
        let page = page.filter(|_| frame.dirty.load(Ordering::Acquire))?;
        let rec = Lsn(frame.rec_lsn.load(Ordering::Relaxed));
        if rec == Lsn::NONE && self.log.is_some() {
            return None;
        }
        Some((page, rec))
    }

    /// Panics if a frame or page-table invariant is broken. Meant for tests and stress runs
    /// with no page fixed.
    pub fn check_invariants(&self) {
        let table = self.table.read();
        let mapped = table.frame_page.iter().filter(|p| p.is_some()).count();
        assert_eq!(
            table.mappings(&self.directory).count(),
            mapped,
            "page table and frame map disagree in size"
        );
        for (page, f) in table.mappings(&self.directory) {
            assert!(
                f.index() < self.frames.len(),
                "page {page} maps to frame {f:?}, past the pool's {} frames",
                self.frames.len()
            );
            assert_eq!(
                table.frame_page[f.index()],
                Some(page),
                "page {page} maps to frame {f:?}, which holds another page"
            );
            assert!(
                page.0 < self.page_count(),
                "page {page} beyond the allocator"
            );
        }
        for (i, frame) in self.frames.iter().enumerate() {
            let pins = frame.pins.load(Ordering::Acquire);
            assert_eq!(pins, 0, "frame {i} still pinned ({pins})");
            let data = frame
                .data
                .try_write()
                .unwrap_or_else(|| panic!("frame {i} is unpinned but latched"));
            assert_eq!(
                data.page, table.frame_page[i],
                "frame {i} holds another page than mapped"
            );
            assert_eq!(
                frame.mapped.load(Ordering::Acquire),
                table.frame_page[i].map_or(NO_PAGE, |p| p.0),
                "frame {i} names another page than mapped"
            );
            assert!(
                data.ranges.is_empty(),
                "frame {i} has unlogged ranges without a write guard"
            );
            if frame.dirty.load(Ordering::Acquire) {
                assert!(data.page.is_some(), "frame {i} is dirty but holds no page");
            }
            if let Some(page) = data.page {
                let magic =
                    u16::from_le_bytes([data.buf[OFFSET_MAGIC], data.buf[OFFSET_MAGIC + 1]]);
                if magic == PAGE_MAGIC {
                    let stored = u64::from_le_bytes(
                        data.buf[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8]
                            .try_into()
                            .unwrap(),
                    );
                    assert_eq!(stored, page.0, "frame {i}: header names another page");
                }
            }
            let rec = frame.rec_lsn.load(Ordering::Relaxed);
            if rec != 0 {
                assert!(
                    frame.dirty.load(Ordering::Acquire),
                    "frame {i} clean with a rec_lsn"
                );
                assert!(
                    rec <= page_lsn(&data.buf).0,
                    "frame {i}: rec_lsn after page LSN"
                );
            }
        }
    }
}

/// Checks a page image just read for page `id`.
/// What [`BufferPool::read_optimistic`] read a page at: the frame and its latch's version.
#[derive(Clone, Copy)]
pub struct ReadToken<'a> {
    frame: &'a Frame,
    version: u64,
}

impl ReadToken<'_> {
    /// Whether the page is unchanged since it was read: no exclusive hold of its frame began
    /// or ended since (an eviction too takes the frame exclusively).
    #[inline]
    pub fn still_valid(&self) -> bool {
        self.frame.data.validate(self.version)
    }
}

pub(crate) fn verify_page(id: PageId, buf: &[u8]) -> StorageResult<()> {
    inspect(id, buf).map_err(|damage| StorageError::Corruption {
        page: id,
        reason: damage.to_string(),
    })
}

/// The checksum stored in page `id`'s image `buf` if it is the only thing wrong with it: the
/// magic, the page id and the kind are right and the checksum does not match the bytes. What a
/// torn write leaves whose first part, the header's, is new (see
/// [`BufferPool::read_torn`]).
fn torn_checksum(id: PageId, buf: &[u8]) -> Option<u32> {
    match inspect(id, buf) {
        Err(Damage::Checksum {
            stored,
            header_whole: true,
            ..
        }) => Some(stored),
        _ => None,
    }
}

/// What is wrong with a page image, the first thing found in the order magic, checksum, page
/// id, kind.
#[derive(Debug, thiserror::Error)]
enum Damage {
    #[error("bad magic {0:#06x}")]
    Magic(u16),
    /// `header_whole`: the header's page id and kind are right, so only the bytes after it
    /// may be wrong (a torn write whose first part is new).
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        stored: u32,
        computed: u32,
        header_whole: bool,
    },
    #[error("header names page #{0}")]
    PageId(u64),
    #[error("unknown page kind {0}")]
    Kind(u8),
}

/// Checks page `id`'s image `buf` (an image of zeros, a page never written, passes).
fn inspect(id: PageId, buf: &[u8]) -> Result<(), Damage> {
    let magic = u16::from_le_bytes([buf[OFFSET_MAGIC], buf[OFFSET_MAGIC + 1]]);
    if magic != PAGE_MAGIC {
        return if buf.iter().all(|&b| b == 0) {
            Ok(())
        } else {
            Err(Damage::Magic(magic))
        };
    }
    let stored_id = u64::from_le_bytes(buf[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].try_into().unwrap());
    let kind_known = PageKind::from_u8(buf[OFFSET_KIND]).is_some();
    let stored = u32::from_le_bytes(
        buf[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4]
            .try_into()
            .unwrap(),
    );
    let computed = page_checksum(buf);
    if stored != computed {
        return Err(Damage::Checksum {
            stored,
            computed,
            header_whole: stored_id == id.0 && kind_known,
        });
    }
    if stored_id != id.0 {
        return Err(Damage::PageId(stored_id));
    }
    if !kind_known {
        return Err(Damage::Kind(buf[OFFSET_KIND]));
    }
    Ok(())
}

const _: () = assert!(PAGE_HEADER_SIZE < PageSize::Kib8.bytes());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_page_whose_checksum_alone_is_wrong_looks_torn() {
        let id = PageId(7);
        let mut page = vec![0u8; PageSize::Kib8.bytes()];
        page[OFFSET_MAGIC..OFFSET_MAGIC + 2].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
        page[OFFSET_KIND] = PageKind::Heap as u8;
        page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].copy_from_slice(&7u64.to_le_bytes());
        page[6000] = 0xAB;
        let sum = page_checksum(&page);
        page[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(torn_checksum(id, &page), None, "an intact page");
        page[6000] = 0xAC;
        assert_eq!(torn_checksum(id, &page), Some(sum));
        assert_eq!(
            torn_checksum(PageId(8), &page),
            None,
            "another page's image"
        );
        let mut other = page.clone();
        other[OFFSET_MAGIC] ^= 1;
        assert_eq!(torn_checksum(id, &other), None, "a bad magic");
        other = page.clone();
        other[OFFSET_KIND] = 9;
        assert_eq!(torn_checksum(id, &other), None, "an unknown kind");
        assert_eq!(
            torn_checksum(id, &vec![0u8; page.len()]),
            None,
            "a fresh page"
        );
    }

    /// A pool larger than the machine can hold is an error, not an aborted process. Run only
    /// where the kernel refuses such an allocation outright (overcommit heuristic or strict,
    /// with less memory and swap than the frames' array needs), lest the test itself take the
    /// machine's memory.
    #[test]
    fn a_pool_larger_than_memory_is_an_error_not_an_abort() {
        let frames = NO_FRAME as usize - 1;
        let array_bytes = frames.saturating_mul(std::mem::size_of::<Frame>()) as u64;
        let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory");
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib = |field: &str| -> Option<u64> {
            let line = meminfo.lines().find(|l| l.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        let (Ok(mode), Some(ram), Some(swap)) = (overcommit, kib("MemTotal:"), kib("SwapTotal:"))
        else {
            eprintln!("skipped: no /proc/sys/vm/overcommit_memory or /proc/meminfo");
            return;
        };
        if mode.trim() == "1" || (ram + swap) * 1024 >= array_bytes {
            eprintln!("skipped: this kernel would grant {array_bytes} bytes");
            return;
        }
        let result = BufferPool::new(
            Box::new(crate::file::MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames,
                latching: true,
            },
            None,
        );
        let err = result.err().expect("a pool beyond memory was built");
        let message = err.to_string();
        assert!(message.contains("buffer pool"), "{message}");
        assert!(message.contains(&frames.to_string()), "{message}");
    }

    /// `prefetch_page` is only a hint: pages in the pool or not, ids past the directory,
    /// ranges past the page or empty, it changes no page, pins nothing and maps nothing.
    #[test]
    fn prefetching_a_page_changes_nothing() {
        let pool = BufferPool::new(
            Box::new(crate::file::MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames: 4,
                latching: true,
            },
            None,
        )
        .unwrap();
        let ids: Vec<PageId> = (0..6)
            .map(|i| {
                let mut g = pool.allocate_page(PageKind::Heap).unwrap();
                g.range_mut(100, 1)[0] = i;
                g.page_id()
            })
            .collect();
        let before: Vec<Vec<u8>> = ids
            .iter()
            .map(|&id| pool.fix_shared(id).unwrap().to_vec())
            .collect();
        let size = PageSize::Kib8.bytes();
        let ranges = [
            (0, 64),
            (size - 10, 100),
            (size + 5, 10),
            (7, 0),
            (usize::MAX, 9),
        ];
        for &id in ids
            .iter()
            .chain(&[PageId(DIRECT_PAGES_MAX + 3), PageId(1 << 20)])
        {
            pool.prefetch_page(id, &ranges);
            pool.prefetch_page(id, &[]);
        }
        pool.check_invariants();
        assert_eq!(pool.page_count(), ids.last().unwrap().0 + 1);
        for (id, image) in ids.iter().zip(&before) {
            assert_eq!(&pool.fix_shared(*id).unwrap()[..], &image[..], "page {id}");
        }
    }

    #[test]
    fn directory_maps_across_chunks_and_unmaps() {
        let dir = FrameDirectory::new();
        let chunk = DIRECTORY_CHUNK as u64;
        let ids = [0, chunk - 1, chunk, DIRECT_PAGES_MAX - 1];
        for (f, &id) in ids.iter().enumerate() {
            assert_eq!(dir.get(PageId(id)), None);
            dir.set(PageId(id), f as u32);
        }
        for (f, &id) in ids.iter().enumerate() {
            assert_eq!(dir.get(PageId(id)), Some(FrameId(f as u32)));
        }
        // Same chunk as page 0, never mapped; chunks are made only where a page was mapped.
        assert_eq!(dir.get(PageId(1)), None);
        assert_eq!(dir.chunks().count(), 3);
        dir.set(PageId(chunk), NO_FRAME);
        assert_eq!(dir.get(PageId(chunk)), None);
        assert_eq!(dir.get(PageId(chunk - 1)), Some(FrameId(1)));
    }
}
