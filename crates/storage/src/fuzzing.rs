//! Entry points for the fuzz targets in `fuzz/` (not part of the storage API).
//!
//! The decoders of page bytes that the rest of the crate keeps private: the page header check
//! every read from the page store goes through, and the slotted heap page's accessors. Each
//! function reads one page image of any length and content, as the buffer pool would hand it
//! over after a read, and must return an error (never panic, never loop) on a damaged one.
//! The B+-tree node codec ([`crate::btree::node`]) is public already.

use crate::error::StorageResult;
use crate::heap::page as hp;
use crate::page::{PageId, PageSize};

/// The check a page image passes when read for page `id` ([`crate::BufferPool`] runs it on
/// every read): magic, checksum, the page's own id, its kind. `buf` must be one page long (8
/// or 32 KiB, as the pool's buffers are).
pub fn verify_page(id: PageId, buf: &[u8]) -> StorageResult<()> {
    assert!(
        PageSize::from_bytes(buf.len()).is_some(),
        "a page buffer is 8 or 32 KiB"
    );
    crate::buffer::verify_page(id, buf)
}

/// What a reader sees of one used heap slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapSlot {
    pub slot: usize,
    pub offset: usize,
    pub len: usize,
    /// 0 live record, 1 forwarding stub, 2 moved body.
    pub kind: u8,
}

/// Reads a heap page as the heap file does: every slot of the directory through the accessor
/// reads use (a live record's bytes, a stub's target), the free space an insert weighs, and
/// where an insert of `insert_len` bytes would go. Returns the used slots.
pub fn read_heap_page(page: &[u8], insert_len: usize) -> StorageResult<Vec<HeapSlot>> {
    let mut used = Vec::new();
    for i in 0..hp::slot_count(page) {
        if let Some(s) = hp::slot(page, i)? {
            let bytes = hp::bytes(page, s);
            assert_eq!(bytes.len(), s.len);
            if s.kind == hp::SlotKind::Forward {
                let _ = hp::stub_target(page, s);
            }
            used.push(HeapSlot {
                slot: i,
                offset: s.offset,
                len: s.len,
                kind: s.kind as u8,
            });
        }
    }
    let _ = hp::free_space(page);
    let _ = hp::next_page(page);
    let _ = hp::slot_for_insert(page, insert_len);
    Ok(used)
}

/// The heap page's structural check ([`crate::HeapFile::check_invariants`] runs it on every
/// page of a file): returns the used slots' numbers.
pub fn check_heap_page(page: &[u8]) -> StorageResult<Vec<usize>> {
    Ok(hp::check(page)?.into_iter().map(|(i, _)| i).collect())
}
