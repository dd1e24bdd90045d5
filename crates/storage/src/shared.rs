//! The shared-write counter: where every thread's transactions meet.
//!
//! A structure that every thread writes — a latch word, a counter, a queue head — is a cache
//! line that moves from core to core on each write, and a latch also makes threads wait for
//! each other. On two cores such places cost little; on sixteen they decide whether the engine
//! scales. This counter makes them visible on any machine: each such place calls
//! [`bump`] with its [`Place`] whenever a transaction acquires a latch, or performs a
//! read-modify-write, on memory that every thread writes. `glass profile` prints the counts
//! per transaction by place, and a test of the paper mix's path (`engine/tests/shared_writes.rs`)
//! fails when a place appears that is not in its budget.
//!
//! What is *not* counted: per-thread or per-shard structures (a thread's own shard of the
//! transaction ids, its own coarse-lock partition), latches on pages and records that only
//! one thread's transactions use in a partitioned workload (a warehouse's rows), and reads
//! that write nothing (an optimistic read, a plain load).
//!
//! Like [`crate::counters`], the counts are per thread (`Cell`s in one thread-local array:
//! a bump is a load, an add and a store), compiled in with the crate feature `counters`
//! and compiled out without it. Places that the stripped preset switches off (locking,
//! latching, the log) are simply never reached there, so its count is zero.

#[cfg(feature = "counters")]
use std::cell::Cell;

/// A place where the transactions of every thread write the same memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Place {
    /// The log buffer: every appended record (`wal::log`).
    LogAppend = 0,
    /// The log's writer latch and group commit: every force, every commit that waits for one.
    LogForce,
    /// The log's end read under the buffer latch (`LogManager::end_lsn`).
    LogEnd,
    /// The database's and tables' intention locks when they are not partitioned
    /// (`txn::lock`, one lock head per table).
    LockCoarse,
    /// The lock manager's wait-for graph (a wait, or a release that wakes a waiter).
    LockGraph,
    /// The inner nodes of a B+-tree: latched by every descent, in every thread.
    BtreeInner,
    /// A heap file's free-space map latch (inserts and updates that change a page's room).
    HeapFreeSpace,
    /// A heap file's first page, latched by each thread's first new page of the file (later new
    /// pages link after the thread's own page).
    HeapTail,
    /// The buffer pool's page table (a miss or a page allocation) and page allocator.
    PageTable,
    /// A main-memory index's latch (`page-access` off).
    MemIndex,
    /// A latched read of a read-only table's heap page (`HeapFile::with_unchanging_record`):
    /// every thread reads TPC-C's items, ten a New-Order, and a shared latch writes the
    /// frame's latch word at the fix and again at the release.
    ReadOnlyPage,
    /// The doublewrite file's batch (`doublewrite::DoublewriteStore`): every page written back
    /// through it, every read of a page that may still be in a batch rather than the page
    /// file, and every full batch (the writer thread woken, or the batch written by the
    /// thread that found it full).
    Doublewrite,
}

/// Number of [`Place`]s.
pub const PLACES: usize = 12;

impl Place {
    /// Every place, in declaration order (`ALL[p as usize] == p`).
    pub const ALL: [Place; PLACES] = [
        Place::LogAppend,
        Place::LogForce,
        Place::LogEnd,
        Place::LockCoarse,
        Place::LockGraph,
        Place::BtreeInner,
        Place::HeapFreeSpace,
        Place::HeapTail,
        Place::PageTable,
        Place::MemIndex,
        Place::ReadOnlyPage,
        Place::Doublewrite,
    ];

    /// The name `glass profile` prints.
    pub const fn name(self) -> &'static str {
        match self {
            Place::LogAppend => "log-append",
            Place::LogForce => "log-force",
            Place::LogEnd => "log-end",
            Place::LockCoarse => "lock-coarse",
            Place::LockGraph => "lock-graph",
            Place::BtreeInner => "btree-inner",
            Place::HeapFreeSpace => "heap-free-space",
            Place::HeapTail => "heap-tail",
            Place::PageTable => "page-table",
            Place::MemIndex => "mem-index",
            Place::ReadOnlyPage => "read-only-page",
            Place::Doublewrite => "doublewrite",
        }
    }
}

#[cfg(feature = "counters")]
thread_local! {
    static COUNTS: [Cell<u64>; PLACES] = const { [const { Cell::new(0) }; PLACES] };
}

/// Counts one latch acquisition or read-modify-write at `place` on this thread.
#[inline(always)]
pub fn bump(place: Place) {
    #[cfg(feature = "counters")]
    {
        let _ = COUNTS.try_with(|c| {
            let cell = &c[place as usize];
            cell.set(cell.get() + 1);
        });
    }
    #[cfg(not(feature = "counters"))]
    let _ = place;
}

/// This thread's counts so far, indexed by `Place as usize`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedWrites(pub [u64; PLACES]);

impl SharedWrites {
    /// The count at `place`.
    pub fn at(&self, place: Place) -> u64 {
        self.0[place as usize]
    }

    /// Every place's count added up.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// `self - earlier`, place by place (saturating).
    pub fn since(&self, earlier: &SharedWrites) -> SharedWrites {
        SharedWrites(std::array::from_fn(|i| {
            self.0[i].saturating_sub(earlier.0[i])
        }))
    }

    /// The places with a nonzero count, with their counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (Place, u64)> + '_ {
        Place::ALL
            .iter()
            .map(|&p| (p, self.at(p)))
            .filter(|&(_, n)| n > 0)
    }
}

/// This thread's counts now.
pub fn snapshot() -> SharedWrites {
    #[cfg(feature = "counters")]
    {
        COUNTS
            .try_with(|c| SharedWrites(std::array::from_fn(|i| c[i].get())))
            .unwrap_or_default()
    }
    #[cfg(not(feature = "counters"))]
    SharedWrites::default()
}

#[cfg(all(test, feature = "counters"))]
mod tests {
    use super::*;

    #[test]
    fn places_are_listed_in_order_with_distinct_names() {
        for (i, p) in Place::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i);
        }
        let names: std::collections::HashSet<_> = Place::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), PLACES);
    }

    #[test]
    fn counts_are_per_thread_and_subtract() {
        let before = snapshot();
        bump(Place::LogAppend);
        bump(Place::LogAppend);
        bump(Place::BtreeInner);
        let d = snapshot().since(&before);
        assert_eq!(d.at(Place::LogAppend), 2);
        assert_eq!(d.at(Place::BtreeInner), 1);
        assert_eq!(d.total(), 3);
        assert_eq!(
            d.nonzero().collect::<Vec<_>>(),
            [(Place::LogAppend, 2), (Place::BtreeInner, 1)]
        );
        let other = std::thread::spawn(snapshot).join().unwrap();
        assert_eq!(other.total(), 0, "another thread starts at zero");
    }
}
