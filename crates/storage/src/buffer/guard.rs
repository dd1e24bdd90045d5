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
//! outlives the guard; the release hands the frame's range list to the log as it is
//! (`BufferPool::log_pending`).
//!
//! Cost: a guard is the frame pointer and the page id (the write guard adds the pool, for its
//! log, and two flags), so a fix hands it back in registers. Releasing a read guard is two
//! atomic instructions on the frame (latch, then pin); a write guard adds the log hand-off
//! (only when it has pending ranges, out of line) and the dirty flag. Recording a range is
//! inlined into `range_mut` for the common cases (first range, appended range, extended last
//! range).

use std::ops::Deref;
use std::sync::atomic::Ordering;

use super::frame::{Frame, FrameData};
use super::pool::BufferPool;
use crate::page::{page_lsn, Lsn, PageId, OFFSET_LSN, OFFSET_MAGIC};

/// Shared access to a fixed page.
///
/// Two words: the frame (whose latch this guard holds shared) and the page id. Small enough
/// that a fix returns it in registers and its drop is one atomic instruction on one pointer
/// (the latch's release). Without latching, where the latch keeps nobody off, the guard also
/// pins the frame and its drop gives the pin back.
pub struct PageReadGuard<'a> {
    /// Its latch held in shared mode (and pinned without latching); released by `drop`.
    pub(crate) frame: &'a Frame,
    pub(crate) page: PageId,
}

impl<'a> PageReadGuard<'a> {
    /// Wraps a frame that the caller latched in shared mode (and pinned, without latching),
    /// holding `page`.
    #[inline]
    pub(crate) fn new(frame: &'a Frame, page: PageId) -> PageReadGuard<'a> {
        PageReadGuard { frame, page }
    }

    #[inline]
    fn data(&self) -> &FrameData {
        // SAFETY: this guard holds the frame latch in shared mode until it is dropped.
        unsafe { self.frame.data.value() }
    }

    #[inline]
    pub fn page_id(&self) -> PageId {
        self.page
    }

    /// The LSN stamped in the page header.
    pub fn lsn(&self) -> Lsn {
        page_lsn(&self.data().buf)
    }
}

impl Deref for PageReadGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.data().buf
    }
}

impl Drop for PageReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this guard holds the shared latch and no reference from `data()` outlives
        // it. The latch goes before the pin (held only without latching).
        unsafe { self.frame.data.unlock_shared() };
        if !self.frame.data.is_enabled() {
            self.frame.unpin();
        }
    }
}

/// Exclusive access to a fixed page.
pub struct PageWriteGuard<'a> {
    pub(crate) pool: &'a BufferPool,
    /// Pinned, its latch held exclusively; released by `drop`.
    pub(crate) frame: &'a Frame,
    pub(crate) page: PageId,
    /// Whether changes are tracked for the log (a pool with a log, and not a redo guard).
    pub(crate) track: bool,
    /// Whether this guard changed the page (the frame is marked dirty at release).
    pub(crate) changed: bool,
}

impl<'a> PageWriteGuard<'a> {
    /// Wraps a frame that the caller pinned and latched exclusively, holding `page`.
    #[inline]
    pub(crate) fn new(
        pool: &'a BufferPool,
        frame: &'a Frame,
        page: PageId,
        track: bool,
    ) -> PageWriteGuard<'a> {
        PageWriteGuard {
            pool,
            frame,
            page,
            track,
            changed: false,
        }
    }

    #[inline]
    pub(crate) fn data(&self) -> &FrameData {
        // SAFETY: this guard holds the frame latch exclusively; `&self` rules out a live
        // `&mut` from `data_mut`.
        unsafe { self.frame.data.value() }
    }

    #[inline]
    pub(crate) fn data_mut(&mut self) -> &mut FrameData {
        // SAFETY: this guard holds the frame latch exclusively and `&mut self` makes this the
        // only reference to the frame's data.
        unsafe { self.frame.data.value_mut() }
    }

    #[inline]
    pub fn page_id(&self) -> PageId {
        self.page
    }

    /// Mutable access to bytes `[offset, offset + len)`; records the range as changed.
    ///
    /// Panics if the range reaches past the page (a bug in the caller's layout arithmetic).
    #[inline(always)]
    pub fn range_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        let track = self.track;
        self.changed = true;
        let FrameData { buf, ranges, .. } = self.data_mut();
        let page_bytes = buf.len();
        let Some(bytes) = offset
            .checked_add(len)
            .and_then(|end| buf.get_mut(offset..end))
        else {
            range_outside_page(offset, len, page_bytes)
        };
        if track && len > 0 {
            add_range(ranges, offset as u32, (offset + len) as u32);
        }
        bytes
    }

    /// Zero-fills the page as a fresh allocation: with tracking, no range is recorded; the
    /// change is logged as "zeroed" with whatever is written after it ([`PageRedo::zeroed`]).
    ///
    /// [`PageRedo::zeroed`]: crate::page::PageRedo::zeroed
    pub(crate) fn zero_fresh(&mut self) {
        let track = self.track;
        self.changed = true;
        let data = self.data_mut();
        data.buf.fill(0);
        data.ranges.clear();
        data.zeroed = track;
    }

    /// The whole page, mutable; everything after the checksum counts as changed.
    pub fn page_mut(&mut self) -> &mut [u8] {
        let len = self.data().buf.len();
        self.range_mut(OFFSET_MAGIC, len - OFFSET_MAGIC);
        &mut self.data_mut().buf[..]
    }

    /// Sets the page LSN directly (recovery redo). Marks the page dirty.
    pub fn set_lsn(&mut self, lsn: Lsn) {
        self.stamp(lsn);
    }

    /// The LSN stamped in the page header.
    pub fn lsn(&self) -> Lsn {
        page_lsn(&self.data().buf)
    }

    /// Whether changes made through this guard are still waiting for the log.
    pub fn has_pending_changes(&self) -> bool {
        let data = self.data();
        !data.ranges.is_empty() || data.zeroed
    }

    /// Writes `lsn` into the header, marks the page changed and, if the frame was clean,
    /// makes `lsn` its recovery LSN.
    #[inline]
    pub(crate) fn stamp(&mut self, lsn: Lsn) {
        self.data_mut().buf[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
        self.changed = true;
        if self.frame.rec_lsn.load(Ordering::Relaxed) == 0 {
            self.frame.rec_lsn.store(lsn.0, Ordering::Relaxed);
        }
    }
}

impl Deref for PageWriteGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.data().buf
    }
}

impl Drop for PageWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.has_pending_changes() {
            self.pool.log_pending(self);
        }
        if self.changed {
            self.frame.dirty.store(true, Ordering::Release);
        }
        // SAFETY: this guard holds the exclusive latch and no reference from `data()` or
        // `data_mut()` outlives it. The latch goes before the pin.
        unsafe { self.frame.data.unlock_exclusive() };
        self.frame.unpin();
    }
}

#[cold]
#[inline(never)]
fn range_outside_page(offset: usize, len: usize, page_bytes: usize) -> ! {
    panic!("range {offset}+{len} outside page of {page_bytes} bytes")
}

/// Adds `[start, end)` to a sorted list of disjoint, non-touching ranges, merging as needed.
///
/// Inlined into [`PageWriteGuard::range_mut`]: the common cases (the first range, a range
/// after the last one, a range that overlaps or touches the last one) cost a few compares and
/// a store; anything else goes to [`add_range_general`].
#[inline]
fn add_range(ranges: &mut Vec<(u32, u32)>, start: u32, end: u32) {
    match ranges.last_mut() {
        None => ranges.push((start, end)),
        Some(last) if start > last.1 => ranges.push((start, end)),
        Some(last) if start >= last.0 => last.1 = last.1.max(end),
        Some(_) => add_range_general(ranges, start, end),
    }
}

/// The general case of [`add_range`]: `start` lies before the last range's start. Range
/// lists are short (a handful of ranges per guard), so a linear scan from the front finds the
/// place and a new range is shifted in by hand rather than by a `memmove` call.
#[inline(never)]
fn add_range_general(ranges: &mut Vec<(u32, u32)>, start: u32, end: u32) {
    // The first range that ends at or after `start`: every range before it stays.
    let first = ranges
        .iter()
        .position(|r| r.1 >= start)
        .unwrap_or(ranges.len());
    let mut last = first;
    let (mut s, mut e) = (start, end);
    while last < ranges.len() && ranges[last].0 <= e {
        s = s.min(ranges[last].0);
        e = e.max(ranges[last].1);
        last += 1;
    }
    if first == last {
        // No range touches the new one: shift the tail right by one and put it at `first`.
        ranges.push((s, e));
        let tail = &mut ranges[first..];
        for i in (1..tail.len()).rev() {
            tail[i] = tail[i - 1];
        }
        tail[0] = (s, e);
    } else {
        ranges[first] = (s, e);
        ranges.drain(first + 1..last);
    }
}

// A read guard is two words (frame, page id), so a fix hands it back in registers.
const _: () = assert!(std::mem::size_of::<PageReadGuard<'static>>() == 16);

#[cfg(test)]
mod tests {
    use super::add_range;
    use proptest::prelude::*;

    proptest! {
        /// Against a model (the set of changed bytes): after any sequence of additions the
        /// list covers exactly the bytes added, and is sorted, disjoint and non-touching.
        #[test]
        fn ranges_match_a_byte_set_model(adds in prop::collection::vec((0u32..200, 1u32..24), 0..40)) {
            let mut ranges = Vec::new();
            let mut model = [false; 256];
            for (start, len) in adds {
                add_range(&mut ranges, start, start + len);
                model[start as usize..(start + len) as usize].fill(true);
            }
            let mut covered = [false; 256];
            for w in ranges.windows(2) {
                prop_assert!(w[0].1 < w[1].0, "ranges {:?} touch or are unsorted", w);
            }
            for &(s, e) in &ranges {
                prop_assert!(s < e);
                covered[s as usize..e as usize].fill(true);
            }
            prop_assert_eq!(covered, model);
        }
    }

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
