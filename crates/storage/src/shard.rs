//! Per-thread sharding: a number for each thread, and a latch whose readers write only their
//! own shard.
//!
//! [`thread_index`] numbers threads as they first ask, each the lowest number no living thread
//! holds (0, 1, 2, …): a thread that ends gives its number back. Structures split into shards
//! (the main-memory record store, the transaction ids, the active-transaction table, the lock
//! manager's coarse-lock partitions, the log's copy shards and runs) take `thread_index() %
//! shards`, so up to `shards` threads each get one of their own, and a thread always gets the
//! same one. Numbers given back keep a process whose threads come and go (`glass scale`'s
//! points, a server's connections) within the shards: numbered in order of arrival, the
//! sixteen workers of `glass scale`'s last point were numbered past 64 and shared shards
//! (the log's runs, kept by the first 64 numbers only, were off for them).
//!
//! [`ReadMostly`] is a reader-writer latch for data read on every operation and written almost
//! never (the catalog's name directory, a table's list of secondary indexes). A plain
//! [`crate::latch::Latch`] acquired shared is still a write — an atomic add to its one latch
//! word, which every reading thread then pulls into its core in turn. `ReadMostly` keeps
//! [`READ_SHARDS`] latch words on cache lines of their own: a reader latches its thread's
//! shard only, a writer every shard in order. Readers on different shards share nothing; a
//! writer pays `READ_SHARDS` acquisitions.
//!
//! ```text
//!   reader (thread i):  shard[i % N].lock_shared ─ read value ─ unlock
//!   writer:             shard[0].lock_exclusive … shard[N-1].lock_exclusive ─ write ─ unlock all
//! ```

use std::cell::{Cell, UnsafeCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam::utils::CachePadded;
use parking_lot::lock_api::RawRwLock as _;

/// The next number never given.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

/// Numbers given back by threads that ended, the lowest given first.
static GIVEN_BACK: parking_lot::Mutex<BinaryHeap<Reverse<usize>>> =
    parking_lot::const_mutex(BinaryHeap::new());

/// The number of a thread that asks while it ends (its number given back): one past every
/// shard count, so that it is nobody's own (a shard is shared correctly, only never owned).
pub const ENDING_THREAD: usize = usize::MAX / 2;

thread_local! {
    /// This thread's number; `usize::MAX`: none yet. No destructor, so reading it costs no
    /// check of the thread's state.
    static THREAD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Gives this thread's number back when the thread ends.
    static GIVE_BACK: GiveBack = const { GiveBack(Cell::new(usize::MAX)) };
}

struct GiveBack(Cell<usize>);

impl Drop for GiveBack {
    fn drop(&mut self) {
        let index = self.0.get();
        if index != usize::MAX {
            let _ = THREAD_INDEX.try_with(|s| s.set(usize::MAX));
            GIVEN_BACK.lock().push(Reverse(index));
        }
    }
}

/// This thread's number: the lowest no living thread holds when it first calls this, then
/// the same until it ends (see the module documentation).
#[inline]
pub fn thread_index() -> usize {
    THREAD_INDEX
        .try_with(|s| match s.get() {
            usize::MAX => assign(s),
            index => index,
        })
        .unwrap_or(ENDING_THREAD)
}

/// Gives this thread a number: one given back, else the next. A thread past its end (its
/// number already given back) gets [`ENDING_THREAD`].
#[cold]
#[inline(never)]
fn assign(cell: &Cell<usize>) -> usize {
    let assigned = GIVE_BACK.try_with(|g| {
        let index = GIVEN_BACK
            .lock()
            .pop()
            .map_or_else(|| NEXT_THREAD.fetch_add(1, Ordering::Relaxed), |r| r.0);
        g.0.set(index);
        index
    });
    match assigned {
        Ok(index) => {
            cell.set(index);
            index
        }
        Err(_) => ENDING_THREAD,
    }
}

/// Shards of a [`ReadMostly`] latch.
pub const READ_SHARDS: usize = 32;

/// A reader-writer latch whose readers latch only their own thread's shard.
pub struct ReadMostly<T> {
    shards: Box<[CachePadded<parking_lot::RawRwLock>]>,
    enabled: bool,
    value: UnsafeCell<T>,
}

// SAFETY: as for `Latch`: access to `value` is serialised by the shards when enabled (a writer
// holds every shard exclusively, a reader one shard shared); when disabled the engine
// guarantees that only one thread uses the structure.
unsafe impl<T: Send> Send for ReadMostly<T> {}
unsafe impl<T: Send + Sync> Sync for ReadMostly<T> {}

impl<T> ReadMostly<T> {
    /// A latch over `value`; `enabled: false` (latching off, one thread) latches nothing.
    pub fn new(value: T, enabled: bool) -> ReadMostly<T> {
        ReadMostly {
            shards: (0..if enabled { READ_SHARDS } else { 0 })
                .map(|_| CachePadded::new(parking_lot::RawRwLock::INIT))
                .collect(),
            enabled,
            value: UnsafeCell::new(value),
        }
    }

    /// Shared access, latching this thread's shard.
    #[inline]
    pub fn read(&self) -> ReadMostlyGuard<'_, T> {
        let shard = if self.enabled {
            let shard = &*self.shards[thread_index() % READ_SHARDS];
            shard.lock_shared();
            crate::counters::bump_latch();
            Some(shard)
        } else {
            None
        };
        ReadMostlyGuard { latch: self, shard }
    }

    /// Exclusive access, latching every shard.
    pub fn write(&self) -> ReadMostlyWriteGuard<'_, T> {
        for shard in self.shards.iter() {
            shard.lock_exclusive();
            crate::counters::bump_latch();
        }
        ReadMostlyWriteGuard { latch: self }
    }
}

/// Shared access to a [`ReadMostly`]; releases its shard when dropped.
pub struct ReadMostlyGuard<'a, T> {
    latch: &'a ReadMostly<T>,
    shard: Option<&'a parking_lot::RawRwLock>,
}

impl<T> Deref for ReadMostlyGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a shard is held shared, which keeps every writer out (or latching is off
        // and one thread runs).
        unsafe { &*self.latch.value.get() }
    }
}

impl<T> Drop for ReadMostlyGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if let Some(shard) = self.shard {
            // SAFETY: this guard locked the shard shared.
            unsafe { shard.unlock_shared() };
        }
    }
}

/// Exclusive access to a [`ReadMostly`]; releases every shard when dropped.
pub struct ReadMostlyWriteGuard<'a, T> {
    latch: &'a ReadMostly<T>,
}

impl<T> Deref for ReadMostlyWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: every shard is held exclusively (or latching is off and one thread runs).
        unsafe { &*self.latch.value.get() }
    }
}

impl<T> DerefMut for ReadMostlyWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: every shard is held exclusively: no other reference to the value exists.
        unsafe { &mut *self.latch.value.get() }
    }
}

impl<T> Drop for ReadMostlyWriteGuard<'_, T> {
    fn drop(&mut self) {
        for shard in self.latch.shards.iter().rev() {
            // SAFETY: `write` locked every shard exclusively.
            unsafe { shard.unlock_exclusive() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn living_threads_get_distinct_stable_indexes() {
        let mine = thread_index();
        assert_eq!(thread_index(), mine);
        // Alive together (an ended thread's number is given again: tests/thread_index.rs).
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let others: Vec<usize> = (0..4)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let n = thread_index();
                    barrier.wait();
                    n
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let mut all = others.clone();
        all.push(mine);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 5);
    }

    #[test]
    fn writers_exclude_readers_on_every_shard() {
        // Readers on many threads check that the two halves always agree; a writer changes
        // both under the exclusive latch. A reader seeing a torn pair fails the test.
        let latch = Arc::new(ReadMostly::new((0u64, 0u64), true));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let latch = latch.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let g = latch.read();
                        assert_eq!(g.0, g.1, "a reader saw a half-written value");
                    }
                })
            })
            .collect();
        for i in 1..=2_000u64 {
            let mut g = latch.write();
            g.0 = i;
            std::hint::black_box(&mut *g);
            g.1 = i;
        }
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(*latch.read(), (2_000, 2_000));
    }

    #[test]
    fn disabled_latches_nothing() {
        let latch = ReadMostly::new(vec![1], false);
        latch.write().push(2);
        assert_eq!(*latch.read(), [1, 2]);
    }
}
