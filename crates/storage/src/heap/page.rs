//! Slotted heap pages: variable-length records addressed by slot number.
//!
//! ```text
//!  0        24          40                                  free_end          page_size
//!  | common | heap hdr  | slot 0 | slot 1 | ... ->   free   <- ... | rec 1 | rec 0 |
//! ```
//!
//! The slot directory grows from the header towards the end of the page; records are placed
//! from the end towards the directory. Deleting or shrinking a record leaves a hole counted in
//! `fragmented`; when a record needs more contiguous room than the gap between the directory and
//! `free_end` but the page has enough free bytes in all, the page is compacted (live records are
//! slid to the end, slots rewritten).
//!
//! Heap header (after the 24-byte common header of [`crate::page`]):
//!
//! | offset | size | field        | meaning                                                   |
//! |-------:|-----:|--------------|-----------------------------------------------------------|
//! | 24     | 8    | next_page    | next page of the heap file's chain; 0 = none (page 0 is the meta page, never a heap page) |
//! | 32     | 2    | slot_count   | entries in the slot directory                             |
//! | 34     | 2    | free_end     | start of the record area (records lie in `free_end..page_size`) |
//! | 36     | 2    | fragmented   | bytes in the record area not used by any record (holes)   |
//! | 38     | 2    | free_slots   | free entries in the slot directory, or fewer (a page never over-counts): an insert scans the directory for a free entry only when it is non-zero |
//! | 40     | 6·n  | slots        | slot directory                                            |
//!
//! Slot entry (6 bytes):
//!
//! | offset | size | field  | meaning                                                         |
//! |-------:|-----:|--------|-----------------------------------------------------------------|
//! | 0      | 2    | offset | where the record starts; 0 = free slot                          |
//! | 2      | 2    | len    | record length in bytes                                          |
//! | 4      | 2    | kind   | 0 live record, 1 forwarding stub, 2 moved body                  |
//!
//! A *forwarding stub* holds the 8-byte [`RecordId`](super::RecordId) (little-endian
//! `page << 16 | slot`) of a *moved body* on another page: a record that outgrew its page keeps
//! its id. Moved bodies are invisible to scans and to reads by their own id.
//!
//! Every record occupies at least [`MIN_ALLOC`] bytes, so a stub always fits in place of the
//! record it replaces. Invariant (checked by [`check`]): the live allocations plus
//! `fragmented` add up to `page_size - free_end`, and no two allocations overlap.
//!
//! Every change goes through [`PageWriteGuard::range_mut`] with the tightest range (a slot entry,
//! a header field, the record bytes), so the log carries small diffs.

use crate::buffer::PageWriteGuard;
use crate::error::{StorageError, StorageResult};
use crate::page::{PageId, OFFSET_PAGE_ID, PAGE_HEADER_SIZE};

pub(crate) const OFFSET_NEXT: usize = PAGE_HEADER_SIZE;
pub(crate) const OFFSET_SLOT_COUNT: usize = 32;
pub(crate) const OFFSET_FREE_END: usize = 34;
pub(crate) const OFFSET_FRAGMENTED: usize = 36;
pub(crate) const OFFSET_FREE_SLOTS: usize = 38;
pub(crate) const SLOTS_START: usize = 40;
pub(crate) const SLOT_SIZE: usize = 6;
/// Smallest allocation of a record: room for a forwarding stub.
pub(crate) const MIN_ALLOC: usize = 8;

const _: () = assert!(OFFSET_NEXT + 8 == OFFSET_SLOT_COUNT);
const _: () = assert!(OFFSET_FRAGMENTED + 2 == OFFSET_FREE_SLOTS);
const _: () = assert!(OFFSET_FREE_SLOTS + 2 == SLOTS_START);

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotKind {
    Live = 0,
    Forward = 1,
    Moved = 2,
}

/// A used slot entry, validated against the page bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub offset: usize,
    pub len: usize,
    pub kind: SlotKind,
}

/// Bytes a record of `len` bytes occupies.
#[inline]
pub(crate) fn alloc_size(len: usize) -> usize {
    len.max(MIN_ALLOC)
}

/// The largest record a page of `page_size` bytes holds.
pub(crate) fn max_record(page_size: usize) -> usize {
    page_size - SLOTS_START - SLOT_SIZE
}

#[inline]
fn get16(page: &[u8], at: usize) -> usize {
    u16::from_le_bytes([page[at], page[at + 1]]) as usize
}

fn page_id(page: &[u8]) -> PageId {
    PageId(u64::from_le_bytes(
        page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].try_into().unwrap(),
    ))
}

fn corrupt(page: &[u8], reason: String) -> StorageError {
    StorageError::Corruption {
        page: page_id(page),
        reason,
    }
}

pub(crate) fn slot_count(page: &[u8]) -> usize {
    get16(page, OFFSET_SLOT_COUNT)
}

fn free_end(page: &[u8]) -> usize {
    get16(page, OFFSET_FREE_END)
}

fn fragmented(page: &[u8]) -> usize {
    get16(page, OFFSET_FRAGMENTED)
}

fn free_slots(page: &[u8]) -> usize {
    get16(page, OFFSET_FREE_SLOTS)
}

/// Where a directory of `count` slots ends: where slot `count` starts.
pub(crate) fn dir_end(count: usize) -> usize {
    SLOTS_START + count * SLOT_SIZE
}

/// The next page of the chain.
pub(crate) fn next_page(page: &[u8]) -> Option<PageId> {
    let next = u64::from_le_bytes(page[OFFSET_NEXT..OFFSET_NEXT + 8].try_into().unwrap());
    (next != 0).then_some(PageId(next))
}

/// Free bytes in all (the gap plus the holes).
pub(crate) fn free_space(page: &[u8]) -> usize {
    let gap = free_end(page).saturating_sub(dir_end(slot_count(page)));
    gap + fragmented(page)
}

/// Slot `i`: `Ok(None)` if it is free or beyond the directory; corruption if it points outside
/// the record area.
#[inline]
pub(crate) fn slot(page: &[u8], i: usize) -> StorageResult<Option<Slot>> {
    let count = slot_count(page);
    if i >= count {
        return Ok(None);
    }
    let at = dir_end(i);
    if at + SLOT_SIZE > page.len() {
        return Err(directory_past_page(page, count));
    }
    let offset = get16(page, at);
    if offset == 0 {
        return Ok(None);
    }
    let len = get16(page, at + 2);
    let kind = match get16(page, at + 4) {
        0 => SlotKind::Live,
        1 if len == 8 => SlotKind::Forward,
        2 => SlotKind::Moved,
        _ => return Err(bad_slot(page, i)),
    };
    if offset < dir_end(count) || offset + alloc_size(len) > page.len() {
        return Err(bad_slot(page, i));
    }
    Ok(Some(Slot { offset, len, kind }))
}

/// A slot count whose directory does not fit the page.
#[cold]
#[inline(never)]
fn directory_past_page(page: &[u8], count: usize) -> StorageError {
    corrupt(
        page,
        format!(
            "slot directory of {count} entries ends at {}, past the page's {} bytes",
            dir_end(count),
            page.len()
        ),
    )
}

/// What is wrong with slot `i`, which [`slot`] refused (kept out of line, so that `slot`
/// itself is a few inlined loads and compares).
#[cold]
#[inline(never)]
fn bad_slot(page: &[u8], i: usize) -> StorageError {
    let at = dir_end(i);
    let (offset, len, kind) = (get16(page, at), get16(page, at + 2), get16(page, at + 4));
    let reason = if kind > 2 {
        format!("slot {i} has unknown kind {kind}")
    } else if offset < dir_end(slot_count(page)) || offset + alloc_size(len) > page.len() {
        format!("slot {i} points outside the record area ({offset}+{len})")
    } else {
        format!("forwarding stub {i} of {len} bytes")
    };
    corrupt(page, reason)
}

/// The bytes of a validated slot.
#[inline]
pub(crate) fn bytes(page: &[u8], s: Slot) -> &[u8] {
    &page[s.offset..s.offset + s.len]
}

/// Decodes a forwarding stub's target.
pub(crate) fn stub_target(page: &[u8], s: Slot) -> u64 {
    u64::from_le_bytes(bytes(page, s).try_into().unwrap())
}

/// The slot an insert of `len` bytes would use, if the page has room for it.
pub(crate) fn slot_for_insert(page: &[u8], len: usize) -> Option<usize> {
    let count = slot_count(page);
    // Without free entries (the common case: pages filled by inserts) no scan at all.
    let free = if free_slots(page) == 0 {
        None
    } else {
        // A directory running past the page (a corrupt count) is searched only in the page.
        (0..count)
            .take_while(|&i| dir_end(i + 1) <= page.len())
            .find(|&i| get16(page, dir_end(i)) == 0)
    };
    let (slot, dir_growth) = match free {
        Some(i) => (i, 0),
        None if count < u16::MAX as usize => (count, SLOT_SIZE),
        None => return None,
    };
    (free_space(page) >= alloc_size(len) + dir_growth).then_some(slot)
}

fn set16(g: &mut PageWriteGuard<'_>, at: usize, v: usize) {
    g.range_mut(at, 2)
        .copy_from_slice(&(v as u16).to_le_bytes());
}

fn set_slot(g: &mut PageWriteGuard<'_>, i: usize, offset: usize, len: usize, kind: u16) {
    let e = g.range_mut(dir_end(i), SLOT_SIZE);
    e[0..2].copy_from_slice(&(offset as u16).to_le_bytes());
    e[2..4].copy_from_slice(&(len as u16).to_le_bytes());
    e[4..6].copy_from_slice(&kind.to_le_bytes());
}

/// Formats a freshly allocated (zeroed, header-formatted) page as an empty heap page.
pub(crate) fn init(g: &mut PageWriteGuard<'_>) {
    let size = g.len();
    set16(g, OFFSET_FREE_END, size);
}

/// Sets the chain pointer.
pub(crate) fn set_next(g: &mut PageWriteGuard<'_>, next: Option<PageId>) {
    let v = next.map_or(0, |p| p.0);
    g.range_mut(OFFSET_NEXT, 8)
        .copy_from_slice(&v.to_le_bytes());
}

/// Slides every used record to the end of the page, removing the holes.
fn compact(g: &mut PageWriteGuard<'_>) -> StorageResult<()> {
    let size = g.len();
    let count = slot_count(g);
    let mut used = Vec::with_capacity(count);
    for i in 0..count {
        if let Some(s) = slot(g, i)? {
            used.push((i, s));
        }
    }
    used.sort_by_key(|u| std::cmp::Reverse(u.1.offset));
    let mut area = Vec::new();
    let mut end = size;
    let mut moves = Vec::with_capacity(used.len());
    for &(i, s) in &used {
        let alloc = alloc_size(s.len);
        end -= alloc;
        moves.push((i, s, end));
    }
    area.resize(size - end, 0);
    for &(_, s, to) in &moves {
        let alloc = alloc_size(s.len);
        area[to - end..to - end + alloc].copy_from_slice(&g[s.offset..s.offset + alloc]);
    }
    g.range_mut(end, size - end).copy_from_slice(&area);
    for (i, s, to) in moves {
        if to != s.offset {
            set16(g, dir_end(i), to);
        }
    }
    set16(g, OFFSET_FREE_END, end);
    set16(g, OFFSET_FRAGMENTED, 0);
    Ok(())
}

/// Reserves `size` bytes of record space (the directory will grow by `dir_growth` bytes),
/// compacting if the gap is too small. The caller has checked that the page has room.
fn alloc(g: &mut PageWriteGuard<'_>, size: usize, dir_growth: usize) -> StorageResult<usize> {
    let gap =
        |g: &PageWriteGuard<'_>| free_end(g).saturating_sub(dir_end(slot_count(g)) + dir_growth);
    if gap(g) < size {
        compact(g)?;
        if gap(g) < size {
            return Err(corrupt(
                g,
                format!("no room for {size} bytes after compaction"),
            ));
        }
    }
    let offset = free_end(g) - size;
    set16(g, OFFSET_FREE_END, offset);
    Ok(offset)
}

/// Returns `size` bytes at `offset` to the page: the gap grows if they border it, else they
/// become a hole.
fn release(g: &mut PageWriteGuard<'_>, offset: usize, size: usize) {
    if offset == free_end(g) {
        set16(g, OFFSET_FREE_END, offset + size);
    } else {
        let f = fragmented(g) + size;
        set16(g, OFFSET_FRAGMENTED, f);
    }
}

/// Puts a record into free slot `i` (which may lie beyond the directory: it grows, and the
/// slots in between are free). Returns false, changing nothing, if the page lacks room.
pub(crate) fn put(
    g: &mut PageWriteGuard<'_>,
    i: usize,
    record: &[u8],
    kind: SlotKind,
) -> StorageResult<bool> {
    let count = slot_count(g);
    if i >= u16::MAX as usize {
        return Ok(false);
    }
    debug_assert!(
        i >= count || get16(g, dir_end(i)) == 0,
        "slot {i} is in use"
    );
    let dir_growth = if i >= count {
        (i + 1 - count) * SLOT_SIZE
    } else {
        0
    };
    let size = alloc_size(record.len());
    if free_space(g) < size + dir_growth {
        return Ok(false);
    }
    let offset = alloc(g, size, dir_growth)?;
    // Header, then directory, then the record: from low offsets to high, so the guard's
    // changed ranges grow at their end (its cheap case) instead of being inserted before.
    let free = free_slots(g);
    if i >= count {
        // Entries between the old end of the directory and `i` become free slots; the gap
        // they take over may hold stale bytes.
        g.range_mut(dir_end(count), (i - count) * SLOT_SIZE).fill(0);
        set16(g, OFFSET_SLOT_COUNT, i + 1);
        if i > count {
            set16(
                g,
                OFFSET_FREE_SLOTS,
                (free + (i - count)).min(u16::MAX as usize),
            );
        }
    } else if free > 0 {
        set16(g, OFFSET_FREE_SLOTS, free - 1);
    }
    set_slot(g, i, offset, record.len(), kind as u16);
    g.range_mut(offset, record.len()).copy_from_slice(record);
    Ok(true)
}

/// Replaces the contents of used slot `i` with `record`: in place if it fits the old
/// allocation, else elsewhere on the page. Returns false, changing nothing, if the page lacks
/// room.
pub(crate) fn replace(
    g: &mut PageWriteGuard<'_>,
    i: usize,
    old: Slot,
    record: &[u8],
    kind: SlotKind,
) -> StorageResult<bool> {
    let old_alloc = alloc_size(old.len);
    let new_alloc = alloc_size(record.len());
    if new_alloc <= old_alloc {
        g.range_mut(old.offset, record.len())
            .copy_from_slice(record);
        if new_alloc < old_alloc {
            // The tail of the old allocation becomes a hole.
            let f = fragmented(g) + old_alloc - new_alloc;
            set16(g, OFFSET_FRAGMENTED, f);
        }
        if record.len() != old.len || kind != old.kind {
            set_slot(g, i, old.offset, record.len(), kind as u16);
        }
        return Ok(true);
    }
    if free_space(g) + old_alloc < new_alloc {
        return Ok(false);
    }
    set_slot(g, i, 0, 0, 0);
    release(g, old.offset, old_alloc);
    let offset = alloc(g, new_alloc, 0)?;
    g.range_mut(offset, record.len()).copy_from_slice(record);
    set_slot(g, i, offset, record.len(), kind as u16);
    Ok(true)
}

/// Frees used slot `i`.
pub(crate) fn remove(g: &mut PageWriteGuard<'_>, i: usize, old: Slot) {
    set_slot(g, i, 0, 0, 0);
    release(g, old.offset, alloc_size(old.len));
    let free = free_slots(g);
    if free < u16::MAX as usize {
        set16(g, OFFSET_FREE_SLOTS, free + 1);
    }
}

/// Checks the page's structure; returns its used slots.
pub(crate) fn check(page: &[u8]) -> StorageResult<Vec<(usize, Slot)>> {
    let size = page.len();
    let count = slot_count(page);
    let end = free_end(page);
    if end < dir_end(count) || end > size {
        return Err(corrupt(
            page,
            format!("free_end {end} outside {}..{size}", dir_end(count)),
        ));
    }
    let mut used = Vec::new();
    for i in 0..count {
        if let Some(s) = slot(page, i)? {
            if s.offset < end {
                return Err(corrupt(page, format!("slot {i} lies below free_end")));
            }
            used.push((i, s));
        }
    }
    let mut spans: Vec<(usize, usize)> = used
        .iter()
        .map(|(_, s)| (s.offset, s.offset + alloc_size(s.len)))
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[0].1 > w[1].0 {
            return Err(corrupt(page, format!("records overlap at {}", w[1].0)));
        }
    }
    let free_entries = count - used.len();
    if free_slots(page) > free_entries {
        return Err(corrupt(
            page,
            format!(
                "free_slots {} but {free_entries} free directory entries",
                free_slots(page)
            ),
        ));
    }
    let allocated: usize = spans.iter().map(|(a, b)| b - a).sum();
    if allocated + fragmented(page) != size - end {
        return Err(corrupt(
            page,
            format!(
                "space accounting: {allocated} allocated + {} fragmented != {} in the record area",
                fragmented(page),
                size - end
            ),
        ));
    }
    Ok(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An 8 KiB page whose directory holds one slot entry.
    fn page_with_slot(offset: u16, len: u16, kind: u16) -> Vec<u8> {
        let mut page = vec![0u8; 8192];
        page[OFFSET_SLOT_COUNT..OFFSET_SLOT_COUNT + 2].copy_from_slice(&1u16.to_le_bytes());
        let at = dir_end(0);
        for (i, v) in [offset, len, kind].into_iter().enumerate() {
            page[at + 2 * i..at + 2 * i + 2].copy_from_slice(&v.to_le_bytes());
        }
        page
    }

    #[test]
    fn slots_decode_and_corrupt_ones_are_named() {
        let live = slot(&page_with_slot(4000, 20, 0), 0).unwrap();
        assert_eq!(
            live,
            Some(Slot {
                offset: 4000,
                len: 20,
                kind: SlotKind::Live
            })
        );
        let stub = slot(&page_with_slot(4000, 8, 1), 0).unwrap();
        assert_eq!(stub.map(|s| s.kind), Some(SlotKind::Forward));
        assert_eq!(slot(&page_with_slot(0, 20, 0), 0).unwrap(), None, "free");
        assert_eq!(
            slot(&page_with_slot(4000, 20, 0), 1).unwrap(),
            None,
            "beyond"
        );
        let error = |page: Vec<u8>| slot(&page, 0).unwrap_err().to_string();
        assert!(error(page_with_slot(4000, 20, 7)).contains("unknown kind 7"));
        assert!(error(page_with_slot(8190, 20, 0)).contains("outside the record area"));
        assert!(error(page_with_slot(20, 20, 0)).contains("outside the record area"));
        assert!(error(page_with_slot(4000, 9, 1)).contains("forwarding stub 0 of 9 bytes"));
    }

    /// Found by the `heap_page` fuzz target: a slot count whose directory runs past the page
    /// made reading a slot beyond the page's end index out of bounds.
    #[test]
    fn a_slot_directory_past_the_page_is_corruption_not_a_panic() {
        let mut page = vec![0u8; 8192];
        let fuzzed: [u8; 42] = [
            131, 95, 183, 128, 76, 71, 2, 0, 198, 0, 238, 42, 0, 0, 0, 0, 221, 31, 35, 0, 0, 0,
            186, 31, 35, 0, 0, 0, 151, 31, 35, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        page[..42].copy_from_slice(&fuzzed);
        let count = slot_count(&page);
        assert!(dir_end(count) > page.len(), "the count runs past the page");
        let last = (0..count).find_map(|i| slot(&page, i).err());
        let message = last.expect("a slot past the page is an error").to_string();
        assert!(message.contains("past the page"), "{message}");
        assert!(check(&page).is_err());
        // An insert's search for a free entry stays inside the page too.
        page[OFFSET_FREE_SLOTS..OFFSET_FREE_SLOTS + 2].copy_from_slice(&1u16.to_le_bytes());
        page[OFFSET_FREE_END..OFFSET_FREE_END + 2].copy_from_slice(&8192u16.to_le_bytes());
        for i in 0..(8192 - SLOTS_START) / SLOT_SIZE {
            page[dir_end(i)] = 1;
        }
        assert_eq!(slot_for_insert(&page, 10), None);
    }
}
