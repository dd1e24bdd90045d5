//! What the buffer pool does for two-stage execution (Charm, the `engine::execution`
//! strategies), per thread: hold every page a transaction fixes pinned until it ends, refuse
//! a fix that would read from the device, and count the thread's physical reads and writes.
//!
//! ```text
//!   hold()      every fix of this thread also takes a held pin on its frame (once per page):
//!               the frame cannot be evicted until release_held() gives the pins back
//!   refuse()    a fix that misses and would read the page fails with StorageError::WouldRead
//!               before any read is issued (OTSTE's "this would miss"); allow_reads() lifts it
//!               around the steps of a change that must not stop half-way (a B+-tree split)
//!   io()        this thread's physical reads and write-backs, and the time they took
//! ```
//!
//! Everything is thread-local: a transaction runs on one thread from begin to end, and a fix
//! of a pool that has staging off (see [`BufferPool::set_staging`]) never looks here, so the
//! conventional path pays one predictable branch. Held pins are bounded per pool (a quarter
//! of its frames are always left unheld): past the bound a fix simply does not hold, and
//! [`StageCounts::hold_refusals`] counts it, so that transactions pinning their working sets
//! can never fill the pool and leave the others no frame to read into.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustc_hash::FxHashSet;

use super::frame::Frame;
use super::pool::BufferPool;
use crate::page::PageId;

/// A thread's physical I/O so far (monotonic; take differences).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Pages read from the store.
    pub reads: u64,
    /// Time spent in those reads (device latency included), in nanoseconds.
    pub read_ns: u64,
    /// Pages written back to the store (dirty victims, flushes).
    pub writes: u64,
    pub write_ns: u64,
}

impl IoCounts {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &IoCounts) -> IoCounts {
        IoCounts {
            reads: self.reads - earlier.reads,
            read_ns: self.read_ns - earlier.read_ns,
            writes: self.writes - earlier.writes,
            write_ns: self.write_ns - earlier.write_ns,
        }
    }
}

/// What the thread's holding has done (monotonic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCounts {
    /// Fixes in a pool with staging on (hits and misses: the data accesses).
    pub fixes: u64,
    /// Fixes that wanted to hold a page but found the pool's bound of held pins reached.
    pub hold_refusals: u64,
    /// Fixes refused with [`crate::StorageError::WouldRead`].
    pub refused_reads: u64,
}

#[derive(Default)]
struct Stage {
    holding: bool,
    refusing: bool,
    /// Depth of [`allow_reads`] scopes: while above 0, nothing is refused.
    allowed: u32,
    /// Frames this thread holds a pin on, by address (each frame once).
    held: Vec<(*const Frame, usize)>,
    held_set: FxHashSet<usize>,
    io: IoCounts,
    counts: StageCounts,
}

thread_local! {
    static STAGE: RefCell<Stage> = RefCell::new(Stage::default());
    /// What this thread's I/O is done for (a transaction id; 0: nothing named), published in
    /// [`READING`] while a read or a write-back is in progress.
    static TAG: Cell<u64> = const { Cell::new(0) };
}

/// Slots of [`READING`]: threads beyond this many share slots (and may hide one another's
/// reads from [`in_read`], which only samples).
const READERS: usize = 256;

/// Per thread slot (`shard::thread_index() % READERS`): the tag of the physical I/O in
/// progress (a read, or the write-back of a dirty victim before a read), 0 when none. What
/// the lock manager's I/O attribution looks at.
static READING: [AtomicU64; READERS] = [const { AtomicU64::new(0) }; READERS];

/// Names what this thread's reads are done for from now on (0: nothing), so that another
/// thread can ask [`in_read`] whether that work is waiting for the device.
pub fn set_tag(tag: u64) {
    TAG.with(|t| t.set(tag));
}

/// Whether a thread is inside a physical read (or write-back) for `tag` now.
pub fn in_read(tag: u64) -> bool {
    tag != 0 && READING.iter().any(|r| r.load(Ordering::Relaxed) == tag)
}

/// Publishes this thread's tag for the duration of a read or write-back.
pub(crate) struct Reading(Option<&'static AtomicU64>);

impl Reading {
    pub(crate) fn start() -> Reading {
        let tag = TAG.with(|t| t.get());
        if tag == 0 {
            return Reading(None);
        }
        let slot = &READING[crate::shard::thread_index() % READERS];
        slot.store(tag, Ordering::Relaxed);
        Reading(Some(slot))
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            slot.store(0, Ordering::Relaxed);
        }
    }
}

/// From now on, every page this thread fixes in a pool with staging on stays pinned until
/// [`BufferPool::release_held`].
pub fn hold() {
    STAGE.with(|s| s.borrow_mut().holding = true);
}

/// Stops holding new pages (those held stay held until released).
pub fn stop_holding() {
    STAGE.with(|s| s.borrow_mut().holding = false);
}

/// While `on`, a fix on this thread that would read a page from the store (in a pool with
/// staging on) fails with [`crate::StorageError::WouldRead`] instead.
pub fn refuse_reads(on: bool) {
    STAGE.with(|s| s.borrow_mut().refusing = on);
}

/// Runs `f` with reads allowed whatever [`refuse_reads`] said: for the steps of a structure
/// change that must not stop half-way once its first page has changed.
pub fn allow_reads<R>(f: impl FnOnce() -> R) -> R {
    struct Lift;
    impl Drop for Lift {
        fn drop(&mut self) {
            STAGE.with(|s| s.borrow_mut().allowed -= 1);
        }
    }
    STAGE.with(|s| s.borrow_mut().allowed += 1);
    let _lift = Lift;
    f()
}

/// Pages this thread holds pinned now.
pub fn held_pages() -> usize {
    STAGE.with(|s| s.borrow().held.len())
}

/// This thread's physical I/O so far.
pub fn io() -> IoCounts {
    STAGE.with(|s| s.borrow().io)
}

/// This thread's holding and refusal counts so far.
pub fn counts() -> StageCounts {
    STAGE.with(|s| s.borrow().counts)
}

/// Whether a fix that misses must be refused now.
#[inline]
pub(crate) fn refusing() -> bool {
    STAGE.with(|s| {
        let mut s = s.borrow_mut();
        let refuse = s.refusing && s.allowed == 0;
        if refuse {
            s.counts.refused_reads += 1;
        }
        refuse
    })
}

/// A fix of `frame` in `pool` succeeded: hold it if this thread is holding.
#[inline(never)]
pub(crate) fn fixed(pool: &BufferPool, frame: &Frame) {
    STAGE.with(|s| {
        let mut s = s.borrow_mut();
        s.counts.fixes += 1;
        if !s.holding {
            return;
        }
        let addr = frame as *const Frame as usize;
        if s.held_set.contains(&addr) {
            return;
        }
        if !pool.take_hold() {
            s.counts.hold_refusals += 1;
            return;
        }
        frame.pin();
        s.held_set.insert(addr);
        s.held.push((frame as *const Frame, pool.identity()));
    });
}

/// Gives back every pin this thread holds in `pool`; returns how many.
pub(crate) fn release(pool: &BufferPool) -> usize {
    STAGE.with(|s| {
        let mut s = s.borrow_mut();
        let me = pool.identity();
        let mut released = 0;
        let Stage { held, held_set, .. } = &mut *s;
        held.retain(|&(frame, owner)| {
            if owner != me {
                return true;
            }
            held_set.remove(&(frame as usize));
            // SAFETY: the frame belongs to `pool` (its identity), which is alive (borrowed
            // here) and never frees a frame while it lives; this thread pinned it in `fixed`.
            unsafe { (*frame).unpin() };
            released += 1;
            false
        });
        pool.give_back_holds(released);
        released
    })
}

/// Counts one physical read of this thread that took `took`.
pub(crate) fn note_read(took: Duration) {
    STAGE.with(|s| {
        let mut s = s.borrow_mut();
        s.io.reads += 1;
        s.io.read_ns += took.as_nanos() as u64;
    });
}

/// Counts one write-back by this thread that took `took`.
pub(crate) fn note_write(took: Duration) {
    STAGE.with(|s| {
        let mut s = s.borrow_mut();
        s.io.writes += 1;
        s.io.write_ns += took.as_nanos() as u64;
    });
}

/// The page a refused fix would have read, for its error.
pub(crate) fn refused(page: PageId) -> crate::StorageError {
    crate::StorageError::WouldRead { page }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::PoolConfig;
    use crate::file::MemPageStore;
    use crate::page::{PageKind, PageSize};

    /// A pool of `frames` frames over `pages` allocated (and written back) pages.
    fn pool(frames: usize, pages: u64) -> BufferPool {
        let pool = BufferPool::new(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames,
                latching: true,
            },
            None,
        )
        .unwrap();
        for _ in 0..pages {
            drop(pool.allocate_page(PageKind::Heap).unwrap());
        }
        pool.flush_all().unwrap();
        pool
    }

    /// Runs `f` on a thread of its own, so that the thread-local stage starts empty.
    fn on_fresh_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        std::thread::scope(|s| s.spawn(f).join().unwrap())
    }

    #[test]
    fn held_pages_are_not_evicted_until_released() {
        on_fresh_thread(|| {
            let pool = pool(16, 40);
            pool.set_staging(true);
            hold();
            for p in 1..=4 {
                drop(pool.fix_shared(PageId(p)).unwrap());
                // A second fix of the same page holds nothing more.
                drop(pool.fix_exclusive(PageId(p)).unwrap());
            }
            stop_holding();
            assert_eq!(held_pages(), 4);
            assert_eq!(pool.held_pins(), 4);
            // Cycle every other page through the pool: the held ones stay.
            for p in 5..40 {
                drop(pool.fix_shared(PageId(p)).unwrap());
            }
            let reads = io().reads;
            for p in 1..=4 {
                drop(pool.fix_shared(PageId(p)).unwrap());
            }
            assert_eq!(io().reads, reads, "a held page was read again");
            assert_eq!(pool.release_held(), 4);
            assert_eq!((held_pages(), pool.held_pins()), (0, 0));
            pool.check_invariants();
        });
    }

    #[test]
    fn refused_reads_read_nothing_and_hits_pass() {
        on_fresh_thread(|| {
            let pool = pool(8, 20);
            pool.set_staging(true);
            // Page 19 was the last written, so it is still in the pool; page 1 is not.
            drop(pool.fix_shared(PageId(19)).unwrap());
            let before = io();
            refuse_reads(true);
            assert!(
                pool.fix_shared(PageId(19)).is_ok(),
                "a hit is never refused"
            );
            match pool.fix_shared(PageId(1)) {
                Err(crate::StorageError::WouldRead { page }) => assert_eq!(page, PageId(1)),
                other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
            }
            assert!(matches!(
                pool.fix_exclusive(PageId(2)),
                Err(crate::StorageError::WouldRead { .. })
            ));
            assert_eq!(io().reads, before.reads, "a refused fix read a page");
            assert_eq!(counts().refused_reads, 2);
            // Inside allow_reads the same fix reads.
            allow_reads(|| drop(pool.fix_shared(PageId(1)).unwrap()));
            assert_eq!(io().reads, before.reads + 1);
            assert!(io().read_ns > 0);
            refuse_reads(false);
            drop(pool.fix_shared(PageId(3)).unwrap());
            // A pool with staging off ignores the thread's wishes.
            pool.set_staging(false);
            refuse_reads(true);
            drop(pool.fix_shared(PageId(4)).unwrap());
            refuse_reads(false);
            pool.check_invariants();
        });
    }

    #[test]
    fn holding_stops_at_the_pool_limit() {
        on_fresh_thread(|| {
            let pool = pool(16, 30);
            pool.set_staging(true);
            hold();
            for p in 1..30 {
                drop(pool.fix_shared(PageId(p)).unwrap());
            }
            stop_holding();
            assert_eq!(held_pages(), pool.held_pin_limit());
            assert_eq!(counts().hold_refusals as usize, 29 - pool.held_pin_limit());
            pool.release_held();
            pool.check_invariants();
        });
    }

    /// While a thread reads a page for a tag, another thread sees the tag in a read; before
    /// and after, not.
    #[test]
    fn a_read_publishes_its_tag_while_it_lasts() {
        let store = crate::device::DelayedStore::new(
            MemPageStore::new(PageSize::Kib8),
            crate::device::DeviceModel {
                read_delay: Duration::from_millis(300),
                write_delay: Duration::ZERO,
                mode: crate::device::QueueMode::Fixed,
            },
        );
        let pool = BufferPool::new(
            Box::new(store),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames: 8,
                latching: true,
            },
            None,
        )
        .unwrap();
        for _ in 0..20 {
            drop(pool.allocate_page(PageKind::Heap).unwrap());
        }
        pool.flush_all().unwrap();
        const TAG: u64 = 0x7a6;
        assert!(!in_read(TAG));
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                set_tag(TAG);
                drop(pool.fix_shared(PageId(1)).unwrap());
                set_tag(0);
            });
            let seen = (0..4000).any(|_| {
                std::thread::sleep(Duration::from_micros(500));
                in_read(TAG)
            });
            reader.join().unwrap();
            assert!(seen, "the read's tag was never seen");
        });
        assert!(!in_read(TAG), "the tag outlived the read");
        assert!(!in_read(0), "0 names nothing");
    }
}
