//! Page-latch handoffs: latched fixes of a page whose last latched fix was another thread's.
//!
//! A page latch is a word in the frame's first cache line, written at every fix and release;
//! when the next fix of a frame is another thread's, that line moves between cores, and on
//! many cores such moves, not instructions, bound throughput. The shared-write counter
//! (`crate::shared`) names the places written by *every* thread by construction; this counts
//! what actually happened in a run of several threads, page by page: each frame remembers the
//! thread of its last latched fix, and a fix by another thread counts one handoff, by the
//! page's kind. Optimistic reads ([`super::BufferPool::read_optimistic`]) write nothing and
//! are not counted. Off unless asked for ([`super::BufferPool::track_handoffs`], `glass bench
//! --handoffs`): then every latched fix pays a load and, when the thread changed, a store
//! (and a handoff an atomic add).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam::utils::CachePadded;

use crate::page::PageKind;

/// Handoffs counted so far, by the kind of page handed off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handoffs {
    pub btree_inner: u64,
    pub btree_leaf: u64,
    pub heap: u64,
    /// Meta pages, and pages that read as no known kind.
    pub other: u64,
}

impl Handoffs {
    pub fn total(&self) -> u64 {
        self.btree_inner + self.btree_leaf + self.heap + self.other
    }

    /// `self - earlier`, kind by kind (saturating).
    pub fn since(&self, earlier: &Handoffs) -> Handoffs {
        Handoffs {
            btree_inner: self.btree_inner.saturating_sub(earlier.btree_inner),
            btree_leaf: self.btree_leaf.saturating_sub(earlier.btree_leaf),
            heap: self.heap.saturating_sub(earlier.heap),
            other: self.other.saturating_sub(earlier.other),
        }
    }
}

/// The pool's record of who fixed each frame last, and the counts.
pub(crate) struct HandoffTracker {
    /// Per frame: 1 + the thread index (`crate::shard::thread_index`) of its last latched fix;
    /// 0 before any since tracking began.
    last: Box<[AtomicU32]>,
    /// By [`kind_slot`].
    counts: [CachePadded<AtomicU64>; 4],
}

/// Which count a page kind goes to: inner, leaf, heap, other.
fn kind_slot(kind: u8) -> usize {
    match PageKind::from_u8(kind) {
        Some(PageKind::BTreeInner) => 0,
        Some(PageKind::BTreeLeaf) => 1,
        Some(PageKind::Heap) => 2,
        _ => 3,
    }
}

impl HandoffTracker {
    pub(crate) fn new(frames: usize) -> HandoffTracker {
        HandoffTracker {
            last: (0..frames).map(|_| AtomicU32::new(0)).collect(),
            counts: Default::default(),
        }
    }

    /// A latched fix of frame `frame` by this thread; `kind` reads the page's kind byte
    /// (called only on a handoff).
    #[inline]
    pub(crate) fn fixed(&self, frame: usize, kind: impl FnOnce() -> u8) {
        let Some(last) = self.last.get(frame) else {
            return;
        };
        let me = crate::shard::thread_index() as u32 + 1;
        let before = last.load(Ordering::Relaxed);
        if before == me {
            return;
        }
        last.store(me, Ordering::Relaxed);
        if before != 0 {
            self.counts[kind_slot(kind())].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn counts(&self) -> Handoffs {
        let at = |i: usize| self.counts[i].load(Ordering::Relaxed);
        Handoffs {
            btree_inner: at(0),
            btree_leaf: at(1),
            heap: at(2),
            other: at(3),
        }
    }
}
