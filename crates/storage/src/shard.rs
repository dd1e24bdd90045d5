//! Per-thread sharding: a number for each thread, and a latch whose readers write only their
//! own shard.
//!
//! [`thread_index`] numbers threads in the order they first ask (0, 1, 2, …). Structures
//! split into shards (the main-memory record store, the transaction ids, the active-transaction
//! table, the lock manager's coarse-lock partitions) take `thread_index() % shards`, so up to
//! `shards` threads each get one of their own, and a thread always gets the same one.
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
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam::utils::CachePadded;
use parking_lot::lock_api::RawRwLock as _;

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's number: threads are numbered from 0 in the order they first call this.
#[inline]
pub fn thread_index() -> usize {
    THREAD_INDEX
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
            }
            s.get()
        })
        .unwrap_or(0)
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
    fn threads_get_distinct_stable_indexes() {
        let mine = thread_index();
        assert_eq!(thread_index(), mine);
        let others: Vec<usize> = (0..4)
            .map(|_| std::thread::spawn(thread_index))
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
