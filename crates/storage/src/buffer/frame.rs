//! Frames: the buffer pool's slots, each able to hold one page.
//!
//! A frame's state is split by who may touch it:
//!
//! | field        | protected by                                                        |
//! |--------------|---------------------------------------------------------------------|
//! | `data`       | the frame's own [`Latch`]: shared for readers, exclusive for writers, the loader and the evictor |
//! | `data.ranges`| the exclusive frame latch: only the write guard holding it touches them |
//! | `pins`       | atomic; incremented by a fix before it latches the frame (a hit without the page-table latch, so the clock may pick a frame a fix pins a moment later: the frame latch and the `page` check settle that race); a read guard with latching on holds no pin, its shared latch keeping the evictor off |
//! | `referenced` | atomic; set on every fix, cleared by the clock hand                  |
//! | `dirty`      | atomic; set by a write guard at release (exclusive frame latch held), cleared by write-back (frame latch held) |
//! | `rec_lsn`    | atomic; same discipline as `dirty`                                   |
//! | `mapped`     | atomic; the page table's assignment, stored under the page-table latch when it changes |
//!
//! Invariant: a frame whose latch is held by a guard is never given to another page (the
//! evictor must `try_write` the latch first); a fix that pinned a frame which was remapped
//! before it got the latch sees `page` changed and retries. Guards release the latch *before*
//! they unpin, so a frame nobody fixes has a free latch.
//!
//! A fix waits for a frame's latch only while the frame is assigned its page (`mapped`):
//! waiting on for a frame that went to another page would wait for whoever holds *that*
//! page, outside every latch order (a B+-tree scan holding a leaf, waiting for the frame of
//! a split's fresh leaf, while the split waits for the scan's leaf).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::memory::PageBuf;
use crate::latch::Latch;
use crate::page::PageId;

/// Index of a frame in the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameId(pub u32);

impl FrameId {
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The bytes of a frame and the page they currently hold.
///
/// `repr(C)`, fields in this order: what a fix reads (`buf`, `page`) first, so that they
/// share the frame's first cache line with its latch word (see [`Frame`]).
#[repr(C)]
pub(crate) struct FrameData {
    /// One page image, header included (in the pool's [`super::memory::FrameImages`]).
    pub buf: PageBuf,
    /// The page whose image `buf` holds; `None` while a load is in progress or after it failed.
    pub page: Option<PageId>,
    /// The changed byte ranges `[start, end)` of the write guard holding the frame, not yet
    /// logged: sorted, disjoint, not touching; empty whenever no tracking write guard holds
    /// the frame. Kept with the frame so that its capacity is reused by every later guard
    /// (a write guard allocates nothing once the frame has been written once).
    pub ranges: Vec<(u32, u32)>,
    /// The pending changes start from a zero-filled page (a fresh allocation, with a tracking
    /// guard): logged as "zero the page, then these ranges", not as a page image of zeroes.
    pub zeroed: bool,
}

/// Aligned to a cache line: frames fixed by different threads at once do not share a line
/// (their pin counts and latch words are written on every fix), and a frame's address is
/// its index shifted, not multiplied.
///
/// `repr(C)`, so that everything a fix touches lies in the frame's first cache line: the
/// pin count, the reference and dirty bits, the latch word and the frame's page and buffer
/// (`FrameData` and [`Latch`] are `repr(C)` too). The rest — a write guard's pending ranges
/// and the recovery LSN — is read and written only by writers, in the second line. Laid out
/// by the compiler, the latch and buffer had fallen in the first line and the pin count and
/// reference bit in the second, so every fix of a cold frame missed the cache twice
/// (`perf annotate` of the shared fixes: 27% of their samples on the reference bit's load,
/// another 4.5% on the latch word's).
#[repr(C, align(64))]
pub(crate) struct Frame {
    /// Guards (and fixes in progress) on this frame.
    pub pins: AtomicU32,
    /// Clock reference bit (second chance).
    pub referenced: AtomicBool,
    /// The image differs from the page store's.
    pub dirty: AtomicBool,
    /// Protects the page image and `FrameData::page`.
    pub data: Latch<FrameData>,
    /// LSN of the first logged change since the frame was last clean; 0 when none.
    pub rec_lsn: AtomicU64,
    /// The page the page table assigns this frame ([`NO_PAGE`] for none), stored when the
    /// table changes: a fix waiting for the latch of a frame it found in the directory asks
    /// it whether the frame still holds its page ([`Frame::holds`]).
    pub mapped: AtomicU64,
}

/// [`Frame::mapped`] of a frame assigned no page.
pub(crate) const NO_PAGE: u64 = u64::MAX;

impl Frame {
    /// Takes one pin (a fix in progress or a guard).
    #[inline]
    pub fn pin(&self) {
        self.pins.fetch_add(1, Ordering::Acquire);
    }

    /// Gives back one pin.
    #[inline]
    pub fn unpin(&self) {
        self.pins.fetch_sub(1, Ordering::Release);
    }

    pub fn new(buf: PageBuf, latching: bool) -> Frame {
        Frame {
            data: Latch::new(
                FrameData {
                    buf,
                    page: None,
                    ranges: Vec::new(),
                    zeroed: false,
                },
                latching,
            ),
            pins: AtomicU32::new(0),
            referenced: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
            rec_lsn: AtomicU64::new(0),
            mapped: AtomicU64::new(NO_PAGE),
        }
    }

    /// Whether the page table assigns this frame to `id` now: what a fix waiting for the
    /// frame's latch asks, to stop waiting once the frame has gone to another page.
    #[inline]
    pub fn holds(&self, id: PageId) -> bool {
        self.mapped.load(Ordering::Acquire) == id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::memory::{FrameImages, FrameMemory};

    /// Everything a fix touches lies in the frame's first cache line; frames are one line
    /// apart in the pool's array.
    #[test]
    fn a_fix_touches_one_cache_line() {
        let images = FrameImages::new(1, 64, FrameMemory::Small).unwrap();
        let frame = Frame::new(images.image(0), true);
        let base = &frame as *const Frame as usize;
        let end_of = |field: usize, size: usize| field - base + size;
        // SAFETY: no guard exists; the frame is only read here.
        let data = unsafe { frame.data.value() };
        for (what, end) in [
            (
                "pins",
                end_of(&frame.pins as *const _ as usize, size_of::<AtomicU32>()),
            ),
            (
                "referenced",
                end_of(&frame.referenced as *const _ as usize, 1),
            ),
            ("dirty", end_of(&frame.dirty as *const _ as usize, 1)),
            ("latch word", end_of(&frame.data as *const _ as usize, 8)),
            (
                "buf",
                end_of(&data.buf as *const _ as usize, size_of::<PageBuf>()),
            ),
            (
                "page",
                end_of(&data.page as *const _ as usize, size_of::<Option<PageId>>()),
            ),
        ] {
            assert!(end <= 64, "{what} ends at byte {end} of the frame");
        }
        assert_eq!(base % 64, 0);
        assert!(size_of::<Frame>() <= 128);
    }
}
