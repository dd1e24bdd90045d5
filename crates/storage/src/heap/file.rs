//! [`HeapFile`]: a chain of slotted heap pages and a free-space map.
//!
//! ```text
//!   first_page ──next──▶ page ──next──▶ ... ──next──▶ tail   (chain in the page headers)
//!   free-space map: bucket[free bytes * 16 / page_size] → pages   (in memory only)
//! ```
//!
//! * **Insert** asks the free-space map for a page whose free bytes surely suffice (the lowest
//!   bucket whose lower bound covers the need, lowest page id first), re-checks under the
//!   page's exclusive latch (the map may be stale by then) and, if nothing fits, adds a page
//!   to the chain right after the inserting thread's full page (a logged change of that page's
//!   `next_page`). Insert never scans the file. The chain has no tail to append at: the order
//!   of its pages means nothing, and with one tail every thread's new page latched the tail and
//!   the last page, which was another thread's insertion page.
//! * **Growth**: an update that no longer fits its page stores the new bytes as a *moved body*
//!   elsewhere and turns the home slot into a forwarding stub; the record id stays valid.
//!   Chains are at most one hop: a moved record that moves again updates its stub.
//! * **Latching**: a writer holds at most one page latch at a time, except the append, which
//!   holds the page it links after (its own full insertion page, or the first page), then the
//!   brand-new page. Readers following a
//!   stub hold the home page shared while fixing the body page shared. The free-space map's latch
//!   is a leaf (taken while a page latch is held, never the other way round).
//! * **Concurrency contract**: the heap keeps pages physically consistent under any
//!   interleaving; writers of the *same* record must be serialised by the caller (record
//!   locks), as must a `restore` against inserts that could reuse the slot.
//! * **Insertion pages**: each thread inserts into a page of its own (one per
//!   `shard::thread_index() % INSERT_SHARDS`), claimed from the free-space map, which then
//!   records it as full so that other threads look elsewhere; the thread inserts there
//!   without touching the map (no latch but the page's) until the page has no room, then
//!   gives it back with the room it really has and claims another. With one map and one last
//!   page for all, every insert of every thread latched the map twice and most of them the
//!   same page.
//!   [`HeapFile::sharing_insertion_pages`] turns this off for an experiment: every thread
//!   inserts where the map's last insert went, so the threads share one insertion page per
//!   file, as a heap without per-thread pages (or a B+-tree appending at its right-hand
//!   leaf, as Berkeley DB's did) has them share it. Under page locking, whoever inserted
//!   there last holds the page's lock to its commit, and the next inserter queues on it.
//! * The free-space map is rebuilt by [`HeapFile::open`] from the chain, or taken from the map
//!   the last checkpoint saved by [`HeapFile::open_saved`], which reads only the pages changed
//!   or added since (see [`super::saved`]); it is exact while the file is quiescent (checked
//!   by [`HeapFile::check_invariants`]), except for the entries of claimed pages.

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam::utils::CachePadded;

use super::page::{self as hp, Slot, SlotKind};
use super::saved::SavedHeap;
use super::RecordId;
use crate::buffer::{BufferPool, PageIdHasher, PageWriteGuard};
use crate::error::{Fault, StorageError, StorageResult};
use crate::latch::Latch;
use crate::page::{PageId, PageKind, OFFSET_KIND};
use crate::shard;
use crate::shared::{self, Place};

const BUCKETS: usize = 16;

thread_local! {
    /// The copy [`HeapFile::with_unchanging_record`] reads a record into (taken out while
    /// it is used, so a nested read starts a copy of its own).
    static UNCHANGING_COPY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Shards of a heap file's insertion pages: more than the threads of the machines measured.
const INSERT_SHARDS: usize = 64;

/// Pages with room, bucketed by their free bytes.
///
/// Updated after every change of a page; most changes leave the page in its bucket, and then
/// only the exact count is rewritten (a hash-map update with the pool's cheap page-id hash),
/// without touching the bucket sets, so the update allocates nothing.
///
/// The page the last insert went to is remembered (`last_insert`) and tried first: inserts
/// fill one page after another, so the next record usually fits where the previous one went,
/// found with one exact lookup instead of a walk of the bucket sets.
struct FreeSpaceMap {
    page_size: usize,
    free: HashMap<PageId, usize, BuildHasherDefault<PageIdHasher>>,
    buckets: Vec<BTreeSet<PageId>>,
    /// The page of the last insert, if any.
    last_insert: Option<PageId>,
}

impl FreeSpaceMap {
    fn new(page_size: usize) -> FreeSpaceMap {
        FreeSpaceMap {
            page_size,
            free: HashMap::default(),
            buckets: vec![BTreeSet::new(); BUCKETS],
            last_insert: None,
        }
    }

    fn bucket(&self, free: usize) -> usize {
        (free * BUCKETS / self.page_size).min(BUCKETS - 1)
    }

    fn set(&mut self, page: PageId, free: usize) {
        let b = self.bucket(free);
        match self.free.insert(page, free) {
            Some(old) if self.bucket(old) == b => {}
            Some(old) => {
                let old_b = self.bucket(old);
                self.buckets[old_b].remove(&page);
                self.buckets[b].insert(page);
            }
            None => {
                self.buckets[b].insert(page);
            }
        }
    }

    /// A page with at least `need` free bytes: the page of the last insert if it has room, then
    /// a few pages of the bucket `need` falls in
    /// (checked exactly, so nearly full pages still take small records), then the first page
    /// of the lowest bucket whose lower bound covers `need`.
    fn find(&self, need: usize) -> Option<PageId> {
        const PROBES: usize = 4;
        if let Some(p) = self.last_insert {
            if self.free.get(&p).is_some_and(|&free| free >= need) {
                return Some(p);
            }
        }
        let first = (need * BUCKETS).div_ceil(self.page_size);
        if first > 0 && first - 1 < BUCKETS {
            let straddling = self.buckets[first - 1].iter().take(PROBES);
            if let Some(&p) = straddling.into_iter().find(|p| self.free[*p] >= need) {
                return Some(p);
            }
        }
        self.buckets
            .get(first..)?
            .iter()
            .find_map(|b| b.first().copied())
    }
}

/// A heap file: records on a chain of slotted pages of one buffer pool.
pub struct HeapFile {
    pool: Arc<BufferPool>,
    first: PageId,
    /// Protects the free-space map; a leaf latch.
    fsm: Latch<FreeSpaceMap>,
    /// Each thread's insertion page (`shard::thread_index() % INSERT_SHARDS`; 0: none yet),
    /// each on a cache line of its own. See *Insertion pages* in the module docs.
    inserting: Box<[CachePadded<AtomicU64>]>,
    /// The length its records usually have (0: none), for [`HeapFile::prefetch_record`]'s
    /// guess of where a record lies. See [`HeapFile::expecting_records_of`].
    usual_len: usize,
    /// The emulated data device its pages are allocated on (see [`crate::device`]).
    device: u8,
    /// Every thread inserts into the page of the map's last insert (no insertion page of its
    /// own); see [`HeapFile::sharing_insertion_pages`].
    shared_insertion: bool,
}

impl HeapFile {
    /// Creates an empty heap file (allocates its first page).
    pub fn create(pool: Arc<BufferPool>) -> StorageResult<HeapFile> {
        HeapFile::create_on(pool, 0)
    }

    /// Creates an empty heap file whose pages live on emulated data device `device`.
    pub fn create_on(pool: Arc<BufferPool>, device: u8) -> StorageResult<HeapFile> {
        let first = {
            let mut g = pool.allocate_page_on(PageKind::Heap, device)?;
            hp::init(&mut g);
            g.page_id()
        };
        let file = HeapFile::empty(pool, first).on_device(device);
        let free = hp::free_space(&file.pool.fix_shared(first)?);
        file.fsm.write().set(first, free);
        Ok(file)
    }

    /// Opens the heap file whose chain starts at `first_page`, rebuilding the free-space map.
    pub fn open(pool: Arc<BufferPool>, first_page: PageId) -> StorageResult<HeapFile> {
        let file = HeapFile::empty(pool, first_page);
        let mut visited = 0u64;
        let mut next = Some(first_page);
        while let Some(p) = next {
            next = file.note_page(p, &mut visited)?;
        }
        Ok(file)
    }

    /// Reads page `p` of the chain into the free-space map and returns its link, counting the
    /// pages read in `read`: more than the pool's pages means the links go round in a cycle.
    fn note_page(&self, p: PageId, read: &mut u64) -> StorageResult<Option<PageId>> {
        *read += 1;
        if *read > self.pool.page_count() {
            return Err(StorageError::Corruption {
                page: p,
                reason: "heap page chain has a cycle".into(),
            });
        }
        let g = self.heap_page_shared(p)?;
        self.fsm.write().set(p, hp::free_space(&g));
        Ok(hp::next_page(&g))
    }

    /// Opens the heap file whose chain starts at `first_page` with the free-space map a
    /// checkpoint saved (see [`super::saved`]), reading only the pages `changed` says the log
    /// may have changed since that checkpoint's begin, and the pages linked into the chain
    /// since, reached by the links from those. Returns the file and the pages read. An error
    /// (a map that does not hold the first page, a link to a page that is not a heap page, a
    /// cycle) leaves the caller to [`HeapFile::open`] instead, which reads every page.
    pub fn open_saved(
        pool: Arc<BufferPool>,
        first_page: PageId,
        saved: &SavedHeap,
        changed: impl Fn(PageId) -> bool,
    ) -> StorageResult<(HeapFile, u64)> {
        let known = |p: PageId| saved.pages.binary_search_by_key(&p, |e| e.0).is_ok();
        if saved.first != first_page || !known(first_page) {
            return Err(StorageError::Invalid(format!(
                "the saved free-space map of heap {} does not hold its first page",
                first_page
            )));
        }
        let file = HeapFile::empty(pool, first_page);
        {
            let mut fsm = file.fsm.write();
            for &(p, free) in &saved.pages {
                fsm.set(p, usize::from(free));
            }
        }
        let mut read = 0u64;
        let mut added = HashSet::new();
        for &(page, _) in saved.pages.iter().filter(|e| changed(e.0)) {
            let mut at = page;
            loop {
                match file.note_page(at, &mut read)? {
                    // A page linked in since the checkpoint: the links from it lead to the
                    // next page the map knows.
                    Some(n) if !known(n) && added.insert(n) => at = n,
                    _ => break,
                }
            }
        }
        Ok((file, read))
    }

    /// The free-space map as a checkpoint saves it (see [`super::saved`]): every page with its
    /// free bytes, ascending. A page claimed for a thread's inserts, which the map records as
    /// full, and any page whose entry is 0, is read for its room instead. The map's latch is
    /// held only to copy it.
    pub fn free_space_to_save(&self) -> StorageResult<SavedHeap> {
        let claimed = self.claimed_pages();
        let mut pages: Vec<(PageId, usize)> = {
            let fsm = self.fsm_read();
            fsm.free.iter().map(|(&p, &free)| (p, free)).collect()
        };
        pages.sort_unstable_by_key(|&(p, _)| p);
        crate::buffer::stage::allow_reads(|| -> StorageResult<()> {
            for (p, free) in pages.iter_mut() {
                if *free == 0 || claimed.contains(p) {
                    *free = hp::free_space(&self.heap_page_shared(*p)?);
                }
            }
            Ok(())
        })?;
        Ok(SavedHeap {
            first: self.first,
            pages: pages
                .into_iter()
                .map(|(p, free)| (p, u16::try_from(free).unwrap_or(u16::MAX)))
                .collect(),
        })
    }

    fn empty(pool: Arc<BufferPool>, first: PageId) -> HeapFile {
        let latching = pool.is_latching();
        let page_size = pool.page_size();
        HeapFile {
            pool,
            first,
            fsm: Latch::new(FreeSpaceMap::new(page_size), latching),
            inserting: (0..INSERT_SHARDS)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            usual_len: 0,
            device: 0,
            shared_insertion: false,
        }
    }

    /// This file, allocating its new pages on emulated data device `device` (an opened
    /// file's existing pages keep the device their header names).
    pub fn on_device(mut self, device: u8) -> HeapFile {
        self.device = device;
        self
    }

    /// This file, its threads sharing one insertion page (`on`) instead of each inserting
    /// into a page of its own: every insert asks the free-space map, which offers the page of
    /// the last insert while it has room. Slower (the map's latch on every insert) and, under
    /// page locking, a page every inserter queues on: Berkeley DB's behaviour, for the
    /// Charm experiments (`--shared-insert-pages`).
    pub fn sharing_insertion_pages(mut self, on: bool) -> HeapFile {
        self.shared_insertion = on;
        self
    }

    /// This file, told that its records are usually `len` bytes long (a table of fixed-size
    /// rows): a read then loads the lines where such a record would lie along with the page's
    /// header and slot (see [`HeapFile::prefetch_record`]). Only speed depends on it.
    pub fn expecting_records_of(mut self, len: usize) -> HeapFile {
        self.usual_len = len;
        self
    }

    /// Starts loading, all at once, the cache lines a read of `rid` will wait on one after
    /// another: the buffer frame's, the page header's, the slot's and (with a usual record
    /// length) the record's where a page filled with such records in slot order keeps it,
    /// `usual_len` bytes per slot back from the page's end. Records of a table loaded in order
    /// and updated in place (TPC-C's stock, item, customer) lie exactly there; elsewhere the
    /// guess only wastes a few loads.
    #[inline]
    fn prefetch_record(&self, rid: RecordId) {
        let slot = rid.slot as usize;
        let slot_at = hp::dir_end(slot);
        let len = self.usual_len;
        let body_from_end = (slot + 1) * hp::alloc_size(len);
        let page_size = self.pool.page_size();
        let mut ranges = [(0, OFFSET_KIND + 1), (slot_at, hp::SLOT_SIZE), (0, 0)];
        if len > 0 && body_from_end <= page_size {
            ranges[2] = (page_size - body_from_end, len);
        }
        self.pool.prefetch_page(rid.page, &ranges);
    }

    pub fn first_page(&self) -> PageId {
        self.first
    }

    /// The pages the free-space map knows: every page of the chain.
    pub fn pages(&self) -> usize {
        self.fsm_read().free.len()
    }

    /// The largest record this file can hold.
    pub fn max_record_len(&self) -> usize {
        hp::max_record(self.pool.page_size())
    }

    fn heap_page_shared(&self, p: PageId) -> StorageResult<crate::buffer::PageReadGuard<'_>> {
        let g = self.pool.fix_shared(p)?;
        if g[OFFSET_KIND] != PageKind::Heap as u8 {
            return Err(StorageError::Invalid(format!(
                "page {p} is not a heap page"
            )));
        }
        Ok(g)
    }

    fn heap_page_exclusive(&self, p: PageId) -> StorageResult<PageWriteGuard<'_>> {
        let g = self.pool.fix_exclusive(p)?;
        if g[OFFSET_KIND] != PageKind::Heap as u8 {
            return Err(StorageError::Invalid(format!(
                "page {p} is not a heap page"
            )));
        }
        Ok(g)
    }

    /// The free-space map, latched shared (counted: every inserting thread latches it).
    #[inline]
    fn fsm_read(&self) -> crate::latch::LatchReadGuard<'_, FreeSpaceMap> {
        shared::bump(Place::HeapFreeSpace);
        self.fsm.read()
    }

    /// The free-space map, latched exclusively.
    #[inline]
    fn fsm_write(&self) -> crate::latch::LatchWriteGuard<'_, FreeSpaceMap> {
        shared::bump(Place::HeapFreeSpace);
        self.fsm.write()
    }

    fn note_free(&self, g: &PageWriteGuard<'_>) {
        self.fsm_write().set(g.page_id(), hp::free_space(g));
    }

    /// Inserts a record; returns its id.
    pub fn insert(&self, record: &[u8]) -> StorageResult<RecordId> {
        self.insert_with(record, |_| {})
    }

    /// Like [`insert`](Self::insert), but calls `before_write(rid)` after choosing the slot and
    /// before changing the page (the engine logs its undo information there).
    pub fn insert_with(
        &self,
        record: &[u8],
        before_write: impl FnOnce(RecordId),
    ) -> StorageResult<RecordId> {
        self.place(record, SlotKind::Live, before_write)
    }

    /// Fixes (and releases) the pages an insert of a `len`-byte record by this thread would
    /// read: its insertion page, and if that has no room the page the free-space map would
    /// offer next. What a two-stage fetch stage reads in for an insert it does not perform;
    /// nothing is claimed or changed.
    pub fn touch_insert_page(&self, len: usize) -> StorageResult<()> {
        let need = hp::alloc_size(len) + hp::SLOT_SIZE;
        let p = self.inserting[shard::thread_index() % INSERT_SHARDS].load(Ordering::Relaxed);
        if p != 0 && hp::slot_for_insert(&self.heap_page_shared(PageId(p))?, len).is_some() {
            return Ok(());
        }
        let next = self.fsm_read().find(need);
        match next {
            Some(p) => self.heap_page_shared(p).map(drop),
            None => Ok(()),
        }
    }

    /// Finds room for `record` (stored as `kind`) and writes it.
    fn place(
        &self,
        record: &[u8],
        kind: SlotKind,
        before_write: impl FnOnce(RecordId),
    ) -> StorageResult<RecordId> {
        let max = self.max_record_len();
        if record.len() > max {
            return Err(StorageError::RecordTooLarge {
                len: record.len(),
                max,
            });
        }
        let need = hp::alloc_size(record.len()) + hp::SLOT_SIZE;
        if self.shared_insertion {
            return self.place_shared(record, kind, need, before_write);
        }
        let mine = &self.inserting[shard::thread_index() % INSERT_SHARDS];
        let mut g = match mine.load(Ordering::Relaxed) {
            0 => self.claim_page(need, None)?,
            p => self.heap_page_exclusive(PageId(p))?,
        };
        let mut before_write = Some(before_write);
        loop {
            if let Some(rid) = Self::put_if_room(&mut g, record, kind, &mut before_write)? {
                mine.store(g.page_id().0, Ordering::Relaxed);
                return Ok(rid);
            }
            // No room here: give the page back to the map with its real room, claim another.
            g = self.claim_page(need, Some(g))?;
        }
    }

    /// Writes `record` into a free slot of `g` if it has room (calling `before_write`, once,
    /// first); `None` if it has none.
    fn put_if_room(
        g: &mut PageWriteGuard<'_>,
        record: &[u8],
        kind: SlotKind,
        before_write: &mut Option<impl FnOnce(RecordId)>,
    ) -> StorageResult<Option<RecordId>> {
        let Some(slot) = hp::slot_for_insert(g, record.len()) else {
            return Ok(None);
        };
        let rid = RecordId {
            page: g.page_id(),
            slot: slot as u16,
        };
        if let Some(f) = before_write.take() {
            f(rid);
        }
        let placed = hp::put(g, slot, record, kind)?;
        debug_assert!(placed, "slot_for_insert promised room");
        Ok(Some(rid))
    }

    /// [`HeapFile::place`] with one insertion page for all threads: the page the map offers
    /// (its last insert's while it has room), the map told each page's room after each insert,
    /// a new page linked after the first when the map has none.
    fn place_shared(
        &self,
        record: &[u8],
        kind: SlotKind,
        need: usize,
        before_write: impl FnOnce(RecordId),
    ) -> StorageResult<RecordId> {
        let mut before_write = Some(before_write);
        loop {
            let found = self.fsm_read().find(need);
            let mut g = match found {
                Some(p) => self.heap_page_exclusive(p)?,
                None => self.add_page(None)?,
            };
            if let Some(rid) = Self::put_if_room(&mut g, record, kind, &mut before_write)? {
                let mut fsm = self.fsm_write();
                fsm.set(g.page_id(), hp::free_space(&g));
                fsm.last_insert = Some(g.page_id());
                return Ok(rid);
            }
            // The map was stale: correct it and ask again.
            self.note_free(&g);
        }
    }

    /// Claims a page with (per the map) `need` free bytes, or a new one, for this thread's
    /// inserts, fixed exclusively: the map records it as full while it is claimed, so other
    /// threads look elsewhere. `leaving`, the page this thread inserted into until now, goes
    /// back to the map with the room it really has.
    /// `leaving` stays latched until a page is found: a new page is linked after it.
    fn claim_page<'a>(
        &'a self,
        need: usize,
        mut leaving: Option<PageWriteGuard<'a>>,
    ) -> StorageResult<PageWriteGuard<'a>> {
        loop {
            let candidate = {
                let mut fsm = self.fsm_write();
                if let Some(g) = &leaving {
                    fsm.set(g.page_id(), hp::free_space(g));
                }
                let left = leaving.as_ref().map(|g| g.page_id());
                let found = fsm.find(need).filter(|&p| Some(p) != left);
                if let Some(p) = found {
                    fsm.set(p, 0);
                    fsm.last_insert = Some(p);
                }
                found
            };
            let g = match candidate {
                Some(p) => {
                    // One page latch at a time: the leaving page goes first.
                    drop(leaving.take());
                    self.heap_page_exclusive(p)?
                }
                // Its entry reads 0 (full) until its thread gives it back.
                None => self.add_page(leaving.take())?,
            };
            if hp::free_space(&g) >= need {
                return Ok(g);
            }
            // The map was stale: correct it and look again.
            self.note_free(&g);
        }
    }

    /// Pages claimed for some thread's inserts (the map records them as full).
    fn claimed_pages(&self) -> HashSet<PageId> {
        self.inserting
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .filter(|&p| p != 0)
            .map(PageId)
            .collect()
    }

    /// Adds an empty page to the chain right after `after` (the caller's full insertion page,
    /// latched exclusively) or, without one, after the first page (every thread's first new
    /// page of the file: the one shared point left, counted as `heap-tail`); returns it fixed
    /// exclusively.
    fn add_page<'a>(
        &'a self,
        after: Option<PageWriteGuard<'a>>,
    ) -> StorageResult<PageWriteGuard<'a>> {
        let mut prev = match after {
            Some(g) => g,
            None => {
                shared::bump(Place::HeapTail);
                self.heap_page_exclusive(self.first)?
            }
        };
        let mut g = self.pool.allocate_page_on(PageKind::Heap, self.device)?;
        hp::init(&mut g);
        hp::set_next(&mut g, hp::next_page(&prev));
        hp::set_next(&mut prev, Some(g.page_id()));
        // The map knows the page before the link is logged, as every page's entry is written
        // before its change is logged (at the guard's release): a saved map that misses the
        // page was read before the link was logged, which an open re-reading the pages logged
        // since then finds (see `heap::saved`).
        self.fsm_write().set(g.page_id(), 0);
        // One redo record for both: the new page's creation and the link to it. Logged apart,
        // the link came first (the old page's latch is released first), and a crash whose log
        // ended between the two left a chain that recovery linked to a page it never created:
        // the database could not be opened. (Found by the crash campaign.)
        self.pool.log_together(&mut [&mut g, &mut prev]);
        drop(prev);
        Ok(g)
    }

    /// Copies the record at `rid` into `out` (cleared first); false if there is none.
    pub fn read(&self, rid: RecordId, out: &mut Vec<u8>) -> StorageResult<bool> {
        Ok(self
            .with_record(rid, |bytes| {
                out.clear();
                out.extend_from_slice(bytes);
            })?
            .is_some())
    }

    /// Calls `f` on the record's bytes under a shared latch (zero copy); `None` if there is no
    /// live record at `rid`.
    pub fn with_record<R>(
        &self,
        rid: RecordId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> StorageResult<Option<R>> {
        self.prefetch_record(rid);
        let g = self.heap_page_shared(rid.page)?;
        match hp::slot(&g, rid.slot as usize)? {
            Some(s) if s.kind == SlotKind::Live => Ok(Some(f(hp::bytes(&g, s)))),
            Some(s) if s.kind == SlotKind::Forward => {
                let target = RecordId::from_u64(hp::stub_target(&g, s));
                let tg = self.heap_page_shared(target.page)?;
                let body = self.moved_body(&tg, target)?;
                Ok(Some(f(hp::bytes(&tg, body))))
            }
            _ => Ok(None),
        }
    }

    /// [`HeapFile::with_record`] for a record no transaction writes while it is read: a
    /// read-only table's (`Database::set_read_only`). Every thread reads such a table
    /// (TPC-C's items, ten a New-Order), and a shared latch on its page is a write to the
    /// frame's latch word at the fix and again at the release, a line the threads take from
    /// each other. So the record is copied out without latching
    /// ([`BufferPool::read_optimistic`], which also catches a frame that was evicted and
    /// reused meanwhile) and `f` reads the copy; only where that fails — a page not in the
    /// pool, a forwarding stub, a slot that reads as damaged — does the read latch, counted
    /// at [`Place::ReadOnlyPage`].
    pub fn with_unchanging_record<R>(
        &self,
        rid: RecordId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> StorageResult<Option<R>> {
        if !self.pool.is_latching() {
            // Nothing to avoid: a fix without latching writes nothing.
            return self.with_record(rid, f);
        }
        self.prefetch_record(rid);
        let mut copy = UNCHANGING_COPY.with(Cell::take);
        let read = self.pool.read_optimistic(rid.page, |page| {
            if page[OFFSET_KIND] != PageKind::Heap as u8 {
                return None;
            }
            match hp::slot(page, rid.slot as usize) {
                Ok(Some(s)) if s.kind == SlotKind::Live => {
                    copy.clear();
                    copy.extend_from_slice(hp::bytes(page, s));
                    Some(true)
                }
                // As `with_record`: no live record here.
                Ok(None) => Some(false),
                Ok(Some(s)) if s.kind == SlotKind::Moved => Some(false),
                // A forwarding stub (followed under latches), or what reads as damage (the
                // latched read names it).
                _ => None,
            }
        });
        let result = match read {
            Some((Some(true), _)) => Ok(Some(f(&copy))),
            Some((Some(false), _)) => Ok(None),
            _ => {
                shared::bump(Place::ReadOnlyPage);
                self.with_record(rid, f)
            }
        };
        UNCHANGING_COPY.with(|c| c.set(copy));
        result
    }

    /// The moved body a stub points to; corruption if the target holds none.
    fn moved_body(&self, page: &[u8], target: RecordId) -> StorageResult<Slot> {
        match hp::slot(page, target.slot as usize)? {
            Some(s) if s.kind == SlotKind::Moved => Ok(s),
            _ => Err(StorageError::Corruption {
                page: target.page,
                reason: format!("forwarding stub points to {target}, which holds no moved body"),
            }),
        }
    }

    /// Replaces the record at `rid`. A record that no longer fits its page moves; its id stays.
    pub fn update(&self, rid: RecordId, record: &[u8]) -> StorageResult<()> {
        let max = self.max_record_len();
        if record.len() > max {
            return Err(StorageError::RecordTooLarge {
                len: record.len(),
                max,
            });
        }
        let mut g = self.heap_page_exclusive(rid.page)?;
        let slot = rid.slot as usize;
        match hp::slot(&g, slot)? {
            Some(s) if s.kind == SlotKind::Live => {
                if hp::replace(&mut g, slot, s, record, SlotKind::Live)? {
                    self.note_free(&g);
                    return Ok(());
                }
                drop(g);
                let body = self.place(record, SlotKind::Moved, |_| {})?;
                // The body is placed: the stub must follow, even on a thread that refuses
                // reads (two-stage execution).
                crate::buffer::stage::allow_reads(|| {
                    let mut g = self.heap_page_exclusive(rid.page)?;
                    let s = self.live_slot(&g, rid, SlotKind::Live)?;
                    let stub = body.to_u64().to_le_bytes();
                    let stubbed = hp::replace(&mut g, slot, s, &stub, SlotKind::Forward)?;
                    debug_assert!(stubbed, "a stub fits in any allocation");
                    self.note_free(&g);
                    Ok(())
                })
            }
            Some(s) if s.kind == SlotKind::Forward => {
                let old = RecordId::from_u64(hp::stub_target(&g, s));
                drop(g);
                let mut tg = self.heap_page_exclusive(old.page)?;
                let body = self.moved_body(&tg, old)?;
                if hp::replace(&mut tg, old.slot as usize, body, record, SlotKind::Moved)? {
                    self.note_free(&tg);
                    return Ok(());
                }
                drop(tg);
                let new = self.place(record, SlotKind::Moved, |_| {})?;
                crate::buffer::stage::allow_reads(|| {
                    let mut g = self.heap_page_exclusive(rid.page)?;
                    let s = self.live_slot(&g, rid, SlotKind::Forward)?;
                    hp::replace(
                        &mut g,
                        slot,
                        s,
                        &new.to_u64().to_le_bytes(),
                        SlotKind::Forward,
                    )?;
                    drop(g);
                    self.free_slot(old, SlotKind::Moved)
                })
            }
            _ => Err(StorageError::NoSuchRecord(rid.to_string())),
        }
    }

    /// Slot `rid` re-read after the page was released: it must still be of `kind` (the
    /// caller's record lock guarantees it; anything else is a broken contract).
    fn live_slot(&self, page: &[u8], rid: RecordId, kind: SlotKind) -> StorageResult<Slot> {
        match hp::slot(page, rid.slot as usize)? {
            Some(s) if s.kind == kind => Ok(s),
            _ => Err(StorageError::NoSuchRecord(format!(
                "{rid} changed during an update (concurrent writers of one record)"
            ))),
        }
    }

    fn free_slot(&self, rid: RecordId, kind: SlotKind) -> StorageResult<()> {
        let mut g = self.heap_page_exclusive(rid.page)?;
        let s = self.live_slot(&g, rid, kind)?;
        hp::remove(&mut g, rid.slot as usize, s);
        self.note_free(&g);
        Ok(())
    }

    /// Overwrites `bytes.len()` bytes of the record at `offset` (a fixed-layout column
    /// update); only that range is changed, so only it is logged.
    pub fn update_in_place(&self, rid: RecordId, offset: usize, bytes: &[u8]) -> StorageResult<()> {
        self.update_pieces(rid, &[(offset, bytes)])
    }

    /// Overwrites several byte ranges of the record at `rid` under one page latch: one redo
    /// record carries exactly those ranges (columns far apart in a record are not logged with
    /// everything between them). Every piece is checked before any is written.
    pub fn update_pieces(&self, rid: RecordId, pieces: &[(usize, &[u8])]) -> StorageResult<()> {
        match self.fix_record(rid)? {
            Some(mut record) => record.write_pieces(pieces),
            None => Err(StorageError::NoSuchRecord(rid.to_string())),
        }
    }

    /// The record at `rid` latched exclusively for a read-modify-write: its bytes can be read
    /// and then written ([`RecordWriteGuard::write_pieces`]) under one latch of its page (of
    /// the page holding its body, for a record moved behind a forwarding stub). `None` if
    /// there is no record. The changes are logged as the guard goes, as any page write's.
    pub fn fix_record(&self, rid: RecordId) -> StorageResult<Option<RecordWriteGuard<'_>>> {
        let g = self.heap_page_exclusive(rid.page)?;
        let (page, s) = match hp::slot(&g, rid.slot as usize)? {
            Some(s) if s.kind == SlotKind::Live => (g, s),
            Some(s) if s.kind == SlotKind::Forward => {
                let target = RecordId::from_u64(hp::stub_target(&g, s));
                drop(g);
                let g = self.heap_page_exclusive(target.page)?;
                let body = self.moved_body(&g, target)?;
                (g, body)
            }
            _ => return Ok(None),
        };
        Ok(Some(RecordWriteGuard { page, slot: s, rid }))
    }

    /// Deletes the record at `rid`; false if there was none.
    pub fn delete(&self, rid: RecordId) -> StorageResult<bool> {
        let mut g = self.heap_page_exclusive(rid.page)?;
        let slot = rid.slot as usize;
        match hp::slot(&g, slot)? {
            Some(s) if s.kind == SlotKind::Live => {
                hp::remove(&mut g, slot, s);
                self.note_free(&g);
                Ok(true)
            }
            Some(s) if s.kind == SlotKind::Forward => {
                let target = RecordId::from_u64(hp::stub_target(&g, s));
                hp::remove(&mut g, slot, s);
                self.note_free(&g);
                drop(g);
                self.free_slot(target, SlotKind::Moved)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Re-creates a record at exactly `rid` (undo of a delete; recovery). Fails if the slot
    /// holds a record. If the page has no room for the record, it goes elsewhere behind a
    /// forwarding stub.
    pub fn restore(&self, rid: RecordId, record: &[u8]) -> StorageResult<()> {
        let max = self.max_record_len();
        if record.len() > max {
            return Err(StorageError::RecordTooLarge {
                len: record.len(),
                max,
            });
        }
        let slot = rid.slot as usize;
        let mut g = self.heap_page_exclusive(rid.page)?;
        if hp::slot(&g, slot)?.is_some() {
            return Err(StorageError::Invalid(format!("slot {rid} holds a record")));
        }
        if hp::put(&mut g, slot, record, SlotKind::Live)? {
            self.note_free(&g);
            return Ok(());
        }
        drop(g);
        let body = self.place(record, SlotKind::Moved, |_| {})?;
        let mut g = self.heap_page_exclusive(rid.page)?;
        if hp::slot(&g, slot)?.is_none()
            && hp::put(
                &mut g,
                slot,
                &body.to_u64().to_le_bytes(),
                SlotKind::Forward,
            )?
        {
            self.note_free(&g);
            return Ok(());
        }
        drop(g);
        self.free_slot(body, SlotKind::Moved)?;
        Err(StorageError::Invalid(format!(
            "no room on page {} to restore {rid}",
            rid.page
        )))
    }

    /// Calls `f` on every live record in chain order; stops early when `f` returns false.
    /// `f` runs under the page's shared latch and must not modify this file.
    pub fn scan(&self, mut f: impl FnMut(RecordId, &[u8]) -> bool) -> StorageResult<()> {
        let mut next = Some(self.first);
        while let Some(p) = next {
            let g = self.heap_page_shared(p)?;
            for slot in 0..hp::slot_count(&g) {
                let rid = RecordId {
                    page: p,
                    slot: slot as u16,
                };
                let go_on = match hp::slot(&g, slot)? {
                    Some(s) if s.kind == SlotKind::Live => f(rid, hp::bytes(&g, s)),
                    Some(s) if s.kind == SlotKind::Forward => {
                        let target = RecordId::from_u64(hp::stub_target(&g, s));
                        let tg = self.heap_page_shared(target.page)?;
                        let body = self.moved_body(&tg, target)?;
                        f(rid, hp::bytes(&tg, body))
                    }
                    _ => true,
                };
                if !go_on {
                    return Ok(());
                }
            }
            next = hp::next_page(&g);
        }
        Ok(())
    }

    /// Checks every page's structure, that stubs and moved bodies pair up one to one, and that
    /// the free-space map matches the pages. Meant for a quiescent file. Stops at the first
    /// fault; [`HeapFile::verify`] reports every fault of the pages.
    pub fn check_invariants(&self) -> StorageResult<()> {
        let check = self.verify();
        if let Some(fault) = check.faults.into_iter().next() {
            return Err(fault.into_error());
        }
        match self
            .free_space_faults(&check.pages, &check.free)
            .into_iter()
            .next()
        {
            Some(fault) => Err(fault.into_error()),
            None => Ok(()),
        }
    }

    /// Where the free-space map disagrees with the chain's pages and their free bytes, as
    /// [`HeapFile::verify`] found them ([`HeapCheck::pages`], [`HeapCheck::free`]; pages past
    /// the last free count are not compared): an entry that is not a page's free bytes, a
    /// page the map does not know, entries of pages not in the chain. A page claimed for a
    /// thread's inserts may say anything: its entry is refreshed when its thread moves on (0
    /// when claimed, more after a delete there). Meant for a quiescent file.
    pub fn free_space_faults(&self, pages: &[PageId], free: &[usize]) -> Vec<Fault> {
        let claimed = self.claimed_pages();
        let mut faults = Vec::new();
        let fsm = self.fsm_read();
        for (&p, &free) in pages.iter().zip(free) {
            let recorded = fsm.free.get(&p).copied();
            let detail = match recorded {
                None => format!("the free-space map does not know the page ({free} bytes free)"),
                Some(r) if r != free && !claimed.contains(&p) => {
                    format!("the free-space map says {r} bytes free, the page has {free}")
                }
                Some(_) => continue,
            };
            faults.push(Fault { page: p, detail });
        }
        let chain: HashSet<PageId> = pages.iter().copied().collect();
        let mut stray: Vec<PageId> = fsm
            .free
            .keys()
            .filter(|p| !chain.contains(p))
            .copied()
            .collect();
        stray.sort_unstable();
        faults.extend(stray.into_iter().map(|page| Fault {
            page,
            detail: "the free-space map knows the page, which is not in the chain".into(),
        }));
        let total: usize = fsm.buckets.iter().map(|b| b.len()).sum();
        if total != fsm.free.len() {
            faults.push(Fault {
                page: self.first,
                detail: format!(
                    "the free-space map's buckets hold {total} pages, its counts {}",
                    fsm.free.len()
                ),
            });
        }
        faults
    }

    /// Checks the pages of the chain and goes on past each fault: every page's header and
    /// slots (offsets and lengths inside the page, no overlapping records, the free-space
    /// counts the header keeps), every forwarding stub pointing at a moved body that exists,
    /// and every moved body claimed by exactly one stub. A page that cannot be read (checksum,
    /// header, not a heap page) ends the chain there, since its link cannot be trusted; a page
    /// met a second time (a cycle) too. Reads only the pages, not the free-space map, so it
    /// also serves a file that [`HeapFile::open`] could not open.
    pub fn verify(&self) -> HeapCheck {
        self.verify_with_progress(&mut || {})
    }

    /// [`HeapFile::verify`], calling `walked` once for each page of the chain it reaches.
    pub fn verify_with_progress(&self, walked: &mut dyn FnMut()) -> HeapCheck {
        let mut check = HeapCheck::default();
        let mut seen = HashSet::new();
        let mut stubs: Vec<(RecordId, RecordId)> = Vec::new();
        let mut bodies = HashSet::new();
        let mut next = Some(self.first);
        while let Some(p) = next {
            if !seen.insert(p) {
                check.faults.push(Fault {
                    page: p,
                    detail: "heap page chain has a cycle: the page is reached a second time".into(),
                });
                break;
            }
            check.pages.push(p);
            walked();
            let g = match self.heap_page_shared(p) {
                Ok(g) => g,
                Err(e) => {
                    check.faults.push(Fault::from_error(p, &e));
                    break;
                }
            };
            match hp::check(&g) {
                Ok(slots) => {
                    check.free.push(hp::free_space(&g));
                    for (slot, s) in slots {
                        let rid = RecordId {
                            page: p,
                            slot: slot as u16,
                        };
                        match s.kind {
                            SlotKind::Live => check.records += 1,
                            SlotKind::Forward => {
                                let target = RecordId::from_u64(hp::stub_target(&g, s));
                                stubs.push((rid, target));
                            }
                            SlotKind::Moved => {
                                bodies.insert(rid);
                            }
                        }
                    }
                }
                Err(e) => check.faults.push(Fault::from_error(p, &e)),
            }
            next = hp::next_page(&g);
        }
        let mut claimed = HashSet::new();
        for (stub, target) in stubs {
            check.records += 1;
            let problem = if !bodies.contains(&target) {
                "which holds no moved body of this file"
            } else if !claimed.insert(target) {
                "as another stub does"
            } else {
                continue;
            };
            check.faults.push(Fault {
                page: stub.page,
                detail: format!(
                    "slot {}: forwarding stub points at {target}, {problem}",
                    stub.slot
                ),
            });
        }
        let mut orphans: Vec<&RecordId> = bodies.difference(&claimed).collect();
        orphans.sort_by_key(|rid| rid.to_u64());
        for body in orphans {
            check.faults.push(Fault {
                page: body.page,
                detail: format!(
                    "slot {}: moved body no forwarding stub points at",
                    body.slot
                ),
            });
        }
        check
    }
}

/// What [`HeapFile::verify`] found.
#[derive(Clone, Debug, Default)]
pub struct HeapCheck {
    /// The pages of the chain, in chain order, up to the first that could not be read.
    pub pages: Vec<PageId>,
    /// The free bytes of each page of `pages` whose structure passed, in the same order: all
    /// of them where there is no fault.
    pub free: Vec<usize>,
    /// Records: live slots and forwarding stubs (a moved record counts once, at its home).
    pub records: usize,
    /// Every fault, in the order the walk met them.
    pub faults: Vec<Fault>,
}

/// A record latched exclusively for a read-modify-write ([`HeapFile::fix_record`]).
pub struct RecordWriteGuard<'a> {
    page: PageWriteGuard<'a>,
    slot: Slot,
    rid: RecordId,
}

impl RecordWriteGuard<'_> {
    /// The record's bytes as they are now.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        hp::bytes(&self.page, self.slot)
    }

    /// Overwrites byte ranges of the record, `(offset in the record, bytes)` each. Every piece
    /// is checked before any is written: one outside the record is an error and writes
    /// nothing.
    pub fn write_pieces(&mut self, pieces: &[(usize, &[u8])]) -> StorageResult<()> {
        let len = self.slot.len;
        for (offset, bytes) in pieces {
            if offset.checked_add(bytes.len()).is_none_or(|end| end > len) {
                return Err(StorageError::Invalid(format!(
                    "bytes {offset}+{} outside record {} of {len} bytes",
                    bytes.len(),
                    self.rid
                )));
            }
        }
        for (offset, bytes) in pieces {
            self.page
                .range_mut(self.slot.offset + offset, bytes.len())
                .copy_from_slice(bytes);
        }
        Ok(())
    }
}
