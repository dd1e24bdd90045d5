//! Latches: short, physical reader-writer locks on in-memory structures (frames, B+-tree
//! nodes, lock-table buckets, the log buffer). Unlike locks they have no deadlock detection
//! and are never held across a user's wait; callers acquire them in a fixed order.
//!
//! A [`Latch`] can be created *disabled* (the ladder's `latching=off`, one thread only): then
//! acquiring and releasing it is one predictable branch and no atomic instruction.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

use parking_lot::lock_api::RawRwLock as _;

/// A reader-writer latch guarding a `T`, that can be switched off at creation.
pub struct Latch<T> {
    raw: parking_lot::RawRwLock,
    enabled: bool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `raw` when enabled; when disabled the engine
// guarantees (validated at configuration time) that only one thread uses the structure.
unsafe impl<T: Send> Send for Latch<T> {}
unsafe impl<T: Send + Sync> Sync for Latch<T> {}

impl<T> Latch<T> {
    pub fn new(value: T, enabled: bool) -> Self {
        Latch {
            raw: parking_lot::RawRwLock::INIT,
            enabled,
            value: UnsafeCell::new(value),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Acquires the latch in shared mode.
    #[inline]
    pub fn read(&self) -> LatchReadGuard<'_, T> {
        self.lock_shared();
        LatchReadGuard { latch: self }
    }

    /// Acquires the latch in exclusive mode.
    #[inline]
    pub fn write(&self) -> LatchWriteGuard<'_, T> {
        self.lock_exclusive();
        LatchWriteGuard { latch: self }
    }

    /// Tries to acquire the latch exclusively without waiting.
    #[inline]
    pub fn try_write(&self) -> Option<LatchWriteGuard<'_, T>> {
        if self.enabled && !self.raw.try_lock_exclusive() {
            return None;
        }
        if self.enabled {
            crate::counters::bump_latch();
        }
        Some(LatchWriteGuard { latch: self })
    }

    /// Acquires the latch in shared mode without building a guard; the caller must later call
    /// [`Latch::unlock_shared`] exactly once. For guards that keep a reference to the
    /// structure holding the latch instead of a [`LatchReadGuard`] (the buffer pool's page
    /// guards), so that one pointer serves the latch, the value and its neighbours.
    #[inline]
    pub(crate) fn lock_shared(&self) {
        if self.enabled {
            self.raw.lock_shared();
            crate::counters::bump_latch();
        }
    }

    /// Acquires the latch exclusively without building a guard; the caller must later call
    /// [`Latch::unlock_exclusive`] exactly once.
    #[inline]
    pub(crate) fn lock_exclusive(&self) {
        if self.enabled {
            self.raw.lock_exclusive();
            crate::counters::bump_latch();
        }
    }

    /// Releases a shared latch taken by [`Latch::lock_shared`].
    ///
    /// # Safety
    /// The caller holds the latch in shared mode and gives up that hold (and every reference
    /// it obtained through [`Latch::value`]).
    #[inline]
    pub(crate) unsafe fn unlock_shared(&self) {
        if self.enabled {
            // SAFETY: the caller holds a shared latch, as this function's contract says.
            unsafe { self.raw.unlock_shared() };
        }
    }

    /// Releases an exclusive latch taken by [`Latch::lock_exclusive`] (or kept from a guard
    /// by [`LatchWriteGuard::into_held`]).
    ///
    /// # Safety
    /// The caller holds the latch exclusively and gives up that hold (and every reference it
    /// obtained through [`Latch::value`] or [`Latch::value_mut`]).
    #[inline]
    pub(crate) unsafe fn unlock_exclusive(&self) {
        if self.enabled {
            // SAFETY: the caller holds the exclusive latch, as this function's contract says.
            unsafe { self.raw.unlock_exclusive() };
        }
    }

    /// The protected value, for a caller that holds the latch (either mode).
    ///
    /// # Safety
    /// The caller holds the latch (or latching is off and one thread runs) for as long as the
    /// reference lives, and no `&mut` to the value exists meanwhile.
    #[inline]
    pub(crate) unsafe fn value(&self) -> &T {
        // SAFETY: the caller's hold on the latch keeps writers out.
        unsafe { &*self.value.get() }
    }

    /// The protected value, mutable, for a caller that holds the latch exclusively.
    ///
    /// # Safety
    /// The caller holds the latch exclusively (or latching is off and one thread runs) for as
    /// long as the reference lives, and no other reference to the value exists meanwhile.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn value_mut(&self) -> &mut T {
        // SAFETY: the caller's exclusive hold on the latch keeps everyone else out.
        unsafe { &mut *self.value.get() }
    }

    /// Mutable access without latching, through exclusive ownership.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

/// Shared access; releases the latch when dropped.
pub struct LatchReadGuard<'a, T> {
    latch: &'a Latch<T>,
}

impl<T> Deref for LatchReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a shared latch is held (or latching is off and one thread runs).
        unsafe { &*self.latch.value.get() }
    }
}

impl<T> Drop for LatchReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.latch.enabled {
            // SAFETY: this guard acquired the shared latch.
            unsafe { self.latch.raw.unlock_shared() };
        }
    }
}

/// Exclusive access; releases the latch when dropped.
pub struct LatchWriteGuard<'a, T> {
    latch: &'a Latch<T>,
}

impl<T> Deref for LatchWriteGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the exclusive latch is held (or latching is off and one thread runs).
        unsafe { &*self.latch.value.get() }
    }
}

impl<T> DerefMut for LatchWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { &mut *self.latch.value.get() }
    }
}

impl<'a, T> LatchWriteGuard<'a, T> {
    /// Gives up the guard but keeps the exclusive latch: the caller now holds it and must
    /// release it with [`Latch::unlock_exclusive`].
    #[inline]
    pub(crate) fn into_held(self) -> &'a Latch<T> {
        let latch = self.latch;
        std::mem::forget(self);
        latch
    }
}

impl<T> Drop for LatchWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.latch.enabled {
            // SAFETY: this guard acquired the exclusive latch.
            unsafe { self.latch.raw.unlock_exclusive() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn enabled_latch_serialises_writers() {
        let latch = Arc::new(Latch::new(0u64, true));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = latch.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.write() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*latch.read(), 40_000);
    }

    #[test]
    fn disabled_latch_still_gives_access() {
        let latch = Latch::new(vec![1, 2], false);
        latch.write().push(3);
        assert_eq!(latch.read().len(), 3);
        assert!(latch.try_write().is_some());
    }
}
