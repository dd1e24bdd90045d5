//! Emulated device latency, so disk-bound experiments repeat on any machine.
//!
//! A [`DelayedStore`] wraps another [`PageStore`] and delays every read and write according to
//! a [`DeviceModel`]:
//!
//! * [`QueueMode::Fixed`]: each request waits its own delay, independently of the others (a
//!   device with unlimited parallelism, e.g. a deep-queue SSD).
//! * [`QueueMode::SingleQueue`]: requests are served one at a time in arrival order. A request
//!   reserves the next service slot, `start = max(now, previous completion)`,
//!   `completion = start + delay`, waits until its completion time and then performs the I/O.
//!   N concurrent requests therefore take about N × the service time (a single disk arm).
//!
//! Waiting sleeps for the bulk of a delay and spins for the last stretch, because `sleep`
//! overshoots by tens of microseconds and device delays are often that short. `sync` is not
//! delayed (the model covers page transfers); the inner store's own latency comes on top.
//!
//! **Two data devices.** Each page names its device in its header (byte 7,
//! [`crate::page::OFFSET_DEVICE`], written when the page is allocated by the heap file or
//! B+-tree it belongs to): 0, or 1 for the structures an engine places on a second device
//! (the Charm paper keeps TPC-C's order lines on a disk of their own). Both devices have the
//! model's latency; each has its own single queue. A write is routed by the image it
//! writes; a read is performed first and then delayed by the device its image names (a page
//! never written reads as zeroes: device 0) — the delay is as if the read had gone there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::StorageResult;
use crate::file::PageStore;
use crate::page::PageId;

/// How concurrent requests share the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// Every request waits its own delay, in parallel with the others.
    #[default]
    Fixed,
    /// Requests are served one at a time, in arrival order.
    SingleQueue,
}

/// Latency of an emulated device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceModel {
    pub read_delay: Duration,
    pub write_delay: Duration,
    pub mode: QueueMode,
}

impl DeviceModel {
    /// A device with no added latency.
    pub fn none() -> DeviceModel {
        DeviceModel::default()
    }

    pub fn is_none(&self) -> bool {
        self.read_delay.is_zero() && self.write_delay.is_zero()
    }
}

/// A page store whose requests take the time a [`DeviceModel`] says.
pub struct DelayedStore<S> {
    inner: S,
    model: DeviceModel,
    /// Per device: completion time of the last request admitted to its single queue.
    queue_free_at: [Mutex<Instant>; DEVICES],
    /// Whether the delays apply now (see [`DelayedStore::with_switch`]).
    on: Arc<AtomicBool>,
}

/// Data devices a [`DelayedStore`] emulates.
pub const DEVICES: usize = 2;

/// The device a page image names (its header's device byte; past the last device: the last).
fn device_of(image: &[u8]) -> usize {
    image
        .get(crate::page::OFFSET_DEVICE)
        .map_or(0, |&d| (d as usize).min(DEVICES - 1))
}

impl<S: PageStore> DelayedStore<S> {
    pub fn new(inner: S, model: DeviceModel) -> DelayedStore<S> {
        DelayedStore {
            inner,
            model,
            queue_free_at: std::array::from_fn(|_| Mutex::new(Instant::now())),
            on: Arc::new(AtomicBool::new(true)),
        }
    }

    /// This store, delaying requests only while `on` holds true (shared with whoever turns
    /// the device on and off: a benchmark measures with it and loads and checks without).
    pub fn with_switch(mut self, on: Arc<AtomicBool>) -> DelayedStore<S> {
        self.on = on;
        self
    }

    pub fn model(&self) -> DeviceModel {
        self.model
    }

    pub fn into_inner(self) -> S {
        self.inner
    }

    fn delay(&self, service: Duration, device: usize) {
        if service.is_zero() || !self.on.load(Ordering::Relaxed) {
            return;
        }
        let done_at = match self.model.mode {
            QueueMode::Fixed => Instant::now() + service,
            QueueMode::SingleQueue => {
                let mut free_at = self.queue_free_at[device].lock();
                let start = (*free_at).max(Instant::now());
                *free_at = start + service;
                *free_at
            }
        };
        wait_until(done_at);
    }
}

/// Sleeps for most of the remaining time, then spins (yielding) to the deadline.
fn wait_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(200);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::thread::yield_now();
        }
    }
}

impl<S: PageStore> PageStore for DelayedStore<S> {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        self.inner.read_page(id, buf)?;
        self.delay(self.model.read_delay, device_of(buf));
        Ok(())
    }

    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        self.delay(self.model.write_delay, device_of(buf));
        self.inner.write_page(id, buf)
    }

    fn sync(&self) -> StorageResult<()> {
        self.inner.sync()
    }

    fn page_count(&self) -> u64 {
        self.inner.page_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::MemPageStore;
    use crate::page::PageSize;
    use std::sync::Arc;

    const SERVICE: Duration = Duration::from_millis(20);
    const THREADS: usize = 6;

    /// Runs `THREADS` concurrent reads; returns the wall time.
    fn concurrent_reads(mode: QueueMode) -> Duration {
        let store = Arc::new(DelayedStore::new(
            MemPageStore::new(PageSize::Kib8),
            DeviceModel {
                read_delay: SERVICE,
                write_delay: Duration::ZERO,
                mode,
            },
        ));
        let barrier = Arc::new(std::sync::Barrier::new(THREADS));
        let start = Instant::now();
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let store = store.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut buf = vec![0u8; 8192];
                    store.read_page(PageId(i as u64), &mut buf).unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        start.elapsed()
    }

    #[test]
    fn single_queue_serialises_and_fixed_overlaps() {
        let queued = concurrent_reads(QueueMode::SingleQueue);
        let fixed = concurrent_reads(QueueMode::Fixed);
        // Serial service: at least N service times (the schedule guarantees it).
        assert!(queued >= SERVICE * THREADS as u32, "queued took {queued:?}");
        // Parallel service: far less than N service times, even on a loaded machine.
        assert!(fixed < SERVICE * THREADS as u32 / 2, "fixed took {fixed:?}");
        assert!(queued > fixed * 2, "queued {queued:?} vs fixed {fixed:?}");
    }

    /// Requests go to the queue of the device their page's header names; the other queue
    /// is not touched (its schedule shows it, whatever the machine's load).
    #[test]
    fn each_device_has_a_queue_of_its_own() {
        let service = Duration::from_millis(2);
        let store = DelayedStore::new(
            MemPageStore::new(PageSize::Kib8),
            DeviceModel {
                read_delay: service,
                write_delay: service,
                mode: QueueMode::SingleQueue,
            },
        );
        let start = Instant::now();
        let mut page = vec![0u8; 8192];
        page[crate::page::OFFSET_DEVICE] = 1;
        for i in 0..3 {
            store.write_page(PageId(i), &page).unwrap();
        }
        let free_at = |d: usize| *store.queue_free_at[d].lock();
        assert!(free_at(1) >= start + service * 3);
        assert!(free_at(0) <= start, "device 0 served a device-1 write");
        let mut out = vec![0u8; 8192];
        store.read_page(PageId(1), &mut out).unwrap();
        assert_eq!(out, page);
        assert!(free_at(1) >= start + service * 4);
        assert!(free_at(0) <= start, "device 0 served a device-1 read");
        // A page never written reads as zeroes, from device 0.
        store.read_page(PageId(9), &mut out).unwrap();
        assert!(free_at(0) >= start + service);
        // A device byte past the last device goes to the last.
        page[crate::page::OFFSET_DEVICE] = 7;
        store.write_page(PageId(4), &page).unwrap();
        assert!(free_at(1) >= start + service * 5);
    }

    /// Switched off, the store serves at once: its queue's schedule stands still.
    #[test]
    fn a_switched_off_device_does_not_delay() {
        let on = Arc::new(AtomicBool::new(false));
        let store = DelayedStore::new(
            MemPageStore::new(PageSize::Kib8),
            DeviceModel {
                read_delay: Duration::from_secs(5),
                write_delay: Duration::from_secs(5),
                mode: QueueMode::SingleQueue,
            },
        )
        .with_switch(on.clone());
        let free_at = *store.queue_free_at[0].lock();
        let mut buf = vec![0u8; 8192];
        buf[100] = 7;
        store.write_page(PageId(1), &buf).unwrap();
        let mut out = vec![0u8; 8192];
        store.read_page(PageId(1), &mut out).unwrap();
        assert_eq!((out, *store.queue_free_at[0].lock()), (buf, free_at));
        on.store(true, Ordering::Relaxed);
        let store = DelayedStore {
            model: DeviceModel {
                read_delay: Duration::from_millis(1),
                ..store.model()
            },
            ..store
        };
        store.read_page(PageId(1), &mut vec![0u8; 8192]).unwrap();
        assert!(*store.queue_free_at[0].lock() > free_at);
    }

    #[test]
    fn delays_apply_per_request_kind() {
        let store = DelayedStore::new(
            MemPageStore::new(PageSize::Kib8),
            DeviceModel {
                read_delay: Duration::ZERO,
                write_delay: Duration::from_millis(5),
                mode: QueueMode::Fixed,
            },
        );
        let buf = vec![7u8; 8192];
        let t = Instant::now();
        for i in 0..4 {
            store.write_page(PageId(i), &buf).unwrap();
        }
        assert!(t.elapsed() >= Duration::from_millis(20));
        let mut out = vec![0u8; 8192];
        store.read_page(PageId(2), &mut out).unwrap();
        assert_eq!(out, buf);
        assert_eq!(store.page_count(), 4);
        assert!(!store.model().is_none() && DeviceModel::none().is_none());
    }
}
