//! Page guards: RAII handles on a fixed page.
//!
//! A [`PageReadGuard`] holds a pin and the frame latch in shared mode; a [`PageWriteGuard`]
//! holds a pin and the frame latch exclusively. Dropping a guard releases the latch first and
//! then the pin (so an unpinned frame always has a free latch).
//!
//! A write guard of a pool with a [`PageLog`](crate::page::PageLog) records which byte ranges
//! it changed (sorted, disjoint, coalesced when they touch). On release those ranges go to the
//! log as one redo record and the record's LSN is stamped into the page header. Without a log
//! the guard records nothing: the `main-log` switch removes that work.
//!
//! Allocation: none on the fix, change and release paths once warm. The range list lives in
//! the frame (`FrameData::ranges`, under the exclusive latch the guard holds), so its capacity
//! outlives the guard; the release hands the ranges to the log from a stack array
//! (`BufferPool::log_together`).

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::Ordering;

use super::frame::{FrameData, FrameId};
use super::pool::BufferPool;
use crate::latch::{LatchReadGuard, LatchWriteGuard};
use crate::page::{page_lsn, Lsn, PageId, OFFSET_LSN, OFFSET_MAGIC};

/// Shared access to a fixed page.
pub struct PageReadGuard<'a> {
    pub(crate) pool: &'a BufferPool,
    pub(crate) frame: FrameId,
    pub(crate) page: PageId,
    pub(crate) data: ManuallyDrop<LatchReadGuard<'a, FrameData>>,
}

impl PageReadGuard<'_> {
    #[inline]
    pub fn page_id(&self) -> PageId {
        self.page
    }

    /// The LSN stamped in the page header.
    pub fn lsn(&self) -> Lsn {
        page_lsn(&self.data.buf)
    }
}

impl Deref for PageReadGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.data.buf
    }
}

impl Drop for PageReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, here; the latch goes before the pin.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        self.pool.unpin(self.frame);
    }
}

/// Exclusive access to a fixed page.
pub struct PageWriteGuard<'a> {
    pub(crate) pool: &'a BufferPool,
    pub(crate) frame: FrameId,
    pub(crate) page: PageId,
    pub(crate) data: ManuallyDrop<LatchWriteGuard<'a, FrameData>>,
    /// Whether changes are tracked for the log (a pool with a log, and not a redo guard).
    pub(crate) track: bool,
    /// Whether this guard changed the page (the frame is marked dirty at release).
    pub(crate) changed: bool,
}

impl PageWriteGuard<'_> {
    #[inline]
    pub fn page_id(&self) -> PageId {
        self.page
    }

    /// Mutable access to bytes `[offset, offset + len)`; records the range as changed.
    ///
    /// Panics if the range reaches past the page (a bug in the caller's layout arithmetic).
    #[inline]
    pub fn range_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.data.buf.len())
            .unwrap_or_else(|| {
                panic!(
                    "range {offset}+{len} outside page of {} bytes",
                    self.data.buf.len()
                )
            });
        self.changed = true;
        if self.track && len > 0 {
            add_range(&mut self.data.ranges, offset as u32, end as u32);
        }
        &mut self.data.buf[offset..end]
    }

    /// The whole page, mutable; everything after the checksum counts as changed.
    pub fn page_mut(&mut self) -> &mut [u8] {
        let len = self.data.buf.len();
        self.range_mut(OFFSET_MAGIC, len - OFFSET_MAGIC);
        &mut self.data.buf[..]
    }

    /// Sets the page LSN directly (recovery redo). Marks the page dirty.
    pub fn set_lsn(&mut self, lsn: Lsn) {
        self.stamp(lsn);
    }

    /// The LSN stamped in the page header.
    pub fn lsn(&self) -> Lsn {
        page_lsn(&self.data.buf)
    }

    /// Whether changes made through this guard are still waiting for the log.
    pub fn has_pending_changes(&self) -> bool {
        !self.data.ranges.is_empty()
    }

    /// Writes `lsn` into the header, marks the page changed and, if the frame was clean,
    /// makes `lsn` its recovery LSN.
    pub(crate) fn stamp(&mut self, lsn: Lsn) {
        self.data.buf[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
        self.changed = true;
        let frame = self.pool.frame(self.frame);
        if frame.rec_lsn.load(Ordering::Relaxed) == 0 {
            frame.rec_lsn.store(lsn.0, Ordering::Relaxed);
        }
    }
}

impl Deref for PageWriteGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.data.buf
    }
}

impl Drop for PageWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.data.ranges.is_empty() {
            self.pool.log_together(&mut [self]);
        }
        if self.changed {
            self.pool
                .frame(self.frame)
                .dirty
                .store(true, Ordering::Release);
        }
        // SAFETY: dropped exactly once, here; the latch goes before the pin.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        self.pool.unpin(self.frame);
    }
}

/// Adds `[start, end)` to a sorted list of disjoint, non-touching ranges, merging as needed.
fn add_range(ranges: &mut Vec<(u32, u32)>, start: u32, end: u32) {
    // Fast path: extends or follows the last range (the common append-like pattern).
    if let Some(last) = ranges.last_mut() {
        if start >= last.0 {
            if start <= last.1 {
                last.1 = last.1.max(end);
                return;
            }
            ranges.push((start, end));
            return;
        }
    } else {
        ranges.push((start, end));
        return;
    }
    // General case: find the first range that ends at or after `start`, merge all that touch.
    let first = ranges.partition_point(|r| r.1 < start);
    let mut last = first;
    let (mut s, mut e) = (start, end);
    while last < ranges.len() && ranges[last].0 <= e {
        s = s.min(ranges[last].0);
        e = e.max(ranges[last].1);
        last += 1;
    }
    if first == last {
        ranges.insert(first, (s, e));
    } else {
        ranges[first] = (s, e);
        ranges.drain(first + 1..last);
    }
}

#[cfg(test)]
mod tests {
    use super::add_range;

    #[test]
    fn ranges_merge_when_touching_or_overlapping() {
        let mut r = Vec::new();
        add_range(&mut r, 100, 110);
        add_range(&mut r, 50, 60);
        add_range(&mut r, 200, 210);
        assert_eq!(r, vec![(50, 60), (100, 110), (200, 210)]);
        add_range(&mut r, 60, 100); // touches both neighbours
        assert_eq!(r, vec![(50, 110), (200, 210)]);
        add_range(&mut r, 205, 220);
        add_range(&mut r, 10, 20);
        assert_eq!(r, vec![(10, 20), (50, 110), (200, 220)]);
        add_range(&mut r, 0, 300);
        assert_eq!(r, vec![(0, 300)]);
    }
}
