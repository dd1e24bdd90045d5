//! Per-thread storage counters, read by the profiler.
//!
//! Every counter is a `Cell<u64>` field of one thread-local struct: bumping one is a load, an add
//! and a store, with no atomic instruction and no sharing between cores. One struct rather than a
//! thread-local per counter means a function that bumps several counters (an inlined buffer-pool
//! fix bumps `fixes`, `hits` and `latches`; a B+-tree step adds `node_visits`) computes the
//! thread-local address once and reaches every counter at a constant offset from it. The profiler
//! takes a [`snapshot`] before and after the measured phase on the measuring thread and subtracts
//! the two.
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
//! | `prefetches`   | records a prefetch hint started loading ([`crate::memstore`])     |
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

/// One thread's live counters: one `Cell` per [`StorageCounters`] field, plus the tracking switch.
#[cfg(feature = "counters")]
struct LiveCounters {
    fixes: Cell<u64>,
    unique_fixes: Cell<u64>,
    hits: Cell<u64>,
    misses: Cell<u64>,
    reads: Cell<u64>,
    writes: Cell<u64>,
    evictions: Cell<u64>,
    node_visits: Cell<u64>,
    latches: Cell<u64>,
    prefetches: Cell<u64>,
    unique_tracking: Cell<bool>,
}

#[cfg(feature = "counters")]
thread_local! {
    // Const-initialised and without `Drop`: an access is the thread pointer plus an offset, with
    // no lazy-initialisation check.
    static COUNTERS: LiveCounters = const {
        LiveCounters {
            fixes: Cell::new(0),
            unique_fixes: Cell::new(0),
            hits: Cell::new(0),
            misses: Cell::new(0),
            reads: Cell::new(0),
            writes: Cell::new(0),
            evictions: Cell::new(0),
            node_visits: Cell::new(0),
            latches: Cell::new(0),
            prefetches: Cell::new(0),
            unique_tracking: Cell::new(false),
        }
    };
    // Read only while unique tracking is on (it needs a lazily built hasher, so it cannot share
    // the const-initialised struct above).
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
    pub prefetches: u64,
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
                    prefetches: self.prefetches.$op(o.prefetches),
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
fn bump(field: impl FnOnce(&LiveCounters) -> &Cell<u64>) {
    COUNTERS.with(|c| {
        let c = field(c);
        c.set(c.get() + 1);
    });
}

/// Counts one page fix of `page` on this thread (and, with tracking on, a unique fix the first
/// time the page is seen in this scope).
#[inline]
pub fn bump_fix(page: u64) {
    #[cfg(feature = "counters")]
    {
        let tracking = COUNTERS.with(|c| {
            c.fixes.set(c.fixes.get() + 1);
            c.unique_tracking.get()
        });
        if tracking {
            note_unique(page);
        }
    }
    #[cfg(not(feature = "counters"))]
    let _ = page;
}

/// The tracking half of [`bump_fix`], out of line: only the profiler switches tracking on, so
/// the inlined fix path keeps just a flag test.
#[cfg(feature = "counters")]
#[cold]
#[inline(never)]
fn note_unique(page: u64) {
    if SEEN_PAGES.with(|s| s.borrow_mut().insert(page)) {
        bump(|c| &c.unique_fixes);
    }
}

/// Counts a fix that found its page in a frame.
#[inline]
pub fn bump_hit() {
    #[cfg(feature = "counters")]
    bump(|c| &c.hits);
}

/// Counts a fix that had to load or create its page.
#[inline]
pub fn bump_miss() {
    #[cfg(feature = "counters")]
    bump(|c| &c.misses);
}

/// Counts one page read from the page store.
#[inline]
pub fn bump_read() {
    #[cfg(feature = "counters")]
    bump(|c| &c.reads);
}

/// Counts one page write to the page store.
#[inline]
pub fn bump_write() {
    #[cfg(feature = "counters")]
    bump(|c| &c.writes);
}

/// Counts one frame given to another page.
#[inline]
pub fn bump_eviction() {
    #[cfg(feature = "counters")]
    bump(|c| &c.evictions);
}

/// Counts one B+-tree node visit.
#[inline]
pub fn bump_node_visit() {
    #[cfg(feature = "counters")]
    bump(|c| &c.node_visits);
}

/// Counts one latch acquisition on this thread.
#[inline]
pub fn bump_latch() {
    #[cfg(feature = "counters")]
    bump(|c| &c.latches);
}

/// Counts one record a prefetch hint started loading.
#[inline]
pub fn bump_prefetch() {
    #[cfg(feature = "counters")]
    bump(|c| &c.prefetches);
}

/// Latch acquisitions on this thread so far.
pub fn latch_acquisitions() -> u64 {
    snapshot().latches
}

/// Switches unique-page tracking on or off for this thread (and clears the set of seen pages).
pub fn set_unique_tracking(on: bool) {
    #[cfg(feature = "counters")]
    {
        COUNTERS.with(|c| c.unique_tracking.set(on));
        SEEN_PAGES.with(|s| s.borrow_mut().clear());
    }
    #[cfg(not(feature = "counters"))]
    let _ = on;
}

/// Starts a new unique-page scope (a transaction): forgets the pages seen so far.
#[inline]
pub fn begin_scope() {
    #[cfg(feature = "counters")]
    if COUNTERS.with(|c| c.unique_tracking.get()) {
        SEEN_PAGES.with(|s| s.borrow_mut().clear());
    }
}

/// This thread's counters now.
pub fn snapshot() -> StorageCounters {
    #[cfg(feature = "counters")]
    {
        COUNTERS.with(|c| StorageCounters {
            fixes: c.fixes.get(),
            unique_fixes: c.unique_fixes.get(),
            hits: c.hits.get(),
            misses: c.misses.get(),
            reads: c.reads.get(),
            writes: c.writes.get(),
            evictions: c.evictions.get(),
            node_visits: c.node_visits.get(),
            latches: c.latches.get(),
            prefetches: c.prefetches.get(),
        })
    }
    #[cfg(not(feature = "counters"))]
    StorageCounters::default()
}

/// Sets this thread's counters back to zero (the unique-page set too).
pub fn reset() {
    #[cfg(feature = "counters")]
    {
        COUNTERS.with(|c| {
            for counter in [
                &c.fixes,
                &c.unique_fixes,
                &c.hits,
                &c.misses,
                &c.reads,
                &c.writes,
                &c.evictions,
                &c.node_visits,
                &c.latches,
                &c.prefetches,
            ] {
                counter.set(0);
            }
        });
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

    #[test]
    fn counters_are_per_thread() {
        reset();
        bump_latch();
        bump_node_visit();
        let other = std::thread::spawn(|| {
            bump_latch();
            bump_latch();
            bump_eviction();
            snapshot()
        })
        .join()
        .unwrap();
        assert_eq!(
            (other.latches, other.evictions, other.node_visits),
            (2, 1, 0)
        );
        let mine = snapshot();
        assert_eq!((mine.latches, mine.evictions, mine.node_visits), (1, 0, 1));
        assert_eq!(latch_acquisitions(), 1);
    }
}
