//! B+-tree node layout: a slotted page, and the operations on it as functions over page bytes.
//!
//! ```text
//!  0        24          56                                   cell_start          page_size
//!  | common | node      | slot 0 | slot 1 | ... |   free    | cell | cell | cell |
//!  | header | header    |  u16 offsets, key order  --->     |  <--- cells, any order   |
//! ```
//!
//! An insert writes its cell at the low end of the cell area and moves the 2-byte offsets after
//! its slot one place right; it never moves other cells. A delete removes the slot and leaves its
//! cell as garbage (counted in `garbage`), as does cutting a node short ([`truncate`], the
//! left half of a leaf split) for cells that lie above its lowest kept one; an insert that
//! finds too little contiguous room compacts the cell area first.
//!
//! Node header (after the common [page header](crate::page)):
//!
//! | offset | size | field        | meaning                                                     |
//! |-------:|-----:|--------------|-------------------------------------------------------------|
//! | 24     | 2    | slot_count   | entries in the node                                         |
//! | 26     | 2    | cell_start   | lowest byte of the cell area                                |
//! | 28     | 2    | level        | 0 for a leaf, height above the leaves for an inner node     |
//! | 30     | 2    | garbage      | bytes of dead cells inside the cell area                    |
//! | 32     | 8    | prev         | leaf: left sibling (0 = none; page 0 is the meta page)      |
//! | 40     | 8    | next         | leaf: right sibling (0 = none)                              |
//! | 48     | 8    | leftmost     | inner: the child left of the first separator (leaf: 0, or   |
//! |        |      |              | [`UNLINKED`] once the leaf is taken out of its tree)        |
//! | 56     | 2·n  | slots        | cell offsets, in key order                                  |
//!
//! Cell (all integers little-endian, keys as encoded by [`super::keys`]):
//!
//! | offset | size    | field   | meaning                                                     |
//! |-------:|--------:|---------|-------------------------------------------------------------|
//! | 0      | 2       | key_len | bytes of key                                                |
//! | 2      | key_len | key     | leaf: the entry key; inner: a separator                     |
//! | 2+len  | 8       | value   | leaf: the entry's value; inner: the child page id           |
//!
//! Inner node with separators `k1 < k2 < ...` and children `c0 (leftmost), c1, c2, ...`: every
//! key in `ci`'s subtree is `>= ki` and `< k(i+1)`.
//!
//! Every write goes through [`NodePage::range_mut`] with the tightest range, so the buffer pool
//! can log exactly the bytes that changed.

use std::cmp::Ordering;

use super::keys::{Guide, KeyOrder, Rank, Search};
use crate::error::{StorageError, StorageResult};
use crate::page::{PageId, PageKind, OFFSET_KIND, OFFSET_PAGE_ID, PAGE_HEADER_SIZE};

pub const OFFSET_SLOT_COUNT: usize = 24;
pub const OFFSET_CELL_START: usize = 26;
pub const OFFSET_LEVEL: usize = 28;
pub const OFFSET_GARBAGE: usize = 30;
pub const OFFSET_PREV: usize = 32;
pub const OFFSET_NEXT: usize = 40;
pub const OFFSET_LEFTMOST: usize = 48;
/// The `leftmost` field of a leaf taken out of its tree ([`mark_unlinked`]): an empty leaf that
/// no parent names and no sibling links to any more, kept only for readers that still hold
/// its page id from before (a backward scan between two leaves, a [`super::LeafHint`]).
pub const UNLINKED: u64 = u64::MAX;
/// End of the node header; the slot array starts here.
pub const NODE_HEADER_SIZE: usize = 56;
/// Bytes of a cell besides its key: key length and value.
pub const CELL_OVERHEAD: usize = 2 + 8;
/// Bytes of one slot.
pub const SLOT_SIZE: usize = 2;

const _: () = assert!(OFFSET_SLOT_COUNT == PAGE_HEADER_SIZE);
const _: () = assert!(OFFSET_LEFTMOST + 8 == NODE_HEADER_SIZE);

/// The longest internal key (user key plus, in a non-unique tree, the 8-byte value suffix) a node
/// of `page_size` bytes accepts: a quarter of the node's space, so any split leaves both halves
/// with room and every node holds at least four entries.
pub const fn max_internal_key_len(page_size: usize) -> usize {
    (page_size - NODE_HEADER_SIZE) / 4 - CELL_OVERHEAD - SLOT_SIZE
}

/// Space an entry with a key of `key_len` bytes takes: slot plus cell.
#[inline]
pub const fn entry_space(key_len: usize) -> usize {
    SLOT_SIZE + CELL_OVERHEAD + key_len
}

/// A page being written: reads of the whole page, writes only through recorded ranges.
/// Implemented by the buffer pool's write guard and, in tests, by plain byte vectors.
pub trait NodePage {
    fn bytes(&self) -> &[u8];
    fn range_mut(&mut self, offset: usize, len: usize) -> &mut [u8];
}

impl NodePage for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn range_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        &mut self[offset..offset + len]
    }
}

#[inline]
fn read_u16(page: &[u8], offset: usize) -> usize {
    u16::from_le_bytes([page[offset], page[offset + 1]]) as usize
}

#[inline]
fn read_u64(page: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(page[offset..offset + 8].try_into().expect("8 bytes"))
}

fn write_u16(page: &mut impl NodePage, offset: usize, value: usize) {
    page.range_mut(offset, 2)
        .copy_from_slice(&(value as u16).to_le_bytes());
}

fn write_u64(page: &mut impl NodePage, offset: usize, value: u64) {
    page.range_mut(offset, 8)
        .copy_from_slice(&value.to_le_bytes());
}

fn page_id_field(raw: u64) -> Option<PageId> {
    (raw != 0).then_some(PageId(raw))
}

/// Read access to a node's bytes. The page must have passed [`check_header`].
#[derive(Clone, Copy)]
pub struct Node<'a> {
    page: &'a [u8],
}

impl<'a> Node<'a> {
    /// Wraps a page after checking that its node header is consistent, so that later reads
    /// through slots stay in bounds or report corruption instead of panicking.
    #[inline]
    pub fn new(page: &'a [u8]) -> StorageResult<Node<'a>> {
        check_header(page)?;
        Ok(Node { page })
    }

    pub fn page(&self) -> &'a [u8] {
        self.page
    }

    #[inline]
    pub fn len(&self) -> usize {
        read_u16(self.page, OFFSET_SLOT_COUNT)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn level(&self) -> usize {
        read_u16(self.page, OFFSET_LEVEL)
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.level() == 0
    }

    pub fn prev(&self) -> Option<PageId> {
        page_id_field(read_u64(self.page, OFFSET_PREV))
    }

    pub fn next(&self) -> Option<PageId> {
        page_id_field(read_u64(self.page, OFFSET_NEXT))
    }

    pub fn leftmost(&self) -> Option<PageId> {
        page_id_field(read_u64(self.page, OFFSET_LEFTMOST))
    }

    /// Whether this is a leaf taken out of its tree ([`mark_unlinked`]).
    #[inline]
    pub fn is_unlinked(&self) -> bool {
        self.is_leaf() && read_u64(self.page, OFFSET_LEFTMOST) == UNLINKED
    }

    pub fn page_id(&self) -> PageId {
        PageId(u64::from_le_bytes(
            self.page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8]
                .try_into()
                .expect("8 bytes"),
        ))
    }

    /// Free bytes between the slot array and the cell area, plus garbage that compaction frees.
    pub fn free_space(&self) -> usize {
        let contiguous =
            read_u16(self.page, OFFSET_CELL_START) - NODE_HEADER_SIZE - SLOT_SIZE * self.len();
        contiguous + read_u16(self.page, OFFSET_GARBAGE)
    }

    #[inline]
    fn cell_offset(&self, slot: usize) -> usize {
        read_u16(self.page, slot_offset(slot))
    }

    /// The key and the offset of the value of entry `slot`, or `None` if the cell does not
    /// lie inside the page. The search loops use this `Option` (two words, in registers)
    /// and turn a `None` into a corruption error only on that cold path.
    #[inline(always)]
    fn cell(&self, slot: usize) -> Option<(&'a [u8], usize)> {
        let page = self.page;
        let offset = self.cell_offset(slot);
        let len = page.get(offset..offset + 2)?;
        let key_len = u16::from_le_bytes([len[0], len[1]]) as usize;
        let value_at = offset + 2 + key_len;
        // The value's 8 bytes must be in the page too.
        let key = page.get(offset + 2..value_at + 8)?;
        Some((&key[..key_len], value_at))
    }

    /// The length of entry `slot`'s cell (key length, key and value), or `None` if the cell
    /// does not lie inside the page: [`Node::cell`] without slicing the key out.
    #[inline(always)]
    fn cell_len(&self, slot: usize) -> Option<usize> {
        let offset = self.cell_offset(slot);
        let (len, _) = self.page.get(offset..)?.split_first_chunk::<2>()?;
        let cell_len = CELL_OVERHEAD + u16::from_le_bytes(*len) as usize;
        (offset + cell_len <= self.page.len()).then_some(cell_len)
    }

    /// The key of entry `slot` (`slot < len`).
    #[inline]
    pub fn key(&self, slot: usize) -> StorageResult<&'a [u8]> {
        match self.cell(slot) {
            Some((key, _)) => Ok(key),
            None => Err(self.bad_cell(slot)),
        }
    }

    /// The value (leaf) or child page id (inner) of entry `slot`.
    #[inline]
    pub fn value(&self, slot: usize) -> StorageResult<u64> {
        match self.cell(slot) {
            Some((_, at)) => Ok(read_u64(self.page, at)),
            None => Err(self.bad_cell(slot)),
        }
    }

    /// The first 8 key bytes of entry `slot` as a big-endian u64 (for [`KeyOrder::FIXED_U64`]
    /// orders, whose keys are at least 8 bytes).
    #[cfg(test)]
    fn key_u64(&self, slot: usize) -> StorageResult<u64> {
        let key = self.key(slot)?;
        key.get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| self.corrupt("integer key shorter than 8 bytes"))
    }

    #[cold]
    #[inline(never)]
    fn bad_cell(&self, slot: usize) -> StorageError {
        self.corrupt(&format!("cell of slot {slot} runs past the page"))
    }

    #[cold]
    #[inline(never)]
    fn corrupt(&self, reason: &str) -> StorageError {
        StorageError::Corruption {
            page: self.page_id(),
            reason: format!("b+-tree node: {reason}"),
        }
    }

    /// Number of entries whose key is `< probe` (`strict`) or `<= probe` (`!strict`): the
    /// insertion point of `probe`. See [`Node::search`].
    #[inline]
    pub fn rank<K: KeyOrder>(&self, order: &K, probe: &[u8], strict: bool) -> StorageResult<usize> {
        Ok(self.search(order, probe, strict)?.index)
    }

    /// The insertion point of `probe` ([`Node::rank`]) and whether the node holds it
    /// ([`Rank::found`]), in one search. For a [`KeyOrder::FIXED_U64`] order it compares
    /// `u64`s read straight from the cells (the bytes after the first eight, a non-unique
    /// entry's value suffix, only on a tie); any other order runs its [`KeyOrder::rank`] over
    /// the node's keys. Integer keys and schema keys with integer fields are searched by
    /// interpolation before bisection ([`Search::interpolating`]).
    ///
    /// Every key is read through the slot array, sliced once (it lies inside the page, which
    /// [`check_header`] made sure of), and a cell that does not lie inside the page is a
    /// corruption error naming its slot.
    #[inline]
    pub fn search<K: KeyOrder>(
        &self,
        order: &K,
        probe: &[u8],
        strict: bool,
    ) -> StorageResult<Rank> {
        self.search_guided(order, probe, strict, None)
    }

    /// [`Node::search`], starting where `guide` (from this node's parent,
    /// [`Node::guide_for_child`]) points. The same result with or without it.
    #[inline]
    pub fn search_guided<K: KeyOrder>(
        &self,
        order: &K,
        probe: &[u8],
        strict: bool,
        guide: Option<Guide>,
    ) -> StorageResult<Rank> {
        let n = self.len();
        let page = self.page;
        let Some(slots) = page.get(NODE_HEADER_SIZE..NODE_HEADER_SIZE + SLOT_SIZE * n) else {
            return Err(self.corrupt("slot array runs past the page"));
        };
        let (slots, _) = slots.as_chunks::<SLOT_SIZE>();
        // Where key `i`'s cell lies if the node's cells are in slot order and as long as the
        // probe's (as a rebuild, and appends in key order, leave the nodes of a table loaded
        // in key order): `stride` bytes per slot back from the end of the cell area. Its
        // lines are prefetched as the slot is read, so a comparison waits for one miss
        // instead of the slot's and then the cell's. A wrong guess only wastes the loads.
        let stride = CELL_OVERHEAD + probe.len();
        let key = |i: usize| -> Option<&'a [u8]> {
            if let Some(at) = in_order_cell(page.len(), i, stride) {
                let base = page.as_ptr();
                crate::prefetch::line(base.wrapping_add(at));
                crate::prefetch::line(base.wrapping_add(at + stride - 1));
            }
            let offset = u16::from_le_bytes(*slots.get(i)?) as usize;
            let (len, rest) = page.get(offset..)?.split_first_chunk::<2>()?;
            let key_len = u16::from_le_bytes(*len) as usize;
            // The value's 8 bytes must be in the page too.
            let cell = rest.get(..key_len + 8)?;
            Some(&cell[..key_len])
        };
        if K::FIXED_U64 && probe.len() >= 8 {
            return if strict {
                self.search_u64::<true>(n, key, probe, guide)
            } else {
                self.search_u64::<false>(n, key, probe, guide)
            };
        }
        order
            .rank_guided(n, key, probe, strict, guide)
            .map_err(|slot| self.bad_cell(slot))
    }

    /// Inner node: what its separators around child `i` tell of the child's keys (`None` for
    /// the leftmost and rightmost children, bounded on one side by an ancestor only).
    #[inline]
    pub fn guide_for_child<K: KeyOrder>(&self, order: &K, i: usize) -> Option<Guide> {
        if i == 0 || i >= self.len() {
            return None;
        }
        order.guide(self.key(i - 1).ok()?, self.key(i).ok()?)
    }

    /// [`Node::search`] for a [`KeyOrder::FIXED_U64`] order and a probe of at least 8 bytes:
    /// the first 8 bytes of each key compared as one `u64`, the rest bytewise on a tie, by
    /// interpolation on that `u64` ([`Search::interpolating`]).
    #[inline(always)]
    fn search_u64<const STRICT: bool>(
        &self,
        n: usize,
        key: impl Fn(usize) -> Option<&'a [u8]>,
        probe: &[u8],
        guide: Option<Guide>,
    ) -> StorageResult<Rank> {
        let (p, p_rest) = probe.split_at(8);
        let p = u64::from_be_bytes(p.try_into().expect("8 bytes"));
        let word = |i: usize| -> StorageResult<(u64, &'a [u8])> {
            let Some(key) = key(i) else {
                return Err(self.bad_cell(i));
            };
            let Some((k, k_rest)) = key.split_first_chunk::<8>() else {
                return Err(self.corrupt("integer key shorter than 8 bytes"));
            };
            Ok((u64::from_be_bytes(*k), k_rest))
        };
        let step = |search: &mut Search<STRICT>, i: usize| -> StorageResult<()> {
            let (k, k_rest) = word(i)?;
            let ord = match k.cmp(&p) {
                Ordering::Equal => k_rest.cmp(p_rest),
                other => other,
            };
            search.step(i, ord, 0);
            Ok(())
        };
        let coordinate = |search: &Search<STRICT>| {
            let (lo, hi) = search.interval();
            Some((word(lo - 1).ok()?.0, p, word(hi).ok()?.0))
        };
        let start = guide.and_then(|g| g.slot_u64(n, p));
        Ok(Search::<STRICT>::interpolating(n, start, step, coordinate)?.rank())
    }

    /// The slot holding exactly `key`, if any.
    #[inline]
    pub fn find<K: KeyOrder>(&self, order: &K, key: &[u8]) -> StorageResult<Option<usize>> {
        let rank = self.search(order, key, true)?;
        Ok(rank.found.then_some(rank.index))
    }

    /// Inner node: child `i` (0 = leftmost, `i` = right of separator `i - 1`).
    #[inline(always)]
    pub fn child(&self, i: usize) -> StorageResult<PageId> {
        let raw = if i == 0 {
            read_u64(self.page, OFFSET_LEFTMOST)
        } else {
            self.value(i - 1)?
        };
        page_id_field(raw).ok_or_else(|| self.corrupt("inner node child is page 0"))
    }

    /// Copies out every entry (for splits and checks).
    pub fn entries(&self) -> StorageResult<Vec<(Vec<u8>, u64)>> {
        (0..self.len())
            .map(|i| Ok((self.key(i)?.to_vec(), self.value(i)?)))
            .collect()
    }
}

/// Checks the node header against the page size: kind, slot array and cell area in bounds.
/// A handful of loads and compares; the error (which names the page) is built off the hot path.
#[inline]
pub fn check_header(page: &[u8]) -> StorageResult<()> {
    if page.len() < NODE_HEADER_SIZE {
        return Err(header_corrupt(page, "page shorter than a node header"));
    }
    let level = read_u16(page, OFFSET_LEVEL);
    let kind_ok = if level == 0 {
        page[OFFSET_KIND] == PageKind::BTreeLeaf as u8
    } else {
        page[OFFSET_KIND] == PageKind::BTreeInner as u8
    };
    if !kind_ok {
        return Err(header_corrupt(
            page,
            "not a b+-tree node of a matching level",
        ));
    }
    let slots_end = NODE_HEADER_SIZE + SLOT_SIZE * read_u16(page, OFFSET_SLOT_COUNT);
    let cell_start = read_u16(page, OFFSET_CELL_START);
    if slots_end > cell_start || cell_start > page.len() {
        return Err(header_corrupt(page, "slot array overlaps the cell area"));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn header_corrupt(page: &[u8], reason: &str) -> StorageError {
    let id = PageId(u64::from_le_bytes(
        page.get(OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; 8]),
    ));
    StorageError::Corruption {
        page: id,
        reason: format!("b+-tree node: {reason}"),
    }
}

/// Formats `page` as an empty node of `level` (leaf when 0). Writes the whole node area.
pub fn format(page: &mut impl NodePage, level: usize) {
    let size = page.bytes().len();
    let kind = if level == 0 {
        PageKind::BTreeLeaf
    } else {
        PageKind::BTreeInner
    };
    page.range_mut(OFFSET_KIND, 1)[0] = kind as u8;
    let header = page.range_mut(OFFSET_SLOT_COUNT, NODE_HEADER_SIZE - OFFSET_SLOT_COUNT);
    header.fill(0);
    header[OFFSET_CELL_START - OFFSET_SLOT_COUNT..][..2]
        .copy_from_slice(&(cell_area_end(size) as u16).to_le_bytes());
    header[OFFSET_LEVEL - OFFSET_SLOT_COUNT..][..2].copy_from_slice(&(level as u16).to_le_bytes());
}

/// Where the cell area ends: the page end (offsets are u16, which 8 and 32 KiB pages fit).
const fn cell_area_end(page_size: usize) -> usize {
    page_size
}

/// Where slot `slot`'s entry starts in the slot array.
#[inline(always)]
pub(crate) const fn slot_offset(slot: usize) -> usize {
    NODE_HEADER_SIZE + SLOT_SIZE * slot
}

/// Where slot `slot`'s cell starts in a node of `page_size` bytes whose cells lie in slot
/// order and are all `cell_len` bytes long, as a rebuild and appends in key order leave them:
/// `cell_len` bytes per slot back from the end of the cell area; `None` past the page start.
/// The guess node search and a lookup's leaf prefetch make, to prefetch a cell before its
/// slot is read.
#[inline(always)]
pub(crate) fn in_order_cell(page_size: usize, slot: usize, cell_len: usize) -> Option<usize> {
    cell_area_end(page_size).checked_sub(slot.checked_add(1)?.checked_mul(cell_len)?)
}

const _: () = assert!(crate::page::PageSize::Kib32.bytes() <= u16::MAX as usize);

pub fn set_prev(page: &mut impl NodePage, prev: Option<PageId>) {
    write_u64(page, OFFSET_PREV, prev.map_or(0, |p| p.0));
}

pub fn set_next(page: &mut impl NodePage, next: Option<PageId>) {
    write_u64(page, OFFSET_NEXT, next.map_or(0, |p| p.0));
}

/// Whether `page`'s bytes read as a leaf marked taken out of its tree ([`mark_unlinked`]),
/// without the rest of [`Node::new`]'s checks: a cheap first look (recovery's redo takes it
/// at every page it passes), which [`crate::btree::unlinked_leaves`] confirms.
pub fn looks_unlinked(page: &[u8]) -> bool {
    page.len() >= NODE_HEADER_SIZE
        && page[OFFSET_KIND] == PageKind::BTreeLeaf as u8
        && read_u16(page, OFFSET_LEVEL) == 0
        && read_u64(page, OFFSET_LEFTMOST) == UNLINKED
}

/// Marks an (empty) leaf as taken out of its tree: see [`UNLINKED`]. Its sibling links stay as
/// they were, so a reader arriving from a stale link can tell where it is.
pub fn mark_unlinked(page: &mut impl NodePage) {
    write_u64(page, OFFSET_LEFTMOST, UNLINKED);
}

pub fn set_leftmost(page: &mut impl NodePage, child: PageId) {
    write_u64(page, OFFSET_LEFTMOST, child.0);
}

/// Inserts `(key, value)` as entry `slot`, compacting first if needed. Returns false (and
/// changes no entry) if the node has no room: the caller splits. A node whose cells a
/// compaction cannot gather (a corrupt one) has no room either.
pub fn insert_at(page: &mut impl NodePage, slot: usize, key: &[u8], value: u64) -> bool {
    let node = Node { page: page.bytes() };
    let n = node.len();
    debug_assert!(slot <= n);
    let need = entry_space(key.len());
    if node.free_space() < need {
        return false;
    }
    let contiguous =
        |page: &[u8]| read_u16(page, OFFSET_CELL_START) - NODE_HEADER_SIZE - SLOT_SIZE * n;
    if contiguous(page.bytes()) < need && (!compact(page) || contiguous(page.bytes()) < need) {
        return false;
    }
    let cell_len = CELL_OVERHEAD + key.len();
    let cell_start = read_u16(page.bytes(), OFFSET_CELL_START) - cell_len;
    // Written from low offsets to high (header, slots, cell), so each range extends the
    // write guard's range list at its end, its cheap path.
    let header = page.range_mut(OFFSET_SLOT_COUNT, 4);
    header[..2].copy_from_slice(&((n + 1) as u16).to_le_bytes());
    header[2..4].copy_from_slice(&(cell_start as u16).to_le_bytes());
    // Shift slots [slot, n) one place right and write the new one.
    let slots = page.range_mut(
        NODE_HEADER_SIZE + SLOT_SIZE * slot,
        SLOT_SIZE * (n - slot + 1),
    );
    slots.copy_within(0..SLOT_SIZE * (n - slot), SLOT_SIZE);
    slots[..2].copy_from_slice(&(cell_start as u16).to_le_bytes());
    let cell = page.range_mut(cell_start, cell_len);
    cell[..2].copy_from_slice(&(key.len() as u16).to_le_bytes());
    cell[2..2 + key.len()].copy_from_slice(key);
    cell[2 + key.len()..].copy_from_slice(&value.to_le_bytes());
    true
}

/// Removes entry `slot`; its cell becomes garbage.
pub fn remove_at(page: &mut impl NodePage, slot: usize) -> StorageResult<()> {
    let node = Node::new(page.bytes())?;
    let n = node.len();
    debug_assert!(slot < n);
    let cell_len = CELL_OVERHEAD + node.key(slot)?.len();
    let garbage = read_u16(page.bytes(), OFFSET_GARBAGE) + cell_len;
    let slots = page.range_mut(NODE_HEADER_SIZE + SLOT_SIZE * slot, SLOT_SIZE * (n - slot));
    slots.copy_within(SLOT_SIZE.., 0);
    write_u16(page, OFFSET_SLOT_COUNT, n - 1);
    write_u16(page, OFFSET_GARBAGE, garbage);
    Ok(())
}

/// Overwrites the value of entry `slot` in place.
pub fn set_value(page: &mut impl NodePage, slot: usize, value: u64) -> StorageResult<()> {
    let node = Node::new(page.bytes())?;
    let offset = node.cell_offset(slot) + 2 + node.key(slot)?.len();
    write_u64(page, offset, value);
    Ok(())
}

/// Rewrites the cell area without garbage, keeping slot order: the cells are gathered into
/// one scratch area, last slot first (so slot 0's cell ends at the page end, as a rebuild
/// leaves it), and written back with the slot array in two writes.
///
/// Returns false, having changed nothing, if a cell does not lie inside the page or the cells
/// would not fit beside the slot array (a corrupt node): the insert that wanted the room then
/// reports no room, and the split that follows names the corruption.
fn compact(page: &mut impl NodePage) -> bool {
    let size = page.bytes().len();
    let node = Node { page: page.bytes() };
    let n = node.len();
    let mut area = Vec::with_capacity(size);
    let mut lens = Vec::with_capacity(n);
    for slot in (0..n).rev() {
        let Some(len) = node.cell_len(slot) else {
            return false;
        };
        let offset = node.cell_offset(slot);
        area.extend_from_slice(&page.bytes()[offset..offset + len]);
        lens.push(len);
    }
    let Some(start) = cell_area_end(size)
        .checked_sub(area.len())
        .filter(|&start| start >= NODE_HEADER_SIZE + SLOT_SIZE * n)
    else {
        return false;
    };
    page.range_mut(start, area.len()).copy_from_slice(&area);
    let slots = page.range_mut(NODE_HEADER_SIZE, SLOT_SIZE * n);
    let mut end = cell_area_end(size);
    for (slot, len) in slots.chunks_exact_mut(SLOT_SIZE).zip(lens.iter().rev()) {
        end -= len;
        slot.copy_from_slice(&(end as u16).to_le_bytes());
    }
    write_u16(page, OFFSET_CELL_START, start);
    write_u16(page, OFFSET_GARBAGE, 0);
    true
}

/// Keeps entries `0..keep` of the node and drops the rest (a leaf split's left half, made in
/// place): only the header changes. The cell area's start moves up to the lowest kept cell,
/// and what lies above it but is no longer any slot's counts as garbage; for a node whose
/// cells lie in slot order (rebuilt, or appended to in key order) the dropped cells are the
/// lowest ones, so nothing becomes garbage.
pub fn truncate(page: &mut impl NodePage, keep: usize) -> StorageResult<()> {
    let node = Node::new(page.bytes())?;
    let n = node.len();
    if keep >= n {
        return Ok(());
    }
    let size = page.bytes().len();
    let (mut lowest, mut live) = (cell_area_end(size), 0);
    for slot in 0..keep {
        live += node.cell_len(slot).ok_or_else(|| node.bad_cell(slot))?;
        lowest = lowest.min(node.cell_offset(slot));
    }
    // A corrupt node's kept cells may overlap (more live bytes than the area above the
    // lowest) or lie in the slot array: refuse it instead of writing a header that lies.
    let garbage = (cell_area_end(size) - lowest)
        .checked_sub(live)
        .filter(|_| lowest >= slot_offset(keep))
        .ok_or_else(|| node.corrupt("the kept cells overlap or lie in the slot array"))?;
    let header = page.range_mut(OFFSET_SLOT_COUNT, 4);
    header[..2].copy_from_slice(&(keep as u16).to_le_bytes());
    header[2..].copy_from_slice(&(lowest as u16).to_le_bytes());
    write_u16(page, OFFSET_GARBAGE, garbage);
    Ok(())
}

/// Whether a node of `page_size` bytes holds `entries` ([`rebuild`] asks it of its caller). The
/// halves of a sound node's split always fit; those of a corrupt one (cells shared by several
/// slots) may not, which a split checks before it changes any page.
pub fn fits(page_size: usize, entries: &[(impl AsRef<[u8]>, u64)]) -> bool {
    let spaces: usize = entries
        .iter()
        .map(|(k, _)| entry_space(k.as_ref().len()))
        .sum();
    NODE_HEADER_SIZE + spaces <= cell_area_end(page_size)
}

/// Formats `page` as a node of `level` holding `entries` in order (and, for an inner node,
/// `leftmost`), keeping its sibling links as given. The entries must fit.
///
/// The node is built in a scratch copy (a plain vector, no change tracking) and goes into
/// the page as three writes: the kind byte, header plus slot array, and the cell area. So a
/// split records three ranges per node, not three per entry, and logs the same bytes (the
/// free gap between slots and cells is not written).
///
/// The image is what inserting the entries one after another at the end would leave (cells
/// packed down from the page's end in entry order, no garbage), written in one pass: a
/// 32 KiB leaf holds some 1,400 entries, and an `insert_at` per entry, with its room checks
/// and range bookkeeping, had cost a split at that size about 230 K instructions.
pub fn rebuild(
    page: &mut impl NodePage,
    level: usize,
    leftmost: Option<PageId>,
    prev: Option<PageId>,
    next: Option<PageId>,
    entries: &[(impl AsRef<[u8]>, u64)],
) {
    let size = page.bytes().len();
    let slots_end = NODE_HEADER_SIZE + SLOT_SIZE * entries.len();
    let cell_bytes: usize = entries
        .iter()
        .map(|(k, _)| CELL_OVERHEAD + k.as_ref().len())
        .sum();
    assert!(fits(size, entries), "rebuild: entries do not fit the node");
    let cell_start = cell_area_end(size) - cell_bytes;
    // The header from the slot count on, then the slots: what `format` and the link setters
    // would leave there.
    let mut head = vec![0u8; slots_end - OFFSET_SLOT_COUNT];
    let field = |offset: usize| offset - OFFSET_SLOT_COUNT;
    head[field(OFFSET_SLOT_COUNT)..][..2].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    head[field(OFFSET_CELL_START)..][..2].copy_from_slice(&(cell_start as u16).to_le_bytes());
    head[field(OFFSET_LEVEL)..][..2].copy_from_slice(&(level as u16).to_le_bytes());
    head[field(OFFSET_PREV)..][..8].copy_from_slice(&prev.map_or(0, |p| p.0).to_le_bytes());
    head[field(OFFSET_NEXT)..][..8].copy_from_slice(&next.map_or(0, |p| p.0).to_le_bytes());
    if let Some(child) = leftmost {
        head[field(OFFSET_LEFTMOST)..][..8].copy_from_slice(&child.0.to_le_bytes());
    }
    // Cells packed down from the page end in entry order: entry 0's ends at the page end.
    let mut cells = vec![0u8; cell_bytes];
    let mut end = cell_bytes;
    let slots = head[field(NODE_HEADER_SIZE)..].chunks_exact_mut(SLOT_SIZE);
    for ((key, value), slot) in entries.iter().zip(slots) {
        let key = key.as_ref();
        let cell = &mut cells[end - CELL_OVERHEAD - key.len()..end];
        end -= cell.len();
        let (len, rest) = cell.split_at_mut(2);
        len.copy_from_slice(&(key.len() as u16).to_le_bytes());
        let (k, v) = rest.split_at_mut(key.len());
        k.copy_from_slice(key);
        v.copy_from_slice(&value.to_le_bytes());
        slot.copy_from_slice(&((cell_start + end) as u16).to_le_bytes());
    }
    let kind = if level == 0 {
        PageKind::BTreeLeaf
    } else {
        PageKind::BTreeInner
    };
    page.range_mut(OFFSET_KIND, 1)[0] = kind as u8;
    page.range_mut(OFFSET_SLOT_COUNT, head.len())
        .copy_from_slice(&head);
    page.range_mut(cell_start, cell_bytes)
        .copy_from_slice(&cells);
}

/// Where to split `entries` (plus nothing else) into two nodes: the first index of the right
/// half, chosen so both halves hold about half the bytes and neither is empty.
pub fn split_point(entries: &[(impl AsRef<[u8]>, u64)]) -> usize {
    split_point_of(&entry_spaces(entries))
}

/// [`split_point`] for entries that take `spaces` bytes each (slot and cell).
pub fn split_point_of(spaces: &[usize]) -> usize {
    let total: usize = spaces.iter().sum();
    let mut left = 0;
    for (i, space) in spaces.iter().enumerate() {
        left += space;
        if left * 2 >= total {
            return (i + 1).clamp(1, spaces.len() - 1);
        }
    }
    spaces.len() / 2
}

/// Where to split a full leaf whose entries (the new one included, at index `new`) are
/// `entries`: the first index of the right half.
///
/// Inserts that arrive in ascending order at one place of a leaf (a district's next order,
/// in front of the next district's first keys) would, after a balanced split, keep shifting
/// the slots behind them, and the log would carry those slots on every insert. So the split
/// goes *after the new entry* when that leaves the left leaf at least a quarter of the bytes:
/// the following inserts then land at the end of the left leaf, shifting nothing, and it
/// fills completely. A new entry at the very end makes it the right leaf's only entry (a
/// rightmost append). Otherwise, and whenever the left part would not fit a node of
/// `page_size` bytes, the split is balanced ([`split_point`]).
pub fn leaf_split_point(
    entries: &[(impl AsRef<[u8]>, u64)],
    new: usize,
    page_size: usize,
) -> usize {
    leaf_split_point_of(&entry_spaces(entries), new, page_size)
}

/// [`leaf_split_point`] for entries that take `spaces` bytes each.
pub fn leaf_split_point_of(spaces: &[usize], new: usize, page_size: usize) -> usize {
    let n = spaces.len();
    debug_assert!(new < n, "the new entry is one of the entries");
    if n >= 2 && new == n - 1 {
        return n - 1;
    }
    let left: usize = spaces[..=new].iter().sum();
    if left * 4 >= spaces.iter().sum() && left <= page_size - NODE_HEADER_SIZE {
        return new + 1;
    }
    split_point_of(spaces)
}

/// Bytes each of `entries` takes in a node (slot and cell).
fn entry_spaces(entries: &[(impl AsRef<[u8]>, u64)]) -> Vec<usize> {
    entries
        .iter()
        .map(|(k, _)| entry_space(k.as_ref().len()))
        .collect()
}

impl Node<'_> {
    /// Checks the cell area's accounting (for invariant checks): every slot's cell lies in
    /// the cell area, no two overlap, and the live cells plus `garbage` fill the area.
    pub fn check_space(&self) -> StorageResult<()> {
        let size = self.page.len();
        let start = read_u16(self.page, OFFSET_CELL_START);
        let mut cells = Vec::with_capacity(self.len());
        for slot in 0..self.len() {
            let (key, _) = self.cell(slot).ok_or_else(|| self.bad_cell(slot))?;
            let offset = self.cell_offset(slot);
            if offset < start {
                return Err(self.corrupt(&format!(
                    "cell of slot {slot} at {offset}, below the cell area's start {start}"
                )));
            }
            cells.push((offset, offset + CELL_OVERHEAD + key.len()));
        }
        cells.sort_unstable();
        if let Some(w) = cells.windows(2).find(|w| w[0].1 > w[1].0) {
            return Err(self.corrupt(&format!("cells at {} and {} overlap", w[0].0, w[1].0)));
        }
        let live: usize = cells.iter().map(|(lo, hi)| hi - lo).sum();
        let garbage = read_u16(self.page, OFFSET_GARBAGE);
        if live + garbage != cell_area_end(size) - start {
            return Err(self.corrupt(&format!(
                "{live} live and {garbage} garbage bytes in a cell area of {}",
                cell_area_end(size) - start
            )));
        }
        Ok(())
    }

    /// The bytes each entry takes (slot and cell), with an entry of `new_key_len` bytes of key
    /// counted at `new`: what a leaf split weighs, read from the slots without copying a key.
    pub fn spaces_with(&self, new: usize, new_key_len: usize) -> StorageResult<Vec<usize>> {
        let n = self.len();
        let mut spaces = Vec::with_capacity(n + 1);
        for slot in 0..n {
            if slot == new {
                spaces.push(entry_space(new_key_len));
            }
            spaces.push(SLOT_SIZE + self.cell_len(slot).ok_or_else(|| self.bad_cell(slot))?);
        }
        if new >= n {
            spaces.push(entry_space(new_key_len));
        }
        Ok(spaces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::keys::{
        encode_key, BytewiseKeyOrder, IntKeyOrder, KeyField, KeyPart, SchemaKeyOrder,
    };
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn leaf(size: usize) -> Vec<u8> {
        let mut page = vec![0u8; size];
        page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].copy_from_slice(&7u64.to_le_bytes());
        format(&mut page, 0);
        page
    }

    #[test]
    fn fresh_leaf_is_empty_and_consistent() {
        let page = leaf(8192);
        let node = Node::new(&page).unwrap();
        assert!(node.is_leaf() && node.is_empty());
        assert_eq!(node.free_space(), 8192 - NODE_HEADER_SIZE);
        assert_eq!(node.prev(), None);
        assert_eq!(node.page_id(), PageId(7));
    }

    #[test]
    fn insert_keeps_slots_in_order_and_find_works() {
        let mut page = leaf(8192);
        for k in [5u64, 1, 9, 3] {
            let node = Node::new(&page).unwrap();
            let slot = node.rank(&IntKeyOrder, &k.to_be_bytes(), true).unwrap();
            assert!(insert_at(&mut page, slot, &k.to_be_bytes(), k * 10));
        }
        let node = Node::new(&page).unwrap();
        let keys: Vec<u64> = (0..node.len()).map(|i| node.key_u64(i).unwrap()).collect();
        assert_eq!(keys, vec![1, 3, 5, 9]);
        assert_eq!(
            node.find(&IntKeyOrder, &9u64.to_be_bytes()).unwrap(),
            Some(3)
        );
        assert_eq!(node.value(3).unwrap(), 90);
        assert_eq!(node.find(&IntKeyOrder, &4u64.to_be_bytes()).unwrap(), None);
        assert_eq!(
            node.rank(&IntKeyOrder, &5u64.to_be_bytes(), false).unwrap(),
            3
        );
    }

    #[test]
    fn full_node_refuses_then_compaction_reclaims_garbage() {
        let mut page = leaf(8192);
        let key = [0xAB; 100];
        let mut n = 0;
        while insert_at(&mut page, n, &key, n as u64) {
            n += 1;
        }
        assert_eq!(n, (8192 - NODE_HEADER_SIZE) / entry_space(100));
        remove_at(&mut page, 0).unwrap();
        remove_at(&mut page, 3).unwrap();
        // Room exists only as garbage: the insert compacts.
        assert!(insert_at(&mut page, 0, &key, 999));
        assert!(insert_at(&mut page, 1, &key, 998));
        assert!(!insert_at(&mut page, 0, &key, 0));
        let node = Node::new(&page).unwrap();
        assert_eq!(node.len(), n);
        assert_eq!(node.value(0).unwrap(), 999);
        assert_eq!(node.value(1).unwrap(), 998);
        assert_eq!(node.value(2).unwrap(), 1);
    }

    #[test]
    fn corrupt_header_is_an_error_not_a_panic() {
        let mut page = leaf(8192);
        page[OFFSET_SLOT_COUNT..OFFSET_SLOT_COUNT + 2].copy_from_slice(&5000u16.to_le_bytes());
        assert!(matches!(
            Node::new(&page),
            Err(StorageError::Corruption { .. })
        ));
        let mut page = leaf(8192);
        page[OFFSET_KIND] = PageKind::Heap as u8;
        assert!(Node::new(&page).is_err());
        let mut page = leaf(8192);
        assert!(insert_at(&mut page, 0, b"abc", 1));
        // Point the slot past the page end.
        page[NODE_HEADER_SIZE..NODE_HEADER_SIZE + 2].copy_from_slice(&8191u16.to_le_bytes());
        let node = Node::new(&page).unwrap();
        assert!(node.key(0).is_err());
    }

    #[test]
    fn an_insert_that_must_compact_a_corrupt_node_finds_no_room_instead_of_panicking() {
        let mut page = leaf(4096);
        let key = [7u8; 100];
        let mut n = 0;
        while insert_at(&mut page, n, &key, n as u64) {
            n += 1;
        }
        // Free a slot's worth as garbage, then point a cell past the page end.
        remove_at(&mut page, 0).unwrap();
        page[NODE_HEADER_SIZE..NODE_HEADER_SIZE + 2].copy_from_slice(&4090u16.to_le_bytes());
        let before = page.clone();
        assert!(!insert_at(&mut page, 0, &key, 1));
        assert_eq!(page, before, "nothing changes");
        // Lying garbage: room on paper, none after compaction.
        let mut page = leaf(4096);
        let mut n = 0;
        while insert_at(&mut page, n, &key, n as u64) {
            n += 1;
        }
        page[OFFSET_GARBAGE..OFFSET_GARBAGE + 2].copy_from_slice(&500u16.to_le_bytes());
        assert!(!insert_at(&mut page, n, &key, 0));
        assert_eq!(Node::new(&page).unwrap().len(), n);
    }

    /// Found by the `btree_node` fuzz target: cutting short a node whose kept slots share one
    /// cell counted more live bytes than the cell area holds, and the garbage count underflowed.
    #[test]
    fn truncating_a_node_with_overlapping_cells_is_corruption_not_a_panic() {
        let mut page = leaf(4096);
        for (slot, key) in [[1u8; 20], [2; 20], [3; 20]].iter().enumerate() {
            assert!(insert_at(&mut page, slot, key, 0));
        }
        // Slots 0 and 1 both name slot 0's cell, the page's last: two cells' worth of live
        // bytes in one cell's room above the lowest kept one. The header still checks out.
        let last = read_u16(&page, slot_offset(0));
        page[slot_offset(1)..slot_offset(1) + 2].copy_from_slice(&(last as u16).to_le_bytes());
        Node::new(&page).unwrap();
        let before = page.clone();
        let error = truncate(&mut page, 2).unwrap_err().to_string();
        assert!(error.contains("overlap"), "{error}");
        assert_eq!(page, before, "nothing changes");
    }

    #[test]
    fn split_point_balances_bytes() {
        let entries: Vec<(Vec<u8>, u64)> = (0..10).map(|i| (vec![i; 10], 0)).collect();
        assert_eq!(split_point(&entries), 5);
        let mut skewed = entries.clone();
        skewed[0].0 = vec![0; 500];
        assert_eq!(split_point(&skewed), 1);
    }

    #[test]
    fn leaf_split_goes_after_the_new_entry_when_that_keeps_a_quarter() {
        let entries: Vec<(Vec<u8>, u64)> = (0..20).map(|i| (vec![i; 10], 0)).collect();
        // Appended at the end: the new entry alone goes right.
        assert_eq!(leaf_split_point(&entries, 19, 8192), 19);
        // In the middle, past the first quarter: split right after it.
        assert_eq!(leaf_split_point(&entries, 12, 8192), 13);
        assert_eq!(leaf_split_point(&entries, 4, 8192), 5);
        // Too close to the start: balanced.
        assert_eq!(leaf_split_point(&entries, 2, 8192), split_point(&entries));
        // A left part that would not fit a node: balanced.
        let big: Vec<(Vec<u8>, u64)> = (0..8).map(|i| (vec![i; 1000], 0)).collect();
        assert_eq!(leaf_split_point(&big, 7, 8192), 7);
        assert_eq!(leaf_split_point(&big, 6, 4096), split_point(&big));
    }

    /// Sorted numbers shaped as interpolation search meets them: dense runs with
    /// gaps, uniform, skewed (each gap twice the last), and few values repeated many times.
    fn shaped_numbers(shape: u8, n: usize, next: &mut impl FnMut() -> u64) -> Vec<u64> {
        let base = next() % (1 << 40);
        let mut numbers: Vec<u64> = match shape {
            0 => (0..n as u64)
                .filter(|_| !next().is_multiple_of(8))
                .map(|i| base + i)
                .collect(),
            1 => (0..n).map(|_| next()).collect(),
            2 => (0..n.min(60) as u32).map(|i| base + (1u64 << i)).collect(),
            _ => (0..n).map(|_| base + next() % 3).collect(),
        };
        numbers.sort_unstable();
        numbers
    }

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Fills a leaf with `keys` (sorted, distinct) as far as they fit, then checks that
    /// `Node::search` ranks every probe as counting the keys below it does, strict and not.
    fn search_agrees_with_counting<K: KeyOrder>(
        order: &K,
        keys: &[Vec<u8>],
        probes: &[Vec<u8>],
    ) -> Result<(), TestCaseError> {
        let mut page = leaf(8192);
        let mut stored = Vec::new();
        for k in keys {
            if !insert_at(&mut page, stored.len(), k, 0) {
                break;
            }
            stored.push(k.clone());
        }
        let node = Node::new(&page).unwrap();
        // Guides as a parent's separators would give them: around the stored keys (as a
        // parent that split them off), and between probes anywhere, which point the search
        // at the wrong slots and must not change its answer.
        let mut guides: Vec<Option<Guide>> = vec![None];
        let mut separators: Vec<&Vec<u8>> = probes.iter().step_by(7).collect();
        separators.sort();
        separators.dedup();
        for pair in separators.windows(2).take(3) {
            guides.push(order.guide(pair[0], pair[1]));
        }
        if let (Some(first), Some(last)) = (probes.first(), probes.last()) {
            guides.push(order.guide(first.min(last), first.max(last)));
        }
        for probe in probes {
            for strict in [true, false] {
                let index = stored
                    .iter()
                    .filter(|k| if strict { *k < probe } else { *k <= probe })
                    .count();
                let next_to = if strict { index } else { index.wrapping_sub(1) };
                let found = stored.get(next_to) == Some(probe);
                for guide in &guides {
                    let rank = node.search_guided(order, probe, strict, *guide).unwrap();
                    prop_assert_eq!(
                        (rank.index, rank.found),
                        (index, found),
                        "probe {:?}, strict {}, guide {:?}",
                        probe,
                        strict,
                        guide
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        /// One `u64` then `suffix` bytes (as a non-unique entry's value), by `search_u64`.
        #[test]
        fn integer_search_agrees_with_counting(
            shape in 0u8..4,
            n in 0usize..400,
            seed in any::<u64>(),
            suffix in 0usize..3,
            extra in proptest::collection::vec(any::<u64>(), 8),
        ) {
            let mut next = xorshift(seed);
            let mut keys: Vec<Vec<u8>> = shaped_numbers(shape, n, &mut next)
                .iter()
                .map(|p| {
                    let mut k = p.to_be_bytes().to_vec();
                    k.extend((0..suffix).map(|_| next() as u8));
                    k
                })
                .collect();
            keys.sort();
            keys.dedup();
            // Every key, its neighbours (as prefixes alone and with a suffix), the extremes,
            // and a few anywhere.
            let mut probes: Vec<Vec<u8>> = vec![vec![0; 8], vec![0xFF; 10]];
            for k in &keys {
                let p = u64::from_be_bytes(k[..8].try_into().unwrap());
                probes.push(k.clone());
                for q in [p.wrapping_sub(1), p, p.wrapping_add(1)] {
                    probes.push(q.to_be_bytes().to_vec());
                    probes.push([&q.to_be_bytes()[..], &[0x80]].concat());
                }
            }
            probes.extend(extra.iter().map(|e| e.to_be_bytes().to_vec()));
            search_agrees_with_counting(&IntKeyOrder, &keys, &probes)?;
        }

        /// Schema keys of two integers (a few warehouses, each with its shaped numbers) and
        /// optionally a string, by `SchemaKeyOrder`'s word search: interpolation on the
        /// first word the bounds do not share with the probe.
        #[test]
        fn schema_search_agrees_with_counting(
            shape in 0u8..4,
            n in 0usize..300,
            seed in any::<u64>(),
            warehouses in 1i64..4,
            string in any::<bool>(),
        ) {
            let mut parts = vec![KeyPart::Int, KeyPart::Int];
            if string {
                parts.push(KeyPart::Str);
            }
            let order = SchemaKeyOrder::new(parts);
            let mut next = xorshift(seed);
            let numbers = shaped_numbers(shape, n, &mut next);
            let encode = |w: i64, v: i64, s: Option<&[u8]>| {
                let mut fields = vec![KeyField::Int(w), KeyField::Int(v)];
                fields.extend(s.map(KeyField::Str));
                let mut k = Vec::new();
                encode_key(&fields, &mut k).unwrap();
                k
            };
            let tag = |v: u64| [b'a' + (v % 3) as u8];
            let mut keys = Vec::new();
            let mut probes = Vec::new();
            for (i, v) in numbers.iter().enumerate() {
                let (w, v) = (1 + i as i64 % warehouses, *v as i64);
                let s = string.then_some(tag(v as u64));
                keys.push(encode(w, v, s.as_ref().map(|s| &s[..])));
                for (pw, pv) in [(w, v - 1), (w, v), (w, v + 1), (w - 1, v), (w + 1, v)] {
                    probes.push(encode(pw, pv, s.as_ref().map(|s| &s[..])));
                    // A prefix of the key (its two integers), as a range bound probes.
                    probes.push(encode(pw, pv, None));
                }
            }
            keys.sort();
            keys.dedup();
            probes.push(encode(i64::MIN, i64::MIN, None));
            probes.push(encode(i64::MAX, i64::MAX, None));
            search_agrees_with_counting(&order, &keys, &probes)?;
        }

        #[test]
        fn node_matches_model(ops in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(0u8..4, 0..12), any::<u64>()), 1..300)) {
            let mut page = leaf(8192);
            let mut model = BTreeMap::new();
            for (insert, key, value) in ops {
                let node = Node::new(&page).unwrap();
                let found = node.find(&BytewiseKeyOrder, &key).unwrap();
                if insert {
                    if found.is_none() {
                        let slot = node.rank(&BytewiseKeyOrder, &key, true).unwrap();
                        if insert_at(&mut page, slot, &key, value) {
                            model.insert(key, value);
                        }
                    }
                } else if let Some(slot) = found {
                    remove_at(&mut page, slot).unwrap();
                    model.remove(&key);
                }
            }
            let node = Node::new(&page).unwrap();
            let entries = node.entries().unwrap();
            let expected: Vec<(Vec<u8>, u64)> = model.into_iter().collect();
            prop_assert_eq!(entries, expected);
        }

        /// A leaf filled in any order (so its cells lie out of slot order, some of them
        /// garbage), cut short with `truncate`, keeps exactly its first `keep` entries with
        /// its space accounted for, and takes inserts (compacting as it needs) until it is
        /// full again, agreeing with the model throughout.
        #[test]
        fn truncated_node_keeps_its_prefix_and_fills_again(
            keys in proptest::collection::vec((proptest::collection::vec(0u8..8, 0..10), any::<u64>()), 1..400),
            removes in proptest::collection::vec(any::<usize>(), 0..40),
            cut in any::<usize>(),
            more in proptest::collection::vec((proptest::collection::vec(0u8..8, 0..10), any::<u64>()), 0..600),
        ) {
            let mut page = leaf(4096);
            let mut model = BTreeMap::new();
            let put = |page: &mut Vec<u8>, model: &mut BTreeMap<Vec<u8>, u64>, key: &[u8], value| {
                let node = Node::new(page).unwrap();
                if node.find(&BytewiseKeyOrder, key).unwrap().is_none() {
                    let slot = node.rank(&BytewiseKeyOrder, key, true).unwrap();
                    if insert_at(page, slot, key, value) {
                        model.insert(key.to_vec(), value);
                    }
                }
            };
            for (key, value) in &keys {
                put(&mut page, &mut model, key, *value);
            }
            for r in removes {
                if model.is_empty() {
                    break;
                }
                let slot = r % model.len();
                remove_at(&mut page, slot).unwrap();
                let key = model.keys().nth(slot).unwrap().clone();
                model.remove(&key);
            }
            let keep = cut % (model.len() + 1);
            truncate(&mut page, keep).unwrap();
            let kept: BTreeMap<Vec<u8>, u64> = model.into_iter().take(keep).collect();
            let node = Node::new(&page).unwrap();
            node.check_space().unwrap();
            prop_assert_eq!(node.entries().unwrap(), kept.clone().into_iter().collect::<Vec<_>>());
            let mut model = kept;
            for (key, value) in &more {
                put(&mut page, &mut model, key, *value);
            }
            let node = Node::new(&page).unwrap();
            node.check_space().unwrap();
            prop_assert_eq!(node.entries().unwrap(), model.into_iter().collect::<Vec<_>>());
        }

        /// `rebuild` writes in one pass what appending each entry with `insert_at` to a
        /// freshly formatted node leaves, byte for byte (the stale bytes of the free gap
        /// included), whatever the page held before.
        #[test]
        fn rebuild_leaves_what_appending_each_entry_leaves(
            entries in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..40), any::<u64>()), 0..200),
            level in 0usize..3,
            links in (any::<u64>(), any::<u64>(), any::<u64>()),
            noise in any::<u8>(),
        ) {
            let size = 4096;
            let fit = entries
                .iter()
                .scan(NODE_HEADER_SIZE, |used, (k, _)| {
                    *used += entry_space(k.len());
                    Some(*used)
                })
                .take_while(|&used| used <= size)
                .count();
            let entries = &entries[..fit];
            let page_id = |raw: u64| (!raw.is_multiple_of(5)).then_some(PageId(raw));
            let (leftmost, prev, next) = (page_id(links.0), page_id(links.1), page_id(links.2));
            // A page that held something else: every byte the rebuild leaves alone must
            // stay as it was.
            let old: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(noise)).collect();

            let mut rebuilt = old.clone();
            rebuild(&mut rebuilt, level, leftmost, prev, next, entries);

            let mut appended = old.clone();
            format(&mut appended, level);
            set_prev(&mut appended, prev);
            set_next(&mut appended, next);
            if let Some(child) = leftmost {
                set_leftmost(&mut appended, child);
            }
            for (i, (key, value)) in entries.iter().enumerate() {
                prop_assert!(insert_at(&mut appended, i, key, *value));
            }
            prop_assert_eq!(rebuilt, appended);
        }
    }

    /// The guess node search and the leaf prefetch make of where a cell lies holds for a
    /// node rebuilt from, and then appended to with, keys of one length in key order; and
    /// it refuses a slot whose cell would start before the page.
    #[test]
    fn in_order_cells_lie_where_the_guess_puts_them() {
        let mut page = leaf(4096);
        let keys: Vec<[u8; 16]> = (0u64..120)
            .map(|i| {
                let mut k = [0u8; 16];
                k[8..].copy_from_slice(&i.to_be_bytes());
                k
            })
            .collect();
        let entries: Vec<(&[u8], u64)> = keys[..80].iter().map(|k| (&k[..], 0)).collect();
        rebuild(&mut page, 0, None, None, None, &entries);
        for (i, k) in keys.iter().enumerate().skip(80) {
            assert!(insert_at(&mut page, i, k, i as u64));
        }
        let node = Node::new(&page).unwrap();
        for i in 0..keys.len() {
            assert_eq!(
                Some(node.cell_offset(i)),
                in_order_cell(4096, i, CELL_OVERHEAD + 16),
                "slot {i}"
            );
        }
        assert_eq!(in_order_cell(4096, 4096, 1), None);
        assert_eq!(in_order_cell(4096, usize::MAX, 26), None);
    }

    #[test]
    #[should_panic(expected = "rebuild: entries do not fit the node")]
    fn rebuild_refuses_entries_that_do_not_fit() {
        let mut page = leaf(4096);
        let key = [7u8; 100];
        let entries: Vec<(&[u8], u64)> = (0..40).map(|i| (&key[..], i)).collect();
        rebuild(&mut page, 0, None, None, None, &entries);
    }
}
