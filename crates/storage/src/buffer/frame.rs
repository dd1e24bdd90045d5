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
//!
//! Invariant: a frame whose latch is held by a guard is never given to another page (the
//! evictor must `try_write` the latch first); a fix that pinned a frame which was remapped
//! before it got the latch sees `page` changed and retries. Guards release the latch *before*
//! they unpin, so a frame nobody fixes has a free latch.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

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
pub(crate) struct FrameData {
    /// One page image, header included.
    pub buf: Box<[u8]>,
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
#[repr(align(64))]
pub(crate) struct Frame {
    /// Protects the page image and `FrameData::page`.
    pub data: Latch<FrameData>,
    /// Guards (and fixes in progress) on this frame.
    pub pins: AtomicU32,
    /// Clock reference bit (second chance).
    pub referenced: AtomicBool,
    /// The image differs from the page store's.
    pub dirty: AtomicBool,
    /// LSN of the first logged change since the frame was last clean; 0 when none.
    pub rec_lsn: AtomicU64,
}

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

    pub fn new(page_size: usize, latching: bool) -> Frame {
        Frame {
            data: Latch::new(
                FrameData {
                    buf: vec![0u8; page_size].into_boxed_slice(),
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
        }
    }
}
