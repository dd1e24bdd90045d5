//! The main-memory record store of the ladder's `page-access=off` rung (the 2008 paper, §4.3
//! "Remove buffer manager calls"): each record is its own heap allocation, reached by its
//! address. No page table, no frames, no fix or unfix on the path to a record's bytes.
//!
//! A record's block:
//!
//! | offset | size | field    | meaning                                                    |
//! |-------:|-----:|----------|------------------------------------------------------------|
//! | 0      | 4    | len      | record bytes; fixed at insert                              |
//! | 4      | 4    | tag      | bits 8–31: id of the owning [`MemStore`] (catches foreign  |
//! |        |      |          | pointers); bits 4–7: its registry shard; bits 0–3: state,  |
//! |        |      |          | 1 live, 2 retired                                          |
//! | 8      | len  | bytes    | the record                                                 |
//!
//! `len` and the tag's store and shard never change after insert; the state changes only under
//! the latch of the record's shard (the tag is read and written atomically, since a delete
//! reads the store and shard before it takes that latch). The record bytes belong to whoever
//! the engine's record locks admit. The header is 8 bytes so that a small row carries little
//! beside it: a TPC-C order line's block is 112 bytes, a 24-byte header made it 128, and a
//! stripped New-Order's inserts are most of the memory the run grows into (each new page a
//! page fault).
//!
//! **Lifetime rule.** The engine keeps a record's address in its indexes, so another thread may
//! still hold a pointer to a record another thread has just deleted (it found it in an index
//! before the delete). Deleting therefore only *retires* a record: it leaves the live list but
//! its memory stays valid until [`MemStore::reclaim`], which takes `&mut self` and so runs only
//! when no thread can be inside the store (a quiescent point), or until the store is dropped.
//!
//! **Allocation.** Blocks are carved from per-shard chunks by bumping a pointer (chunks start at
//! 4 KiB and double up to 256 KiB), so an insert costs a few instructions instead of a
//! general-purpose `malloc`, and records inserted one after another lie side by side. Reclaimed
//! blocks go to a per-size free list and are reused by later inserts of the same size (a
//! table's records all have one size); chunks are freed when the store is dropped.
//!
//! The registry (per shard, a count of live blocks and a list of retired ones) serves `len`
//! and `reclaim`; the state in the tag catches a second delete. An insert costs a count under a
//! shard latch, and reads and writes nothing.

use std::alloc::{alloc, dealloc, Layout};
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{StorageError, StorageResult};
use crate::latch::Latch;

const OFFSET_LEN: usize = 0;
const OFFSET_TAG: usize = 4;
/// Bytes before the record in its block.
const BLOCK_HEADER_SIZE: usize = 8;
const BLOCK_ALIGN: usize = 8;
const STATE_LIVE: u32 = 1;
const STATE_RETIRED: u32 = 2;
/// The tag's state bits, where its shard sits, and where its store id starts.
const TAG_STATE_MASK: u32 = 0xf;
const TAG_SHARD_SHIFT: u32 = 4;
const TAG_SHARD_MASK: u32 = 0xf;
const TAG_STORE_SHIFT: u32 = 8;
/// Store ids are the low 24 bits of a counter: stores made 2^24 apart share one, so a
/// pointer into one of them is not told from a pointer into the other (the check is a guard
/// against mistakes, not part of the safety contract).
const STORE_ID_MASK: u32 = (1 << (32 - TAG_STORE_SHIFT)) - 1;

const _: () = assert!(OFFSET_TAG + 4 == BLOCK_HEADER_SIZE);
const _: () = assert!(SHARDS_LATCHED <= TAG_SHARD_MASK as usize + 1);
const _: () = assert!(TAG_SHARD_MASK << TAG_SHARD_SHIFT >> TAG_STORE_SHIFT == 0);

/// The most bytes of a block [`MemStore::prefetch`] loads: eight cache lines, which hold most
/// rows whole; a procedure rarely reads every column of a wider one. (Loading 40, 232 or 488
/// record bytes of a TPC-C row: 40 was clearly slower, the other two alike.)
const PREFETCH_BLOCK_BYTES: usize = 512;

/// Registry shards when latching is on.
const SHARDS_LATCHED: usize = 16;

/// Address of a record in a [`MemStore`]; stored in indexes as its `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordPtr(pub u64);

impl RecordPtr {
    #[inline]
    fn addr(self) -> *mut u8 {
        self.0 as usize as *mut u8
    }
}

/// Bytes of a shard's first chunk; each further chunk doubles, up to [`CHUNK_MAX_BYTES`].
const CHUNK_MIN_BYTES: usize = 4 << 10;
const CHUNK_MAX_BYTES: usize = 256 << 10;

/// The blocks one shard knows about, and the memory it carves them from.
#[derive(Default)]
struct Shard {
    /// Live blocks carved by this shard.
    live: usize,
    /// Addresses of deleted blocks, put on `free` by `reclaim`.
    retired: Vec<usize>,
    /// Every chunk allocated (address, layout), freed on drop.
    chunks: Vec<(usize, Layout)>,
    /// The unused tail of the newest chunk: `bump..end`.
    bump: usize,
    end: usize,
    /// Reclaimed blocks by block size, for reuse.
    free: Vec<(usize, Vec<usize>)>,
}

impl Shard {
    /// A block of `size` bytes (a multiple of [`BLOCK_ALIGN`]), 8-byte aligned: a reclaimed
    /// block of that size, or the next bytes of the newest chunk (a new chunk when it is full).
    fn allocate(&mut self, size: usize) -> *mut u8 {
        if let Some(block) = self
            .free
            .iter_mut()
            .find(|(s, _)| *s == size)
            .and_then(|(_, list)| list.pop())
        {
            return block as *mut u8;
        }
        if self.end - self.bump < size {
            let grown = self.chunks.last().map_or(CHUNK_MIN_BYTES, |(_, l)| {
                (l.size() * 2).min(CHUNK_MAX_BYTES)
            });
            let layout = Layout::from_size_align(grown.max(size), BLOCK_ALIGN)
                .expect("chunk size fits a layout");
            // SAFETY: the layout has a non-zero size.
            let chunk = unsafe { alloc(layout) };
            if chunk.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            self.chunks.push((chunk as usize, layout));
            self.bump = chunk as usize;
            self.end = chunk as usize + layout.size();
        }
        let block = self.bump;
        self.bump += size;
        block as *mut u8
    }
}

static NEXT_STORE_ID: AtomicU32 = AtomicU32::new(1);
/// This thread's shard hint: threads spread over the shards round robin.
fn thread_shard() -> usize {
    crate::shard::thread_index()
}

/// Bytes of the block holding a record of `len` bytes (header included, rounded up to the
/// alignment, so the next block carved after it is aligned too).
fn block_size(len: usize) -> usize {
    (BLOCK_HEADER_SIZE + len).next_multiple_of(BLOCK_ALIGN)
}

/// The tag word of the block at `block` (see the module documentation).
///
/// # Safety
/// `block` is a block of a [`MemStore`] that is still alive.
#[inline]
unsafe fn tag(block: *mut u8) -> &'static AtomicU32 {
    // SAFETY: the block is valid (the caller's contract) and 8-aligned, so its tag word is
    // 4-aligned; it is only ever accessed through this atomic once the block is published.
    unsafe { AtomicU32::from_ptr(block.add(OFFSET_TAG).cast::<u32>()) }
}

/// Heap-allocated records reached by address.
pub struct MemStore {
    /// The store id, already shifted into place in a tag.
    id: u32,
    /// Each latch protects its shard's count and list and the state of the blocks it carved.
    shards: Box<[Latch<Shard>]>,
}

impl Default for MemStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemStore {
    /// A store for many threads.
    pub fn new() -> Self {
        Self::with_latching(true)
    }

    /// A store; with `latching` off it has one registry shard and no latch work (one thread).
    pub fn with_latching(latching: bool) -> Self {
        let shards = if latching { SHARDS_LATCHED } else { 1 };
        MemStore {
            id: (NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed) & STORE_ID_MASK) << TAG_STORE_SHIFT,
            shards: (0..shards)
                .map(|_| Latch::new(Shard::default(), latching))
                .collect(),
        }
    }

    /// Copies `bytes` into a new record and returns its address.
    ///
    /// Fails with [`StorageError::RecordTooLarge`] beyond `u32::MAX` bytes.
    pub fn insert(&self, bytes: &[u8]) -> StorageResult<RecordPtr> {
        let len = u32::try_from(bytes.len()).map_err(|_| StorageError::RecordTooLarge {
            len: bytes.len(),
            max: u32::MAX as usize,
        })?;
        let shard_index = thread_shard() % self.shards.len();
        let mut shard = self.shards[shard_index].write();
        let block = shard.allocate(block_size(bytes.len()));
        // SAFETY: `block` is BLOCK_HEADER_SIZE + len bytes (at least) that no one else uses,
        // aligned to 8; every write below stays inside it and no other thread knows the address
        // yet.
        unsafe {
            block.add(OFFSET_LEN).cast::<u32>().write(len);
            block
                .add(OFFSET_TAG)
                .cast::<u32>()
                .write(self.id | (shard_index as u32) << TAG_SHARD_SHIFT | STATE_LIVE);
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                block.add(BLOCK_HEADER_SIZE),
                bytes.len(),
            );
        }
        shard.live += 1;
        Ok(RecordPtr(block as usize as u64))
    }

    /// Calls `f` with the record's bytes.
    ///
    /// # Safety
    /// `ptr` came from [`MemStore::insert`] on this store, and `reclaim` has not run since it
    /// was deleted (a retired record still reads its last bytes). No other thread writes the
    /// record meanwhile (the engine's record locks guarantee this).
    #[inline]
    pub unsafe fn read<R>(&self, ptr: RecordPtr, f: impl FnOnce(&[u8]) -> R) -> R {
        let block = ptr.addr();
        // SAFETY: by the contract, `block` is a live or retired block of this store: its
        // immutable `len` field and its `len` record bytes are valid, and nobody writes them.
        let bytes = unsafe {
            let len = block.add(OFFSET_LEN).cast::<u32>().read() as usize;
            std::slice::from_raw_parts(block.add(BLOCK_HEADER_SIZE), len)
        };
        f(bytes)
    }

    /// Starts loading the block at `ptr` (its header and a record of `len` bytes) into the
    /// cache, at most [`PREFETCH_BLOCK_BYTES`] of it: a hint (see [`crate::prefetch`]). Safe
    /// whatever `ptr` is, since a prefetch reads nothing and never faults.
    #[inline]
    pub fn prefetch(&self, ptr: RecordPtr, len: usize) {
        crate::counters::bump_prefetch();
        crate::prefetch::range(
            ptr.addr(),
            (BLOCK_HEADER_SIZE + len).min(PREFETCH_BLOCK_BYTES),
        );
    }

    /// Starts loading the block's header line and, of the record at `ptr`, the lines holding
    /// the byte ranges `ranges` (offsets into the record; each range's first and last line,
    /// which for a column narrower than a line are all of its lines). A hint, like
    /// [`MemStore::prefetch`], for a reader that will touch only these bytes.
    #[inline]
    pub fn prefetch_ranges(&self, ptr: RecordPtr, ranges: impl Iterator<Item = Range<usize>>) {
        crate::counters::bump_prefetch();
        let block = ptr.addr().cast_const();
        crate::prefetch::line(block);
        for r in ranges {
            let last = r.end.max(r.start + 1) - 1;
            crate::prefetch::line(block.wrapping_add(BLOCK_HEADER_SIZE + r.start));
            crate::prefetch::line(block.wrapping_add(BLOCK_HEADER_SIZE + last));
        }
    }

    /// The record's length in bytes.
    ///
    /// # Safety
    /// As for [`MemStore::read`].
    #[inline]
    pub unsafe fn record_len(&self, ptr: RecordPtr) -> usize {
        // SAFETY: `len` is immutable and the block valid (the caller's contract).
        unsafe { ptr.addr().add(OFFSET_LEN).cast::<u32>().read() as usize }
    }

    /// Overwrites `bytes.len()` bytes of the record at `offset`, in place.
    ///
    /// Fails with [`StorageError::Invalid`] if the range passes the record's end.
    ///
    /// # Safety
    /// As for [`MemStore::read`], and no other thread reads or writes the record meanwhile.
    #[inline]
    pub unsafe fn write(&self, ptr: RecordPtr, offset: usize, bytes: &[u8]) -> StorageResult<()> {
        // SAFETY: the caller's contract.
        let len = unsafe { self.record_len(ptr) };
        if !matches!(offset.checked_add(bytes.len()), Some(end) if end <= len) {
            return Err(StorageError::Invalid(format!(
                "write of {} bytes at {offset} past a record of {len} bytes",
                bytes.len()
            )));
        }
        // SAFETY: the range is inside the record, and the caller has it exclusively.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                ptr.addr().add(BLOCK_HEADER_SIZE + offset),
                bytes.len(),
            );
        }
        Ok(())
    }

    /// Overwrites 8-byte words of the record in place, each `(offset, bytes)` in order, then
    /// `head` (if not empty) at offset 0: [`MemStore::write`] of each, with one bounds check.
    ///
    /// Fails with [`StorageError::Invalid`], writing nothing, if a word or `head` passes the
    /// record's end.
    ///
    /// # Safety
    /// As for [`MemStore::write`].
    #[inline]
    pub unsafe fn write_words(
        &self,
        ptr: RecordPtr,
        words: &[(usize, [u8; 8])],
        head: &[u8],
    ) -> StorageResult<()> {
        // SAFETY: the caller's contract.
        let len = unsafe { self.record_len(ptr) };
        let end = words
            .iter()
            .map(|(at, _)| at.saturating_add(8))
            .max()
            .unwrap_or(0);
        if end > len || head.len() > len {
            return Err(StorageError::Invalid(format!(
                "write of words up to byte {} past a record of {len} bytes",
                end.max(head.len())
            )));
        }
        let record = ptr.addr().wrapping_add(BLOCK_HEADER_SIZE);
        // SAFETY: every range is inside the record (checked above), which the caller has
        // exclusively.
        unsafe {
            for (at, word) in words {
                record.add(*at).cast::<[u8; 8]>().write_unaligned(*word);
            }
            std::ptr::copy_nonoverlapping(head.as_ptr(), record, head.len());
        }
        Ok(())
    }

    /// Deletes the record: it leaves the live set, and its memory is freed by the next
    /// [`MemStore::reclaim`] (or drop). [`StorageError::NoSuchRecord`] if it is already deleted
    /// or belongs to another store.
    ///
    /// # Safety
    /// `ptr` came from [`MemStore::insert`] on this store (or one still alive) and `reclaim`
    /// has not run since it was deleted.
    pub unsafe fn delete(&self, ptr: RecordPtr) -> StorageResult<()> {
        let block = ptr.addr();
        // SAFETY: the block is valid by the contract.
        let tag = unsafe { tag(block) };
        let word = tag.load(Ordering::Relaxed);
        if word >> TAG_STORE_SHIFT << TAG_STORE_SHIFT != self.id {
            return Err(StorageError::NoSuchRecord(format!(
                "{ptr:?} (another store)"
            )));
        }
        // The shard is written only at insert, before the address was published.
        let shard_index = ((word >> TAG_SHARD_SHIFT) & TAG_SHARD_MASK) as usize;
        let Some(latch) = self.shards.get(shard_index) else {
            return Err(StorageError::NoSuchRecord(format!("{ptr:?} (bad shard)")));
        };
        let mut shard = latch.write();
        // The state changes only under this shard's latch, which we hold.
        let word = tag.load(Ordering::Relaxed);
        if word & TAG_STATE_MASK != STATE_LIVE {
            return Err(StorageError::NoSuchRecord(format!("{ptr:?} (deleted)")));
        }
        tag.store(word & !TAG_STATE_MASK | STATE_RETIRED, Ordering::Relaxed);
        shard.live -= 1;
        shard.retired.push(block as usize);
        Ok(())
    }

    /// Live records.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().live).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Deleted records whose memory is not yet freed.
    pub fn retired_len(&self) -> usize {
        self.shards.iter().map(|s| s.read().retired.len()).sum()
    }

    /// Makes the memory of every deleted record reusable by later inserts. Needs `&mut self`:
    /// no thread can be reading a retired record now. Pointers to those records must not be
    /// used afterwards.
    pub fn reclaim(&mut self) -> usize {
        let mut freed = 0;
        for shard in self.shards.iter_mut() {
            let shard = shard.get_mut();
            for block in std::mem::take(&mut shard.retired) {
                // SAFETY: retired blocks were carved by `insert` and their `len` is immutable.
                let len = unsafe { (block as *const u8).add(OFFSET_LEN).cast::<u32>().read() };
                let size = block_size(len as usize);
                match shard.free.iter_mut().find(|(s, _)| *s == size) {
                    Some((_, list)) => list.push(block),
                    None => shard.free.push((size, vec![block])),
                }
                freed += 1;
            }
        }
        freed
    }
}

impl Drop for MemStore {
    fn drop(&mut self) {
        for shard in self.shards.iter_mut() {
            for (chunk, layout) in shard.get_mut().chunks.drain(..) {
                // SAFETY: each chunk was allocated by `Shard::allocate` with this layout and is
                // listed once; no record of this store can be used after the drop.
                unsafe { dealloc(chunk as *mut u8, layout) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_update_in_place() {
        let store = MemStore::new();
        let a = store.insert(b"hello world").unwrap();
        let b = store.insert(b"").unwrap();
        // SAFETY: pointers from this store, single thread.
        unsafe {
            store.write(a, 6, b"WORLD").unwrap();
            assert_eq!(store.read(a, |r| r.to_vec()), b"hello WORLD");
            assert_eq!(store.read(b, |r| r.len()), 0);
            assert!(store.write(a, 8, b"long").is_err());
            assert!(store.write(a, usize::MAX, b"x").is_err());
        }
        assert_eq!(store.len(), 2);
    }

    /// A prefetch is only a hint: ranges past the record (or empty, or backwards) load
    /// nothing that matters and change nothing.
    #[test]
    fn prefetching_any_ranges_of_a_record_changes_nothing() {
        let store = MemStore::new();
        let a = store.insert(b"0123456789").unwrap();
        let backwards = Range { start: 9, end: 2 };
        store.prefetch_ranges(a, [0..10, 4..4, backwards, 1 << 20..1 << 21].into_iter());
        store.prefetch_ranges(a, std::iter::empty());
        // SAFETY: a pointer from this store, single thread.
        assert_eq!(unsafe { store.read(a, |r| r.to_vec()) }, b"0123456789");
    }

    #[test]
    fn words_are_written_in_order_and_out_of_bounds_writes_nothing() {
        let store = MemStore::new();
        let a = store.insert(&[0u8; 20]).unwrap();
        // SAFETY: a pointer from this store, single thread.
        unsafe {
            store
                .write_words(
                    a,
                    &[(4, *b"abcdefgh"), (12, *b"ijklmnop"), (4, *b"ABCDEFGH")],
                    b"xy",
                )
                .unwrap();
            assert_eq!(store.read(a, |r| r.to_vec()), b"xy\0\0ABCDEFGHijklmnop");
            for (words, head) in [
                (&[(4, [1u8; 8]), (13, [2u8; 8])][..], &b""[..]),
                (&[(usize::MAX, [1u8; 8])][..], &b""[..]),
                (&[][..], &[3u8; 21][..]),
            ] {
                assert!(store.write_words(a, words, head).is_err());
                assert_eq!(store.read(a, |r| r.to_vec()), b"xy\0\0ABCDEFGHijklmnop");
            }
        }
    }

    #[test]
    fn delete_retires_until_reclaim() {
        let mut store = MemStore::with_latching(false);
        let ptrs: Vec<RecordPtr> = (0..10u8).map(|i| store.insert(&[i; 3]).unwrap()).collect();
        // SAFETY: pointers from this store, not reclaimed while used.
        unsafe {
            store.delete(ptrs[3]).unwrap();
            store.delete(ptrs[0]).unwrap();
            assert!(matches!(
                store.delete(ptrs[3]),
                Err(StorageError::NoSuchRecord(_))
            ));
            // A retired record can still be read by a thread that found it earlier.
            assert_eq!(store.read(ptrs[3], |r| r.to_vec()), vec![3; 3]);
            for (i, &p) in ptrs.iter().enumerate().skip(4) {
                assert_eq!(store.read(p, |r| r[0]), i as u8);
            }
        }
        assert_eq!((store.len(), store.retired_len()), (8, 2));
        assert_eq!(store.reclaim(), 2);
        assert_eq!(store.retired_len(), 0);
        // Every live record deletes once.
        for &p in ptrs.iter().filter(|&&p| p != ptrs[3] && p != ptrs[0]) {
            // SAFETY: live records of this store.
            unsafe { store.delete(p).unwrap() };
        }
        assert!(store.is_empty());
    }

    #[test]
    fn reclaimed_blocks_are_reused_and_chunks_hold_many_records() {
        let mut store = MemStore::with_latching(false);
        let ptrs: Vec<RecordPtr> = (0..2000u32)
            .map(|i| store.insert(&i.to_le_bytes()).unwrap())
            .collect();
        // Records inserted in a row are carved side by side.
        assert_eq!(ptrs[1].0 - ptrs[0].0, block_size(4) as u64);
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: live records of this store.
            assert_eq!(
                unsafe { store.read(p, |r| r.to_vec()) },
                (i as u32).to_le_bytes()
            );
        }
        // SAFETY: live records of this store, deleted once.
        unsafe {
            store.delete(ptrs[10]).unwrap();
            store.delete(ptrs[20]).unwrap();
        }
        assert_eq!(store.reclaim(), 2);
        let again = [
            store.insert(b"abcd").unwrap(),
            store.insert(b"efgh").unwrap(),
        ];
        let mut reused = again.map(|p| p.0);
        reused.sort_unstable();
        assert_eq!(reused, [ptrs[10].0, ptrs[20].0]);
        // A record of another size is carved fresh, and a record larger than a chunk works.
        let odd = store.insert(&[7; 13]).unwrap();
        assert!(!ptrs.contains(&odd));
        let big = store.insert(&vec![9; CHUNK_MAX_BYTES * 2]).unwrap();
        // SAFETY: live records of this store.
        unsafe {
            assert_eq!(store.read(again[0], |r| r.to_vec()), b"abcd");
            assert_eq!(store.read(odd, |r| r.len()), 13);
            assert_eq!(
                store.read(big, |r| (r.len(), r[0])),
                (CHUNK_MAX_BYTES * 2, 9)
            );
        }
        assert_eq!(store.len(), 2002);
    }

    #[test]
    fn foreign_pointer_is_refused() {
        let a = MemStore::new();
        let b = MemStore::new();
        let p = a.insert(b"x").unwrap();
        // SAFETY: `p` is a valid block (of `a`, which is alive).
        assert!(unsafe { b.delete(p) }.is_err());
    }
}
