//! Tables and indexes as the engine holds them: a record store (heap file on the buffer pool,
//! or the main-memory record store when `page-access` is off) and index stores (B+-tree on
//! either key path, main-memory ordered index, or hash index).
//!
//! ```text
//!   Table ── records: Heap(HeapFile) | Mem(MemStore)          location = RecordId | RecordPtr, as u64
//!     ├── primary: IndexStore  (primary key → location)
//!     └── secondaries: [Index] (index key ++ location → location, non-unique unless declared)
//! ```
//!
//! The operations the 2008 paper breaks instructions down by (Figures 5 and 6) each have one
//! non-inlined entry point here, so a callgrind profile attributes their inclusive cost:
//! B-tree lookup = [`IndexStore::get`], pin/unpin = [`Records::with`] and
//! [`Records::fix_for_update`], update record = [`RecordForUpdate::write_pieces`],
//! [`Records::write_pieces`] or [`Records::write_words`] (and `Transaction::stage_update`),
//! create record = [`Records::insert`], insert index = [`IndexStore::insert`],
//! [`IndexStore::insert_with_next`] and [`IndexStore::insert_hinted`] (begin and commit are
//! `Transaction::begin` and `Transaction::commit`).

use std::ops::Bound;
use std::sync::Arc;

use storage::btree::keys::{IntKeyOrder, SchemaKeyOrder};
use storage::btree::{BTree, InsertOutcome, LeafHint, ScanStep};
use storage::buffer::BufferPool;
use storage::hash::HashIndex;
use storage::heap::{HeapFile, RecordId, RecordWriteGuard};
use storage::memindex::MemIndex;
use storage::memstore::{MemStore, RecordPtr};
use storage::{PageId, StorageResult};

use crate::keys::KeySpec;
use crate::record::Layout;
use crate::schema::{IndexSchema, TableSchema};

/// Where a table's records live.
pub enum Records {
    Heap(HeapFile),
    Mem(MemStore),
}

/// A record fixed for a read-modify-write ([`Records::fix_for_update`]).
pub enum RecordForUpdate<'a> {
    /// Under its page's exclusive latch, the changes logged as the guard goes.
    Heap(RecordWriteGuard<'a>),
    /// Reached by pointer; the caller's exclusive lock keeps other writers off.
    Mem(&'a MemStore, RecordPtr),
}

impl RecordForUpdate<'_> {
    /// Calls `f` with the record's bytes as they are now.
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            RecordForUpdate::Heap(g) => f(g.bytes()),
            // SAFETY: the pointer is the `loc` given to `Records::fix_for_update`, which came
            // from this store's insert (through an index); the caller holds the record's
            // exclusive lock, and the store never frees a deleted record while the database
            // is open.
            RecordForUpdate::Mem(m, p) => unsafe { m.read(*p, f) },
        }
    }

    /// Overwrites byte ranges of the record, `(offset, bytes)` each (see
    /// [`Records::write_pieces`]), and lets the record go: on the heap the page's latch is
    /// released and its redo record logged here. The "update record" entry point of an
    /// update, as `write_pieces` is of a write without a read.
    #[inline(never)]
    pub fn write_pieces(self, pieces: &[(usize, &[u8])]) -> StorageResult<()> {
        match self {
            RecordForUpdate::Heap(mut g) => g.write_pieces(pieces),
            RecordForUpdate::Mem(m, p) => pieces.iter().try_for_each(|(offset, bytes)| {
                // SAFETY: as for `read`.
                unsafe { m.write(p, *offset, bytes) }
            }),
        }
    }
}

impl Records {
    /// Calls `f` with the record at `loc`; `None` if there is none.
    #[inline(never)]
    pub fn with<R>(&self, loc: u64, f: impl FnOnce(&[u8]) -> R) -> StorageResult<Option<R>> {
        crate::profile::record_access(|| {
            match self {
                Records::Heap(h) => h.with_record(RecordId::from_u64(loc), f),
                // SAFETY: `loc` came from this store's insert (through an index), and the
                // transaction holds the record's lock, so no other thread writes it meanwhile;
                // the store never frees a deleted record while the database is open.
                Records::Mem(m) => Ok(Some(unsafe { m.read(RecordPtr(loc), f) })),
            }
        })
    }

    /// [`Records::with`] for a record of a read-only table, which nothing writes while the
    /// table stays read-only (see `HeapFile::with_unchanging_record`).
    #[inline(never)]
    pub fn with_unchanging<R>(
        &self,
        loc: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> StorageResult<Option<R>> {
        match self {
            Records::Heap(h) => crate::profile::record_access(|| {
                h.with_unchanging_record(RecordId::from_u64(loc), f)
            }),
            Records::Mem(_) => self.with(loc, f),
        }
    }

    /// The record at `loc` fixed for a read-modify-write: read, then written, under one
    /// exclusive latch of its page; `None` if there is none. The caller holds the record's
    /// exclusive lock (on the main-memory store that alone keeps other writers off).
    #[inline(never)]
    pub fn fix_for_update(&self, loc: u64) -> StorageResult<Option<RecordForUpdate<'_>>> {
        crate::profile::record_access(|| match self {
            Records::Heap(h) => Ok(h
                .fix_record(RecordId::from_u64(loc))?
                .map(RecordForUpdate::Heap)),
            Records::Mem(m) => Ok(Some(RecordForUpdate::Mem(m, RecordPtr(loc)))),
        })
    }

    /// Overwrites several byte ranges of the record at `loc` at once (one page latch, one redo
    /// record on the heap).
    #[inline(never)]
    pub fn write_pieces(&self, loc: u64, pieces: &[(usize, &[u8])]) -> StorageResult<()> {
        crate::profile::record_access(|| match self {
            Records::Heap(h) => h.update_pieces(RecordId::from_u64(loc), pieces),
            Records::Mem(m) => pieces.iter().try_for_each(|(offset, bytes)| {
                // SAFETY: as for `with`; the transaction holds the record's exclusive lock.
                unsafe { m.write(RecordPtr(loc), *offset, bytes) }
            }),
        })
    }

    /// Writes 8-byte words into the record at `loc` in place, in order, each `(offset, bytes)`,
    /// and then `bitmap` (if not empty) over its null bitmap at offset 0: a main-memory update
    /// that is not logged (see `Transaction::update_row`), so only the main-memory store takes
    /// it; a heap file's records change under the log through [`Records::write_pieces`]. The
    /// "update record" entry point of such an update, as `write_pieces` is of the others.
    #[inline(never)]
    pub fn write_words(
        &self,
        loc: u64,
        words: &[(usize, [u8; 8])],
        bitmap: &[u8],
    ) -> StorageResult<()> {
        crate::profile::record_access(|| match self {
            Records::Heap(_) => Err(storage::StorageError::Invalid(
                "an update in place of words needs the main-memory record store".into(),
            )),
            // SAFETY: as for `write_pieces`.
            Records::Mem(m) => unsafe { m.write_words(RecordPtr(loc), words, bitmap) },
        })
    }

    /// Whether records live in the main-memory store (reached by pointer, written in place).
    #[inline]
    pub fn is_mem(&self) -> bool {
        matches!(self, Records::Mem(_))
    }

    /// Inserts a record; `before_write(loc)` runs before any page changes (undo logging).
    #[inline(never)]
    pub fn insert(&self, rec: &[u8], before_write: impl FnOnce(u64)) -> StorageResult<u64> {
        crate::profile::record_access(|| match self {
            Records::Heap(h) => Ok(h
                .insert_with(rec, |rid| before_write(rid.to_u64()))?
                .to_u64()),
            Records::Mem(m) => {
                let p = m.insert(rec)?;
                before_write(p.0);
                Ok(p.0)
            }
        })
    }

    /// Starts loading the record at `loc`, of `len` bytes, into the cache (its first eight
    /// lines at most, see `MemStore::prefetch`): a hint, for main-memory records only. A stale
    /// `loc` is harmless.
    #[inline]
    pub fn prefetch(&self, loc: u64, len: usize) {
        if let Records::Mem(m) = self {
            m.prefetch(RecordPtr(loc), len);
        }
    }

    /// [`Records::prefetch`] of only the lines holding `columns` of `layout` (and the
    /// record's first line).
    #[inline]
    pub fn prefetch_columns(&self, loc: u64, layout: &Layout, columns: &[usize]) {
        if let Records::Mem(m) = self {
            m.prefetch_ranges(
                RecordPtr(loc),
                columns
                    .iter()
                    .filter(|&&c| c < layout.columns())
                    .map(|&c| layout.column_range(c)),
            );
        }
    }

    pub fn delete(&self, loc: u64) -> StorageResult<bool> {
        crate::profile::record_access(|| {
            match self {
                Records::Heap(h) => h.delete(RecordId::from_u64(loc)),
                Records::Mem(m) => {
                    // SAFETY: as for `write_pieces`.
                    unsafe { m.delete(RecordPtr(loc))? };
                    Ok(true)
                }
            }
        })
    }

    /// Re-creates a deleted record at `loc` (undo of a delete). Main-memory records cannot be
    /// re-created at the same address: a new one is allocated and its location returned.
    pub fn restore(&self, loc: u64, rec: &[u8]) -> StorageResult<u64> {
        match self {
            Records::Heap(h) => {
                h.restore(RecordId::from_u64(loc), rec)?;
                Ok(loc)
            }
            Records::Mem(m) => Ok(m.insert(rec)?.0),
        }
    }

    /// The heap's first page, recorded in the catalog.
    pub fn first_page(&self) -> Option<PageId> {
        match self {
            Records::Heap(h) => Some(h.first_page()),
            Records::Mem(_) => None,
        }
    }
}

/// An index's storage, on whichever path the configuration chose.
pub enum IndexStore {
    /// B+-tree with the generic, schema-interpreting comparator.
    Generic(BTree<SchemaKeyOrder>),
    /// B+-tree with hand-coded integer keys.
    Int(BTree<IntKeyOrder>),
    /// Main-memory ordered index (`page-access=off`), generic keys.
    Mem(MemIndex<SchemaKeyOrder>),
    /// Main-memory ordered index (`page-access=off`), hand-coded integer keys.
    MemInt(MemIndex<IntKeyOrder>),
    /// Main-memory hash index (point operations only).
    Hash(HashIndex),
}

impl IndexStore {
    /// Creates a new index store for `spec`; a B+-tree's pages go to emulated data device
    /// `device` (see `storage::device`).
    pub fn create(
        pool: Option<&Arc<BufferPool>>,
        spec: &KeySpec,
        unique: bool,
        hash: bool,
        latching: bool,
        device: u8,
    ) -> StorageResult<IndexStore> {
        if hash {
            return Ok(IndexStore::Hash(HashIndex::new(1024, latching)));
        }
        match pool {
            None if spec.is_packed() => Ok(IndexStore::MemInt(MemIndex::new(
                IntKeyOrder,
                unique,
                latching,
            ))),
            None => Ok(IndexStore::Mem(MemIndex::new(
                SchemaKeyOrder::new(spec.parts()),
                unique,
                latching,
            ))),
            Some(pool) if spec.is_packed() => Ok(IndexStore::Int(BTree::create_on(
                pool.clone(),
                IntKeyOrder,
                unique,
                device,
            )?)),
            Some(pool) => Ok(IndexStore::Generic(BTree::create_on(
                pool.clone(),
                SchemaKeyOrder::new(spec.parts()),
                unique,
                device,
            )?)),
        }
    }

    /// Opens an existing B+-tree index, allocating its new pages on emulated data device
    /// `device`.
    pub fn open(
        pool: &Arc<BufferPool>,
        root: PageId,
        spec: &KeySpec,
        unique: bool,
        device: u8,
    ) -> IndexStore {
        if spec.is_packed() {
            IndexStore::Int(BTree::open(pool.clone(), root, IntKeyOrder, unique).on_device(device))
        } else {
            IndexStore::Generic(
                BTree::open(
                    pool.clone(),
                    root,
                    SchemaKeyOrder::new(spec.parts()),
                    unique,
                )
                .on_device(device),
            )
        }
    }

    pub fn root(&self) -> Option<PageId> {
        match self {
            IndexStore::Generic(t) => Some(t.root()),
            IndexStore::Int(t) => Some(t.root()),
            _ => None,
        }
    }

    #[inline(never)]
    pub fn get(&self, key: &[u8]) -> StorageResult<Option<u64>> {
        match self {
            IndexStore::Generic(t) => t.get(key),
            IndexStore::Int(t) => t.get(key),
            IndexStore::Mem(m) => m.get(key),
            IndexStore::MemInt(m) => m.get(key),
            IndexStore::Hash(h) => Ok(h.get(key)),
        }
    }

    /// [`IndexStore::get`], on a B+-tree through `hint` ([`BTree::get_hinted`]: the leaf of
    /// the last lookup through it is tried first); other stores look up plainly.
    #[inline(never)]
    pub fn get_hinted(&self, key: &[u8], hint: &mut LeafHint) -> StorageResult<Option<u64>> {
        match self {
            IndexStore::Generic(t) => t.get_hinted(key, hint),
            IndexStore::Int(t) => t.get_hinted(key, hint),
            _ => self.get(key),
        }
    }

    /// Starts loading what a point lookup or insert of the packed integer key `key` reads
    /// first; true if this store can do that without reading anything itself (a main-memory
    /// integer index: the hash slot), false for the stores whose lookups walk a chain of
    /// nodes or pages.
    #[inline]
    pub fn prefetch_int(&self, key: u64) -> bool {
        match self {
            IndexStore::MemInt(m) => {
                m.prefetch(key);
                true
            }
            _ => false,
        }
    }

    /// The value of the packed integer key `key` in a main-memory integer index (as
    /// [`IndexStore::get`] of its bytes); `None` from every other store.
    #[inline]
    pub fn get_int(&self, key: u64) -> Option<u64> {
        match self {
            IndexStore::MemInt(m) => m.get_int(key),
            _ => None,
        }
    }

    #[inline(never)]
    pub fn insert(&self, key: &[u8], value: u64) -> StorageResult<()> {
        match self {
            IndexStore::Generic(t) => t.insert(key, value),
            IndexStore::Int(t) => t.insert(key, value),
            IndexStore::Mem(m) => m.insert(key, value),
            IndexStore::MemInt(m) => m.insert(key, value),
            IndexStore::Hash(h) => h.insert(key, value),
        }
    }

    /// [`IndexStore::insert`] through a [`LeafHint`]: a B+-tree tries the leaf of the last
    /// insert through the same hint first (see [`BTree::insert_hinted`]); the other stores
    /// ignore the hint.
    #[inline(never)]
    pub fn insert_hinted(&self, key: &[u8], value: u64, hint: &mut LeafHint) -> StorageResult<()> {
        match self {
            IndexStore::Generic(t) => t.insert_hinted(key, value, hint),
            IndexStore::Int(t) => t.insert_hinted(key, value, hint),
            _ => self.insert(key, value),
        }
    }

    /// Entries a main-memory ordered index has not merged into its ordered map yet (see
    /// `storage::memindex`); 0 for the other stores.
    pub fn pending(&self) -> usize {
        match self {
            IndexStore::Mem(m) => m.pending(),
            IndexStore::MemInt(m) => m.pending(),
            _ => 0,
        }
    }

    /// Brings a main-memory ordered index's ordered map up to date with the entries inserted
    /// since its last scan (see `storage::memindex`); nothing for the other stores.
    pub fn merge_pending(&self) {
        match self {
            IndexStore::Mem(m) => m.merge_pending(),
            IndexStore::MemInt(m) => m.merge_pending(),
            _ => {}
        }
    }

    /// Whether this is a B+-tree (whose inserts can lock the next key under the leaf latch).
    pub fn is_btree(&self) -> bool {
        matches!(self, IndexStore::Generic(_) | IndexStore::Int(_))
    }

    /// Inserts unless `next` refuses the key that will follow the new
    /// entry (`None`: the end of the index); see [`BTree::insert_with_next`]. On a B+-tree
    /// `next` runs under the leaf latch, so nobody can insert between that key and this one
    /// before the entry is in; the other stores find the next key with a scan first (not
    /// atomic with the insert; a hash index, which cannot scan, reports `None`; only unique
    /// indexes there, whose duplicate is the key itself). A B+-tree tries the leaf `hint`
    /// names first (see [`BTree::insert_with_next_hinted`]); the other stores ignore it.
    /// `StorageError::DuplicateKey` if the key is present (`next` not called).
    #[inline(never)]
    pub fn insert_with_next(
        &self,
        key: &[u8],
        value: u64,
        hint: &mut LeafHint,
        mut next: impl FnMut(Option<&[u8]>) -> bool,
    ) -> StorageResult<InsertOutcome> {
        match self {
            IndexStore::Generic(t) => t.insert_with_next_hinted(key, value, hint, next),
            IndexStore::Int(t) => t.insert_with_next_hinted(key, value, hint, next),
            _ => {
                let mut following: Option<Vec<u8>> = None;
                let mut duplicate = false;
                let scanned =
                    self.scan(Bound::Included(key), Bound::Unbounded, false, 1, |k, _| {
                        duplicate = k == key;
                        following = Some(k.to_vec());
                        false
                    })?;
                if scanned.is_none() {
                    duplicate = self.get(key)?.is_some();
                }
                if duplicate {
                    return Err(storage::StorageError::DuplicateKey);
                }
                if !next(following.as_deref()) {
                    return Ok(InsertOutcome::Blocked);
                }
                self.insert(key, value)?;
                Ok(InsertOutcome::Inserted)
            }
        }
    }

    #[inline]
    pub fn delete(&self, key: &[u8], value: u64) -> StorageResult<bool> {
        match self {
            IndexStore::Generic(t) => t.delete(key, value),
            IndexStore::Int(t) => t.delete(key, value),
            IndexStore::Mem(m) => m.delete(key, value),
            IndexStore::MemInt(m) => m.delete(key, value),
            IndexStore::Hash(h) => Ok(h.remove(key).is_some()),
        }
    }

    /// Entries within bounds; `f(key, value)` returns false to stop. `None` if the index
    /// cannot scan (hash).
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        f: impl FnMut(&[u8], u64) -> bool,
    ) -> StorageResult<Option<usize>> {
        Ok(Some(match self {
            IndexStore::Generic(t) => t.scan(lo, hi, reverse, limit, f)?,
            IndexStore::Int(t) => t.scan(lo, hi, reverse, limit, f)?,
            IndexStore::Mem(m) => m.scan(lo, hi, reverse, limit, f)?,
            IndexStore::MemInt(m) => m.scan(lo, hi, reverse, limit, f)?,
            IndexStore::Hash(_) => return Ok(None),
        }))
    }

    /// A forward scan that also names, under the latch of the leaf holding it, the key after
    /// the range (see [`BTree::scan_to_next`]). `None` where the index is not a B+-tree: a
    /// main-memory index's scan holds its latch throughout but names no key after, and a
    /// hash index cannot scan.
    pub fn scan_to_next(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        visit: impl FnMut(ScanStep<'_>) -> bool,
    ) -> StorageResult<Option<usize>> {
        Ok(Some(match self {
            IndexStore::Generic(t) => t.scan_to_next(lo, hi, limit, visit)?,
            IndexStore::Int(t) => t.scan_to_next(lo, hi, limit, visit)?,
            _ => return Ok(None),
        }))
    }

    pub fn check_invariants(&self) -> StorageResult<()> {
        match self {
            IndexStore::Generic(t) => t.check_invariants(),
            IndexStore::Int(t) => t.check_invariants(),
            IndexStore::Mem(m) => m.check_invariants(),
            IndexStore::MemInt(m) => m.check_invariants(),
            IndexStore::Hash(_) => Ok(()),
        }
    }
}

/// A secondary index.
pub struct Index {
    pub id: u32,
    pub schema: IndexSchema,
    pub table: u32,
    pub key: KeySpec,
    pub store: IndexStore,
}

/// A table.
pub struct Table {
    pub id: u32,
    pub schema: TableSchema,
    pub layout: Layout,
    /// Bit `c` set if column `c` (< 64) is in the primary key or a secondary index key: such
    /// columns cannot be updated. Columns from 64 on are checked against the indexes.
    pub indexed_columns: std::sync::atomic::AtomicU64,
    pub key: KeySpec,
    pub records: Records,
    pub primary: IndexStore,
    /// Secondary indexes of this table (ids into the database's index slots), set at creation;
    /// read by every insert and delete of every thread, so latched per thread
    /// ([`storage::shard::ReadMostly`]).
    pub secondaries: storage::shard::ReadMostly<Vec<u32>>,
    /// Whether the table is read-only ([`crate::Database::set_read_only`]): written only under
    /// the table's `S` or `X` lock, read by every access.
    pub(crate) read_only: std::sync::atomic::AtomicBool,
}

impl Table {
    /// Whether the table refuses writes (and its reads take no record locks).
    #[inline]
    pub fn is_read_only(&self) -> bool {
        self.read_only.load(std::sync::atomic::Ordering::Acquire)
    }
}
