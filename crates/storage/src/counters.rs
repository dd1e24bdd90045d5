//! Per-thread storage counters, read by the profiler.
//!
//! Every counter is a thread-local `Cell<u64>`: bumping one is a load, an add and a store, with
//! no atomic instruction and no sharing between cores. The profiler takes a [`snapshot`] before
//! and after the measured phase on the measuring thread and subtracts the two.
//!
//! | counter        | bumped by                                                         |
//! |----------------|-------------------------------------------------------------------|
//! | `fixes`        | every buffer-pool fix (shared, exclusive, allocate, redo)         |
//! | `unique_fixes` | the first fix of each page since [`begin_scope`] (tracking on)    |
//! | `hits`         | a fix that found its page in a frame                              |
//! | `misses`       | a fix that had to load its page (or create a fresh one)           |
//! | `reads`        | page reads from the page store                                    |
//! | `writes`       | page writes to the page store                                     |
//! | `evictions`    | frames taken away from one page for another                       |
//! | `node_visits`  | B+-tree nodes visited (bumped by the B+-tree)                     |
//! | `latches`      | latch acquisitions (bumped by [`crate::latch::Latch`])            |
//!
//! Unique-page tracking keeps a thread-local set of page ids, so it costs a hash insert per fix;
//! it is off until [`set_unique_tracking`] switches it on.
//!
//! With the crate feature `counters` off, every `bump_*` function has an empty body and
//! compiles to nothing; [`snapshot`] then returns zeroes.

use std::ops::{Add, Sub};

#[cfg(feature = "counters")]
use std::cell::{Cell, RefCell};
#[cfg(feature = "counters")]
use std::collections::HashSet;

#[cfg(feature = "counters")]
thread_local! {
    static FIXES: Cell<u64> = const { Cell::new(0) };
    static UNIQUE_FIXES: Cell<u64> = const { Cell::new(0) };
    static HITS: Cell<u64> = const { Cell::new(0) };
    static MISSES: Cell<u64> = const { Cell::new(0) };
    static READS: Cell<u64> = const { Cell::new(0) };
    static WRITES: Cell<u64> = const { Cell::new(0) };
    static EVICTIONS: Cell<u64> = const { Cell::new(0) };
    static NODE_VISITS: Cell<u64> = const { Cell::new(0) };
    static LATCHES: Cell<u64> = const { Cell::new(0) };
    static UNIQUE_TRACKING: Cell<bool> = const { Cell::new(false) };
    static SEEN_PAGES: RefCell<HashSet<u64>> = RefCell::new(HashSet::new());
}

/// A snapshot of one thread's storage counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageCounters {
    pub fixes: u64,
    pub unique_fixes: u64,
    pub hits: u64,
    pub misses: u64,
    pub reads: u64,
    pub writes: u64,
    pub evictions: u64,
    pub node_visits: u64,
    pub latches: u64,
}

macro_rules! field_wise {
    ($trait:ident, $method:ident, $op:ident) => {
        impl $trait for StorageCounters {
            type Output = StorageCounters;
            fn $method(self, o: StorageCounters) -> StorageCounters {
                StorageCounters {
                    fixes: self.fixes.$op(o.fixes),
                    unique_fixes: self.unique_fixes.$op(o.unique_fixes),
                    hits: self.hits.$op(o.hits),
                    misses: self.misses.$op(o.misses),
                    reads: self.reads.$op(o.reads),
                    writes: self.writes.$op(o.writes),
                    evictions: self.evictions.$op(o.evictions),
                    node_visits: self.node_visits.$op(o.node_visits),
                    latches: self.latches.$op(o.latches),
                }
            }
        }
    };
}

// Saturating subtraction: a `reset()` between two snapshots must not panic the profiler.
field_wise!(Sub, sub, saturating_sub);
field_wise!(Add, add, wrapping_add);

#[cfg(feature = "counters")]
#[inline(always)]
fn bump(c: &'static std::thread::LocalKey<Cell<u64>>) {
    c.with(|c| c.set(c.get() + 1));
}

/// Counts one page fix of `page` on this thread (and, with tracking on, a unique fix the first
/// time the page is seen in this scope).
#[inline]
pub fn bump_fix(page: u64) {
    #[cfg(feature = "counters")]
    {
        bump(&FIXES);
        if UNIQUE_TRACKING.with(|t| t.get()) && SEEN_PAGES.with(|s| s.borrow_mut().insert(page)) {
            bump(&UNIQUE_FIXES);
        }
    }
    #[cfg(not(feature = "counters"))]
    let _ = page;
}

/// Counts a fix that found its page in a frame.
#[inline]
pub fn bump_hit() {
    #[cfg(feature = "counters")]
    bump(&HITS);
}

/// Counts a fix that had to load or create its page.
#[inline]
pub fn bump_miss() {
    #[cfg(feature = "counters")]
    bump(&MISSES);
}

/// Counts one page read from the page store.
#[inline]
pub fn bump_read() {
    #[cfg(feature = "counters")]
    bump(&READS);
}

/// Counts one page write to the page store.
#[inline]
pub fn bump_write() {
    #[cfg(feature = "counters")]
    bump(&WRITES);
}

/// Counts one frame given to another page.
#[inline]
pub fn bump_eviction() {
    #[cfg(feature = "counters")]
    bump(&EVICTIONS);
}

/// Counts one B+-tree node visit.
#[inline]
pub fn bump_node_visit() {
    #[cfg(feature = "counters")]
    bump(&NODE_VISITS);
}

/// Counts one latch acquisition on this thread.
#[inline]
pub fn bump_latch() {
    #[cfg(feature = "counters")]
    bump(&LATCHES);
}

/// Latch acquisitions on this thread so far.
pub fn latch_acquisitions() -> u64 {
    snapshot().latches
}

/// Switches unique-page tracking on or off for this thread (and clears the set of seen pages).
pub fn set_unique_tracking(on: bool) {
    #[cfg(feature = "counters")]
    {
        UNIQUE_TRACKING.with(|t| t.set(on));
        SEEN_PAGES.with(|s| s.borrow_mut().clear());
    }
    #[cfg(not(feature = "counters"))]
    let _ = on;
}

/// Starts a new unique-page scope (a transaction): forgets the pages seen so far.
#[inline]
pub fn begin_scope() {
    #[cfg(feature = "counters")]
    if UNIQUE_TRACKING.with(|t| t.get()) {
        SEEN_PAGES.with(|s| s.borrow_mut().clear());
    }
}

/// This thread's counters now.
pub fn snapshot() -> StorageCounters {
    #[cfg(feature = "counters")]
    {
        StorageCounters {
            fixes: FIXES.with(|c| c.get()),
            unique_fixes: UNIQUE_FIXES.with(|c| c.get()),
            hits: HITS.with(|c| c.get()),
            misses: MISSES.with(|c| c.get()),
            reads: READS.with(|c| c.get()),
            writes: WRITES.with(|c| c.get()),
            evictions: EVICTIONS.with(|c| c.get()),
            node_visits: NODE_VISITS.with(|c| c.get()),
            latches: LATCHES.with(|c| c.get()),
        }
    }
    #[cfg(not(feature = "counters"))]
    StorageCounters::default()
}

/// Sets this thread's counters back to zero (the unique-page set too).
pub fn reset() {
    #[cfg(feature = "counters")]
    {
        for c in [
            &FIXES,
            &UNIQUE_FIXES,
            &HITS,
            &MISSES,
            &READS,
            &WRITES,
            &EVICTIONS,
            &NODE_VISITS,
            &LATCHES,
        ] {
            c.with(|c| c.set(0));
        }
        SEEN_PAGES.with(|s| s.borrow_mut().clear());
    }
}

#[cfg(all(test, feature = "counters"))]
mod tests {
    use super::*;

    #[test]
    fn unique_fixes_count_each_page_once_per_scope() {
        reset();
        set_unique_tracking(true);
        for p in [1, 2, 1, 3, 2] {
            bump_fix(p);
        }
        let s = snapshot();
        assert_eq!(s.fixes, 5);
        assert_eq!(s.unique_fixes, 3);
        begin_scope();
        bump_fix(1);
        assert_eq!(snapshot().unique_fixes, 4);
        set_unique_tracking(false);
        bump_fix(9);
        assert_eq!(snapshot().unique_fixes, 4);
        assert_eq!(snapshot().fixes, 7);
    }

    #[test]
    fn snapshots_subtract_and_add() {
        reset();
        let before = snapshot();
        bump_hit();
        bump_hit();
        bump_miss();
        bump_read();
        let d = snapshot() - before;
        assert_eq!((d.hits, d.misses, d.reads, d.writes), (2, 1, 1, 0));
        assert_eq!((d + d).hits, 4);
        reset();
        assert_eq!(snapshot().hits, 0);
        // Subtracting a later snapshot from an earlier one saturates instead of panicking.
        assert_eq!((StorageCounters::default() - d).hits, 0);
    }
}
