//! Replacement policy: clock (second chance) over unpinned frames.
//!
//! The hand sweeps the frames in a circle. A pinned frame is skipped, and so is one whose
//! latch is held (a read guard holds no pin when latching is on); an unpinned frame whose
//! reference bit is set gets a second chance (the bit is cleared); the first unpinned frame
//! with a clear bit is the victim. Two full sweeps without a victim mean every frame is pinned or
//! latched.
//!
//! The clock runs only under the exclusive page-table latch, which makes its sweep
//! the only sweep at a time; a fix may pin or latch a frame just after the clock looked (hits
//! take no table latch), and the victim's `try_write` then fails or the fix finds its page
//! changed.

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

    /// Where the hand points: the frame it looks at next.
    pub fn hand(&self) -> usize {
        self.hand
    }

    /// Picks an unpinned, unlatched frame, preferring ones not referenced since the last
    /// sweep; `None` if every frame is pinned or latched.
    pub fn pick(&mut self, frames: &[Frame]) -> Option<FrameId> {
        let n = frames.len();
        for _ in 0..2 * n {
            let i = self.hand;
            self.hand = if i + 1 == n { 0 } else { i + 1 };
            let frame = &frames[i];
            if frame.pins.load(Ordering::Acquire) != 0 || frame.data.is_locked() {
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
    use crate::buffer::memory::{FrameImages, FrameMemory};
    use std::sync::atomic::Ordering;

    #[test]
    fn clock_gives_second_chances_and_skips_pinned() {
        let images = FrameImages::new(3, 64, FrameMemory::Small).unwrap();
        let frames: Vec<Frame> = (0..3).map(|i| Frame::new(images.image(i), true)).collect();
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

    /// A read guard holds no pin when latching is on: the clock passes over its frame by the
    /// latch, and reports no victim when every frame is latched.
    #[test]
    fn clock_skips_latched_frames() {
        let images = FrameImages::new(3, 64, FrameMemory::Small).unwrap();
        let frames: Vec<Frame> = (0..3).map(|i| Frame::new(images.image(i), true)).collect();
        let mut clock = Clock::new();
        let held = frames[0].data.read();
        assert_eq!(clock.pick(&frames), Some(FrameId(1)));
        let (_b, _c) = (frames[1].data.read(), frames[2].data.write());
        assert_eq!(clock.pick(&frames), None);
        drop(held);
        assert_eq!(clock.pick(&frames), Some(FrameId(0)));
    }
}
