//! Latches: short, physical reader-writer locks on in-memory structures (frames, B+-tree
//! nodes, lock-table buckets, the log buffer). Unlike locks they have no deadlock detection
//! and are never held across a user's wait; callers acquire them in a fixed order.
//!
//! A [`Latch`] can be created *disabled* (the ladder's `latching=off`, one thread only): then
//! acquiring and releasing it is one predictable branch and no atomic instruction.
//!
//! [`SpinLatch`] is the exclusive-only latch for structures held for a few dozen
//! instructions at a time (the lock table's buckets). Its release is a plain store where a
//! [`Latch`]'s is a locked compare-and-swap, which on x86 waits for every earlier store to
//! drain: in the full engine's lock manager that wait was about a third of `lock_record`'s
//! time. The price is that a waiter spins and then yields instead of sleeping, which suits
//! only latches held that briefly.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::lock_api::{RawRwLock as _, RawRwLockTimed as _};

/// How long [`Latch::lock_shared_while`] and [`Latch::lock_exclusive_while`] sleep before
/// they ask again whether the caller still wants the latch: the longest a waiter waits for a
/// latch it no longer wants. Long beside a latch's usual hold (microseconds), so that a wait
/// behind a busy holder seldom wakes for nothing.
const WAIT_SLICE: Duration = Duration::from_millis(1);

/// A reader-writer latch guarding a `T`, that can be switched off at creation.
///
/// `repr(C)`: the latch word leads, then the value, so that a structure embedding a latch can
/// place the latch and the value's first fields in one cache line (the buffer pool's frames).
#[repr(C)]
pub struct Latch<T> {
    raw: parking_lot::RawRwLock,
    /// Exclusive holds released so far: an optimistic reader ([`Latch::optimistic_version`],
    /// [`Latch::validate`]) that finds it unchanged and the latch not held exclusively, after
    /// reading the value without latching, read no write.
    version: AtomicU64,
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
            version: AtomicU64::new(0),
            enabled,
            value: UnsafeCell::new(value),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether somebody holds the latch (in either mode) right now: a hint that may be stale
    /// by the time the caller acts on it. Always false when disabled.
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.enabled && self.raw.is_locked()
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

    /// [`Latch::lock_shared`] for a caller that may stop wanting the latch while it waits:
    /// if the latch is not free at once, asks `wanted` before it waits and again every
    /// [`WAIT_SLICE`] of waiting, and gives up (`false`, nothing held) when it says no.
    ///
    /// For a waiter that found the latch through a lookup that may have gone stale: a buffer
    /// pool fix finds its frame without the page-table latch, and the frame may go to another
    /// page before the fix waits for it. Its latch then guards a page the fix never asked
    /// for, outside the latch order, and its holder may be waiting for a page the fix holds.
    #[inline]
    pub(crate) fn lock_shared_while(&self, wanted: impl Fn() -> bool) -> bool {
        self.lock_while(
            wanted,
            parking_lot::RawRwLock::try_lock_shared,
            parking_lot::RawRwLock::try_lock_shared_for,
        )
    }

    /// [`Latch::lock_exclusive`] for a caller that may stop wanting the latch while it
    /// waits, as [`Latch::lock_shared_while`].
    #[inline]
    pub(crate) fn lock_exclusive_while(&self, wanted: impl Fn() -> bool) -> bool {
        self.lock_while(
            wanted,
            parking_lot::RawRwLock::try_lock_exclusive,
            parking_lot::RawRwLock::try_lock_exclusive_for,
        )
    }

    /// The wait of [`Latch::lock_shared_while`] in either mode: `try_now` and `try_for` are
    /// that mode's try-lock and timed lock.
    #[inline(always)]
    fn lock_while(
        &self,
        wanted: impl Fn() -> bool,
        try_now: impl Fn(&parking_lot::RawRwLock) -> bool,
        try_for: impl Fn(&parking_lot::RawRwLock, Duration) -> bool,
    ) -> bool {
        if !self.enabled {
            return true;
        }
        if !try_now(&self.raw) {
            loop {
                if !wanted() {
                    return false;
                }
                if try_for(&self.raw, WAIT_SLICE) {
                    break;
                }
            }
        }
        crate::counters::bump_latch();
        true
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
            self.bump_version();
            // SAFETY: the caller holds the exclusive latch, as this function's contract says.
            unsafe { self.raw.unlock_exclusive() };
        }
    }

    /// Counts an exclusive hold's end, before the latch is released: the holder alone
    /// writes the version, so a store does (no read-modify-write).
    #[inline]
    fn bump_version(&self) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Release);
    }

    /// The start of an optimistic read of the value without latching: its version, unless
    /// the latch is held exclusively (or latching is off: then there is no version to trust
    /// and the caller latches). Read the value through [`Latch::value_ptr`], then check the
    /// version with [`Latch::validate`] before using anything read.
    #[inline]
    pub(crate) fn optimistic_version(&self) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        let version = self.version.load(Ordering::Acquire);
        (!self.raw.is_locked_exclusive()).then_some(version)
    }

    /// Whether nothing was written to the value since [`Latch::optimistic_version`] gave
    /// `version`: no exclusive hold ended meanwhile and none is under way. The reads made
    /// before the call are ordered before its checks.
    #[inline]
    pub(crate) fn validate(&self, version: u64) -> bool {
        fence(Ordering::Acquire);
        !self.raw.is_locked_exclusive() && self.version.load(Ordering::Relaxed) == version
    }

    /// The value's address, for an optimistic reader: it may be written while it is read,
    /// so only raw, volatile reads of plain data through it, validated before they are used.
    #[inline]
    pub(crate) fn value_ptr(&self) -> *const T {
        self.value.get()
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
            self.latch.bump_version();
            // SAFETY: this guard acquired the exclusive latch.
            unsafe { self.latch.raw.unlock_exclusive() };
        }
    }
}

/// An exclusive-only spin latch guarding a `T`, that can be switched off at creation (see the
/// module's introduction for when to use it instead of a [`Latch`]).
pub struct SpinLatch<T> {
    locked: AtomicBool,
    enabled: bool,
    value: UnsafeCell<T>,
}

// SAFETY: as for `Latch`: access to `value` is serialised by `locked` when enabled, and by the
// engine's one-thread guarantee when disabled.
unsafe impl<T: Send> Send for SpinLatch<T> {}
unsafe impl<T: Send> Sync for SpinLatch<T> {}

/// Spins (re-reading the latch without writing it) before each yield to the scheduler.
const SPINS_BEFORE_YIELD: u32 = 64;

impl<T> SpinLatch<T> {
    pub fn new(value: T, enabled: bool) -> Self {
        SpinLatch {
            locked: AtomicBool::new(false),
            enabled,
            value: UnsafeCell::new(value),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Acquires the latch.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self.enabled {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                self.lock_contended();
            }
            crate::counters::bump_latch();
        }
        SpinGuard { latch: self }
    }

    /// Acquires the latch if it is free, without waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        if self.enabled {
            if self
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return None;
            }
            crate::counters::bump_latch();
        }
        Some(SpinGuard { latch: self })
    }

    /// The wait of [`SpinLatch::lock`]: test-and-test-and-set, so waiters read the shared line
    /// instead of bouncing it between cores with writes, yielding now and then so that a
    /// holder that was descheduled (more threads than cores) gets to run.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins.is_multiple_of(SPINS_BEFORE_YIELD) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Mutable access without latching, through exclusive ownership.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// Exclusive access to a [`SpinLatch`]'s value; releases the latch when dropped.
pub struct SpinGuard<'a, T> {
    latch: &'a SpinLatch<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the latch is held (or latching is off and one thread runs).
        unsafe { &*self.latch.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { &mut *self.latch.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.latch.enabled {
            // A plain store: the release ordering keeps the guarded writes before it.
            self.latch.locked.store(false, Ordering::Release);
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

    /// A waiter that stops wanting the latch stops waiting, holding nothing; one that still
    /// wants it gets it when the holder lets go.
    #[test]
    fn a_conditional_wait_gives_up_when_the_latch_is_no_longer_wanted() {
        let latch = Arc::new(Latch::new(0u64, true));
        let wanted = Arc::new(AtomicBool::new(true));
        let held = latch.write();
        let waiter = |exclusive: bool| {
            let (l, w) = (latch.clone(), wanted.clone());
            std::thread::spawn(move || {
                let wanted = || w.load(Ordering::Relaxed);
                let got = match exclusive {
                    true => l.lock_exclusive_while(wanted),
                    false => l.lock_shared_while(wanted),
                };
                if got {
                    // SAFETY: taken just above.
                    unsafe {
                        match exclusive {
                            true => l.unlock_exclusive(),
                            false => l.unlock_shared(),
                        }
                    }
                }
                got
            })
        };
        let (shared, exclusive) = (waiter(false), waiter(true));
        std::thread::sleep(std::time::Duration::from_millis(20));
        wanted.store(false, Ordering::Relaxed);
        assert!(!shared.join().unwrap(), "a shared waiter waited on");
        assert!(!exclusive.join().unwrap(), "an exclusive waiter waited on");
        wanted.store(true, Ordering::Relaxed);
        let (shared, exclusive) = (waiter(false), waiter(true));
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(held);
        assert!(shared.join().unwrap());
        assert!(exclusive.join().unwrap());
        assert!(latch.try_write().is_some(), "a waiter kept the latch");
    }

    #[test]
    fn spin_latch_serialises_writers() {
        // Non-atomic read-modify-writes of a pair: a lost update or a torn pair shows a race.
        let latch = Arc::new(SpinLatch::new((0u64, 0u64), true));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = latch.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = l.lock();
                        let (a, b) = *g;
                        assert_eq!(a, b, "a writer saw another's half-done update");
                        *g = (a + 1, b + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*latch.lock(), (80_000, 80_000));
    }

    #[test]
    fn spin_latch_try_lock_fails_while_held() {
        let latch = SpinLatch::new(5, true);
        let held = latch.lock();
        assert!(latch.try_lock().is_none());
        drop(held);
        assert_eq!(*latch.try_lock().expect("free again"), 5);
        // Disabled: never waits, never fails.
        let off = SpinLatch::new(1, false);
        let _a = off.lock();
        assert!(off.try_lock().is_some());
    }

    #[test]
    fn disabled_latch_still_gives_access() {
        let latch = Latch::new(vec![1, 2], false);
        latch.write().push(3);
        assert_eq!(latch.read().len(), 3);
        assert!(latch.try_write().is_some());
    }
}
