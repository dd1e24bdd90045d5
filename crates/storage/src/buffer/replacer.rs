//! Replacement policy: clock (second chance) over unpinned frames.
//!
//! The hand sweeps the frames in a circle. A pinned frame is skipped; an unpinned frame whose
//! reference bit is set gets a second chance (the bit is cleared); the first unpinned frame
//! with a clear bit is the victim. Two full sweeps without a victim mean every frame is pinned.
//!
//! The clock runs only under the exclusive page-table latch, which is what makes "unpinned"
//! stable while it looks (pins are taken only under the page-table latch).

use std::sync::atomic::Ordering;

use super::frame::{Frame, FrameId};

/// The clock hand; lives inside the page table and is protected by its latch.
pub(crate) struct Clock {
    hand: usize,
}

impl Clock {
    pub fn new() -> Clock {
        Clock { hand: 0 }
    }

    /// Picks an unpinned frame, preferring ones not referenced since the last sweep; `None` if
    /// every frame is pinned.
    pub fn pick(&mut self, frames: &[Frame]) -> Option<FrameId> {
        let n = frames.len();
        for _ in 0..2 * n {
            let i = self.hand;
            self.hand = if i + 1 == n { 0 } else { i + 1 };
            let frame = &frames[i];
            if frame.pins.load(Ordering::Acquire) != 0 {
                continue;
            }
            if frame.referenced.load(Ordering::Relaxed) {
                frame.referenced.store(false, Ordering::Relaxed);
                continue;
            }
            return Some(FrameId(i as u32));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn clock_gives_second_chances_and_skips_pinned() {
        let frames: Vec<Frame> = (0..3).map(|_| Frame::new(64, true)).collect();
        frames[0].referenced.store(true, Ordering::Relaxed);
        frames[1].pins.store(1, Ordering::Relaxed);
        let mut clock = Clock::new();
        // Frame 0 gets a second chance, frame 1 is pinned: frame 2 goes.
        assert_eq!(clock.pick(&frames), Some(FrameId(2)));
        // Frame 0's bit is now clear.
        assert_eq!(clock.pick(&frames), Some(FrameId(0)));
        for f in &frames {
            f.pins.store(1, Ordering::Relaxed);
        }
        assert_eq!(clock.pick(&frames), None);
    }
}
