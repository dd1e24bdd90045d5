//! The log buffer: the tail of the log that is not yet written to storage.
//!
//! ```text
//!   log:  [ header | written to storage ......... | pending (being written) | buffer: used .. ]
//!         0        16                              written                   base     base+used
//! ```
//!
//! An appender *reserves* its frames' bytes with one compare-and-swap on the buffer's
//! [`Tail`] — it moves `used` on and gets `base + used` as the first frame's LSN — and encodes
//! the frames into them afterwards ([`CopyCounts`]): no latch is taken on the way, so
//! appenders on many cores meet only on the tail's cache line, for one atomic instruction.
//! Everything that must see the buffer still — a writer *taking* the buffered bytes, an
//! append that does not fit and *grows* it, a read of buffered bytes, a checkpoint's begin
//! that must come after every earlier reservation is published — takes the buffer latch and
//! *seals* the tail ([`Tail::seal`]): reservations stop (an appender that finds the tail
//! sealed takes the latch instead and waits), the copies into reserved bytes drain, and the
//! buffer is then the latch holder's alone until it *opens* the tail again. A take swaps the
//! [`Region`] with an empty one of the same capacity (O(1), no copy, no allocation), and the
//! bytes are written with the latch released, so appends continue while the write and the
//! sync run.
//!
//! Invariants: a region's bytes are always initialised (allocated zeroed, never shrunk), so
//! a copy writes into initialised memory and nothing uninitialised is ever read; `used` only
//! grows between takes, and each reservation is whole frames, so every write to storage ends
//! on a record boundary once the copies into it are done; `base` only grows, by exactly the
//! bytes taken; the tail's window (region, capacity, base) changes only while it is sealed.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crossbeam::utils::CachePadded;
use storage::Lsn;

use crate::record::{check_frame, write_padding, FrameCheck, FRAME_HEADER_SIZE};

/// How far ahead of its end the log buffer is fetched for writing (see [`prefetch_ahead`]):
/// a few transactions' worth of log records.
const WRITE_AHEAD: usize = 4096;

/// Shards of [`CopyCounts`]: threads past this many share a shard (which stays correct).
const COPY_SHARDS: usize = 64;

/// The bytes a thread reserves at once for its page-redo records ([`Run`]) unless told
/// otherwise (`LogConfig::run_bytes`): so that a New-Order (some 5 KB of records) takes one
/// or two reservations instead of 37. Measured on 16 cores (TPC-C paper mix, 16 threads):
/// no runs 306k/320k txn/s, 1 KiB 374k/357k, 4 KiB 421k/377k, 8 KiB 393k/390k
/// (docs/performance.md, "Runs").
pub const RUN_BYTES: usize = 4096;

/// The tail's state bit that stops reservations ([`Tail::seal`]); the bits below it are the
/// region's used bytes.
const SEALED: u64 = 1 << 63;

/// Bytes that hold whole frames: `bytes[..used]`. `bytes` is as long as its capacity and
/// zero-filled when allocated, so the bytes past `used` are initialised too.
pub(crate) struct Region {
    bytes: Vec<u8>,
    used: usize,
}

impl Region {
    pub fn with_capacity(capacity: usize) -> Region {
        Region {
            bytes: vec![0; capacity.max(1)],
            used: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.used
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// The used bytes. Only where no copy into them is under way (see [`CopyCounts`]).
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.used]
    }

    pub fn clear(&mut self) {
        self.used = 0;
    }
}

/// One shard of [`CopyCounts`]: the copies its threads have under way into reserved bytes,
/// and what they appended. Written by its own threads only (one, up to [`COPY_SHARDS`]
/// threads), on a line of its own; summed on read.
#[derive(Default)]
pub(crate) struct CopyShard {
    /// Copies under way: raised before a reservation, lowered (release) when its bytes are
    /// filled in, or at once if the reservation failed.
    pub copies: AtomicU32,
    /// Records appended since the log was opened.
    pub records: AtomicU64,
    /// Commit records appended since the log was opened.
    pub commits: AtomicU64,
    /// Commit records appended since the buffer was last taken (for group-commit statistics).
    pub commits_buffered: AtomicU64,
    /// This thread's run of reserved bytes (see [`Run`]).
    pub run: Run,
}

/// A thread's *run*: bytes of the current region it reserved with one compare-and-swap on the
/// tail and hands out to its page-redo records one after the other, with no shared write,
/// `[at, end)` in region offsets (empty: none). Only the shard's one thread uses it (threads
/// past [`COPY_SHARDS`] share shards and use none), with its copy count raised and the tail
/// seen open; a sealer closes every run ([`LogBuffer::close_runs`]) once the copies drained:
/// a run never outlives a seal, so it always lies in the current region. A run's unused
/// bytes are never fewer than a frame header, so that closing it can fill them with a
/// padding frame. Relaxed atomics: the copy count and the tail's state order the accesses.
#[derive(Default)]
pub(crate) struct Run {
    pub at: AtomicUsize,
    pub end: AtomicUsize,
    /// Bytes this run's closes filled with padding since the log was opened (one closer at a
    /// time, so a load and a store: no read-modify-write).
    pub padding: AtomicU64,
}

impl Run {
    /// Whether `len` bytes fit in the run and leave either nothing or room for a padding
    /// frame; returns their region offset.
    #[inline]
    pub fn fits(&self, len: usize) -> Option<usize> {
        let at = self.at.load(Ordering::Relaxed);
        let end = self.end.load(Ordering::Relaxed);
        let left = end.checked_sub(at + len)?;
        (left == 0 || left >= FRAME_HEADER_SIZE).then_some(at)
    }

    /// The bytes a new run of (at least) `run_bytes` must have to hold `len` and leave no
    /// unusable rest.
    pub fn bytes_for(len: usize, run_bytes: usize) -> usize {
        if len >= run_bytes || run_bytes - len >= FRAME_HEADER_SIZE {
            run_bytes.max(len)
        } else {
            len + FRAME_HEADER_SIZE
        }
    }

    /// Fills the run's unused bytes with a padding frame (`region` being the current region's
    /// start) and empties it. By the run's thread (copy count raised, tail open) or a sealer.
    ///
    /// # Safety
    ///
    /// `region` is the current region's first byte, the run lies in it (see [`Run`]), and no
    /// one else writes its unused bytes meanwhile.
    pub unsafe fn close(&self, region: *mut u8) {
        let at = self.at.load(Ordering::Relaxed);
        let end = self.end.load(Ordering::Relaxed);
        if at < end {
            // SAFETY: the caller's contract; `[at, end)` is reserved to this run, unused.
            unsafe { write_padding(std::slice::from_raw_parts_mut(region.add(at), end - at)) };
            let padded = self.padding.load(Ordering::Relaxed) + (end - at) as u64;
            self.padding.store(padded, Ordering::Relaxed);
        }
        self.at.store(0, Ordering::Relaxed);
        self.end.store(0, Ordering::Relaxed);
    }
}

/// Copies under way into the buffer, and the append counters, per thread shard: a thread
/// counts its copies and its records without meeting another. A sealer of the [`Tail`] waits
/// for every shard's copies to drain ([`CopyCounts::wait_idle`]).
pub(crate) struct CopyCounts {
    shards: Box<[CachePadded<CopyShard>]>,
    /// One past the highest shard that ever counted a copy: a wait looks no further, so that
    /// a writer on a one-thread run reads one line, not 64. Only grows; raised by a thread
    /// before its first reservation.
    used: AtomicUsize,
}

impl CopyCounts {
    pub fn new() -> CopyCounts {
        CopyCounts {
            shards: (0..COPY_SHARDS)
                .map(|_| CachePadded::new(CopyShard::default()))
                .collect(),
            used: AtomicUsize::new(0),
        }
    }

    /// This thread's shard.
    #[inline]
    pub fn mine(&self) -> &CopyShard {
        self.mine_exclusive().0
    }

    /// This thread's shard, and whether it is the thread's alone (the first [`COPY_SHARDS`]
    /// threads of the process have one each): only then may the thread keep a [`Run`] in it.
    #[inline]
    pub fn mine_exclusive(&self) -> (&CopyShard, bool) {
        let index = storage::shard::thread_index();
        let shard = index % COPY_SHARDS;
        if shard >= self.used.load(Ordering::Relaxed) {
            self.used.fetch_max(shard + 1, Ordering::SeqCst);
        }
        (&self.shards[shard], index < COPY_SHARDS)
    }

    fn in_use(&self) -> &[CachePadded<CopyShard>] {
        &self.shards[..self.used.load(Ordering::SeqCst)]
    }

    /// Returns once every copy counted before the call is done. Each shard is waited for
    /// until it is seen at zero once: with the tail sealed, a count raised later belongs to
    /// a reservation that fails, so nothing counted earlier is still being copied. A copy is a
    /// few hundred bytes, so the wait spins, yielding now and then for a copier that was
    /// descheduled.
    pub fn wait_idle(&self) {
        for shard in self.in_use() {
            let mut spins = 0u32;
            while shard.copies.load(Ordering::SeqCst) != 0 {
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Records appended, summed over the shards.
    pub fn records(&self) -> u64 {
        self.in_use()
            .iter()
            .map(|s| s.records.load(Ordering::Relaxed))
            .sum()
    }

    /// Bytes the runs' closes filled with padding, summed over the shards.
    pub fn padding(&self) -> u64 {
        self.in_use()
            .iter()
            .map(|s| s.run.padding.load(Ordering::Relaxed))
            .sum()
    }

    /// Bytes reserved to threads' runs and not yet used nor closed, summed over the shards.
    pub fn unused_in_runs(&self) -> u64 {
        self.in_use()
            .iter()
            .map(|s| {
                let end = s.run.end.load(Ordering::Relaxed);
                end.saturating_sub(s.run.at.load(Ordering::Relaxed)) as u64
            })
            .sum()
    }

    /// Commit records appended, summed over the shards.
    pub fn commits(&self) -> u64 {
        self.in_use()
            .iter()
            .map(|s| s.commits.load(Ordering::Relaxed))
            .sum()
    }

    /// The commits appended since the last take (exact only with the tail sealed).
    pub fn commits_buffered(&self) -> u64 {
        self.in_use()
            .iter()
            .map(|s| s.commits_buffered.load(Ordering::Relaxed))
            .sum()
    }

    /// The commits appended since the last take, and starts the count again. Only with the
    /// tail sealed and the copies drained: every counted commit is then in the sum.
    pub fn take_commits_buffered(&self) -> u64 {
        self.in_use()
            .iter()
            .map(|s| s.commits_buffered.swap(0, Ordering::Relaxed))
            .sum()
    }
}

/// Where the current region lies: set only while the tail is sealed, read by appenders
/// after they load an open tail (which the opening store releases).
struct Window {
    to: AtomicPtr<u8>,
    capacity: AtomicUsize,
    base: AtomicU64,
}

/// The reservation point of the log buffer: the used bytes of the current region (or
/// [`SEALED`]), on a cache line of its own, and the region's window on another, which only a
/// sealer writes, so appenders' caches keep it.
pub(crate) struct Tail {
    state: CachePadded<AtomicU64>,
    window: CachePadded<Window>,
}

/// Why [`Tail::try_reserve`] reserved nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Somebody holds the tail sealed: wait until it opens, then try again.
    Sealed,
    /// The region has no room: grow it, sealed.
    Full,
}

/// Bytes reserved: copy `len` bytes to `to`, then lower the copy counter that was raised for
/// them.
pub(crate) struct Reserved {
    pub lsn: Lsn,
    pub to: *mut u8,
    /// The region's used bytes with these.
    pub used: usize,
    /// The region's bytes past these (which [`prefetch_ahead`] may touch).
    pub room: usize,
}

impl Tail {
    /// A tail sealed on an empty window: [`Tail::open`] it on a buffer first.
    pub fn new() -> Tail {
        Tail {
            state: CachePadded::new(AtomicU64::new(SEALED)),
            window: CachePadded::new(Window {
                to: AtomicPtr::new(std::ptr::null_mut()),
                capacity: AtomicUsize::new(0),
                base: AtomicU64::new(0),
            }),
        }
    }

    /// Reserves `len` bytes without the latch, if the tail is open and the region has room.
    /// The caller has raised its copy count first (or runs alone): a sealer then waits for
    /// it, and the window cannot change under it.
    #[inline]
    pub fn try_reserve(&self, len: usize) -> Result<Reserved, Refused> {
        let mut state = self.state.load(Ordering::SeqCst);
        if state & SEALED != 0 {
            return Err(Refused::Sealed);
        }
        // Stable while the tail stays open and this thread's copy is counted.
        let capacity = self.window.capacity.load(Ordering::Relaxed);
        loop {
            let used = state as usize;
            let end = used + len;
            if end > capacity {
                return Err(Refused::Full);
            }
            match self.state.compare_exchange_weak(
                state,
                end as u64,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    let base = self.window.base.load(Ordering::Relaxed);
                    let to = self.window.to.load(Ordering::Relaxed);
                    return Ok(Reserved {
                        lsn: Lsn(base + used as u64),
                        // In bounds: `end <= capacity`.
                        to: to.wrapping_add(used),
                        used: end,
                        room: capacity - end,
                    });
                }
                Err(now) if now & SEALED != 0 => return Err(Refused::Sealed),
                Err(now) => state = now,
            }
        }
    }

    /// The tail's used bytes, the region's first byte and its base LSN, if the tail is open.
    /// The caller has raised its copy count first: the window then stays as read until the
    /// count goes down.
    #[inline]
    pub fn open_window(&self) -> Option<(usize, *mut u8, u64)> {
        let state = self.state.load(Ordering::SeqCst);
        if state & SEALED != 0 {
            return None;
        }
        Some((
            state as usize,
            self.window.to.load(Ordering::Relaxed),
            self.window.base.load(Ordering::Relaxed),
        ))
    }

    /// Returns once the tail is open (it may be sealed again by then). The caller's copy
    /// count must be down: the sealer may be waiting for it.
    pub fn wait_open(&self) {
        let mut spins = 0u32;
        while self.state.load(Ordering::Relaxed) & SEALED != 0 {
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Stops reservations and waits until the copies into reserved bytes are done; the
    /// buffer's `used` is then the tail's. Called with the buffer latch held; undone by
    /// [`Tail::open`].
    pub fn seal(&self, buffer: &mut LogBuffer, copies: &CopyCounts) {
        let state = self.state.fetch_or(SEALED, Ordering::SeqCst);
        debug_assert_eq!(state & SEALED, 0, "sealed twice");
        buffer.bytes.used = state as usize;
        copies.wait_idle();
    }

    /// Opens reservations on `buffer`'s region, from its `used` on. Called with the latch held,
    /// after [`Tail::seal`] (or at the start).
    pub fn open(&self, buffer: &mut LogBuffer) {
        self.window
            .to
            .store(buffer.bytes.bytes.as_mut_ptr(), Ordering::Relaxed);
        self.window
            .capacity
            .store(buffer.bytes.bytes.len(), Ordering::Relaxed);
        self.window.base.store(buffer.base, Ordering::Relaxed);
        self.state.store(buffer.bytes.used as u64, Ordering::SeqCst);
    }

    /// The LSN the next record will get. With the latch held (so the window is stable).
    pub fn end(&self) -> u64 {
        let used = self.state.load(Ordering::SeqCst) & !SEALED;
        self.window.base.load(Ordering::Relaxed) + used
    }
}

/// The latch-protected state of the log buffer, the tail's to change while it is sealed.
pub(crate) struct LogBuffer {
    /// LSN of the region's first byte: everything below it has been taken by a writer.
    pub base: u64,
    /// Whole frames reserved since the last take. Its `used` is the tail's while the tail
    /// is sealed, and stale while it is open.
    pub bytes: Region,
}

/// Bytes taken from the buffer by a writer.
pub(crate) struct Taken {
    pub base: u64,
}

impl LogBuffer {
    pub fn new(base: u64, capacity: usize) -> LogBuffer {
        LogBuffer {
            base,
            bytes: Region::with_capacity(capacity),
        }
    }

    /// The LSN the next record will get (tail sealed).
    #[inline]
    pub fn end(&self) -> u64 {
        self.base + self.bytes.used as u64
    }

    /// Whether `len` more bytes fit without growing the region.
    #[inline]
    pub fn has_room(&self, len: usize) -> bool {
        self.bytes.bytes.len() - self.bytes.used >= len
    }

    /// Makes room for `len` more bytes: a larger zeroed region holding the used bytes. Only
    /// with the tail sealed: the bytes move.
    #[cold]
    pub fn grow(&mut self, len: usize) {
        let capacity = (2 * self.bytes.bytes.len()).max(self.bytes.used + len);
        let mut bytes = vec![0; capacity];
        bytes[..self.bytes.used].copy_from_slice(self.bytes.as_slice());
        self.bytes.bytes = bytes;
    }

    /// Reserves `len` bytes (room for them made first: [`LogBuffer::has_room`]); returns the
    /// first one's LSN and where to copy them. Tail sealed.
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Reserved {
        debug_assert!(self.has_room(len));
        let at = self.bytes.used;
        self.bytes.used += len;
        Reserved {
            lsn: Lsn(self.base + at as u64),
            // In bounds: `has_room`. Derived from the vector's pointer without a reference to
            // its bytes, so copies into distinct reservations do not alias any reference.
            to: self.bytes.bytes.as_mut_ptr().wrapping_add(at),
            used: self.bytes.used,
            room: self.bytes.bytes.len() - self.bytes.used,
        }
    }

    /// Closes every thread's run ([`Run::close`]): their unused bytes become padding frames,
    /// so that the buffer holds whole frames. Tail sealed, copies drained.
    pub fn close_runs(&mut self, copies: &CopyCounts) {
        let region = self.bytes.bytes.as_mut_ptr();
        for shard in copies.in_use() {
            // SAFETY: sealed and drained, the runs lie in this region and no thread uses them.
            unsafe { shard.run.close(region) };
        }
    }

    /// Swaps the buffered bytes into `into` (which must be empty and no smaller) and advances
    /// `base` past them. Tail sealed.
    pub fn take(&mut self, into: &mut Region) -> Taken {
        debug_assert!(into.is_empty());
        std::mem::swap(into, &mut self.bytes);
        let taken = Taken { base: self.base };
        self.base += into.len() as u64;
        taken
    }

    /// The buffered bytes from `lsn` on, if `lsn` lies in the buffer. Tail sealed.
    pub fn bytes_from(&self, lsn: u64) -> Option<&[u8]> {
        if lsn < self.base || lsn >= self.end() {
            return None;
        }
        Some(&self.bytes.as_slice()[(lsn - self.base) as usize..])
    }

    /// Checks that the buffer holds whole, intact frames. Tail sealed.
    pub fn check_invariants(&self) {
        let bytes = self.bytes.as_slice();
        let mut at = 0;
        while at < bytes.len() {
            match check_frame(&bytes[at..]) {
                FrameCheck::Complete(len) => at += len,
                other => panic!(
                    "log buffer holds a bad frame at {}: {other:?}",
                    self.base + at as u64
                ),
            }
        }
    }
}

/// After an append of `len` bytes at `reserved`, starts fetching for writing the lines as far
/// beyond its end as [`WRITE_AHEAD`], as many as were just appended. Each line of the buffer
/// is so fetched once, some appends before it is written: the buffer (a megabyte or two,
/// filled once between takes) is cold, and without this the stores of an append wait for
/// their lines. Only memory the region owns (`reserved.room` past the end) is touched.
#[inline]
pub(crate) fn prefetch_ahead(reserved: &Reserved, len: usize) {
    prefetch_window(reserved.to, len, reserved.room, WRITE_AHEAD);
}

/// How far ahead of a record in a run the run's bytes are fetched for writing: the run's
/// first [`RUN_PREFETCH`] bytes are fetched as it begins, its later ones this far ahead of
/// its records as they come, so that a long run is not fetched all at once.
pub(crate) const RUN_AHEAD: usize = 1024;

/// The bytes fetched for writing as a run begins (see [`RUN_AHEAD`]): a 1 KiB run and the
/// next one, or the start of a longer run.
pub(crate) const RUN_PREFETCH: usize = 2048;

/// Fetches for writing the bytes that come within `ahead` bytes of the end of the `len`
/// bytes at `to` with this append, clipped to the `room` bytes past them: a window sliding
/// ahead of the appends, each append fetching only the lines that newly enter it.
#[inline]
pub(crate) fn prefetch_window(to: *mut u8, len: usize, room: usize, ahead: usize) {
    let upto = ahead.min(room);
    let from = ahead.saturating_sub(len);
    if from < upto {
        // `to + len` is the reservation's end; the range lies within `room` past it.
        let end = to.wrapping_add(len);
        storage::prefetch::range_for_write(end.wrapping_add(from), upto - from);
    }
}
